//! `bench generator`'s saturation search: the highest rate our generator holds on this
//! machine, as precisely as it paces.
//!
//! A probe is the generator firing a plan at one rate for [`PROBE_S`] seconds at the bench's
//! endpoint (the same "ours" phase as the table's first row). It *holds* when it sent every
//! planned request and its send lag p99 stayed within [`LAG_P99_MS`]: past that, buyers go
//! out late because the generator cannot keep up, and a run at that rate measures the
//! generator, not the shop. The search starts at the bench's `--rate`: it doubles the rate
//! while probes hold (up to [`MAX_RATE`]), or halves it until one holds (down to
//! [`MIN_RATE`]), then halves the bracket [`BISECTIONS`] times. The endpoint shares the cores
//! (it is the cheapest server there is), so the figure is the generator's on this machine with
//! a shop beside it, which is how it runs. The probe itself is the bench's
//! (`super::generator`): this file only decides what to probe next.

use serde::Serialize;
use std::future::Future;

/// Seconds of one probe.
pub const PROBE_S: u64 = 2;
/// The send lag p99 a probe must stay within, ms.
pub const LAG_P99_MS: f64 = 1.0;
/// The highest rate probed.
pub const MAX_RATE: u64 = 320_000;
/// The lowest rate probed.
pub const MIN_RATE: u64 = 100;
/// Halvings of the bracket once a probe failed.
pub const BISECTIONS: u32 = 3;

/// One probe's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    pub rate: u64,
    pub requests_per_s: f64,
    pub send_lag_p99_ms: Option<f64>,
    pub cpu_us_per_request: f64,
    pub held: bool,
}

/// What the search found.
#[derive(Debug, Clone, Serialize)]
pub struct Saturation {
    /// The highest rate that held (`None`: not even the first).
    pub holds: Option<u64>,
    /// The lowest rate that failed (`None`: every probe up to [`MAX_RATE`] held).
    pub fails_at: Option<u64>,
    pub probe_seconds: u64,
    pub criterion: String,
    pub probes: Vec<Probe>,
}

/// Whether a probe at `rate` that sent `requests` with a send lag p99 of `lag_p99_ms` held it
/// (for [`PROBE_S`] seconds).
pub fn held(rate: u64, requests: u64, lag_p99_ms: Option<f64>) -> bool {
    requests >= rate * PROBE_S && lag_p99_ms.is_some_and(|p| p <= LAG_P99_MS)
}

/// Searches from `start` with `probe` (one probe at the rate it is given).
pub async fn search<F, Fut>(start: u64, mut probe: F) -> anyhow::Result<Saturation>
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = anyhow::Result<Probe>>,
{
    let mut probes = Vec::new();
    let (mut holds, mut fails_at) = (None, None);
    let mut rate = start.clamp(MIN_RATE, MAX_RATE);
    loop {
        let p = probe(rate).await?;
        let ok = p.held;
        probes.push(p);
        if ok {
            holds = Some(rate);
            if fails_at.is_some() || rate >= MAX_RATE {
                break;
            }
            rate = (rate * 2).min(MAX_RATE);
        } else {
            fails_at = Some(rate);
            if holds.is_some() || rate <= MIN_RATE {
                break;
            }
            rate = (rate / 2).max(MIN_RATE);
        }
    }
    for _ in 0..BISECTIONS {
        let (Some(lo), Some(hi)) = (holds, fails_at) else {
            break;
        };
        let mid = lo + (hi - lo) / 2;
        if mid <= lo || mid >= hi {
            break;
        }
        let p = probe(mid).await?;
        if p.held {
            holds = Some(mid);
        } else {
            fails_at = Some(mid);
        }
        probes.push(p);
    }
    Ok(Saturation {
        holds,
        fails_at,
        probe_seconds: PROBE_S,
        criterion: format!(
            "a probe of {PROBE_S} s holds its rate when it sends every planned request with a \
             send lag p99 of at most {LAG_P99_MS} ms"
        ),
        probes,
    })
}

/// The summary's line.
pub fn render(s: &Saturation) -> String {
    let found = match (s.holds, s.fails_at) {
        (Some(h), Some(f)) => format!("holds {h}/s, fails at {f}/s"),
        (Some(h), None) => format!("holds {h}/s, the highest rate probed"),
        (None, Some(f)) => format!("fails even at {f}/s"),
        (None, None) => "no probe ran".into(),
    };
    let tried: Vec<String> = s
        .probes
        .iter()
        .map(|p| format!("{}/s {}", p.rate, if p.held { "held" } else { "failed" }))
        .collect();
    format!(
        "generator saturation on this machine: {found} ({}; probes: {})\n",
        s.criterion,
        tried.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_holds_only_when_it_kept_up_and_stayed_on_time() {
        assert!(held(1000, 2000, Some(0.4)));
        assert!(!held(1000, 1999, Some(0.4)), "did not send them all");
        assert!(!held(1000, 2000, Some(1.5)), "late");
        assert!(!held(1000, 2000, None), "no lag measured");
    }

    /// A machine that holds every rate up to `limit`.
    async fn search_on(start: u64, limit: u64) -> Saturation {
        search(start, |rate| async move {
            Ok(Probe {
                rate,
                requests_per_s: rate as f64,
                send_lag_p99_ms: Some(if rate <= limit { 0.5 } else { 3.0 }),
                cpu_us_per_request: 1.0,
                held: rate <= limit,
            })
        })
        .await
        .unwrap()
    }

    #[tokio::test]
    async fn the_search_brackets_the_limit_from_above_or_below() {
        // Up from 1,000: 1k, 2k, 4k, 8k held, 16k failed, then 12k, 10k, 9k bisected.
        let up = search_on(1_000, 9_500).await;
        assert_eq!((up.holds, up.fails_at), (Some(9_000), Some(10_000)));
        let rates: Vec<u64> = up.probes.iter().map(|p| p.rate).collect();
        assert_eq!(
            rates,
            [1_000, 2_000, 4_000, 8_000, 16_000, 12_000, 10_000, 9_000]
        );
        // Down from 5,000: 5k and 2.5k failed, 1.25k held, then bisected.
        let down = search_on(5_000, 1_500).await;
        assert_eq!(down.holds, Some(1_406));
        assert_eq!(down.fails_at, Some(1_562));
        // Nothing holds: the lowest rate probed is said as failed.
        let none = search_on(400, 10).await;
        assert_eq!((none.holds, none.fails_at), (None, Some(MIN_RATE)));
        // Everything holds: up to the highest rate probed.
        let all = search_on(100_000, u64::MAX).await;
        assert_eq!((all.holds, all.fails_at), (Some(MAX_RATE), None));
    }
}
