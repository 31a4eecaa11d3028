//! The post-mortem's own design, written by someone else: a shop with the reference shop's API
//! that pre-deducts in Redis (one Lua script reads, checks and decrements) and answers at once,
//! its orders written to PostgreSQL behind it by a writer that batches them a moment later.
//! Its oracle is the owner's SQL on that database: units sold and the stock.
//!
//! - The correct shop passes the gate with default settings, run after run: its database's
//!   stock lags what it acknowledged while the writer holds a batch, so stock samples are never
//!   held against the clients' records unless its backlog is declared.
//! - Its twin loses acknowledged orders (the writer drops every third): with no payment window
//!   declared the missing orders could be unpaid ones the shop released itself, so the gate
//!   says *not verified* and names the declaration; declared, it fails.
//!
//! A real axum server in the test binary, real Redis (own key prefix) and PostgreSQL (own
//! database); the bundled `ci` scenario maps it.

use crate::helpers::*;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

type Answer = (StatusCode, Json<Value>);

/// The pre-deduct: the buyer's limit and the stock read, checked and taken in one step.
const DEDUCT: &str = r"
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
local held = tonumber(redis.call('GET', KEYS[2]) or '0')
if held >= tonumber(ARGV[1]) then return -2 end
if stock < 1 then return -1 end
redis.call('DECR', KEYS[1])
redis.call('INCR', KEYS[2])
return stock - 1
";

/// How long the writer waits to gather a batch (the write-behind's delay).
const LINGER: Duration = Duration::from_millis(80);

/// What the writer applies to the database.
enum Write {
    Order { id: String, user: String },
    Pay(String),
    Cancel(String),
}

