//! Asynchronous shops: orders answered "accepted" (202 with a ticket) and decided later by a
//! background task, found by polling (`outcome = "pending"`, `[target.poll]`); the oracle read
//! once the shop has settled; a run that tested nothing.
//!
//! The stand-in decides each order 0.5–2 s after accepting it, on an atomic stock counter, and
//! hands the row to a writer task that inserts it into a real PostgreSQL table (its own
//! database per test). Variants lose decided orders (the poll says "confirmed", the row is
//! never written), pause the writer (the backlog endpoint counts the rows waiting), or refuse
//! every order with 401.

use crate::helpers::*;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use oversell::store::Backend;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// Which orders the stand-in drops after telling the client "confirmed".
#[derive(Clone, Copy, PartialEq)]
enum Drop {
    None,
    /// Every n-th confirmed order.
    Every(u64),
    /// Only the n-th confirmed order.
    Only(u64),
}

#[derive(Clone, Copy)]
struct Shape {
    drop: Drop,
    /// The writer holds every row this long after the sale is set up.
    writer_paused: Duration,
    /// Every order is answered 401.
    unauthorized: bool,
}

impl Shape {
    const HONEST: Shape = Shape {
        drop: Drop::None,
        writer_paused: Duration::ZERO,
        unauthorized: false,
    };
}

#[derive(Clone)]
struct Shop {
    shape: Shape,
    stock: Arc<AtomicI64>,
    tickets: Arc<AtomicU64>,
    confirmed: Arc<AtomicU64>,
    /// Ticket → "queued", "confirmed" or "sold_out".
    status: Arc<Mutex<HashMap<String, &'static str>>>,
    /// Tickets confirmed to the client whose row was never written.
    dropped: Arc<Mutex<BTreeSet<String>>>,
    /// Rows decided and not written yet.
    backlog: Arc<AtomicI64>,
    writes: mpsc::UnboundedSender<(String, String)>,
    /// When the writer may write (the set-up moves it).
    writer_from: Arc<Mutex<tokio::time::Instant>>,
}

async fn reset(State(s): State<Shop>, Json(b): Json<Value>) -> StatusCode {
    s.stock
        .store(b["stock"].as_i64().unwrap_or(0), Ordering::SeqCst);
    *s.writer_from.lock().unwrap() = tokio::time::Instant::now() + s.shape.writer_paused;
    StatusCode::OK
}

async fn order(State(s): State<Shop>, Json(b): Json<Value>) -> (StatusCode, Json<Value>) {
    if s.shape.unauthorized {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "login first"})),
        );
    }
    let n = s.tickets.fetch_add(1, Ordering::SeqCst);
    let ticket = format!("t-{n}");
    let user = b["user"].as_str().unwrap_or_default().to_string();
    s.status.lock().unwrap().insert(ticket.clone(), "queued");
    let shop = s.clone();
    let t = ticket.clone();
    tokio::spawn(async move {
        // Decided 0.5–2 s after it was accepted.
        tokio::time::sleep(Duration::from_millis(500 + (n * 389) % 1500)).await;
        let bought = shop
            .stock
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                (v > 0).then(|| v - 1)
            })
            .is_ok();
        if !bought {
            shop.status.lock().unwrap().insert(t, "sold_out");
            return;
        }
        let k = shop.confirmed.fetch_add(1, Ordering::SeqCst) + 1;
        let lose = match shop.shape.drop {
            Drop::None => false,
            Drop::Every(e) => k % e == 0,
            Drop::Only(o) => k == o,
        };
        if lose {
            shop.dropped.lock().unwrap().insert(t.clone());
        } else {
            shop.backlog.fetch_add(1, Ordering::SeqCst);
            let _ = shop.writes.send((t.clone(), user));
        }
        shop.status.lock().unwrap().insert(t, "confirmed");
    });
    (StatusCode::ACCEPTED, Json(json!({"ticket": ticket})))
}

async fn poll(State(s): State<Shop>, Path(ticket): Path<String>) -> (StatusCode, Json<Value>) {
    match s.status.lock().unwrap().get(&ticket) {
        Some(st) => (StatusCode::OK, Json(json!({"state": st}))),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "no such ticket"})),
        ),
    }
}

async fn backlog(State(s): State<Shop>) -> Json<Value> {
    Json(json!({"queue": {"depth": s.backlog.load(Ordering::SeqCst)}}))
}

