//! `naive`: the incident. Read stock, check, do some business logic, then write, each statement
//! on its own with no lock. Two buyers who both read `stock = 1` both pass the check and both
//! deduct: stock goes to -1 and the shop has oversold. This is deliberately wrong.

use super::{read_and_check, InventoryError, Outcome, Settings};
use crate::model::{Order, Purchase};
use crate::store::Store;

pub(super) async fn purchase(
    store: &Store,
    settings: &Settings,
    p: &Purchase,
) -> Result<Outcome, InventoryError> {
    // Read, check (the purchase limit too, just as racily)...
    let read = match read_and_check(store, p).await? {
        Ok(item) => item.stock,
        Err(answer) => return Ok(answer),
    };
    // ...the business logic between check and write: the race window...
    if !settings.naive_gap.is_zero() {
        tokio::time::sleep(settings.naive_gap).await;
    }
    // ...write, trusting a stock figure that may be stale by now.
    store.deduct_unchecked(p.item_id, p.qty).await?;
    // The order keeps the stock it was sold on: two orders that read 1 are the race, seen.
    let order = Order {
        stock_read: Some(read),
        ..Order::pending(p)
    };
    if let Err(e) = store.insert_order(&order).await {
        // Its Idempotency-Key bought an order meanwhile: give back what this one took (the
        // answer is that order). Any other failure leaks the units, as the incident's did.
        if e.is_idempotency_conflict() {
            store.deduct_unchecked(p.item_id, -p.qty).await?;
        }
        return Err(e.into());
    }
    Ok(Outcome::Reserved { order_id: order.id })
}
