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
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Readings this far apart that agree mean the shop has settled.
const SETTLE_STEP: Duration = Duration::from_millis(500);
/// Consecutive agreeing readings needed.
const SETTLE_READS: usize = 3;

pub(super) async fn run(plan: &RunPlan, f: &Foreign, slot: &Slot) -> anyhow::Result<RunReport> {
    let s = &plan.scenario;
    let oracle = rehearsal::preflight(f).await?;
    let target = Arc::new(target_for(s, &f.base_url, f.mapping.clone()));
    let http = control_client()?;
    setup_sale(&http, &target).await?;
    // The baseline, after the set-up and before the first buyer.
    let before = oracle.read().await?;
    let rows_before = oracle.rows().await?;
    let fired = fire_traffic(
        plan,
        crate::traffic::target::Targets::one(target),
        ProbeConfig {
            database_url: f.oracle.database_url(),
            foreign_database: true,
            item_id: s.item.id,
            redis: None,
            redis_buckets: false,
            shop_metrics_urls: Vec::new(),
            opened: Instant::now(),
        },
        slot,
        None,
    )
    .await?;
    let settled = settle(&oracle, plan.drain_limit).await;
    let series = fired.probes.stop().await;
    let (drain, after) = settled?;
    let rows_after = oracle.rows().await?;
    let mut view = f.oracle.view();
    let (before_reading, after_reading) = (before, after);
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
    let truth = match (oracle.orders_query(), rows_before, rows_after) {
        (Some(q), Some(before), Some(after)) => {
            let stock = after_reading.and_then(|a| a.stock);
            let rows = q.this_run(&before, after, stock);
            let by_query = match (before_reading, after_reading) {
                (Some(b), Some(a)) => a.sold.map(|s| s - b.sold.unwrap_or(0)),
                _ => None,
            };
            let notes = rows_notes(&rows, by_query);
            if !notes.is_empty() {
                let all = view.warning.take().into_iter().chain(notes);
                view.warning = Some(all.collect::<Vec<_>>().join("; "));
            }
            Truth::Rows(rows)
        }
        _ => match totals {
            Some(t) => Truth::Totals {
                sold: t.sold,
                stock: t.stock,
            },
            None => Truth::Unverified,
        },
    };
    let server = ServerSide {
        truth,
        oracle: view,
        redis_stock: None,
        redis_restocked_orders: None,
        dead_letters: None,
        stock_seen: None,
        reconcile: None,
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
    Ok(finish(plan, shop, fired.traffic, series, drain, server))
}

/// What the order rows say beside the totals: rows present before the sale, and a sold query
/// that disagrees with the rows.
fn rows_notes(rows: &crate::oracle::ForeignRows, sold_query: Option<i64>) -> Vec<String> {
    let mut notes = Vec::new();
    if rows.present_before > 0 {
        notes.push(format!(
            "{} order rows were present before the sale: they are not this run's",
            rows.present_before
        ));
    }
    let held: i64 = rows
        .orders
        .iter()
        .filter(|o| o.status.holds_stock())
        .map(|o| o.qty)
        .sum();
    if let Some(sold) = sold_query.filter(|s| *s != held) {
        notes.push(format!(
            "--sold-query counts {sold} sold, this run's order rows hold {held}: the verdict uses the rows"
        ));
    }
    notes
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
