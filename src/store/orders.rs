//! Orders: insert, read, and moves through the order state machine (pay, cancel, expire),
//! each move a conditional status update so it happens at most once.

use super::dialect::Statements;
use super::rows::order_from_row;
use super::{on_lane, Store, StoreError, StoreTx};
use crate::model::{now_ms, Order, OrderStatus};

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
            sqlx::query(self.sql.release_restock)
                .bind(order.qty)
                .bind(now_ms())
                .bind(order.item_id)
                .execute(tx.conn())
                .await?;
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
