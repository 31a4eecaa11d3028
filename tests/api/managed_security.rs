//! Managed servers no local user can take over (#43): the two attacks, reproduced.
//!
//! - PostgreSQL was initialised with `initdb -A trust`: any local user logged in as the
//!   superuser without a password (and ran `COPY … TO PROGRAM`); MariaDB's root and Redis had
//!   no password either. Every managed server now asks for its random password, which is on no
//!   command line and in no log.
//! - The watchdog SIGKILLed the process group of any `*.pid` file in the root, which the
//!   servers' user could write. It now kills only what the harness told it, and the root is the
//!   harness's own.

use crate::helpers::long_smoke;
use crate::managed::installed;
use oversell::testing::services::managed::{process, ManagedSet, ServerKind, ServerOptions};
use sqlx::Connection;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

/// Logs in to `kind` at `url`, or says why not.
async fn login(kind: ServerKind, url: &str) -> Result<(), String> {
    match kind {
        ServerKind::Postgres => sqlx::PgConnection::connect(&format!("{url}/postgres"))
            .await
            .map(drop)
            .map_err(|e| e.to_string()),
        ServerKind::Mysql => sqlx::MySqlConnection::connect(url)
            .await
            .map(drop)
            .map_err(|e| e.to_string()),
        ServerKind::Redis => {
            let client = redis::Client::open(url).map_err(|e| e.to_string())?;
            let mut c = client
                .get_multiplexed_async_connection()
                .await
                .map_err(|e| e.to_string())?;
            redis::cmd("PING")
                .query_async::<String>(&mut c)
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        }
    }
}

/// The URL of the server on `port` with no password.
fn without_password(kind: ServerKind, port: u16) -> String {
    match kind {
        ServerKind::Postgres => format!("postgres://postgres@127.0.0.1:{port}"),
        ServerKind::Mysql => format!("mysql://root@127.0.0.1:{port}"),
        ServerKind::Redis => format!("redis://127.0.0.1:{port}"),
    }
}

/// Every file under `dir` as text (what the servers and the harness wrote there).
fn texts(dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(texts(&p));
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((
                p.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_managed_server_asks_every_login_for_its_random_password_which_no_argv_or_log_holds() {
    let kinds = installed();
    assert!(
        !kinds.is_empty(),
        "no server binaries at all on this machine"
    );
    let set = ManagedSet::new().unwrap();
    let root = set.root().to_path_buf();
    for kind in kinds {
        let s = set.start(kind, ServerOptions::default()).await.unwrap();

        let with = login(kind, &s.url()).await;
        let without = login(kind, &without_password(kind, s.port())).await;
        let wrong = login(kind, &s.url().replace(s.password(), "not-the-password")).await;

        let pid = s.pid().unwrap();
        let argv: Vec<String> = std::iter::once(pid)
            .chain(process::descendants(pid))
            .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .collect();
        let data_mode = std::fs::metadata(s.data_dir())
            .unwrap()
            .permissions()
            .mode();
        assert!(with.is_ok(), "{kind:?} with its URL: {with:?}");
        assert!(
            without.is_err(),
            "{kind:?} let a login in without a password"
        );
        assert!(wrong.is_err(), "{kind:?} let a wrong password in");
        assert_eq!(s.password().len(), 24, "a random password");
        for a in &argv {
            assert!(
                !a.contains(s.password()),
                "{kind:?}: the password is in argv: {a}"
            );
        }
        assert_eq!(
            data_mode & 0o077,
            0,
            "{kind:?}: data directory {data_mode:o}"
        );
    }
    // Redis reads its password from its configuration file each start: the servers' user's
    // alone. Nothing else the run wrote holds a password.
    let redis_conf = root.join("redis.conf");
    if redis_conf.exists() {
        let mode = std::fs::metadata(&redis_conf).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "redis.conf is {mode:o}");
    }
    for (file, text) in texts(&root) {
        if file == redis_conf.display().to_string() {
            continue;
        }
        for s in set.servers() {
            assert!(
                !text.contains(s.password()),
                "{file} holds {:?}'s password",
                s.kind()
            );
        }
    }
    let meta = std::fs::metadata(&root).unwrap();
    assert_eq!(
        meta.uid(),
        nix::unistd::geteuid().as_raw(),
        "the root is the harness's"
    );
    assert_eq!(meta.mode() & 0o022, 0, "no one else writes in the root");
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pid_file_planted_in_the_root_never_aims_the_watchdog_when_the_harness_dies() {
    if !installed().contains(&ServerKind::Postgres) {
        assert!(
            std::env::var("CI").is_err(),
            "CI needs PostgreSQL's binaries"
        );
        eprintln!("SKIPPED: no PostgreSQL binaries to manage");
        return;
    }
    // Arrange: a run on a managed PostgreSQL, killed in the middle of a long sale.
    let dir = tempfile::tempdir().unwrap();
    let scenario = long_smoke(dir.path());
    let mut harness = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["run", "--services", "managed", "--strategy", "conditional"])
        .args(["--backend", "postgres", "--scenario"])
        .arg(&scenario)
        .arg("--out")
        .arg(dir.path().join("out"))
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(harness.stderr.take().unwrap()).lines();
    let started = tokio::time::timeout(Duration::from_secs(180), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim_start().starts_with("shop http://") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(started, Ok(true), "the run started its shop");
    let prefix = format!("oversell-services-{}-", harness.id().unwrap());
    let services_root = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&prefix))
        })
        .expect("the run's managed servers' root");
    // Someone else's process, in a process group of its own, and a pid file naming it where
    // the old watchdog looked for its servers.
    let mut victim = std::process::Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    std::fs::write(
        services_root.join("planted.pid"),
        format!("{}\nsleep 300\n", victim.id()),
    )
    .unwrap();

    // Act: the harness dies; its watchdog goes off.
    harness.start_kill().unwrap();
    let _ = harness.wait().await;
    drop(lines);
    let deadline = Instant::now() + Duration::from_secs(15);
    while services_root.exists() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Assert: the watchdog cleaned up, and left the planted process alone.
    let survived = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        !services_root.exists(),
        "the watchdog removed {}",
        services_root.display()
    );
    assert!(
        survived,
        "the watchdog killed a process group it never started"
    );
}
