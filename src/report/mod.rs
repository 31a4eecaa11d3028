//! Reports: `report.json` (schema `oversell.report/v2`; `v1` files are still read, see
//! [`v1`]), `report.md`, `report.html`, charts (SVG and PNG), each run's order latency as an
//! HdrHistogram interval log and its timelines as CSV, and the terminal table.
//!
//! Every metric a table, chart, `gate` or `diff` shows is read through [`catalog`].
//!
//! Every figure names its source: latency from our HdrHistograms (full response time from the
//! intended send), outcomes from the clients' records, oversell and friends from the oracle,
//! DB QPS from the database server's counters, Redis ops from `INFO stats`.

pub(crate) mod catalog;
pub mod charts;
pub(crate) mod csv;
pub mod details;
mod drain;
pub mod faults;
pub(crate) mod hlog;
pub(crate) mod html;
pub(crate) mod lateness;
pub(crate) mod law;
mod locate;
pub(crate) mod markdown;
pub mod markup;
pub(crate) mod proofs;
pub(crate) mod repeats;
mod shop;
pub(crate) mod shops;
pub mod summary;
pub(crate) mod table;
pub(crate) mod v1;

use crate::model::ReconcilePass as Pass;
use crate::oracle::Findings;
use crate::probe::Series;
use crate::traffic::attack::{GeneratorStats, GooseCrossCheck};
use crate::traffic::recorder::{Answer, Kind, Measurements};
use crate::traffic::Scenario;
use anyhow::Context;
pub use drain::{Drain, SettleState, Settling};
use serde::{Deserialize, Serialize};
pub use shop::{colour_of, OracleKind, Shop};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
pub use summary::{LatencySummary, MetricSummary};

/// The report schema id; bump on incompatible changes.
pub const SCHEMA: &str = "oversell.report/v2";

/// Where each kind of figure comes from (copied into every report); `oracle`: where the
/// server side's figures come from, as the shop under test says
/// ([`crate::runner::ShopUnderTest::sources`]).
pub fn sources(oracle: &str) -> BTreeMap<String, String> {
    [
        ("latency", "oversell's HdrHistograms (µs, 3 significant digits): full response time measured from each request's intended send time (coordinated-omission safe)"),
        ("outcomes", "the simulated clients' own records of every answer"),
        ("oracle", oracle),
        ("client_evidence", "the clients' own records: acknowledged orders minus the restocks the run saw (cancels answered ok; released orders the database shows), judged against the initial stock on every run, with or without an oracle"),
        (crate::metric::SeriesName::DbQps.name(), "the database server's counters, sampled every second (see each run's db_qps.source)"),
        (crate::metric::SeriesName::RedisOps.name(), "Redis INFO stats total_commands_processed, sampled every second (server-wide)"),
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
    /// The oversell version that wrote it.
    pub tool_version: String,
    pub scenario: ScenarioSummary,
    pub machine: Machine,
    /// The build, the command, the servers and the start time (empty in older reports).
    #[serde(default)]
    pub metadata: Metadata,
    pub sources: BTreeMap<String, String>,
    /// The runs that finished, in the order they ran.
    pub runs: Vec<RunReport>,
    /// The run that stopped the command, if one did (the runs before it are in `runs`).
    #[serde(default)]
    pub failed: Vec<FailedRun>,
    /// `--repeat N`: per strategy that ran more than once, every metric's median and min–max
    /// over its repeats (each repeat is also in `runs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<repeats::RepeatSummary>,
    /// `compare`: naive's oversell against the arrival rate, per backend ([`law`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub law: Vec<law::Law>,
}

/// How a report came to be.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Metadata {
    /// The git commit oversell was built from, or `unknown` (not built from a git checkout).
    pub git_commit: String,
    /// The command line, passwords in URLs redacted.
    pub command_line: Vec<String>,
    /// When the command started (UTC, RFC 3339).
    pub started_at: String,
    /// The servers the runs used, with the version each reported.
    pub servers: Vec<ServerVersion>,
}

