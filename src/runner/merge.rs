//! `oversell merge DIR...`: the shard folders of one sale combined into one report, as if one
//! process had sent everything. The shards are checked and added up ([`crate::shard::combine`]),
//! then the oracle runs once against the shop they fired at: the drain wait, the final
//! reconciliation (redis-lua) and the database and Redis reads are a run's own
//! ([`super::settle`]).
//!
//! Shards of `attack` fired at the user's own shop, whose oracle merge does not have: their
//! merge adds the clients' records and histograms the same way, and judges by the clients'
//! evidence alone (as an `attack` without an oracle does), saying so in the report.

use super::{
    control_client, empty_report, finish_with, metadata, now_rfc3339, reading_of, settle,
    shop_process, Cell, Clients, RunPlan, Subject,
};
use crate::oracle::Reading;
use crate::report::{self, Shop};
use crate::shard::combine::{combine, read_part, Combined};
use crate::store::Backend;
use crate::traffic::mapping::Mapping;
use anyhow::Context;
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

/// Reads, checks and combines the shards, runs the oracle once and writes the report; returns
/// it and its folder.
pub async fn merge(plan: &MergePlan) -> anyhow::Result<(report::Report, PathBuf)> {
    let started_at = now_rfc3339();
    let mut parts = Vec::with_capacity(plan.dirs.len());
    for d in &plan.dirs {
        let (file, records) = read_part(d)?;
        parts.push((d.clone(), file, records));
    }
    let n = parts.len();
    let combined = combine(parts)?;
    let (subject, url) = super::recorded(&combined.lead, plan)?.with_context(|| {
        format!(
            "{}: shard.json names neither a shop (run/gate --shard) nor a target (attack --shard)",
            plan.dirs[0].display()
        )
    })?;
    let merged = Merged {
        plan,
        n,
        started_at,
        url,
        combined,
    };
    subject.merge(merged).await
}

/// The shards read and combined, for the shop they fired at to finish
/// ([`super::ShopUnderTest::merge`]).
pub struct Merged<'a> {
    pub(super) plan: &'a MergePlan,
    /// How many shards.
    pub(super) n: usize,
    /// When `merge` started (the report's metadata).
    pub(super) started_at: String,
    /// The shop's URL as the shards recorded it.
    pub(super) url: String,
    pub(super) combined: Combined,
}

impl Merged<'_> {
    /// The plan of the merged run, at `subject`: the lead shard's scenario (with `merge --gate`'s
    /// send-lag bound), draining as `merge` was told to.
    fn run_plan(&self, subject: Subject) -> anyhow::Result<RunPlan> {
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
async fn write(
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
fn clients(combined: Combined, reading: Reading) -> Clients {
    Clients {
        audited_ms: None,
        opened_ms: None,
        goose: combined.goose,
        generator: combined.generator,
        measurements: combined.measurements,
        reading,
    }
}

/// The shards of `run --shard`/`gate --shard` combined, and the oracle run once against the
/// reference shop they fired at (`subject`: `cell`'s strategy on its backend, serving at the
/// URL they recorded unless `--shop-url` says otherwise).
pub(super) async fn reference(
    merged: Merged<'_>,
    cell: &Cell,
    subject: Subject,
) -> anyhow::Result<(report::Report, PathBuf)> {
    let (strategy, backend) = (cell.strategy, cell.backend);
    let base_url = merged
        .plan
        .shop_url
        .as_deref()
        .unwrap_or(&merged.url)
        .trim_end_matches('/')
        .to_string();
    let run_plan = merged.run_plan(subject)?;
    let Merged {
        plan,
        n,
        started_at,
        combined,
        ..
    } = merged;
    run_plan.say(&format!(
        "== merge: {n} shards of {} ({} buyers, opened {}), {strategy} on {} at {base_url}",
        run_plan.scenario.name,
        combined.buyers,
        combined.lead.open_at,
        backend.as_str()
    ));
    let shards = format!(
        "{n} shard folders (oversell.shard/v1) combined by `oversell merge`: HdrHistograms \
         added, per-second counts added, the clients' records concatenated; the shards \
         opened together at {}",
        combined.lead.open_at
    );
    let item = run_plan.scenario.item.number();
    let http = control_client()?;
    let drain = shop_process::wait_drained(&http, &base_url, item, plan.drain_limit).await;
    let reconcile = match strategy.reconciles() {
        true => shop_process::reconcile(&http, &base_url, plan.admin_token.as_deref(), item).await,
        false => None,
    };
    let reading = reading_of(&Mapping::default());
    let server = settle::reference(
        &http,
        &base_url,
        item,
        cell,
        (&plan.redis_url, &plan.redis_prefix),
        reconcile,
        &[],
        super::ask(&run_plan, &combined.measurements, &reading),
    )
    .await?;
    let shop = Shop::Reference { strategy, backend };
    let clients = clients(combined, reading);
    let run = finish_with(&run_plan, shop, clients, Vec::new(), drain, server);
    write(plan, started_at, &run_plan, run, shards).await
}

/// The shards of `attack --shard` combined: the clients' records and histograms added as for
/// the reference shop, the verdict from the clients' evidence alone (merge has no oracle of
/// the user's shop: `attack` reads it, and its shards do not).
pub(super) async fn attack(
    merged: Merged<'_>,
    foreign: &crate::rehearsal::Foreign,
    subject: Subject,
) -> anyhow::Result<(report::Report, PathBuf)> {
    let url = merged.url.clone();
    let host = &foreign.host;
    let mapping = foreign.mapping.clone();
    let oracle = foreign.oracle.view();
    let run_plan = merged.run_plan(subject)?;
    let Merged {
        plan,
        n,
        started_at,
        combined,
        ..
    } = merged;
    let opened = combined.lead.open_at.clone();
    run_plan.say(&format!(
        "== merge: {n} attack shards of {} ({} buyers, opened {opened}) at {}; no oracle: \
         the clients' evidence alone",
        run_plan.scenario.name,
        combined.buyers,
        crate::secret::url(&url)
    ));
    let server = super::ServerSide::foreign(crate::oracle::Truth::Unverified, oracle, Vec::new());
    let shop = Shop::Foreign {
        host: host.to_string(),
        url,
        oracle: report::OracleKind::None,
    };
    // Nothing to drain: the user's shop is not ours to watch.
    let drain = report::Drain {
        drained: true,
        waited_ms: 0,
        limit_ms: 0,
        settle: None,
    };
    let clients = clients(combined, reading_of(&mapping));
    let run = finish_with(&run_plan, shop, clients, Vec::new(), drain, server);
    let shards = format!(
        "{n} attack shard folders (oversell.shard/v1) combined by `oversell merge`: \
         HdrHistograms added, per-second counts added, the clients' records concatenated; \
         the shards opened together at {opened}. The user's oracle is not read by merge: the \
         verdict rests on the clients' evidence"
    );
    write(plan, started_at, &run_plan, run, shards).await
}
