//! The child shop's start, against stand-in executables (shell scripts) that die, say nothing,
//! report a failure or record what they were given.

use super::*;
use crate::inventory::Strategy;
use crate::store::Backend;

/// A shell script `name` in `dir` that runs `body` (`$5` is the readiness descriptor, written through `/proc/self/fd/$5`: dash takes one-digit descriptors only).
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn cell() -> Cell {
    Cell {
        strategy: Strategy::RedisLua,
        backend: Backend::Postgres,
        database_url: "postgres://postgres:hunter22@127.0.0.1:5432/nowhere".into(),
    }
}

async fn start(exe: &Path, log: PathBuf) -> anyhow::Result<ChildShop> {
    let knobs = ShopKnobs::default();
    let replica = Some("postgres://r:replica-pw@127.0.0.1:5433/x");
    ChildShop::start_with(
        exe,
        &cell(),
        "redis://127.0.0.1:6379",
        "p",
        &knobs,
        replica,
        log,
    )
    .await
}

#[tokio::test]
async fn a_child_that_exits_before_reporting_is_named_with_its_exit_and_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let exe = script(
        dir.path(),
        "dies",
        "echo 'error: no such thing' >&2\nexit 7",
    );
    let log = dir.path().join("shop.log");

    let e = start(&exe, log.clone())
        .await
        .err()
        .expect("no shop started");

    let e = format!("{e:#}");
    assert!(
        e.contains("exited (exit 7) before it said it was ready"),
        "{e}"
    );
    assert!(e.contains("error: no such thing"), "{e}");
    assert!(
        e.contains(&log.display().to_string()),
        "the log is named: {e}"
    );
}

#[tokio::test]
async fn a_silent_child_is_killed_after_the_wait_naming_its_log() {
    let dir = tempfile::tempdir().unwrap();
    let exe = script(dir.path(), "silent", "exec sleep 600");
    let log = dir.path().join("shop.log");
    let launch = Launch {
        exe,
        config: ServeConfig::new(
            Strategy::Naive,
            "127.0.0.1:0".parse().unwrap(),
            "postgres://127.0.0.1/x",
            "redis://127.0.0.1",
            ShopKnobs::default(),
        ),
        log: log.clone(),
        ready_within: Duration::from_millis(300),
    };

    let e = launch.spawn("127.0.0.1:0".parse().unwrap()).await.err();

    let e = format!("{:#}", e.expect("no shop started"));
    assert!(
        e.contains("said nothing on its readiness channel within 300ms (killed)"),
        "{e}"
    );
    assert!(e.contains(&log.display().to_string()), "{e}");
}

#[tokio::test]
async fn a_child_reporting_an_unreachable_server_is_relayed_as_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let report = r#"{"state":"failed","error":"PostgreSQL at 127.0.0.1:1 refused","exit_code":3,"version":"0.0.0","pid":1}"#;
    let body = format!("cat >/dev/null\necho '{report}' > /proc/self/fd/$5\nexit 3");
    let exe = script(dir.path(), "unreachable", &body);

    let e = start(&exe, dir.path().join("shop.log"))
        .await
        .err()
        .unwrap();

    assert!(
        e.chain().any(|c| c.downcast_ref::<Unreachable>().is_some()),
        "{e:#}"
    );
    assert!(format!("{e:#}").contains("127.0.0.1:1 refused"), "{e:#}");
}

#[tokio::test]
async fn the_child_gets_its_settings_on_stdin_and_none_in_argv_and_reports_its_version() {
    // Arrange: a stand-in that records its argv and its stdin, then reports ready.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let ready = r#"{"state":"ready","address":"127.0.0.1:4242","version":"9.9.9","pid":1}"#;
    let body =
        format!("echo \"$@\" > {d}/argv\ncat > {d}/stdin\necho '{ready}' > /proc/self/fd/$5\nexec sleep 600");
    let exe = script(dir.path(), "records", &body);

    // Act
    let shop = start(&exe, dir.path().join("shop.log")).await.unwrap();
    let argv = std::fs::read_to_string(dir.path().join("argv")).unwrap();
    let stdin = std::fs::read_to_string(dir.path().join("stdin")).unwrap();
    shop.stop().await;

    // Assert
    assert_eq!(shop.base_url, "http://127.0.0.1:4242");
    assert_eq!(shop.version, "9.9.9");
    assert!(argv.starts_with("serve --config - --ready-fd "), "{argv}");
    for secret in [
        "hunter22",
        "replica-pw",
        "redis://",
        shop.admin_token.as_str(),
    ] {
        assert!(!argv.contains(secret), "{secret} in argv: {argv}");
    }
    let told = ServeConfig::from_json(&stdin).unwrap();
    assert_eq!(told.database_url, cell().database_url);
    assert_eq!(told.admin_token.as_deref(), Some(shop.admin_token.as_str()));
    assert_eq!(
        told.replica_database_url.as_deref(),
        Some("postgres://r:replica-pw@127.0.0.1:5433/x")
    );
    assert_eq!(told.redis_prefix, "p");
    assert_eq!(
        told.trusted_proxies,
        vec!["127.0.0.1/32".parse::<ipnet::IpNet>().unwrap()]
    );
}
