//! Comparing repeated runs (`--repeat N`) by their spread rather than one sample each.
//!
//! A band metric (latency, error rate, throughput, ...) changed only when the candidate's
//! median lies outside the baseline's min–max *and* the baseline's median outside the
//! candidate's: a difference both sides' own repeats can produce is noise. The oracle's counts
//! (oversell, lost acks, ...) stay exact: their worst repeat is compared, so one oversold unit
//! in any repeat is never averaged away.

use super::{judge, Row, Verdict};
use crate::metric::{Better, Metric, Rule};
use crate::report::repeats::{self, Spread};
use crate::report::RunReport;

/// What a diff of repeated runs says above each table.
pub const NOTE: &str = "Repeated runs: each figure is the median (min–max) over the repeats. A timing or rate changed only when each side's median leaves the other's min–max; the oracle's counts compare their worst repeat exactly.";

/// The worst value of a spread for `m`: the highest when lower is better.
fn worst(m: Metric, s: &Spread) -> f64 {
    match m.spec().better {
        Better::Lower => s.max,
        Better::Higher => s.min,
    }
}

/// Judges two spreads of `m`.
pub fn judge_spreads(m: Metric, b: Option<&Spread>, c: Option<&Spread>) -> Verdict {
    let (b, c) = match (b, c) {
        (Some(b), Some(c)) => (b, c),
        (b, c) => return judge(m, b.map(|s| s.median), c.map(|s| s.median), 0.0),
    };
    match m.spec().rule {
        Rule::Exact => judge(m, Some(worst(m, b)), Some(worst(m, c)), 0.0),
        Rule::Band if b.contains(c.median) || c.contains(b.median) => Verdict::Same,
        // Outside both spreads: the direction of the medians decides (a zero band).
        Rule::Band => judge(m, Some(b.median), Some(c.median), 0.0),
    }
}

/// One metric of two groups of repeats.
pub fn row(m: Metric, b: &[&RunReport], c: &[&RunReport]) -> Row {
    let (bs, cs) = (repeats::spread(m, b), repeats::spread(m, c));
    let (bu, cu) = (m.unit_in(b[0]), m.unit_in(c[0]));
    let verdict = if bs.is_some() && cs.is_some() && bu != cu {
        Verdict::NotComparable
    } else {
        judge_spreads(m, bs.as_ref(), cs.as_ref())
    };
    let figure = |s: &Option<Spread>| {
        s.as_ref().map(|s| match m.spec().rule {
            Rule::Exact => worst(m, s),
            Rule::Band => s.median,
        })
    };
    Row {
        metric: m,
        baseline: figure(&bs),
        candidate: figure(&cs),
        unit: bu.or(cu).map(|u| u.counter),
        verdict,
        spreads: Some((bs, cs)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Spread {
        Spread::of(v.to_vec()).unwrap()
    }

    #[test]
    fn a_band_change_inside_either_spread_is_the_same() {
        // for-update's error rate: 1.94 % and 65.95 % on the same machine and seed. A
        // candidate whose median sits inside that spread has not changed.
        let base = s(&[0.0194, 0.6595, 0.0201]);
        let cand = s(&[0.03, 0.6, 0.04]);
        assert_eq!(
            judge_spreads(Metric::ErrorRate, Some(&base), Some(&cand)),
            Verdict::Same
        );
    }

    #[test]
    fn a_band_change_outside_both_spreads_is_worse_or_better() {
        let base = s(&[10.0, 12.0, 11.0]);
        let slower = s(&[20.0, 22.0, 21.0]);
        assert_eq!(
            judge_spreads(Metric::P99Ms, Some(&base), Some(&slower)),
            Verdict::Worse
        );
        assert_eq!(
            judge_spreads(Metric::P99Ms, Some(&slower), Some(&base)),
            Verdict::Better
        );
        // The candidate's median leaves the baseline's spread, but its own spread holds the
        // baseline's median: noise.
        let wide = s(&[11.0, 30.0, 31.0]);
        assert_eq!(
            judge_spreads(Metric::P99Ms, Some(&base), Some(&wide)),
            Verdict::Same
        );
    }

    #[test]
    fn oracle_counts_compare_their_worst_repeat_exactly() {
        let clean = s(&[0.0, 0.0, 0.0]);
        let once = s(&[0.0, 1.0, 0.0]);
        assert_eq!(once.median, 0.0, "the median hides it");
        assert_eq!(
            judge_spreads(Metric::Oversell, Some(&clean), Some(&once)),
            Verdict::Worse
        );
        assert_eq!(
            judge_spreads(Metric::Oversell, Some(&clean), Some(&clean)),
            Verdict::Same
        );
        assert_eq!(
            judge_spreads(Metric::Oversell, Some(&clean), None),
            Verdict::Worse,
            "no longer measured"
        );
    }
}
