//! Persisting redis-lua's stream events: one transaction per batch, idempotent per order
//! (BRIEF §4).
//!
//! Events of one item arrive in stream order, so normally an order's `order` event comes before
//! its `pay`/`cancel`/`expire`. A batch may still be replayed (the consumer died after commit but
//! before XACK) or, after a claim, arrive out of order. Every event is therefore written so that
//! applying it twice, or before its order, leaves the same final state:
//! - `order`: insert-if-absent; the stock is decremented only when the row was really inserted.
//! - `pay`/`cancel`/`expire`: a conditional status move from `pending_payment`; a cancel restocks
//!   the database only when that move happened. If the order row does not exist yet, it is
//!   inserted directly in its final state (a cancelled one never took stock; a paid one did), and
//!   the late `order` event then inserts nothing.
//!
//! The bookkeeping of the low-water mark is [`super::mark`]'s.

use super::lane::Lane;
use super::mark::{raise_mark, record_applied, Marks};
use super::StoreTx;
use super::{dialect::Statements, pg_array, Backend, StoreError};
use crate::model::OrderStatus;
use std::collections::HashSet;

/// What a stream event asks the database to do: the `type` field of a stream entry (and of
/// a dead letter), spelt `order`, `pay`, `cancel`, `expire`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PersistKind {
    Order,
    Pay,
    Cancel,
    Expire,
}

impl PersistKind {
    /// Every kind.
    pub const ALL: [PersistKind; 4] = [
        PersistKind::Order,
        PersistKind::Pay,
        PersistKind::Cancel,
        PersistKind::Expire,
    ];

    /// Its spelling in the stream.
    pub const fn as_str(self) -> &'static str {
        match self {
            PersistKind::Order => "order",
            PersistKind::Pay => "pay",
            PersistKind::Cancel => "cancel",
            PersistKind::Expire => "expire",
        }
    }

    /// Parses the `type` field of a stream entry.
    pub fn parse(s: &str) -> Option<Self> {
        PersistKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for PersistKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One stream entry, decoded.
#[derive(Debug, Clone)]
pub struct PersistEvent {
    pub stream_id: String,
    pub kind: PersistKind,
    pub order_id: String,
    pub user_id: String,
    pub device_id: Option<String>,
    pub qty: i64,
    pub at_ms: i64,
    /// The order's `Idempotency-Key` (on `order` entries that carried one), stored with its row.
    pub idempotency_key: Option<String>,
}

/// What one batch did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ApplyStats {
    /// New order rows.
    pub inserted: u64,
    /// Events that changed nothing because they had been applied before.
    pub replayed: u64,
    /// Units put back in the database.
    pub restocked: i64,
    /// Orders persisted while the database had no stock for them: Redis and the database
    /// disagreed (the deduction record check). The order is kept (the client was told yes).
    pub anomalies: u64,
}

/// How an `order` event takes its units from the database's stock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deduct {
    /// Only while the stock covers it: an order without stock is kept, undeducted, and counted
    /// as an anomaly (Redis and the database disagree).
    IfStock,
    /// Always, within the batch's transaction; the batch commits only if the stock ends at
    /// zero or above, else it is rolled back whole ([`apply`] answers `None`). Several
    /// consumers commit out of stream order: an order may reach the database before the
    /// cancel or expiry, earlier in the stream, that gave back the unit it bought (on
    /// redis-buckets: on another bucket's stream). Its batch then waits for that release
    /// instead of counting an anomaly that is none.
    InBatch,
}

/// Applies `events` in one transaction; `None` when `deduct` is [`Deduct::InBatch`] and the
/// batch would leave the stock below zero (nothing was written).
pub(super) async fn apply(
    lane: &Lane,
    sql: &'static Statements,
    backend: Backend,
    item: i64,
    events: &[PersistEvent],
    marks: Marks<'_>,
    deduct: Deduct,
) -> Result<Option<ApplyStats>, StoreError> {
    let mut stats = ApplyStats::default();
    let mut tx = StoreTx::open(lane, sql, backend).await?;
    let mark = match marks {
        Marks::Tracked(low_water) => Some(raise_mark(&mut tx, sql, item, low_water).await?),
        Marks::Untracked => {
            // The row lock alone: it makes the existence check of `apply_orders` exact.
            sqlx::query(sql.lock_applied)
                .bind(item)
                .fetch_optional(tx.conn())
                .await?;
            None
        }
    };
    apply_events(&mut tx, (sql, backend), item, events, deduct, &mut stats).await?;
    if let Some(mark) = mark {
        record_applied(&mut tx, backend, item, events, mark).await?;
    }
    if deduct == Deduct::InBatch {
        let stock: Option<i64> = sqlx::query_scalar(sql.reconcile_snapshot)
            .bind(item)
            .fetch_optional(tx.conn())
            .await?;
        if stock.is_some_and(|s| s < 0) {
            tx.rollback().await?;
            return Ok(None);
        }
    }
    tx.commit().await?;
    Ok(Some(stats))
}

