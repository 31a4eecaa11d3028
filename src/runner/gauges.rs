//! A run's `[watch]` gauges: what they read with (the run's database by default, the loopback
//! guard's `--allow-remote`), checked before anything is sent, and the plan's rush.

use super::RunPlan;

/// What the run's `[watch]` gauges read with: the run's database by default (`--oracle-sql`'s,
/// or the reference shop's), remote sources only with `--allow-remote`.
pub(crate) fn context(plan: &RunPlan, database: Option<String>) -> crate::watch::Context {
    crate::watch::Context {
        default_database: database,
        allow_remote: plan.subject.allow_remote(),
    }
}

/// Checks the scenario's `[watch]` against the plan before anything is sent: every source's
/// URL, environment variables, default database and loopback guard (an error names the file
/// and the field).
pub(crate) fn check(plan: &RunPlan) -> anyhow::Result<()> {
    let database = plan.subject.watch_database();
    crate::watch::readers(&plan.scenario.watch, &context(plan, database))
        .map(drop)
        .map_err(|e| anyhow::anyhow!("{}: {e}", plan.scenario_file.display()))
}

/// The second of the plan's rush (most arrivals), for the watched gauges' report.
pub(crate) fn rush_at_s(plan: &RunPlan) -> Option<f64> {
    crate::watch::rush_at_s(&plan.buyers.per_second())
}