/// A server a run used and the version it reported.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServerVersion {
    /// `PostgreSQL`, `MySQL` or `Redis`.
    pub service: String,
    /// Where it was reached, password redacted.
    pub url: String,
    /// What it said (`SHOW server_version`, `SELECT VERSION()`, `INFO server`), or why not.
    pub version: String,
    /// The harness started it (`--services`; docs/src/running/services.md): a private server in a
    /// temporary data directory.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub managed: bool,
    /// The settings that decide durability and size, as the server reported them
    /// (PostgreSQL: fsync, synchronous_commit, shared_buffers...; MariaDB:
    /// innodb_flush_log_at_trx_commit, sync_binlog, innodb_buffer_pool_size...; Redis:
    /// appendonly, appendfsync, save, maxmemory). Empty in older reports.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
}

/// A run that could not finish, and why.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FailedRun {
    /// The run's label (strategy/backend, or the target's host).
    pub run: String,
    pub error: String,
}

/// The scenario that produced a report (the item's stock and limit are in `spec.item`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioSummary {
    pub name: String,
    pub file: String,
    pub description: String,
    /// Buyers fired (both waves).
    pub buyers: u32,
    pub spec: Scenario,
}

/// How the tables and charts mark a generator-bound run (after the count of such runs in a
/// repeated row); [`BOUND_LEGEND`] says what it means.
pub const BOUND_MARK: &str = "†";

/// The legend under a table or chart that marks a run with [`BOUND_MARK`].
pub const BOUND_LEGEND: &str = "† generator-bound: the generator's lateness could change this run's figures (see its details; the latency without send lag is the shop's)";

/// The legend line when any run of `r` is generator-bound.
pub fn bound_legend(r: &Report) -> Option<&'static str> {
    r.runs
        .iter()
        .any(|run| run.generator_bound)
        .then_some(BOUND_LEGEND)
}

/// The machine's load average now (`/proc/loadavg`: 1, 5 and 15 minutes), where readable.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The machine the run happened on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub os: String,
    /// How the generator and the processes the harness started were placed (absent in older
    /// reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::placement::Placement>,
    /// `/proc/loadavg` (1, 5 and 15 minutes) when the report was begun, where it can be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_average: Option<[f64; 3]>,
}

impl Report {
    /// Whether the runs span more than one backend (labels then name it).
    pub fn multi_backend(&self) -> bool {
        let first = self.runs.first().map(|r| r.backend_name());
        self.runs.iter().any(|r| Some(r.backend_name()) != first)
    }
}

impl Machine {
    /// This machine.
    pub fn this() -> Self {
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            os: std::env::consts::OS.to_string(),
            placement: Some(crate::placement::Placement::this()),
            load_average: load_average(),
        }
    }
}

/// Requests of one kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KindReport {
    pub total: u64,
    pub outcomes: BTreeMap<Answer, u64>,
    pub latency: LatencySummary,
    /// Send lag: intended send to actual send (the generator's lateness; absent in older
    /// reports). Latency = send lag + service time.
    #[serde(default)]
    pub send_lag: Option<LatencySummary>,
    /// Sender wait: queued while every sender was held by an unanswered request, until a
    /// sender took it (the shop's time; absent in older reports).
    #[serde(default)]
    pub sender_wait: Option<LatencySummary>,
    /// Service time: actual send to the full answer (the shop's and the network's share;
    /// absent in older reports).
    #[serde(default)]
    pub service_time: Option<LatencySummary>,
    /// Latency less send lag: from the moment the shop became answerable (the send, or the
    /// start of a sender wait) to the full answer (absent in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shop_latency: Option<LatencySummary>,
    /// Latency per answer (e.g. how long a sold-out answer took versus a created one).
    pub latency_by_outcome: BTreeMap<Answer, LatencySummary>,
    /// Retries of this kind (`[client] retry`, resends with the same key), apart from the
    /// first attempts counted above (absent: none were sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<RetriesReport>,
}

/// Retries of one kind: how they were answered, latency from each retry's own intended send
/// (the failed answer plus the backoff).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RetriesReport {
    pub total: u64,
    pub outcomes: BTreeMap<Answer, u64>,
    pub latency: LatencySummary,
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
    /// Order latency p99 per second of answer, ms (0: no order answered in that second;
    /// absent in older reports), drawn beside the watched gauges.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order_p99_ms: Vec<f64>,
}

