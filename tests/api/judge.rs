//! The oracle as judge, on real services: every order sorted by the attempt that asked for it
//! (an order its client gave up on is indeterminate and committed, an order nobody asked for
//! is a phantom), oversell later cancels covered up still fails the gate, and `diff --fail-on`
//! takes every gate name.

use crate::helpers::*;
use oversell::testing::gate::{limits, Metric, Status, Verdict};
use oversell::testing::inventory::Strategy;
use oversell::testing::model::{Order, OrderStatus};
use oversell::testing::runner::{self, RunPlan};
use oversell::testing::store::{Backend, Store};
use oversell::testing::traffic::Scenario;
use std::time::Duration;

/// Every buyer's order outlives its client: the client gives up after 100 ms, the shop holds
/// the row lock for 300 ms of work, then commits.
const GIVE_UP: &str = r#"
name = "give-up"
description = "every client times out before the shop commits its order"
[item]
stock = 5
[buyers]
count = 4
seed = 3
arrival = "uniform"
window_s = 3.0
[after_order]
pay = 0.0
abandon = 1.0
[client]
timeout_ms = 100
[shop]
work = "300ms"
lock_timeout = "5s"
"#;

fn scenario_file(dir: &std::path::Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_committed_after_its_client_gave_up_is_indeterminate_and_one_inserted_behind_the_clients_is_a_phantom(
) {
    // Arrange
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario_file(tmp.path(), "give-up", GIVE_UP);
    let db = fresh_db_url(Backend::Postgres);
    let store = Store::connect(&db, &oversell::testing::shop::ShopKnobs::default().pool())
        .await
        .unwrap();
    let mut plan = RunPlan::reference(
        Scenario::load(&file).unwrap(),
        file,
        cells(&[Strategy::ForUpdate], Backend::Postgres, &db),
        redis_url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        tmp.path().join("reports"),
    );
    plan.drain_limit = Duration::from_secs(30);

    // Act: the run, and meanwhile an order written straight into the database.
    let intruder = async {
        while store.item(1).await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Mid-sale: once the buyers' first order is in.
        eventually("the sale is under way", Duration::from_secs(30), || async {
            (!store.orders_for_item(1).await.unwrap().is_empty()).then_some(())
        })
        .await;
        let now = oversell::testing::model::now_ms();
        let order = Order {
            id: "1-intruder".into(),
            item_id: 1,
            user_id: "nobody".into(),
            device_id: None,
            qty: 1,
            status: OrderStatus::Paid,
            created_at_ms: now,
            updated_at_ms: now,
            idempotency_key: None,
            stock_read: None,
        };
        store.insert_order(&order).await.unwrap();
    };
    let (ran, ()) = tokio::join!(runner::execute(&plan), intruder);
    let (report, _) = ran.expect("the run completes");
    store.close().await;
    drop_database(&db).await;

    // Assert
    let f = &report.runs[0].findings;
    assert_eq!(f.acknowledged, 0, "every client gave up: {}", f.verdict);
    assert_eq!(f.indeterminate, 4, "four timeouts: {}", f.verdict);
    assert_eq!(
        f.indeterminate_committed,
        Some(4),
        "each committed after its client left, and its key says so: {}",
        f.verdict
    );
    assert_eq!(f.phantom_orders, Some(1), "the intruder: {}", f.verdict);
    assert_eq!(f.orders_acknowledged, Some(0));
    assert_eq!(f.lost_acks, Some(0));
    assert!(
        f.verdict.contains("1 phantom orders")
            && f.verdict
                .contains("4 of 4 indeterminate order attempts committed"),
        "{}",
        f.verdict
    );
    // The gate: the phantom fails it; indeterminate orders are reported, not limited.
    let verdict = Verdict::judge(
        &report,
        &limits(&Default::default(), None, &[], false),
        false,
    );
    let status = |m: Metric| {
        verdict
            .checks
            .iter()
            .find(|c| c.limit.metric == m)
            .map(|c| c.status.clone())
    };
    assert_eq!(status(Metric::PhantomOrders), Some(Status::Breached));
    assert_eq!(
        status(Metric::IndeterminateCommitted),
        None,
        "no default limit"
    );
    assert_eq!(status(Metric::LostAcks), Some(Status::Passed));
}

/// Naive oversells in the opening burst; every buyer then cancels, so nothing is oversold at
/// the end.
const COVERED_UP: &str = r#"
name = "covered-up"
description = "naive oversells, then every order is cancelled"
[item]
stock = 3
[buyers]
count = 30
seed = 11
arrival = "burst"
window_s = 1.0
burst_s = 0.05
burst_share = 1.0
[after_order]
pay = 0.0
cancel = 1.0
think_ms = [300, 400]
[client]
timeout_ms = 10000
[shop]
naive_gap = "100ms"
pool_size = 40
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_naive_run_whose_oversell_cancels_covered_up_fails_the_gate_on_peak_oversell() {
    // Arrange
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario_file(tmp.path(), "covered-up", COVERED_UP);
    let db = fresh_db_url(Backend::Postgres);
    let junit = tmp.path().join("gate.xml");

    // Act
    let run = oversell_cli(
        &[
            "gate",
            "--scenario",
            file.to_str().unwrap(),
            "--strategy",
            "naive",
            "--database-url",
            &db,
            "--redis-url",
            &redis_url(),
            "--out",
            tmp.path().join("reports").to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    drop_database(&db).await;

    // Assert
    assert_eq!(run.code, 1, "{}", run.both());
    let report = only_report(&tmp.path().join("reports"));
    let r = &report["runs"][0];
    assert_eq!(
        r["oversold_at_end"], 0,
        "cancels covered it up: {}",
        r["verdict"]
    );
    assert_eq!(
        r["oversell"], r["peak_oversell"],
        "the headline is the peak: {}",
        r["verdict"]
    );
    assert!(
        r["peak_oversell"].as_i64().unwrap() > 0,
        "naive oversold in the burst: {}",
        r["verdict"]
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let failed = |name: &str| {
        doc.descendants()
            .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(name))
            .map(|c| c.children().any(|f| f.has_tag_name("failure")))
    };
    assert_eq!(failed("peak_oversell <= 0"), Some(true), "{xml}");
    assert_eq!(
        failed("oversell <= 0"),
        Some(true),
        "the headline is the peak: {xml}"
    );
    assert_eq!(failed("oversold_at_end <= 0"), Some(false), "{xml}");
    assert!(
        xml.contains("proof: at +"),
        "the failure carries its proof: {xml}"
    );
}

#[tokio::test]
async fn gate_help_lists_every_threshold_and_a_typo_gets_a_suggestion() {
    let help = oversell_cli(&["gate", "--help"], &[]).await;
    assert_eq!(help.code, 0, "{}", help.both());
    let flat = help.stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(Metric::ALL.len() >= 40);
    for m in Metric::ALL {
        assert!(flat.contains(m.name()), "gate --help lists {m}: {flat}");
    }

    let typo = oversell_cli(&["gate", "--threshold", "p95_ms=3", "--dry-run"], &[]).await;
    assert_eq!(typo.code, 2, "{}", typo.both());
    assert!(
        typo.stderr.contains("(did you mean `p99`?)"),
        "{}",
        typo.both()
    );
    let scenario = oversell_cli(&["gate", "--scenario", "flash-10", "--dry-run"], &[]).await;
    assert_eq!(scenario.code, 2, "{}", scenario.both());
    assert!(
        scenario.stderr.contains("(did you mean `flash-100`?)"),
        "{}",
        scenario.both()
    );
}

#[tokio::test]
async fn diff_fail_on_accepts_every_gate_name() {
    let v1 = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report-v1.json");
    // Every gate name a run's report carries (capacity_rps is a search's, not a run's).
    let names: Vec<&str> = Metric::RUN.iter().copied().map(Metric::name).collect();
    assert!(names.contains(&"peak_oversell") && names.contains(&"not_settled"));
    assert_eq!(Metric::named("queue_not_drained"), Some(Metric::NotSettled));

    let all = names.join(",");
    let run = oversell_cli(&["diff", v1, v1, "--fail-on", &all], &[]).await;

    assert_eq!(run.code, 0, "{}", run.both());
    for name in names {
        assert!(
            run.stdout.contains(&format!("(`{name}`)")),
            "{name}: {}",
            run.stdout
        );
    }
}
