//! Adversarial buyers (`[adversarial]`) and retries with the same key (`[client] retry`): every
//! correct reference strategy answers them as a correct shop must (0 wrong answers, 0
//! duplicate orders per key, the stores agreeing with what the clients were told), and
//! stand-in shops (axum, in process) that ignore the Idempotency-Key or pay a cancelled order
//! are caught.

use crate::helpers::*;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{post, put};
use axum::{Json, Router};
use oversell::testing::store::Backend;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Gates `strategies` on `backend` with the bundled `adversarial` scenario; returns the run and
/// its report.
async fn gate_reference(backend: Backend, strategies: &str) -> (CliRun, Value) {
    let db = fresh_db_url(backend);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let run = oversell_cli(
        &[
            "gate",
            // Every [adversarial] share and [client] retry, 200 buyers for 20 units, a 2 s payment
            // window, and a small pool so that some strategies answer 503 (retried with the key).
            "--scenario",
            "adversarial",
            "--strategy",
            strategies,
            "--database-url",
            &db,
            "--redis-url",
            &redis_url(),
            "--out",
            out.to_str().unwrap(),
            // A debug build on a shared test machine: the generator is not what this judges.
            "--quiet",
        ],
        &[],
    )
    .await;
    drop_database(&db).await;
    let report = only_report(&out);
    (run, report)
}

/// Every run of `report` answered its adversarial buyers as a correct shop must.
fn assert_correct(run: &CliRun, report: &Value, strategies: usize) {
    assert_eq!(run.code, 0, "{}", run.both());
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), strategies, "{}", run.both());
    for r in runs {
        let name = &r["strategy"];
        assert!(
            r["follow_ups"].as_u64().unwrap() >= 5,
            "{name}: adversarial buyers were fired: {}",
            r["follow_ups"]
        );
        assert_eq!(
            r["wrong_answers"], 0,
            "{name}: {}",
            r["wrong_answer_examples"]
        );
        assert_eq!(
            r["duplicate_orders_per_key"], 0,
            "{name}: {}",
            r["duplicate_key_examples"]
        );
        assert_eq!(r["status_mismatches"], 0, "{name}");
        assert_eq!(r["oversell"], 0, "{name}");
        assert_eq!(r["client_oversell"], 0, "{name}");
        let resent = r["requests"]["order"]["retries"]["total"]
            .as_u64()
            .unwrap_or(0);
        assert!(
            resent > 0,
            "{name}: resends count as retries: {}",
            r["requests"]["order"]
        );
    }
    let retried_failures: u64 = runs
        .iter()
        .map(|r| r["order_retry_errors"].as_u64().unwrap() + r["order_errors"].as_u64().unwrap())
        .sum();
    assert!(
        strategies == 1 || retried_failures > 0,
        "the small pool made some order attempts fail, and they were retried: {}",
        run.both()
    );
    for m in ["wrong_answers", "duplicate_orders_per_key"] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains(m) && l.contains("pass")),
            "{m} is gated: {}",
            run.both()
        );
    }
}

#[tokio::test]
async fn every_correct_strategy_on_postgres_answers_adversarial_buyers_and_retries_correctly() {
    let (run, report) = gate_reference(
        Backend::Postgres,
        "for-update,optimistic,redis-lua,conditional,batched",
    )
    .await;
    assert_correct(&run, &report, 5);
}

#[tokio::test]
async fn a_correct_strategy_on_mariadb_answers_adversarial_buyers_and_retries_correctly() {
    let (run, report) = gate_reference(Backend::Mysql, "conditional").await;
    assert_correct(&run, &report, 1);
}

/// A stand-in shop with the reference shop's API and one defect (or none): no per-buyer
/// limit, one stock counter.
#[derive(Clone, Default)]
struct StandIn {
    /// A key already seen buys again: `Idempotency-Key` ignored.
    ignores_key: bool,
    /// A cancelled order can still be paid.
    pays_cancelled: bool,
    /// The first try of each key is answered 503 before anything is bought.
    busy_first: bool,
    state: Arc<Mutex<Shop>>,
    /// Order requests received.
    orders: Arc<AtomicUsize>,
}

#[derive(Default)]
struct Shop {
    stock: i64,
    /// Order id → status.
    orders: HashMap<String, &'static str>,
    /// Idempotency-Key → the order it bought (or `None`: seen, answered 503).
    keys: HashMap<String, Option<String>>,
}

fn error(status: StatusCode, code: &str) -> (StatusCode, Json<Value>) {
    (status, Json(json!({ "error": code })))
}

async fn setup(State(s): State<StandIn>, Json(body): Json<Value>) -> StatusCode {
    let mut shop = s.state.lock().unwrap();
    *shop = Shop {
        stock: body["stock"].as_i64().unwrap_or(0),
        ..Shop::default()
    };
    StatusCode::OK
}

