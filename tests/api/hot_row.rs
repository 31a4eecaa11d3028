//! `conditional` and `batched`, the hot-row strategies: several shops selling on one database,
//! a batch split when stock runs short, a batch whose transaction fails, shutdown with buyers
//! still queued.

use crate::helpers::*;
use futures_util::future::join_all;
use oversell::testing::inventory::Strategy;
use oversell::testing::store::Backend;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

/// A shop for `strategy` whose batches wait `window_ms` for more buyers.
async fn spawn_batching(strategy: Strategy, backend: Backend, window_ms: u64) -> TestApp {
    let mut config = test_config(strategy, backend);
    config.inventory.batch_window = Duration::from_millis(window_ms);
    spawn_with(config).await
}

fn buyer(i: usize) -> Value {
    json!({ "item_id": 1, "user_id": format!("u-{i}"), "qty": 1 })
}

/// Runs SQL on the test database through its own connection (text protocol: triggers too).
async fn exec(url: &str, sql: &str) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

async fn two_shops_on_one_database(strategy: Strategy, backend: Backend) {
    // Arrange: two shops, one database, 20 units.
    let a = spawn_app(strategy, backend).await;
    let mut config = test_config(strategy, backend);
    config.database_url = a.database_url.clone();
    let b = spawn_with(config).await;
    a.setup_sale(1, 20, 1).await;
    let label = format!("{strategy}/{}", backend.as_str());

    // Act: 200 buyers, alternating between the shops, all at once.
    let orders = (0..200).map(|i| {
        let shop = if i % 2 == 0 { &a } else { &b };
        shop.order(buyer(i))
    });
    let answers = join_all(orders).await;

    // Assert: exactly the stock sold between them, every acknowledgement in the database.
    let acked: HashSet<String> = answers
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, b)| b["order_id"].as_str().unwrap().to_string())
        .collect();
    for (s, body) in &answers {
        assert!(matches!(s, 201 | 409), "{label}: {s} {body}");
    }
    let audit = a.drained_audit(1).await;
    assert_eq!(audit["oversell"], 0, "{label}: {audit}");
    assert_eq!(audit["sold"], 20, "{label}: {audit}");
    assert_eq!(audit["db_stock"], 0, "{label}: {audit}");
    assert_eq!(acked.len(), 20, "{label}");
    let stored: HashSet<String> = a
        .app_inventory
        .store()
        .orders_for_item(1)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.id)
        .collect();
    assert_eq!(stored, acked, "{label}");
    b.teardown().await;
    a.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shops_on_one_postgres_never_oversell() {
    two_shops_on_one_database(Strategy::Conditional, Backend::Postgres).await;
    two_shops_on_one_database(Strategy::Batched, Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_shops_on_one_mysql_never_oversell() {
    two_shops_on_one_database(Strategy::Conditional, Backend::Mysql).await;
    two_shops_on_one_database(Strategy::Batched, Backend::Mysql).await;
}

async fn a_short_batch_grants_exactly_the_rest(backend: Backend) {
    // Arrange: 3 units; batches collect for 400 ms, so the 10 buyers below share one.
    let app = spawn_batching(Strategy::Batched, backend, 400).await;
    app.setup_sale(1, 3, 1).await;

    // Act
    let answers = join_all((0..10).map(|i| app.order(buyer(i)))).await;

    // Assert
    let statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        3,
        "{answers:?}"
    );
    for (s, body) in &answers {
        assert!(
            *s == 201 || (*s == 409 && body["error"] == "sold_out"),
            "{s} {body}"
        );
    }
    let audit = app.drained_audit(1).await;
    assert_eq!(
        (audit["sold"].as_i64(), audit["db_stock"].as_i64()),
        (Some(3), Some(0)),
        "{audit}"
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_split_grants_exactly_the_remaining_units_on_postgres() {
    a_short_batch_grants_exactly_the_rest(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_split_grants_exactly_the_remaining_units_on_mysql() {
    a_short_batch_grants_exactly_the_rest(Backend::Mysql).await;
}

async fn a_failed_batch_answers_everyone_and_moves_nothing(backend: Backend) {
    // Arrange: the database refuses any order of the buyer `boom` (a trigger), so the batch
    // holding it fails at its multi-row insert, after its stock update.
    let app = spawn_batching(Strategy::Batched, backend, 400).await;
    app.setup_sale(1, 10, 1).await;
    let trigger = match backend {
        Backend::Postgres => {
            "CREATE FUNCTION refuse_boom() RETURNS trigger AS $$ BEGIN \
             IF NEW.user_id = 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF; \
             RETURN NEW; END $$ LANGUAGE plpgsql; \
             CREATE TRIGGER refuse_boom BEFORE INSERT ON orders \
             FOR EACH ROW EXECUTE FUNCTION refuse_boom();"
        }
        Backend::Mysql => {
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON orders FOR EACH ROW BEGIN \
             IF NEW.user_id = 'boom' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'boom refused'; \
             END IF; END"
        }
    };
    exec(&app.database_url, trigger).await;

    // Act: four buyers and `boom` in one batch.
    let mut bodies: Vec<Value> = (0..4).map(buyer).collect();
    bodies.insert(2, json!({ "item_id": 1, "user_id": "boom", "qty": 1 }));
    let answers = join_all(bodies.into_iter().map(|b| app.order(b))).await;

    // Assert: every waiter told 503, nothing moved; the queue's task lives on.
    for (s, body) in &answers {
        assert_eq!(
            (*s, body["error"].as_str(), body["detail"].as_str()),
            (503, Some("busy"), Some("batch_failed")),
            "{answers:?}"
        );
    }
    let audit = app.drained_audit(1).await;
    assert_eq!(
        (audit["sold"].as_i64(), audit["db_stock"].as_i64()),
        (Some(0), Some(10)),
        "{audit}"
    );
    assert!(app
        .app_inventory
        .store()
        .orders_for_item(1)
        .await
        .unwrap()
        .is_empty());
    let (s, body) = app.order(buyer(7)).await;
    assert_eq!(s, 201, "the next batch goes through: {body}");
    assert!(
        app.metrics_text()
            .await
            .contains("oversell_batch_failures_total"),
        "the failure is counted"
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_answers_every_waiter_503_and_moves_no_stock_on_postgres() {
    a_failed_batch_answers_everyone_and_moves_nothing(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_answers_every_waiter_503_and_moves_no_stock_on_mysql() {
    a_failed_batch_answers_everyone_and_moves_nothing(Backend::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_the_queued_buyers() {
    // Arrange: batches wait a whole second for more buyers.
    let mut app = spawn_batching(Strategy::Batched, Backend::Postgres, 1000).await;
    app.setup_sale(1, 10, 1).await;
    let client = app.client.clone();
    let url = format!("{}/api/orders", app.address);
    let orders = (0..4).map(|i| {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move {
            let r = client.post(url).json(&buyer(i)).send().await.unwrap();
            r.status().as_u16()
        })
    });
    let orders: Vec<_> = orders.collect();
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Act: the shop is told to stop while the buyers wait in the queue.
    app.stop().await;

    // Assert: each was answered, and the orders are in the database.
    for o in orders {
        assert_eq!(o.await.unwrap(), 201);
    }
    let store = oversell::testing::store::Store::connect(
        &app.database_url,
        &oversell::testing::shop::ShopKnobs::default().pool(),
    )
    .await
    .unwrap();
    assert_eq!(store.orders_for_item(1).await.unwrap().len(), 4);
    assert_eq!(store.item(1).await.unwrap().unwrap().stock, 6);
    store.close().await;
    app.teardown().await;
}

async fn one_buyer_at_once_gets_the_limit(strategy: Strategy, backend: Backend) {
    // Arrange: plenty of stock, two units per buyer.
    let app = spawn_app(strategy, backend).await;
    app.setup_sale(1, 100, 2).await;
    let label = format!("{strategy}/{}", backend.as_str());

    // Act: one buyer fires 20 orders at once (no keys: 20 separate attempts).
    let body = json!({ "item_id": 1, "user_id": "greedy", "qty": 1 });
    let answers = join_all((0..20).map(|_| app.order(body.clone()))).await;

    // Assert: exactly the limit granted, the rest refused as duplicates.
    let granted = answers.iter().filter(|(s, _)| *s == 201).count();
    assert_eq!(granted, 2, "{label}: {answers:?}");
    for (s, body) in answers.iter().filter(|(s, _)| *s != 201) {
        assert_eq!(
            (*s, body["error"].as_str()),
            (409, Some("duplicate")),
            "{label}"
        );
    }
    let audit = app.drained_audit(1).await;
    assert_eq!(audit["sold"], 2, "{label}: {audit}");
    assert_eq!(audit["db_stock"], 98, "{label}: {audit}");
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_buyer_racing_itself_gets_exactly_the_limit_on_postgres() {
    one_buyer_at_once_gets_the_limit(Strategy::Conditional, Backend::Postgres).await;
    one_buyer_at_once_gets_the_limit(Strategy::Batched, Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_buyer_racing_itself_gets_exactly_the_limit_on_mysql() {
    one_buyer_at_once_gets_the_limit(Strategy::Conditional, Backend::Mysql).await;
    one_buyer_at_once_gets_the_limit(Strategy::Batched, Backend::Mysql).await;
}
