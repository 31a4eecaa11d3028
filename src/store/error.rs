//! Failures of the storage layer, and which of them are contention rather than faults.

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
