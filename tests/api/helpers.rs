//! Test harness: the servers (the machine's, or one managed set for the whole run), a fresh
//! database and Redis key prefix per test (named by owner and time, so a later run removes
//! what a killed one left), and the shop running in-process on a free loopback port.
//!
//! Where the servers are: `TEST_POSTGRES_URL`, `TEST_MYSQL_URL`, `TEST_REDIS_URL` when set;
//! else the defaults (127.0.0.1:5432 postgres/postgres, 127.0.0.1:3306 root, 127.0.0.1:6379)
//! when the tests' login works there; else one managed server of that kind, started from the
//! installed binaries the first time a test asks and shared by every test of the run.
//! `OVERSELL_TEST_SERVICES=managed` makes every kind managed (how to test that path on a
//! machine whose servers run).

use oversell::testing::inventory::Strategy;
use oversell::testing::services::leftovers;
use oversell::testing::services::managed::{kinds, ManagedSet, ServerKind, ServerOptions};
use oversell::testing::shop::{Application, ShopConfig, ShopKnobs};
use oversell::testing::store::{Backend, PoolSettings};
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::oneshot;

/// The start of every test database's name.
const TEST_DB: &str = "oversell_t_";
/// The start of every test's Redis key prefix.
const TEST_PREFIX: &str = "oversell-test-";

/// The servers of this test run.
pub struct TestServers {
    pub postgres: String,
    pub mysql: String,
    pub redis: String,
    /// The managed servers, when any kind is managed (kept for the whole run; they die with
    /// the test binary).
    pub managed: Option<ManagedSet>,
}

/// The servers of this test run (decided, and managed ones started, on first use).
pub fn servers() -> &'static TestServers {
    static SERVERS: OnceLock<TestServers> = OnceLock::new();
    SERVERS.get_or_init(|| {
        // Its own thread and runtime: the caller may be inside a test's runtime.
        std::thread::spawn(decide_servers)
            .join()
            .expect("setting up the test servers")
    })
}

fn decide_servers() -> TestServers {
    let all_managed = std::env::var("OVERSELL_TEST_SERVICES").is_ok_and(|v| v == "managed");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // TEST_*_URL as given; else the default when a login there works (a server that
        // answers but refuses the tests' login counts as none).
        // The docker-compose servers' URLs (docker-compose.yml).
        let configured = |var: &'static str, kind: ServerKind, default: &'static str| async move {
            if all_managed {
                return None;
            }
            if let Ok(url) = std::env::var(var) {
                return Some(url);
            }
            let login = tokio::time::timeout(Duration::from_secs(5), kinds::answers(kind, default));
            matches!(login.await, Ok(Ok(()))).then(|| default.to_string())
        };
        let postgres = configured(
            "TEST_POSTGRES_URL",
            ServerKind::Postgres,
            "postgres://postgres:postgres@127.0.0.1:5432",
        )
        .await;
        let mysql = configured(
            "TEST_MYSQL_URL",
            ServerKind::Mysql,
            "mysql://root@127.0.0.1:3306",
        )
        .await;
        let redis = configured(
            "TEST_REDIS_URL",
            ServerKind::Redis,
            "redis://127.0.0.1:6379",
        )
        .await;
        let mut set = None;
        let postgres = url_or_managed(&mut set, ServerKind::Postgres, postgres).await;
        let mysql = url_or_managed(&mut set, ServerKind::Mysql, mysql).await;
        let redis = url_or_managed(&mut set, ServerKind::Redis, redis).await;
        sweep_test_leftovers(&postgres, &mysql, &redis).await;
        TestServers {
            postgres,
            mysql,
            redis,
            managed: set,
        }
    })
}

/// `given`, or the URL of a managed server of `kind` started in `set` (made on first use).
async fn url_or_managed(
    set: &mut Option<ManagedSet>,
    kind: ServerKind,
    given: Option<String>,
) -> String {
    if let Some(url) = given {
        return url;
    }
    let set =
        set.get_or_insert_with(|| ManagedSet::new().expect("a directory for the managed servers"));
    let s = set
        .start(kind, ServerOptions::default())
        .await
        .unwrap_or_else(|e| panic!("starting a managed {kind:?} for the tests: {e:#}"));
    eprintln!(
        "tests: managed {} {} at {}",
        kind.as_str(),
        s.version(),
        s.url()
    );
    s.url()
}

