//! A foreign shop's stock sampled during the sale: its oracle's stock (the `--stock-query` of
//! `--oracle-sql`, or the HTTP oracle's stock field) read once a second, from before the first
//! buyer until the run settles, like the reference shop's probes.
//!
//! Each reading keeps when it was sent and when it was answered, so the oracle can hold it
//! against what the clients provably held at that instant (the stock-side peak), and it
//! becomes the run's `db_stock` series (timeline, CSV) and its lowest and highest stock seen.
//! With a backlog signal ([`super::backlog`]) the backlog is read before the send and after
//! the answer: a reading is *settled* when both read 0 (nothing acknowledged was waiting to be
//! written), and only settled readings are held against the clients' records. Without one,
//! an asynchronous shop's stock may lag its acknowledgements, so none is.

use super::backlog::BacklogSource;
use super::{Oracle, OracleSource};
use crate::oracle::StockSample;
use crate::probe::Series;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often the stock is read.
pub const EVERY: Duration = Duration::from_secs(1);

/// The series the samples become (the reference shop's probe names its stock series alike).
pub const SERIES: &str = crate::metric::SeriesName::DbStock.name();

/// One reading: sent, answered, the stock, and whether the backlog read 0 around it.
type Reading = (Instant, Instant, i64, bool);

/// A running sampler.
pub struct StockSampler {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<(Vec<Reading>, u64)>,
    source: String,
}

/// What the sampler saw, on the sale's clock.
pub struct Sampled {
    /// Every reading, in ms after the sale opened.
    pub samples: Vec<StockSample>,
    /// The same as a series (seconds after the sale opened at each read's send).
    pub series: Series,
    /// Reads that failed or gave no stock (skipped).
    pub failed: u64,
}

/// Starts reading the stock once a second through a connection of its own, when the oracle
/// gives a stock (`gives_stock`: its baseline reading had one), with the shop's `backlog`
/// signal read around each reading; `None` otherwise.
pub async fn start(
    source: &OracleSource,
    gives_stock: bool,
    backlog: Option<std::sync::Arc<BacklogSource>>,
) -> Option<StockSampler> {
    if !gives_stock {
        return None;
    }
    let oracle = source.connect().await.ok()?;
    let (stop, mut rx) = watch::channel(false);
    let task = tokio::spawn(async move {
        let mut readings = Vec::new();
        let mut failed = 0;
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = rx.changed() => break,
                _ = tick.tick() => {}
            }
            match read(&oracle, backlog.as_deref()).await {
                Some(r) => readings.push(r),
                None => failed += 1,
            }
        }
        (readings, failed)
    });
    Some(StockSampler {
        stop,
        task,
        source: format!(
            "the shop's stock through its oracle ({}), read once a second",
            source.describe()
        ),
    })
}

/// One reading of the stock, with its send and answer instants, and whether `backlog` read 0
/// just before the send and just after the answer.
async fn read(oracle: &Oracle, backlog: Option<&BacklogSource>) -> Option<Reading> {
    let empty = || async {
        match backlog {
            Some(b) => b.read(oracle).await == Some(0),
            None => false,
        }
    };
    let before = empty().await;
    let sent = Instant::now();
    let stock = oracle.read().await.ok()??.stock?;
    let answered = Instant::now();
    let settled = before && empty().await;
    Some((sent, answered, stock, settled))
}

impl StockSampler {
    /// Stops sampling; the readings on the clock of a sale opened at `opened`.
    pub async fn stop(self, opened: Instant) -> Sampled {
        let _ = self.stop.send(true);
        let (readings, failed) = self.task.await.unwrap_or_default();
        let ms = |at: Instant| at.saturating_duration_since(opened).as_millis() as u64;
        let secs = |at: Instant| {
            at.saturating_duration_since(opened).as_secs_f64()
                - opened.saturating_duration_since(at).as_secs_f64()
        };
        Sampled {
            samples: readings
                .iter()
                .map(|&(sent, answered, stock, settled)| StockSample {
                    sent_ms: ms(sent),
                    answered_ms: ms(answered),
                    stock,
                    settled,
                })
                .collect(),
            series: Series {
                name: SERIES.into(),
                unit: "units".into(),
                source: self.source,
                points: readings
                    .iter()
                    .map(|&(sent, _, stock, _)| (secs(sent), stock as f64))
                    .collect(),
            },
            failed,
        }
    }
}
