//! redis-lua with several persistence consumers in one shop (`--consumers`): one consumer
//! group, each entry applied once, and the low-water mark, trimming and reconciliation exact.

use crate::helpers::*;
use futures_util::future::join_all;
use oversell::testing::inventory::redis_lua::{ItemKeys, GROUP};
use oversell::testing::inventory::Strategy;
use oversell::testing::store::Backend;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_consumers_in_one_group_persist_every_order_once_with_cancels() {
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.pipeline.consumers = 4;
    let app = Arc::new(spawn_with(config).await);
    app.setup_sale(1, 150, 1).await;
    // 200 buyers for 150 units, every third one cancels: entries of all kinds, concurrently.
    let tasks = (0..200).map(|i| {
        let app = app.clone();
        tokio::spawn(async move {
            let (s, o) = app
                .order(json!({"item_id": 1, "user_id": format!("u{i}"), "qty": 1}))
                .await;
            if s == 201 && i % 3 == 0 {
                let id = o["order_id"].as_str().unwrap().to_string();
                let (s, c) = app.order_action(&id, "cancel").await;
                assert_eq!(s, 200, "{c}");
            }
            s
        })
    });
    let statuses: Vec<u16> = join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let created = statuses.iter().filter(|s| **s == 201).count() as i64;
    assert!(created >= 150, "{statuses:?}");
    let audit = app.drained_audit(1).await;
    let cancelled = audit["orders_by_status"]["cancelled"].as_i64().unwrap();
    let pending = audit["orders_by_status"]["pending_payment"]
        .as_i64()
        .unwrap();
    assert_eq!(cancelled + pending, created, "{audit}");
    assert_eq!(audit["db_stock"], 150 - pending, "{audit}");
    assert_eq!(audit["redis_stock"], audit["db_stock"], "{audit}");

    // Four consumers of this shop joined the item's one group.
    let keys = ItemKeys::new(&app.redis_prefix, 1);
    let mut conn = redis_conn().await;
    let consumers: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg(&keys.events)
        .arg(GROUP)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(consumers.len(), 4, "{consumers:?}");
    let orders = app.app_inventory.store().orders_for_item(1).await.unwrap();
    assert_eq!(orders.len() as i64, created, "every order persisted once");
    Arc::into_inner(app).unwrap().teardown().await;
}

/// The transactions that stored item 1's order rows: PostgreSQL's `xmin` of each row, in the
/// rows' `created_at_ms` order.
async fn storing_transactions(db: &sqlx::PgPool) -> Vec<i64> {
    sqlx::query_scalar(
        "SELECT xmin::text::bigint FROM orders WHERE item_id = 1 ORDER BY created_at_ms, id",
    )
    .fetch_all(db)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lingering_consumer_stores_the_orders_of_its_wait_in_one_transaction() {
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.pipeline.consumers = 1;
    config.pipeline.linger = Duration::from_secs(2);
    let app = spawn_with(config).await;
    app.setup_sale(1, 10, 1).await;
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&app.database_url)
        .await
        .unwrap();
    let buy = |i: usize| app.order(json!({"item_id": 1, "user_id": format!("u{i}"), "qty": 1}));
    assert_eq!(buy(0).await.0, 201);
    // The first order is stored alone (the consumer was waiting for it); the consumer then
    // lingers, and the three orders bought meanwhile are read and stored together.
    eventually(
        "the first order stored",
        Duration::from_secs(10),
        || async { (storing_transactions(&db).await.len() == 1).then_some(()) },
    )
    .await;
    for i in 1..=3 {
        assert_eq!(buy(i).await.0, 201);
    }
    let xmins = eventually("four orders stored", Duration::from_secs(10), || async {
        Some(storing_transactions(&db).await).filter(|x| x.len() == 4)
    })
    .await;
    db.close().await;
    assert_ne!(
        xmins[0], xmins[1],
        "the first order was stored alone: {xmins:?}"
    );
    assert!(
        xmins[1..].iter().all(|x| *x == xmins[1]),
        "the three orders of the linger share one transaction: {xmins:?}"
    );
    let audit = app.drained_audit(1).await;
    assert_eq!(audit["db_stock"], 6, "{audit}");
    app.teardown().await;
}
