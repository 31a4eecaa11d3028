//! The generator's own lateness, and whether it could change what a run concludes.
//!
//! Every request's latency runs from its intended send, so it includes the generator's send
//! lag. The recorder also keeps each request's latency less its send lag (from the moment the
//! shop became answerable: the send, or the start of a sender wait), so what the lateness
//! adds to a figure is measured, not guessed. A run is **generator-bound** only when that
//! lateness could change what the run concludes:
//!
//! - **a latency figure it materially inflates**: the order latency's mean, p50, p90 or p99
//!   (the figures the report leads with) is higher by more than [`MATERIAL_SHARE`] of the
//!   figure without the lag *and* by more than [`MATERIAL_MS`] (a gate threshold on latency is
//!   judged the same way, threshold by threshold, in `gate`);
//! - **arrivals it failed to send**: more than [`LATE_SHARE`] of the requests went out later
//!   than the scenario's *late send* after their intended send by the generator's own
//!   lateness (send lag; a wait for a sender every one of which an unanswered request holds
//!   is the shop's time, never counted): a tenth of a burst's opening rush (at least
//!   [`crate::traffic::scenario::LATE_SEND_MIN`]), else
//!   [`crate::traffic::scenario::LATE_SEND_MAX`] (`Scenario::late_send_after`). A request that
//!   late has left the rush, or the second of the arrival curve, the plan put it in: the load
//!   sent is not the load planned;
//! - **a bound the user declared**: `[thresholds] send_lag_p99_ms` or `--max-send-lag`, when
//!   the send lag p99 is above it (never a default bound).
//!
//! A busy machine whose generator is a few milliseconds late under a shop that answers in
//! tens of milliseconds changes no figure materially: it is reported, not flagged.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A latency figure is materially inflated when the lag adds more than this share of it...
pub const MATERIAL_SHARE: f64 = 0.10;
/// ...and more than this many milliseconds: below it, lateness is within what a generator on a
/// shared machine can promise (its timers tick every millisecond, its threads share the cores),
/// and no design review turns on a figure that moved by less.
pub const MATERIAL_MS: f64 = 10.0;
/// More than this share of requests sent late: the arrivals were not sent as planned.
pub const LATE_SHARE: f64 = 0.01;

/// One order latency figure measured from the intended send, and without the send lag.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Inflated {
    /// `mean`, `p50`, `p90` or `p99` of the order latency.
    pub figure: String,
    pub with_lag_ms: f64,
    pub without_lag_ms: f64,
}

impl Inflated {
    /// What the send lag added, ms.
    pub fn added_ms(&self) -> f64 {
        self.with_lag_ms - self.without_lag_ms
    }
}

/// The generator's lateness in one run and its effect (`report.json`: `generator_lateness`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Lateness {
    /// Requests sent (every kind), and those sent `late_after_ms` or more late (send lag plus
    /// sender wait histogram).
    pub sends: u64,
    pub late_sends: u64,
    /// The scenario's late send (ms).
    #[serde(default)]
    pub late_after_ms: f64,
    /// The order latency figures with and without the send lag (order latency and
    /// latency-less-lag histograms).
    pub figures: Vec<Inflated>,
    /// Why the run is generator-bound (`None`: its lateness changes no conclusion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<String>,
}

impl Lateness {
    /// Judges a run: `send_lag` of every request, `late_after` (the scenario's late send), its order latency `figures` with and without
    /// the send lag ([`figures`]), and the send-lag p99 bound the user declared, if any.
    pub fn judge(
        send_lag: &Histogram<u64>,
        late_after: Duration,
        figures: Vec<Inflated>,
        declared_max_ms: Option<f64>,
    ) -> Lateness {
        let sends = send_lag.len();
        let late_sends = if send_lag.is_empty() {
            0
        } else {
            send_lag.count_between(late_after.as_micros() as u64, u64::MAX)
        };
        let mut why: Vec<String> = Vec::new();
        let material: Vec<String> = figures
            .iter()
            .filter(|f| material(f.with_lag_ms, f.without_lag_ms))
            .map(|f| {
                format!(
                    "order latency {} {:.3} ms is {:.3} ms without it",
                    f.figure, f.with_lag_ms, f.without_lag_ms
                )
            })
            .collect();
        if !material.is_empty() {
            why.push(format!(
                "its send lag materially inflates the latency ({})",
                material.join(", ")
            ));
        }
        if sends > 0 && late_sends as f64 > LATE_SHARE * sends as f64 {
            why.push(format!(
                "{late_sends} of {sends} requests ({:.1} %) went out {} ms or more after their intended send, by the generator's own lateness: the arrivals sent are not the ones planned",
                100.0 * late_sends as f64 / sends as f64,
                late_after.as_millis()
            ));
        }
        let p99 = (!send_lag.is_empty()).then(|| send_lag.value_at_quantile(0.99) as f64 / 1000.0);
        if let (Some(bound), Some(p99)) = (declared_max_ms, p99) {
            if p99 > bound {
                why.push(format!(
                    "send lag p99 {p99:.3} ms exceeds the {bound:.3} ms bound declared (send_lag_p99_ms / --max-send-lag)"
                ));
            }
        }
        Lateness {
            sends,
            late_sends,
            late_after_ms: late_after.as_secs_f64() * 1000.0,
            figures,
            bound: (!why.is_empty()).then(|| {
                format!(
                    "generator-bound: {}; read the latency without send lag, and rerun with fewer buyers, a release build or a quieter machine",
                    why.join("; ")
                )
            }),
        }
    }
}

