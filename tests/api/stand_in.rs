//! The issue's stand-in shop: one stock counter, a racy purchase endpoint (read, sleep 50 ms,
//! write back) or a safe one, `GET /stock`, `POST /stock/reset?amount=N`, no ids, no users, no
//! pay or cancel; mapped by `scenarios/rehearsal-stock-only.toml`. In process (axum), on its
//! own loopback port per test.

use crate::helpers::*;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SCENARIO: &str = "scenarios/rehearsal-stock-only.toml";

#[derive(Clone)]
struct StandIn {
    stock: Arc<Mutex<i64>>,
    racy: bool,
    /// Every request the shop received, of any kind.
    requests: Arc<AtomicUsize>,
}

/// The purchase endpoint: racy (read, sleep 50 ms, write back) or safe (one locked step).
async fn purchase(State(s): State<StandIn>) -> (StatusCode, Json<Value>) {
    let sold_out = (StatusCode::CONFLICT, Json(json!({"detail": "sold out"})));
    let bought = (StatusCode::OK, Json(json!({"message": "purchased"})));
    if s.racy {
        let read = *s.stock.lock().unwrap();
        if read <= 0 {
            return sold_out;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        *s.stock.lock().unwrap() = read - 1;
        bought
    } else {
        let mut stock = s.stock.lock().unwrap();
        if *stock <= 0 {
            return sold_out;
        }
        *stock -= 1;
        bought
    }
}

async fn stock(State(s): State<StandIn>) -> Json<Value> {
    Json(json!({"current_stock": *s.stock.lock().unwrap()}))
}

async fn reset(State(s): State<StandIn>, Query(q): Query<HashMap<String, i64>>) -> StatusCode {
    match q.get("amount") {
        Some(n) => {
            *s.stock.lock().unwrap() = *n;
            StatusCode::OK
        }
        None => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

/// The stand-in on 127.0.0.1:0: its base URL and its state.
async fn spawn_stand_in(racy: bool) -> (String, StandIn) {
    let state = StandIn {
        stock: Arc::new(Mutex::new(0)),
        racy,
        requests: Arc::new(AtomicUsize::new(0)),
    };
    let counted = state.requests.clone();
    let app = Router::new()
        .route("/purchase", post(purchase))
        .route("/stock", get(stock))
        .route("/stock/reset", post(reset))
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                counted.fetch_add(1, Ordering::SeqCst);
                next.run(req)
            },
        ))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, state)
}

/// The stock-only scenario, edited, in a temporary file.
fn scenario_with(dir: &std::path::Path, edit: impl Fn(String) -> String) -> String {
    let text = edit(std::fs::read_to_string(SCENARIO).unwrap());
    let file = dir.join("scenario.toml");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

/// Without `[target.oracle]`.
fn no_oracle(text: String) -> String {
    let at = text.find("[target.oracle]").unwrap();
    text[..at].to_string()
}

async fn gate(base: &str, scenario: &str, out: &std::path::Path, extra: &[&str]) -> CliRun {
    against("gate", base, scenario, out, extra).await
}

#[tokio::test]
async fn a_stock_derived_oracle_cannot_hide_the_racy_endpoints_oversell_from_the_gate() {
    // Arrange
    let (base, _shop) = spawn_stand_in(true).await;
    let tmp = tempfile::tempdir().unwrap();

    // Act
    let run = gate(&base, SCENARIO, tmp.path(), &[]).await;

    // Assert: the shop's own counter says little was sold; what clients were told says more.
    assert_eq!(run.code, 1, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    let acked = r["acknowledged"].as_i64().unwrap();
    let sold = r["sold"].as_i64().unwrap();
    assert!(
        acked > 50,
        "the racy endpoint acknowledges more than it has: {r}"
    );
    assert_eq!(r["client_oversell"], acked - 50, "{r}");
    assert_eq!(r["oracle_disagreement"], acked - sold, "{r}");
    assert!(
        r["oracle_warning"]
            .as_str()
            .unwrap()
            .contains("under-counts"),
        "{r}"
    );
    let verdict = r["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("the oracle disagrees with the clients")
            && verdict.contains(&format!("client-observed oversell {}", acked - 50)),
        "{verdict}"
    );
    for failed in ["client_oversell", "oracle_disagreement"] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains(failed) && l.trim_end().ends_with("FAIL")),
            "{failed}: {}",
            run.both()
        );
    }
    let md = std::fs::read_to_string(
        std::fs::read_dir(tmp.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
            .join("report.md"),
    )
    .unwrap();
    assert!(
        md.contains("- oracle: HTTP GET") && md.contains("/stock: stock = `current_stock`"),
        "the report names the oracle that judged: {md}"
    );
    assert!(
        md.contains("**the oracle disagrees with the clients**"),
        "{md}"
    );
}