/// Applies `events` in stream order within `tx`: runs of `order` events (nearly all of a
/// sale's) in bulk, the rest one by one, so a `pay` after its `order` in the same batch still
/// finds the row.
async fn apply_events(
    tx: &mut StoreTx,
    (sql, backend): (&'static Statements, Backend),
    item: i64,
    events: &[PersistEvent],
    deduct: Deduct,
    stats: &mut ApplyStats,
) -> Result<(), StoreError> {
    let mut i = 0;
    while i < events.len() {
        if events[i].kind == PersistKind::Order {
            let end = events[i..]
                .iter()
                .position(|e| e.kind != PersistKind::Order)
                .map_or(events.len(), |k| i + k);
            for chunk in events[i..end].chunks(ORDER_CHUNK) {
                apply_orders(tx, sql, backend, item, chunk, deduct, stats).await?;
            }
            i = end;
        } else {
            apply_one(tx, sql, item, &events[i], deduct, stats).await?;
            i += 1;
        }
    }
    Ok(())
}

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
const ORDER_CHUNK: usize = 1000;

/// A run of `order` events in three statements instead of two per order: which ids already
/// have a row (a replayed batch), one multi-row `INSERT` of the others, and one deduct of their
/// total. The existence check is exact because the batch holds the item's row lock
/// ([`raise_mark`]) and order ids carry their item's id. When the database lacks stock for the
/// total, the orders are deducted one by one as before, so each one without stock is counted
/// as an anomaly exactly as [`apply_one`] would.
async fn apply_orders(
    tx: &mut StoreTx,
    sql: &Statements,
    backend: Backend,
    item: i64,
    run: &[PersistEvent],
    deduct: Deduct,
    stats: &mut ApplyStats,
) -> Result<(), StoreError> {
    // Each order id once: a repeat in the same run is a replay of the first.
    let mut seen = HashSet::new();
    let (unique, repeats): (Vec<&PersistEvent>, Vec<&PersistEvent>) =
        run.iter().partition(|ev| seen.insert(ev.order_id.as_str()));
    let fresh: Vec<&PersistEvent> = match backend {
        // `ON CONFLICT DO NOTHING`, answering the ids that were *not* inserted (a replayed
        // batch; normally none): no lookup first (an `id IN (...)` lookup of 200 parameters
        // can get a plan cached while the table was empty, a sequential scan: seconds per
        // batch once the table has grown), and no row back per new order. One array per
        // column, so the statement is the same for every batch.
        Backend::Postgres => {
            let text =
                |f: fn(&PersistEvent) -> Option<&str>| pg_array::text(unique.iter().map(|e| f(e)));
            let existing: HashSet<String> =
                sqlx::query_scalar::<_, String>(super::dialect::PG_INSERT_ORDERS)
                    .bind(item)
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
                    .collect();
            let (old, fresh): (Vec<_>, Vec<_>) = unique
                .into_iter()
                .partition(|ev| existing.contains(&ev.order_id));
            replayed(tx, sql, old.into_iter().chain(repeats), stats).await?;
            fresh
        }
        // MySQL: which ids exist (a primary-key range read), then a plain multi-row INSERT.
        Backend::Mysql => {
            let stmt = super::dialect::existing_orders(backend, unique.len());
            let mut q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(stmt));
            for ev in &unique {
                q = q.bind(&ev.order_id);
            }
            let existing: HashSet<String> = q.fetch_all(tx.conn()).await?.into_iter().collect();
            let (old, fresh): (Vec<_>, Vec<_>) = unique
                .into_iter()
                .partition(|ev| existing.contains(&ev.order_id));
            replayed(tx, sql, old.into_iter().chain(repeats), stats).await?;
            if !fresh.is_empty() {
                let stmt = super::dialect::insert_orders(backend, fresh.len());
                bind_orders!(sqlx::query(sqlx::AssertSqlSafe(stmt)), item, fresh)
                    .execute(tx.conn())
                    .await?;
            }
            fresh
        }
    };
    if fresh.is_empty() {
        return Ok(());
    }
    stats.inserted += fresh.len() as u64;
    let total: i64 = fresh.iter().map(|e| e.qty).sum();
    if deduct == Deduct::InBatch {
        return take(tx, sql, item, total).await;
    }
    if deduct_if_stock(tx, sql, item, total).await? {
        return Ok(());
    }
    for ev in fresh {
        if !deduct_if_stock(tx, sql, item, ev.qty).await? {
            stats.anomalies += 1;
            tracing::error!(
                order = %ev.order_id, item,
                "persisted an order the database has no stock for: Redis and the database disagree"
            );
        }
    }
    Ok(())
}

