//! The harness's live metrics (`--metrics-listen ADDR` on `run`, `compare`, `gate`, `attack`):
//! what a run is doing while it runs, in the Prometheus text format, for the dashboard in
//! `deploy/grafana/`.
//!
//! The clients' side comes from the recorder as every request is sent and answered (arrivals,
//! requests in flight, answers by kind and outcome, latency from the intended send, send lag);
//! the server side from the probes' once-a-second samples (sold and stock in the database,
//! stock in Redis, DB and Redis rates, stream lag). The same endpoint serves `/targets`, a
//! Prometheus HTTP service-discovery list naming the child shop of the run in progress, so
//! Prometheus can scrape the shop's own `/metrics` although its port changes with every run.
//!
//! One recorder per process ([`crate::telemetry::prometheus`]): the metrics below are emitted
//! through the `metrics` facade and cost nothing when no recorder is installed.

use crate::metric::SeriesName;
use crate::telemetry::{self, described as m, Described, MetricKind::*};
use anyhow::Context;
use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Once};

/// Buyers whose first request came due.
pub const ARRIVALS: &str = "oversell_harness_arrivals_total";
/// Buyers whose visit ended.
pub const BUYERS_DONE: &str = "oversell_harness_buyers_done_total";
/// Requests sent and not answered yet.
pub const IN_FLIGHT: &str = "oversell_harness_in_flight";
/// Answers by `kind` and `outcome`.
pub const ANSWERS: &str = "oversell_harness_answers_total";
/// Latency from the intended send to the full answer, by `kind`.
pub const LATENCY: &str = "oversell_harness_latency_seconds";
/// Intended send to actual send (the generator's lateness), by `kind`.
pub const SEND_LAG: &str = "oversell_harness_send_lag_seconds";
/// Time a request waited for a free sender (every sender held by an unanswered one), by `kind`.
pub const SENDER_WAIT: &str = "oversell_harness_sender_wait_seconds";
/// The run in progress (1-based; 0 before the first).
pub const RUN_INDEX: &str = "oversell_harness_run_index";
/// Runs in this command.
pub const RUNS: &str = "oversell_harness_runs";
/// 1 for the run in progress, 0 for runs done, labelled `run`.
pub const RUN_INFO: &str = "oversell_harness_run_info";
/// The item's initial stock in the run in progress.
pub const INITIAL_STOCK: &str = "oversell_harness_initial_stock";
/// Buyers of the run in progress (both waves).
pub const BUYERS: &str = "oversell_harness_buyers";
/// `[watch]` reads that failed, by `gauge` (the sampler retries them with backoff).
pub const WATCH_FAILED_READS: &str = "oversell_watch_failed_reads_total";

/// The probe's series published as gauges: (series name, metric name), from the series
/// table ([`SeriesName::prometheus`]).
pub fn probe_gauges() -> impl Iterator<Item = (&'static str, &'static str)> {
    SeriesName::ALL
        .into_iter()
        .filter_map(|s| Some((s.name(), s.prometheus()?)))
}

/// The gauge the probe's series `s` is published as ([`SeriesName::prometheus`]); a series that
/// is not published stops the build.
const fn probe(s: SeriesName) -> &'static str {
    match s.prometheus() {
        Some(name) => name,
        None => panic!("this probe series is not published as a gauge"),
    }
}

/// Every metric the harness exports.
pub const METRICS: &[Described] = &[
    m(ARRIVALS, Counter, "Simulated buyers whose first request came due (the arrival schedule)."),
    m(BUYERS_DONE, Counter, "Simulated buyers whose visit ended."),
    m(IN_FLIGHT, Gauge, "Requests the generator sent that have not been answered yet."),
    m(ANSWERS, Counter, "Answers the clients got, by request kind (view, order, pay, cancel) and outcome (created, sold_out, busy, timeout, ...)."),
    m(LATENCY, Histogram, "Full response time measured from each request's intended send time (coordinated-omission safe), by kind, in seconds."),
    m(SEND_LAG, Histogram, "Intended send time to actual send time, less any sender wait: the generator's own lateness, by kind, in seconds."),
    m(SENDER_WAIT, Histogram, "Time a request waited for a free sender because every sender was held by an unanswered request: the shop's time, part of latency, by kind, in seconds."),
    m(RUN_INDEX, Gauge, "The run in progress, 1-based (a compare runs one strategy and backend after another)."),
    m(RUNS, Gauge, "Runs this command makes."),
    m(RUN_INFO, Gauge, "1 for the run in progress, 0 for runs done, labelled with the run (strategy/backend or target)."),
    m(INITIAL_STOCK, Gauge, "The sale's initial stock in the run in progress."),
    m(BUYERS, Gauge, "Simulated buyers of the run in progress (both waves)."),
    m(WATCH_FAILED_READS, Counter, "[watch]: reads of a watched gauge's source that failed (each retried with backoff), by gauge."),
    m(probe(SeriesName::DbStock), Gauge, "Stock in the database (items.stock), sampled every second."),
    m(probe(SeriesName::DbSold), Gauge, "Units sold in the database (orders pending payment or paid), sampled every second."),
    m(probe(SeriesName::RedisStock), Gauge, "redis-lua: stock in Redis, sampled every second."),
    m(probe(SeriesName::DbQps), Gauge, "The database server's rate from its own counters, labelled with the counter (PostgreSQL statements/s or transactions/s, MySQL Questions/s as statements/s)."),
    m(probe(SeriesName::DbTps), Gauge, "The database server's transactions per second from its own counters."),
    m(probe(SeriesName::RedisOps), Gauge, "Redis commands per second (INFO stats total_commands_processed, server-wide)."),
    m(probe(SeriesName::StreamLag), Gauge, "redis-lua: stream entries not yet delivered to the persistence consumers (the shop's gauge, sampled every second)."),
    m(probe(SeriesName::StreamPending), Gauge, "redis-lua: stream entries delivered but not yet applied (the shop's gauge, sampled every second)."),
    m(probe(SeriesName::ReconcileResidual), Gauge, "redis-lua: the residual of the shop's last reconciliation pass, sampled every second."),
    m(probe(SeriesName::DbRowLockWaits), Gauge, "MySQL: InnoDB row lock waits per second."),
    m(probe(SeriesName::DbDeadlocks), Gauge, "MySQL: InnoDB deadlocks per second."),
];

