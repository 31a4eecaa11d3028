//! `gate --threshold capacity_rps=R` (or `[thresholds] capacity_rps`): the gate requires a
//! capacity of at least R buyers/s by running the scenario at R (its shape kept over its own
//! window, [`super::scale`]) and holding it to the rest of its objective there. One run, so a
//! CI pipeline can afford it; the search itself is `oversell capacity`.

use super::slo::generator_limit;
use crate::gate::{Limit, Status, Verdict};
use crate::metric::Metric;
use crate::report::Report;
use crate::traffic::Scenario;

/// The required capacity, when one of `limits` asks for it.
pub fn required(limits: &[Limit]) -> Option<f64> {
    limits
        .iter()
        .find(|l| l.metric == Metric::CapacityRps)
        .map(|l| l.value)
}

/// The scenario at the required rate, over its own window.
pub fn at_rate(s: &Scenario, rate: f64) -> Scenario {
    super::scale(s, rate, s.buyers.window_s)
}

/// Decides each run's `capacity_rps` check from its other checks: passed (measured: the
/// rate, which held) when every other one passed or was not required, not verified when one
/// broke while the generator was the limit (never the shop's failure), breached otherwise.
pub fn judge(verdict: &mut Verdict, report: &Report, rate: f64) {
    let mb = report.multi_backend();
    let held: Vec<(String, bool)> = report
        .runs
        .iter()
        .map(|run| {
            let label = run.label(mb);
            let ok = verdict
                .checks
                .iter()
                .filter(|c| {
                    c.run == label
                        && c.limit.metric != Metric::CapacityRps
                        && c.limit.metric != Metric::SendLagP99Ms
                })
                .all(|c| matches!(c.status, Status::Passed | Status::NotRequired(_)));
            (label, ok)
        })
        .collect();
    for c in verdict
        .checks
        .iter_mut()
        .filter(|c| c.limit.metric == Metric::CapacityRps)
    {
        let Some((_, ok)) = held.iter().find(|(l, _)| *l == c.run) else {
            continue;
        };
        let run = report.runs.iter().find(|r| r.label(mb) == c.run);
        c.source = Metric::CapacityRps.source();
        (c.measured, c.status) = if *ok {
            (Some(rate), Status::Passed)
        } else if let Some(why) = run.and_then(generator_limit) {
            (
                None,
                Status::NotVerified(format!(
                    "the objective broke at {rate} buyers/s while the generator was the limit \
                     ({why}): not held against the shop"
                )),
            )
        } else {
            (None, Status::Breached)
        };
    }
}
