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

use super::{InventoryError, Outcome};
use crate::model::{Order, Purchase};
use crate::store::Store;

pub(super) async fn purchase(
    store: &Store,
    p: &Purchase,
    limit: i64,
) -> Result<Outcome, InventoryError> {
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