/// Drops the test databases and deletes the test key prefixes a killed earlier run left
/// (see `oversell::testing::services::leftovers`).
async fn sweep_test_leftovers(postgres: &str, mysql: &str, redis: &str) {
    use sqlx::Connection;
    let sweep = async {
        if let Ok(mut c) = sqlx::PgConnection::connect(&format!("{postgres}/postgres")).await {
            let names: Vec<String> = sqlx::query_scalar(
                "SELECT datname::TEXT FROM pg_database WHERE datname LIKE 'oversell\\_t\\_%'",
            )
            .fetch_all(&mut c)
            .await
            .unwrap_or_default();
            for n in stale_databases(names) {
                drop_database(&format!("{postgres}/{n}")).await;
            }
        }
        if let Ok(mut c) = sqlx::MySqlConnection::connect(mysql).await {
            let names: Vec<String> = sqlx::query_scalar(
                "SELECT CAST(SCHEMA_NAME AS CHAR) FROM information_schema.SCHEMATA \
                 WHERE SCHEMA_NAME LIKE 'oversell\\_t\\_%'",
            )
            .fetch_all(&mut c)
            .await
            .unwrap_or_default();
            for n in stale_databases(names) {
                drop_database(&format!("{mysql}/{n}")).await;
            }
        }
        oversell::testing::inventory::redis_lua::keys::sweep_prefixes(redis, TEST_PREFIX).await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(60), sweep).await;
}

fn stale_databases(names: Vec<String>) -> Vec<String> {
    names
        .into_iter()
        .filter(|n| leftovers::owner_of(n, TEST_DB, '_').is_some_and(|o| o.is_stale()))
        .collect()
}

/// Base URL of the PostgreSQL server the tests use (a database name is appended).
pub fn pg_base() -> String {
    servers().postgres.clone()
}

/// Base URL of the MySQL/MariaDB server the tests use.
pub fn mysql_base() -> String {
    servers().mysql.clone()
}

/// Redis URL of the tests.
pub fn redis_url() -> String {
    servers().redis.clone()
}

/// A fresh key prefix for one test.
pub fn fresh_prefix() -> String {
    leftovers::owned_name(TEST_PREFIX, '-')
}

/// A connection to the tests' Redis.
pub async fn redis_conn() -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// A fresh database URL for one test.
pub fn fresh_db_url(backend: Backend) -> String {
    let name = leftovers::owned_name(TEST_DB, '_');
    match backend {
        Backend::Postgres => format!("{}/{name}", pg_base()),
        Backend::Mysql => format!("{}/{name}", mysql_base()),
    }
}

/// One run cell per strategy, all on `backend` at `database_url`.
pub fn cells(
    strategies: &[Strategy],
    backend: Backend,
    database_url: &str,
) -> Vec<oversell::testing::runner::Cell> {
    strategies
        .iter()
        .map(|strategy| oversell::testing::runner::Cell {
            strategy: *strategy,
            backend,
            database_url: database_url.to_string(),
        })
        .collect()
}

