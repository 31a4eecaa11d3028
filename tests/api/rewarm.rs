//! Recovery after Redis lost a redis-lua sale: the rewarm route, the shop noticing by itself,
//! and `PUT` refusing to wipe a sale that has orders. Data loss is simulated by deleting the
//! test's own key prefix (SCAN + DEL): never FLUSHALL on the shared Redis.

use crate::helpers::*;
use oversell::testing::inventory::redis_lua::ItemKeys;
use oversell::testing::inventory::Strategy;
use oversell::testing::model::Order;
use oversell::testing::store::Backend;
use redis::AsyncCommands;
use serde_json::{json, Value};
use std::time::Duration;

async fn post(app: &TestApp, path: &str) -> (u16, Value) {
    let r = app
        .client
        .post(format!("{}{path}", app.address))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn put_sale(app: &TestApp, path: &str, stock: i64) -> (u16, Value) {
    let r = app
        .client
        .put(format!("{}{path}", app.address))
        .json(&json!({"stock": stock, "name": "tea", "purchase_limit": 1}))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

async fn buy(app: &TestApp, user: &str) -> (u16, Value) {
    app.order(json!({"item_id": 1, "user_id": user, "qty": 1, "device_id": format!("dev-{user}")}))
        .await
}

async fn orders_in_db(app: &TestApp) -> Vec<Order> {
    let mut orders = app.app_inventory.store().orders_for_item(1).await.unwrap();
    orders.sort_by(|a, b| a.id.cmp(&b.id));
    orders
}

async fn metric_sum(app: &TestApp, name: &str, filter: &str) -> f64 {
    let text = app.metrics_text().await;
    oversell::testing::probe::scrape::sum(
        &oversell::testing::probe::scrape::parse(&text),
        name,
        Some(filter),
    )
}

/// A sale with 8 orders of 20 units (3 paid, 1 cancelled, 4 pending), all persisted.
async fn a_sale_under_way(app: &TestApp) -> Vec<String> {
    app.setup_sale(1, 20, 1).await;
    let mut ids = Vec::new();
    for i in 0..8 {
        let (s, body) = buy(app, &format!("u{i}")).await;
        assert_eq!(s, 201, "{body}");
        ids.push(body["order_id"].as_str().unwrap().to_string());
    }
    for id in &ids[0..3] {
        assert_eq!(app.order_action(id, "pay").await.0, 200);
    }
    assert_eq!(app.order_action(&ids[3], "cancel").await.0, 200);
    let audit = app.drained_audit(1).await;
    assert_eq!(audit["db_stock"], 13, "{audit}");
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_loses_a_sale_rewarm_rebuilds_it_touching_no_order_and_sales_go_on_without_oversell(
) {
    // Arrange: no background check, so the route alone rebuilds.
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.rewarm_check = None;
    let app = spawn_with(config).await;
    let ids = a_sale_under_way(&app).await;
    let before = orders_in_db(&app).await;
    assert_eq!(before.len(), 8);

    // Act: Redis loses every key of the sale, then the operator rewarms.
    delete_prefix(&app.redis_prefix).await;
    let keys = ItemKeys::new(&app.redis_prefix, 1);
    let mut conn = redis_conn().await;
    let gone: i64 = conn.exists(keys.all().to_vec()).await.unwrap();
    assert_eq!(gone, 0, "the simulated loss removed the sale");
    let (s, rewarm) = post(&app, "/api/items/1/rewarm").await;

    // Assert: rebuilt from the database, which did not change.
    assert_eq!(s, 200, "{rewarm}");
    assert_eq!(rewarm["outcome"], "rebuilt", "{rewarm}");
    assert_eq!(
        (&rewarm["stock"], &rewarm["orders"], &rewarm["pending"]),
        (&json!(13), &json!(8), &json!(4)),
        "{rewarm}"
    );
    assert_eq!(
        orders_in_db(&app).await,
        before,
        "rewarm changed the database"
    );
    let stock: Option<i64> = conn.get(&keys.stock).await.unwrap();
    assert_eq!(stock, Some(13), "Redis stock is the database's");
    let pending: i64 = conn.zcard(&keys.expiry).await.unwrap();
    let restocked: i64 = conn.scard(&keys.restocked).await.unwrap();
    let held: Option<i64> = conn.hget(&keys.holders, "u0").await.unwrap();
    let stream: bool = conn.exists(&keys.events).await.unwrap();
    assert_eq!((pending, restocked, held, stream), (4, 1, Some(1), true));

    // The state machine and the holders came back with the orders.
    assert_eq!(buy(&app, "u0").await.0, 409, "a holder buys again");
    let (s, body) = app
        .order(json!({"item_id": 1, "user_id": "fresh", "qty": 1, "device_id": "dev-u1"}))
        .await;
    assert_eq!((s, body["error"].as_str()), (409, Some("duplicate")));
    assert_eq!(app.order_action(&ids[4], "pay").await.0, 200);
    let (s, body) = app.order_action(&ids[5], "cancel").await;
    assert_eq!((s, &body["restocked"]), (200, &json!(1)), "{body}");
    assert_eq!(app.order_action(&ids[3], "pay").await.0, 409, "cancelled");
    let (_, body) = app.order_action(&ids[3], "cancel").await;
    assert_eq!(body["restocked"], 0, "restocked once only: {body}");

    // Sales go on: 14 units left, 30 new buyers.
    let mut created = 0;
    for i in 0..30 {
        let (s, body) = buy(&app, &format!("late-{i}")).await;
        match s {
            201 => created += 1,
            409 => assert_eq!(body["error"], "sold_out", "{body}"),
            _ => panic!("unexpected {s} {body}"),
        }
    }
    assert_eq!(created, 14);
    let audit = app.drained_audit(1).await;
    assert_eq!(
        (
            &audit["oversell"],
            &audit["sold"],
            &audit["db_stock"],
            &audit["redis_stock"]
        ),
        (&json!(0), &json!(20), &json!(0), &json!(0)),
        "{audit}"
    );
    let (s, pass) = post(&app, "/api/items/1/reconcile").await;
    assert_eq!((s, &pass["residual"]), (200, &json!(0)), "{pass}");
    let after = orders_in_db(&app).await;
    let untouched = |o: &&Order| o.id != ids[4] && o.id != ids[5];
    assert_eq!(
        after
            .iter()
            .filter(|o| before.iter().any(|b| b.id == o.id))
            .filter(untouched)
            .collect::<Vec<_>>(),
        before.iter().filter(untouched).collect::<Vec<_>>(),
        "orders nobody acted on are unchanged"
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shop_notices_a_lost_sale_by_itself_and_rebuilds_it() {
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.rewarm_check = Some(Duration::from_millis(200));
    let app = spawn_with(config).await;
    a_sale_under_way(&app).await;
    let before = orders_in_db(&app).await;
    let keys = ItemKeys::new(&app.redis_prefix, 1);
    let mut conn = redis_conn().await;

    delete_prefix(&app.redis_prefix).await;
    let mut stock: Option<i64> = None;
    for _ in 0..100 {
        stock = conn.get(&keys.stock).await.unwrap();
        if stock.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert_eq!(stock, Some(13), "rebuilt within 5 s, with no request");
    assert_eq!(orders_in_db(&app).await, before);
    assert!(metric_sum(&app, "oversell_rewarms_total", "trigger=\"check\"").await >= 1.0);
    assert_eq!(buy(&app, "after").await.0, 201);
    assert_eq!(app.drained_audit(1).await["db_stock"], 12);
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_that_finds_the_sale_gone_has_it_rebuilt() {
    // No periodic check: only the purchase's not_warmed answer wakes the rebuild.
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.rewarm_check = None;
    let app = spawn_with(config).await;
    a_sale_under_way(&app).await;

    delete_prefix(&app.redis_prefix).await;
    let (s, body) = buy(&app, "first").await;
    assert_eq!((s, body["error"].as_str()), (503, Some("not_warmed")));
    let mut last = (0, Value::Null);
    for _ in 0..100 {
        last = buy(&app, "first").await;
        if last.0 != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    assert_eq!(last.0, 201, "{:?}", last.1);
    assert!(metric_sum(&app, "oversell_rewarms_total", "trigger=\"purchase\"").await >= 1.0);
    assert_eq!(app.drained_audit(1).await["db_stock"], 12);
    app.teardown().await;
}

async fn put_refuses_a_sale_with_orders(strategy: Strategy) {
    let app = spawn_app(strategy, Backend::Postgres).await;
    app.setup_sale(1, 5, 1).await;
    let (s, _) = buy(&app, "u").await;
    assert_eq!(s, 201);
    // redis-lua: refused even before the order reached the database.
    let (s, body) = put_sale(&app, "/api/items/1", 9).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (409, Some("has_orders")),
        "{strategy}: {body}"
    );
    assert!(body["detail"].as_str().unwrap().contains("?reset=true"));
    let audit = app.drained_audit(1).await;
    assert_eq!(
        (&audit["sold"], &audit["db_stock"], &audit["initial_stock"]),
        (&json!(1), &json!(4), &json!(5)),
        "{strategy}: nothing changed: {audit}"
    );
    assert_eq!(put_sale(&app, "/api/items/1", 9).await.0, 409);
    assert_eq!(put_sale(&app, "/api/items/1?reset=maybe", 9).await.0, 400);

    let (s, body) = put_sale(&app, "/api/items/1?reset=true", 9).await;

    assert_eq!(s, 200, "{body}");
    let audit = app.drained_audit(1).await;
    assert_eq!(
        (&audit["sold"], &audit["db_stock"], &audit["initial_stock"]),
        (&json!(0), &json!(9), &json!(9)),
        "{strategy}: a fresh sale: {audit}"
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_on_a_redis_lua_item_with_orders_is_refused_unless_a_reset_is_asked_for() {
    put_refuses_a_sale_with_orders(Strategy::RedisLua).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_on_a_for_update_item_with_orders_is_refused_unless_a_reset_is_asked_for() {
    put_refuses_a_sale_with_orders(Strategy::ForUpdate).await;
}
