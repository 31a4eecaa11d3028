//! Persisting redis-lua's stream events: one transaction per batch, idempotent per order, and
//! the bookkeeping of the low-water mark (BRIEF §4).
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
//! The low-water mark (`items.stream_applied`) is the highest stream id below which every entry
//! is applied. Batches of several consumers commit in any order, so a batch cannot just move the
//! mark to its own highest id. The caller passes a candidate proven from Redis (everything at or
//! below it has been acknowledged, and acknowledgement follows the commit); the transaction
//! raises the mark to it, forgets the applied ids the mark now covers, and records its own ids
//! above the mark in `applied_runs` (runs of consecutive ids), all under the item's row lock.

mod applied;
mod bulk;

pub(super) use applied::applied_above;
use applied::record_applied;

use super::lane::Lane;
use super::StoreTx;
use super::{dialect::Statements, Backend, StoreError};
use crate::model::OrderStatus;

/// A stream entry id (`ms-seq`) as a pair that orders like the stream does.
pub fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// The `ms-seq` spelling of a stream id.
pub fn format_stream_id((ms, seq): (u64, u64)) -> String {
    format!("{ms}-{seq}")
}

/// The greatest stream id below `id` (`0-0` has none and stays `0-0`).
pub fn stream_id_before((ms, seq): (u64, u64)) -> (u64, u64) {
    match (ms, seq) {
        (0, 0) => (0, 0),
        (ms, 0) => (ms - 1, u64::MAX),
        (ms, seq) => (ms, seq - 1),
    }
}

/// A stream id as the database's two BIGINT columns. Sequence numbers past `i64::MAX` (only
/// the "just below" of an id whose sequence is 0) are clamped: no real entry has one.
fn as_columns((ms, seq): (u64, u64)) -> (i64, i64) {
    (
        i64::try_from(ms).unwrap_or(i64::MAX),
        i64::try_from(seq).unwrap_or(i64::MAX),
    )
}

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

/// How a run of new orders is inserted on PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Insert {
    /// A plain insert: nearly every batch is new orders read once, and an `ON CONFLICT` arbiter
    /// probes the primary key for each row before inserting it (~13 % of the database's CPU
    /// per persisted order, docs/lab/lab-log.md). A row that exists after all (a
    /// replayed batch, a claimed one, a release stored before its order) fails the statement,
    /// and the batch is applied again with [`Insert::IfAbsent`] (only a log line of the first
    /// attempt, an order without stock, may then appear twice).
    Plain,
    /// Insert-if-absent (`ON CONFLICT (id) DO NOTHING`), answering the ids that existed.
    IfAbsent,
}

/// Applies `events` in one transaction; `None` when `deduct` is [`Deduct::InBatch`] and the
/// batch would leave the stock below zero (nothing was written). On PostgreSQL the orders go
/// in with a plain insert first; when a row already existed the statement fails, its
/// transaction rolls back whole, and the batch is applied again inserting only the absent
/// orders, so what is written is what insert-if-absent writes.
pub(super) async fn apply(
    lane: &Lane,
    sql: &'static Statements,
    backend: Backend,
    item: i64,
    events: &[PersistEvent],
    marks: Marks<'_>,
    deduct: Deduct,
) -> Result<Option<ApplyStats>, StoreError> {
    let insert = match backend {
        Backend::Postgres => Insert::Plain,
        Backend::Mysql => Insert::IfAbsent,
    };
    let batch = Batch {
        sql,
        item,
        deduct,
        insert,
    };
    match apply_as(lane, backend, &batch, events, marks).await {
        Err(e) if insert == Insert::Plain && e.is_unique_violation() => {
            tracing::debug!(item, error = %e, "a batch's order existed; applying it again as insert-if-absent");
            let batch = Batch {
                insert: Insert::IfAbsent,
                ..batch
            };
            apply_as(lane, backend, &batch, events, marks).await
        }
        result => result,
    }
}

