//! One guard for every outbound address (#58): the driver's own parameters (`?host=`,
//! `?hostaddr=`) took a `[watch]` database, and `--oracle-sql`, to another address past the
//! loopback guard, which only read the URL's host; a listener there got the startup packet and,
//! on every retry, the password in clear text. The guard now judges the address the driver will
//! use; the listener here, on an address of the machine that is not loopback (a bridge of the
//! test's own network namespace: no packet leaves the machine), is never reached.

use super::{leaks, measured, seeded, stock_scenario, stock_shop};
use crate::netns::Hosts;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A listener on `addr` counting the connections it accepts (and reading what they send).
async fn spy(addr: std::net::Ipv4Addr) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind((addr, 0)).await.unwrap();
    let at = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = tokio::io::AsyncReadExt::read(&mut s, &mut buf).await;
            });
        }
    });
    (at, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_database_or_oracle_url_whose_driver_parameters_point_elsewhere_reaches_nothing() {
    // Arrange: a spy on another address of this machine, and URLs whose host is loopback but
    // whose parameters send the driver to the spy.
    let Some(hosts) = Hosts::make(1) else { return };
    let (spy_at, seen) = spy(hosts.gateway).await;
    let (base, shop) = stock_shop(axum::Router::new()).await;
    let pw = seeded("pw-guard-");
    let (ip, port) = (spy_at.ip().to_string(), spy_at.port().to_string());
    let elsewhere = [
        format!("postgres://postgres:{pw}@127.0.0.1:5432/db?host={ip}&port={port}"),
        format!("postgres://postgres:{pw}@127.0.0.1:5432/db?hostaddr={ip}&port={port}"),
        format!("mysql://root:{pw}@localhost:3306/db?host={ip}"),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out = out.to_str().unwrap();

    for url in &elsewhere[..2] {
        // Act: as a [watch] gauge's database, and as --oracle-sql.
        let watch = format!("[watch.q]\nsql = \"SELECT 1\"\ndatabase = \"{url}\"\n");
        let file = stock_scenario(tmp.path(), &[], &watch);
        let as_watch = measured(
            "a [watch] database with ?host= elsewhere",
            &[
                "attack",
                "--target",
                &base,
                "--scenario",
                &file,
                "--out",
                out,
                "--quiet",
            ],
            &[],
        )
        .await;
        let file = stock_scenario(tmp.path(), &[], "");
        let as_oracle = measured(
            "--oracle-sql with ?host= elsewhere",
            &[
                "attack",
                "--target",
                &base,
                "--scenario",
                &file,
                "--out",
                out,
                "--quiet",
                "--oracle-sql",
                url,
                "--sold-query",
                "SELECT 1",
            ],
            &[],
        )
        .await;

        // Assert: refused before anything is sent, naming the address the driver would use,
        // never the password.
        for run in [&as_watch.run, &as_oracle.run] {
            assert_eq!(run.code, 2, "{url}: {}", run.both());
            assert!(
                run.stderr.contains(&format!("{ip}:{port}")),
                "names the address: {}",
                run.both()
            );
            assert!(run.stderr.contains("--allow-remote"), "{}", run.both());
        }
        let written = std::path::Path::new(out);
        assert_eq!(leaks(written, &as_watch.run, &[&pw]), Vec::<String>::new());
        assert_eq!(leaks(written, &as_oracle.run, &[&pw]), Vec::<String>::new());
    }
    // MySQL has no ?host=: its URL's host is what it connects to, and it is loopback.
    let e = oversell::testing::guard::endpoint(&elsewhere[2]).unwrap();
    assert_eq!(e.to_string(), "localhost:3306");
    assert_eq!(seen.load(Ordering::SeqCst), 0, "the spy was never reached");
    assert_eq!(shop.seen(), 0, "nor the shop");
}

#[test]
fn the_guard_judges_the_address_each_driver_will_use_sockets_included() {
    use oversell::testing::guard::{check_host, endpoint, Endpoint, TargetError, Use};
    let tcp = |h: &str, p: u16| Endpoint::Tcp {
        host: h.into(),
        port: p,
    };
    let cases = [
        (
            "postgres://u:p@127.0.0.1/db?host=192.0.2.2&port=18766",
            tcp("192.0.2.2", 18766),
        ),
        (
            "postgres://u:p@127.0.0.1/db?hostaddr=192.0.2.2",
            tcp("192.0.2.2", 5432),
        ),
        ("postgresql://u@[::1]:6543/db", tcp("::1", 6543)),
        ("mysql://u:p@127.0.0.1:3307/db", tcp("127.0.0.1", 3307)),
        ("redis://:p@127.0.0.1:6380/0", tcp("127.0.0.1", 6380)),
        ("http://127.0.0.1:9/metrics", tcp("127.0.0.1", 9)),
        (
            "postgres://u@localhost/db?host=/var/run/postgresql",
            Endpoint::Unix("/var/run/postgresql/.s.PGSQL.5432".into()),
        ),
        (
            "mysql://u@localhost/db?socket=/tmp/m.sock",
            Endpoint::Unix("/tmp/m.sock".into()),
        ),
        (
            "redis+unix:///tmp/r.sock",
            Endpoint::Unix("/tmp/r.sock".into()),
        ),
    ];
    for (url, want) in &cases {
        assert_eq!(&endpoint(url).unwrap(), want, "{url}");
    }
    // A socket on this machine is no other address; a parameter naming one is.
    assert!(check_host(Use::Watch, "redis+unix:///tmp/r.sock", false).is_ok());
    let e = check_host(Use::Database, cases[0].0, false).unwrap_err();
    assert!(
        matches!(&e, TargetError::Remote { host, .. } if host == "192.0.2.2:18766"),
        "{e}"
    );
    // A URL the driver cannot read is refused without its password.
    let e = check_host(
        Use::Database,
        "postgres://postgres:PW/slash9@127.0.0.1:5432/db",
        false,
    )
    .unwrap_err()
    .to_string();
    assert!(!e.contains("slash9") && e.contains("postgres:***@"), "{e}");
}
