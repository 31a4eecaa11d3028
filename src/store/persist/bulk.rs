//! Runs of `order` events in bulk: which orders of a run already have a row, one multi-row
//! insert of the others, and one deduct of their total.

use super::{anomaly, deduct_if_stock, take, ApplyStats, Batch, Deduct, Insert, PersistEvent};
use crate::model::OrderStatus;
use crate::store::{dialect, pg_array, Backend, StoreError, StoreTx};
use std::collections::HashSet;

/// Binds `events` as new pending order rows, in the dialect's `ORDER_COLS` order, on a
/// query or a scalar query (both have `bind`, no shared trait).
macro_rules! bind_orders {
    ($q:expr, $item:expr, $events:expr) => {{
        let mut q = $q;
        let pending = OrderStatus::PendingPayment.as_str();
        for ev in $events.iter() {
            q = q
                .bind(&ev.order_id)
                .bind($item)
                .bind(&ev.user_id)
                .bind(ev.device_id.as_deref())
                .bind(ev.qty)
                .bind(pending)
                .bind(ev.at_ms)
                .bind(ev.at_ms)
                .bind(ev.idempotency_key.as_deref());
        }
        q
    }};
}

/// Orders per multi-row statement (9 placeholders each: 9,000, well under the 65,535 of
/// PostgreSQL and MariaDB). A whole default batch goes as one statement: under load every
/// round trip of the consumer waits for a core, and the round trips bound its rate.
pub(super) const ORDER_CHUNK: usize = 1000;
/// A run of `order` events in three statements instead of two per order: which ids already
/// have a row (a replayed batch), one multi-row `INSERT` of the others, and one deduct of their
/// total. The existence check is exact because the batch holds the item's row lock
/// ([`super::raise_mark`]) and order ids carry their item's id. When the database lacks stock for the
/// total, the orders are deducted one by one as before, so each one without stock is counted
/// as an anomaly exactly as [`super::apply_one`] would.
pub(super) async fn apply_orders(
    tx: &mut StoreTx,
    b: &Batch<'_>,
    backend: Backend,
    run: &[PersistEvent],
    stats: &mut ApplyStats,
) -> Result<(), StoreError> {
    // Each order id once: a repeat in the same run is a replay of the first.
    let mut seen = HashSet::new();
    let (unique, repeats): (Vec<&PersistEvent>, Vec<&PersistEvent>) =
        run.iter().partition(|ev| seen.insert(ev.order_id.as_str()));
    let fresh = match backend {
        Backend::Postgres => {
            let existing = pg_insert(tx, b, &unique).await?;
            let (old, fresh) = split_existing(unique, &existing);
            replayed(tx, b, old.into_iter().chain(repeats), stats).await?;
            fresh
        }
        // MySQL: which ids exist (a primary-key range read), then a plain multi-row INSERT.
        Backend::Mysql => {
            let existing = mysql_existing(tx, &unique).await?;
            let (old, fresh) = split_existing(unique, &existing);
            replayed(tx, b, old.into_iter().chain(repeats), stats).await?;
            if !fresh.is_empty() {
                let stmt = dialect::insert_orders(backend, fresh.len());
                bind_orders!(sqlx::query(sqlx::AssertSqlSafe(stmt)), b.item, fresh)
                    .execute(tx.conn())
                    .await?;
            }
            fresh
        }
    };
    deduct_fresh(tx, b, &fresh, stats).await
}

/// The orders of `unique` whose ids are in `existing`, and the others.
fn split_existing<'a>(
    unique: Vec<&'a PersistEvent>,
    existing: &HashSet<String>,
) -> (Vec<&'a PersistEvent>, Vec<&'a PersistEvent>) {
    unique
        .into_iter()
        .partition(|ev| existing.contains(&ev.order_id))
}

/// PostgreSQL: a plain insert ([`Insert::Plain`]: fails when a row exists) or `ON CONFLICT DO
/// NOTHING` answering the ids that were *not* inserted ([`Insert::IfAbsent`]); either way no
/// lookup first (an `id IN (...)` lookup of 200 parameters can get a plan cached while the
/// table was empty, a sequential scan: seconds per batch once the table has grown), and no row
/// back per new order. One array per column, so each statement is the same for every batch.
async fn pg_insert(
    tx: &mut StoreTx,
    b: &Batch<'_>,
    unique: &[&PersistEvent],
) -> Result<HashSet<String>, StoreError> {
    let text = |f: fn(&PersistEvent) -> Option<&str>| pg_array::text(unique.iter().map(|e| f(e)));
    let statement = match b.insert {
        Insert::Plain => dialect::PG_INSERT_NEW_ORDERS,
        Insert::IfAbsent => dialect::PG_INSERT_ORDERS,
    };
    Ok(sqlx::query_scalar::<_, String>(statement)
        .bind(b.item)
        .bind(OrderStatus::PendingPayment.as_str())
        .bind(text(|e| Some(&e.order_id)))
        .bind(text(|e| Some(&e.user_id)))
        .bind(text(|e| e.device_id.as_deref()))
        .bind(pg_array::bigint(unique.iter().map(|e| e.qty)))
        .bind(pg_array::bigint(unique.iter().map(|e| e.at_ms)))
        .bind(text(|e| e.idempotency_key.as_deref()))
        .fetch_all(tx.conn())
        .await?
        .into_iter()
        .collect())
}

/// MySQL: the ids among `unique` that already have a row.
async fn mysql_existing(
    tx: &mut StoreTx,
    unique: &[&PersistEvent],
) -> Result<HashSet<String>, StoreError> {
    let stmt = dialect::existing_orders(Backend::Mysql, unique.len());
    let mut q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(stmt));
    for ev in unique {
        q = q.bind(&ev.order_id);
    }
    Ok(q.fetch_all(tx.conn()).await?.into_iter().collect())
}

/// Deducts the new orders' total; when the stock lacks it, one by one, each without stock an
/// anomaly.
async fn deduct_fresh(
    tx: &mut StoreTx,
    b: &Batch<'_>,
    fresh: &[&PersistEvent],
    stats: &mut ApplyStats,
) -> Result<(), StoreError> {
    if fresh.is_empty() {
        return Ok(());
    }
    stats.inserted += fresh.len() as u64;
    let total: i64 = fresh.iter().map(|e| e.qty).sum();
    if b.deduct == Deduct::InBatch {
        return take(tx, b.sql, b.item, total).await;
    }
    if deduct_if_stock(tx, b.sql, b.item, total).await? {
        return Ok(());
    }
    for ev in fresh {
        if !deduct_if_stock(tx, b.sql, b.item, ev.qty).await? {
            anomaly(ev, b.item, stats);
        }
    }
    Ok(())
}

/// Orders of a run that already had a row: counted as replayed; an `order` event brings its
/// key to a row first written by a pay/cancel/expire event (see [`super::apply_one`]).
async fn replayed<'a>(
    tx: &mut StoreTx,
    b: &Batch<'_>,
    events: impl Iterator<Item = &'a PersistEvent>,
    stats: &mut ApplyStats,
) -> Result<(), StoreError> {
    for ev in events {
        if let Some(key) = ev.idempotency_key.as_deref() {
            super::set_key_if_missing(tx, b, key, &ev.order_id).await?;
        }
        stats.replayed += 1;
    }
    Ok(())
}
