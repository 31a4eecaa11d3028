//! `for-update`: one transaction that takes the item's row lock first.
//!
//! `SELECT ... FOR UPDATE` serialises every buyer on the hot row: the check and the write see
//! the same stock, so it cannot oversell. The cost is the queue: each buyer holds a pooled
//! connection while it waits for the lock, so a burst drains the pool and later buyers time out
//! acquiring a connection (`busy: pool_exhausted`) or waiting for the lock (`busy: lock_timeout`).

use super::{InventoryError, Outcome, Settings};
use crate::model::{Order, Purchase};
use crate::store::Store;

pub(super) async fn purchase(
    store: &Store,
    settings: &Settings,
    p: &Purchase,
) -> Result<Outcome, InventoryError> {
    let mut tx = store.begin().await?;
    let Some(item) = tx.lock_item(p.item_id).await? else {
        tx.rollback().await?;
        return Ok(Outcome::UnknownItem);
    };
    // Under the row lock, the limit check is as exact as the stock check.
    if tx.held_by_user(p.item_id, &p.user_id).await? + p.qty > item.purchase_limit {
        tx.rollback().await?;
        return Ok(Outcome::Duplicate);
    }
    if item.stock < p.qty {
        tx.rollback().await?;
        return Ok(Outcome::SoldOut);
    }
    if !settings.work.is_zero() {
        tokio::time::sleep(settings.work).await;
    }
    tx.deduct(p.item_id, p.qty).await?;
    let order = Order::pending(p);
    tx.insert_order(&order).await?;
    tx.commit().await?;
    Ok(Outcome::Reserved { order_id: order.id })
}