#[tokio::test]
async fn the_safe_endpoint_passes_the_same_gate_without_pay_cancel_or_order_ids() {
    let (base, shop) = spawn_stand_in(false).await;
    let tmp = tempfile::tempdir().unwrap();

    // A debug build on a shared test machine: the generator is not what this judges.
    let run = gate(&base, SCENARIO, tmp.path(), &[]).await;

    assert_eq!(run.code, 0, "{}", run.both());
    assert_eq!(*shop.stock.lock().unwrap(), 0);
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["acknowledged"], 50, "{r}");
    assert_eq!(r["sold"], 50, "{r}");
    assert_eq!(r["client_oversell"], 0, "{r}");
    assert_eq!(r["oracle_disagreement"], 0, "{r}");
    assert_eq!(r["acks_without_id"], 50, "counted by answer: {r}");
    assert!(r["requests"].get("pay").is_none() && r["requests"].get("cancel").is_none());
    assert!(
        r["client_notes"][0]
            .as_str()
            .unwrap()
            .contains("no order ids"),
        "the report says what no ids rule out: {r}"
    );
}

#[tokio::test]
async fn without_an_oracle_allow_unverified_still_fails_the_racy_endpoint() {
    let (racy, _r) = spawn_stand_in(true).await;
    let (safe, _s) = spawn_stand_in(false).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = scenario_with(tmp.path(), no_oracle);

    let failed = gate(
        &racy,
        &scenario,
        &tmp.path().join("racy"),
        &["--allow-unverified"],
    )
    .await;
    // A debug build on a shared test machine: the generator is not what this judges.
    let passed = gate(
        &safe,
        &scenario,
        &tmp.path().join("safe"),
        &["--allow-unverified"],
    )
    .await;

    assert_eq!(failed.code, 1, "{}", failed.both());
    assert!(
        failed
            .check_row("oversell")
            .is_some_and(|l| l.trim_end().ends_with("FAIL")),
        "oversell is breached by the clients' own evidence, not 'not verified': {}",
        failed.both()
    );
    assert_eq!(
        passed.code,
        0,
        "what could not be measured is allowed when the clients saw no oversell: {}",
        passed.both()
    );
    assert!(
        passed.stdout.contains("not verified (allowed)"),
        "{}",
        passed.both()
    );
}

#[tokio::test]
async fn an_unclassified_2xx_is_counted_and_reported_never_invalid() {
    // Arrange: a mapping with no rule for the shop's 200.
    let (base, _shop) = spawn_stand_in(false).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = scenario_with(tmp.path(), |t| {
        t.replace(r#"  { status = ["200"], outcome = "created" },"#, "")
    });

    // Act
    let run = against("attack", &base, &scenario, &tmp.path().join("out"), &[]).await;

    // Assert
    assert_eq!(run.code, 1, "the run fails: {}", run.both());
    let r = &only_report(&tmp.path().join("out"))["runs"][0];
    let outcomes = &r["requests"]["order"]["outcomes"];
    assert_eq!(outcomes["unclassified"], 50, "{outcomes}");
    assert!(outcomes.get("invalid").is_none(), "{outcomes}");
    assert_eq!(r["unclassified"], 50);
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .starts_with("MAPPING INCOMPLETE"),
        "{r}"
    );
    assert!(
        run.stdout
            .contains(r#"order answered 200 50 times (e.g. "{\"message\":\"purchased\"}")"#)
            && run
                .stdout
                .contains(r#"{ status = ["200"], outcome = "created" }"#),
        "which rule to add, with a sample body: {}",
        run.both()
    );
}

#[tokio::test]
async fn an_unreachable_oracle_means_the_shop_receives_no_request_and_no_folder_is_left() {
    let (base, shop) = spawn_stand_in(true).await;
    let tmp = tempfile::tempdir().unwrap();

    let run = gate(
        &base,
        SCENARIO,
        tmp.path(),
        &[
            "--oracle-http",
            "http://127.0.0.1:1/stock",
            "--stock-field",
            "current_stock",
        ],
    )
    .await;

    assert_eq!(run.code, 3, "{}", run.both());
    assert!(
        run.stderr
            .contains("cannot reach the oracle endpoint at http://127.0.0.1:1/stock"),
        "{}",
        run.both()
    );
    assert_eq!(
        shop.requests.load(Ordering::SeqCst),
        0,
        "the shop got no request"
    );
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "a failed run leaves no report folder"
    );
}

#[tokio::test]
async fn attack_probe_sends_one_request_of_each_kind_and_says_how_each_was_read() {
    let (base, shop) = spawn_stand_in(false).await;
    let tmp = tempfile::tempdir().unwrap();

    let run = against("attack", &base, SCENARIO, tmp.path(), &["--probe"]).await;

    assert_eq!(run.code, 0, "{}", run.both());
    for line in [
        "setup   POST /stock/reset?amount=50 → 200",
        r#"order   POST /purchase → 200 {"message":"purchased"} → created (rule target.outcomes[0]: status 200 → created)"#,
        "no order id (target.order_id_field is not set)",
        "pay     not sent: target.pay is not set",
        "view    not sent",
        "stock = `current_stock`",
        "before the order: ",
        "→ sold —, stock 50",
        "→ sold —, stock 49 (stock -1 since before the order)",
        "NOTE: this probe bought a real unit of item 1",
    ] {
        assert!(run.stdout.contains(line), "{line:?}: {}", run.both());
    }
    assert_eq!(*shop.stock.lock().unwrap(), 49, "one order, nothing else");
    assert_eq!(
        shop.requests.load(Ordering::SeqCst),
        5,
        "set-up, order, and the oracle: its check, before and after the order"
    );
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "no report"
    );
}
