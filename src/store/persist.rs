//! Persisting redis-lua's stream events: one transaction per batch, idempotent per order.
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

use super::{dialect::Statements, StoreError};
use crate::model::OrderStatus;
use sqlx::AnyPool;

/// A stream entry id (`ms-seq`) as a pair that orders like the stream does.
pub fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// What a stream event asks the database to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistKind {
    Order,
    Pay,
    Cancel,
    Expire,
}

impl PersistKind {
    /// Parses the `type` field of a stream entry.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "order" => Some(PersistKind::Order),
            "pay" => Some(PersistKind::Pay),
            "cancel" => Some(PersistKind::Cancel),
            "expire" => Some(PersistKind::Expire),
            _ => None,
        }
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

pub(super) async fn apply(
    pool: &AnyPool,
    sql: &Statements,
    item: i64,
    events: &[PersistEvent],
    last_id: &str,
) -> Result<ApplyStats, StoreError> {
    let mut stats = ApplyStats::default();
    let mut tx = pool.begin().await?;
    // The applied mark only moves forward, whichever consumer (or process) commits last.
    let current: Option<String> = sqlx::query_scalar(sql.lock_applied)
        .bind(item)
        .fetch_optional(&mut *tx)
        .await?;
    let mark = match current {
        Some(c) if stream_id(&c) > stream_id(last_id) => c,
        _ => last_id.to_string(),
    };
    for ev in events {
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
                .execute(&mut *tx)
                .await?
                .rows_affected()
                == 1;
            if moved {
                if target != OrderStatus::Paid {
                    sqlx::query(sql.restock)
                        .bind(ev.qty)
                        .bind(item)
                        .execute(&mut *tx)
                        .await?;
                    stats.restocked += ev.qty;
                }
                continue;
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
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        if !inserted {
            stats.replayed += 1;
            continue;
        }
        stats.inserted += 1;
        if target.holds_stock() {
            let deducted = sqlx::query(sql.deduct_if_stock)
                .bind(ev.qty)
                .bind(item)
                .bind(ev.qty)
                .execute(&mut *tx)
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
    }
    sqlx::query(sql.set_applied)
        .bind(&mark)
        .bind(item)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(stats)
}
