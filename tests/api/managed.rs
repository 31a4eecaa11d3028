//! Managed servers (`oversell::testing::services::managed`): a set starts each server it finds, each
//! answers, survives a crash (kill -9 then a start on the same data) and a clean restart, and
//! nothing of it (process, data directory) is left when the set is dropped.

use oversell::testing::services::managed::process;
use oversell::testing::services::managed::{binaries, ManagedSet, ServerKind, ServerOptions};
use sqlx::Connection;

/// The kinds whose binaries this machine has (a test of a kind that is not installed says so;
/// under CI, where every kind must be installed, it fails instead, like the Chromium check).
pub fn installed() -> Vec<ServerKind> {
    let found: Vec<ServerKind> = ServerKind::ALL
        .into_iter()
        .filter(|k| binaries::find(*k).is_some())
        .collect();
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    for k in ServerKind::ALL {
        if !found.contains(&k) {
            assert!(
                !ci,
                "CI is set and {}'s server binaries are not installed: the managed-server tests \
                 would pass without testing (install the server package, see \
                 docs/src/requirements.md)",
                k.as_str()
            );
            eprintln!(
                "SKIPPED managed {}: its binaries are not installed",
                k.as_str()
            );
        }
    }
    found
}

async fn write_and_read(kind: ServerKind, url: &str, value: i64) -> i64 {
    match kind {
        ServerKind::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query("CREATE TABLE IF NOT EXISTS t (v BIGINT)")
                .execute(&mut c)
                .await
                .unwrap();
            sqlx::query("INSERT INTO t VALUES ($1)")
                .bind(value)
                .execute(&mut c)
                .await
                .unwrap();
            sqlx::query_scalar("SELECT SUM(v)::BIGINT FROM t")
                .fetch_one(&mut c)
                .await
                .unwrap()
        }
        ServerKind::Mysql => {
            let mut c = sqlx::MySqlConnection::connect(url).await.unwrap();
            sqlx::query("CREATE TABLE IF NOT EXISTS t (v BIGINT)")
                .execute(&mut c)
                .await
                .unwrap();
            sqlx::query("INSERT INTO t VALUES (?)")
                .bind(value)
                .execute(&mut c)
                .await
                .unwrap();
            sqlx::query_scalar("SELECT CAST(SUM(v) AS SIGNED) FROM t")
                .fetch_one(&mut c)
                .await
                .unwrap()
        }
        ServerKind::Redis => {
            let client = redis::Client::open(url).unwrap();
            let mut c = client.get_multiplexed_async_connection().await.unwrap();
            redis::cmd("INCRBY")
                .arg("t")
                .arg(value)
                .query_async(&mut c)
                .await
                .unwrap()
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_set_starts_crashes_restarts_and_leaves_nothing() {
    let kinds = installed();
    assert!(
        !kinds.is_empty(),
        "no server binaries at all on this machine"
    );
    let set = ManagedSet::new().unwrap();
    let root = set.root().to_path_buf();
    let mut pids = Vec::new();
    for kind in &kinds {
        let s = set.start(*kind, ServerOptions::default()).await.unwrap();
        assert!(s.data_dir().starts_with(&root));
        assert!(!s.config().is_empty(), "{kind:?} records its configuration");
        let url = match kind {
            ServerKind::Redis => s.url(),
            ServerKind::Postgres => {
                // A database of its own, as the store makes one.
                let mut c = sqlx::PgConnection::connect(&s.database_url("postgres"))
                    .await
                    .unwrap();
                sqlx::query("CREATE DATABASE smoke")
                    .execute(&mut c)
                    .await
                    .unwrap();
                s.database_url("smoke")
            }
            ServerKind::Mysql => {
                let mut c = sqlx::MySqlConnection::connect(&s.url()).await.unwrap();
                sqlx::query("CREATE DATABASE smoke")
                    .execute(&mut c)
                    .await
                    .unwrap();
                s.database_url("smoke")
            }
        };
        assert_eq!(write_and_read(*kind, &url, 1).await, 1);
        let first = s.pid().unwrap();
        // A crash: what was committed survives recovery (Redis here has no persistence:
        // it comes back empty, as configured).
        s.kill9();
        assert!(s.pid().is_none());
        assert!(!process::alive(first) || is_zombie(first));
        s.start_again().await.unwrap();
        let after_crash = write_and_read(*kind, &url, 2).await;
        let expected = if *kind == ServerKind::Redis { 2 } else { 3 };
        assert_eq!(after_crash, expected, "{kind:?} after a crash");
        s.restart().await.unwrap();
        let pid = s.pid().unwrap();
        assert_ne!(pid, first);
        pids.push(pid);
        let after_restart = write_and_read(*kind, &url, 4).await;
        // Redis runs without persistence (`save ""`, no AOF): a restart starts it empty.
        let expected = if *kind == ServerKind::Redis { 4 } else { 7 };
        assert_eq!(after_restart, expected, "{kind:?} after a clean restart");
    }
    set.shutdown().await;
    assert!(!root.exists(), "{} is removed", root.display());
    for pid in pids {
        assert!(
            !process::alive(pid) || is_zombie(pid),
            "server {pid} is gone"
        );
    }
}

/// A reaped-late child shows as a zombie; it holds no port and no file.
pub fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[test]
fn the_test_servers_are_managed_when_asked_and_only_then_for_kinds_not_configured() {
    let s = crate::helpers::servers();
    let forced = std::env::var("OVERSELL_TEST_SERVICES").is_ok_and(|v| v == "managed");
    let managed: Vec<String> = s
        .managed
        .as_ref()
        .map(|set| set.servers().iter().map(|m| m.url()).collect())
        .unwrap_or_default();
    for (kind, url) in [
        (ServerKind::Postgres, &s.postgres),
        (ServerKind::Mysql, &s.mysql),
        (ServerKind::Redis, &s.redis),
    ] {
        if forced {
            assert!(managed.contains(url), "{kind:?} is managed: {url}");
        }
        if managed.contains(url) {
            let set = s.managed.as_ref().unwrap();
            let server = set.get(kind).expect("the managed server of that kind");
            assert_eq!(&server.url(), url);
            assert!(server.pid().is_some(), "{kind:?} runs");
        }
    }
}
