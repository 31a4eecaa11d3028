//! `db-crash` and `db-restart`: the run's database server itself goes down, on managed servers
//! only ([`crate::services::managed`]: `--services managed`, or `auto` when nothing answers at
//! the configured URL). A server the harness did not start is never touched: the fault is
//! skipped with that reason.
//!
//! - `db-crash`: SIGKILL of the server's whole process group (PostgreSQL's postmaster and
//!   backends, `mariadbd`): no shutdown checkpoint, no final flush. After the window it is
//!   started again on the same port and data directory, and the fault ends once it answers,
//!   so its window holds the crash recovery (WAL replay, InnoDB redo).
//! - `db-restart`: a clean stop (PostgreSQL's fast shutdown, SIGTERM for MariaDB), the window,
//!   then the same start.
//!
//! Every other database on that server goes down with it: one run per server at a time.

use super::hold::Hold;
use crate::services::managed::{self, ManagedServer};
use anyhow::Context;
use std::sync::Arc;
use std::time::Instant;

/// The managed server the run's database lives on, if the harness started it.
pub(super) fn server_of(database_url: &str) -> Option<Arc<ManagedServer>> {
    managed::server_at(database_url)
}

/// Why a database server fault cannot act on `database_url` (`None`: it can).
pub(super) fn refused(database_url: &str) -> Option<String> {
    server_of(database_url).is_none().then(|| {
        "skipped: the run's database is not on a managed server (db-crash and db-restart act \
         only on servers the harness started: --services managed)"
            .to_string()
    })
}

/// `db-crash` (`clean` false) or `db-restart` (`clean` true) for the window.
pub(super) async fn act(
    database_url: &str,
    clean: bool,
    hold: &mut Hold,
) -> anyhow::Result<Option<String>> {
    let server = server_of(database_url).context("the run's database is not managed")?;
    if !hold.start().await {
        return Ok(None);
    }
    let pid = server.pid();
    if clean {
        server.stop().await;
    } else {
        let s = server.clone();
        tokio::task::spawn_blocking(move || s.kill9()).await?;
    }
    hold.mark();
    hold.wait().await;
    let started = Instant::now();
    server
        .start_again()
        .await
        .context("starting the database server again")?;
    let how = if clean {
        "stopped cleanly"
    } else {
        "killed with SIGKILL (its process group)"
    };
    let recovery = if clean { "start" } else { "crash recovery" };
    Ok(Some(format!(
        "{} server (pid {}) {how}, started again on port {}: {recovery} took {} ms",
        server.kind().service().name(),
        pid.map_or("?".to_string(), |p| p.to_string()),
        server.port(),
        started.elapsed().as_millis()
    )))
}

/// Undo: a server a dropped run left down is started again (idempotent: a running server is
/// left alone).
pub(super) async fn start_again(server: &ManagedServer) {
    if let Err(e) = server.start_again().await {
        tracing::warn!(error = %format!("{e:#}"), "nemesis: starting the database server again failed");
    }
}

/// Refuses, before any run starts, server faults the runs could not apply: `db-crash` and
/// `db-restart` when a run's database is not on a managed server, `replica-lag` when no run
/// can have a replica (redis-lua or redis-buckets on a managed PostgreSQL). `runs` are the
/// runs' (strategy reconciles, database URL).
pub fn refuse_unmanaged(faults: &[super::FaultSpec], runs: &[(bool, &str)]) -> anyhow::Result<()> {
    if let Some(f) = faults.iter().find(|f| f.kind.needs_managed_db()) {
        if let Some((_, url)) = runs.iter().find(|(_, url)| server_of(url).is_none()) {
            anyhow::bail!(
                "--fault {}: {} crashes or restarts only a database server the harness started \
                 itself, and {} is not one: add --services managed (the configured servers are \
                 never touched)",
                f.label(),
                f.kind,
                crate::services::redact_url(url)
            );
        }
    }
    if let Some(f) = faults.iter().find(|f| f.kind.needs_replica()) {
        let can = runs.iter().any(|(reconciles, url)| {
            *reconciles && server_of(url).is_some_and(|s| s.kind() == managed::ServerKind::Postgres)
        });
        if !can {
            anyhow::bail!(
                "--fault {}: replica-lag needs a run with a replica: redis-lua or redis-buckets \
                 on a managed PostgreSQL (--services managed, a PostgreSQL --database-url or \
                 --backends postgres); MariaDB gets no managed replica",
                f.label()
            );
        }
    }
    Ok(())
}
