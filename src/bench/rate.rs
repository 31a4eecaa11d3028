//! A fixed-rate client for `POST /api/orders` (wrk has no rate mode and wrk2 is not packaged).
//!
//! Request `i` is due at `start + i / rate`. Its latency runs from that intended send time to
//! its full answer, so a shop that stalls is charged for every request that queued behind the
//! stall (no coordinated omission). At most `connections` requests are in flight, like wrk's
//! connections; a request whose worker is still busy is sent late, and that wait counts. The
//! send lag (due time to the moment the request actually left) is recorded apart: when its p99
//! is high, the client or a shop too slow for the rate held it back.

use crate::shop::routes::Route;
use anyhow::Context;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What a fixed-rate run measured. Latencies in ms, recorded in µs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RateResult {
    /// Requests per second asked for.
    pub target_per_s: f64,
    pub sent: u64,
    pub created: u64,
    /// Answers other than 201.
    pub refused: u64,
    /// Requests that got no HTTP answer (connection error, 10 s timeout).
    pub failed: u64,
    pub seconds: f64,
    /// `created / seconds`.
    pub orders_per_s: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    /// Intended send time to actual send (ms): the client's own lateness.
    pub send_lag_p99_ms: f64,
    pub connections: usize,
}

struct Done {
    latency_us: u64,
    lag_us: u64,
    status: Option<u16>,
}

fn ms(h: &Histogram<u64>, q: f64) -> f64 {
    (h.value_at_quantile(q) as f64 / 10.0).round() / 100.0
}

/// Sends `rate` orders per second for `seconds` to `base_url`, each from its own buyer.
///
/// `connections` workers, each with its own keep-alive connection ([`super::http1`]), take the next due request
/// from a shared counter, wait for its due time and send it (wrk2's model): a worker still busy
/// when its next request comes due sends it late, and that lateness is in the latency.
pub async fn run(
    base_url: &str,
    rate: f64,
    seconds: u64,
    connections: usize,
    tag: &str,
) -> anyhow::Result<RateResult> {
    anyhow::ensure!(rate > 0.0, "--rate must be above 0 (got {rate})");
    let (tx, rx) = mpsc::unbounded_channel::<Done>();
    let due = Due {
        interval: Duration::from_secs_f64(1.0 / rate),
        total: (rate * seconds.max(1) as f64).round() as u64,
        start: Instant::now() + Duration::from_millis(20),
    };
    let next = Arc::new(AtomicU64::new(0));
    let collector = tokio::spawn(collect(rx));
    let authority = super::http1::authority(base_url)
        .with_context(|| format!("bench shop fires at a plain http:// shop, not {base_url:?}"))?
        .to_string();
    let mut workers = Vec::with_capacity(connections.max(1));
    for _ in 0..connections.max(1) {
        // One keep-alive connection per worker, like wrk's.
        let conn = super::http1::Conn::new(&authority, Duration::from_secs(10));
        let (tx, next, tag) = (tx.clone(), next.clone(), tag.to_string());
        workers.push(tokio::spawn(worker(conn, tx, next, tag, due)));
    }
    drop(tx);
    for w in workers {
        w.await?;
    }
    let tally = collector.await?;
    Ok(tally.result(rate, due, connections))
}

/// When each request is due: request `i` (below `total`) at `start + i * interval`.
#[derive(Debug, Clone, Copy)]
struct Due {
    start: Instant,
    interval: Duration,
    total: u64,
}

/// One worker on its own connection: takes the next request from `next`, waits for its due
/// time, sends it as buyer `u-{tag}-{i}` and reports its latency, lag and status.
async fn worker(
    mut conn: super::http1::Conn,
    tx: mpsc::UnboundedSender<Done>,
    next: Arc<AtomicU64>,
    tag: String,
    plan: Due,
) {
    let mut body = String::with_capacity(128);
    let mut key = String::with_capacity(64);
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= plan.total {
            break;
        }
        let due = plan.start + plan.interval.mul_f64(i as f64);
        tokio::time::sleep_until(due).await;
        let sent = Instant::now();
        body.clear();
        key.clear();
        use std::fmt::Write;
        let _ = write!(
            body,
            r#"{{"item_id":1,"qty":1,"user_id":"u-{tag}-{i}","device_id":"d-{tag}-{i}"}}"#
        );
        let _ = write!(key, "k-{tag}-{i}");
        let status = conn
            .post_json(Route::Orders.path(), &[("idempotency-key", &key)], &body)
            .await
            .ok();
        let _ = tx.send(Done {
            latency_us: due.elapsed().as_micros() as u64,
            lag_us: sent.saturating_duration_since(due).as_micros() as u64,
            status,
        });
    }
}

