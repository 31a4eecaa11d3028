//! Runs on one side only. A run only the candidate has cannot be compared, so it is judged on
//! its own figures against each `--fail-on` metric's default limit (the gate's: 0 for every
//! count the oracle makes): a candidate that adds an overselling run fails. A `--fail-on`
//! metric with no default limit (a latency, a rate) has nothing to hold such a run to and
//! says so. A run only the baseline has fails `--fail-on` outright: the candidate cannot show
//! that it did not get worse.

use crate::metric::{Better, Metric};
use crate::report::RunReport;

/// A run only the candidate has: each metric's worst figure over its repeats.
#[derive(Debug, Clone)]
pub struct LoneRun {
    /// `strategy/backend`.
    pub label: String,
    /// How many repeats the figures are the worst of.
    pub repeats: usize,
    figures: Vec<(Metric, Result<f64, String>)>,
}

/// What a lone run's figure says against a `--fail-on` metric's default limit.
#[derive(Debug, Clone, PartialEq)]
pub enum LoneCheck {
    /// Within the limit.
    Held { value: f64, limit: f64 },
    /// Beyond it: fails `--fail-on`.
    Broken { value: f64, limit: f64 },
    /// The run could not measure it (why): fails `--fail-on`, as the gate's "not verified".
    NotVerified(String),
    /// No baseline to compare with and no default limit to hold it to: not judged.
    NoLimit,
}

impl LoneCheck {
    /// Whether this check fails `--fail-on`.
    pub fn fails(&self) -> bool {
        matches!(self, LoneCheck::Broken { .. } | LoneCheck::NotVerified(_))
    }

    /// The check in words, the metric's figure written by `m`.
    pub fn describe(&self, m: Metric) -> String {
        match self {
            LoneCheck::Held { value, limit } | LoneCheck::Broken { value, limit } => format!(
                "{} against the default limit {} {}",
                m.format(*value),
                m.bound(),
                m.format(*limit)
            ),
            LoneCheck::NotVerified(why) => format!("not verified ({why})"),
            LoneCheck::NoLimit => "not judged (no baseline run, no default limit)".into(),
        }
    }

    /// The JSON spelling of the status.
    pub fn status(&self) -> &'static str {
        match self {
            LoneCheck::Held { .. } => "held",
            LoneCheck::Broken { .. } => "breached",
            LoneCheck::NotVerified(_) => "not_verified",
            LoneCheck::NoLimit => "not_judged",
        }
    }
}

impl LoneRun {
    /// The run `label` from its repeats (at least one).
    pub fn of(label: String, runs: &[&RunReport]) -> LoneRun {
        let figures = super::METRICS
            .iter()
            .map(|m| (*m, worst(*m, runs)))
            .collect();
        LoneRun {
            label,
            repeats: runs.len(),
            figures,
        }
    }

    /// The worst figure of `m` over the repeats, or why one repeat has none.
    pub fn figure(&self, m: Metric) -> Result<f64, String> {
        self.figures
            .iter()
            .find(|(x, _)| *x == m)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| Err("not a metric of a run".into()))
    }

    /// `m`'s figure against its default limit.
    pub fn check(&self, m: Metric) -> LoneCheck {
        let Some(limit) = m.default_limit() else {
            return LoneCheck::NoLimit;
        };
        match self.figure(m) {
            Ok(value) if m.within(value, limit) => LoneCheck::Held { value, limit },
            Ok(value) => LoneCheck::Broken { value, limit },
            Err(why) => LoneCheck::NotVerified(why),
        }
    }
}

/// `m`'s worst value over `runs` (the highest where lower is better); a repeat that could not
/// measure it makes the whole figure unmeasured.
fn worst(m: Metric, runs: &[&RunReport]) -> Result<f64, String> {
    let values = runs
        .iter()
        .map(|r| m.read(r))
        .collect::<Result<Vec<f64>, String>>()?;
    let pick = match m.spec().better {
        Better::Lower => f64::max,
        Better::Higher => f64::min,
    };
    values
        .into_iter()
        .reduce(pick)
        .ok_or_else(|| "no run".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::v1;

    fn naive(oversold: i64) -> LoneRun {
        let r = v1::every_strategy(2, |run, repeat| {
            run.findings.oversell = Some(oversold * repeat)
        });
        let runs: Vec<&RunReport> = r
            .runs
            .iter()
            .filter(|x| x.label(true) == "naive/postgres")
            .collect();
        assert_eq!(runs.len(), 2);
        LoneRun::of("naive/postgres".into(), &runs)
    }

    #[test]
    fn a_lone_run_that_oversold_in_any_repeat_breaks_the_default_limit() {
        let run = naive(8);
        assert_eq!(
            run.check(Metric::Oversell),
            LoneCheck::Broken {
                value: 8.0,
                limit: 0.0
            }
        );
        assert!(run.check(Metric::Oversell).fails());
        assert_eq!(
            naive(0).check(Metric::Oversell),
            LoneCheck::Held {
                value: 0.0,
                limit: 0.0
            }
        );
    }

    #[test]
    fn a_metric_without_a_default_limit_is_not_judged_and_does_not_fail() {
        let c = naive(8).check(Metric::P99Ms);
        assert_eq!(c, LoneCheck::NoLimit);
        assert!(!c.fails());
        assert!(c.describe(Metric::P99Ms).contains("not judged"));
    }

    #[test]
    fn an_unmeasured_figure_is_not_verified_and_fails() {
        let c = naive(0).check(Metric::RedisDrift);
        assert!(matches!(c, LoneCheck::NotVerified(_)), "{c:?}");
        assert!(c.fails());
    }
}
