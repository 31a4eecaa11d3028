//! The reference shop on an open network (#43): a slowloris is closed within the header-read
//! timeout, a body trickled a byte at a time gets 408 within the body timeout, and the
//! connection cap keeps the connections one client opens from starving the rest beyond it (the
//! next waits until one closes).

use crate::helpers::*;
use oversell::testing::inventory::Strategy;
use oversell::testing::shop::listener::Limits;
use oversell::testing::store::Backend;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The test shop with `limits`.
async fn shop(limits: Limits) -> TestApp {
    let mut config = test_config(Strategy::Naive, Backend::Postgres);
    config.limits = limits;
    spawn_with(config).await
}

fn addr(app: &TestApp) -> String {
    app.address.trim_start_matches("http://").to_string()
}

#[tokio::test]
async fn a_slowloris_trickling_its_headers_is_closed_within_the_header_read_timeout() {
    let app = shop(Limits {
        max_connections: 64,
        header_read_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(30),
        ..Limits::default()
    })
    .await;
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let started = Instant::now();

    // A header line every 200 ms, never the blank line that ends them.
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(8) {
        if s.write_all(b"X-Slow: 1\r\n").await.is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 512];
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => {
                closed = true;
                break;
            }
            // hyper answers 408 before it closes.
            Ok(Ok(_)) => {}
            Err(_) => {}
        }
    }
    let took = started.elapsed();
    app.teardown().await;
    assert!(closed, "the slowloris was still connected after {took:?}");
    assert!(took < Duration::from_secs(5), "closed only after {took:?}");
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_until_one_closes() {
    let app = shop(Limits {
        max_connections: 2,
        header_read_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(30),
        ..Limits::default()
    })
    .await;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let health = format!("{}/healthz", app.address);
    // The shop answers (and keeps nothing open: no idle pooling).
    assert!(client
        .get(&health)
        .send()
        .await
        .unwrap()
        .status()
        .is_success());

    // Two silent connections take the cap.
    let held = [
        TcpStream::connect(addr(&app)).await.unwrap(),
        TcpStream::connect(addr(&app)).await.unwrap(),
    ];
    let blocked = client
        .get(&health)
        .timeout(Duration::from_millis(700))
        .send()
        .await;
    // Their header-read timeout frees the cap; then the request is served.
    let served = client
        .get(&health)
        .timeout(Duration::from_secs(15))
        .send()
        .await;
    drop(held);
    app.teardown().await;
    assert!(
        blocked.is_err(),
        "a third connection was served: {blocked:?}"
    );
    assert!(
        served.is_ok_and(|r| r.status().is_success()),
        "served once the silent ones were closed"
    );
}

#[tokio::test]
async fn a_body_trickled_a_byte_at_a_time_gets_408_within_the_body_timeout() {
    let app = shop(Limits {
        body_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(30),
        ..Limits::default()
    })
    .await;
    let mut s = TcpStream::connect(addr(&app)).await.unwrap();
    s.write_all(
        b"POST /api/orders HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Content-Length: 200\r\n\r\n{",
    )
    .await
    .unwrap();
    let started = Instant::now();

    // A space every 200 ms: never idle, never done.
    let mut answer = Vec::new();
    while started.elapsed() < Duration::from_secs(8) && answer.is_empty() {
        if s.write_all(b" ").await.is_err() {
            break;
        }
        let mut buf = [0u8; 1024];
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await
        {
            answer.extend_from_slice(&buf[..n]);
            if n == 0 {
                break;
            }
        }
    }
    let took = started.elapsed();
    app.teardown().await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.starts_with("HTTP/1.1 408") && answer.contains("request_timeout"),
        "after {took:?}: {answer:?}"
    );
    assert!(
        took < Duration::from_secs(5),
        "answered only after {took:?}"
    );
}
