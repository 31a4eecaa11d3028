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
    control_client, empty_report, finish_with, metadata, now_rfc3339, settle, shop_process, Cell,
    Clients, RunPlan, Subject,
};
use crate::oracle::Reading;
use crate::report::{self, Shop};
use crate::shard::combine::combine;
use crate::shard::file::ShardFile;
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
    let mut files = Vec::new();
    for d in &plan.dirs {
        files.push((d.clone(), ShardFile::read(d)?));
    }
    let n = files.len();
    let combined = combine(files)?;
    let lead = &combined.lead;
    let Some(lead_shop) = lead.shop.clone() else {
        return merge_attack(plan, combined, n, started_at).await;
    };
    let backend = lead_shop.backend;
    let cell = Cell {
        strategy: lead_shop.strategy,
        backend,
        database_url: plan
            .databases
            .iter()
            .find(|(b, _)| *b == backend)
            .map(|(_, u)| u.clone())
            .with_context(|| format!("no database URL for {}", backend.as_str()))?,
    };
    let base_url = plan
        .shop_url
        .clone()
        .unwrap_or_else(|| lead_shop.url.clone())
        .trim_end_matches('/')
        .to_string();
    let mut s = lead.scenario.clone();
    if let Some(ms) = plan.send_lag_bound {
        s.thresholds.set("send_lag_p99_ms", ms)?;
    }
    let subject = Subject::reference(vec![cell.clone()], plan.redis_url.clone())?;
    let run_plan = RunPlan::new(
        s,
        PathBuf::from(&lead.scenario_file),
        subject,
        plan.out.clone(),
    )
    .with_drain_limit(plan.drain_limit)
    .with_progress(plan.progress);
    let item = run_plan.scenario.item.number();
    run_plan.say(&format!(
        "== merge: {n} shards of {} ({} buyers, opened {}), {} on {} at {base_url}",
        run_plan.scenario.name,
        combined.buyers,
        lead.open_at,
        cell.strategy,
        backend.as_str()
    ));
    let http = control_client()?;
    let drain = shop_process::wait_drained(&http, &base_url, item, plan.drain_limit).await;
    let reconcile = if cell.strategy.reconciles() {
        shop_process::reconcile(&http, &base_url, plan.admin_token.as_deref(), item).await
    } else {
        None
    };
    let mapping = Mapping::default();
    let reading = Reading {
        order_id_field: mapping.order_id_field.clone(),
        max_unclassified: mapping.unclassified_bound(),
        keys_sent: !mapping.idempotency_header.is_empty(),
    };
    let server = settle::reference(
        &http,
        &base_url,
        item,
        &cell,
        (&plan.redis_url, &plan.redis_prefix),
        reconcile,
        &[],
        super::ask(&run_plan, &combined.measurements, &reading),
    )
    .await?;
    let clients = Clients {
        audited_ms: None,
        goose: combined.goose,
        generator: combined.generator,
        measurements: combined.measurements,
        reading,
    };
    let shop = Shop::Reference {
        strategy: cell.strategy,
        backend,
    };
    let run = finish_with(&run_plan, shop, clients, Vec::new(), drain, server);
    let metadata = metadata::gather(&run_plan, started_at).await;
    let mut report = empty_report(&run_plan, metadata);
    report.sources.insert(
        "shards".into(),
        format!(
            "{n} shard folders (oversell.shard/v1) combined by `oversell merge`: HdrHistograms \
             added, per-second counts added, the clients' records concatenated; the shards \
             opened together at {}",
            lead.open_at
        ),
    );
    report.runs.push(run);
    let dir = report::new_dir(&plan.out, &run_plan.scenario.name);
    report::write(&dir, &report)?;
    Ok((report, dir))
}

/// The shards of `attack --shard` combined: the clients' records and histograms added as for
/// the reference shop, the verdict from the clients' evidence alone (merge has no oracle of
/// the user's shop: `attack` reads it, and its shards do not).
async fn merge_attack(
    plan: &MergePlan,
    combined: crate::shard::combine::Combined,
    n: usize,
    started_at: String,
) -> anyhow::Result<(report::Report, PathBuf)> {
    let lead = &combined.lead;
    let target = lead.target.clone().with_context(|| {
        format!(
            "{}: shard.json names neither a shop (run/gate --shard) nor a target (attack --shard)",
            plan.dirs[0].display()
        )
    })?;
    let mut s = lead.scenario.clone();
    if let Some(ms) = plan.send_lag_bound {
        s.thresholds.set("send_lag_p99_ms", ms)?;
    }
    let mapping = s.mapping();
    let foreign = crate::rehearsal::Foreign {
        base_url: target.url.clone(),
        host: target.host.clone(),
        allow_remote: false,
        mapping: mapping.clone(),
        oracle: crate::rehearsal::OracleSource::None,
        settle: Default::default(),
    };
    let oracle = foreign.oracle.view();
    let run_plan = RunPlan::new(
        s,
        PathBuf::from(&lead.scenario_file),
        Subject::foreign(foreign),
        plan.out.clone(),
    )
    .with_drain_limit(plan.drain_limit)
    .with_progress(plan.progress);
    run_plan.say(&format!(
        "== merge: {n} attack shards of {} ({} buyers, opened {}) at {}; no oracle: the \
         clients' evidence alone",
        run_plan.scenario.name, combined.buyers, lead.open_at, target.url
    ));
    let clients = Clients {
        audited_ms: None,
        goose: combined.goose,
        generator: combined.generator,
        measurements: combined.measurements,
        reading: Reading {
            order_id_field: mapping.order_id_field.clone(),
            max_unclassified: mapping.unclassified_bound(),
            keys_sent: !mapping.idempotency_header.is_empty(),
        },
    };
    let server = super::ServerSide {
        truth: crate::oracle::Truth::Unverified,
        oracle,
        redis_stock: None,
        redis_restocked_orders: None,
        dead_letters: None,
        stock_seen: None,
        reconcile: None,
        stock_samples: Vec::new(),
        read_s: 0.0,
    };
    let shop = Shop::Foreign {
        host: target.host.clone(),
        url: target.url.clone(),
        oracle: report::OracleKind::None,
    };
    // Nothing to drain: the user's shop is not ours to watch.
    let drain = report::Drain {
        drained: true,
        waited_ms: 0,
        limit_ms: 0,
        settle: None,
    };
    let run = finish_with(&run_plan, shop, clients, Vec::new(), drain, server);
    let metadata = metadata::gather(&run_plan, started_at).await;
    let mut report = empty_report(&run_plan, metadata);
    report.sources.insert(
        "shards".into(),
        format!(
            "{n} attack shard folders (oversell.shard/v1) combined by `oversell merge`: \
             HdrHistograms added, per-second counts added, the clients' records concatenated; \
             the shards opened together at {}. The user's oracle is not read by merge: the \
             verdict rests on the clients' evidence",
            lead.open_at
        ),
    );
    report.runs.push(run);
    let dir = report::new_dir(&plan.out, &run_plan.scenario.name);
    report::write(&dir, &report)?;
    Ok((report, dir))
}