/// The gauge a probe series is published as, if it is one of [`probe_gauges`].
pub fn probe_gauge(series: &str) -> Option<&'static str> {
    SeriesName::named(series)?.prometheus()
}

/// Every probe gauge set so far, with its `unit` label, so a new run can blank them.
static PROBE_SET: Mutex<BTreeSet<(&'static str, String)>> = Mutex::new(BTreeSet::new());

/// Publishes a probe sample of `series` (in `unit`) as its gauge, if it has one.
pub fn probe_sample(series: &str, unit: &str, value: f64) {
    let Some(gauge) = probe_gauge(series) else {
        return;
    };
    metrics::gauge!(gauge, "unit" => unit.to_string()).set(value);
    PROBE_SET
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((gauge, unit.to_string()));
}

/// Blanks every probe gauge (NaN: no value), so a new run never shows the last run's stock or
/// a series its probe does not sample (Redis stock in a database-only run).
fn blank_probe_gauges() {
    for (gauge, unit) in PROBE_SET.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        metrics::gauge!(*gauge, "unit" => unit.clone()).set(f64::NAN);
    }
}

/// The shop a run is firing at, for `/targets`.
#[derive(Debug, Clone)]
struct ShopTarget {
    /// `127.0.0.1:port`.
    address: String,
    run: String,
}

#[derive(Debug, Default)]
struct Shared {
    shop: Mutex<Option<ShopTarget>>,
    run: Mutex<Option<String>>,
}

/// The live endpoint of this process, while a command runs.
#[derive(Debug, Clone)]
pub struct Live {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

/// Binds `addr` (port 0 picks one) and serves `/metrics` and `/targets` in the background.
pub async fn serve(addr: SocketAddr) -> anyhow::Result<Live> {
    telemetry::prometheus();
    static DESCRIBED: Once = Once::new();
    DESCRIBED.call_once(|| telemetry::describe(METRICS));
    // Shown from the first scrape, before anything happened.
    metrics::counter!(ARRIVALS).absolute(0);
    metrics::counter!(BUYERS_DONE).absolute(0);
    metrics::gauge!(IN_FLIGHT).set(0.0);
    metrics::gauge!(RUN_INDEX).set(0.0);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding --metrics-listen {addr}"))?;
    let addr = listener.local_addr()?;
    let shared = Arc::new(Shared::default());
    let app = Router::new()
        .route(
            "/metrics",
            get(|| async { telemetry::exposition(telemetry::prometheus()) }),
        )
        .route("/targets", get(targets))
        .with_state(shared.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::warn!(error = %e, "the live metrics endpoint stopped");
        }
    });
    Ok(Live { addr, shared })
}

/// `/targets`: Prometheus HTTP service discovery for the child shop of the run in progress.
async fn targets(State(shared): State<Arc<Shared>>) -> Json<serde_json::Value> {
    let shop = shared
        .shop
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    Json(match shop {
        Some(s) => serde_json::json!([{
            "targets": [s.address],
            "labels": { "run": s.run },
        }]),
        None => serde_json::json!([]),
    })
}

impl Live {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://addr/metrics`.
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// Announces run `index` (1-based) of `runs`, labelled `run`; the probe gauges start blank.
    pub fn run_started(&self, index: usize, runs: usize, run: &str, stock: i64, buyers: usize) {
        blank_probe_gauges();
        let mut current = self.shared.run.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(previous) = current.replace(run.to_string()) {
            metrics::gauge!(RUN_INFO, "run" => previous).set(0.0);
        }
        metrics::gauge!(RUN_INFO, "run" => run.to_string()).set(1.0);
        metrics::gauge!(RUN_INDEX).set(index as f64);
        metrics::gauge!(RUNS).set(runs as f64);
        metrics::gauge!(INITIAL_STOCK).set(stock as f64);
        metrics::gauge!(BUYERS).set(buyers as f64);
    }

    /// The child shop of the run in progress listens at `base_url` (`None`: no shop now).
    pub fn shop(&self, base_url: Option<&str>) {
        let run = self
            .shared
            .run
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_default();
        *self.shared.shop.lock().unwrap_or_else(|e| e.into_inner()) =
            base_url.map(|u| ShopTarget {
                address: u
                    .trim_start_matches("http://")
                    .trim_end_matches('/')
                    .to_string(),
                run,
            });
    }
}