/// [`apply`] with the batch's way of inserting orders.
async fn apply_as(
    lane: &Lane,
    backend: Backend,
    batch: &Batch<'static>,
    events: &[PersistEvent],
    marks: Marks<'_>,
) -> Result<Option<ApplyStats>, StoreError> {
    let (sql, item, deduct) = (batch.sql, batch.item, batch.deduct);
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
    // Runs of `order` events (nearly all of a sale's) go in bulk; the rest one by one, in
    // stream order, so a `pay` after its `order` in the same batch still finds the row.
    let mut i = 0;
    while i < events.len() {
        if events[i].kind == PersistKind::Order {
            let end = events[i..]
                .iter()
                .position(|e| e.kind != PersistKind::Order)
                .map_or(events.len(), |k| i + k);
            for chunk in events[i..end].chunks(bulk::ORDER_CHUNK) {
                bulk::apply_orders(&mut tx, batch, backend, chunk, &mut stats).await?;
            }
            i = end;
        } else {
            apply_one(&mut tx, batch, &events[i], &mut stats).await?;
            i += 1;
        }
    }
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

/// What every event of one batch is applied with: the statements, the item, how to deduct,
/// how to insert new orders.
#[derive(Clone, Copy)]
struct Batch<'a> {
    sql: &'a Statements,
    item: i64,
    deduct: Deduct,
    insert: Insert,
}

/// What a batch does with the item's low-water mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marks<'a> {
    /// redis-lua's one stream per item: raise the mark to the candidate (if any) and record
    /// the ids applied above it.
    Tracked(Option<&'a str>),
    /// redis-buckets: one stream per bucket, whose ids do not order against each other, so
    /// the item's mark is left alone (the stream is trimmed below a candidate proven from
    /// Redis alone; see `pipeline::mark`).
    Untracked,
}

/// Raises the low-water mark to `candidate` on its own (nothing to apply). Returns the mark.
pub(super) async fn advance(
    lane: &Lane,
    sql: &'static Statements,
    backend: Backend,
    item: i64,
    candidate: &str,
) -> Result<String, StoreError> {
    let mut tx = StoreTx::open(lane, sql, backend).await?;
    let mark = raise_mark(&mut tx, sql, item, Some(candidate)).await?;
    tx.commit().await?;
    Ok(format_stream_id(mark))
}

