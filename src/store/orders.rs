//! Orders: insert, read, and moves through the order state machine (pay, cancel, expire),
//! each move a conditional status update so it happens at most once.

use super::dialect::Statements;
use super::rows::order_from_row;
use super::{on_lane, Store, StoreError, StoreTx};
use crate::model::{now_ms, Order, OrderStatus};
use sqlx::Row;

/// Outcome of moving an order through its state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The move happened; `restocked` units went back to stock.
    Applied { restocked: i64 },
    /// The order was already in this state; nothing changed.
    AlreadyIn(OrderStatus),
    /// No such order.
    NotFound,
}

impl Store {
    /// Inserts an order on its own (autocommit).
    pub async fn insert_order(&self, order: &Order) -> Result<(), StoreError> {
        on_lane!(self, |c| super::rows::insert_order(self.sql, order)
            .execute(c));
        Ok(())
    }

    /// One order by id.
    pub async fn order(&self, id: &str) -> Result<Option<Order>, StoreError> {
        let row = on_lane!(self, |c| sqlx::query(self.sql.get_order)
            .bind(id)
            .fetch_optional(c));
        row.map(|r| order_from_row(&r)).transpose()
    }

    /// The order `key` (an `Idempotency-Key`) bought of `item`, if any.
    pub async fn order_by_key(&self, item: i64, key: &str) -> Result<Option<Order>, StoreError> {
        let row = on_lane!(self, |c| sqlx::query(self.sql.order_by_key)
            .bind(item)
            .bind(key)
            .fetch_optional(c));
        row.map(|r| order_from_row(&r)).transpose()
    }

    /// Every order of an item.
    pub async fn orders_for_item(&self, item: i64) -> Result<Vec<Order>, StoreError> {
        let rows = on_lane!(self, |c| sqlx::query(self.sql.orders_for_item)
            .bind(item)
            .fetch_all(c));
        rows.iter().map(order_from_row).collect()
    }

    /// Pending orders of an item created before `before_ms` (payment timed out).
    pub async fn overdue_orders(
        &self,
        item: i64,
        before_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        Ok(on_lane!(self, |c| sqlx::query_scalar(
            self.sql.overdue_orders
        )
        .bind(item)
        .bind(before_ms)
        .fetch_all(c)))
    }

    /// `pending_payment → paid`.
    pub async fn pay(&self, id: &str) -> Result<Transition, StoreError> {
        let mut tx = self.open_tx().await?;
        let moved = set_status_if(
            &mut tx,
            self.sql,
            id,
            OrderStatus::PendingPayment,
            OrderStatus::Paid,
        )
        .await?;
        let out = if moved {
            Transition::Applied { restocked: 0 }
        } else {
            current_state(&mut tx, self.sql, id).await?
        };
        tx.commit().await?;
        Ok(out)
    }

    /// `pending_payment → cancelled | expired`, putting the units back exactly once: the
    /// conditional status update is the guard, and the restock commits with it or not at all.
    pub async fn release(&self, id: &str, to: OrderStatus) -> Result<Transition, StoreError> {
        let mut tx = self.open_tx().await?;
        let Some(order) = fetch_order(&mut tx, self.sql, id).await? else {
            return Ok(Transition::NotFound);
        };
        let moved = set_status_if(&mut tx, self.sql, id, OrderStatus::PendingPayment, to).await?;
        let out = if moved {
            // Not before the order's own `updated_at_ms` (set just above): for-update reads
            // this mark to know a release came while its buyer queued.
            let now = now_ms();
            sqlx::query(self.sql.release_restock)
                .bind(order.qty)
                .bind(now)
                .bind(order.item_id)
                .execute(tx.conn())
                .await?;
            ledger(&mut tx, self.sql, &order, now).await?;
            Transition::Applied {
                restocked: order.qty,
            }
        } else {
            current_state(&mut tx, self.sql, id).await?
        };
        tx.commit().await?;
        Ok(out)
    }
}

/// Writes one restock of `order` into the ledger, in `tx`: the transaction that restocks.
async fn ledger(
    tx: &mut StoreTx,
    sql: &Statements,
    order: &Order,
    at_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(sql.insert_restock)
        .bind(order.item_id)
        .bind(&order.id)
        .bind(order.qty)
        .bind(at_ms)
        .execute(tx.conn())
        .await?;
    Ok(())
}

