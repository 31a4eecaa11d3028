//! Known defects and `oversell selftest` on real services: each defect whose trigger exists
//! today is caught by the check meant for it, and the same scenario passes on the correct
//! strategy; the two whose buyers arrive with the adversarial scenarios are proven over HTTP
//! (the defect moves what a correct shop does not); the refusals (`gate` without
//! `--allow-defect`, a strategy without the defect) exit 2 with the reason.

use crate::helpers::*;
use oversell::testing::inventory::{Defect, Strategy};
use oversell::testing::selftest::{self, CaseResult, Setup};
use oversell::testing::store::Backend;
use serde_json::{json, Value};
use std::time::Duration;

/// Where a self-test case runs: its own database, reports in a temporary folder, and a
/// send-lag bound the debug build on a shared machine always meets (the generator is not what
/// these tests judge).
fn setup(db: &str, out: &std::path::Path) -> Setup {
    Setup {
        backend: Backend::Postgres,
        database_url: db.to_string(),
        redis_url: redis_url(),
        shop_exe: env!("CARGO_BIN_EXE_oversell").into(),
        out: out.to_path_buf(),
        drain_limit: Duration::from_secs(60),
        max_send_lag_ms: Some(10_000.0),
    }
}

/// Fires `defect`'s scenario at its first strategy with the defect, then without: the defect's
/// run must breach `check`, the correct run must pass every check.
async fn caught_by(defect: Defect, check: &str) {
    // Arrange
    let db = fresh_db_url(Backend::Postgres);
    let tmp = tempfile::tempdir().unwrap();
    let setup = setup(&db, tmp.path());
    let strategy = defect.strategies()[0];
    let case = |d| selftest::Case {
        defect: d,
        meant_for: defect,
        strategy,
        repeat: 1,
    };

    // Act
    let broken = selftest::run(case(Some(defect)), &setup).await;
    let correct = selftest::run(case(None), &setup).await;
    drop_database(&db).await;

    // Assert
    assert_eq!(broken.result, CaseResult::Caught, "{broken:?}");
    assert!(
        broken.caught_by.iter().any(|c| c == check),
        "{defect} is caught by {check}: {broken:?}"
    );
    assert_eq!(correct.result, CaseResult::Passed, "{correct:?}");
    assert!(correct.caught_by.is_empty(), "{correct:?}");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(broken.report.unwrap().join("report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        report["runs"][0]["defect"],
        json!(defect.as_str()),
        "the report records the defect"
    );
    let clean: Value = serde_json::from_str(
        &std::fs::read_to_string(correct.report.unwrap().join("report.json")).unwrap(),
    )
    .unwrap();
    assert!(
        clean["runs"][0].get("defect").is_none(),
        "{}",
        clean["runs"][0]
    );
}

#[tokio::test]
async fn limit_race_is_caught_by_duplicate_buyers_and_the_correct_shop_passes() {
    caught_by(Defect::LimitRace, "duplicate_buyers").await;
}

#[tokio::test]
async fn get_then_decr_is_caught_by_the_peak_oversell_and_the_correct_shop_passes() {
    caught_by(Defect::GetThenDecr, "peak_oversell").await;
}

#[tokio::test]
async fn double_restock_is_caught_by_conservation_and_the_correct_shop_passes() {
    caught_by(Defect::DoubleRestock, "conservation_drift").await;
}

/// A conditional shop (the defects' first database strategy) with `defect` built in, or none.
async fn shop(defect: Option<Defect>) -> TestApp {
    let mut config = test_config(Strategy::Conditional, Backend::Postgres);
    config.inventory.defect = defect;
    spawn_with(config).await
}

async fn db_stock(app: &TestApp) -> i64 {
    app.drained_audit(1).await["db_stock"].as_i64().unwrap()
}

async fn buy(app: &TestApp, user: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = app
        .client
        .post(format!("{}/api/orders", app.address))
        .json(&json!({ "item_id": 1, "user_id": user, "qty": 1 }));
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let r = req.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Pays an order, then cancels it: what the stock and the order say after.
async fn pay_then_cancel(defect: Option<Defect>) -> (u16, i64, Value, String) {
    let app = shop(defect).await;
    app.setup_sale(1, 5, 1).await;
    let (status, body) = buy(&app, "u1", None).await;
    assert_eq!(status, 201, "{body}");
    let id = body["order_id"].as_str().unwrap().to_string();
    assert_eq!(app.order_action(&id, "pay").await.0, 200);
    let (cancelled, _) = app.order_action(&id, "cancel").await;
    let stock = db_stock(&app).await;
    let audit = app.drained_audit(1).await;
    let metrics = app.metrics_text().await;
    app.teardown().await;
    (cancelled, stock, audit, metrics)
}

#[tokio::test]
async fn cancel_paid_restocks_puts_a_paid_orders_unit_back_while_it_stays_paid() {
    // Act
    let (answer, stock, audit, metrics) = pay_then_cancel(Some(Defect::CancelPaidRestocks)).await;
    let (right_answer, right_stock, right_audit, _) = pay_then_cancel(None).await;

    // Assert: both refuse the cancel and keep the order paid; only the defect restocks.
    assert_eq!((answer, right_answer), (409, 409));
    assert_eq!(audit["orders_by_status"]["paid"], json!(1), "{audit}");
    assert_eq!(right_audit["orders_by_status"]["paid"], json!(1));
    assert_eq!(right_stock, 4, "a correct shop keeps the paid unit sold");
    assert_eq!(stock, 5, "the defect put the paid unit back: {audit}");
    assert!(
        metrics.contains("oversell_defect_active{defect=\"cancel-paid-restocks\"} 1"),
        "the shop says the defect is active"
    );
}

/// Sends one order twice with the same `Idempotency-Key` (a buyer may hold two units): the
/// two answers' order ids and the stock left.
async fn resend_same_key(defect: Option<Defect>) -> (Value, Value, i64) {
    let app = shop(defect).await;
    app.setup_sale(1, 5, 2).await;
    let (s1, first) = buy(&app, "u1", Some("attempt-1")).await;
    let (s2, second) = buy(&app, "u1", Some("attempt-1")).await;
    assert_eq!((s1, s2), (201, 201), "{first} {second}");
    let stock = db_stock(&app).await;
    app.teardown().await;
    (first["order_id"].clone(), second["order_id"].clone(), stock)
}

#[tokio::test]
async fn key_reuse_buys_a_second_order_for_a_resent_key() {
    // Act
    let (first, second, stock) = resend_same_key(Some(Defect::KeyReuse)).await;
    let (right_first, right_second, right_stock) = resend_same_key(None).await;

    // Assert
    assert_eq!(
        right_first, right_second,
        "a correct shop answers the first order again"
    );
    assert_eq!(right_stock, 4);
    assert_ne!(first, second, "the defect bought a second order");
    assert_eq!(stock, 3);
}

#[tokio::test]
async fn double_restock_gives_a_cancelled_unit_back_twice() {
    // Arrange
    let app = shop(Some(Defect::DoubleRestock)).await;
    app.setup_sale(1, 5, 1).await;
    let (_, body) = buy(&app, "u1", None).await;
    let id = body["order_id"].as_str().unwrap().to_string();

    // Act
    let (cancelled, answer) = app.order_action(&id, "cancel").await;
    let again = app.order_action(&id, "cancel").await.0;
    let stock = db_stock(&app).await;
    app.teardown().await;

    // Assert
    assert_eq!((cancelled, again), (200, 200), "{answer}");
    assert_eq!(answer["restocked"], json!(1), "the answer says one unit");
    assert_eq!(
        stock, 6,
        "one unit sold and cancelled, restocked twice: 5 - 1 + 2"
    );
}

#[tokio::test]
async fn oversell_selftest_on_one_defect_exits_0_and_prints_the_table() {
    // Arrange
    let db = fresh_db_url(Backend::Postgres);
    let tmp = tempfile::tempdir().unwrap();

    // Act
    let run = oversell_cli(
        &[
            "selftest",
            "--defect",
            "limit-race",
            "--database-url",
            &db,
            "--redis-url",
            &redis_url(),
            "--out",
            tmp.path().to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    drop_database(&db).await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    for word in [
        "defect",
        "strategy",
        "scenario",
        "caught by",
        "seconds",
        "result",
    ] {
        assert!(run.stdout.contains(word), "{word}: {}", run.both());
    }
    let caught = run
        .stdout
        .lines()
        .find(|l| l.starts_with("limit-race"))
        .unwrap_or_else(|| panic!("{}", run.both()));
    assert!(
        caught.contains("conditional")
            && caught.contains("selftest-limit-race")
            && caught.contains("duplicate_buyers")
            && caught.ends_with("caught"),
        "{caught}"
    );
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("none (correct)") && l.ends_with("pass")),
        "{}",
        run.both()
    );
    assert!(
        run.stdout.contains("oversell selftest: PASS"),
        "{}",
        run.both()
    );
}

#[tokio::test]
async fn gate_refuses_a_defect_without_allow_defect_and_says_why() {
    // Act
    let run = oversell_cli(
        &[
            "gate",
            "--scenario",
            "selftest-limit-race",
            "--strategy",
            "conditional",
            "--defect",
            "limit-race",
            "--quiet",
        ],
        &[],
    )
    .await;

    // Assert
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("--allow-defect") && run.stderr.contains("testing aid"),
        "{}",
        run.both()
    );
}

#[tokio::test]
async fn gate_refuses_a_scenario_whose_shop_table_asks_for_a_defect() {
    // Arrange: the bundled scenario with `[shop] defect` written into it.
    let tmp = tempfile::tempdir().unwrap();
    let text = oversell::testing::scenarios::Bundled::named("selftest-limit-race")
        .unwrap()
        .text
        .replace("[shop]\n", "[shop]\ndefect = \"limit-race\"\n");
    assert!(text.contains("defect = \"limit-race\""));
    let file = tmp.path().join("with-defect.toml");
    std::fs::write(&file, text).unwrap();

    // Act
    let run = oversell_cli(
        &[
            "gate",
            "--scenario",
            file.to_str().unwrap(),
            "--strategy",
            "conditional",
            "--quiet",
        ],
        &[],
    )
    .await;

    // Assert
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("defect limit-race") && run.stderr.contains("--allow-defect"),
        "{}",
        run.both()
    );
}

