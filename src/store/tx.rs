//! A transaction on the store, with the primitives the locking strategies need.

use super::rows::{bind_order, item_from_row};
use super::{dialect::Statements, StoreError};
use crate::model::{Item, Order};
use sqlx::{Any, Transaction};

/// A transaction on the store, with the primitives the locking strategies need.
pub struct StoreTx {
    pub(super) tx: Transaction<'static, Any>,
    pub(super) sql: &'static Statements,
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

    /// `stock = stock - qty` unless `user`'s live orders for the item (this transaction's
    /// included) then exceed `limit`; false when they would (the caller holds the row lock).
    pub async fn deduct_within_limit(
        &mut self,
        item: i64,
        qty: i64,
        user: &str,
        limit: i64,
    ) -> Result<bool, StoreError> {
        let done = sqlx::query(self.sql.deduct_within_limit)
            .bind(qty)
            .bind(item)
            .bind(item)
            .bind(user)
            .bind(limit)
            .execute(&mut *self.tx)
            .await?;
        Ok(done.rows_affected() == 1)
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
