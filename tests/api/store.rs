//! The storage layer on both backends.

use crate::helpers::*;
use oversell::testing::model::SaleSetup;
use oversell::testing::shop::ShopKnobs;
use oversell::testing::store::{Backend, PoolSettings, Store};

async fn a_second_read_in_a_transaction_sees_a_concurrent_commit(backend: Backend) {
    let url = fresh_db_url(backend);
    let store = Store::connect(&url, &oversell::testing::shop::ShopKnobs::default().pool())
        .await
        .unwrap();
    let setup = SaleSetup {
        stock: 10,
        name: "x".into(),
        price_cents: 1,
        purchase_limit: 1,
    };
    store.setup_sale(1, &setup).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    let before = tx.read_item(1).await.unwrap().unwrap();
    // Another buyer wins the race and commits on another connection.
    store.deduct_unchecked(1, 1).await.unwrap();
    let after = tx.read_item(1).await.unwrap().unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(before.version, 0);
    assert_eq!(
        after.version, 1,
        "{backend:?}: a retry must see the new version, not a stale snapshot"
    );
    assert_eq!(after.stock, 9);
    // And the compare-and-swap with the stale version loses, with the fresh one wins.
    let mut tx = store.begin().await.unwrap();
    assert!(!tx.cas_deduct(1, 1, before.version).await.unwrap());
    assert!(tx.cas_deduct(1, 1, after.version).await.unwrap());
    tx.commit().await.unwrap();
    assert_eq!(store.item(1).await.unwrap().unwrap().stock, 8);
    store.close().await;
    drop_database(&url).await;
}

#[tokio::test]
async fn optimistic_retries_see_the_new_version_on_mysql_repeatable_read_server() {
    a_second_read_in_a_transaction_sees_a_concurrent_commit(Backend::Mysql).await;
}

#[tokio::test]
async fn optimistic_retries_see_the_new_version_on_postgres() {
    a_second_read_in_a_transaction_sees_a_concurrent_commit(Backend::Postgres).await;
}

#[tokio::test]
async fn the_database_is_created_when_missing_and_migrations_are_idempotent() {
    for backend in [Backend::Postgres, Backend::Mysql] {
        let url = fresh_db_url(backend);
        let a = Store::connect(&url, &oversell::testing::shop::ShopKnobs::default().pool())
            .await
            .unwrap();
        let b = Store::connect(&url, &oversell::testing::shop::ShopKnobs::default().pool())
            .await
            .unwrap();
        assert!(b.item_ids().await.unwrap().is_empty());
        a.close().await;
        b.close().await;
        drop_database(&url).await;
    }
}

/// Ends every session of `url`'s database from an admin session that names no database of its
/// own (PostgreSQL: `pg_terminate_backend`; MariaDB: `KILL CONNECTION`).
async fn end_sessions(backend: Backend, url: &str) -> usize {
    use sqlx::{Connection, Row};
    let db = url.rsplit('/').next().unwrap().to_string();
    match backend {
        Backend::Postgres => {
            let mut admin = sqlx::PgConnection::connect(&format!("{}/postgres", pg_base()))
                .await
                .unwrap();
            let rows = sqlx::query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
            )
            .bind(&db)
            .fetch_all(&mut admin)
            .await
            .unwrap();
            rows.len()
        }
        Backend::Mysql => {
            let mut admin = sqlx::MySqlConnection::connect(&mysql_base()).await.unwrap();
            let ids: Vec<i64> = sqlx::query(
                "SELECT id FROM information_schema.processlist \
                 WHERE db = ? AND id <> CONNECTION_ID()",
            )
            .bind(&db)
            .fetch_all(&mut admin)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<i64, _>(0))
            .collect();
            for id in &ids {
                let _ = sqlx::query(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
                    .execute(&mut admin)
                    .await;
            }
            ids.len()
        }
    }
}

/// A fresh database with item 1 on sale with `stock` units, and a store on a pool of two.
async fn sale_on_a_pool_of_two(backend: Backend, stock: i64) -> (String, Store) {
    let url = fresh_db_url(backend);
    let settings = PoolSettings {
        max_connections: 2,
        ..ShopKnobs::default().pool()
    };
    let store = Store::connect(&url, &settings).await.unwrap();
    store.setup_sale(1, &sale(stock)).await.unwrap();
    (url, store)
}

