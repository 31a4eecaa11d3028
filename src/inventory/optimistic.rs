//! `optimistic`: version compare-and-swap, retried on conflict.
//!
//! Each attempt reads stock and version with a fresh statement (outside any transaction, so
//! never through a stale REPEATABLE READ snapshot), then, in one transaction, runs
//! `UPDATE items SET stock = stock - qty, version = version + 1
//!  WHERE id = ? AND stock >= qty AND version = ?` and inserts the order. Zero rows updated means
//! another buyer changed the row first: roll back, back off, and try again with a new read. On a
//! hot row most attempts lose, which is the retry storm of the post-mortem. Retries exhausted
//! answers `busy: retries_exhausted`.

use super::{read_and_check, InventoryError, Outcome, Settings};
use crate::model::{Order, Purchase};
use crate::store::Store;
use crate::telemetry::shop_metrics;
use rand::Rng;

pub(super) async fn purchase(
    store: &Store,
    settings: &Settings,
    p: &Purchase,
) -> Result<Outcome, InventoryError> {
    let mut backoff = settings.optimistic_backoff;
    for attempt in 0..=settings.optimistic_retries {
        if attempt > 0 {
            metrics::counter!(shop_metrics::OPTIMISTIC_CONFLICTS).increment(1);
            if !backoff.is_zero() {
                let jitter = rand::rng().random_range(0..=backoff.as_micros() as u64);
                tokio::time::sleep(backoff / 2 + std::time::Duration::from_micros(jitter / 2))
                    .await;
                // Doubling, capped: a long retry chain must not outlive the client.
                backoff = (backoff * 2).min(std::time::Duration::from_millis(250));
            }
        }
        let item = match read_and_check(store, p).await? {
            Ok(item) => item,
            Err(answer) => return Ok(answer),
        };
        if !settings.work.is_zero() {
            tokio::time::sleep(settings.work).await;
        }
        let mut tx = store.begin().await?;
        if !tx.cas_deduct(p.item_id, p.qty, item.version).await? {
            tx.rollback().await?;
            continue;
        }
        let order = Order {
            stock_read: Some(item.stock),
            ..Order::pending(p)
        };
        tx.insert_order(&order).await?;
        tx.commit().await?;
        return Ok(Outcome::Reserved { order_id: order.id });
    }
    metrics::counter!(shop_metrics::OPTIMISTIC_EXHAUSTED).increment(1);
    Ok(Outcome::Busy("retries_exhausted"))
}
