//! A run against a foreign shop: no child process, no `/metrics` of ours, no audit endpoint.
//!
//! Nothing touches the shop until everything answers ([`crate::rehearsal::preflight`]: the
//! loopback guard again, the target, the oracle). Then the sale is set up, the oracle is read
//! once more (the baseline: this run's sold is counted from it), and the buyers are fired.
//! After the last buyer, the run waits until the oracle's figures stop moving (the shop may
//! write orders asynchronously), up to the drain limit, and audits the difference. Without an
//! oracle the verdict rests on the clients' evidence alone.

use super::{
    control_client, finish, fire_traffic, setup_sale, target_for, RunPlan, ServerSide, Slot,
};
use crate::oracle::Truth;
use crate::probe::ProbeConfig;
use crate::rehearsal::{self, Foreign, Oracle, OracleSource, Tally};
use crate::report::{Drain, OracleKind, RunReport, Shop};
use crate::services::redact_url;
use std::time::Duration;
use tokio::time::Instant;

/// Readings this far apart that agree mean the shop has settled.
const SETTLE_STEP: Duration = Duration::from_millis(500);
/// Consecutive agreeing readings needed.
const SETTLE_READS: usize = 3;

pub(super) async fn run(plan: &RunPlan, f: &Foreign, slot: &Slot) -> anyhow::Result<RunReport> {
    let s = &plan.scenario;
    let oracle = rehearsal::preflight(f).await?;
    let target = target_for(s, &f.base_url, f.mapping.clone());
    let http = control_client()?;
    setup_sale(&http, &target).await?;
    let (target, logins) = super::login::before_sale(plan, target, f.columns.clone()).await?;
    // The baseline, after the set-up and before the first buyer.
    let before = oracle.read().await?;
    let gives_stock = before.is_some_and(|t| t.stock.is_some());
    let sampler = rehearsal::stock_sampler::start(&f.oracle, gives_stock).await;
    let fired = fire_traffic(
        plan,
        crate::traffic::target::Targets::one(target.clone()),
        ProbeConfig {
            database_url: f.oracle.database_url(),
            foreign_database: true,
            item_id: s.item.number(),
            redis: None,
            redis_buckets: false,
            shop_metrics_urls: Vec::new(),
            opened: Instant::now(),
        },
        slot,
        None,
    )
    .await?;
    let logins = super::login::section(&target, logins, &fired.traffic.recorder);
    let settled = settle(&oracle, plan.drain_limit).await;
    let mut series = fired.probes.stop().await;
    let (stock_samples, failed_reads) = match sampler {
        Some(sampler) => {
            let sampled = sampler.stop(fired.traffic.recorder.opened()).await;
            series.push(sampled.series);
            (sampled.samples, sampled.failed)
        }
        None => (Vec::new(), 0),
    };
    let (drain, after) = settled?;
    let mut view = f.oracle.view();
    if failed_reads > 0 {
        let note = format!("{failed_reads} of the stock's 1 s readings failed (skipped)");
        view.warning = Some(match view.warning.take() {
            Some(w) => format!("{w}; {note}"),
            None => note,
        });
    }
    let totals = match (before, after) {
        (Some(b), Some(a)) => {
            let notes = rehearsal::baseline_notes(b, s.item.stock);
            if !notes.is_empty() {
                let all = view.warning.take().into_iter().chain(notes);
                view.warning = Some(all.collect::<Vec<_>>().join("; "));
            }
            rehearsal::run_totals(b, a)
        }
        _ => None,
    };
    let truth = match totals {
        Some(t) => Truth::Totals {
            sold: t.sold,
            stock: t.stock,
        },
        None => Truth::Unverified,
    };
    let server = ServerSide {
        truth,
        oracle: view,
        redis_stock: None,
        redis_restocked_orders: None,
        dead_letters: None,
        stock_seen: None,
        reconcile: None,
        stock_samples,
    };
    let shop = Shop::Foreign {
        host: f.label(),
        url: redact_url(&f.base_url),
        oracle: match f.oracle {
            OracleSource::None => OracleKind::None,
            OracleSource::Sql { .. } => OracleKind::Sql,
            OracleSource::Http { .. } => OracleKind::Http,
        },
    };
    let run = finish(plan, shop, fired.traffic, series, drain, server);
    Ok(RunReport {
        login: logins,
        ..run
    })
}

/// Reads the oracle until [`SETTLE_READS`] readings agree, up to `limit`; returns the last
/// reading. Without an oracle there is nothing to wait for.
async fn settle(oracle: &Oracle, limit: Duration) -> anyhow::Result<(Drain, Option<Tally>)> {
    let start = Instant::now();
    let mut last = oracle.read().await?;
    let mut agreeing = 1;
    while last.is_some() && agreeing < SETTLE_READS && start.elapsed() < limit {
        tokio::time::sleep(SETTLE_STEP).await;
        let now = oracle.read().await?;
        agreeing = if now == last { agreeing + 1 } else { 1 };
        last = now;
    }
    Ok((
        Drain {
            drained: last.is_none() || agreeing >= SETTLE_READS,
            waited_ms: start.elapsed().as_millis() as u64,
            limit_ms: limit.as_millis() as u64,
        },
        last,
    ))
}