/// The pool does not ping a connection before handing it out (a round trip per order saved),
/// so a session the server ended while it sat idle is found by the next `BEGIN`, which the
/// store retries on a new connection: the buyer never sees the dead one.
#[tokio::test]
async fn a_pooled_connection_ended_while_idle_is_replaced_at_the_next_begin() {
    for backend in [Backend::Postgres, Backend::Mysql] {
        let (url, store) = sale_on_a_pool_of_two(backend, 10).await;
        // Both pooled connections open and idle.
        let (a, b) = (store.begin().await.unwrap(), store.begin().await.unwrap());
        a.rollback().await.unwrap();
        b.rollback().await.unwrap();
        assert!(
            end_sessions(backend, &url).await > 0,
            "{backend:?}: no session to end"
        );
        // Ended means gone from the server's list (the kill is asynchronous).
        for _ in 0..100 {
            if end_sessions(backend, &url).await == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let mut tx = store.begin().await.unwrap_or_else(|e| {
            panic!("{backend:?}: BEGIN on a pool whose connections were ended: {e}")
        });
        assert_eq!(tx.read_item(1).await.unwrap().unwrap().stock, 10);
        tx.rollback().await.unwrap();
        store.close().await;
        drop_database(&url).await;
    }
}

fn sale(stock: i64) -> SaleSetup {
    SaleSetup {
        stock,
        name: "x".into(),
        price_cents: 1,
        purchase_limit: 1,
    }
}

/// The store keeps its connections between operations instead of handing them back through
/// sqlx's pool (no release ping). A transaction dropped open must still let go of its row lock
/// at once, not when its connection is next used: it goes back to the pool, whose ping sends
/// the rollback. Another store's buyer then takes the row within its lock wait.
#[tokio::test]
async fn a_transaction_dropped_open_lets_go_of_its_row_lock_at_once() {
    for backend in [Backend::Postgres, Backend::Mysql] {
        let url = fresh_db_url(backend);
        let settings = PoolSettings {
            lock_timeout: std::time::Duration::from_secs(3),
            ..ShopKnobs::default().pool()
        };
        let store = Store::connect(&url, &settings).await.unwrap();
        store.setup_sale(1, &sale(10)).await.unwrap();
        let mut tx = store.begin().await.unwrap();
        assert!(tx.conditional_deduct(1, 1).await.unwrap());
        drop(tx);
        let other = Store::connect(&url, &settings).await.unwrap();
        let mut tx = other.begin().await.unwrap();
        let took = tx.conditional_deduct(1, 1).await;
        assert!(
            matches!(took, Ok(true)),
            "{backend:?}: the dropped transaction still held the row: {took:?}"
        );
        tx.commit().await.unwrap();
        assert_eq!(
            store.item(1).await.unwrap().unwrap().stock,
            9,
            "{backend:?}"
        );
        assert_eq!(
            store.connections_in_use(),
            0,
            "{backend:?}: a connection still out"
        );
        for s in [store, other] {
            tokio::time::timeout(std::time::Duration::from_secs(10), s.close())
                .await
                .unwrap_or_else(|_| panic!("{backend:?}: close waited for a kept connection"));
        }
        drop_database(&url).await;
    }
}

/// A buyer whose request is cancelled while its statement waits for the row lock (the client
/// gave up) leaves nothing behind: its unit is never taken, and the connection it was on is not
/// handed to the next buyer mid-exchange. Then buyers on a pool of two (one kept by the store,
/// one left to the pool) all get through, reads between their transactions included.
#[tokio::test]
async fn a_cancelled_buyer_leaves_nothing_behind_and_a_small_pool_serves_everyone() {
    for backend in [Backend::Postgres, Backend::Mysql] {
        let (url, store) = sale_on_a_pool_of_two(backend, 100).await;
        let mut holder = store.begin().await.unwrap();
        assert!(holder.conditional_deduct(1, 1).await.unwrap());
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(300), async {
            let mut tx = store.begin().await?;
            tx.conditional_deduct(1, 1).await
        })
        .await;
        assert!(
            waiting.is_err(),
            "{backend:?}: the buyer did not wait: {waiting:?}"
        );
        holder.commit().await.unwrap();
        let buyers = (0..16).map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut tx = store.begin().await.unwrap();
                assert!(tx.conditional_deduct(1, 1).await.unwrap());
                tx.commit().await.unwrap();
                store.held_by_user(1, &format!("u-{i}")).await.unwrap()
            })
        });
        for b in buyers {
            assert_eq!(b.await.unwrap(), 0);
        }
        // Whatever the cancelled statement did once the lock came free was rolled back.
        let mut stock = 0;
        for _ in 0..50 {
            stock = store.item(1).await.unwrap().unwrap().stock;
            if stock == 100 - 17 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(stock, 100 - 17, "{backend:?}: the cancelled buyer's unit");
        store.close().await;
        drop_database(&url).await;
    }
}

/// A snapshot read opens its REPEATABLE READ transaction with its own statements, which sqlx
/// does not know of: one cancelled mid-read (here waiting on a table lock) must not hand its
/// connection on with that old snapshot still open, or the next read through it would be
/// stale. The connection is closed instead; the next read sees the commit made since.
#[tokio::test]
async fn a_snapshot_cancelled_mid_read_never_serves_its_old_snapshot_again() {
    use sqlx::Connection;
    let (url, store) = sale_on_a_pool_of_two(Backend::Postgres, 10).await;
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE orders IN ACCESS EXCLUSIVE MODE")
        .execute(&mut admin)
        .await
        .unwrap();
    let read = tokio::time::timeout(std::time::Duration::from_millis(500), store.snapshot(1)).await;
    assert!(
        read.is_err(),
        "the snapshot did not wait for the lock: {read:?}"
    );
    sqlx::raw_sql("UPDATE items SET stock = 5 WHERE id = 1; COMMIT")
        .execute(&mut admin)
        .await
        .unwrap();
    // Until the cancelled read's connection has left the pool (closed, not handed on).
    eventually(
        "the cancelled read's connection is given up",
        std::time::Duration::from_secs(10),
        || async { (store.connections_in_use() == 0).then_some(()) },
    )
    .await;
    // Both of the pool's connections in use at once: a transaction on one, a read on the other.
    for _ in 0..4 {
        let mut tx = store.begin().await.unwrap();
        let (in_tx, outside) = (
            tx.read_item(1).await.unwrap().unwrap().stock,
            store.item(1).await.unwrap().unwrap().stock,
        );
        tx.rollback().await.unwrap();
        assert_eq!(
            (in_tx, outside),
            (5, 5),
            "a read ran in the cancelled snapshot"
        );
    }
    store.close().await;
    drop_database(&url).await;
}
