//! Process-wide set-up: logging to stderr (coloured only on a terminal, never with `NO_COLOR`,
//! and kept clear of a progress bar) and the process's one Prometheus recorder, which the shop's
//! `/metrics` and the harness's `--metrics-listen` both render.
//!
//! The drivers' own log lines (sqlx's `slow statement` warning, an HTTP or Redis client's) go
//! to the run's log file (`run.log` in the report's folder: [`hold_driver_lines`], held in
//! memory until the folder exists), never onto the terminal between a run's lines; outside a
//! run (`serve`) they go to stderr.
//!
//! [`shop_metrics`] declares the shop's metric names once, for every module that emits or reads
//! one.

pub(crate) mod shop_metrics;

use indicatif::ProgressBar;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::collections::HashMap;
use std::hash::Hash;
use std::io::{IsTerminal, Write};
use std::sync::{Mutex, OnceLock, RwLock};

/// Metric handles by label values, registered once each: building and hashing a metrics key
/// (and its label strings) per request was a measurable share of the shop's hot path. A handle
/// is kept only once the process's recorder is installed, so nothing caches a no-op handle
/// taken before it.
pub struct Handles<K, H> {
    map: RwLock<HashMap<K, H>>,
}

impl<K: Hash + Eq + Copy, H: Clone> Handles<K, H> {
    /// An empty cache.
    pub fn new() -> Self {
        Handles {
            map: RwLock::new(HashMap::new()),
        }
    }

    /// The handle of `key`, registered by `make` the first time.
    pub fn get(&self, key: K, make: impl FnOnce(K) -> H) -> H {
        if let Some(h) = self.map.read().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return h.clone();
        }
        let handle = make(key);
        if PROMETHEUS.get().is_some() {
            self.map
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, handle.clone());
        }
        handle
    }
}

impl<K: Hash + Eq + Copy, H: Clone> Default for Handles<K, H> {
    fn default() -> Self {
        Self::new()
    }
}

/// The content type of the Prometheus text exposition format.
pub const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Histogram buckets in seconds, for every histogram of the process: 100 µs to 10 s.
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

static PROMETHEUS: OnceLock<PrometheusHandle> = OnceLock::new();
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// What kind of Prometheus metric a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

/// A metric a process exports: its name, kind and `# HELP` text.
#[derive(Debug, Clone, Copy)]
pub struct Described {
    pub name: &'static str,
    pub kind: MetricKind,
    pub help: &'static str,
}

/// A [`Described`] metric, for the const lists.
pub const fn described(name: &'static str, kind: MetricKind, help: &'static str) -> Described {
    Described { name, kind, help }
}

/// Registers `list`'s `# HELP` texts with the process's recorder.
pub fn describe(list: &[Described]) {
    for d in list {
        match d.kind {
            MetricKind::Counter => metrics::describe_counter!(d.name, d.help),
            MetricKind::Gauge => metrics::describe_gauge!(d.name, d.help),
            MetricKind::Histogram => metrics::describe_histogram!(d.name, d.help),
        }
    }
}

/// Logs to stderr, filtered by `RUST_LOG`, else by `default` (`-v`/`-q`: warnings, and info
/// for oversell, without either); the drivers' lines to the run's log during a run
/// ([`hold_driver_lines`]).
pub fn init_tracing(default: &str) {
    use tracing_subscriber::filter::filter_fn;
    use tracing_subscriber::prelude::*;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let ours = tracing_subscriber::fmt::layer()
        .with_ansi(colour_on_stderr())
        .with_writer(|| StderrAroundBar)
        .with_filter(filter_fn(|m| !is_driver(m.target())));
    let drivers = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(|| DriverLog)
        .with_filter(filter_fn(|m| is_driver(m.target())));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(ours)
        .with(drivers)
        .try_init();
}

/// Crates whose log lines are a driver's (database, Redis, HTTP), by their tracing target.
const DRIVERS: &[&str] = &[
    "sqlx", "redis", "hyper", "h2", "reqwest", "rustls", "tower", "mio",
];

/// Whether `target` is one of [`DRIVERS`]' (`sqlx::query`, `sqlx_postgres::…`, ...).
pub fn is_driver(target: &str) -> bool {
    let krate = target.split("::").next().unwrap_or(target);
    DRIVERS
        .iter()
        .any(|d| krate == *d || krate.strip_prefix(d).is_some_and(|r| r.starts_with('_')))
}