/// A running shop and a client for it.
pub struct TestApp {
    pub address: String,
    pub client: reqwest::Client,
    pub database_url: String,
    pub redis_prefix: String,
    pub app_inventory: oversell::testing::inventory::Inventory,
    stop: Option<oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

/// The configuration tests start from: isolated database and key prefix, small timeouts.
pub fn test_config(strategy: Strategy, backend: Backend) -> ShopConfig {
    let mut config = ShopKnobs::default().config(
        strategy,
        "127.0.0.1:0".parse().unwrap(),
        &fresh_db_url(backend),
        &redis_url(),
        &fresh_prefix(),
    );
    // Every test buyer comes from 127.0.0.1: the per-IP bucket is for the gateway tests.
    config.redis.gateway.ip_rate_per_s = 0.0;
    config.pool = PoolSettings {
        max_connections: 10,
        acquire_timeout: Duration::from_secs(5),
        lock_timeout: Duration::from_secs(5),
    };
    config
}

/// Starts the shop with `config`.
pub async fn spawn_with(config: ShopConfig) -> TestApp {
    let database_url = config.database_url.clone();
    let redis_prefix = config.redis.prefix.clone();
    let app = Application::build(config).await.expect("shop builds");
    let address = format!("http://{}", app.local_addr());
    let app_inventory = app.inventory().clone();
    let (tx, rx) = oneshot::channel::<()>();
    let handle = tokio::spawn(async move {
        app.run_until_stopped(async {
            let _ = rx.await;
        })
        .await
        .expect("shop runs");
    });
    TestApp {
        address,
        client: reqwest::Client::new(),
        database_url,
        redis_prefix,
        app_inventory,
        stop: Some(tx),
        handle: Some(handle),
    }
}

/// Starts a shop for `strategy` on `backend` with test defaults.
pub async fn spawn_app(strategy: Strategy, backend: Backend) -> TestApp {
    spawn_with(test_config(strategy, backend)).await
}

impl TestApp {
    /// `PUT /api/items/{id}`.
    pub async fn setup_sale(&self, id: i64, stock: i64, limit: i64) -> Value {
        let r = self
            .client
            .put(format!("{}/api/items/{id}", self.address))
            .json(&json!({ "stock": stock, "name": "test item", "price_cents": 990, "purchase_limit": limit }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "sale set-up failed");
        r.json().await.unwrap()
    }

    /// `POST /api/orders` with a JSON body; returns status and body.
    pub async fn order(&self, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}/api/orders", self.address))
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `POST /api/orders` with a raw body.
    pub async fn order_raw(&self, body: &'static str) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}/api/orders", self.address))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `POST /api/orders/{id}/{action}`.
    pub async fn order_action(&self, order_id: &str, action: &str) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}/api/orders/{order_id}/{action}", self.address))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    /// `GET /api/items/{id}/audit`, after waiting (bounded) for the queue to drain.
    pub async fn drained_audit(&self, id: i64) -> Value {
        for _ in 0..200 {
            let a = self.audit(id).await;
            if a["queue_drained"] == json!(true) {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("queue did not drain within 10 s");
    }

    /// `GET /api/items/{id}/drained`, the route the harness polls: its status and body.
    pub async fn drained(&self, id: i64) -> (u16, Value) {
        let r = self
            .client
            .get(format!("{}/api/items/{id}/drained", self.address))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// `GET /api/items/{id}/audit`.
    pub async fn audit(&self, id: i64) -> Value {
        self.client
            .get(format!("{}/api/items/{id}/audit", self.address))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `GET /metrics` (Prometheus text).
    pub async fn metrics_text(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.address))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Stops the shop (a graceful shutdown, as on SIGTERM) and waits for it, keeping the
    /// database and keys for the test to read.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = tokio::time::timeout(Duration::from_secs(10), h).await;
        }
    }

    /// Stops the shop, drops the test database and deletes the test's Redis keys.
    pub async fn teardown(mut self) {
        self.stop().await;
        drop_database(&self.database_url).await;
        delete_prefix(&self.redis_prefix).await;
    }
}

/// Drops a test database (best effort).
pub async fn drop_database(url: &str) {
    use sqlx::migrate::MigrateDatabase;
    sqlx::any::install_default_drivers();
    match Backend::from_url(url) {
        Ok(Backend::Postgres) => {
            let _ = sqlx::Postgres::force_drop_database(url).await;
        }
        _ => {
            let _ = sqlx::Any::drop_database(url).await;
        }
    }
}

/// Deletes every Redis key of a test prefix.
pub async fn delete_prefix(prefix: &str) {
    oversell::testing::inventory::redis_lua::keys::delete_prefix(&redis_url(), prefix).await;
}

/// The output of one `oversell` command run by a test.
pub struct CliRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl CliRun {
    /// Whether every check the gate failed failed because the generator was late: the run
    /// measured the machine (the whole suite on two cores), not the shop.
    pub fn only_generator_bound(&self) -> bool {
        // The threshold rows that failed (not the headline, `oversell gate: FAIL — ...`).
        let fails: Vec<&str> = self
            .stdout
            .lines()
            .filter(|l| l.contains("FAIL") && !l.starts_with("oversell gate:"))
            .collect();
        self.code == 1 && !fails.is_empty() && fails.iter().all(|l| l.contains("generator-bound"))
    }

    /// Both streams, for assertion messages.
    pub fn both(&self) -> String {
        format!(
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    /// Stdout with every run of whitespace one space: a note the terminal wrapped at 100
    /// columns reads as one sentence again.
    pub fn flat_stdout(&self) -> String {
        self.stdout.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The gate verdict's row for `metric`: the check's name first under its run's line (the
    /// terminal's grouped table) or second after the run (`--wide`), with its limit.
    pub fn check_row(&self, metric: &str) -> Option<&str> {
        self.stdout.lines().find(|l| {
            let words: Vec<&str> = l.split_whitespace().take(3).collect();
            let named = words.first() == Some(&metric) || words.get(1) == Some(&metric);
            named && (l.contains("<=") || l.contains(">="))
        })
    }
}

/// The figures a gate limits that are measured rather than judged by the oracle (latency,
/// rates, the generator, settling, gauges): a breach of one is its figure, with no proof.
const MEASURED: [&str; 12] = [
    "error_rate",
    "mean_ms",
    "p50_ms",
    "p99_ms",
    "p999_ms",
    "service_p99_ms",
    "send_lag_p99_ms",
    "late_sends",
    "db_qps_peak",
    "throughput",
    "not_settled",
    "unclassified",
];

/// Every check the gate in `run` failed on an oracle's finding carries its proof on the
/// terminal (`<run> <metric>: proof: …`); the metrics it failed, for the caller to assert on.
pub fn assert_every_fail_proven(run: &CliRun) -> Vec<String> {
    let flat = run.flat_stdout();
    let mut failed = Vec::new();
    for line in run.stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(metric) = words.first().copied() else {
            continue;
        };
        let is_check = line.contains("<=") || line.contains(">=");
        if !is_check || !line.trim_end().ends_with(" FAIL") || MEASURED.contains(&metric) {
            continue;
        }
        assert!(
            flat.contains(&format!("{metric}: proof: ")),
            "{metric} failed without its proof: {}",
            run.both()
        );
        failed.push(metric.to_string());
    }
    failed
}

/// Runs the `oversell` binary with `args` (and extra environment), waiting for it to exit.
pub async fn oversell_cli(args: &[&str], env: &[(&str, &str)]) -> CliRun {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(args)
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("DATABASE_URL")
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .kill_on_drop(true)
        .output()
        .await
        .expect("the oversell binary runs");
    CliRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The `report.json` of the only report folder under `out`.
pub fn only_report(out: &std::path::Path) -> Value {
    let dir = only_report_dir(out);
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

/// The only report folder under `out`.
pub fn only_report_dir(out: &std::path::Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(out)
        .expect("the report folder exists")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("report.json").exists())
        .collect();
    assert_eq!(dirs.len(), 1, "one report under {}", out.display());
    dirs.remove(0)
}

/// Runs `oversell <command> --target <base> --scenario <scenario> --out <out> --quiet` plus
/// `extra` flags: a rehearsal (`attack`) or a gate against a foreign shop.
pub async fn against(
    command: &str,
    base: &str,
    scenario: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> CliRun {
    let out = out.to_str().expect("a UTF-8 path");
    let mut args = vec![
        command,
        "--target",
        base,
        "--scenario",
        scenario,
        "--out",
        out,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    oversell_cli(&args, &[]).await
}

/// The bundled scenario `name` with `edits` (each `(from, to)` must match), in a file of its own.
pub fn bundled_with(name: &str, dir: &std::path::Path, edits: &[(&str, &str)]) -> String {
    let mut text = std::fs::read_to_string(format!("scenarios/{name}.toml")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{name}.toml has {from:?}");
        text = text.replacen(from, to, 1);
    }
    let file = dir.join("scenario.toml");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

/// Serves `app` (a stand-in shop of the test binary) on 127.0.0.1:0; its base URL.
pub async fn serve_stand_in(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// The bundled `smoke` scenario stretched to a 300 s sale with no second wave, written as
/// `long.toml` in `dir`: a run long enough to be killed or inspected in the middle of.
pub fn long_smoke(dir: &std::path::Path) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let smoke = std::fs::read_to_string(root.join("scenarios/smoke.toml")).unwrap();
    let long = smoke.replacen("window_s = 3.0", "window_s = 300.0", 1);
    let long = match long.find("[second_wave]") {
        Some(i) => long[..i].to_string(),
        None => long,
    };
    let scenario = dir.join("long.toml");
    std::fs::write(&scenario, long).unwrap();
    scenario
}

/// Polls `check` every 20 ms until it gives `Some`, and returns that; panics naming `what` when
/// `limit` passes first. The way a test waits for a condition instead of a fixed sleep.
pub async fn eventually<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{what}: not within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
