//! The clients' evidence against stand-in shops that speak the reference shop's API (so the
//! bundled `ci` scenario maps them), each with one realistic defect, judged by an HTTP oracle
//! that gives only totals (sold, and stock when asked): no order rows. Real axum servers in
//! the test binary, in-memory state, one loopback port per test.

use crate::helpers::*;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The one defect a stand-in ships with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Defect {
    /// Correct: every step under one lock.
    None,
    /// Reads the stock, sleeps a few ms, writes back read − 1 (lost updates oversell).
    GetThenDecr,
    /// A cancel restocks its unit twice.
    DoubleRestock,
    /// The per-buyer limit is checked, then (30 ms later) the order written.
    RacyLimit,
}

#[derive(Default)]
struct Sale {
    stock: i64,
    limit: i64,
    next: u64,
    /// Order id → (user, status: "pending" | "paid" | "cancelled").
    orders: HashMap<String, (String, &'static str)>,
    /// Units each user holds.
    held: HashMap<String, i64>,
}

#[derive(Clone)]
struct Shop {
    defect: Defect,
    /// The oracle endpoint gives the stock too.
    oracle_stock: bool,
    sale: Arc<Mutex<Sale>>,
}

type Answer = (StatusCode, Json<Value>);

fn refused(error: &str) -> Answer {
    (StatusCode::CONFLICT, Json(json!({ "error": error })))
}

async fn setup(State(s): State<Shop>, Json(body): Json<Value>) -> Json<Value> {
    let mut sale = s.sale.lock().unwrap();
    *sale = Sale {
        stock: body["stock"].as_i64().unwrap_or(0),
        limit: body["purchase_limit"].as_i64().unwrap_or(1),
        ..Sale::default()
    };
    Json(json!({}))
}

async fn item(State(s): State<Shop>) -> Json<Value> {
    Json(json!({ "stock": s.sale.lock().unwrap().stock }))
}

/// Writes the order (the stock already taken).
fn create(sale: &mut Sale, user: &str) -> Answer {
    sale.next += 1;
    let id = format!("o-{}", sale.next);
    sale.orders
        .insert(id.clone(), (user.to_string(), "pending"));
    *sale.held.entry(user.to_string()).or_default() += 1;
    (StatusCode::CREATED, Json(json!({ "order_id": id })))
}

async fn order(State(s): State<Shop>, Json(body): Json<Value>) -> Answer {
    let user = body["user_id"].as_str().unwrap_or_default().to_string();
    match s.defect {
        Defect::GetThenDecr => {
            let read = s.sale.lock().unwrap().stock;
            if read <= 0 {
                return refused("sold_out");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            let mut sale = s.sale.lock().unwrap();
            if sale.held.get(&user).copied().unwrap_or(0) >= sale.limit {
                return refused("duplicate");
            }
            sale.stock = read - 1;
            create(&mut sale, &user)
        }
        Defect::RacyLimit => {
            let holds = {
                let sale = s.sale.lock().unwrap();
                sale.held.get(&user).copied().unwrap_or(0) >= sale.limit
            };
            if holds {
                return refused("duplicate");
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
            let mut sale = s.sale.lock().unwrap();
            if sale.stock <= 0 {
                return refused("sold_out");
            }
            sale.stock -= 1;
            create(&mut sale, &user)
        }
        Defect::None | Defect::DoubleRestock => {
            let mut sale = s.sale.lock().unwrap();
            if sale.held.get(&user).copied().unwrap_or(0) >= sale.limit {
                return refused("duplicate");
            }
            if sale.stock <= 0 {
                return refused("sold_out");
            }
            sale.stock -= 1;
            create(&mut sale, &user)
        }
    }
}

async fn pay(State(s): State<Shop>, Path(id): Path<String>) -> Answer {
    let mut sale = s.sale.lock().unwrap();
    match sale.orders.get_mut(&id) {
        Some((_, status)) if *status == "pending" => {
            *status = "paid";
            (StatusCode::OK, Json(json!({ "status": "paid" })))
        }
        Some(_) => refused("invalid_state"),
        None => (StatusCode::NOT_FOUND, Json(json!({ "error": "not_found" }))),
    }
}

async fn cancel(State(s): State<Shop>, Path(id): Path<String>) -> Answer {
    let mut sale = s.sale.lock().unwrap();
    let user = match sale.orders.get_mut(&id) {
        Some((user, status)) if *status == "pending" => {
            *status = "cancelled";
            user.clone()
        }
        Some(_) => return refused("invalid_state"),
        None => return (StatusCode::NOT_FOUND, Json(json!({ "error": "not_found" }))),
    };
    sale.stock += if s.defect == Defect::DoubleRestock {
        2
    } else {
        1
    };
    *sale.held.entry(user).or_default() -= 1;
    (StatusCode::OK, Json(json!({ "status": "cancelled" })))
}

/// The owner's oracle: units sold (orders holding stock) and, when asked, the stock. Totals
/// only: no order rows.
async fn oracle(State(s): State<Shop>) -> Json<Value> {
    let sale = s.sale.lock().unwrap();
    let sold = sale.orders.values().filter(|o| o.1 != "cancelled").count();
    if s.oracle_stock {
        Json(json!({ "sold": sold, "stock": sale.stock }))
    } else {
        Json(json!({ "sold": sold }))
    }
}

/// A stand-in on 127.0.0.1:0: its base URL and its oracle's URL.
async fn spawn(defect: Defect, oracle_stock: bool) -> (String, String) {
    let shop = Shop {
        defect,
        oracle_stock,
        sale: Arc::default(),
    };
    let app = Router::new()
        .route("/api/items/{id}", put(setup).get(item))
        .route("/api/orders", post(order))
        .route("/api/orders/{id}/pay", post(pay))
        .route("/api/orders/{id}/cancel", post(cancel))
        .route("/oracle", get(oracle))
        .with_state(shop);
    let base = serve_stand_in(app).await;
    let oracle = format!("{base}/oracle");
    (base, oracle)
}

/// The gate against `base` judged by the HTTP oracle `oracle`, nothing loosened (a debug
/// build on a shared machine: the generator's lateness flags a run only by its effect).
async fn gate(
    base: &str,
    oracle: &str,
    scenario: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> CliRun {
    let mut args = vec!["--oracle-http", oracle];
    args.extend_from_slice(extra);
    against("gate", base, scenario, out, &args).await
}

/// Whether the verdict table's line for `metric` ends with `result`.
fn line_ends(run: &CliRun, metric: &str, result: &str) -> bool {
    run.check_row(metric)
        .is_some_and(|l| l.trim_end().ends_with(result))
}

/// Most buyers cancel after ordering: what the shop oversold, cancels give back later.
const MOSTLY_CANCEL: (&str, &str) = (
    "pay = 0.8\ncancel = 0.1\nabandon = 0.1",
    "pay = 0.05\ncancel = 0.9\nabandon = 0.05",
);

#[tokio::test]
async fn a_get_then_decr_shop_whose_cancels_cover_its_oversell_fails_on_client_peak_oversell() {
    // Arrange: the oracle gives sold only (no stock to sample).
    let (base, oracle) = spawn(Defect::GetThenDecr, false).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = bundled_with(
        "ci",
        tmp.path(),
        &[MOSTLY_CANCEL, ("share = 0.05", "share = 0")],
    );

    // Act: the stand-in never expires an unpaid order, and the user says so.
    let run = gate(
        &base,
        &oracle,
        &scenario,
        tmp.path(),
        &["--payment-window", "15m"],
    )
    .await;

    // Assert
    assert_eq!(run.code, 1, "{}", run.both());
    assert!(!assert_every_fail_proven(&run).is_empty(), "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    let peak = r["client_peak_oversell"].as_i64().unwrap();
    assert!(
        peak > 0,
        "the clients held more than the stock at once: {r}"
    );
    assert!(
        peak > r["client_oversell"].as_i64().unwrap(),
        "the cancels covered part of it up by the end: {r}"
    );
    assert_eq!(r["client_peak_held"], 20 + peak, "{r}");
    assert!(
        line_ends(&run, "client_peak_oversell", "FAIL"),
        "{}",
        run.both()
    );
    assert_eq!(r["stock_samples"], Value::Null, "no stock to sample: {r}");
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        verdict.contains(&format!("client-observed peak oversell {peak}")),
        "{verdict}"
    );
    let md = std::fs::read_to_string(only_report_dir(tmp.path()).join("report.md")).unwrap();
    assert!(md.contains("**client-observed peak oversell: **"), "{md}");
}

#[tokio::test]
async fn a_shop_whose_cancel_restocks_twice_fails_on_the_stock_sampled_during_the_sale() {
    let (base, oracle) = spawn(Defect::DoubleRestock, true).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = bundled_with("ci", tmp.path(), &[MOSTLY_CANCEL]);

    let run = gate(&base, &oracle, &scenario, tmp.path(), &[]).await;

    // The stock rises above what was ever stocked: a fact of the samples alone. Held against
    // the clients' records they would show more, but only a declared backlog says when the
    // stock read includes every acknowledged order: not verified here.
    assert_eq!(run.code, 1, "{}", run.both());
    assert!(!assert_every_fail_proven(&run).is_empty(), "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert!(r["stock_samples"].as_u64().unwrap() >= 2, "{r}");
    assert!(r["max_stock_seen"].as_i64().unwrap() > 20, "{r}");
    assert!(
        line_ends(&run, "stock_above_initial", "FAIL"),
        "{}",
        run.both()
    );
    assert_eq!(r["stock_peak_oversell"], Value::Null, "{r}");
    assert!(
        r["proofs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["findings"][0] == "stock_above_initial"),
        "{r}"
    );
    let series = r["series"].as_array().unwrap();
    let stock = series
        .iter()
        .find(|s| s["name"] == "db_stock")
        .expect("the stock's series");
    assert!(
        stock["source"]
            .as_str()
            .unwrap()
            .contains("through its oracle"),
        "{stock}"
    );
    let csv = std::fs::read_dir(only_report_dir(tmp.path()))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("timeline-") && name.ends_with(".csv")
        })
        .map(|p| std::fs::read_to_string(p).unwrap())
        .expect("the run's timeline CSV");
    let header = csv.lines().next().unwrap();
    let col = header
        .split(',')
        .position(|c| c == "db_stock")
        .expect("db_stock column");
    assert!(
        csv.lines()
            .skip(1)
            .any(|l| l.split(',').nth(col).is_some_and(|v| !v.is_empty())),
        "the samples are in the CSV: {csv}"
    );
}

#[tokio::test]
async fn a_racy_per_buyer_limit_fails_on_client_duplicate_buyers_with_a_totals_only_oracle() {
    // Plenty of stock: the limit is the only thing that can break. Bots resubmit 3 times.
    let (base, oracle) = spawn(Defect::RacyLimit, true).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = bundled_with(
        "ci",
        tmp.path(),
        &[
            ("stock = 20", "stock = 1000"),
            ("share = 0.05", "share = 0.2"),
            (
                "pay = 0.8\ncancel = 0.1\nabandon = 0.1",
                "pay = 1\ncancel = 0\nabandon = 0",
            ),
        ],
    );

    let run = gate(&base, &oracle, &scenario, tmp.path(), &[]).await;

    assert_eq!(run.code, 1, "{}", run.both());
    assert!(!assert_every_fail_proven(&run).is_empty(), "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["duplicate_buyers"], Value::Null, "no order rows: {r}");
    let dup = r["client_duplicate_buyers"].as_u64().unwrap();
    assert!(dup > 0, "bots got past the limit: {r}");
    assert!(
        line_ends(&run, "client_duplicate_buyers", "FAIL"),
        "{}",
        run.both()
    );
    assert!(
        line_ends(&run, "duplicate_buyers", "FAIL"),
        "duplicate_buyers falls back to the clients' records: {}",
        run.both()
    );
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains(&format!("{dup} users held more than the limit at once")),
        "{r}"
    );
}

#[tokio::test]
async fn a_correct_shop_passes_the_bundled_ci_scenario_with_a_totals_only_oracle() {
    let (base, oracle) = spawn(Defect::None, true).await;
    let tmp = tempfile::tempdir().unwrap();
    let junit = tmp.path().join("gate.xml");

    let run = gate(
        &base,
        &oracle,
        "ci",
        &tmp.path().join("reports"),
        &["--junit", junit.to_str().unwrap()],
    )
    .await;
    let asked = gate(
        &base,
        &oracle,
        "scenarios/ci.toml",
        &tmp.path().join("asked"),
        &["--threshold", "lost_acks=0"],
    )
    .await;

    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(&tmp.path().join("reports"))["runs"][0];
    for zero in ["client_peak_oversell", "client_duplicate_buyers"] {
        assert_eq!(r[zero], 0, "{zero}: {r}");
    }
    // The stock is sampled, but no backlog is declared: no sample is held against the
    // clients' records (not verified, not required by default).
    assert_eq!(r["stock_peak_oversell"], Value::Null, "{r}");
    assert!(
        line_ends(&run, "phantom_orders", "not required")
            && run
                .flat_stdout()
                .contains("lost_acks: not required (bundled scenario limit)"),
        "what this oracle cannot measure is listed, not skipped: {}",
        run.both()
    );
    assert!(
        line_ends(&run, "duplicate_buyers", "pass"),
        "{}",
        run.both()
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("lost_acks &lt;= 0") || xml.contains("lost_acks <= 0"),
        "{xml}"
    );
    assert_eq!(
        asked.code,
        1,
        "a limit the user wrote is not waived: {}",
        asked.both()
    );
    assert!(
        line_ends(&asked, "lost_acks", "FAIL (not verified)"),
        "{}",
        asked.both()
    );
}
