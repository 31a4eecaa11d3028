//! `oversell merge DIR...`: the shard folders of one sale combined into one report, as if one
//! process had sent everything. The shards are checked and added up ([`crate::shard::combine`]),
//! then the oracle runs once against the shop they fired at, which finishes the merge
//! ([`super::ShopUnderTest::merge`]: each kind of shop its own half). What the halves share is
//! here: the plan, the combined shards, the report written.

use super::{empty_report, metadata, Clients, RunPlan, Subject};
use crate::oracle::Reading;
use crate::report;
use crate::shard::combine::Combined;
use crate::store::Backend;
use std::path::PathBuf;
use std::time::Duration;

/// What `merge` needs besides the shard folders: where the shop's database and Redis are.
#[derive(Debug, Clone)]
pub struct MergePlan {
    pub dirs: Vec<PathBuf>,
    /// The shop to drain and reconcile (default: the URL the shards recorded).
    pub shop_url: Option<String>,
    pub admin_token: Option<String>,
    /// The shop's database URL for each backend; the shards name the backend.
    pub databases: Vec<(Backend, String)>,
    pub redis_url: String,
    pub redis_prefix: String,
    pub out: PathBuf,
    pub drain_limit: Duration,
    pub progress: bool,
    /// `--threshold send_lag_p99_ms=…` of `merge --gate`: the generator-bound flag's bound.
    pub send_lag_bound: Option<f64>,
}

/// The shards read and combined, for the shop they fired at to finish
/// ([`super::ShopUnderTest::merge`]).
pub struct Merged<'a> {
    pub(crate) plan: &'a MergePlan,
    /// How many shards.
    pub(crate) n: usize,
    /// When `merge` started (the report's metadata).
    pub(crate) started_at: String,
    /// The shop's URL as the shards recorded it.
    pub(crate) url: String,
    pub(crate) combined: Combined,
}

impl Merged<'_> {
    /// The plan of the merged run, at `subject`: the lead shard's scenario (with `merge --gate`'s
    /// send-lag bound), draining as `merge` was told to.
    pub(crate) fn run_plan(&self, subject: Subject) -> anyhow::Result<RunPlan> {
        let lead = &self.combined.lead;
        let mut s = lead.scenario.clone();
        if let Some(ms) = self.plan.send_lag_bound {
            s.thresholds.set("send_lag_p99_ms", ms)?;
        }
        let file = PathBuf::from(&lead.scenario_file);
        Ok(RunPlan::new(s, file, subject, self.plan.out.clone())
            .with_drain_limit(self.plan.drain_limit)
            .with_progress(self.plan.progress))
    }
}

/// The merged run's report, with where its figures came from (`shards`), written.
pub(crate) async fn write(
    plan: &MergePlan,
    started_at: String,
    run_plan: &RunPlan,
    run: report::RunReport,
    shards: String,
) -> anyhow::Result<(report::Report, PathBuf)> {
    let metadata = metadata::gather(run_plan, started_at).await;
    let mut report = empty_report(run_plan, metadata);
    report.sources.insert("shards".into(), shards);
    report.runs.push(run);
    let dir = report::new_dir(&plan.out, &run_plan.scenario.name);
    report::write(&dir, &report)?;
    Ok((report, dir))
}

/// The combined clients' side, read by `reading`.
pub(crate) fn clients(combined: Combined, reading: Reading) -> Clients {
    Clients {
        audited_ms: None,
        opened_ms: None,
        goose: combined.goose,
        generator: combined.generator,
        measurements: combined.measurements,
        reading,
    }
}