/// Where the drivers' lines go.
enum Sink {
    Stderr,
    /// Held until the run's log is opened (a run's first reads come before its folder).
    Held(Vec<u8>),
    File(std::fs::File),
}

static RUN_LOG: Mutex<Sink> = Mutex::new(Sink::Stderr);

/// The most a run holds of driver lines before its log is open; more are dropped.
const HELD_BYTES: usize = 4 << 20;

fn sink() -> std::sync::MutexGuard<'static, Sink> {
    RUN_LOG.lock().unwrap_or_else(|e| e.into_inner())
}

/// A run's hold on the drivers' lines: held in memory from [`hold_driver_lines`] until
/// [`RunLog::open`] names the file, written there from then on. Dropped: back to stderr
/// (lines still held, the run never got a folder, go there too).
#[must_use = "the drivers' lines go back to stderr when this is dropped"]
pub struct RunLog(());

/// Starts holding the drivers' lines for a run that will open its log.
pub fn hold_driver_lines() -> RunLog {
    let mut s = sink();
    if !matches!(*s, Sink::File(_)) {
        *s = Sink::Held(Vec::new());
    }
    RunLog(())
}

impl RunLog {
    /// Writes the drivers' lines to `path` (appended) from now on, the held ones first.
    pub fn open(&self, path: &std::path::Path) -> std::io::Result<()> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let mut s = sink();
        if let Sink::Held(held) = &*s {
            file.write_all(held)?;
        }
        *s = Sink::File(file);
        Ok(())
    }
}

impl Drop for RunLog {
    fn drop(&mut self) {
        let was = std::mem::replace(&mut *sink(), Sink::Stderr);
        if let Sink::Held(held) = was {
            let _ = StderrAroundBar.write_all(&held);
        }
    }
}

/// The run's log when one is open (or held), else stderr.
struct DriverLog;

impl Write for DriverLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut s = sink();
        match &mut *s {
            Sink::File(f) => f.write_all(buf)?,
            Sink::Held(held) => {
                if held.len() + buf.len() <= HELD_BYTES {
                    held.extend_from_slice(buf);
                }
            }
            Sink::Stderr => {
                drop(s);
                StderrAroundBar.write_all(buf)?
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut *sink() {
            Sink::File(f) => f.flush(),
            _ => std::io::stderr().flush(),
        }
    }
}

/// Whether stderr gets colour: it is a terminal and `NO_COLOR` is unset or empty.
pub fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The process's Prometheus recorder, installed on first use. A recorder installed by someone
/// else (oversell embedded in another program) leaves us a private one to render.
pub fn prometheus() -> &'static PrometheusHandle {
    PROMETHEUS.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets(&BUCKETS)
            .expect("non-empty buckets");
        match builder.install_recorder() {
            Ok(h) => h,
            Err(_) => PrometheusBuilder::new().build_recorder().handle(),
        }
    })
}

/// The exposition of `handle` as an HTTP answer with the Prometheus content type.
pub fn exposition(handle: &PrometheusHandle) -> impl axum::response::IntoResponse {
    handle.run_upkeep();
    (
        [(axum::http::header::CONTENT_TYPE, PROMETHEUS_CONTENT_TYPE)],
        handle.render(),
    )
}

/// Registers the progress bar that stderr lines must not tear (`None` once it is finished).
pub fn set_progress_bar(bar: Option<ProgressBar>) {
    *BAR.lock().unwrap_or_else(|e| e.into_inner()) = bar;
}

/// Writes one line to stderr, above the progress bar when one is drawn.
pub fn stderr_line(line: &str) {
    let _ = StderrAroundBar.write_all(format!("{line}\n").as_bytes());
}

/// stderr, hiding the progress bar (if any) while a log line is written.
struct StderrAroundBar;

impl Write for StderrAroundBar {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let bar = BAR.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match bar {
            Some(bar) => bar.suspend(|| std::io::stderr().write_all(buf))?,
            None => std::io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod driver_tests {
    use super::is_driver;

    #[test]
    fn a_driver_is_told_by_its_crate_not_by_a_prefix_of_its_name() {
        for t in [
            "sqlx::query",
            "sqlx_postgres::options",
            "sqlx_core",
            "redis",
            "hyper_util::x",
        ] {
            assert!(is_driver(t), "{t}");
        }
        for t in ["oversell::runner", "sqlxish", "redistribute", "goose"] {
            assert!(!is_driver(t), "{t}");
        }
    }
}