/// What the workers reported, added up.
struct Tally {
    /// Intended send to full answer (µs).
    lat: Histogram<u64>,
    /// Intended send to actual send (µs).
    lag: Histogram<u64>,
    created: u64,
    refused: u64,
    failed: u64,
}

/// Adds up every report until the last worker is done.
async fn collect(mut rx: mpsc::UnboundedReceiver<Done>) -> Tally {
    let mut t = Tally {
        lat: Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds"),
        lag: Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds"),
        created: 0,
        refused: 0,
        failed: 0,
    };
    while let Some(d) = rx.recv().await {
        t.lat.saturating_record(d.latency_us.max(1));
        t.lag.saturating_record(d.lag_us.max(1));
        match d.status {
            Some(201) => t.created += 1,
            Some(_) => t.refused += 1,
            None => t.failed += 1,
        }
    }
    t
}

impl Tally {
    /// The run's result, its seconds counted from the first due time to now.
    fn result(self, rate: f64, due: Due, connections: usize) -> RateResult {
        let (lat, lag) = (&self.lat, &self.lag);
        let seconds = due.start.elapsed().as_secs_f64();
        RateResult {
            target_per_s: rate,
            sent: due.total,
            created: self.created,
            refused: self.refused,
            failed: self.failed,
            seconds: (seconds * 100.0).round() / 100.0,
            orders_per_s: (self.created as f64 / seconds.max(1e-9)).round(),
            p50_ms: ms(lat, 0.5),
            p90_ms: ms(lat, 0.9),
            p99_ms: ms(lat, 0.99),
            p999_ms: ms(lat, 0.999),
            max_ms: (lat.max() as f64 / 10.0).round() / 100.0,
            send_lag_p99_ms: ms(lag, 0.99),
            connections,
        }
    }
}

/// `--rate`: a number of requests per second, or a percentage of the saturation rate measured
/// in the same run (`80%`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum RateSpec {
    PerSecond(f64),
    OfSaturation(f64),
}

impl std::str::FromStr for RateSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || {
            format!(
                "--rate {s:?}: expected requests per second (e.g. 8000) or a percentage of the \
                 saturation rate measured in the same run (e.g. 80%)"
            )
        };
        if let Some(p) = s.trim().strip_suffix('%') {
            let p: f64 = p.trim().parse().map_err(|_| bad())?;
            if !(p > 0.0 && p <= 1000.0) {
                return Err(bad());
            }
            return Ok(RateSpec::OfSaturation(p / 100.0));
        }
        let r: f64 = s.trim().parse().map_err(|_| bad())?;
        if !(r > 0.0 && r.is_finite()) {
            return Err(bad());
        }
        Ok(RateSpec::PerSecond(r))
    }
}

impl RateSpec {
    /// Requests per second, given the saturation rate of this run.
    pub fn per_second(self, saturation: f64) -> f64 {
        match self {
            RateSpec::PerSecond(r) => r,
            RateSpec::OfSaturation(f) => (saturation * f).max(1.0).round(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_a_number_or_a_share_of_saturation() {
        assert_eq!("8000".parse(), Ok(RateSpec::PerSecond(8000.0)));
        assert_eq!("80%".parse(), Ok(RateSpec::OfSaturation(0.8)));
        assert_eq!(RateSpec::OfSaturation(0.8).per_second(10_000.0), 8000.0);
        for bad in ["", "0", "-5", "abc", "0%", "x%"] {
            assert!(bad.parse::<RateSpec>().is_err(), "{bad}");
        }
    }
}
