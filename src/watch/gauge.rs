//! One watched gauge as a run's report keeps it (`report.json` `runs[].watch.<name>`): its
//! per-second series, its peak and when, whether and when it drained, how many reads failed,
//! and its source.
//!
//! **Drained** (docs/src/rehearsal/watch.md): the gauge's *baseline* is its first sample,
//! taken as the watch starts, before the sale opens. It *drained* at the first sample at or
//! after its peak whose value is at or below that baseline (a backlog back to its pre-sale
//! depth, 0 when it started empty). A gauge that never rose above its baseline drained at its
//! peak (0 s after it). `drained_at_s` is `null` when no sample after the peak came back down
//! before the watch stopped (the run settled).

use crate::metric::WatchFigure;
use serde::{Deserialize, Serialize};

/// A watched gauge's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gauge {
    /// Where the numbers come from, credentials masked.
    pub source: String,
    /// The largest sample (`null`: no sample).
    pub peak: Option<f64>,
    /// When it was first reached, in seconds after the sale opened.
    pub peak_at_s: Option<f64>,
    /// When it was back at or below its baseline after the peak (`null`: never, while
    /// watched).
    pub drained_at_s: Option<f64>,
    /// The first sample, before the sale opened: what "drained" comes back to.
    pub baseline: Option<f64>,
    pub baseline_at_s: Option<f64>,
    /// The start of the second with the most planned arrivals (the rush).
    pub rush_at_s: Option<f64>,
    /// Samples read.
    pub samples: u64,
    /// Reads that failed (retried with backoff).
    pub failed: u64,
    /// The last failure's message (no secret in it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// `(seconds after the sale opened at each read's send, value)`, about one a second.
    pub series: Vec<(f64, f64)>,
}

/// How long a gauge took to drain after its peak, as far as the watch saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DrainTime {
    /// Drained this many seconds after its peak.
    After(f64),
    /// Not drained when the watch stopped, this many seconds after its peak.
    NotBy(f64),
    /// No sample.
    Unknown,
}

/// What a gauge says of one of its figures held to a limit (the gate's reading of
/// `watch.<name>.max` and `watch.<name>.drained_within_s`).
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// The figure, measured.
    Measured(f64),
    /// Not drained when the watch stopped, this many seconds after its peak: already past the
    /// limit.
    NotDrainedPast(f64),
    /// No figure to hold to the limit, and why (no sample; or not drained yet, but the watch
    /// stopped before the limit ran out).
    Unmeasured(String),
}

impl Gauge {
    /// Its `figure`, held to a limit of `limit` (the figure's own unit).
    pub fn reading(&self, figure: WatchFigure, limit: f64) -> Reading {
        match (figure, self.peak, self.drain_time()) {
            (_, None, _) | (_, _, DrainTime::Unknown) => Reading::Unmeasured(self.unmeasured()),
            (WatchFigure::Max, Some(peak), _) => Reading::Measured(peak),
            (WatchFigure::DrainedWithinS, _, DrainTime::After(s)) => Reading::Measured(s),
            (WatchFigure::DrainedWithinS, _, DrainTime::NotBy(s)) if s > limit => {
                Reading::NotDrainedPast(s)
            }
            (WatchFigure::DrainedWithinS, _, DrainTime::NotBy(s)) => Reading::Unmeasured(format!(
                "it had not drained when the watch stopped (the run settled) {s:.1} s after \
                     its peak, before the limit's {limit:.1} s ran out"
            )),
        }
    }

    /// The figures of `series` (in time order) from `source`.
    pub fn from_series(
        source: String,
        series: Vec<(f64, f64)>,
        failed: u64,
        last_error: Option<String>,
        rush_at_s: Option<f64>,
    ) -> Gauge {
        let baseline = series.first().copied();
        let peak = series
            .iter()
            .copied()
            .fold(None, |best: Option<(f64, f64)>, p| match best {
                Some(b) if b.1 >= p.1 => Some(b),
                _ => Some(p),
            });
        let drained_at_s = match (peak, baseline) {
            (Some((at, _)), Some((_, base))) => series
                .iter()
                .find(|(t, v)| *t >= at && *v <= base)
                .map(|p| p.0),
            _ => None,
        };
        Gauge {
            source,
            peak: peak.map(|p| p.1),
            peak_at_s: peak.map(|p| p.0),
            drained_at_s,
            baseline: baseline.map(|b| b.1),
            baseline_at_s: baseline.map(|b| b.0),
            rush_at_s,
            samples: series.len() as u64,
            failed,
            last_error,
            series,
        }
    }

    /// Seconds from its peak to its drain, or how long it was watched after its peak without
    /// draining.
    pub fn drain_time(&self) -> DrainTime {
        let Some(peak_at) = self.peak_at_s else {
            return DrainTime::Unknown;
        };
        match self.drained_at_s {
            Some(d) => DrainTime::After(d - peak_at),
            None => {
                let last = self.series.last().map_or(peak_at, |p| p.0);
                DrainTime::NotBy(last - peak_at)
            }
        }
    }