/// Orders of a run that already had a row: counted as replayed; an `order` event brings its
/// key to a row first written by a pay/cancel/expire event (see [`apply_one`]).
async fn replayed<'a>(
    tx: &mut StoreTx,
    sql: &Statements,
    events: impl Iterator<Item = &'a PersistEvent>,
    stats: &mut ApplyStats,
) -> Result<(), StoreError> {
    for ev in events {
        if let Some(key) = ev.idempotency_key.as_deref() {
            sqlx::query(sql.set_key_if_missing)
                .bind(key)
                .bind(&ev.order_id)
                .execute(tx.conn())
                .await?;
        }
        stats.replayed += 1;
    }
    Ok(())
}

async fn deduct_if_stock(
    tx: &mut StoreTx,
    sql: &Statements,
    item: i64,
    qty: i64,
) -> Result<bool, StoreError> {
    Ok(sqlx::query(sql.deduct_if_stock)
        .bind(qty)
        .bind(item)
        .bind(qty)
        .execute(tx.conn())
        .await?
        .rows_affected()
        == 1)
}

/// Takes `qty` from the stock whatever it holds (the batch checks the stock it ends with).
async fn take(tx: &mut StoreTx, sql: &Statements, item: i64, qty: i64) -> Result<(), StoreError> {
    sqlx::query(sql.restock)
        .bind(-qty)
        .bind(item)
        .execute(tx.conn())
        .await?;
    Ok(())
}

async fn apply_one(
    tx: &mut StoreTx,
    sql: &Statements,
    item: i64,
    ev: &PersistEvent,
    deduct: Deduct,
    stats: &mut ApplyStats,
) -> Result<(), StoreError> {
    let target = match ev.kind {
        PersistKind::Order => OrderStatus::PendingPayment,
        PersistKind::Pay => OrderStatus::Paid,
        PersistKind::Cancel => OrderStatus::Cancelled,
        PersistKind::Expire => OrderStatus::Expired,
    };
    if ev.kind != PersistKind::Order {
        // Timestamps are the event's own (when Redis took or gave back the units), so the
        // oracle can replay the sale's history in the order it really happened.
        let moved = sqlx::query(sql.set_status_if)
            .bind(target.as_str())
            .bind(ev.at_ms)
            .bind(&ev.order_id)
            .bind(OrderStatus::PendingPayment.as_str())
            .execute(tx.conn())
            .await?
            .rows_affected()
            == 1;
        if moved {
            if target != OrderStatus::Paid {
                sqlx::query(sql.restock)
                    .bind(ev.qty)
                    .bind(item)
                    .execute(tx.conn())
                    .await?;
                stats.restocked += ev.qty;
            }
            return Ok(());
        }
    }
    // An `order` event, or a state change for an order not persisted yet.
    let inserted = sqlx::query(sql.insert_order_if_absent)
        .bind(&ev.order_id)
        .bind(item)
        .bind(&ev.user_id)
        .bind(ev.device_id.as_deref())
        .bind(ev.qty)
        .bind(target.as_str())
        .bind(ev.at_ms)
        .bind(ev.at_ms)
        .bind(ev.idempotency_key.as_deref())
        .bind(&ev.order_id)
        .execute(tx.conn())
        .await?
        .rows_affected()
        == 1;
    if !inserted {
        if let (PersistKind::Order, Some(key)) = (ev.kind, ev.idempotency_key.as_deref()) {
            // The row came first from a pay/cancel/expire event (after a claim, out of order),
            // which carries no key: the order's own event brings it.
            sqlx::query(sql.set_key_if_missing)
                .bind(key)
                .bind(&ev.order_id)
                .execute(tx.conn())
                .await?;
        }
        stats.replayed += 1;
        return Ok(());
    }
    stats.inserted += 1;
    if target.holds_stock() && deduct == Deduct::InBatch {
        return take(tx, sql, item, ev.qty).await;
    }
    if target.holds_stock() {
        let deducted = sqlx::query(sql.deduct_if_stock)
            .bind(ev.qty)
            .bind(item)
            .bind(ev.qty)
            .execute(tx.conn())
            .await?
            .rows_affected()
            == 1;
        if !deducted {
            stats.anomalies += 1;
            tracing::error!(
                order = %ev.order_id, item,
                "persisted an order the database has no stock for: Redis and the database disagree"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_persist_kind_keeps_its_stream_spelling_in_json_too() {
        for k in PersistKind::ALL {
            assert_eq!(PersistKind::parse(k.as_str()), Some(k));
            let json = serde_json::to_string(&k).unwrap();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
            assert_eq!(serde_json::from_str::<PersistKind>(&json).unwrap(), k);
        }
        assert_eq!(PersistKind::parse(""), None);
    }
}