#[tokio::test]
async fn a_defect_on_a_strategy_without_it_is_refused_naming_those_with_it() {
    for args in [
        vec![
            "gate",
            "--scenario",
            "selftest-limit-race",
            "--strategy",
            "redis-lua",
            "--defect",
            "limit-race",
            "--allow-defect",
            "--quiet",
        ],
        vec![
            "run",
            "--scenario",
            "selftest-limit-race",
            "--strategy",
            "redis-lua",
            "--defect",
            "limit-race",
            "--quiet",
        ],
        vec!["serve", "--strategy", "redis-lua", "--defect", "limit-race"],
    ] {
        // Act
        let run = oversell_cli(&args, &[]).await;

        // Assert
        assert_eq!(run.code, 2, "{args:?}: {}", run.both());
        assert!(
            run.stderr.contains("not built into redis-lua")
                && run.stderr.contains("conditional, for-update"),
            "{args:?}: {}",
            run.both()
        );
    }
}

#[tokio::test]
async fn serve_with_a_defect_prints_a_loud_warning_and_still_serves() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    // Arrange
    let db = fresh_db_url(Backend::Postgres);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args([
            "serve",
            "--strategy",
            "conditional",
            "--defect",
            "double-restock",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &db,
        ])
        .env_remove("DATABASE_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();

    // Act
    let warning = tokio::time::timeout(Duration::from_secs(60), stderr.next_line())
        .await
        .expect("a first stderr line")
        .unwrap()
        .unwrap_or_default();
    let listening = tokio::time::timeout(Duration::from_secs(60), stdout.next_line())
        .await
        .expect("the listening line")
        .unwrap()
        .unwrap_or_default();
    let _ = child.kill().await;
    drop_database(&db).await;

    // Assert
    assert!(
        warning.starts_with("WARNING: DEFECT DOUBLE-RESTOCK IS ACTIVE")
            && warning.contains("testing aid"),
        "{warning}"
    );
    assert!(
        listening.starts_with("oversell shop listening on http://"),
        "the first stdout line stays the contract: {listening}"
    );
}
