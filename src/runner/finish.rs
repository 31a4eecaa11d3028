//! The one way a run ends, for the reference shop and a foreign one alike: the oracle audits
//! the server side against the clients' records ([`finish`]), and the run's report section is
//! built, with the oracle's own time (`oracle_s`).

use super::{RunPlan, Traffic};
use crate::model::ReconcilePass as Pass;
use crate::oracle::{self, DeadLetterSeen, Evidence, OracleView, Reading, StockSample, Truth};
use crate::probe::Series;
use crate::report::{summary, Drain, RunReport, Shop};
use crate::traffic::attack::{GeneratorStats, GooseCrossCheck};

/// The server side of a run once it settled, for the oracle.
pub(crate) struct ServerSide {
    pub(crate) truth: Truth,
    /// Which oracle gave `truth`, and what it can see.
    pub(crate) oracle: OracleView,
    /// redis-lua: Redis stock and the orders Redis restocked.
    pub(crate) redis_stock: Option<i64>,
    pub(crate) redis_restocked_orders: Option<i64>,
    /// redis-lua: the dead-letter stream.
    pub(crate) dead_letters: Option<Vec<DeadLetterSeen>>,
    /// Lowest and highest database stock the probe saw.
    pub(crate) stock_seen: Option<(i64, i64)>,
    /// redis-lua: the final reconciliation pass.
    pub(crate) reconcile: Option<Pass>,
    /// A foreign shop's stock, sampled through its oracle during the sale.
    pub(crate) stock_samples: Vec<StockSample>,
    /// The reference shop's restock ledger: what it shows a correct shop never does.
    pub(crate) restocks: Option<crate::store::RestockAnomalies>,
    /// Seconds the read took (the oracle's share before the audit).
    pub(crate) read_s: f64,
}

/// The one way a run ends, for the reference shop and a foreign one alike: the oracle audits
/// the server side against the clients' records, and the run's report section is built.
pub(crate) fn finish(
    plan: &RunPlan,
    shop: Shop,
    traffic: Traffic,
    series: Vec<Series>,
    drain: Drain,
    server: ServerSide,
) -> RunReport {
    let measurements = traffic.recorder.finish();
    finish_measured(plan, shop, traffic, measurements, series, drain, server)
}

/// [`finish`] with the clients' records already taken from the recorder (the reference
/// shop's rows are checked against them as they are read).
pub(crate) fn finish_measured(
    plan: &RunPlan,
    shop: Shop,
    traffic: Traffic,
    measurements: crate::traffic::recorder::Measurements,
    series: Vec<Series>,
    drain: Drain,
    server: ServerSide,
) -> RunReport {
    let since_open = traffic.recorder.opened().elapsed().as_millis();
    let audited_ms = Some(since_open as u64);
    let clients = Clients {
        audited_ms,
        opened_ms: Some(crate::model::now_ms() - since_open as i64),
        goose: traffic.goose,
        generator: traffic.generator,
        measurements,
        reading: traffic.reading,
    };
    finish_with(plan, shop, clients, series, drain, server)
}

/// What the oracle checks the order rows against, for `plan` and its clients' records (the
/// dead letters and restocks are the server side's: [`settle::reference`] reads them).
pub(crate) fn ask<'a>(
    plan: &'a RunPlan,
    clients: &'a crate::traffic::recorder::Measurements,
    reading: &'a Reading,
) -> oracle::Ask<'a> {
    oracle::Ask {
        clients,
        reading,
        initial_stock: plan.scenario.item.stock,
        purchase_limit: plan.scenario.item.purchase_limit,
        users: Some(&plan.buyers),
        dead_letters: None,
        redis_restocked_orders: None,
    }
}

/// The clients' side of a run once it is over (one recorder's, or N shards' combined).
pub(crate) struct Clients {
    pub(crate) goose: Vec<GooseCrossCheck>,
    pub(crate) generator: GeneratorStats,
    pub(crate) measurements: crate::traffic::recorder::Measurements,
    pub(crate) reading: Reading,
    /// When the final state had been read (ms after the sale opened; `None`: unknown).
    pub(crate) audited_ms: Option<u64>,
    /// When the sale opened (ms since the Unix epoch, this machine's clock; `None`: unknown).
    pub(crate) opened_ms: Option<i64>,
}

/// [`finish`] from the clients' finished records.
pub(crate) fn finish_with(
    plan: &RunPlan,
    shop: Shop,
    clients: Clients,
    series: Vec<Series>,
    drain: Drain,
    server: ServerSide,
) -> RunReport {
    let s = &plan.scenario;
    let measurements = clients.measurements;
    let audit_started = std::time::Instant::now();
    let read_s = server.read_s;
    let findings = oracle::audit(&Evidence {
        initial_stock: s.item.stock,
        purchase_limit: s.item.purchase_limit,
        truth: server.truth,
        oracle: server.oracle,
        reading: clients.reading,
        redis_stock: server.redis_stock,
        reconcile_residual: server.reconcile.as_ref().map(|p| p.residual),
        stock_seen: server.stock_seen,
        redis_restocked_orders: server.redis_restocked_orders,
        dead_letters: server.dead_letters,
        payment_window_ms: plan
            .subject
            .payment_window(s)
            .map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
        audited_ms: clients.audited_ms,
        opened_ms: clients.opened_ms,
        stock_samples: server.stock_samples,
        restocks: server.restocks,
        clients: &measurements,
        users: Some(&plan.buyers),
    });
    let audit_s = audit_started.elapsed().as_secs_f64();
    plan.say(&format!("   {}", findings.verdict));
    for line in crate::oracle::proof::terminal(&findings.proofs) {
        plan.say(&format!("   {}", line.replace('\n', "\n     ")));
    }
    let run = summary::build(summary::RunInputs {
        shop,
        scenario: s.name.clone(),
        buyers: plan.buyers.len() as u32,
        findings,
        measurements,
        series,
        generator: clients.generator,
        drain,
        reconcile: server.reconcile,
        goose: clients.goose,
        max_send_lag_ms: s.thresholds.max_send_lag_ms(),
        late_after: s.late_send_after(),
    });
    RunReport {
        oracle_s: Some(read_s + audit_s),
        oracle_read_s: Some(read_s),
        oracle_audit_s: Some(audit_s),
        ..run
    }
}