/// Writes decided rows, one at a time, once the pause is over.
async fn writer(db: PgPool, shop: Shop, mut rows: mpsc::UnboundedReceiver<(String, String)>) {
    while let Some((ticket, user)) = rows.recv().await {
        let from = *shop.writer_from.lock().unwrap();
        tokio::time::sleep_until(from).await;
        sqlx::query(
            "INSERT INTO shop_orders (order_id, user_id, qty, status) VALUES ($1, $2, 1, 'confirmed')",
        )
        .bind(&ticket)
        .bind(&user)
        .execute(&db)
        .await
        .expect("the writer writes");
        shop.backlog.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The stand-in on 127.0.0.1:0 with a fresh database: its base URL, database URL and state.
async fn spawn_shop(shape: Shape) -> (String, String, Shop) {
    use sqlx::migrate::MigrateDatabase;
    let url = fresh_db_url(Backend::Postgres);
    sqlx::Postgres::create_database(&url).await.unwrap();
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .unwrap();
    sqlx::query(
        "CREATE TABLE shop_orders (order_id TEXT PRIMARY KEY, user_id TEXT NOT NULL, \
         qty INT NOT NULL, status TEXT NOT NULL)",
    )
    .execute(&db)
    .await
    .unwrap();
    // An order of an earlier sale: present before this run, never this run's.
    sqlx::query("INSERT INTO shop_orders VALUES ('old-1', 'someone', 1, 'confirmed')")
        .execute(&db)
        .await
        .unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let shop = Shop {
        shape,
        stock: Arc::default(),
        tickets: Arc::default(),
        confirmed: Arc::default(),
        status: Arc::default(),
        dropped: Arc::default(),
        backlog: Arc::default(),
        writes: tx,
        writer_from: Arc::new(Mutex::new(tokio::time::Instant::now())),
    };
    tokio::spawn(writer(db, shop.clone(), rx));
    let app = Router::new()
        .route("/sale", post(reset))
        .route("/orders", post(order))
        .route("/orders/{ticket}", get(poll))
        .route("/backlog", get(backlog))
        .with_state(shop.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, url, shop)
}

/// 40 buyers for 12 units; every order is accepted with a ticket and decided later.
const SCENARIO: &str = r#"
name = "async-shop"
description = "An asynchronous shop: 202 with a ticket, decided later."

[item]
id = 1
stock = 12

[buyers]
count = 40
seed = 5
arrival = "burst"
window_s = 1.0
burst_s = 0.3
burst_share = 0.8

[after_order]
pay = 0
cancel = 0
abandon = 1

[client]
timeout_ms = 5000

[target]
ip_header = ""
order_id_field = "ticket"
setup = { method = "POST", path = "/sale", body = '{"stock": {stock}}' }
order = { method = "POST", path = "/orders", body = '{"user": "{user_id}"}' }
outcomes = [
  { status = ["202"], outcome = "pending" },
  { status = ["4xx"], outcome = "invalid" },
  { status = ["5xx"], outcome = "server_error" },
]

[target.poll]
method = "GET"
path = "/orders/{order_id}"
interval_ms = 200
outcomes = [
  { status = ["200"], field = "state", equals = "queued", outcome = "pending" },
  { status = ["200"], field = "state", equals = "confirmed", outcome = "created" },
  { status = ["200"], field = "state", equals = "sold_out", outcome = "sold_out" },
]
"#;

/// The scenario, edited, in a file under `dir`.
fn scenario(dir: &std::path::Path, edit: impl Fn(String) -> String) -> String {
    let file = dir.join("async.toml");
    std::fs::write(&file, edit(SCENARIO.to_string())).unwrap();
    file.to_str().unwrap().to_string()
}

const SOLD: &str = "SELECT count(*) FROM shop_orders WHERE status = 'confirmed'";

#[tokio::test]
async fn an_asynchronous_shop_is_judged_on_its_decisions_found_by_polling() {
    // Arrange
    let (base, db, shop) = spawn_shop(Shape::HONEST).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| s);

    // Act
    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--sold-query",
            SOLD,
            "--max-send-lag-ms",
            "10000",
        ],
    )
    .await;

    // Assert: every order was accepted, then decided; the verdict is on the decisions.
    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["sold"], 12, "{r}");
    assert_eq!(r["acknowledged"], 12, "{r}");
    assert_eq!(shop.stock.load(Ordering::SeqCst), 0);
    let d = &r["decision"];
    assert_eq!(d["pending"], 40, "{d}");
    assert_eq!(d["decided"], 40, "{d}");
    assert_eq!(d["undecided"], 0, "{d}");
    assert!(
        d["latency"]["p50_ms"].as_f64().unwrap() >= 500.0,
        "the shop decides 0.5 s after accepting at the earliest: {d}"
    );
    let orders = &r["requests"]["order"]["outcomes"];
    assert_eq!(orders["created"], 12, "{orders}");
    assert_eq!(orders["sold_out"], 28, "{orders}");
    assert!(
        orders.get("pending").is_none(),
        "never an order's answer: {orders}"
    );
    assert!(
        r["requests"]["poll"]["total"].as_u64().unwrap() >= 40,
        "polls are their own kind: {r}"
    );
    assert!(
        r["requests"]["order"]["latency"]["p50_ms"]
            .as_f64()
            .unwrap()
            >= 500.0,
        "an order's latency runs to its decision"
    );
    let md = std::fs::read_to_string(only_report_dir(tmp.path()).join("report.md")).unwrap();
    assert!(
        md.contains("40 answered pending, 40 decided, 0 undecided"),
        "{md}"
    );
}

