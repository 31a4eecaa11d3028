//! The storage layer on both backends.

use crate::helpers::*;
use oversell::model::SaleSetup;
use oversell::store::{Backend, Store};

async fn a_second_read_in_a_transaction_sees_a_concurrent_commit(backend: Backend) {
    let url = fresh_db_url(backend);
    let store = Store::connect(&url, &oversell::shop::ShopKnobs::default().pool())
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
        let a = Store::connect(&url, &oversell::shop::ShopKnobs::default().pool())
            .await
            .unwrap();
        let b = Store::connect(&url, &oversell::shop::ShopKnobs::default().pool())
            .await
            .unwrap();
        assert!(b.item_ids().await.unwrap().is_empty());
        a.close().await;
        b.close().await;
        drop_database(&url).await;
    }
}
