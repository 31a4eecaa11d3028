//! Idempotency-Key on real services: a retry with the same key gets the same order on every
//! strategy and backend, and stock moves once; the key is stored with the order.

use crate::helpers::*;
use oversell::testing::inventory::Strategy;
use oversell::testing::store::Backend;
use serde_json::{json, Value};

/// `POST /api/orders` with an optional `Idempotency-Key`: status, whether the answer says it
/// is a replay, and the body.
async fn order_with_key(app: &TestApp, body: &Value, key: Option<&str>) -> (u16, bool, Value) {
    let mut req = app
        .client
        .post(format!("{}/api/orders", app.address))
        .json(body);
    if let Some(k) = key {
        req = req.header("Idempotency-Key", k);
    }
    let r = req.send().await.unwrap();
    let replayed = r
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    (r.status().as_u16(), replayed, r.json().await.unwrap())
}

fn buyer(user: &str) -> Value {
    json!({ "item_id": 1, "user_id": user, "qty": 1 })
}

async fn a_retry_gets_the_same_order(strategy: Strategy, backend: Backend) {
    // Arrange
    let app = spawn_app(strategy, backend).await;
    app.setup_sale(1, 5, 1).await;
    let label = format!("{strategy}/{}", backend.as_str());

    // Act: an order, then its retry (the client never saw the first answer).
    let (status, replayed, first) = order_with_key(&app, &buyer("u1"), Some("attempt-1")).await;
    let (again_status, again_replayed, again) =
        order_with_key(&app, &buyer("u1"), Some("attempt-1")).await;

    // Assert
    assert_eq!((status, replayed), (201, false), "{label}: {first}");
    let id = first["order_id"].as_str().unwrap().to_string();
    assert_eq!(
        (again_status, again_replayed, again["order_id"].as_str()),
        (201, true, Some(id.as_str())),
        "{label}: the retry is answered with the same order: {again}"
    );
    assert_eq!(again["status"], "pending_payment", "{label}: the same body");

    // Six copies of one attempt at once: one order among them, whatever the interleaving.
    let u2 = buyer("u2");
    let copies = (0..6).map(|_| order_with_key(&app, &u2, Some("attempt-2")));
    let answers = futures_util::future::join_all(copies).await;
    let ids: std::collections::BTreeSet<&str> = answers
        .iter()
        .filter(|(s, _, _)| *s == 201)
        .map(|(_, _, b)| b["order_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "{label}: one order for one key: {answers:?}");
    for (s, _, body) in &answers {
        // redis-lua's gateway holds one request per buyer at a time: a copy that arrives while
        // the first is still being decided is told `409 duplicate` (what Stripe answers for
        // a key in progress); the database strategies decide each copy on its own.
        let in_progress = strategy.uses_redis() && *s == 409;
        assert!(*s == 201 || in_progress, "{label}: {s} {body}");
    }

    // The key names one attempt of one buyer: another buyer reusing it buys nothing.
    let (s, _, body) = order_with_key(&app, &buyer("u3"), Some("attempt-1")).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (422, Some("idempotency_key_reused")),
        "{label}: {body}"
    );
    // Without a key, a second order of the same buyer is a second attempt: a duplicate.
    let (s, _, body) = order_with_key(&app, &buyer("u1"), None).await;
    assert_eq!(
        (s, body["error"].as_str()),
        (409, Some("duplicate")),
        "{label}"
    );
    // A key that is not printable ASCII is refused before anything moves.
    let (s, _, _) = order_with_key(&app, &buyer("u4"), Some("  ")).await;
    assert_eq!(s, 400, "{label}: a blank key");

    let audit = app.drained_audit(1).await;
    assert_eq!(
        audit["sold"], 2,
        "{label}: stock moved once per key: {audit}"
    );
    assert_eq!(audit["db_stock"], 3, "{label}: {audit}");
    if strategy.uses_redis() {
        assert_eq!(audit["redis_stock"], 3, "{label}: {audit}");
    }
    let stored = app.app_inventory.store().order(&id).await.unwrap().unwrap();
    assert_eq!(
        stored.idempotency_key.as_deref(),
        Some("attempt-1"),
        "{label}: the key is stored with its order"
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_with_the_same_idempotency_key_returns_the_same_order_on_postgres() {
    for &strategy in Strategy::all() {
        a_retry_gets_the_same_order(strategy, Backend::Postgres).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_with_the_same_idempotency_key_returns_the_same_order_on_mysql() {
    for &strategy in Strategy::all() {
        a_retry_gets_the_same_order(strategy, Backend::Mysql).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_redis_lost_a_sale_a_retry_still_gets_its_order_from_the_rebuilt_keys() {
    // Arrange: an order persisted, then Redis loses the sale and is rebuilt from the database.
    let app = spawn_app(Strategy::RedisLua, Backend::Postgres).await;
    app.setup_sale(1, 5, 1).await;
    let (_, _, first) = order_with_key(&app, &buyer("u1"), Some("attempt-1")).await;
    app.drained_audit(1).await;
    let redis = app.app_inventory.redis().unwrap();
    let keys = redis.keys(1);
    let mut conn = redis_conn().await;
    let _: () = redis::cmd("DEL")
        .arg(keys.all().to_vec())
        .query_async(&mut conn)
        .await
        .unwrap();
    app.app_inventory.rewarm(1, "manual").await.unwrap();

    // Act
    let (status, replayed, again) = order_with_key(&app, &buyer("u1"), Some("attempt-1")).await;

    // Assert
    assert_eq!((status, replayed), (201, true), "{again}");
    assert_eq!(again["order_id"], first["order_id"]);
    let audit = app.drained_audit(1).await;
    assert_eq!(
        (audit["sold"].as_i64(), audit["redis_stock"].as_i64()),
        (Some(1), Some(4))
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_the_stock_ran_out_still_gets_its_order_when_a_buyer_may_hold_more() {
    for &strategy in Strategy::all() {
        // Arrange: two units, up to two per buyer; u1 buys one, u2 the last.
        let app = spawn_app(strategy, Backend::Postgres).await;
        app.setup_sale(1, 2, 2).await;
        let (_, _, first) = order_with_key(&app, &buyer("u1"), Some("attempt-1")).await;
        let (s, _, _) = order_with_key(&app, &buyer("u2"), Some("attempt-2")).await;
        assert_eq!(s, 201, "{strategy}");

        // Act: u1's retry passes the limit check and meets an empty stock.
        let (status, replayed, again) = order_with_key(&app, &buyer("u1"), Some("attempt-1")).await;

        // Assert
        assert_eq!((status, replayed), (201, true), "{strategy}: {again}");
        assert_eq!(again["order_id"], first["order_id"], "{strategy}");
        let audit = app.drained_audit(1).await;
        assert_eq!(audit["sold"], 2, "{strategy}: {audit}");
        app.teardown().await;
    }
}