impl Store {
    /// Restocks `order`'s units once more, with no state check (a testing aid: the defects'
    /// second restock path), and writes it into the ledger like any restock.
    pub async fn restock_again(&self, order_id: &str) -> Result<(), StoreError> {
        let mut tx = self.open_tx().await?;
        if let Some(order) = fetch_order(&mut tx, self.sql, order_id).await? {
            sqlx::query(self.sql.restock)
                .bind(order.qty)
                .bind(order.item_id)
                .execute(tx.conn())
                .await?;
            ledger(&mut tx, self.sql, &order, now_ms()).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// What the restock ledger shows that a correct shop never does, for `item`: orders
    /// restocked more than once, and restocks of orders that still hold their units (the first
    /// [`RESTOCK_EXAMPLES`] of each, every one counted).
    pub async fn restock_anomalies(&self, item: i64) -> Result<RestockAnomalies, StoreError> {
        use futures_util::TryStreamExt;
        let mut held = self.lane.hold().await?;
        let conn = held.conn();
        let mut a = RestockAnomalies::default();
        let mut rows = sqlx::query(self.sql.restocked_twice)
            .bind(item)
            .fetch(&mut *conn);
        while let Some(r) = rows.try_next().await? {
            let restocks: i64 = r.try_get(1)?;
            a.extra_restocks += restocks - 1;
            if a.twice.len() < RESTOCK_EXAMPLES {
                a.twice.push(RestockedTwice {
                    order_id: r.try_get(0)?,
                    restocks,
                    units: r.try_get(2)?,
                    first_ms: r.try_get(3)?,
                    last_ms: r.try_get(4)?,
                });
            }
        }
        drop(rows);
        let mut rows = sqlx::query(self.sql.restocked_held)
            .bind(item)
            .fetch(&mut *conn);
        while let Some(r) = rows.try_next().await? {
            a.extra_restocks += 1;
            if a.held.len() < RESTOCK_EXAMPLES {
                a.held.push(RestockedHeld {
                    order_id: r.try_get(0)?,
                    qty: r.try_get(1)?,
                    at_ms: r.try_get(2)?,
                    status: r.try_get(3)?,
                });
            }
        }
        Ok(a)
    }
}

/// How many examples of each restock anomaly are kept.
pub const RESTOCK_EXAMPLES: usize = 20;

/// What the restock ledger shows a correct shop never does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestockAnomalies {
    /// Restocks beyond one per released order: the second and later restocks of an order, and
    /// every restock of an order that still holds its units.
    pub extra_restocks: i64,
    pub twice: Vec<RestockedTwice>,
    pub held: Vec<RestockedHeld>,
}

/// An order the ledger shows restocked more than once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestockedTwice {
    pub order_id: String,
    pub restocks: i64,
    pub units: i64,
    pub first_ms: i64,
    pub last_ms: i64,
}

/// A restock of an order whose row still holds its units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestockedHeld {
    pub order_id: String,
    pub qty: i64,
    pub at_ms: i64,
    pub status: String,
}

async fn fetch_order(
    tx: &mut StoreTx,
    sql: &Statements,
    id: &str,
) -> Result<Option<Order>, StoreError> {
    let row = sqlx::query(sql.get_order)
        .bind(id)
        .fetch_optional(tx.conn())
        .await?;
    row.map(|r| order_from_row(&r)).transpose()
}

async fn set_status_if(
    tx: &mut StoreTx,
    sql: &Statements,
    id: &str,
    from: OrderStatus,
    to: OrderStatus,
) -> Result<bool, StoreError> {
    let done = sqlx::query(sql.set_status_if)
        .bind(to.as_str())
        .bind(now_ms())
        .bind(id)
        .bind(from.as_str())
        .execute(tx.conn())
        .await?;
    Ok(done.rows_affected() == 1)
}

async fn current_state(
    tx: &mut StoreTx,
    sql: &Statements,
    id: &str,
) -> Result<Transition, StoreError> {
    Ok(match fetch_order(tx, sql, id).await? {
        Some(o) => Transition::AlreadyIn(o.status),
        None => Transition::NotFound,
    })
}