/// Whether a figure measured `with` the send lag is materially above the same figure
/// `without` it.
pub fn material(with: f64, without: f64) -> bool {
    let added = with - without;
    added > MATERIAL_MS && added > MATERIAL_SHARE * without
}

/// The figures the rule reads, mean, p50, p90 and p99 (ms), `with` the send lag and
/// `without` it.
pub fn figures(with: [f64; 4], without: [f64; 4]) -> Vec<Inflated> {
    ["mean", "p50", "p90", "p99"]
        .iter()
        .zip(with.iter().zip(without))
        .map(|(figure, (with, without))| Inflated {
            figure: (*figure).into(),
            with_lag_ms: *with,
            without_lag_ms: without,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::recorder::new_histogram;
    use crate::traffic::scenario::{LATE_SEND_MAX, LATE_SEND_MIN};

    fn lags(us: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = new_histogram();
        for (v, n) in us {
            h.record_n(*v, *n).unwrap();
        }
        h
    }

    fn summary(mean: f64, p50: f64, p90: f64, p99: f64) -> [f64; 4] {
        [mean, p50, p90, p99]
    }

    #[test]
    fn a_few_milliseconds_late_under_a_slow_shop_is_reported_not_flagged() {
        // Send lag p99 8 ms; the shop answers in 150 ms: 8 ms of 200 is not material.
        let lag = lags(&[(300, 980), (8_000, 20)]);
        let with = summary(152.0, 150.5, 170.0, 208.0);
        let without = summary(151.9, 150.0, 169.0, 200.0);
        let l = Lateness::judge(&lag, LATE_SEND_MAX, figures(with, without), None);
        assert_eq!(l.bound, None, "{l:?}");
        assert_eq!(l.figures.len(), 4);
        assert_eq!(l.late_sends, 0);
    }

    #[test]
    fn lag_that_doubles_a_fast_shops_p99_is_flagged_and_says_which_figure() {
        let lag = lags(&[(300, 900), (20_000, 100)]);
        let with = summary(3.0, 1.0, 2.0, 21.0);
        let without = summary(1.0, 0.9, 1.5, 2.0);
        // A busy machine's few milliseconds under the same shop: reported, not flagged.
        let busy = summary(2.5, 1.7, 3.0, 6.9);
        assert_eq!(
            Lateness::judge(&lag, LATE_SEND_MAX, figures(busy, without), None).bound,
            None
        );
        let l = Lateness::judge(&lag, LATE_SEND_MAX, figures(with, without), None);
        let why = l.bound.expect("flagged");
        assert!(
            why.contains("order latency p99 21.000 ms is 2.000 ms"),
            "{why}"
        );
        assert!(!why.contains("p50"), "p50 moved by 0.1 ms: {why}");
    }

    #[test]
    fn arrivals_sent_a_second_late_are_flagged_even_when_latency_hides_it() {
        // 2 % of requests a second or more late.
        let lag = lags(&[(500, 980), (1_500_000, 20)]);
        let same = summary(1.0, 1.0, 1.0, 1.0);
        let l = Lateness::judge(&lag, LATE_SEND_MAX, figures(same, same), None);
        assert_eq!(l.late_sends, 20);
        assert!(l.bound.unwrap().contains("20 of 1000 requests"));
        // 1 % exactly is within the rule.
        let lag = lags(&[(500, 990), (1_500_000, 10)]);
        assert_eq!(
            Lateness::judge(&lag, LATE_SEND_MAX, figures(same, same), None).bound,
            None
        );
    }

    #[test]
    fn only_a_declared_bound_is_held_against_the_send_lag_p99() {
        let lag = lags(&[(6_000, 1000)]);
        let slow = summary(500.0, 500.0, 500.0, 500.0);
        assert_eq!(
            Lateness::judge(&lag, LATE_SEND_MAX, figures(slow, slow), None).bound,
            None,
            "no bound declared: 6 ms of lag under a 500 ms shop is not material"
        );
        let l = Lateness::judge(&lag, LATE_SEND_MAX, figures(slow, slow), Some(5.0));
        assert!(l.bound.unwrap().contains("5.000 ms bound declared"));
    }

    #[test]
    fn a_late_send_is_a_tenth_of_the_opening_rush_between_50_ms_and_1_s() {
        let late = |name: &str| {
            crate::scenarios::Bundled::named(name)
                .unwrap()
                .load()
                .unwrap()
                .late_send_after()
        };
        assert_eq!(
            late("smoke"),
            LATE_SEND_MIN,
            "a 0.25 s rush: 25 ms, raised to 50"
        );
        assert_eq!(late("flash-100"), Duration::from_millis(200), "a 2 s rush");
        // Requests 100 ms late: late against the smoke rush, not against a 1 s late send.
        let delay = lags(&[(500, 970), (100_000, 30)]);
        let same = summary(1.0, 1.0, 1.0, 1.0);
        let j = |after| Lateness::judge(&delay, after, figures(same, same), None);
        assert_eq!(j(LATE_SEND_MIN).late_sends, 30);
        assert!(j(LATE_SEND_MIN).bound.unwrap().contains("50 ms or more"));
        assert_eq!(j(LATE_SEND_MAX).bound, None);
    }

    #[test]
    fn materiality_needs_both_the_share_and_the_milliseconds() {
        assert!(!material(10.8, 1.0), "9.8 ms is below 10 ms");
        assert!(!material(210.0, 200.0), "10 ms of 200 is 5 %");
        assert!(material(12.0, 1.0));
        assert!(material(230.0, 200.0));
    }
}