/// Locks the item row, raises its mark to `candidate` when that is higher, and forgets the
/// applied ids the mark now covers. Returns the mark in force.
async fn raise_mark(
    tx: &mut StoreTx,
    sql: &Statements,
    item: i64,
    candidate: Option<&str>,
) -> Result<(u64, u64), StoreError> {
    let current: Option<String> = sqlx::query_scalar(sql.lock_applied)
        .bind(item)
        .fetch_optional(tx.conn())
        .await?;
    let current = stream_id(current.as_deref().unwrap_or("0-0"));
    let Some(candidate) = candidate.map(stream_id).filter(|c| *c > current) else {
        return Ok(current);
    };
    sqlx::query(sql.set_applied)
        .bind(format_stream_id(candidate))
        .bind(item)
        .execute(tx.conn())
        .await?;
    let ((old_ms, old_seq), (ms, seq)) = (as_columns(current), as_columns(candidate));
    sqlx::query(sql.delete_applied_upto)
        .bind(item)
        .bind(old_ms)
        .bind(old_seq)
        .bind(ms)
        .bind(seq)
        .execute(tx.conn())
        .await?;
    Ok(candidate)
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

/// Applies one event: a status move (restocking a release), else an insert-if-absent in the
/// event's state, deducting what a new live order holds.
async fn apply_one(
    tx: &mut StoreTx,
    b: &Batch<'_>,
    ev: &PersistEvent,
    stats: &mut ApplyStats,
) -> Result<(), StoreError> {
    let target = match ev.kind {
        PersistKind::Order => OrderStatus::PendingPayment,
        PersistKind::Pay => OrderStatus::Paid,
        PersistKind::Cancel => OrderStatus::Cancelled,
        PersistKind::Expire => OrderStatus::Expired,
    };
    if ev.kind != PersistKind::Order && move_status(tx, b, ev, target, stats).await? {
        return Ok(());
    }
    // An `order` event, or a state change for an order not persisted yet.
    if !insert_if_absent(tx, b, ev, target).await? {
        if let (PersistKind::Order, Some(key)) = (ev.kind, ev.idempotency_key.as_deref()) {
            // The row came first from a pay/cancel/expire event (after a claim, out of order),
            // which carries no key: the order's own event brings it.
            set_key_if_missing(tx, b, key, &ev.order_id).await?;
        }
        stats.replayed += 1;
        return Ok(());
    }
    stats.inserted += 1;
    if target.holds_stock() && b.deduct == Deduct::InBatch {
        return take(tx, b.sql, b.item, ev.qty).await;
    }
    if target.holds_stock() && !deduct_if_stock(tx, b.sql, b.item, ev.qty).await? {
        anomaly(ev, b.item, stats);
    }
    Ok(())
}

/// Moves a pending order to `target` (restocking a release); whether it moved.
async fn move_status(
    tx: &mut StoreTx,
    b: &Batch<'_>,
    ev: &PersistEvent,
    target: OrderStatus,
    stats: &mut ApplyStats,
) -> Result<bool, StoreError> {
    // Timestamps are the event's own (when Redis took or gave back the units), so the
    // oracle can replay the sale's history in the order it really happened.
    let moved = sqlx::query(b.sql.set_status_if)
        .bind(target.as_str())
        .bind(ev.at_ms)
        .bind(&ev.order_id)
        .bind(OrderStatus::PendingPayment.as_str())
        .execute(tx.conn())
        .await?
        .rows_affected()
        == 1;
    if moved && target != OrderStatus::Paid {
        sqlx::query(b.sql.restock)
            .bind(ev.qty)
            .bind(b.item)
            .execute(tx.conn())
            .await?;
        stats.restocked += ev.qty;
    }
    Ok(moved)
}

/// Inserts the event's order in state `target` unless its row exists; whether it was inserted.
async fn insert_if_absent(
    tx: &mut StoreTx,
    b: &Batch<'_>,
    ev: &PersistEvent,
    target: OrderStatus,
) -> Result<bool, StoreError> {
    Ok(sqlx::query(b.sql.insert_order_if_absent)
        .bind(&ev.order_id)
        .bind(b.item)
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
        == 1)
}

/// An order persisted without stock to deduct: counted and logged.
fn anomaly(ev: &PersistEvent, item: i64, stats: &mut ApplyStats) {
    stats.anomalies += 1;
    tracing::error!(
        order = %ev.order_id, item,
        "persisted an order the database has no stock for: Redis and the database disagree"
    );
}

/// Gives order `order_id` its idempotency `key` if its row has none yet (a row first written by
/// a pay, cancel or expiry event, which carries no key).
async fn set_key_if_missing(
    tx: &mut StoreTx,
    b: &Batch<'_>,
    key: &str,
    order_id: &str,
) -> Result<(), StoreError> {
    sqlx::query(b.sql.set_key_if_missing)
        .bind(key)
        .bind(order_id)
        .execute(tx.conn())
        .await?;
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

    #[test]
    fn stream_ids_order_numerically_and_step_down() {
        assert!(stream_id("10-0") > stream_id("9-5"));
        assert!(stream_id("10-11") > stream_id("10-2"));
        assert_eq!(stream_id("0-0"), (0, 0));
        assert_eq!(stream_id_before((10, 3)), (10, 2));
        assert_eq!(stream_id_before((10, 0)), (9, u64::MAX));
        assert_eq!(stream_id_before((0, 0)), (0, 0));
        assert_eq!(format_stream_id((5, 1)), "5-1");
        assert_eq!(as_columns((9, u64::MAX)), (9, i64::MAX));
    }
}
