//! `bench generator`'s saturation search: the highest rate our generator holds on this
//! machine, as precisely as it paces.
//!
//! A probe is the generator firing a plan at one rate for [`PROBE_S`] seconds at the bench's
//! endpoint (the same "ours" phase as the table's first row). It *holds* when it sent every
//! planned request and its send lag p99 stayed within [`LAG_P99_MS`]: past that, buyers go
//! out late because the generator cannot keep up, and a run at that rate measures the
//! generator, not the shop. The search starts at the bench's `--rate`: it doubles the rate
//! while probes hold (up to [`MAX_RATE`]), or halves it until one holds (down to
//! [`MIN_RATE`]), then halves the bracket [`BISECTIONS`] times. The endpoint shares the cores (it is the cheapest server there is), so the figure
//! is the generator's on this machine with a shop beside it, which is how it runs.

use super::generator::{self, ClientRun, Endpoint, GeneratorBench};
use serde::Serialize;

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

/// Whether one probe's run held its `rate` (for [`PROBE_S`] seconds).
fn held(rate: u64, run: &ClientRun) -> bool {
    run.requests >= rate * PROBE_S && run.send_lag_p99_ms.is_some_and(|p| p <= LAG_P99_MS)
}

/// Searches from `b.rate` up.
pub(super) async fn search(b: &GeneratorBench, endpoint: &Endpoint) -> anyhow::Result<Saturation> {
    let mut probes = Vec::new();
    let probe = |rate: u64| {
        let b = GeneratorBench {
            seconds: PROBE_S,
            rate,
            connections: b.connections,
            saturation: false,
        };
        async move {
            let run = generator::ours(&b, endpoint).await?;
            anyhow::Ok(Probe {
                rate,
                requests_per_s: run.requests_per_s,
                send_lag_p99_ms: run.send_lag_p99_ms,
                cpu_us_per_request: run.cpu.us_per_op,
                held: held(rate, &run),
            })
        }
    };
    let (mut holds, mut fails_at) = (None, None);
    let mut rate = b.rate.clamp(MIN_RATE, MAX_RATE);
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
    use crate::bench::cpu::CpuUse;

    fn run(requests: u64, p99: Option<f64>) -> ClientRun {
        ClientRun {
            client: "ours".into(),
            what: String::new(),
            requests,
            seconds: 2.0,
            requests_per_s: 0.0,
            cpu: CpuUse::of(0.1, 1000, "request", String::new()),
            send_lag_p50_ms: None,
            send_lag_p99_ms: p99,
            send_lag_source: String::new(),
            peak_rss_mib: 0.0,
            peak_rss_with_spelled_records_mib: None,
            spelling_out_mib: None,
            rss_at_start_mib: 0.0,
            rss_source: String::new(),
            endpoint_us_per_request: 0.0,
        }
    }

    #[test]
    fn a_probe_holds_only_when_it_kept_up_and_stayed_on_time() {
        assert!(held(1000, &run(2000, Some(0.4))));
        assert!(!held(1000, &run(1999, Some(0.4))), "did not send them all");
        assert!(!held(1000, &run(2000, Some(1.5))), "late");
        assert!(!held(1000, &run(2000, None)), "no lag measured");
    }
}
