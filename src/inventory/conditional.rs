//! `conditional`: "why not just this?" One statement decides:
//!
//! `UPDATE items SET stock = stock - :q WHERE id = :id AND stock >= :q`
//!
//! One row updated: the units are taken, and the order is inserted in the same transaction.
//! No row: sold out. No version column, no `SELECT ... FOR UPDATE`, nothing read into the
//! shop and written back, no retry loop: the database evaluates the check and the write as one
//! step, so two buyers can never both take the last unit. The update does lock the item row
//! until commit (every write does), but only for the order insert and the commit, never across
//! a read, business logic or a round trip to the shop and back.
//!
//! The purchase limit rides on the order insert itself: `INSERT ... SELECT ... WHERE (the
//! buyer's live units) + :q <= :limit`, no row inserted meaning "already holds the limit" (the
//! transaction rolls back, the units return). It is exact without a lock of its own: the
//! update before it in the same transaction holds the item row, so every other purchase of
//! the item has either committed (and each statement reads the latest commits: PostgreSQL's
//! and our MySQL sessions' READ COMMITTED) or is waiting for that row. No holdings table, no
//! extra statement on the path that sells.
//!
//! A sold-out answer reads the buyer's holdings once, with no lock, to tell a buyer who
//! already holds the limit (`duplicate`, as `for-update` answers them, and what lets a retry
//! with the same `Idempotency-Key` find its order) from one who does not (`sold out`).

//!
//! With a [`Defect`] built in (a testing aid), two branches marked `DEFECT` take the mistakes
//! teams make with this design: `limit-race` counts the buyer's orders before the
//! transaction and inserts without the limit condition; `get-then-decr` reads the stock,
//! checks it in the shop and writes `stock = stock - q` without the `WHERE stock >= q`.

use super::{Defect, InventoryError, Outcome, Settings};
use crate::model::{Order, Purchase};
use crate::store::Store;

pub(super) async fn purchase(
    store: &Store,
    settings: &Settings,
    p: &Purchase,
    limit: i64,
) -> Result<Outcome, InventoryError> {
    match settings.defect {
        Some(Defect::LimitRace) => return limit_race(store, settings, p, limit).await,
        Some(Defect::GetThenDecr) => return get_then_decr(store, settings, p, limit).await,
        _ => {}
    }
    let mut tx = store.begin().await?;
    if !tx.conditional_deduct(p.item_id, p.qty).await? {
        tx.rollback().await?;
        if store.held_by_user(p.item_id, &p.user_id).await? + p.qty > limit {
            return Ok(Outcome::Duplicate);
        }
        return Ok(Outcome::SoldOut);
    }
    let order = Order::pending(p);
    // A unique-index refusal of the order's Idempotency-Key passes through as it is: the
    // transaction rolls back (the units with it) and `idempotency::settle` answers the order
    // that key bought.
    if !tx.insert_order_within_limit(&order, limit).await? {
        tx.rollback().await?;
        return Ok(Outcome::Duplicate);
    }
    tx.commit().await?;
    Ok(Outcome::Reserved { order_id: order.id })
}

/// DEFECT limit-race: the buyer's holdings counted on their own, a moment of business logic,
/// then the stock taken (still exactly) and the order inserted with no limit condition: the
/// same buyer's concurrent orders all pass the count.
async fn limit_race(
    store: &Store,
    settings: &Settings,
    p: &Purchase,
    limit: i64,
) -> Result<Outcome, InventoryError> {
    if store.held_by_user(p.item_id, &p.user_id).await? + p.qty > limit {
        return Ok(Outcome::Duplicate);
    }
    tokio::time::sleep(settings.naive_gap).await;
    let mut tx = store.begin().await?;
    if !tx.conditional_deduct(p.item_id, p.qty).await? {
        tx.rollback().await?;
        return Ok(Outcome::SoldOut);
    }
    let order = Order::pending(p);
    tx.insert_order(&order).await?;
    tx.commit().await?;
    Ok(Outcome::Reserved { order_id: order.id })
}

/// DEFECT get-then-decr: the stock read and checked in the shop, a moment of business logic,
/// then `stock = stock - q` by a second statement that trusts the read (the limit is still
/// exact: it rides on the insert, under the row lock the write took).
async fn get_then_decr(
    store: &Store,
    settings: &Settings,
    p: &Purchase,
    limit: i64,
) -> Result<Outcome, InventoryError> {
    let Some(item) = store.item(p.item_id).await? else {
        return Ok(Outcome::UnknownItem);
    };
    if item.stock < p.qty {
        if store.held_by_user(p.item_id, &p.user_id).await? + p.qty > limit {
            return Ok(Outcome::Duplicate);
        }
        return Ok(Outcome::SoldOut);
    }
    tokio::time::sleep(settings.naive_gap).await;
    let mut tx = store.begin().await?;
    tx.deduct(p.item_id, p.qty).await?;
    let order = Order::pending(p);
    if !tx.insert_order_within_limit(&order, limit).await? {
        tx.rollback().await?;
        return Ok(Outcome::Duplicate);
    }
    tx.note_stock_read(&order.id, item.stock).await?;
    tx.commit().await?;
    Ok(Outcome::Reserved { order_id: order.id })
}
