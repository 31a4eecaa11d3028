//! A transaction on the store, with the primitives the locking strategies need.

use super::rows::{bind_order, item_from_row, order_from_row};
use super::{dialect, dialect::Statements, Backend, StoreError};
use crate::model::{Item, Order};
use sqlx::{Any, Row, Transaction};

/// A transaction on the store, with the primitives the locking strategies need.
pub struct StoreTx {
    pub(super) tx: Transaction<'static, Any>,
    pub(super) sql: &'static Statements,
    pub(super) backend: Backend,
}

impl StoreTx {
    /// `SELECT ... FOR UPDATE`: reads the item and holds its row lock until commit.
    pub async fn lock_item(&mut self, id: i64) -> Result<Option<Item>, StoreError> {
        let row = sqlx::query(self.sql.lock_item)
            .bind(id)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.map(|r| item_from_row(&r)).transpose()
    }

    /// A plain read of the item inside this transaction. On MySQL the store's sessions run at
    /// READ COMMITTED, so even a second read in the same transaction sees rows committed since
    /// (REPEATABLE READ would keep returning its first snapshot: the stale-version retry trap).
    pub async fn read_item(&mut self, id: i64) -> Result<Option<Item>, StoreError> {
        let row = sqlx::query(self.sql.read_item)
            .bind(id)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.map(|r| item_from_row(&r)).transpose()
    }

    /// Units a user holds, read inside this transaction.
    pub async fn held_by_user(&mut self, item: i64, user: &str) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(self.sql.held_by_user)
            .bind(item)
            .bind(user)
            .fetch_one(&mut *self.tx)
            .await?)
    }

    /// `stock = stock - qty` (the caller holds the row lock).
    pub async fn deduct(&mut self, item: i64, qty: i64) -> Result<(), StoreError> {
        sqlx::query(self.sql.deduct)
            .bind(qty)
            .bind(item)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// for-update's lock: the item under its row lock, and when a release last gave units
    /// back to it (`released_at_ms`, 0 if never).
    pub async fn lock_for_purchase(&mut self, id: i64) -> Result<Option<(Item, i64)>, StoreError> {
        let row = sqlx::query(self.sql.lock_for_purchase)
            .bind(id)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.map(|r| Ok((item_from_row(&r)?, r.try_get::<i64, _>(7)?)))
            .transpose()
    }

    /// `stock = stock - order.qty` unless its buyer's live orders for the item (this one
    /// included) then exceed `limit`; false when they would (the caller holds the row lock).
    /// With `stamp`, `order` (this transaction's, inserted before the lock) is also stamped
    /// created and updated at that time: in the same statement on PostgreSQL, by one more
    /// primary-key `UPDATE` on MySQL (see `Statements::deduct_within_limit_stamped`).
    pub async fn deduct_within_limit(
        &mut self,
        order: &Order,
        stamp: Option<i64>,
        limit: i64,
    ) -> Result<bool, StoreError> {
        let (item, id) = (order.item_id, order.id.as_str());
        let query = match (stamp, self.backend) {
            (Some(at_ms), Backend::Postgres) => sqlx::query(self.sql.deduct_within_limit_stamped)
                .bind(at_ms)
                .bind(at_ms)
                .bind(id),
            _ => sqlx::query(self.sql.deduct_within_limit),
        };
        let done = query
            .bind(order.qty)
            .bind(item)
            .bind(item)
            .bind(&order.user_id)
            .bind(limit)
            .execute(&mut *self.tx)
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        if let (Some(at_ms), Backend::Mysql) = (stamp, self.backend) {
            sqlx::query(self.sql.stamp_order)
                .bind(at_ms)
                .bind(at_ms)
                .bind(id)
                .execute(&mut *self.tx)
                .await?;
        }
        Ok(true)
    }

    /// The optimistic write: deducts only if the version is still `version` and stock suffices.
    /// Returns false when another buyer got there first.
    pub async fn cas_deduct(
        &mut self,
        item: i64,
        qty: i64,
        version: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(self.sql.cas_deduct)
            .bind(qty)
            .bind(item)
            .bind(qty)
            .bind(version)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// `conditional`'s one decision: `stock = stock - qty WHERE id = ? AND stock >= qty`, no
    /// version compare. True when the row was updated (the units are taken, and the row stays
    /// locked until commit); false when the stock did not cover `qty` (or no such item).
    pub async fn conditional_deduct(&mut self, item: i64, qty: i64) -> Result<bool, StoreError> {
        let done = sqlx::query(self.sql.conditional_deduct)
            .bind(qty)
            .bind(item)
            .bind(qty)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Inserts an order only if its buyer's live units of the item plus the order's stay
    /// within `limit`; false when they would not (nothing inserted). Exact only after this
    /// transaction took the item's row lock (see [`Statements::insert_order_within_limit`]).
    pub async fn insert_order_within_limit(
        &mut self,
        order: &Order,
        limit: i64,
    ) -> Result<bool, StoreError> {
        let done = bind_order(sqlx::query(self.sql.insert_order_within_limit), order)
            .bind(order.item_id)
            .bind(&order.user_id)
            .bind(order.qty)
            .bind(limit)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    /// `batched`: every order of `item` bought by one of `users` or with one of `keys`, in
    /// this transaction (see [`dialect::batch_orders`]).
    pub async fn batch_orders(
        &mut self,
        item: i64,
        users: &[&str],
        keys: &[&str],
    ) -> Result<Vec<Order>, StoreError> {
        let stmt = dialect::batch_orders(self.backend, users.len(), keys.len());
        let mut q = sqlx::query(sqlx::AssertSqlSafe(stmt)).bind(item);
        for u in users {
            q = q.bind(*u);
        }
        if !keys.is_empty() {
            q = q.bind(item);
        }
        for k in keys {
            q = q.bind(*k);
        }
        let rows = q.fetch_all(&mut *self.tx).await?;
        rows.iter().map(order_from_row).collect()
    }

    /// `batched`: inserts every order in one multi-row statement.
    pub async fn insert_orders(&mut self, orders: &[&Order]) -> Result<(), StoreError> {
        if orders.is_empty() {
            return Ok(());
        }
        let stmt = dialect::insert_orders(self.backend, orders.len());
        let mut q = sqlx::query(sqlx::AssertSqlSafe(stmt));
        for o in orders {
            q = bind_order(q, o);
        }
        q.execute(&mut *self.tx).await?;
        Ok(())
    }

    /// Inserts an order in this transaction.
    pub async fn insert_order(&mut self, order: &Order) -> Result<(), StoreError> {
        bind_order(sqlx::query(self.sql.insert_order), order)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Commits.
    pub async fn commit(self) -> Result<(), StoreError> {
        Ok(self.tx.commit().await?)
    }

    /// Rolls back.
    pub async fn rollback(self) -> Result<(), StoreError> {
        Ok(self.tx.rollback().await?)
    }
}
