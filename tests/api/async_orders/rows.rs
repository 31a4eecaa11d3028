//! `--orders-query` against the asynchronous stand-in: lost decided orders named, exactly one
//! missing id, wrong columns refused, MySQL rows, duplicate buyers.

use super::shop::{spawn_shop, Drop, Shape};
use super::{scenario, SOLD};
use crate::helpers::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

pub(super) const ORDERS: &str = "SELECT order_id, user_id, qty, status FROM shop_orders";

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
        &["--oracle-sql", &db, "--orders-query", ORDERS],
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

#[tokio::test]
async fn the_orders_query_reads_mysql_rows_with_integer_ids_in_a_read_only_transaction() {
    use oversell::testing::rehearsal::{OracleSource, OrdersQuery, Row};
    use oversell::testing::store::Backend;
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
        timeout: std::time::Duration::from_secs(30),
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
        &["--oracle-sql", &db, "--orders-query", ORDERS],
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
