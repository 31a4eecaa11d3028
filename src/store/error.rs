//! Failures of the storage layer, which of them are contention rather than faults, and which
//! are the database refusing one particular row rather than being unavailable.

use crate::services::{redact_url, Service};

/// Failures of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    BadUrl(String),
    #[error("{}", describe_connect_failure(*.service, .url, .error))]
    Unreachable {
        service: Service,
        url: String,
        /// Not a `source`: the message above already says it, once.
        error: sqlx::Error,
    },
    #[error("migrating {url}: {source}")]
    Migrate {
        url: String,
        source: sqlx::migrate::MigrateError,
    },
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
}

/// A refused login is not a server that is down: say so instead of "start it".
fn describe_connect_failure(service: Service, url: &str, e: &sqlx::Error) -> String {
    let login_refused = e.as_database_error().is_some_and(|db| {
        db.code().as_deref().is_some_and(|c| c.starts_with("28"))
            || db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|m| matches!(m.number(), 1044 | 1045))
    });
    if login_refused {
        format!(
            "{} at {} refused the login: {e}; check the user and password in the URL",
            service.name(),
            redact_url(url)
        )
    } else {
        service.unreachable(url, e)
    }
}

impl StoreError {
    /// True when the failure is contention rather than a fault: pool exhausted, lock wait timed
    /// out, deadlock victim. The shop answers these with `503 busy`.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Sql(e) if is_busy(e))
    }
}

/// True when a statement failed because its connection is gone: the socket broke, or the
/// server ended the session (PostgreSQL's `57P01`/`57P02`, after `pg_terminate_backend` or a
/// crash; MariaDB's `1927` "connection was killed"). A new connection may well succeed.
pub(super) fn dead_connection(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => {
            matches!(db.code().as_deref(), Some("57P01" | "57P02"))
                || db
                    .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|m| m.number() == 1927)
        }
        _ => false,
    }
}

/// See [`StoreError::is_busy`].
pub fn is_busy(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => {
            // PostgreSQL: lock_not_available, deadlock_detected, query_canceled
            // (lock_timeout / statement_timeout). MySQL: ER_LOCK_WAIT_TIMEOUT 1205,
            // ER_LOCK_DEADLOCK 1213 (SQLSTATE 40001).
            if matches!(
                db.code().as_deref(),
                Some("55P03" | "40P01" | "57014" | "40001")
            ) {
                return true;
            }
            db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|m| matches!(m.number(), 1205 | 1213))
        }
        _ => false,
    }
}

/// The unique index that holds one order per `Idempotency-Key` and item (migration 0003).
pub const IDEMPOTENCY_INDEX: &str = "orders_item_idempotency";

impl StoreError {
    /// The database's error when a statement failed on a unique index (PostgreSQL's `23505`,
    /// MySQL's and MariaDB's ER_DUP_ENTRY `1062`): a row with that key exists.
    fn unique_violation(&self) -> Option<&dyn sqlx::error::DatabaseError> {
        let StoreError::Sql(sqlx::Error::Database(db)) = self else {
            return None;
        };
        let unique = db.code().as_deref() == Some("23505")
            || db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|m| m.number() == 1062);
        unique.then_some(db.as_ref())
    }

    /// True when a statement failed on a unique index: a row with that key exists.
    pub fn is_unique_violation(&self) -> bool {
        self.unique_violation().is_some()
    }

    /// True when an order insert lost to another order with the same `Idempotency-Key`: the
    /// unique index [`IDEMPOTENCY_INDEX`] refused it (PostgreSQL names the constraint, MySQL
    /// and MariaDB name the key in ER_DUP_ENTRY's message). The insert's transaction rolls
    /// back; the answer is the other order.
    pub fn is_idempotency_conflict(&self) -> bool {
        self.unique_violation().is_some_and(|db| {
            db.constraint() == Some(IDEMPOTENCY_INDEX) || db.message().contains(IDEMPOTENCY_INDEX)
        })
    }
}

impl StoreError {
    /// True when the database refused the data itself ([`refuses_entry`]); false when it is
    /// unavailable, busy, or failing for a reason no entry is to blame for.
    pub fn refuses_entry(&self) -> bool {
        matches!(self, StoreError::Sql(e) if refuses_entry(e))
    }
}

/// True when the database refused the data of this statement: a data exception or an
/// integrity violation (SQLSTATE classes 22 and 23; MySQL's numbered equivalents), or a value
/// that could not even be encoded. Retrying the same row cannot succeed. Everything else
/// (connection refused or reset, pool timeout, server shutting down, lock waits, deadlocks, a
/// missing table) is the database being unavailable: retried, never blamed on an entry.
pub fn refuses_entry(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Encode(_) => true,
        sqlx::Error::Database(db) => {
            if is_busy(e) {
                return false;
            }
            if db
                .code()
                .as_deref()
                .is_some_and(|c| c.starts_with("22") || c.starts_with("23"))
            {
                return true;
            }
            // ER_BAD_NULL_ERROR 1048, ER_DUP_ENTRY 1062, ER_WARN_DATA_OUT_OF_RANGE 1264,
            // ER_TRUNCATED_WRONG_VALUE 1292, ER_TRUNCATED_WRONG_VALUE_FOR_FIELD 1366,
            // ER_DATA_TOO_LONG 1406, ER_NO_REFERENCED_ROW_2 1452, ER_CHECK_CONSTRAINT_VIOLATED
            // 3819 (MySQL), ER_CONSTRAINT_FAILED 4025 (MariaDB).
            db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|m| {
                    matches!(
                        m.number(),
                        1048 | 1062 | 1264 | 1292 | 1366 | 1406 | 1452 | 3819 | 4025
                    )
                })
        }
        _ => false,
    }
}
