//! What a run shows while it runs (stderr, unless `--quiet`): on a terminal, a progress bar
//! (run i of n, arrivals of the plan, time since the sale opened and until the last arrival,
//! units sold of the stock, requests in flight, errors); elsewhere (CI logs, a pipe) one line a
//! second. Units sold are the database's (the probe's count of live orders) when the probe has
//! read it, else what clients were told ("acked").

use crate::probe::Latest;
use crate::traffic::recorder::Recorder;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Which run of how many, and its label.
#[derive(Debug, Clone)]
pub struct Slot {
    /// 1-based.
    pub index: usize,
    pub of: usize,
    pub label: String,
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run {}/{} {}", self.index, self.of, self.label)
    }
}

/// What a progress display reads every tick.
pub(super) struct Sources {
    pub recorder: Arc<Recorder>,
    pub latest: Latest,
    pub buyers: usize,
    pub stock: i64,
    /// When the last buyer is due, after the sale opens.
    pub last_arrival: Duration,
}

/// A running progress display; [`Watch::stop`] ends it.
pub(super) struct Watch {
    task: tokio::task::JoinHandle<()>,
    bar: Option<ProgressBar>,
    src: Arc<Sources>,
}

/// Starts the display for `slot`: a bar when stderr is a terminal, else a line a second.
pub(super) fn start(slot: &Slot, src: Sources) -> Watch {
    let bar = std::io::stderr().is_terminal().then(|| {
        let style =
            ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} arrived\n   {wide_msg}")
                .expect("a valid template")
                .progress_chars("=> ");
        let bar = ProgressBar::new(src.buyers as u64)
            .with_style(style)
            .with_prefix(slot.to_string());
        crate::telemetry::set_progress_bar(Some(bar.clone()));
        bar
    });
    // The `== run i/N label` line above names the run; each line under it says only which.
    let label = format!("run {}/{}", slot.index, slot.of);
    let shown = bar.clone();
    let src = Arc::new(src);
    let watched = src.clone();
    let task = tokio::spawn(async move {
        let src = watched;
        let mut tick = tokio::time::interval(match shown {
            Some(_) => Duration::from_millis(200),
            None => Duration::from_secs(1),
        });
        loop {
            tick.tick().await;
            match &shown {
                Some(bar) => {
                    let (arrived, msg) = status(&src);
                    bar.set_position(arrived);
                    bar.set_message(msg);
                }
                None => crate::console::eoutln!(
                    "{}",
                    crate::report::table::wrap(
                        &format!("   [{label}] {}", line(&src)),
                        crate::report::table::TERMINAL_WIDTH
                    )
                ),
            }
        }
    });
    Watch { task, bar, src }
}

impl Watch {
    /// Stops updating; the bar is drawn once more with the final count and left in the
    /// scrollback (never the count of its last tick).
    pub(super) fn stop(self) {
        self.task.abort();
        if let Some(bar) = self.bar {
            let (arrived, msg) = status(&self.src);
            bar.set_position(arrived);
            bar.set_message(msg);
            bar.finish();
            crate::telemetry::set_progress_bar(None);
        }
    }
}

/// Seconds since the sale opened (negative before it opens).
fn since_open(src: &Sources) -> f64 {
    let now = Instant::now();
    let opened = src.recorder.opened();
    now.saturating_duration_since(opened).as_secs_f64()
        - opened.saturating_duration_since(now).as_secs_f64()
}

/// `sold 37/100` from the database, else `acked 37/100` from the clients.
fn sold(src: &Sources, created: u64) -> String {
    match src.latest.get(crate::metric::SeriesName::DbSold.name()) {
        Some(sold) => format!("sold {sold:.0}/{}", src.stock),
        None => format!("acked {created}/{}", src.stock),
    }
}

/// The bar's position (arrivals) and message.
fn status(src: &Sources) -> (u64, String) {
    let p = src.recorder.progress();
    let t = since_open(src);
    let clock = if t < 0.0 {
        format!("opens in {:.1}s", -t)
    } else {
        let left = src.last_arrival.as_secs_f64() - t;
        if left > 0.0 {
            format!("{} elapsed, ETA {}", mmss(t), mmss(left))
        } else {
            format!("{} elapsed, finishing", mmss(t))
        }
    };
    let msg = format!(
        "{clock} | {} | in flight {} | errors {}",
        sold(src, p.created),
        p.in_flight,
        p.errors
    );
    (p.arrived, msg)
}

/// The line printed every second when stderr is not a terminal.
fn line(src: &Sources) -> String {
    let p = src.recorder.progress();
    format!(
        "{:5.1}s arrived {}/{} done {} | orders {} created {} errors {} | {}",
        since_open(src),
        p.arrived,
        src.buyers,
        p.finished,
        p.orders,
        p.created,
        p.errors,
        sold(src, p.created)
    )
}

fn mmss(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    format!("{}:{:02}", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_minutes_and_seconds() {
        assert_eq!(mmss(0.0), "0:00");
        assert_eq!(mmss(61.4), "1:01");
        assert_eq!(mmss(-3.0), "0:00");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopped_bar_is_left_at_its_final_count() {
        let recorder = Arc::new(Recorder::new(Instant::now()));
        let src = Sources {
            recorder: recorder.clone(),
            latest: Latest::default(),
            buyers: 3,
            stock: 5,
            last_arrival: Duration::from_secs(1),
        };
        let bar = ProgressBar::hidden();
        bar.set_length(3);
        let watch = Watch {
            task: tokio::spawn(async {}),
            bar: Some(bar.clone()),
            src: Arc::new(src),
        };
        for _ in 0..3 {
            recorder.arrived();
        }
        watch.stop();
        assert!(bar.is_finished());
        assert_eq!(
            bar.position(),
            3,
            "the last arrivals are counted, not the last tick's"
        );
        assert!(bar.message().contains("errors 0"), "{}", bar.message());
    }

    #[tokio::test(start_paused = true)]
    async fn the_line_says_sold_from_the_database_once_the_probe_read_it() {
        let src = Sources {
            recorder: Arc::new(Recorder::new(Instant::now())),
            latest: Latest::default(),
            buyers: 10,
            stock: 5,
            last_arrival: Duration::from_secs(3),
        };
        assert!(line(&src).contains("acked 0/5"), "{}", line(&src));
        src.latest.set("db_sold", 4.0);
        assert!(line(&src).contains("sold 4/5"), "{}", line(&src));
        let (_, msg) = status(&src);
        assert!(msg.contains("ETA 0:03"), "{msg}");
    }
}
