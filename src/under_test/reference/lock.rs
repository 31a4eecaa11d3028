//! One run at a time per database: each run resets the sale, so a run holds every database it
//! uses for its whole length (see [`Store::try_run_lock`]) and refuses to start while another
//! run holds one.

use crate::runner::Held;
use crate::runner::{Cell, RunError};
use crate::services::redact_url;
use crate::store::{PoolSettings, Store};

/// Holds each database's run lock (see [`Store::try_run_lock`]) until dropped.
struct RunLock {
    store: Store,
    conn: Option<sqlx::pool::PoolConnection<sqlx::Any>>,
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Closing the lock's connection (not returning it to a pool) releases the lock.
        if let Some(conn) = self.conn.take() {
            drop(conn.detach());
        }
        let store = self.store.clone();
        tokio::spawn(async move { store.close().await });
    }
}

/// Locks every database the cells use; refuses to start if another run holds one.
pub(super) async fn lock_databases(cells: &[Cell]) -> anyhow::Result<Vec<Held>> {
    let mut urls: Vec<&str> = cells.iter().map(|c| c.database_url.as_str()).collect();
    urls.sort_unstable();
    urls.dedup();
    let mut locks = Vec::new();
    for url in urls {
        let store = Store::connect(url, &PoolSettings::harness(1)).await?;
        match store.try_run_lock().await? {
            Some(conn) => locks.push(Box::new(RunLock {
                store,
                conn: Some(conn),
            }) as Held),
            None => {
                store.close().await;
                return Err(RunError::DatabaseBusy {
                    url: redact_url(url),
                }
                .into());
            }
        }
    }
    Ok(locks)
}