#[test]
fn pending_without_a_poll_step_is_refused_when_the_scenario_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| {
        s[..s.find("[target.poll]").unwrap()].to_string()
    });
    let e = oversell::traffic::Scenario::load(std::path::Path::new(&file))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("target.outcomes[0].outcome") && e.contains("target.poll"),
        "{e}"
    );
}

#[tokio::test]
async fn a_shop_that_refuses_every_order_tested_nothing_and_fails_even_unverified() {
    let (base, _db, _shop) = spawn_shop(Shape {
        unauthorized: true,
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    // The shop's own rules do not read 401: the harness's default does (`unauthorized`).
    let file = scenario(tmp.path(), |s| s.replace("\"4xx\"", "\"400\""));

    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &["--allow-unverified", "--max-send-lag-ms", "10000"],
    )
    .await;

    assert_eq!(run.code, 1, "{}", run.both());
    for failed in ["nothing_sold", "undersell"] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains(failed) && l.trim_end().ends_with("FAIL")),
            "{failed}: {}",
            run.both()
        );
    }
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(
        r["requests"]["order"]["outcomes"]["unauthorized"], 40,
        "{r}"
    );
    assert_eq!(r["nothing_sold"], true, "{r}");
    assert_eq!(
        r["drain"]["settle"]["state"], "unknown",
        "no oracle, no backlog: nothing could tell: {r}"
    );
    assert_eq!(r["undersell"], 12, "12 units left, 40 people refused: {r}");
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains("the shop accepted no order: this run tested nothing"),
        "{r}"
    );
}

const ORDERS: &str = "SELECT order_id, user_id, qty, status FROM shop_orders";

/// The ids `r` names as lost acknowledged orders.
fn lost_ids(r: &Value) -> BTreeSet<String> {
    r["lost_ack_examples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_asynchronous_shop_that_loses_decided_orders_fails_on_lost_acks_naming_them() {
    // Arrange: every 7th confirmed order is never written.
    let (base, db, shop) = spawn_shop(Shape {
        drop: Drop::Every(7),
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| s);

    // Act: the order rows are the oracle; no sold query.
    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--orders-query",
            ORDERS,
            "--max-send-lag-ms",
            "10000",
        ],
    )
    .await;

    // Assert
    assert_eq!(run.code, 1, "{}", run.both());
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("lost_acks") && l.trim_end().ends_with("FAIL")),
        "{}",
        run.both()
    );
    let r = &only_report(tmp.path())["runs"][0];
    let dropped = shop.dropped.lock().unwrap().clone();
    assert_eq!(dropped.len(), 1, "12 confirmed, the 7th dropped");
    assert_eq!(r["acknowledged"], 12, "{r}");
    assert_eq!(
        r["sold"], 11,
        "the rows that hold stock, the old sale's row left out: {r}"
    );
    assert_eq!(r["lost_acks"], 1, "{r}");
    assert_eq!(lost_ids(r), dropped, "the missing ids are named");
    assert_eq!(r["phantom_orders"], 0, "{r}");
    assert_eq!(r["duplicate_buyers"], 0, "{r}");
    assert!(
        r["peak_oversell"].is_null(),
        "no timestamps, no replay: {r}"
    );
    assert!(
        r["oracle_warning"]
            .as_str()
            .unwrap()
            .contains("1 order rows were present before the sale"),
        "{r}"
    );
}

