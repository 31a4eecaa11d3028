//! `smoke` through `run`/`compare` for every strategy, on PostgreSQL and MySQL: the oracle's
//! figures, the report files, and scenario errors.

use crate::helpers::*;
use oversell::testing::inventory::Strategy;
use oversell::testing::runner::{self, Cell, RunPlan};
use oversell::testing::store::Backend;
use oversell::testing::traffic::Scenario;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

fn smoke_plan(
    strategies: &[Strategy],
    backend: Backend,
    out: &std::path::Path,
) -> (RunPlan, String) {
    let db = fresh_db_url(backend);
    let file = PathBuf::from("scenarios/smoke.toml");
    let cells = strategies
        .iter()
        .map(|s| Cell {
            strategy: *s,
            backend,
            database_url: db.clone(),
        })
        .collect();
    let mut plan = RunPlan::reference(
        Scenario::load(&file).expect("smoke.toml is valid"),
        file,
        cells,
        redis_url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        out.to_path_buf(),
    );
    plan.drain_limit = Duration::from_secs(30);

    (plan, db)
}

fn run_json(dir: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(dir.join("report.json")).expect("report.json written");
    serde_json::from_str(&text).expect("report.json parses")
}

async fn smoke_every_strategy(backend: Backend) {
    let out = tempfile::tempdir().unwrap();
    let (plan, db) = smoke_plan(Strategy::all(), backend, out.path());
    let (_, dir) = runner::execute(&plan)
        .await
        .expect("the smoke run completes");
    drop_database(&db).await;
    let json = run_json(&dir);
    assert_eq!(json["schema"], "oversell.report/v2");
    assert!(dir.join("report.md").exists());
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), Strategy::all().len());
    for run in runs {
        let strategy = run["strategy"].as_str().unwrap();
        for field in [
            "strategy",
            "backend",
            "scenario",
            "buyers",
            "initial_stock",
            "sold",
            "oversell",
            "undersell",
            "negative_stock",
            "conservation_drift",
            "lost_acks",
            "phantom_orders",
            "duplicate_buyers",
            "requests",
            "error_rate",
            "throughput_rps",
            "time_to_sell_out_s",
            "db_qps",
            "generator",
            "drain",
        ] {
            assert!(run.get(field).is_some(), "{strategy}: report lacks {field}");
        }
        assert_eq!(run["backend"], backend.as_str());
        assert_eq!(
            run["drain"]["drained"], true,
            "{strategy}: queue did not drain"
        );
        let order = &run["requests"]["order"];
        assert!(
            order["total"].as_u64().unwrap() >= 300,
            "{strategy}: every buyer ordered"
        );
        for p in ["mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"] {
            assert!(
                order["latency"][p].as_f64().unwrap() > 0.0,
                "{strategy}: latency {p}"
            );
        }
        assert!(run["db_qps"]["source"]
            .as_str()
            .unwrap()
            .contains(match backend {
                Backend::Postgres => "pg_stat",
                Backend::Mysql => "SHOW GLOBAL STATUS",
            }));
        assert!(run["generator"]["peak_rss_mib"].as_f64().unwrap() > 0.0);
        // Every order is traced to the attempt that asked for it, naive's included.
        assert_eq!(run["phantom_orders"], 0, "{strategy}: {}", run["verdict"]);
        assert_eq!(
            run["refused_committed"], 0,
            "{strategy}: {}",
            run["verdict"]
        );
        assert_eq!(run["duplicate_acks"], 0, "{strategy}: {}", run["verdict"]);
        assert_eq!(
            run["orders_acknowledged"].as_i64().unwrap()
                + run["indeterminate_committed"].as_i64().unwrap(),
            run["orders_by_status"]
                .as_object()
                .unwrap()
                .values()
                .map(|n| n.as_i64().unwrap())
                .sum::<i64>(),
            "{strategy}: every order is acknowledged or indeterminate-and-committed"
        );
        let oversell = run["oversell"].as_i64().unwrap();
        if strategy == "naive" {
            // Caught by the peak: the cancels and the second wave may resell what the race
            // oversold, so the count at the end can come back to the stock (which buyers
            // cancel is the seed's draw).
            let peak = run["peak_oversell"].as_i64().unwrap();
            assert!(
                peak > 0 && peak >= oversell,
                "naive must oversell under smoke: {}",
                run["verdict"]
            );
        } else {
            assert_eq!(oversell, 0, "{strategy}: {}", run["verdict"]);
            assert_eq!(run["peak_oversell"], 0, "{strategy}: {}", run["verdict"]);
            assert_eq!(run["lost_acks"], 0, "{strategy}: lost acknowledged orders");
            assert_eq!(run["conservation_drift"], 0, "{strategy}: conservation");
            assert_eq!(run["duplicate_buyers"], 0, "{strategy}: duplicate buyers");
            assert_eq!(run["negative_stock"], false, "{strategy}");
        }
        if strategy == "redis-buckets" {
            assert_eq!(
                run["redis_drift"], 0,
                "Redis (every bucket) equals the database"
            );
        }
        if strategy == "redis-lua" {
            assert_eq!(
                run["redis_drift"], 0,
                "Redis equals the database after reconciliation"
            );
            assert!(run["redis_ops"]["peak"].as_f64().unwrap() > 0.0);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_runs_every_strategy_on_postgres_and_the_oracle_tells_them_apart() {
    smoke_every_strategy(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smoke_runs_every_strategy_on_mysql_and_the_oracle_tells_them_apart() {
    smoke_every_strategy(Backend::Mysql).await;
}

#[test]
fn a_malformed_scenario_fails_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    let text = std::fs::read_to_string("scenarios/smoke.toml")
        .unwrap()
        .replace("count = 260", "count = -5");
    std::fs::write(&bad, text).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["run", "--strategy", "naive", "--scenario"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.toml"), "names the file: {err}");
    assert!(err.contains("count"), "names the field: {err}");

    std::fs::write(&bad, "name = \"x\"\n[item]\nstock = 5\n[buyers]\ncount = 10\narrival = \"spike\"\nwindow_s = 1\n").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["compare", "--scenario"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("spike")
            && err.contains("burst")
            && err.contains("uniform")
            && err.contains("ramp"),
        "{err}"
    );
}

#[test]
fn the_shipped_scenarios_are_valid() {
    for f in std::fs::read_dir("scenarios").unwrap() {
        let path = f.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let flash = Scenario::load(std::path::Path::new("scenarios/flash-100.toml")).unwrap();
    assert_eq!(flash.item.stock, 100);
    assert_eq!(flash.total_buyers(), 3000);
    assert_eq!(flash.item.purchase_limit, 1);
}

async fn a_second_run_is_refused_while_one_holds_the_database(backend: Backend) {
    use oversell::testing::store::Store;
    let db = fresh_db_url(backend);
    let store = Store::connect(&db, &oversell::testing::shop::ShopKnobs::default().pool())
        .await
        .unwrap();
    let held = store
        .try_run_lock()
        .await
        .unwrap()
        .expect("the first run gets the lock");
    let out = tempfile::tempdir().unwrap();
    let cells = vec![Cell {
        strategy: Strategy::Naive,
        backend,
        database_url: db.clone(),
    }];
    let plan = RunPlan::reference(
        Scenario::load(std::path::Path::new("scenarios/smoke.toml")).unwrap(),
        "scenarios/smoke.toml".into(),
        cells,
        redis_url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        out.path().to_path_buf(),
    );
    let err = runner::execute(&plan)
        .await
        .expect_err("a second run must not start");
    assert!(
        err.to_string().contains("another oversell run is using"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(out.path()).unwrap().count(),
        0,
        "nothing was written"
    );
    // Released when the first run's connection goes away (the server notices the closed
    // socket on its own time: on a loaded machine, not at once).
    drop(held.detach());
    let again = Store::connect(&db, &oversell::testing::shop::ShopKnobs::default().pool())
        .await
        .unwrap();
    let mut released = false;
    for _ in 0..50 {
        if again.try_run_lock().await.unwrap().is_some() {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        released,
        "the lock is released within 5 s of its connection closing"
    );
    again.close().await;
    store.close().await;
    drop_database(&db).await;
}

#[tokio::test]
async fn a_second_run_on_the_same_postgres_database_is_refused() {
    a_second_run_is_refused_while_one_holds_the_database(Backend::Postgres).await;
}

#[tokio::test]
async fn a_second_run_on_the_same_mysql_database_is_refused() {
    a_second_run_is_refused_while_one_holds_the_database(Backend::Mysql).await;
}
