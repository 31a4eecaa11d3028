//! for-update-queued's queue in front of the row lock (`--row-lock-waiters`): how many of the shop's
//! purchases wait on the item's row in the database, the rest waiting in the shop in arrival
//! order; the wait there bounded by the lock timeout; every purchase decided under the lock.

use crate::helpers::*;
use oversell::testing::inventory::Strategy;
use oversell::testing::store::Backend;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Sessions of the test's database (`pool`'s) waiting for a row lock right now: PostgreSQL's
/// `pg_stat_activity`; MariaDB's `SHOW ENGINE INNODB STATUS`, whose waiting transactions name
/// the table they wait on, database included. Not `information_schema.INNODB_TRX`: InnoDB
/// refreshes that table's cache only once nobody has read it for 0.1 s, so a poll every 20 ms
/// (or two tests polling at once) reads the same stale rows for as long as it polls.
pub async fn waiting_on_a_lock(pool: &sqlx::AnyPool, backend: Backend) -> i64 {
    match backend {
        Backend::Postgres => sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND datname = current_database()",
        )
        .fetch_one(pool)
        .await
        .unwrap(),
        Backend::Mysql => {
            use sqlx::Row;
            let mut conn = pool.acquire().await.unwrap();
            let db: String = sqlx::query_scalar("SELECT DATABASE()")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            let status: String = sqlx::raw_sql("SHOW ENGINE INNODB STATUS")
                .fetch_one(&mut *conn)
                .await
                .unwrap()
                .get("Status");
            let table = format!("of table `{db}`.`");
            status
                .split("\n---TRANSACTION ")
                .filter(|t| t.contains("TRX HAS BEEN WAITING") && t.contains(&table))
                .count() as i64
        }
    }
}

/// Another session of the test's database (`url`) holding item 1's row lock, as a cancel in
/// progress does: its pool, and the transaction to end to release the lock.
pub async fn hold_the_row_lock(
    url: &str,
) -> (sqlx::AnyPool, sqlx::Transaction<'static, sqlx::Any>) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT id FROM items WHERE id = 1 FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();
    (pool, holder)
}

/// A for-update-queued shop letting `waiters` purchases of an item wait on its row at once
/// (0: the plain `for-update`, every purchase waiting there), whose statements wait
/// `lock_timeout` for a lock.
async fn spawn_queued(backend: Backend, waiters: u32, lock_timeout: Duration) -> TestApp {
    let strategy = match waiters {
        0 => Strategy::ForUpdate,
        _ => Strategy::ForUpdateQueued,
    };
    let mut config = test_config(strategy, backend);
    config.inventory.row_lock_waiters = waiters.max(1);
    config.pool.lock_timeout = lock_timeout;
    spawn_with(config).await
}

