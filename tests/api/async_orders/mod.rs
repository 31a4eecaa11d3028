//! Asynchronous shops: orders answered "accepted" (202 with a ticket) and decided later by a
//! background task, found by polling (`outcome = "pending"`, `[target.poll]`); the oracle read
//! once the shop has settled; a run that tested nothing.
//!
//! The stand-in decides each order 0.5–2 s after accepting it, on an atomic stock counter, and
//! hands the row to a writer task that inserts it into a real PostgreSQL table (its own
//! database per test). Variants lose decided orders (the poll says "confirmed", the row is
//! never written), pause the writer (the backlog endpoint counts the rows waiting), or refuse
//! every order with 401.

mod shop;

use crate::helpers::*;
use serde_json::Value;
use shop::{spawn_shop, Drop, Shape};
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

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
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains("the shop had not settled within 1000 ms (its backlog last read"),
        "the verdict says its state never settled: {r}"
    );
}

#[tokio::test]
async fn without_a_backlog_signal_the_report_says_missing_orders_may_be_late() {
    // The writer is paused and nothing says so: the rows stop moving, the run settles, and the
    // confirmed orders are missing. The report must not pretend they are surely lost.
    let (base, db, shop) = spawn_shop(Shape {
        writer_paused: Duration::from_secs(60),
        ..Shape::HONEST
    })
    .await;
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
            ORDERS,
            "--settle-s",
            "1",
            "--max-send-lag-ms",
            "10000",
        ],
    )
    .await;

    assert_eq!(run.code, 1, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["lost_acks"], 12, "{r}");
    assert!(
        shop.backlog.load(Ordering::SeqCst) > 0,
        "still queued in the shop"
    );
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains("orders missing after settling may be late rather than lost"),
        "{r}"
    );
}

#[tokio::test]
async fn a_backlog_query_on_the_shops_database_holds_the_verdict_until_the_outbox_is_empty() {
    let (base, db, _shop) = spawn_shop(Shape {
        writer_paused: Duration::from_secs(8),
        ..Shape::HONEST
    })
    .await;
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
            ORDERS,
            "--backlog-query",
            "SELECT count(*) FROM shop_outbox",
            "--settle-s",
            "1",
            "--max-send-lag-ms",
            "10000",
        ],
    )
    .await;

    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["lost_acks"], 0, "{r}");
    let settle = &r["drain"]["settle"];
    assert_eq!(settle["state"], "settled", "{settle}");
    assert_eq!(settle["backlog_last"], 0, "{settle}");
    assert!(
        settle["backlog"]
            .as_str()
            .unwrap()
            .contains("--backlog-query"),
        "{settle}"
    );
}

#[tokio::test]
async fn an_order_never_decided_within_max_wait_is_undecided_and_indeterminate() {
    let (base, _db, _shop) = spawn_shop(Shape {
        never_decides: true,
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| {
        s.replace("interval_ms = 200", "interval_ms = 200\nmax_wait_ms = 700")
    });

    let run = against(
        "attack",
        &base,
        &file,
        tmp.path(),
        &["--max-send-lag-ms", "10000"],
    )
    .await;

    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    let d = &r["decision"];
    assert_eq!(
        (d["pending"].as_u64(), d["undecided"].as_u64()),
        (Some(40), Some(40)),
        "{d}"
    );
    assert_eq!(r["requests"]["order"]["outcomes"]["undecided"], 40, "{r}");
    assert_eq!(r["indeterminate"], 40, "{r}");
    assert_eq!(r["acknowledged"], 0, "{r}");
    assert_eq!(r["nothing_sold"], true, "nothing was acknowledged: {r}");
}

#[tokio::test]
async fn the_orders_query_reads_mysql_rows_with_integer_ids_in_a_read_only_transaction() {
    use oversell::rehearsal::{OracleSource, OrdersQuery, Row};
    use oversell::store::Backend;
    use sqlx::migrate::MigrateDatabase;
    // Arrange: integer ids and users, a shop's own status spelling.
    let url = fresh_db_url(Backend::Mysql);
    sqlx::MySql::create_database(&url).await.unwrap();
    let db = sqlx::MySqlPool::connect(&url).await.unwrap();
    for sql in [
        "CREATE TABLE orders (id BIGINT PRIMARY KEY, buyer INT NOT NULL, n INT NOT NULL, state VARCHAR(20) NOT NULL)",
        "INSERT INTO orders VALUES (7, 70, 1, 'PAID'), (8, 80, 2, 'Refunded')",
    ] {
        sqlx::raw_sql(sql).execute(&db).await.unwrap();
    }
    let source = |q: &str| OracleSource::Sql {
        url: url.clone(),
        sold_query: None,
        stock_query: None,
        orders: Some(OrdersQuery::new(q, "refunded")),
    };

    // Act
    let oracle =
        source("SELECT id AS order_id, buyer AS user_id, n AS qty, state AS status FROM orders")
            .connect()
            .await
            .unwrap();
    let rows = oracle.rows().await.unwrap().unwrap();
    let wrong = source("SELECT id, buyer FROM orders")
        .connect()
        .await
        .unwrap();
    let refused = wrong.rows().await.unwrap_err().to_string();

    // Assert
    let row = |id: &str, user: &str, qty, status: &str| Row {
        order_id: id.into(),
        user_id: user.into(),
        qty,
        status: Some(status.into()),
        idempotency_key: None,
    };
    assert_eq!(
        rows,
        vec![row("7", "70", 1, "PAID"), row("8", "80", 2, "Refunded")]
    );
    let q = oracle.orders_query().unwrap();
    let this_run = q.this_run(&[], rows, None);
    let held: Vec<bool> = this_run
        .orders
        .iter()
        .map(|o| o.status.holds_stock())
        .collect();
    assert_eq!(held, vec![true, false], "Refunded releases, in any case");
    assert!(
        refused.contains("--orders-query") && refused.contains("`id` where `order_id` is expected"),
        "{refused}"
    );
    drop_database(&url).await;
}

#[tokio::test]
async fn the_order_rows_count_a_bot_holding_several_orders_as_a_duplicate_buyer() {
    // Arrange: stock for everyone, and bots that submit three times each: the stand-in has no
    // per-user limit, so every bot ends with three confirmed orders.
    let (base, db, _shop) = spawn_shop(Shape::HONEST).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| {
        s.replace("stock = 12", "stock = 500").replace(
            "[after_order]",
            "[bots]\nshare = 0.2\nresubmits = 2\ninterval_ms = [5, 20]\nip_pool = 2\n\n[after_order]",
        )
    });

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

    // Assert: the users holding more than the limit, as the table itself has them.
    assert_eq!(run.code, 1, "{}", run.both());
    let pool = sqlx::PgPool::connect(&db).await.unwrap();
    let holders: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT user_id FROM shop_orders WHERE order_id <> 'old-1' \
         GROUP BY user_id HAVING sum(qty) > 1) AS d",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(holders > 0, "some bots bought more than once");
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["duplicate_buyers"], holders, "{r}");
    assert_eq!(r["lost_acks"], 0, "{r}");
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("duplicate_buyers") && l.trim_end().ends_with("FAIL")),
        "{}",
        run.both()
    );
}