async fn order(State(s): State<StandIn>, headers: HeaderMap) -> (StatusCode, Json<Value>) {
    s.orders.fetch_add(1, Ordering::SeqCst);
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut shop = s.state.lock().unwrap();
    if let Some(k) = &key {
        match shop.keys.get(k) {
            None if s.busy_first => {
                shop.keys.insert(k.clone(), None);
                return error(StatusCode::SERVICE_UNAVAILABLE, "busy");
            }
            Some(Some(id)) if !s.ignores_key => {
                return (StatusCode::CREATED, Json(json!({ "order_id": id })));
            }
            _ => {}
        }
    }
    if shop.stock <= 0 {
        return error(StatusCode::CONFLICT, "sold_out");
    }
    shop.stock -= 1;
    let id = format!("1-{}", uuid::Uuid::now_v7().simple());
    shop.orders.insert(id.clone(), "pending_payment");
    if let Some(k) = key {
        shop.keys.insert(k, Some(id.clone()));
    }
    (StatusCode::CREATED, Json(json!({ "order_id": id })))
}

async fn pay(State(s): State<StandIn>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
    let mut shop = s.state.lock().unwrap();
    let Some(status) = shop.orders.get_mut(&id) else {
        return error(StatusCode::NOT_FOUND, "unknown_order");
    };
    match *status {
        "cancelled" if !s.pays_cancelled => error(StatusCode::CONFLICT, "invalid_state"),
        _ => {
            *status = "paid";
            (
                StatusCode::OK,
                Json(json!({ "order_id": id, "status": "paid" })),
            )
        }
    }
}

async fn cancel(State(s): State<StandIn>, Path(id): Path<String>) -> (StatusCode, Json<Value>) {
    let mut shop = s.state.lock().unwrap();
    let Some(status) = shop.orders.get(&id).copied() else {
        return error(StatusCode::NOT_FOUND, "unknown_order");
    };
    match status {
        "paid" => error(StatusCode::CONFLICT, "invalid_state"),
        "cancelled" => (
            StatusCode::OK,
            Json(json!({ "order_id": id, "status": "cancelled" })),
        ),
        _ => {
            shop.orders.insert(id.clone(), "cancelled");
            shop.stock += 1;
            (
                StatusCode::OK,
                Json(json!({ "order_id": id, "status": "cancelled" })),
            )
        }
    }
}

/// The stand-in on its own loopback port: its base URL.
async fn spawn(shop: StandIn) -> String {
    let app = Router::new()
        .route("/api/items/{id}", put(setup))
        .route("/api/orders", post(order))
        .route("/api/orders/{id}/pay", post(pay))
        .route("/api/orders/{id}/cancel", post(cancel))
        .with_state(shop);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// The stand-in's API, with `[adversarial]` and `[client]` sections appended.
fn stand_in_scenario(extra: &str) -> String {
    format!(
        r#"
name = "adversarial-stand-in"
[item]
id = 1
stock = 40
[buyers]
count = 80
seed = 5
arrival = "uniform"
window_s = 1.0
[after_order]
pay = 1
think_ms = [10, 50]
[target]
setup = {{ method = "PUT", path = "/api/items/{{item_id}}", body = '{{"stock": {{stock}}}}' }}
order = {{ method = "POST", path = "/api/orders", body = '{{"item_id": {{item_id}}, "user_id": "{{user_id}}", "qty": {{qty}}}}' }}
pay = {{ method = "POST", path = "/api/orders/{{order_id}}/pay" }}
cancel = {{ method = "POST", path = "/api/orders/{{order_id}}/cancel" }}
order_id_field = "order_id"
outcomes = [
  {{ status = ["201"], outcome = "created" }},
  {{ status = ["2xx"], outcome = "ok" }},
  {{ status = ["409"], field = "error", equals = "sold_out", outcome = "sold_out" }},
  {{ status = ["409"], field = "error", equals = "invalid_state", outcome = "rejected" }},
  {{ status = ["503"], outcome = "busy" }},
  {{ status = ["404"], outcome = "not_found" }},
]
{extra}
"#
    )
}

/// `oversell attack` at `base` with `scenario`: the run, its report and its `report.md`.
async fn attack(base: &str, scenario: &str) -> (CliRun, Value, String) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("scenario.toml");
    std::fs::write(&file, scenario).unwrap();
    let out = tmp.path().join("reports");
    let run = against("attack", base, file.to_str().unwrap(), &out, &[]).await;
    assert_eq!(run.code, 0, "{}", run.both());
    let report = only_report(&out);
    let md = std::fs::read_to_string(only_report_dir(&out).join("report.md")).unwrap();
    (run, report, md)
}

