//! The user's SQL oracle reads inside one read-only transaction: a query that would write is
//! refused by the database, and the transaction is always rolled back.

use sqlx::AnyPool;

/// A pooled connection inside `START TRANSACTION READ ONLY`: a user's query that would write
/// is refused by the database. [`ReadOnly::finish`] rolls it back.
pub(super) struct ReadOnly(sqlx::pool::PoolConnection<sqlx::Any>);

impl ReadOnly {
    /// A connection of `pool`, its read-only transaction begun.
    pub(super) async fn begin(pool: &AnyPool) -> Result<Self, sqlx::Error> {
        let mut conn = pool.acquire().await?;
        sqlx::raw_sql("START TRANSACTION READ ONLY")
            .execute(&mut *conn)
            .await?;
        Ok(ReadOnly(conn))
    }

    /// The connection, for the queries of the transaction.
    pub(super) fn conn(&mut self) -> &mut sqlx::AnyConnection {
        &mut self.0
    }

    /// Rolls the transaction back; a connection that cannot is closed, never handed back to
    /// the pool with a transaction open.
    pub(super) async fn finish(mut self) {
        if sqlx::raw_sql("ROLLBACK")
            .execute(&mut *self.0)
            .await
            .is_err()
        {
            self.0.close_on_drop();
        }
    }
}