/// One run (a strategy on a backend, or a foreign shop) under one scenario. The oracle's
/// findings are stored once, flattened into the run's JSON object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    #[serde(flatten)]
    pub shop: Shop,
    /// `--repeat N`: which repeat of its strategy this run was (1-based; absent: ran once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// The known defect the reference shop ran with (`--defect`, a testing aid; absent: none),
    /// so a report made with one never passes for a clean one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defect: Option<crate::inventory::Defect>,
    pub scenario: String,
    pub buyers: u32,
    #[serde(flatten)]
    pub findings: Findings,
    pub requests: BTreeMap<Kind, KindReport>,
    /// First order attempts (retries are `order_retries`).
    pub order_attempts: u64,
    pub order_errors: u64,
    /// First order attempts answered with 5xx, timeouts or connection errors, over all first
    /// attempts (retries are counted apart: `order_retries`, `order_retry_errors`).
    pub error_rate: f64,
    /// Order retries sent (`[client] retry`, resends with the same key).
    #[serde(default)]
    pub order_retries: u64,
    /// Of those, answered with 5xx, timeouts or connection errors.
    #[serde(default)]
    pub order_retry_errors: u64,
    /// All requests per second over the active period.
    pub throughput_rps: f64,
    /// The rate the shop answered orders: order answers over the real span from the first
    /// order answer to the last (not the offered rate).
    pub order_throughput_rps: f64,
    /// From the sale opening to the first `sold_out` answer.
    pub time_to_sell_out_s: Option<f64>,
    /// Seconds from the sale opening to the last answer.
    pub duration_s: f64,
    /// Send lag of every request: intended send to actual send, the generator's own lateness
    /// (absent in older reports).
    #[serde(default)]
    pub send_lag: Option<LatencySummary>,
    /// Sender wait of every request: the time it waited for a free sender because every
    /// sender was held by an unanswered request (the shop's time, part of latency, never send
    /// lag; absent in older reports).
    #[serde(default)]
    pub sender_wait: Option<LatencySummary>,
    /// Service time of every request: actual send to the full answer (absent in older
    /// reports).
    #[serde(default)]
    pub service_time: Option<LatencySummary>,
    /// The send-lag p99 bound the user declared (`send_lag_p99_ms`, `--max-send-lag`); `None`:
    /// none (no default bound is held against a run).
    #[serde(default)]
    pub max_send_lag_ms: Option<f64>,
    /// The generator's lateness could change what the run concludes (see
    /// [`lateness`]: a latency figure it materially inflates, arrivals it failed to send, a
    /// declared bound exceeded): never blame the shop for it.
    #[serde(default)]
    pub generator_bound: bool,
    /// The generator's lateness and its effect, for every run (absent in older reports).
    #[serde(default)]
    pub generator_lateness: lateness::Lateness,
    pub db_qps: Option<MetricSummary>,
    pub db_tps: Option<MetricSummary>,
    pub redis_ops: Option<MetricSummary>,
    pub db_row_lock_waits: Option<f64>,
    pub db_deadlocks: Option<f64>,
    pub generator: GeneratorStats,
    pub drain: Drain,
    /// Seconds the oracle took once the sale had settled: the server side's read (order rows
    /// checked as they stream) and the audit (absent in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_s: Option<f64>,
    /// Of `oracle_s`: the server side's read, its order rows checked as they streamed (absent
    /// in older reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_read_s: Option<f64>,
    /// Of `oracle_s`: the audit of the clients' records against what the read found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_audit_s: Option<f64>,
    pub reconcile: Option<Pass>,
    /// `--shops K` above 1: the shop processes, the buyers each got and what each answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shops: Option<shops::ShopSpread>,
    /// The faults the run went through, with their windows and recovery (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<faults::FaultWindow>,
    /// Asynchronous orders: pending, decided, undecided, and acceptance to decision (absent:
    /// no order was answered pending).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<summary::DecisionSummary>,
    pub goose_crosscheck: Vec<GooseCrossCheck>,
    /// The buyers' logins (`[target.login]`), kept out of the sale's figures (absent: buyers
    /// did not log in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<crate::traffic::login::LoginReport>,
    pub timeline: Timeline,
    pub series: Vec<Series>,
    /// The watched gauges (`[watch]`, and the reference shop's own), by name: peak, drain,
    /// per-second series, source (absent: none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub watch: BTreeMap<String, crate::watch::Gauge>,
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

    /// Oversold units for tables: the peak (the headline), with the end beside it when cancels
    /// re-sold part of it.
    pub fn oversell_cell(&self) -> String {
        let f = &self.findings;
        match (f.oversell, f.oversold_at_end, f.peak_oversell) {
            (None, ..) => "n/a".into(),
            (Some(o), Some(end), _) if end != o => format!("{o} (end {end})"),
            // A report before the end figure: `oversell` held the end, the peak beside it.
            (Some(o), None, Some(p)) if p > o => format!("{o} (peak {p})"),
            (Some(o), ..) => o.to_string(),
        }
    }

    /// The shop's name: the strategy's, or the target's host.
    pub fn strategy_name(&self) -> &str {
        &self.shop.name
    }

    /// What stands beside the name: the backend, or which oracle audited the target.
    pub fn backend_name(&self) -> &str {
        &self.shop.detail
    }

    /// The label of this one run: [`RunReport::label`], then `#2` for a repeat.
    pub fn run_label(&self, with_backend: bool) -> String {
        match self.repeat {
            Some(n) => format!("{} #{n}", self.label(with_backend)),
            None => self.label(with_backend),
        }
    }

    /// [`RunReport::run_label`] with [`BOUND_MARK`] when the run is generator-bound: how the
    /// tables and charts name it.
    pub fn marked_label(&self, with_backend: bool) -> String {
        if self.generator_bound {
            format!("{} {BOUND_MARK}", self.run_label(with_backend))
        } else {
            self.run_label(with_backend)
        }
    }

    /// A short label: `strategy` or `strategy/backend`.
    pub fn label(&self, with_backend: bool) -> String {
        if with_backend {
            format!("{}/{}", self.strategy_name(), self.backend_name())
        } else {
            self.strategy_name().to_string()
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

/// Writes the data files into `dir` (created if missing): `report.json`, `report.md`, and per
/// run `latency-<strategy>-<backend>.hlog` and `timeline-<strategy>-<backend>.csv`. Cheap: the
/// runner calls it as each run finishes.
pub fn write_data(dir: &Path, report: &Report) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = serde_json::to_string_pretty(report)?;
    std::fs::write(dir.join("report.json"), json).context("writing report.json")?;
    std::fs::write(dir.join("report.md"), markdown::render(report)).context("writing report.md")?;
    for run in &report.runs {
        hlog::write(dir, run)?;
        csv::write(dir, run)?;
    }
    Ok(())
}

/// Writes everything into `dir`: the data files ([`write_data`]), the charts (`*.svg`,
/// `*.png`) and `report.html`.
pub fn write(dir: &Path, report: &Report) -> anyhow::Result<()> {
    write_data(dir, report)?;
    let charts = charts::write_all(dir, report).context("drawing the charts")?;
    std::fs::write(dir.join("report.html"), html::render(report, &charts))
        .context("writing report.html")?;
    Ok(())
}

/// Reads a `report.json`, the one inside a report folder, or the one report of an `--out`
/// folder ([`locate::report_file`]).
pub fn read(path: &Path) -> anyhow::Result<Report> {
    let file = locate::report_file(path)?;
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let not_a_report = || format!("{} is not an oversell report", file.display());
    let expected = || {
        anyhow::anyhow!(
            "{} is not an oversell report: expected the report.json a run writes (JSON with \
             \"schema\": {SCHEMA:?}), or the report folder holding it, e.g. \
             reports/20261130T073444Z-flash-100",
            file.display()
        )
    };
    let mut json: serde_json::Value = serde_json::from_str(&text).map_err(|_| expected())?;
    if !json.is_object() {
        return Err(expected());
    }
    match json.get("schema").and_then(|s| s.as_str()) {
        Some(SCHEMA) => {}
        Some(v1::SCHEMA) => v1::upgrade(&mut json).with_context(not_a_report)?,
        Some(other) => anyhow::bail!(
            "{} has schema {other:?}; this oversell reads {SCHEMA:?} and {:?}",
            file.display(),
            v1::SCHEMA
        ),
        None => return Err(expected()),
    }
    serde_json::from_value(json).with_context(not_a_report)
}
