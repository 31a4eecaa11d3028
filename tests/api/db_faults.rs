//! Database server faults on managed servers (each test starts its own set: crashing a server
//! other tests use is never done): `db-crash` and `db-restart` on every correct database
//! strategy and on redis-lua, on PostgreSQL and MariaDB (0 oversell, 0 lost acknowledged
//! orders, the crash window in the report); `replica-lag` on a redis-lua sale that reconciles
//! from a managed streaming replica (0 oversell, the residual back to 0 after the lag); and
//! both refused, with their reason, where the run has no managed server or no replica.

use crate::helpers::*;
use crate::managed::installed;
use oversell::report::faults::FaultWindow;
use oversell::report::RunReport;
use oversell::testing::inventory::Strategy;
use oversell::testing::nemesis::{Engine, FaultSpec, Owned, RedisSale};
use oversell::testing::runner::{self, RunPlan};
use oversell::testing::services::managed::{ManagedSet, ServerKind, ServerOptions};
use oversell::testing::store::Backend;
use oversell::testing::traffic::Scenario;
use std::time::Duration;

/// A short sale: 60 buyers rush 10 units; some cancel (restocks); reconciliation every second.
const SALE: &str = r#"
name = "db-fault-sale"
[item]
stock = 10
[buyers]
count = 60
seed = 11
arrival = "burst"
window_s = 2.0
burst_s = 0.4
burst_share = 0.7
[after_order]
pay = 0.6
cancel = 0.4
think_ms = [20, 150]
[client]
timeout_ms = 3000
[shop]
pool_size = 5
acquire_timeout = "300ms"
reconcile_interval = "1s"
[thresholds]
oversell = 0
lost_acks = 0
"#;

/// The strategies that decide in the database and sell correctly.
const DATABASE_STRATEGIES: [Strategy; 4] = [
    Strategy::ForUpdate,
    Strategy::Optimistic,
    Strategy::Conditional,
    Strategy::Batched,
];

fn sale(faults: &[&str]) -> Scenario {
    let mut s = Scenario::parse(SALE).expect("the test scenario is valid");
    s.faults = faults
        .iter()
        .map(|f| FaultSpec::parse_flag(f).unwrap())
        .collect();
    s
}

/// A managed set with one server of `kind`, or `None` (and a SKIPPED line) when it is not
/// installed.
async fn managed(kind: ServerKind) -> Option<(ManagedSet, String)> {
    if !installed().contains(&kind) {
        return None;
    }
    let set = ManagedSet::new().unwrap();
    let server = set.start(kind, ServerOptions::default()).await.unwrap();
    let url = server.database_url(&format!("oversell_t_{}", uuid::Uuid::now_v7().simple()));
    Some((set, url))
}

/// Runs `s` on every strategy in turn on `db`; the reports' runs.
async fn run_all(
    s: Scenario,
    strategies: &[Strategy],
    backend: Backend,
    db: &str,
) -> Vec<RunReport> {
    let tmp = tempfile::tempdir().unwrap();
    let mut plan = RunPlan::reference(
        s,
        tmp.path().join("db-faults.toml"),
        cells(strategies, backend, db),
        redis_url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        tmp.path().join("reports"),
    );
    plan.drain_limit = Duration::from_secs(30);
    let (report, _) = runner::execute(&plan).await.expect("the runs complete");
    report.runs
}

/// The run's only window of `kind`.
fn window<'a>(run: &'a RunReport, kind: &str) -> &'a FaultWindow {
    let w: Vec<_> = run
        .faults
        .iter()
        .filter(|f| f.kind.as_str() == kind)
        .collect();
    assert_eq!(w.len(), 1, "one {kind} window: {:?}", run.faults);
    w[0]
}