#[tokio::test]
async fn a_shop_that_ignores_the_idempotency_key_is_caught_buying_twice_for_one_key() {
    let base = spawn(StandIn {
        ignores_key: true,
        ..StandIn::default()
    })
    .await;

    let (_, report, _) = attack(
        &base,
        &stand_in_scenario("[adversarial]\nresend_same_key = 0.5\n"),
    )
    .await;

    let r = &report["runs"][0];
    let dups = r["duplicate_orders_per_key"].as_u64().unwrap();
    assert!(dups > 0, "{r}");
    let example = &r["duplicate_key_examples"][0];
    assert_eq!(
        example["order_ids"].as_array().unwrap().len(),
        2,
        "{example}"
    );
    assert_eq!(example["seen_in"], "clients' records");
    // Each resend got a second order (or, once the stock ran out, a refusal): wrong answers.
    assert!(r["wrong_answers"].as_u64().unwrap() >= dups, "{r}");
    let examples = r["wrong_answer_examples"].as_array().unwrap();
    assert!(
        examples.iter().all(|w| w["script"] == "resend_same_key"),
        "{r}"
    );
    let wrong = examples
        .iter()
        .find(|w| w["why"] == "resend_new_order")
        .unwrap();
    assert!(
        wrong["sequence"]
            .as_str()
            .unwrap()
            .starts_with("order → created, order → created"),
        "{wrong}"
    );
    assert_eq!(
        r["client_oversell"], 0,
        "the second orders were real units, within the stock: {r}"
    );
    let proves = |m: &str| {
        r["proofs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["findings"].as_array().unwrap().iter().any(|f| f == m))
    };
    assert!(
        proves("duplicate_orders_per_key") && proves("wrong_answers"),
        "{r}"
    );
}

#[tokio::test]
async fn the_same_resends_at_a_shop_that_keeps_its_keys_find_nothing() {
    let shop = StandIn::default();
    let base = spawn(shop.clone()).await;

    let (_, report, _) = attack(
        &base,
        &stand_in_scenario("[adversarial]\nresend_same_key = 0.5\npay_after_cancel = 0.3\n"),
    )
    .await;

    let r = &report["runs"][0];
    assert!(r["follow_ups"].as_u64().unwrap() > 10, "{r}");
    assert_eq!(r["wrong_answers"], 0, "{}", r["wrong_answer_examples"]);
    assert_eq!(r["duplicate_orders_per_key"], 0, "{r}");
    let acked = r["acknowledged"].as_u64().unwrap();
    let paid = shop
        .state
        .lock()
        .unwrap()
        .orders
        .values()
        .filter(|s| **s != "cancelled")
        .count() as u64;
    assert_eq!(
        acked - r["restocks_seen"].as_u64().unwrap(),
        paid,
        "a replayed order is acknowledged once, a cancel restocks once: {r}"
    );
}

#[tokio::test]
async fn a_shop_that_pays_a_cancelled_order_is_caught_by_wrong_answers() {
    let base = spawn(StandIn {
        pays_cancelled: true,
        ..StandIn::default()
    })
    .await;

    let (_, report, _) = attack(
        &base,
        &stand_in_scenario("[adversarial]\npay_after_cancel = 0.5\n"),
    )
    .await;

    let r = &report["runs"][0];
    assert!(r["wrong_answers"].as_u64().unwrap() > 0, "{r}");
    let wrong = &r["wrong_answer_examples"][0];
    assert_eq!(wrong["script"], "pay_after_cancel");
    assert_eq!(wrong["why"], "paid_and_cancelled");
    assert_eq!(
        wrong["sequence"], "order → created, cancel → ok, pay → ok",
        "{wrong}"
    );
    assert!(wrong["order_id"].as_str().unwrap().starts_with("1-"));
    assert_eq!(r["duplicate_orders_per_key"], 0, "{r}");
    let proof = r["proofs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["findings"][0] == "wrong_answers")
        .expect("the wrong answer's proof");
    assert!(
        proof["claim"]
            .as_str()
            .unwrap()
            .contains("order → created, cancel → ok, pay → ok"),
        "{proof}"
    );
}

#[tokio::test]
async fn a_retry_resends_the_same_key_and_is_counted_apart_from_first_attempts() {
    let shop = StandIn {
        busy_first: true,
        ..StandIn::default()
    };
    let base = spawn(shop.clone()).await;
    let retry = "[client]\nretry = { on = [\"5xx\"], times = 2, backoff_ms = [20] }\n";

    let (run, report, md) = attack(&base, &stand_in_scenario(retry)).await;

    let r = &report["runs"][0];
    let order = &r["requests"]["order"];
    assert_eq!(
        order["outcomes"]["busy"], 80,
        "every first attempt: {order}"
    );
    assert!(order["outcomes"].get("created").is_none(), "{order}");
    assert_eq!(order["retries"]["total"], 80, "one retry each: {order}");
    assert_eq!(order["retries"]["outcomes"]["created"], 40, "{order}");
    assert_eq!(order["retries"]["outcomes"]["sold_out"], 40, "{order}");
    assert_eq!(shop.orders.load(Ordering::SeqCst), 160);
    assert_eq!(r["acknowledged"], 40, "{r}");
    assert_eq!(r["duplicate_orders_per_key"], 0, "{r}");
    assert_eq!(
        r["order_errors"], 80,
        "the error rate counts first attempts: {r}"
    );
    assert_eq!(r["order_retries"], 80, "{r}");
    assert!(
        md.contains("| order (retries) | 80 |"),
        "the request table shows the retries apart: {md}"
    );
    assert!(
        run.stdout.contains("retries"),
        "the terminal says retries are apart: {}",
        run.both()
    );
}
