//! A run against a foreign shop: no child process, no `/metrics` of ours, no audit endpoint.
//!
//! The target is checked with one TCP connection and the oracle is connected before the sale
//! is set up, and read once before the first buyer, so an unreachable shop, a bad query or an
//! unreachable database stops the run before any load is sent. After the last buyer, the run waits until
//! the oracle's figures stop moving (the shop may write orders asynchronously), up to the drain
//! limit, and audits those totals. Without an oracle the verdict says oversell was not verified.

use super::{control_client, finish, fire_traffic, setup_sale, target_for, RunPlan, ServerSide};
use crate::oracle::Truth;
use crate::probe::ProbeConfig;
use crate::rehearsal::{Foreign, Oracle, OracleSource, Totals};
use crate::report::{Drain, OracleKind, RunReport, Shop};
use crate::services::{redact_url, Service};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Readings this far apart that agree mean the shop has settled.
const SETTLE_STEP: Duration = Duration::from_millis(500);
/// Consecutive agreeing readings needed.
const SETTLE_READS: usize = 3;

pub(super) async fn run(plan: &RunPlan, f: &Foreign) -> anyhow::Result<RunReport> {
    let s = &plan.scenario;
    preflight(&f.base_url).await?;
    let oracle = f.oracle.connect().await?;
    let target = Arc::new(target_for(s, &f.base_url, f.mapping.clone()));
    let http = control_client()?;
    setup_sale(&http, &target).await?;
    // A bad query or endpoint stops the run here, before the first buyer.
    oracle.read().await?;
    let fired = fire_traffic(
        plan,
        target,
        ProbeConfig {
            database_url: f.oracle.database_url(),
            item_id: s.item.id,
            redis: None,
            shop_metrics_url: None,
            opened: Instant::now(),
        },
        &f.label(),
    )
    .await?;
    let settled = settle(&oracle, plan.drain_limit).await;
    let series = fired.probes.stop().await;
    let (drain, totals) = settled?;
    let truth = match totals {
        Some(t) => Truth::Totals {
            sold: t.sold,
            stock: t.stock,
        },
        None => Truth::Unverified,
    };
    let server = ServerSide {
        truth,
        truth_source: f.oracle.describe(),
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

/// Opens (and closes) one TCP connection to the target: an unreachable shop stops the run
/// before any request, as a typed [`crate::services::Unreachable`].
async fn preflight(base_url: &str) -> anyhow::Result<()> {
    let unreachable = |e: &dyn std::fmt::Display| Service::Shop.unreachable_error(base_url, e);
    let url = reqwest::Url::parse(base_url).map_err(|e| unreachable(&e))?;
    let addrs = url.socket_addrs(|| None).map_err(|e| unreachable(&e))?;
    let connect = tokio::net::TcpStream::connect(&*addrs);
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(unreachable(&e).into()),
        Err(_) => Err(unreachable(&"no answer within 5 s").into()),
    }
}

/// Reads the oracle until [`SETTLE_READS`] readings agree, up to `limit`; returns the last
/// reading. Without an oracle there is nothing to wait for.
async fn settle(oracle: &Oracle, limit: Duration) -> anyhow::Result<(Drain, Option<Totals>)> {
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
