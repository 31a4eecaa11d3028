//! `--repeat N`: every strategy run N times, each on a fresh sale. `report.json` keeps every
//! repeat in `runs` (each with its `repeat` number) and, per strategy, a summary of every
//! catalog metric over the repeats: the median with the min–max spread. The tables show
//! `median (min–max)`; `diff` calls a band metric's change significant only when it leaves
//! that spread (see [`crate::diff`]).

use super::{Report, RunReport};
use crate::metric::Metric;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a table of repeated runs says under it.
pub const NOTE: &str = "×N: the strategy ran N times (--repeat), each on a fresh sale; every figure is the median (min–max) over the repeats.";

/// One metric over the repeats of one strategy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Every repeat's value, in run order (repeats that could not measure it are left out).
    pub samples: Vec<f64>,
}

impl Spread {
    /// The spread of `samples`; `None` when there are none.
    pub fn of(samples: Vec<f64>) -> Option<Spread> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.clone();
        sorted.sort_by(|a, b| a.total_cmp(b));
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: sorted[0],
            max: sorted[n - 1],
            samples,
        })
    }

    /// Whether `v` lies within this spread.
    pub fn contains(&self, v: f64) -> bool {
        (self.min..=self.max).contains(&v)
    }

    /// `12.5 ms (10.1–14.0)` at the metric's precision, or the value alone when every
    /// repeat gave the same.
    pub fn show(&self, m: Metric) -> String {
        if self.min == self.max {
            m.format(self.median)
        } else {
            format!(
                "{} ({}–{})",
                m.format(self.median),
                m.number(self.min),
                m.number(self.max)
            )
        }
    }
}

/// The repeats of one strategy (or target) and every metric's spread over them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatSummary {
    /// The run's label, `strategy/backend`.
    pub run: String,
    /// How many repeats finished.
    pub repeats: usize,
    /// Catalog metric name → its spread (metrics no repeat measured are left out).
    pub metrics: BTreeMap<String, Spread>,
}

/// The runs of `r` grouped by strategy and backend, in the order they first ran.
pub fn groups(r: &Report) -> Vec<(String, Vec<&RunReport>)> {
    let mut out: Vec<(String, Vec<&RunReport>)> = Vec::new();
    for run in &r.runs {
        let key = run.label(true);
        match out.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(run),
            None => out.push((key, vec![run])),
        }
    }
    out
}

/// Whether any strategy of `r` ran more than once.
pub fn repeated(r: &Report) -> bool {
    groups(r).iter().any(|(_, runs)| runs.len() > 1)
}

/// `m` over `runs`: the values the runs measured.
pub fn spread(m: Metric, runs: &[&RunReport]) -> Option<Spread> {
    Spread::of(runs.iter().filter_map(|r| m.read(r).ok()).collect())
}

/// Every repeated strategy's summary (empty when nothing ran more than once).
pub fn summarise(r: &Report) -> Vec<RepeatSummary> {
    groups(r)
        .into_iter()
        .filter(|(_, runs)| runs.len() > 1)
        .map(|(run, runs)| RepeatSummary {
            run,
            repeats: runs.len(),
            metrics: Metric::RUN
                .iter()
                .filter_map(|m| Some((m.key(), spread(*m, &runs)?)))
                .collect(),
        })
        .collect()
}

/// A table row's label: the run's, with its repeat count when it ran more than once.
pub fn row_label(runs: &[&RunReport], mb: bool) -> String {
    let label = runs[0].label(mb);
    let label = if runs.len() > 1 {
        format!("{label} ×{}", runs.len())
    } else {
        label
    };
    let bound = runs.iter().filter(|r| r.generator_bound).count();
    match bound {
        0 => label,
        n if runs.len() > 1 => format!("{label} {} {n}", super::BOUND_MARK),
        _ => format!("{label} {}", super::BOUND_MARK),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let s = Spread::of(vec![3.0, 1.0, 10.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 10.0));
        assert_eq!(s.samples, vec![3.0, 1.0, 10.0, 2.0], "run order kept");
        assert_eq!(Spread::of(vec![5.0]).unwrap().median, 5.0);
        assert!(Spread::of(vec![]).is_none());
        assert!(s.contains(10.0) && !s.contains(10.5));
    }

    #[test]
    fn a_spread_is_written_median_then_min_max() {
        let s = Spread::of(vec![0.0194, 0.6595, 0.0201]).unwrap();
        assert_eq!(s.show(Metric::ErrorRate), "2.01 % (1.94–65.95)");
        let same = Spread::of(vec![0.0, 0.0]).unwrap();
        assert_eq!(same.show(Metric::Oversell), "0");
    }
}
