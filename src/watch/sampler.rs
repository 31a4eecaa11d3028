//! The watch during a run: one background task per gauge, reading it once a second from just
//! before the sale opens until the runner stops it (the run settled or drained). A task never
//! blocks the sale (it holds its own connection, nothing of the buyers'), and a slow or dead
//! source delays only its own samples. A failing read is retried with backoff (1 s doubling
//! to 16 s), logged once when the gauge starts failing and once when it reads again, counted
//! (`oversell_watch_failed_reads_total{gauge}` and the gauge's `failed`), and never ends the
//! run.

use super::gauge::Gauge;
use super::read::Reader;
use crate::backoff::Backoff;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often each gauge is read.
pub const EVERY: Duration = Duration::from_secs(1);

/// What one gauge's task saw.
#[derive(Default)]
struct Tally {
    series: Vec<(f64, f64)>,
    failed: u64,
    last_error: Option<String>,
}

/// The running watch.
pub struct Watcher {
    stop: watch::Sender<bool>,
    tasks: Vec<(String, String, tokio::task::JoinHandle<Tally>)>,
}

/// Starts reading every gauge once a second, times in seconds after `opened` (negative
/// before the sale opens).
pub fn start(readers: Vec<(String, Reader)>, opened: Instant) -> Watcher {
    let (stop, rx) = watch::channel(false);
    let tasks = readers
        .into_iter()
        .map(|(name, reader)| {
            let source = reader.describe().to_string();
            let task = tokio::spawn(run(name.clone(), reader, opened, rx.clone()));
            (name, source, task)
        })
        .collect();
    Watcher { stop, tasks }
}

/// Seconds from `opened` to `at` (negative before it).
fn seconds(opened: Instant, at: Instant) -> f64 {
    at.saturating_duration_since(opened).as_secs_f64()
        - opened.saturating_duration_since(at).as_secs_f64()
}

/// One gauge's loop.
async fn run(
    name: String,
    mut reader: Reader,
    opened: Instant,
    mut stop: watch::Receiver<bool>,
) -> Tally {
    let mut tally = Tally::default();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut backoff = Backoff::new(EVERY, Duration::from_secs(16));
    let mut next_try = Instant::now();
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        if Instant::now() < next_try {
            continue;
        }
        let sent = Instant::now();
        let read = tokio::select! {
            _ = stop.changed() => break,
            r = reader.read() => r,
        };
        match read {
            Ok(v) => {
                tally.series.push((seconds(opened, sent), v));
                if failing {
                    tracing::info!("watch.{name}: reading again ({})", reader.describe());
                    failing = false;
                }
                backoff.reset();
            }
            Err(e) => {
                tally.failed += 1;
                metrics::counter!(crate::live::WATCH_FAILED_READS, "gauge" => name.clone())
                    .increment(1);
                if !failing {
                    tracing::warn!(
                        "watch.{name}: cannot read {}: {e}; retrying with backoff, the run goes on",
                        reader.describe()
                    );
                    failing = true;
                }
                tally.last_error = Some(e);
                next_try = Instant::now() + backoff.next_wait();
            }
        }
    }
    tally
}

impl Watcher {
    /// Stops every gauge's task; the gauges, by name, with the rush's second.
    pub async fn stop(self, rush_at_s: Option<f64>) -> BTreeMap<String, Gauge> {
        let _ = self.stop.send(true);
        let mut out = BTreeMap::new();
        for (name, source, task) in self.tasks {
            let t = task.await.unwrap_or_default();
            let g = Gauge::from_series(source, t.series, t.failed, t.last_error, rush_at_s);
            out.insert(name, g);
        }
        out
    }
}
