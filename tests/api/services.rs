//! `--services`: a command on managed servers runs a sale on each backend and leaves no server
//! process or data directory after it ends, after an error, and after it is killed with -9
//! (nor a shop listening); with no server binaries anywhere it exits 3 naming the packages.

use crate::helpers::{long_smoke, only_report, oversell_cli};
use crate::managed::installed;
use oversell::testing::services::managed::ServerKind;
use std::path::PathBuf;
use std::time::Duration;

/// What a command said of the managed servers it started: `(url, data dir)` of each
/// `managed <name> <version> at <url> (data <dir>)` line.
fn managed_lines(stderr: &str) -> Vec<(String, PathBuf)> {
    stderr
        .lines()
        .filter(|l| l.starts_with("managed "))
        .filter_map(|l| {
            let (_, rest) = l.rsplit_once(" at ")?;
            let (url, dir) = rest.split_once(" (data ")?;
            Some((url.to_string(), PathBuf::from(dir.trim_end_matches(')'))))
        })
        .collect()
}

/// Whether anything accepts a connection at the URL's port on 127.0.0.1.
fn listening(url: &str) -> bool {
    let port = url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse::<u16>().ok())
        .expect("a URL ending in :PORT");
    std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_millis(500),
    )
    .is_ok()
}

/// Waits (bounded, 20 s) until nothing is left of the servers: each port closed, each data
/// directory (and its root) gone.
async fn assert_nothing_left(servers: &[(String, PathBuf)], context: &str) {
    for _ in 0..200 {
        let left = servers.iter().any(|(url, dir)| {
            listening(url) || dir.exists() || dir.parent().is_some_and(|r| r.exists())
        });
        if !left {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for (url, dir) in servers {
        assert!(!listening(url), "{context}: {url} still answers");
        assert!(!dir.exists(), "{context}: {} is still there", dir.display());
    }
}

fn needs_all_kinds() -> bool {
    let kinds = installed();
    if kinds.len() < ServerKind::ALL.len() {
        eprintln!("SKIPPED: not every server kind is installed ({kinds:?})");
        return false;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_on_managed_servers_sells_on_each_backend_and_leaves_nothing() {
    if !needs_all_kinds() {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let run = oversell_cli(
        &[
            "compare",
            "--services",
            "managed",
            "--strategies",
            "conditional,redis-lua",
            "--backends",
            "postgres,mysql",
            "--scenario",
            "smoke",
            "--out",
            out.path().to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    let servers = managed_lines(&run.stderr);
    assert_eq!(
        servers.len(),
        3,
        "one server of each kind, shared by the runs: {}",
        run.both()
    );
    let report = only_report(out.path());
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4, "2 strategies × 2 backends");
    for r in runs {
        let f = r; // the findings are flattened into the run
        assert_eq!(f["verified"], true, "{f}");
        assert_eq!(f["oversell"], 0, "{f}");
        assert!(f["sold"].as_i64().unwrap() > 0, "something sold: {f}");
    }
    let meta = report["metadata"]["servers"].as_array().unwrap();
    let pg = meta
        .iter()
        .find(|s| s["service"] == "PostgreSQL")
        .expect("PostgreSQL recorded");
    assert_eq!(pg["managed"], true, "{pg}");
    assert_eq!(pg["settings"]["fsync"], "on", "{pg}");
    assert_eq!(pg["settings"]["synchronous_commit"], "on", "{pg}");
    assert_eq!(pg["settings"]["shared_buffers"], "128MB", "{pg}");
    let my = meta
        .iter()
        .find(|s| s["service"] == "MySQL")
        .expect("MySQL recorded");
    assert_eq!(my["managed"], true, "{my}");
    assert_eq!(
        my["settings"]["innodb_flush_log_at_trx_commit"], "1",
        "{my}"
    );
    assert_eq!(
        my["settings"]["innodb_buffer_pool_size"], "134217728",
        "{my}"
    );
    let redis = meta
        .iter()
        .find(|s| s["service"] == "Redis")
        .expect("Redis recorded");
    assert_eq!(redis["managed"], true, "{redis}");
    assert_eq!(redis["settings"]["appendonly"], "no", "{redis}");
    assert_nothing_left(&servers, "after the command ended").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_fails_on_managed_servers_leaves_nothing() {
    if installed().is_empty() {
        return;
    }
    // The servers start before the scenario is read; a scenario that does not exist then
    // stops the command (exit 2).
    let run = oversell_cli(
        &[
            "run",
            "--services",
            "managed",
            "--strategy",
            "conditional",
            "--backend",
            if installed().contains(&ServerKind::Postgres) {
                "postgres"
            } else {
                "mysql"
            },
            "--scenario",
            "/nonexistent/scenario.toml",
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.both());
    let servers = managed_lines(&run.stderr);
    assert_eq!(servers.len(), 1, "{}", run.both());
    assert_nothing_left(&servers, "after an error").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_a_run_leaves_no_server_no_data_and_no_shop() {
    if !needs_all_kinds() {
        return;
    }
    // A sale long enough to be killed in the middle of.
    let dir = tempfile::tempdir().unwrap();
    let scenario = long_smoke(dir.path());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["run", "--services", "managed", "--strategy", "redis-lua"])
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
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    let mut shop = None;
    let waited = tokio::time::timeout(Duration::from_secs(180), async {
        while let Ok(Some(line)) = lines.next_line().await {
            said.push_str(&line);
            said.push('\n');
            if let Some(rest) = line.trim_start().strip_prefix("shop http://") {
                shop = rest
                    .split_whitespace()
                    .next()
                    .map(|a| format!("http://{a}"));
                break;
            }
        }
    })
    .await;
    assert!(
        waited.is_ok() && shop.is_some(),
        "the run started its shop:\n{said}"
    );
    let shop = shop.unwrap();
    let servers = managed_lines(&said);
    assert_eq!(servers.len(), 2, "PostgreSQL and Redis:\n{said}");
    assert!(listening(&shop), "the shop listens at {shop}");

    // Act: kill -9 the harness.
    child.start_kill().unwrap();
    let _ = child.wait().await;
    // Keep reading nothing more: the pipe closes with the process.
    drop(lines);

    assert_nothing_left(&servers, "after kill -9").await;
    for _ in 0..100 {
        if !listening(&shop) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !listening(&shop),
        "no shop listens at {shop} after kill -9 of its run"
    );
}

#[tokio::test]
async fn no_server_binaries_and_nothing_answering_exits_3_naming_the_packages() {
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().to_str().unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let db = format!("postgres://postgres:postgres@127.0.0.1:{dead}/oversell");
    let redis = format!("redis://127.0.0.1:{dead}");
    for services in ["auto", "managed"] {
        let run = oversell_cli(
            &[
                "run",
                "--services",
                services,
                "--strategy",
                "redis-lua",
                "--database-url",
                &db,
                "--redis-url",
                &redis,
                "--quiet",
            ],
            // Hide every server binary: an empty PATH, and no usual places.
            &[("PATH", path), ("OVERSELL_SERVER_DIRS", "")],
        )
        .await;
        assert_eq!(run.code, 3, "--services {services}: {}", run.both());
        for needle in [
            "apt-get install postgresql",
            "brew install postgresql",
            "apt-get install redis-server",
            "brew install redis",
            "docker compose up -d --wait",
        ] {
            assert!(
                run.stderr.contains(needle),
                "--services {services} names {needle:?}: {}",
                run.both()
            );
        }
        if services == "auto" {
            assert!(
                run.stderr.contains(&format!(
                    "cannot reach PostgreSQL at postgres://postgres:***@127.0.0.1:{dead}/oversell"
                )),
                "{}",
                run.both()
            );
        }
        assert!(!run.stderr.contains("panicked"), "{}", run.both());
    }
}

#[tokio::test]
async fn external_never_starts_a_server() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let run = oversell_cli(
        &[
            "run",
            "--services",
            "external",
            "--strategy",
            "conditional",
            "--database-url",
            &format!("postgres://postgres:postgres@127.0.0.1:{dead}/oversell"),
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 3, "{}", run.both());
    assert!(managed_lines(&run.stderr).is_empty(), "{}", run.both());
    assert!(
        run.stderr.contains("cannot reach PostgreSQL"),
        "{}",
        run.both()
    );
}

#[tokio::test]
async fn a_later_run_deletes_the_keys_a_killed_run_left_and_only_those() {
    use oversell::testing::inventory::redis_lua::keys::sweep_prefixes;
    use oversell::testing::services::leftovers::{host_tag, Owner, SAFE_AGE};
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    // A start of its own: the sweep runs once per start and Redis per process.
    let start = format!("oversell-sweeptest-{:08x}-", rand::random::<u32>());
    let name = |o: Owner| format!("{start}{}-{:016x}", o.tag('-'), rand::random::<u64>());
    let dead = 2_147_483_000; // above any pid_max: no such process
    let old = now - SAFE_AGE.as_secs() - 10;
    let killed = name(Owner {
        host: host_tag(),
        pid: dead,
        since: old,
    });
    let young = name(Owner {
        host: host_tag(),
        pid: dead,
        since: now,
    });
    let alive = name(Owner {
        host: host_tag(),
        pid: std::process::id(),
        since: old,
    });
    let elsewhere = name(Owner {
        host: host_tag().wrapping_add(1),
        pid: dead,
        since: old,
    });
    let mut conn = crate::helpers::redis_conn().await;
    for p in [&killed, &young, &alive, &elsewhere] {
        let _: () = redis::cmd("SET")
            .arg(format!("{{{p}:1}}:stock"))
            .arg(5)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let removed = sweep_prefixes(&crate::helpers::redis_url(), &start).await;
    assert_eq!(removed, vec![killed.clone()]);
    for (p, kept) in [
        (&killed, false),
        (&young, true),
        (&alive, true),
        (&elsewhere, true),
    ] {
        let exists: bool = redis::cmd("EXISTS")
            .arg(format!("{{{p}:1}}:stock"))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, kept, "{p}");
        crate::helpers::delete_prefix(p).await;
    }
}

#[tokio::test]
async fn services_managed_is_refused_where_it_could_not_act() {
    let dir = tempfile::tempdir().unwrap();
    let open_at = chrono::Utc::now() + chrono::Duration::minutes(10);
    let open_at = open_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let shard = oversell_cli(
        &[
            "run",
            "--services",
            "managed",
            "--strategy",
            "conditional",
            "--shard",
            "1/2",
            "--shop-url",
            "http://127.0.0.1:1",
            "--open-at",
            &open_at,
            "--out",
            dir.path().to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(shard.code, 2, "{}", shard.both());
    assert!(
        shard.stderr.contains("--services managed"),
        "{}",
        shard.both()
    );
    assert!(managed_lines(&shard.stderr).is_empty(), "{}", shard.both());
    let merge = oversell_cli(
        &[
            "merge",
            "--services",
            "managed",
            dir.path().to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(merge.code, 2, "{}", merge.both());
    assert!(
        merge.stderr.contains("merge --services managed"),
        "{}",
        merge.both()
    );
}