/// 0 oversell, 0 lost acknowledged orders, something sold, and the fault's window: applied at
/// its time, held at least `min_ms`, its note saying `did`, and a recovery time.
fn survived(run: &RunReport, kind: &str, at_ms: u64, min_ms: u64, did: &str) {
    let f = &run.findings;
    let who = format!("{:?}: {}", run.shop, f.verdict);
    assert_eq!(f.oversell, Some(0), "{who}");
    assert_eq!(f.lost_acks, Some(0), "{who}");
    assert_eq!(f.duplicate_acks, Some(0), "{who}");
    assert!(f.sold.unwrap_or(0) > 0, "the shop sold: {who}");
    let w = window(run, kind);
    assert_eq!(w.at_ms, at_ms, "{w:?}");
    assert!(w.began_ms >= at_ms, "{w:?}");
    assert!(
        w.ended_ms >= w.began_ms + min_ms,
        "held for its window: {w:?}"
    );
    assert!(w.basis_text().contains(did), "{who}: {}", w.basis_text());
    assert!(w.recovered_ms.is_some(), "{who}: recovered: {w:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_postgres_loses_no_acknowledged_order_on_any_strategy() {
    let Some((set, db)) = managed(ServerKind::Postgres).await else {
        return;
    };
    let mut strategies = DATABASE_STRATEGIES.to_vec();
    strategies.push(Strategy::RedisLua);

    let runs = run_all(
        sale(&["db-crash@0.2:800ms"]),
        &strategies,
        Backend::Postgres,
        &db,
    )
    .await;

    assert_eq!(runs.len(), strategies.len());
    for run in &runs {
        survived(run, "db-crash", 200, 700, "crash recovery took");
    }
    assert!(
        runs.iter().any(|r| r.findings.indeterminate > 0),
        "orders in flight at the crash were indeterminate"
    );
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_and_a_restarted_mariadb_lose_no_acknowledged_order() {
    let Some((set, db)) = managed(ServerKind::Mysql).await else {
        return;
    };
    let mut strategies = DATABASE_STRATEGIES.to_vec();
    strategies.push(Strategy::RedisLua);

    let runs = run_all(
        sale(&["db-crash@0.2:800ms", "db-restart@2.5:500ms"]),
        &strategies,
        Backend::Mysql,
        &db,
    )
    .await;

    for run in &runs {
        survived(run, "db-crash", 200, 700, "crash recovery took");
        survived(run, "db-restart", 2500, 400, "stopped cleanly");
    }
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciliation_on_a_lagging_replica_never_oversells_and_settles_at_zero() {
    let Some((set, db)) = managed(ServerKind::Postgres).await else {
        return;
    };
    let mut s = sale(&["replica-lag@0.3:2500ms"]);
    s.buyers.window_s = 4.0;

    let runs = run_all(s, &[Strategy::RedisLua], Backend::Postgres, &db).await;

    let run = &runs[0];
    let f = &run.findings;
    assert_eq!(f.oversell, Some(0), "{}", f.verdict);
    assert_eq!(f.lost_acks, Some(0), "{}", f.verdict);
    assert!(
        f.orders_by_status.get("cancelled").copied().unwrap_or(0) > 0,
        "cancels restocked while the replica lagged: {:?}",
        f.orders_by_status
    );
    let w = window(run, "replica-lag");
    let basis = w.basis_text();
    assert!(basis.contains("replay paused"), "{basis}");
    assert!(basis.contains("caught up in"), "{basis}");
    assert!(basis.contains("reconcile_residual back at"), "{basis}");
    let pass = run.reconcile.as_ref().expect("a final reconciliation pass");
    assert_eq!(
        pass.source, "replica",
        "reconciliation read the replica: {pass:?}"
    );
    assert_eq!(pass.residual, 0, "{pass:?}");
    let residual = run
        .series
        .iter()
        .find(|s| s.name == "reconcile_residual")
        .expect("the residual was sampled");
    let after: Vec<f64> = residual
        .points
        .iter()
        .filter(|p| p.0 * 1000.0 > w.recovered_ms.unwrap() as f64)
        .map(|p| p.1)
        .collect();
    assert!(
        after.iter().all(|v| *v == 0.0),
        "the residual stays at 0 after the lag: {:?}",
        residual.points
    );
    set.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_faults_are_refused_with_a_reason_without_a_managed_server_or_a_replica() {
    // A server nothing started: the tests' own servers may be managed ones of this process
    // (no server answered at the defaults), and those must never be crashed.
    let db = "postgres://postgres@127.0.0.1:1/oversell_t_not_managed".to_string();
    let owned = Owned {
        shop: None,
        database_url: db,
        private_redis: None,
        redis_url: redis_url(),
        redis_sale: Some(RedisSale {
            streams: vec!["unused".into()],
            group: "unused".into(),
            slot_key: "unused".into(),
        }),
        strategy: "redis-lua".into(),
        replica_url: None,
    };
    let faults: Vec<FaultSpec> = [
        "db-crash@0:100ms",
        "db-restart@0:100ms",
        "replica-lag@0:100ms",
    ]
    .iter()
    .map(|f| FaultSpec::parse_flag(f).unwrap())
    .collect();

    let applied = Engine::start(&faults, owned, tokio::time::Instant::now())
        .finish()
        .await;

    assert_eq!(applied.len(), 3);
    for a in &applied[..2] {
        assert_eq!(a.began_ms, None, "{a:?}");
        let note = a.note.as_deref().unwrap_or("");
        assert!(note.contains("not on a managed server"), "{note}");
        assert!(note.contains("--services managed"), "{note}");
    }
    assert_eq!(applied[2].began_ms, None);
    assert!(
        applied[2]
            .note
            .as_deref()
            .unwrap_or("")
            .contains("no replica"),
        "{:?}",
        applied[2]
    );
}

#[test]
fn the_cli_refuses_server_faults_on_servers_it_did_not_start() {
    let cases = [
        ("for-update", "db-crash@1:1s", "add --services managed"),
        ("redis-lua", "db-restart@1", "add --services managed"),
        (
            "for-update",
            "replica-lag@1:2s",
            "replica-lag needs a run with a replica",
        ),
    ];
    for (strategy, fault, says) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
            .args(["run", "--services", "external", "--strategy", strategy])
            .args(["--scenario", "smoke", "--fault", fault])
            .args(["--database-url", &fresh_db_url(Backend::Postgres)])
            .args(["--redis-url", &redis_url()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{fault}: {err}");
        assert!(err.contains(says), "{fault}: {err}");
        assert!(err.contains(fault.split('@').next().unwrap()), "{err}");
    }
}