#[tokio::test]
async fn an_order_rows_oracle_finds_exactly_the_one_missing_acknowledged_id() {
    let (base, db, shop) = spawn_shop(Shape {
        drop: Drop::Only(3),
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| s);

    let run = against(
        "attack",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--orders-query",
            ORDERS,
            "--sold-query",
            SOLD,
            "--max-send-lag-ms",
            "10000",
        ],
    )
    .await;

    assert_eq!(
        run.code,
        0,
        "attack reports, it does not gate: {}",
        run.both()
    );
    let r = &only_report(tmp.path())["runs"][0];
    let dropped = shop.dropped.lock().unwrap().clone();
    assert_eq!(dropped.len(), 1);
    assert_eq!(r["lost_acks"], 1, "{r}");
    assert_eq!(lost_ids(r), dropped);
    assert_eq!(r["orders_acknowledged"], 11, "{r}");
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains("lost 1 acknowledged orders"),
        "{r}"
    );
}

#[tokio::test]
async fn an_orders_query_with_the_wrong_columns_is_refused_naming_the_flag_and_the_columns() {
    let (base, db, shop) = spawn_shop(Shape::HONEST).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| s);

    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--orders-query",
            "SELECT user_id, order_id FROM shop_orders",
        ],
    )
    .await;

    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("--orders-query")
            && run
                .stderr
                .contains("order_id, user_id[, qty, status[, idempotency_key]]"),
        "{}",
        run.both()
    );
    assert_eq!(shop.tickets.load(Ordering::SeqCst), 0, "nothing was sent");
}

/// The scenario with the shop's backlog endpoint and a 1 s settle window.
fn with_backlog(s: String) -> String {
    format!(
        "{s}\n[target.settle]\nsettle_s = 1\nbacklog = {{ method = \"GET\", path = \"/backlog\", field = \"queue.depth\" }}\n"
    )
}

#[tokio::test]
async fn a_run_waits_for_a_paused_writer_until_the_backlog_reads_zero() {
    // Arrange: the writer holds every row for 8 s after the set-up, so the oracle's reading
    // does not move while rows are queued: only the backlog says the shop is not done.
    let (base, db, shop) = spawn_shop(Shape {
        writer_paused: Duration::from_secs(8),
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), with_backlog);

    // Act
    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--orders-query",
            ORDERS,
            "--max-send-lag-ms",
            "10000",
        ],
    )
    .await;

    // Assert: every confirmed order is found, because the run waited for the writer.
    assert_eq!(run.code, 0, "{}", run.both());
    assert_eq!(shop.backlog.load(Ordering::SeqCst), 0);
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["lost_acks"], 0, "{r}");
    assert_eq!(r["sold"], 12, "{r}");
    let settle = &r["drain"]["settle"];
    assert_eq!(settle["state"], "settled", "{settle}");
    assert_eq!(settle["backlog_last"], 0, "{settle}");
    assert_eq!(settle["window_ms"], 1000, "{settle}");
    let md = std::fs::read_to_string(only_report_dir(tmp.path()).join("report.md")).unwrap();
    assert!(
        md.contains("settled after") && md.contains("and the backlog at 0"),
        "{md}"
    );
}

#[tokio::test]
async fn a_backlog_that_never_empties_before_the_deadline_is_not_settled_and_fails() {
    let (base, db, _shop) = spawn_shop(Shape {
        writer_paused: Duration::from_secs(120),
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), with_backlog);

    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--orders-query",
            ORDERS,
            "--drain-timeout-s",
            "1",
            "--max-send-lag-ms",
            "10000",
        ],
    )
    .await;

    assert_eq!(run.code, 1, "{}", run.both());
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("not_settled") && l.trim_end().ends_with("FAIL")),
        "{}",
        run.both()
    );
    let r = &only_report(tmp.path())["runs"][0];
    let settle = &r["drain"]["settle"];
    assert_eq!(settle["state"], "not_settled", "{settle}");
    assert!(settle["backlog_last"].as_i64().unwrap() > 0, "{settle}");
    let md = std::fs::read_to_string(only_report_dir(tmp.path()).join("report.md")).unwrap();
    assert!(md.contains("NOT settled within 1000 ms"), "{md}");
}
