//! Reports: `report.json` (schema `oversell.report/v1`), `report.md`, `report.html`, charts
//! (SVG and PNG), each run's order latency as an HdrHistogram interval log and its timelines as
//! CSV, and the terminal table.
//!
//! Every figure names its source: latency from our HdrHistograms (full response time from the
//! intended send), outcomes from the clients' records, oversell and friends from the oracle,
//! DB QPS from the database server's counters, Redis ops from `INFO stats`.

pub mod charts;
pub mod csv;
pub mod hlog;
pub mod html;
pub mod markdown;
pub mod summary;
pub mod table;

use crate::oracle::Findings;
use crate::pipeline::reconcile::Pass;
use crate::probe::Series;
use crate::traffic::attack::{GeneratorStats, GooseCrossCheck};
use crate::traffic::recorder::{Answer, Kind, Measurements};
use crate::traffic::Scenario;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
pub use summary::{LatencySummary, MetricSummary};

/// The report schema id; bump on incompatible changes.
pub const SCHEMA: &str = "oversell.report/v1";

/// Where each kind of figure comes from (copied into every report).
pub fn sources() -> BTreeMap<String, String> {
    [
        ("latency", "oversell's HdrHistograms (µs, 3 significant digits): full response time measured from each request's intended send time (coordinated-omission safe)"),
        ("outcomes", "the simulated clients' own records of every answer"),
        ("oracle", "the final database rows (and Redis stock for redis-lua) after the queue drained, compared with the clients' records"),
        ("db_qps", "the database server's counters, sampled every second (see each run's db_qps.source)"),
        ("redis_ops", "Redis INFO stats total_commands_processed, sampled every second (server-wide)"),
        ("goose_crosscheck", "goose's own metrics: time to first byte from the actual send; kept only as a cross-check"),
        ("generator", "getrusage(RUSAGE_SELF) of the load generator process (the shop runs in a child process)"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// A whole report: one scenario, one or more runs (strategy × backend).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub generated_at: String,
    pub tool_version: String,
    pub scenario: ScenarioSummary,
    pub machine: Machine,
    pub sources: BTreeMap<String, String>,
    pub runs: Vec<RunReport>,
}

/// The scenario that produced a report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioSummary {
    pub name: String,
    pub file: String,
    pub description: String,
    pub buyers: u32,
    pub initial_stock: i64,
    pub purchase_limit: i64,
    pub spec: Scenario,
}

/// The machine the run happened on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub os: String,
}

impl Machine {
    /// This machine.
    pub fn this() -> Self {
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: std::env::consts::OS.to_string(),
        }
    }
}

/// Requests of one kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindReport {
    pub total: u64,
    pub outcomes: BTreeMap<Answer, u64>,
    pub latency: LatencySummary,
    /// Latency per answer (e.g. how long a sold-out answer took versus a created one).
    pub latency_by_outcome: BTreeMap<Answer, LatencySummary>,
}

/// How draining went.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Drain {
    pub drained: bool,
    pub waited_ms: u64,
    pub limit_ms: u64,
}

/// Per-second counts of order answers.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Timeline {
    /// Seconds after the sale opened (start of each bucket).
    pub seconds: Vec<u64>,
    /// Order answers per second, by answer.
    pub orders: BTreeMap<Answer, Vec<u64>>,
    /// Every request per second.
    pub requests: Vec<u64>,
}

