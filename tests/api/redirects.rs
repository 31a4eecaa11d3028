//! The harness's own loopback guard holds against redirects: a loopback stub that answers every
//! request with `307 Location: http://127.0.0.2:<port>/...` never gets the harness (set-up,
//! buyers, bots, oracle) to the second loopback address, which counts every connection.

use crate::helpers::*;
use axum::http::{header, StatusCode, Uri};
use axum::response::IntoResponse;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A listener on 127.0.0.2 that counts connections; its port.
async fn second_address() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(AtomicUsize::new(0));
    let counted = seen.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            drop(conn);
        }
    });
    (port, seen)
}

/// A stub on 127.0.0.1 that redirects every request to the same path on 127.0.0.2:`port`.
async fn redirecting_stub(port: u16) -> String {
    let app = axum::Router::new().fallback(move |uri: Uri| async move {
        let to = format!("http://127.0.0.2:{port}{uri}");
        (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]).into_response()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

async fn attack(base: &str, scenario: &str, out: &std::path::Path, extra: &[&str]) -> CliRun {
    against("attack", base, scenario, out, extra).await
}

#[tokio::test]
async fn a_redirecting_stub_never_sends_the_harness_to_another_loopback_address() {
    // Arrange
    let (port, seen) = second_address().await;
    let base = redirecting_stub(port).await;
    let tmp = tempfile::tempdir().unwrap();
    let stock_only = std::fs::read_to_string("scenarios/rehearsal-stock-only.toml").unwrap();
    let at = stock_only.find("[target.oracle]").unwrap();
    let no_setup = stock_only[..at].replace(
        r#"setup = { method = "POST", path = "/stock/reset?amount={stock}" }"#,
        "",
    );
    let no_setup_file = tmp.path().join("no-setup.toml");
    std::fs::write(&no_setup_file, no_setup).unwrap();

    // Act: the set-up request; the buyers and bots; the oracle.
    let setup = attack(
        &base,
        "scenarios/rehearsal-example.toml",
        &tmp.path().join("a"),
        &[],
    )
    .await;
    let buyers = attack(
        &base,
        no_setup_file.to_str().unwrap(),
        &tmp.path().join("b"),
        &[],
    )
    .await;
    let oracle = attack(
        &base,
        no_setup_file.to_str().unwrap(),
        &tmp.path().join("c"),
        &["--oracle-http", "/stock", "--stock-field", "current_stock"],
    )
    .await;

    // Assert
    assert_eq!(setup.code, 2, "{}", setup.both());
    assert!(
        setup.stderr.contains("setting up the sale") && setup.stderr.contains("307"),
        "{}",
        setup.both()
    );
    assert_eq!(
        buyers.code,
        1,
        "every answer is an unclassified redirect: {}",
        buyers.both()
    );
    let r = &only_report(&tmp.path().join("b"))["runs"][0];
    assert_eq!(r["requests"]["order"]["outcomes"]["redirect"], 300, "{r}");
    assert!(
        buyers.stdout.contains("the harness follows no redirect"),
        "{}",
        buyers.both()
    );
    assert_eq!(oracle.code, 2, "{}", oracle.both());
    assert!(oracle.stderr.contains("answered 307"), "{}", oracle.both());
    assert_eq!(
        seen.load(Ordering::SeqCst),
        0,
        "127.0.0.2 received no connection"
    );
}