    /// Why the gauge has no figure: no read succeeded.
    pub fn unmeasured(&self) -> String {
        match &self.last_error {
            Some(e) => format!(
                "no sample of it could be read ({} reads failed; the last: {e})",
                self.failed
            ),
            None => "no sample of it was taken".into(),
        }
    }

    /// The report's sentence about gauge `name`: its peak relative to the rush, whether and
    /// when it drained, its reads and its source.
    pub fn line(&self, name: &str) -> String {
        let reads = match (self.failed, &self.last_error) {
            (0, _) => format!("{} samples", self.samples),
            (n, Some(e)) => format!("{} samples, {n} reads failed (the last: {e})", self.samples),
            (n, None) => format!("{} samples, {n} reads failed", self.samples),
        };
        let (Some(peak), Some(peak_at)) = (self.peak, self.peak_at_s) else {
            return format!(
                "watch.{name}: {}; source: {}",
                self.unmeasured(),
                self.source
            );
        };
        let rush = match self.rush_at_s {
            Some(r) if peak_at >= r => format!(
                ", {} s after the rush began (the second of most arrivals, {})",
                num(peak_at - r),
                secs(r)
            ),
            Some(r) => format!(
                ", {} s before the rush began (the second of most arrivals, {})",
                num(r - peak_at),
                secs(r)
            ),
            None => String::new(),
        };
        let base = self.baseline.map_or("n/a".into(), num);
        let drained = match self.drain_time() {
            DrainTime::After(d) if d == 0.0 && self.peak <= self.baseline => {
                format!("it never rose above its baseline {base}")
            }
            DrainTime::After(d) => format!(
                "back to its baseline {base} at {} ({} s after its peak)",
                secs(self.drained_at_s.unwrap_or_default()),
                num(d)
            ),
            DrainTime::NotBy(d) => format!(
                "NOT back to its baseline {base} when the watch stopped, {} s after its peak (last read {})",
                num(d),
                self.series.last().map_or("n/a".into(), |p| num(p.1))
            ),
            DrainTime::Unknown => String::new(),
        };
        format!(
            "watch.{name}: peak {} at {}{rush}; {drained}; {reads}; source: {}",
            num(peak),
            secs(peak_at),
            self.source
        )
    }
}

/// `12`, `2.5`.
fn num(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// `2.0 s`.
fn secs(t: f64) -> String {
    format!("{t:.1} s")
}

/// The start of the second with the most arrivals, from arrivals per second.
pub fn rush_at_s(per_second: &[u32]) -> Option<f64> {
    per_second
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
        .map(|(s, _)| s as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gauge(points: &[(f64, f64)]) -> Gauge {
        Gauge::from_series("test".into(), points.to_vec(), 0, None, Some(1.0))
    }

    #[test]
    fn a_backlog_that_rises_and_falls_back_drains_at_its_first_sample_at_baseline() {
        let g = gauge(&[
            (-0.5, 2.0),
            (0.5, 5.0),
            (1.5, 40.0),
            (2.5, 40.0),
            (3.5, 9.0),
            (4.5, 2.0),
            (5.5, 0.0),
        ]);
        assert_eq!(
            (g.peak, g.peak_at_s),
            (Some(40.0), Some(1.5)),
            "first time at the peak"
        );
        assert_eq!(g.baseline, Some(2.0));
        assert_eq!(g.drained_at_s, Some(4.5), "back to the baseline, not to 0");
        assert_eq!(g.drain_time(), DrainTime::After(3.0));
        let line = g.line("queue");
        assert!(
            line.contains("peak 40 at 1.5 s, 0.5 s after the rush"),
            "{line}"
        );
        assert!(
            line.contains("back to its baseline 2 at 4.5 s (3 s after its peak)"),
            "{line}"
        );
    }

    #[test]
    fn a_gauge_still_up_when_the_watch_stopped_never_drained() {
        let g = gauge(&[(-0.5, 0.0), (0.5, 10.0), (1.5, 30.0), (2.5, 25.0)]);
        assert_eq!(g.drained_at_s, None);
        assert_eq!(g.drain_time(), DrainTime::NotBy(1.0));
        assert!(
            g.line("q").contains("NOT back to its baseline 0"),
            "{}",
            g.line("q")
        );
        let json = serde_json::to_value(&g).unwrap();
        assert!(json["drained_at_s"].is_null(), "null, not absent: {json}");
    }

    #[test]
    fn a_flat_gauge_drained_at_its_peak_and_an_unread_one_has_no_figure() {
        let flat = gauge(&[(-0.5, 3.0), (0.5, 3.0), (1.5, 1.0)]);
        assert_eq!(flat.drain_time(), DrainTime::After(0.0));
        assert!(flat.line("p").contains("never rose above its baseline 3"));
        let none = Gauge::from_series("s".into(), vec![], 4, Some("cannot connect".into()), None);
        assert_eq!((none.peak, none.drained_at_s), (None, None));
        assert_eq!(none.drain_time(), DrainTime::Unknown);
        assert!(none
            .line("p")
            .contains("4 reads failed; the last: cannot connect"));
    }

    #[test]
    fn the_rush_is_the_second_with_most_arrivals() {
        assert_eq!(rush_at_s(&[5, 90, 90, 3]), Some(1.0));
        assert_eq!(rush_at_s(&[]), None);
    }
}
