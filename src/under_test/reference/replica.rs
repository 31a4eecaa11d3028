//! A run's managed read replica: when the scenario asks for one (`[nemesis] replica`, or a
//! `replica-lag` fault), the strategy reconciles (redis-lua, redis-buckets) and the run's
//! database is on a managed PostgreSQL, a streaming replica of that server is started for the
//! run (its schema made on the primary first, so the replica holds it) and the shop reads its
//! reconciliation snapshots from it (`--replica-database-url`). It is stopped and removed when
//! the run ends.

use crate::runner::{Cell, RunPlan};
use crate::services::managed::{self, replica::Replica, ServerKind};
use crate::services::provide::rebase;
use crate::store::{PoolSettings, Store};
use anyhow::Context;

/// The run's replica and the URL of the run's database on it (the shop's
/// `replica_database_url`).
pub(super) struct RunReplica {
    /// The server (dropping it stops it and removes its data).
    pub replica: Replica,
    /// The run's database on the replica.
    pub url: String,
}

/// Why a run that wants a replica gets none (`None`: it can have one).
fn why_not(cell: &Cell) -> Option<String> {
    if !cell.strategy.uses_redis() {
        return Some(format!("{} does not reconcile", cell.strategy));
    }
    match managed::server_at(&cell.database_url) {
        Some(s) if s.kind() == ServerKind::Postgres => None,
        Some(_) => Some("a managed replica is PostgreSQL only".into()),
        None => Some("the run's database is not on a managed server (--services managed)".into()),
    }
}

/// Starts the run's replica, if the scenario wants one and the run can have one.
pub(super) async fn for_run(
    plan: &RunPlan,
    cell: &Cell,
    name: &str,
) -> anyhow::Result<Option<RunReplica>> {
    let s = &plan.scenario;
    if !s.nemesis.wants_replica(&s.faults) {
        return Ok(None);
    }
    if let Some(why) = why_not(cell) {
        plan.say(&format!("   no replica: {why}"));
        return Ok(None);
    }
    let primary = managed::server_at(&cell.database_url).context("the managed primary")?;
    // The schema first, on the primary: the replica is read-only and holds what the backup
    // copied, then everything streamed after it.
    Store::connect(&cell.database_url, &PoolSettings::harness(1))
        .await?
        .close()
        .await;
    let replica = primary
        .start_replica(&format!("replica-{name}"))
        .await
        .context("starting the run's managed replica")?;
    let url = rebase(&cell.database_url, &replica.url());
    plan.say(&format!(
        "   replica {} (streaming from port {}, reconciliation reads it)",
        crate::services::redact_url(&url),
        primary.port()
    ));
    Ok(Some(RunReplica { replica, url }))
}
