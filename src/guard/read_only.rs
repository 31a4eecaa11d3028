//! The user's SQL oracle reads inside one read-only transaction, as the run's reader
//! ([`super::Reader`]): a query that would write is refused by the database, a slow one is
//! stopped by the database's statement timeout, and the transaction is always rolled back.

use sqlx::Connection;
use std::time::Duration;

/// A connection of its own inside `START TRANSACTION READ ONLY`, under a statement timeout: a
/// user's query that would write is refused by the database. [`ReadOnly::finish`] rolls it
/// back and closes the connection, so nothing the query left on its session (an advisory lock,
/// `GET_LOCK`) outlives it.
pub(crate) struct ReadOnly(sqlx::AnyConnection);

impl ReadOnly {
    /// A connection as `reader`, its statements limited to `timeout`, its read-only
    /// transaction begun.
    pub(crate) async fn begin(
        reader: &super::Reader,
        timeout: Duration,
    ) -> Result<Self, sqlx::Error> {
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(reader.login_url()).await?;
        let ms = timeout.as_millis().max(1);
        let limit = match conn.backend_name() {
            "PostgreSQL" => format!("SET statement_timeout = {ms}"),
            // MariaDB; MySQL would need max_execution_time.
            _ => format!(
                "SET SESSION max_statement_time = {:.3}",
                timeout.as_secs_f64()
            ),
        };
        if sqlx::raw_sql(sqlx::AssertSqlSafe(limit))
            .execute(&mut conn)
            .await
            .is_err()
        {
            let mysql = format!("SET SESSION max_execution_time = {ms}");
            sqlx::raw_sql(sqlx::AssertSqlSafe(mysql))
                .execute(&mut conn)
                .await?;
        }
        sqlx::raw_sql("START TRANSACTION READ ONLY")
            .execute(&mut conn)
            .await?;
        Ok(ReadOnly(conn))
    }

    /// The connection, for the queries of the transaction.
    pub(crate) fn conn(&mut self) -> &mut sqlx::AnyConnection {
        &mut self.0
    }

    /// Rolls the transaction back and closes the connection (the next read starts a clean
    /// session).
    pub(crate) async fn finish(mut self) {
        let _ = sqlx::raw_sql("ROLLBACK").execute(&mut self.0).await;
        let _ = self.0.close().await;
    }
}
