//! The order state machine: pay, cancel, double cancel, cancel after pay.

use crate::helpers::*;
use oversell::testing::inventory::Strategy;
use oversell::testing::store::Backend;
use serde_json::json;
use std::time::Duration;

async fn state_machine(strategy: Strategy, backend: Backend) {
    // Arrange
    let app = spawn_app(strategy, backend).await;
    app.setup_sale(1, 5, 1).await;
    let (s, a) = app
        .order(json!({"item_id": 1, "user_id": "alice", "qty": 1}))
        .await;
    assert_eq!(s, 201, "{a}");
    let (s, b) = app
        .order(json!({"item_id": 1, "user_id": "bob", "qty": 1}))
        .await;
    assert_eq!(s, 201, "{b}");
    let alice = a["order_id"].as_str().unwrap();
    let bob = b["order_id"].as_str().unwrap();
    assert_eq!(a["status"], "pending_payment");

    // Act + Assert: pay alice; paying twice is fine; cancelling a paid order is refused.
    let (s, _) = app.order_action(alice, "pay").await;
    assert_eq!(s, 200);
    let (s, _) = app.order_action(alice, "pay").await;
    assert_eq!(s, 200, "paying a paid order again is idempotent");
    let (s, body) = app.order_action(alice, "cancel").await;
    assert_eq!(s, 409, "cancelling a paid order must be refused: {body}");
    assert_eq!(body["error"], "invalid_state");

    // Cancel bob twice: restocks once.
    let (s, body) = app.order_action(bob, "cancel").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["restocked"], 1);
    let (s, body) = app.order_action(bob, "cancel").await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["restocked"], 0, "a second cancel restocks nothing");
    let (s, _) = app.order_action(bob, "pay").await;
    assert_eq!(s, 409, "a cancelled order cannot be paid");

    // Bob may buy again: his unit went back and he no longer holds the limit.
    let (s, again) = app
        .order(json!({"item_id": 1, "user_id": "bob", "qty": 1}))
        .await;
    assert_eq!(s, 201, "{again}");
    let (s, dup) = app
        .order(json!({"item_id": 1, "user_id": "bob", "qty": 1}))
        .await;
    assert_eq!((s, dup["error"].as_str()), (409, Some("duplicate")));

    let audit = app.drained_audit(1).await;
    assert_eq!(audit["sold"], 2, "{audit}");
    assert_eq!(audit["db_stock"], 3, "{audit}");
    assert_eq!(audit["orders_by_status"]["cancelled"], 1, "{audit}");
    assert_eq!(audit["orders_by_status"]["paid"], 1, "{audit}");
    if strategy.uses_redis() {
        assert_eq!(audit["redis_stock"], 3, "{audit}");
    }
    let (s, _) = app.order_action("1-doesnotexist", "cancel").await;
    assert_eq!(s, 404);
    app.teardown().await;
}

#[tokio::test]
async fn for_update_orders_follow_the_state_machine() {
    state_machine(Strategy::ForUpdate, Backend::Postgres).await;
}

#[tokio::test]
async fn naive_orders_follow_the_state_machine() {
    state_machine(Strategy::Naive, Backend::Postgres).await;
}

#[tokio::test]
async fn optimistic_orders_follow_the_state_machine_on_mysql() {
    state_machine(Strategy::Optimistic, Backend::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lua_orders_follow_the_state_machine() {
    state_machine(Strategy::RedisLua, Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_lua_orders_follow_the_state_machine_on_mysql() {
    state_machine(Strategy::RedisLua, Backend::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_orders_follow_the_state_machine() {
    state_machine(Strategy::Conditional, Backend::Postgres).await;
    state_machine(Strategy::Conditional, Backend::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_orders_follow_the_state_machine() {
    state_machine(Strategy::Batched, Backend::Postgres).await;
    state_machine(Strategy::Batched, Backend::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_buckets_orders_follow_the_state_machine() {
    state_machine(Strategy::RedisBuckets, Backend::Postgres).await;
    state_machine(Strategy::RedisBuckets, Backend::Mysql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drained_route_says_no_while_a_purchase_runs_and_yes_after() {
    // Arrange: a purchase that spends 1.5 s under the lock.
    let mut config = test_config(Strategy::ForUpdate, Backend::Postgres);
    config.inventory.work = Duration::from_millis(1500);
    let app = spawn_with(config).await;
    app.setup_sale(1, 5, 1).await;
    assert_eq!(app.drained(1).await.1["queue_drained"], json!(true));
    // Act
    let buying = {
        let (client, address) = (app.client.clone(), app.address.clone());
        tokio::spawn(async move {
            client
                .post(format!("{address}/api/orders"))
                .json(&json!({"item_id": 1, "user_id": "alice", "qty": 1}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    let during = eventually("drained says no", Duration::from_secs(1), || async {
        let (s, body) = app.drained(1).await;
        (s == 200 && body["queue_drained"] == json!(false)).then_some(body)
    })
    .await;
    let bought = buying.await.unwrap();
    let after = app.drained(1).await;
    let unknown = app.drained(99).await;
    // Assert
    assert_eq!(during["item_id"], json!(1), "{during}");
    assert_eq!(bought, 201);
    assert_eq!(after, (200, json!({"item_id": 1, "queue_drained": true})));
    assert_eq!(unknown.0, 404, "{}", unknown.1);
    assert_eq!(unknown.1["error"], "unknown_item");
    app.teardown().await;
}
