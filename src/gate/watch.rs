//! The gate's limits on watched gauges: `watch.<name>.max` against the gauge's peak,
//! `watch.<name>.drained_within_s` against the seconds from its peak back to its baseline.
//! A gauge with no sample is *not verified* with the reason (the last read's failure), never
//! passed nor failed. A gauge that had not drained when the watch stopped fails only once it
//! was watched longer after its peak than the limit allows; before that it is not verified.

use super::{Limit, Origin, Status};
use crate::metric::{Override, Thresholds, WatchFigure, WatchKey};
use crate::report::RunReport;
use crate::watch::gauge::Reading;

/// Where a watched gauge's figure comes from.
pub const SOURCE: &str = "the watched gauge's 1 s samples (report.json runs[].watch)";

/// Where a `drained_within_s` comes from when the gauge never drained.
pub const NOT_DRAINED: &str = "the watched gauge's 1 s samples: it had not drained when the \
    watch stopped; the figure is how long it was watched after its peak";

/// The limits on watched gauges: the flags' over the scenario's.
pub fn limits(scenario: &Thresholds, flags: &[Override], from_scenario: Origin) -> Vec<Limit> {
    let mut keys: Vec<WatchKey> = scenario.watch().keys().cloned().collect();
    for f in flags.iter().filter_map(|f| f.watch.clone()) {
        if !keys.contains(&f) {
            keys.push(f);
        }
    }
    keys.sort();
    keys.into_iter()
        .filter_map(|k| {
            let flag = flags.iter().rev().find(|o| o.watch.as_ref() == Some(&k));
            let (value, origin) = match (flag, scenario.watch().get(&k)) {
                (Some(f), _) => (f.value, Origin::Flag),
                (None, Some(v)) => (*v, from_scenario),
                (None, None) => return None,
            };
            Some(Limit {
                metric: k.figure.metric(),
                value,
                origin,
                gauge: Some(k.gauge),
            })
        })
        .collect()
}

/// One limit on gauge `gauge` checked against `run`: the measured value, its source and the
/// status.
pub fn check(run: &RunReport, l: &Limit, gauge: &str) -> (Option<f64>, &'static str, Status) {
    let Some(g) = run.watch.get(gauge) else {
        let why = if run.watch.is_empty() {
            "the run watched no gauge ([watch])".to_string()
        } else {
            let names: Vec<&str> = run.watch.keys().map(String::as_str).collect();
            format!(
                "the run watched no gauge `{gauge}` (it watched {})",
                names.join(", ")
            )
        };
        return (None, "", Status::NotVerified(why));
    };
    let within = |v: f64| {
        if l.metric.within(v, l.value) {
            Status::Passed
        } else {
            Status::Breached
        }
    };
    let figure = match l.metric {
        crate::metric::Metric::WatchDrainedWithinS => WatchFigure::DrainedWithinS,
        _ => WatchFigure::Max,
    };
    match g.reading(figure, l.value) {
        Reading::Measured(v) => (Some(v), SOURCE, within(v)),
        Reading::NotDrainedPast(s) => (Some(s), NOT_DRAINED, Status::Breached),
        Reading::Unmeasured(why) => (None, "", Status::NotVerified(why)),
    }
}
