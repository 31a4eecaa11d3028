//! The reference shop on an open network (#43): a slowloris is closed within the header-read
//! timeout, and the connection cap keeps the connections one client opens from starving the
//! rest beyond it (the next waits until one closes).

use crate::helpers::*;
use oversell::inventory::Strategy;
use oversell::shop::listener::Limits;
use oversell::store::Backend;
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
