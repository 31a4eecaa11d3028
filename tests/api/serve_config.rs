//! `oversell serve --config -` and `--ready-fd`, through the real binary: the shop takes its
//! whole configuration as one JSON document on stdin, reports its address, version and runtime
//! workers (or why it stopped, with its exit code) as one line on the descriptor it is given,
//! and refuses a flag written beside the document.

use crate::helpers::{drop_database, fresh_db_url, oversell_cli, redis_url};
use oversell::testing::inventory::Strategy;
use oversell::testing::shop::ready::{Readiness, ReadyPipe};
use oversell::testing::shop::{workers, ServeConfig, ShopKnobs};
use oversell::testing::store::Backend;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// `oversell serve --config - --ready-fd N` fed `config`; its readiness report.
async fn serve(config: &ServeConfig) -> (tokio::process::Child, Readiness) {
    let pipe = ReadyPipe::new().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"));
    let fd = pipe.hand_to(&mut cmd);
    let mut child = cmd
        .args(["serve", "--config", "-", "--ready-fd", &fd.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("oversell serve starts");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(config.to_json().as_bytes()).await.unwrap();
    drop(stdin);
    let report = pipe.wait(Duration::from_secs(120)).await;
    (child, report.expect("a readiness report"))
}

#[tokio::test]
async fn a_shop_given_its_config_on_stdin_reports_its_address_and_version_on_its_channel() {
    // Arrange
    let db = fresh_db_url(Backend::Postgres);
    let config = ServeConfig {
        redis_prefix: format!("serve-config-{}", std::process::id()),
        ..ServeConfig::new(
            Strategy::ForUpdate,
            "127.0.0.1:0".parse().unwrap(),
            &db,
            &redis_url(),
            ShopKnobs::default(),
        )
    };

    // Act
    let (mut child, report) = serve(&config).await;
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let _ = tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut line)).await;
    let Readiness::Ready {
        address,
        version,
        workers,
        ..
    } = report
    else {
        panic!("not ready: {report:?}")
    };
    let health = reqwest::get(format!("http://{address}/healthz")).await;
    child.kill().await.unwrap();
    let _ = child.wait().await;
    drop_database(&db).await;

    // Assert
    assert!(
        address.ip().is_loopback() && address.port() != 0,
        "{address}"
    );
    assert_eq!(version, env!("CARGO_PKG_VERSION"));
    assert_eq!(
        workers,
        workers::cores().saturating_sub(1).max(1),
        "0 asked, its database on loopback: a core left to the servers"
    );
    assert!(health.unwrap().status().is_success());
    assert_eq!(
        line.trim(),
        format!("oversell shop listening on http://{address}"),
        "stdout still says it for a person"
    );
}

#[tokio::test]
async fn a_shop_asked_for_its_worker_threads_runs_and_reports_that_many() {
    // Arrange
    let db = fresh_db_url(Backend::Postgres);
    let config = ServeConfig::new(
        Strategy::Naive,
        "127.0.0.1:0".parse().unwrap(),
        &db,
        &redis_url(),
        ShopKnobs {
            worker_threads: 3,
            ..ShopKnobs::default()
        },
    );

    // Act
    let (mut child, report) = serve(&config).await;
    child.kill().await.unwrap();
    let _ = child.wait().await;
    drop_database(&db).await;

    // Assert
    let Readiness::Ready { workers, .. } = report else {
        panic!("not ready: {report:?}")
    };
    assert_eq!(workers, 3);
}

#[tokio::test]
async fn a_shop_whose_database_is_unreachable_reports_why_and_exit_3_on_its_channel() {
    // Arrange: nothing listens on port 1.
    let config = ServeConfig::new(
        Strategy::Naive,
        "127.0.0.1:0".parse().unwrap(),
        "postgres://postgres:hunter22@127.0.0.1:1/nowhere",
        &redis_url(),
        ShopKnobs::default(),
    );

    // Act
    let (mut child, report) = serve(&config).await;
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("the shop exits")
        .unwrap();

    // Assert
    let Readiness::Failed {
        error, exit_code, ..
    } = report
    else {
        panic!("reported ready: {report:?}")
    };
    assert_eq!(exit_code, 3, "{error}");
    assert_eq!(status.code(), Some(3));
    assert!(error.contains("127.0.0.1:1"), "{error}");
    assert!(!error.contains("hunter22"), "{error}");
}

#[tokio::test]
async fn a_flag_beside_a_config_document_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("shop.json");
    let config = ServeConfig::new(
        Strategy::Naive,
        "127.0.0.1:0".parse().unwrap(),
        "postgres://127.0.0.1:1/x",
        "redis://127.0.0.1:1",
        ShopKnobs::default(),
    );
    std::fs::write(&file, config.to_json()).unwrap();
    let file = file.to_str().unwrap();

    let beside = oversell_cli(&["serve", "--config", file, "--pool-size", "3"], &[]).await;
    let broken = oversell_cli(&["serve", "--config", "/nonexistent/shop.json"], &[]).await;

    assert_eq!(beside.code, 2, "{}", beside.both());
    assert!(
        beside.stderr.contains("--pool-size") && beside.stderr.contains("--config"),
        "{}",
        beside.both()
    );
    assert_eq!(broken.code, 2, "{}", broken.both());
    assert!(
        broken.stderr.contains("/nonexistent/shop.json"),
        "{}",
        broken.both()
    );
}

#[test]
fn the_books_config_example_is_a_serve_config() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/running/cli.md"),
    )
    .unwrap();
    let after = page
        .split("**`serve --config FILE|-`**")
        .nth(1)
        .expect("the book describes serve --config");
    let example = after
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("with an example");

    let config = ServeConfig::from_json(example).unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(config.strategy, Strategy::RedisLua);
    assert_eq!(config.limits.idle_timeout, Duration::from_secs(60));
    assert_eq!(config.knobs.work, Duration::from_millis(1));
}
