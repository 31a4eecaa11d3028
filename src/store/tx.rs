//! A transaction on the store, with the primitives the locking strategies need.

use super::lane::{Held, Lane};
use super::rows::{bind_order, item_from_row, order_from_row};
use super::{dialect, dialect::Statements, Backend, StoreError};
use crate::model::{Item, Order};
use sqlx::{Any, Row};
use sqlx_core::transaction::TransactionManager;

/// sqlx's own transaction bookkeeping for the `Any` driver (what its `Transaction` runs).
type Manager = <Any as sqlx::Database>::TransactionManager;

/// A transaction on the store, with the primitives the locking strategies need.
///
/// It runs on a connection [`Held`] from the store's lane rather than on sqlx's `Transaction`
/// over a pooled one, so that a committed or rolled-back order's connection rests in the lane
/// without sqlx's release ping. Dropped while still open (an error passed up with `?`, a
/// cancelled request), it queues the rollback exactly as sqlx's `Transaction` does, and the
/// connection goes back to sqlx's pool, whose ping on release sends that rollback at once.
pub struct StoreTx {
    held: Held,
    open: bool,
    sql: &'static Statements,
    backend: Backend,
}

impl Drop for StoreTx {
    fn drop(&mut self) {
        if self.open {
            // `conn()` marks the connection as not finished: it goes back to the pool.
            Manager::start_rollback(self.held.conn());
        }
    }
}

impl StoreTx {
    /// `BEGIN` on a connection held from `lane`. One whose `BEGIN` failed because its
    /// connection had died while idle (nothing pings before a use: `Store::connect`) is
    /// retried on another connection, a few times: nothing ran on the dead one (it went back
    /// to the pool, which closes it), so the retry does nothing twice.
    pub(super) async fn open(
        lane: &Lane,
        sql: &'static Statements,
        backend: Backend,
    ) -> Result<StoreTx, sqlx::Error> {
        const ATTEMPTS: usize = 4;
        let mut tx = StoreTx::begin(lane, sql, backend).await;
        for _ in 1..ATTEMPTS {
            match &tx {
                Err(e) if super::dead_connection(e) => {
                    tx = StoreTx::begin(lane, sql, backend).await
                }
                _ => break,
            }
        }
        tx
    }

    /// `BEGIN` on a connection held from `lane`.
    async fn begin(
        lane: &Lane,
        sql: &'static Statements,
        backend: Backend,
    ) -> Result<StoreTx, sqlx::Error> {
        let held = lane.hold().await?;
        // Open from here: a failed or cancelled `BEGIN` is rolled back like an open one.
        let mut tx = StoreTx {
            held,
            open: true,
            sql,
            backend,
        };
        Manager::begin(tx.held.conn(), None).await?;
        Ok(tx)
    }

    /// `SELECT ... FOR UPDATE`: reads the item and holds its row lock until commit.
    pub async fn lock_item(&mut self, id: i64) -> Result<Option<Item>, StoreError> {
        let row = sqlx::query(self.sql.lock_item)
            .bind(id)
            .fetch_optional(self.held.conn())
            .await?;
        row.map(|r| item_from_row(&r)).transpose()
    }

    /// A plain read of the item inside this transaction. On MySQL the store's sessions run at
    /// READ COMMITTED, so even a second read in the same transaction sees rows committed since
    /// (REPEATABLE READ would keep returning its first snapshot: the stale-version retry trap).
    pub async fn read_item(&mut self, id: i64) -> Result<Option<Item>, StoreError> {
        let row = sqlx::query(self.sql.read_item)
            .bind(id)
            .fetch_optional(self.held.conn())
            .await?;
        row.map(|r| item_from_row(&r)).transpose()
    }

    /// Units a user holds, read inside this transaction.
    pub async fn held_by_user(&mut self, item: i64, user: &str) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(self.sql.held_by_user)
            .bind(item)
            .bind(user)
            .fetch_one(self.held.conn())
            .await?)
    }

    /// `stock = stock - qty` (the caller holds the row lock).
    pub async fn deduct(&mut self, item: i64, qty: i64) -> Result<(), StoreError> {
        sqlx::query(self.sql.deduct)
            .bind(qty)
            .bind(item)
            .execute(self.held.conn())
            .await?;
        Ok(())
    }

    /// for-update's lock: the item under its row lock, and when a release last gave units
    /// back to it (`released_at_ms`, 0 if never).
    pub async fn lock_for_purchase(&mut self, id: i64) -> Result<Option<(Item, i64)>, StoreError> {
        let row = sqlx::query(self.sql.lock_for_purchase)
            .bind(id)
            .fetch_optional(self.held.conn())
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
            .execute(self.held.conn())
            .await?;
        if done.rows_affected() != 1 {
            return Ok(false);
        }
        if let (Some(at_ms), Backend::Mysql) = (stamp, self.backend) {
            sqlx::query(self.sql.stamp_order)
                .bind(at_ms)
                .bind(at_ms)
                .bind(id)
                .execute(self.held.conn())
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
            .execute(self.held.conn())
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
            .execute(self.held.conn())
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
            .execute(self.held.conn())
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
        let rows = q.fetch_all(self.held.conn()).await?;
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
        q.execute(self.held.conn()).await?;
        Ok(())
    }

    /// Inserts an order in this transaction.
    pub async fn insert_order(&mut self, order: &Order) -> Result<(), StoreError> {
        super::rows::insert_order(self.sql, order)
            .execute(self.held.conn())
            .await?;
        Ok(())
    }

    /// Stores the stock a purchase read on its order, inserted earlier in this transaction.
    pub async fn note_stock_read(&mut self, order_id: &str, stock: i64) -> Result<(), StoreError> {
        sqlx::query(self.sql.note_stock_read)
            .bind(stock)
            .bind(order_id)
            .execute(self.held.conn())
            .await?;
        Ok(())
    }

    /// The transaction's connection, for the store's own statements in it.
    pub(super) fn conn(&mut self) -> &mut sqlx::AnyConnection {
        self.held.conn()
    }

    /// Commits. A failed `COMMIT` leaves the transaction to be rolled back as if dropped open.
    pub async fn commit(mut self) -> Result<(), StoreError> {
        let done = Manager::commit(self.held.conn()).await;
        self.ended(done)
    }

    /// Rolls back.
    pub async fn rollback(mut self) -> Result<(), StoreError> {
        let done = Manager::rollback(self.held.conn()).await;
        self.ended(done)
    }

    /// The transaction's end ran: closed, and its connection free to rest in the lane.
    fn ended(&mut self, done: Result<(), sqlx::Error>) -> Result<(), StoreError> {
        if done.is_ok() {
            self.open = false;
            self.held.finished(&done);
        }
        Ok(done?)
    }
}