/// One strategy (on one backend) under one scenario.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    pub strategy: String,
    pub backend: String,
    pub target: String,
    pub scenario: String,
    pub buyers: u32,
    pub initial_stock: i64,
    pub sold: Option<i64>,
    pub oversell: Option<i64>,
    /// The most units oversold at any moment (replayed from order timestamps).
    #[serde(default)]
    pub peak_oversell: Option<i64>,
    pub undersell: Option<i64>,
    pub negative_stock: Option<bool>,
    pub conservation_drift: Option<i64>,
    pub redis_drift: Option<i64>,
    pub lost_acks: Option<u64>,
    pub phantom_orders: Option<u64>,
    pub duplicate_buyers: Option<u64>,
    pub findings: Findings,
    pub requests: BTreeMap<Kind, KindReport>,
    pub order_attempts: u64,
    pub order_errors: u64,
    /// Order attempts answered with 5xx, timeouts or connection errors, over all attempts.
    pub error_rate: f64,
    /// All requests per second over the active period.
    pub throughput_rps: f64,
    pub order_throughput_rps: f64,
    /// From the sale opening to the first `sold_out` answer.
    pub time_to_sell_out_s: Option<f64>,
    /// Seconds from the sale opening to the last answer.
    pub duration_s: f64,
    pub db_qps: Option<MetricSummary>,
    pub db_tps: Option<MetricSummary>,
    pub redis_ops: Option<MetricSummary>,
    pub db_row_lock_waits: Option<f64>,
    pub db_deadlocks: Option<f64>,
    pub generator: GeneratorStats,
    pub drain: Drain,
    pub reconcile: Option<Pass>,
    pub goose_crosscheck: Vec<GooseCrossCheck>,
    pub timeline: Timeline,
    pub series: Vec<Series>,
    /// HdrHistogram V2 (deflate, base64) of every kind's latency, for re-plotting.
    pub histograms: BTreeMap<Kind, String>,
    #[serde(skip)]
    pub measurements: Option<std::sync::Arc<Measurements>>,
}

impl RunReport {
    /// The order latency summary (the headline).
    pub fn order_latency(&self) -> Option<&LatencySummary> {
        self.requests.get(&Kind::Order).map(|k| &k.latency)
    }

    /// The order latency histogram (µs): the in-process measurements when present, else decoded
    /// from `histograms` (a report read back from `report.json`).
    pub fn order_histogram(&self) -> Option<hdrhistogram::Histogram<u64>> {
        if let Some(m) = &self.measurements {
            let h = m.by_kind(Kind::Order);
            return (!h.is_empty()).then_some(h);
        }
        self.histograms
            .get(&Kind::Order)
            .and_then(|b| summary::decode_histogram(b).ok())
    }

    /// Oversold units for tables: the final figure, with the peak when cancels covered some.
    pub fn oversell_cell(&self) -> String {
        match (self.oversell, self.peak_oversell) {
            (None, _) => "n/a".into(),
            (Some(o), Some(p)) if p > o => format!("{o} (peak {p})"),
            (Some(o), _) => o.to_string(),
        }
    }

    /// A short label: `strategy` or `strategy/backend`.
    pub fn label(&self, with_backend: bool) -> String {
        if with_backend {
            format!("{}/{}", self.strategy, self.backend)
        } else {
            self.strategy.clone()
        }
    }
}

/// The folder for a new report: `<out>/<UTC timestamp>-<scenario>`.
/// Two runs in the same second get `-2`, `-3`, ... rather than sharing a folder.
pub fn new_dir(out: &Path, scenario: &str) -> PathBuf {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let first = out.join(format!("{stamp}-{scenario}"));
    (2..)
        .map(|n| out.join(format!("{stamp}-{scenario}-{n}")))
        .take(1000)
        .fold(
            first,
            |chosen, next| if chosen.exists() { next } else { chosen },
        )
}

/// Writes everything into `dir` (created if missing): `report.json`, `report.md`, the charts
/// (`*.svg`, `*.png`), per run `latency-<strategy>-<backend>.hlog` and
/// `timeline-<strategy>-<backend>.csv`, and `report.html`.
pub fn write(dir: &Path, report: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("report.json"), json).context("writing report.json")?;
    std::fs::write(dir.join("report.md"), markdown::render(report)).context("writing report.md")?;
    for run in &report.runs {
        hlog::write(dir, run)?;
        csv::write(dir, run)?;
    }
    let charts = charts::write_all(dir, report).context("drawing the charts")?;
    std::fs::write(dir.join("report.html"), html::render(report, &charts))
        .context("writing report.html")?;
    Ok(())
}

/// Reads a `report.json` (or the `report.json` inside a report folder).
pub fn read(path: &Path) -> anyhow::Result<Report> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let report: Report = serde_json::from_str(&text)
        .with_context(|| format!("{} is not an oversell report", file.display()))?;
    if report.schema != SCHEMA {
        anyhow::bail!(
            "{} has schema {:?}; this oversell reads {SCHEMA:?}",
            file.display(),
            report.schema
        );
    }
    Ok(report)
}