#[derive(Clone)]
struct Shop {
    redis: redis::aio::MultiplexedConnection,
    prefix: String,
    limit: Arc<Mutex<i64>>,
    /// Order id → (user, status), the shop's own memory of its orders.
    orders: Arc<Mutex<HashMap<String, (String, &'static str)>>>,
    next: Arc<AtomicU64>,
    writes: mpsc::UnboundedSender<Write>,
    /// Writes sent to the writer and not yet committed: the shop's backlog.
    pending: Arc<std::sync::atomic::AtomicI64>,
    db: PgPool,
}

impl Shop {
    /// Hands `w` to the writer, counted in the backlog until it commits.
    fn write(&self, w: Write) {
        self.pending.fetch_add(1, Ordering::SeqCst);
        let _ = self.writes.send(w);
    }
}

impl Shop {
    fn key(&self, k: &str) -> String {
        format!("{}:{k}", self.prefix)
    }
}

async fn setup(State(s): State<Shop>, Json(body): Json<Value>) -> StatusCode {
    let stock = body["stock"].as_i64().unwrap_or(0);
    *s.limit.lock().unwrap() = body["purchase_limit"].as_i64().unwrap_or(1);
    s.orders.lock().unwrap().clear();
    delete_prefix(&s.prefix).await;
    let mut r = s.redis.clone();
    let _: () = redis::cmd("SET")
        .arg(s.key("stock"))
        .arg(stock)
        .query_async(&mut r)
        .await
        .unwrap();
    sqlx::query("DELETE FROM shop_orders")
        .execute(&s.db)
        .await
        .unwrap();
    sqlx::query("UPDATE shop_stock SET stock = $1")
        .bind(stock)
        .execute(&s.db)
        .await
        .unwrap();
    StatusCode::OK
}

async fn item(State(s): State<Shop>) -> Json<Value> {
    let mut r = s.redis.clone();
    let stock: i64 = redis::cmd("GET")
        .arg(s.key("stock"))
        .query_async(&mut r)
        .await
        .unwrap_or(0);
    Json(json!({ "stock": stock }))
}

async fn order(State(s): State<Shop>, Json(body): Json<Value>) -> Answer {
    let user = body["user_id"].as_str().unwrap_or_default().to_string();
    let limit = *s.limit.lock().unwrap();
    let mut r = s.redis.clone();
    let left: i64 = redis::Script::new(DEDUCT)
        .key(s.key("stock"))
        .key(s.key(&format!("held:{user}")))
        .arg(limit)
        .invoke_async(&mut r)
        .await
        .unwrap();
    match left {
        -2 => return (StatusCode::CONFLICT, Json(json!({ "error": "duplicate" }))),
        -1 => return (StatusCode::CONFLICT, Json(json!({ "error": "sold_out" }))),
        _ => {}
    }
    let id = format!("wb-{}", s.next.fetch_add(1, Ordering::SeqCst) + 1);
    s.orders
        .lock()
        .unwrap()
        .insert(id.clone(), (user.clone(), "pending"));
    s.write(Write::Order {
        id: id.clone(),
        user,
    });
    (StatusCode::CREATED, Json(json!({ "order_id": id })))
}

async fn pay(State(s): State<Shop>, Path(id): Path<String>) -> Answer {
    let ok = match s.orders.lock().unwrap().get_mut(&id) {
        Some((_, st)) if *st == "pending" => {
            *st = "paid";
            true
        }
        Some(_) => false,
        None => return (StatusCode::NOT_FOUND, Json(json!({ "error": "not_found" }))),
    };
    if !ok {
        return (
            StatusCode::CONFLICT,
            Json(json!({ "error": "invalid_state" })),
        );
    }
    s.write(Write::Pay(id));
    (StatusCode::OK, Json(json!({ "status": "paid" })))
}

async fn cancel(State(s): State<Shop>, Path(id): Path<String>) -> Answer {
    let user = match s.orders.lock().unwrap().get_mut(&id) {
        Some((u, st)) if *st == "pending" => {
            *st = "cancelled";
            u.clone()
        }
        Some(_) => {
            return (
                StatusCode::CONFLICT,
                Json(json!({ "error": "invalid_state" })),
            )
        }
        None => return (StatusCode::NOT_FOUND, Json(json!({ "error": "not_found" }))),
    };
    let mut r = s.redis.clone();
    let _: () = redis::pipe()
        .cmd("INCR")
        .arg(s.key("stock"))
        .cmd("DECR")
        .arg(s.key(&format!("held:{user}")))
        .query_async(&mut r)
        .await
        .unwrap();
    s.write(Write::Cancel(id));
    (StatusCode::OK, Json(json!({ "status": "cancelled" })))
}

/// The backlog endpoint: writes not yet committed.
async fn backlog(State(s): State<Shop>) -> Json<Value> {
    Json(json!({ "queue": { "depth": s.pending.load(Ordering::SeqCst) } }))
}

/// The writer: a batch a little while after its first write, in one transaction. `loses`: the
/// twin's defect, every third order dropped on the floor.
async fn writer(
    db: PgPool,
    mut rx: mpsc::UnboundedReceiver<Write>,
    pending: Arc<std::sync::atomic::AtomicI64>,
    loses: bool,
) {
    let mut orders = 0u64;
    while let Some(first) = rx.recv().await {
        tokio::time::sleep(LINGER).await;
        let mut batch = vec![first];
        while let Ok(w) = rx.try_recv() {
            batch.push(w);
        }
        let n = batch.len() as i64;
        let mut tx = db.begin().await.unwrap();
        for w in batch {
            match w {
                Write::Order { id, user } => {
                    orders += 1;
                    if loses && orders.is_multiple_of(3) {
                        continue;
                    }
                    sqlx::query(
                        "INSERT INTO shop_orders (id, user_id, status) VALUES ($1, $2, 'pending')",
                    )
                    .bind(id)
                    .bind(user)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                    sqlx::query("UPDATE shop_stock SET stock = stock - 1")
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                }
                Write::Pay(id) => {
                    sqlx::query("UPDATE shop_orders SET status = 'paid' WHERE id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                }
                Write::Cancel(id) => {
                    sqlx::query("UPDATE shop_orders SET status = 'cancelled' WHERE id = $1")
                        .bind(id)
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                    sqlx::query("UPDATE shop_stock SET stock = stock + 1")
                        .execute(&mut *tx)
                        .await
                        .unwrap();
                }
            }
        }
        tx.commit().await.unwrap();
        pending.fetch_sub(n, Ordering::SeqCst);
    }
}

/// The shop on 127.0.0.1:0 over a fresh database and key prefix: its base URL, the database's
/// URL and the prefix.
async fn spawn(loses: bool) -> (String, String, String) {
    use sqlx::migrate::MigrateDatabase;
    let url = fresh_db_url(oversell::testing::store::Backend::Postgres);
    sqlx::Postgres::create_database(&url).await.unwrap();
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .unwrap();
    for ddl in [
        "CREATE TABLE shop_stock (stock BIGINT NOT NULL)",
        "INSERT INTO shop_stock VALUES (0)",
        "CREATE TABLE shop_orders (id TEXT PRIMARY KEY, user_id TEXT NOT NULL, status TEXT NOT NULL)",
    ] {
        sqlx::query(ddl).execute(&db).await.unwrap();
    }
    let (writes, rx) = mpsc::unbounded_channel();
    let pending = Arc::new(std::sync::atomic::AtomicI64::new(0));
    tokio::spawn(writer(db.clone(), rx, pending.clone(), loses));
    let prefix = fresh_prefix();
    let shop = Shop {
        redis: redis_conn().await,
        prefix: prefix.clone(),
        limit: Arc::default(),
        orders: Arc::default(),
        next: Arc::default(),
        writes,
        pending,
        db,
    };
    let app = Router::new()
        .route("/api/items/{id}", put(setup).get(item))
        .route("/api/orders", post(order))
        .route("/api/orders/{id}/pay", post(pay))
        .route("/api/orders/{id}/cancel", post(cancel))
        .route("/backlog", get(backlog))
        .with_state(shop);
    (serve_stand_in(app).await, url, prefix)
}

const SOLD: &str = "SELECT count(*) FROM shop_orders WHERE status <> 'cancelled'";
const STOCK: &str = "SELECT stock FROM shop_stock";

/// `gate --target` the shop with the bundled `ci` scenario, its owner's SQL oracle and `extra`.
async fn gate(base: &str, db: &str, dir: &std::path::Path, extra: &[&str]) -> CliRun {
    gate_with(base, db, dir, &[], extra).await
}

/// [`gate`] with `edits` to the scenario.
async fn gate_with(
    base: &str,
    db: &str,
    dir: &std::path::Path,
    edits: &[(&str, &str)],
    extra: &[&str],
) -> CliRun {
    let scenario = bundled_with("ci", dir, edits);
    let mut args = vec![
        "--oracle-sql",
        db,
        "--sold-query",
        SOLD,
        "--stock-query",
        STOCK,
    ];
    args.extend_from_slice(extra);
    against("gate", base, &scenario, dir, &args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_post_mortems_design_written_behind_passes_twenty_runs_of_twenty_by_default() {
    // Arrange
    let (base, db, prefix) = spawn(false).await;

    // Act, Assert: twenty gates, nothing declared, nothing loosened. A run the generator
    // could not send on time (this machine busy) says so and judges nothing of the shop: it
    // is run again, at most ten times in all.
    let (mut passed, mut bound, mut last) = (0, 0, None);
    while passed < 20 {
        let tmp = tempfile::tempdir().unwrap();
        let run = gate(&base, &db, tmp.path(), &[]).await;
        if run.only_generator_bound() && bound < 10 {
            bound += 1;
            continue;
        }
        assert_eq!(run.code, 0, "run {passed}: {}", run.both());
        let r = &only_report(tmp.path())["runs"][0];
        assert!(r["acknowledged"].as_u64().unwrap() >= 20, "{r}");
        assert_eq!(r["oversell"], 0, "{r}");
        assert_eq!(r["oracle_disagreement"], 0, "{r}");
        assert!(
            r["stock_samples"].as_u64().unwrap() >= 2,
            "the stock was sampled: {r}"
        );
        assert_eq!(
            r["stock_peak_oversell"],
            Value::Null,
            "no sample is held against the clients' records without a backlog signal: {r}"
        );
        passed += 1;
        last = Some(run);
    }
    let run = last.unwrap();
    let stock_peak = run.check_row("stock_peak_oversell").unwrap_or_default();
    assert!(stock_peak.contains("not verified"), "{}", run.both());
    drop_database(&db).await;
    delete_prefix(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn its_twin_that_loses_acknowledged_orders_never_passes_without_a_window_and_fails_with_one()
{
    let (base, db, prefix) = spawn(true).await;

    // Undeclared: never a pass. Where the unpaid orders the shop might have released itself
    // explain the missing ones, not verified, the declaration named; where they cannot, a FAIL.
    let tmp = tempfile::tempdir().unwrap();
    let run = gate(&base, &db, tmp.path(), &[]).await;
    assert_eq!(run.code, 1, "{}", run.both());
    let row = run.check_row("oracle_disagreement").unwrap_or_default();
    let r = &only_report(tmp.path())["runs"][0];
    if row.contains("not verified") {
        assert!(r["unsettled"]["oracle_disagreement"].is_string(), "{r}");
        assert!(
            run.flat_stdout().contains("--payment-window"),
            "names the declaration: {}",
            run.both()
        );
    } else {
        assert!(row.trim_end().ends_with("FAIL"), "{}", run.both());
        assert!(r["oracle_disagreement"].as_i64().unwrap() > 0, "{r}");
    }

    // Declared: a fact, with its figures.
    let tmp = tempfile::tempdir().unwrap();
    let run = gate(&base, &db, tmp.path(), &["--payment-window", "15m"]).await;
    assert_eq!(run.code, 1, "{}", run.both());
    let row = run.check_row("oracle_disagreement").unwrap_or_default();
    assert!(row.trim_end().ends_with("FAIL"), "{}", run.both());
    assert_every_fail_proven(&run);
    let r = &only_report(tmp.path())["runs"][0];
    let lost = r["oracle_disagreement"].as_i64().unwrap();
    assert!(lost >= 5, "every third order dropped: {r}");
    let proofs = r["proofs"].as_array().unwrap();
    assert!(
        proofs.iter().any(|p| p["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "oracle_disagreement")
            && p["claim"].as_str().unwrap().contains(&lost.to_string())),
        "{r}"
    );
    drop_database(&db).await;
    delete_prefix(&prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_its_backlog_declared_the_samples_taken_while_nothing_waited_are_held_against_the_clients(
) {
    let (base, db, prefix) = spawn(false).await;
    let tmp = tempfile::tempdir().unwrap();
    // The shop's API as a mapping, with its backlog endpoint declared.
    let declared = ("[thresholds]", concat!(
        "[target]\n",
        "setup = { method = \"PUT\", path = \"/api/items/{item_id}\", body = '{\"stock\": {stock}, \"purchase_limit\": {purchase_limit}}' }\n",
        "view = { method = \"GET\", path = \"/api/items/{item_id}\" }\n",
        "order = { method = \"POST\", path = \"/api/orders\", body = '{\"item_id\": {item_id}, \"user_id\": \"{user_id}\", \"qty\": {qty}}' }\n",
        "pay = { method = \"POST\", path = \"/api/orders/{order_id}/pay\" }\n",
        "cancel = { method = \"POST\", path = \"/api/orders/{order_id}/cancel\" }\n",
        "order_id_field = \"order_id\"\n",
        "outcomes = [\n",
        "  { status = [\"201\"], outcome = \"created\" },\n",
        "  { status = [\"2xx\"], outcome = \"ok\" },\n",
        "  { status = [\"409\"], field = \"error\", equals = \"sold_out\", outcome = \"sold_out\" },\n",
        "  { status = [\"409\"], field = \"error\", equals = \"duplicate\", outcome = \"duplicate\" },\n",
        "  { status = [\"409\"], field = \"error\", equals = \"invalid_state\", outcome = \"rejected\" },\n",
        "  { status = [\"404\"], outcome = \"not_found\" },\n",
        "]\n\n",
        "[target.settle]\n",
        "backlog = { method = \"GET\", path = \"/backlog\", field = \"queue.depth\" }\n\n",
        "[thresholds]",
    ));

    // Totals cannot show lost acknowledged orders by id: the scenario does not ask.
    let edits = [declared, ("lost_acks = 0\n", "")];
    let mut run = gate_with(&base, &db, tmp.path(), &edits, &[]).await;
    for _ in 0..5 {
        if !run.only_generator_bound() {
            break;
        }
        std::fs::remove_dir_all(only_report_dir(tmp.path())).unwrap();
        run = gate_with(&base, &db, tmp.path(), &edits, &[]).await;
    }

    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert!(r["stock_samples_settled"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(r["stock_peak_oversell"], 0, "{r}");
    drop_database(&db).await;
    delete_prefix(&prefix).await;
}