/// Sends `buyers` purchases of item 1 (distinct buyers) while another session holds the
/// item's row lock, as a cancel in progress does, until `expect_waiting` of them wait on the
/// row in the database; returns the most seen waiting there, the most of the shop's
/// connections in use and its `oversell_db_pool_waiting` while the lock was held, and the
/// answers once it was released.
async fn buyers_behind_a_held_lock(
    app: &Arc<TestApp>,
    backend: Backend,
    buyers: usize,
    expect_waiting: i64,
) -> (i64, u32, f64, Vec<(u16, Value)>) {
    let (pool, holder) = hold_the_row_lock(&app.database_url).await;
    let sent: Vec<_> = (0..buyers)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                app.order(json!({ "item_id": 1, "user_id": format!("u-{i}"), "qty": 1 }))
                    .await
            })
        })
        .collect();
    eventually(
        "the purchases reach the row lock",
        Duration::from_secs(60),
        || async { (waiting_on_a_lock(&pool, backend).await >= expect_waiting).then_some(()) },
    )
    .await;
    // Watched a while longer: no more come while the lock is held.
    let (mut most, mut connections) = (0, 0);
    for _ in 0..25 {
        most = most.max(waiting_on_a_lock(&pool, backend).await);
        connections = connections.max(app.app_inventory.store().connections_in_use());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pool_waiting = app
        .metrics_text()
        .await
        .lines()
        .find_map(|l| l.strip_prefix("oversell_db_pool_waiting "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("oversell_db_pool_waiting in /metrics");
    holder.commit().await.unwrap();
    let mut answers = Vec::new();
    for s in sent {
        answers.push(s.await.unwrap());
    }
    pool.close().await;
    (most, connections, pool_waiting, answers)
}

async fn at_most_the_set_number_wait_in_the_database(backend: Backend) {
    let label = backend.as_str();
    for (waiters, expect) in [(2u32, 2i64), (0, 6)] {
        let app = Arc::new(spawn_queued(backend, waiters, Duration::from_secs(120)).await);
        app.setup_sale(1, 10, 1).await;

        let (most, connections, pool_waiting, answers) =
            buyers_behind_a_held_lock(&app, backend, 6, expect).await;

        assert_eq!(
            most, expect,
            "{label}, --row-lock-waiters {waiters}: purchases waiting on the row in the database"
        );
        // Those queued in the shop hold no connection (the expiry sweep may hold one more).
        assert!(
            (expect..=expect + 1).contains(&(connections as i64)),
            "{label}, --row-lock-waiters {waiters}: {connections} of the shop's connections in \
             use, {expect} purchases in the database"
        );
        // The rest wait for their turn, and the pool's gauge shows them as waiting.
        assert_eq!(
            pool_waiting,
            (6 - expect) as f64,
            "{label}, --row-lock-waiters {waiters}: oversell_db_pool_waiting"
        );
        for (status, body) in &answers {
            assert_eq!(*status, 201, "{label}, {waiters}: {body}");
        }
        let audit = app.drained_audit(1).await;
        assert_eq!(audit["db_stock"], json!(4), "{label}, {waiters}: {audit}");
        assert_eq!(audit["oversell"], json!(0), "{label}, {waiters}: {audit}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_row_lock_waiters_purchases_wait_on_the_row_in_postgres() {
    at_most_the_set_number_wait_in_the_database(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_row_lock_waiters_purchases_wait_on_the_row_in_mysql() {
    at_most_the_set_number_wait_in_the_database(Backend::Mysql).await;
}

/// The wait in the shop's queue ends as a wait for the lock does: `busy: lock_timeout` after
/// the lock timeout, the order rolled back, no stock moved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purchase_queued_in_the_shop_longer_than_the_lock_timeout_is_busy_and_moves_nothing() {
    let backend = Backend::Postgres;
    let lock_timeout = Duration::from_secs(4);
    let app = Arc::new(spawn_queued(backend, 1, lock_timeout).await);
    app.setup_sale(1, 10, 1).await;
    let (pool, holder) = hold_the_row_lock(&app.database_url).await;

    // Three buyers: one waits on the row in the database, two in the shop's queue.
    let sent: Vec<_> = (0..3)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                let sent = tokio::time::Instant::now();
                let answer = app
                    .order(json!({ "item_id": 1, "user_id": format!("u-{i}"), "qty": 1 }))
                    .await;
                (answer, sent.elapsed())
            })
        })
        .collect();
    let mut answers = Vec::new();
    for s in sent {
        answers.push(s.await.unwrap());
    }
    holder.rollback().await.unwrap();
    pool.close().await;

    for ((status, body), took) in &answers {
        assert_eq!(*status, 503, "{body}");
        assert_eq!(body["detail"], json!("lock_timeout"), "{body}");
        // Each waited at most one lock timeout in the queue and one on the lock (a turn that
        // comes as the queue's wait runs out): a queue that waited without a bound would
        // answer the last buyer after three, one turn after another.
        assert!(
            took.as_secs_f64() < lock_timeout.as_secs_f64() * 2.5,
            "answered after {took:?}: more than a lock timeout ({lock_timeout:?}) in the queue \
             and one on the lock"
        );
    }
    let orders = app.app_inventory.store().orders_for_item(1).await.unwrap();
    assert!(orders.is_empty(), "no order is left: {orders:?}");
    let audit = app.drained_audit(1).await;
    assert_eq!(audit["db_stock"], json!(10), "{audit}");
    // The row is free again: the next buyer gets a unit at once.
    let (status, body) = app
        .order(json!({ "item_id": 1, "user_id": "u-next", "qty": 1 }))
        .await;
    assert_eq!(status, 201, "{body}");
}
