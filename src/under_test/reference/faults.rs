//! A run's fault windows, as the report carries them: what the engine applied
//! ([`crate::nemesis::Applied`]) and when the run was back to its pre-fault state.
//!
//! Recovery is the first one-second sample after the fault ended at which every figure the
//! run has is back to its pre-fault value: stream lag and reconciliation residual (the probe's
//! samples of the shop's `/metrics`, redis-lua only) no higher than their last sample before
//! the fault began, and the share of order answers that were indeterminate (timeouts, broken
//! connections, 5xx; the clients' per-second timeline) no higher than before the fault began
//! (+1 point). A second with no order answer counts as recovered for the error rate. The
//! figures used are listed in `recovery_basis`; a skipped fault's basis says why.

use crate::nemesis::Applied;
use crate::report::faults::FaultWindow;
use crate::report::RunReport;
use crate::traffic::recorder::AnswerClass;
use serde_json::{json, Value};

/// The report's windows for the faults of `run`.
pub(super) fn windows(applied: &[Applied], run: &RunReport) -> Vec<FaultWindow> {
    applied.iter().map(|a| window(a, run)).collect()
}

fn window(a: &Applied, run: &RunReport) -> FaultWindow {
    let (Some(began), Some(ended)) = (a.began_ms, a.ended_ms) else {
        return FaultWindow {
            kind: a.kind,
            at_ms: a.at_ms,
            began_ms: a.at_ms,
            ended_ms: a.at_ms,
            recovered_ms: None,
            recovery_basis: json!(a.note.clone().unwrap_or_else(|| "not applied".into())),
        };
    };
    let mut basis: Vec<Value> = Vec::new();
    let mut recovered = Some(ended);
    let mut take = |name: &str, back: Option<u64>| {
        basis.push(json!(match back {
            Some(ms) => format!("{name} back at {:.1} s", ms as f64 / 1000.0),
            None => format!("{name} not back before the run ended"),
        }));
        recovered = match (recovered, back) {
            (Some(r), Some(b)) => Some(r.max(b)),
            _ => None,
        };
    };
    for name in [
        crate::metric::SeriesName::StreamLag.name(),
        crate::metric::SeriesName::ReconcileResidual.name(),
    ] {
        if let Some(back) = series_back(run, name, began, ended) {
            take(name, back);
        }
    }
    take("error_rate", error_rate_back(run, began, ended));
    if let Some(note) = &a.note {
        basis.push(json!(note));
    }
    FaultWindow {
        kind: a.kind,
        at_ms: a.at_ms,
        began_ms: began,
        ended_ms: ended,
        recovered_ms: recovered,
        recovery_basis: Value::Array(basis),
    }
}

/// `None`: the run has no such series; `Some(None)`: never back; `Some(Some(ms))`: back at ms.
fn series_back(run: &RunReport, name: &str, began: u64, ended: u64) -> Option<Option<u64>> {
    let s = run
        .series
        .iter()
        .find(|s| s.name == name && !s.points.is_empty())?;
    let before = s
        .points
        .iter()
        .filter(|p| p.0 * 1000.0 < began as f64)
        .map(|p| p.1.abs())
        .next_back()
        .unwrap_or(0.0);
    Some(
        s.points
            .iter()
            .find(|p| p.0 * 1000.0 >= ended as f64 && p.1.abs() <= before)
            .map(|p| (p.0 * 1000.0).round().max(0.0) as u64),
    )
}

/// The first second starting at or after `ended` whose share of indeterminate order answers
/// is back to the share before `began`.
fn error_rate_back(run: &RunReport, began: u64, ended: u64) -> Option<u64> {
    let t = &run.timeline;
    let per_second = |i: usize| -> (u64, u64) {
        let mut bad = 0;
        let mut all = 0;
        for (answer, counts) in &t.orders {
            let n = counts.get(i).copied().unwrap_or(0);
            all += n;
            if AnswerClass::of(*answer) == AnswerClass::Indeterminate {
                bad += n;
            }
        }
        (bad, all)
    };
    let (mut bad, mut all) = (0, 0);
    for (i, sec) in t.seconds.iter().enumerate() {
        if (sec + 1) * 1000 <= began {
            let (b, a) = per_second(i);
            bad += b;
            all += a;
        }
    }
    let baseline = if all == 0 {
        0.0
    } else {
        bad as f64 / all as f64
    };
    for (i, sec) in t.seconds.iter().enumerate() {
        if sec * 1000 < ended {
            continue;
        }
        let (b, a) = per_second(i);
        if a == 0 || b as f64 / a as f64 <= baseline + 0.01 {
            return Some(sec * 1000);
        }
    }
    // No second starts after the fault: no answer came after it, the clients saw no more of it.
    let last = t.seconds.last().map_or(0, |s| s * 1000);
    (last < ended).then_some(ended)
}

/// How long the probes keep sampling after the last fault ended, so recovery can be seen:
/// two samples.
pub(super) const WATCH_AFTER: std::time::Duration = std::time::Duration::from_millis(2200);

/// When the last applied fault ended, ms after the opening.
pub(super) fn last_end(applied: &[Applied]) -> Option<u64> {
    applied.iter().filter_map(|a| a.ended_ms).max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::FaultKind;
    use crate::probe::Series;
    use crate::report::v1;
    use crate::traffic::recorder::Answer;

    fn run() -> RunReport {
        let r = v1::read(serde_json::from_str(v1::FIXTURE).unwrap());
        let mut run = r.runs[0].clone();
        run.series = vec![Series {
            name: "stream_lag".into(),
            unit: "entries".into(),
            source: "test".into(),
            points: vec![(0.2, 0.0), (1.2, 9.0), (2.2, 9.0), (3.2, 4.0), (4.2, 0.0)],
        }];
        run.timeline.seconds = vec![0, 1, 2, 3, 4];
        run.timeline.orders.clear();
        run.timeline
            .orders
            .insert(Answer::Created, vec![10, 0, 0, 5, 5]);
        run.timeline
            .orders
            .insert(Answer::ServerError, vec![0, 10, 10, 5, 0]);
        run
    }

    fn applied(kind: FaultKind, began: Option<u64>, ended: Option<u64>) -> Applied {
        Applied {
            kind,
            at_ms: 1000,
            began_ms: began,
            ended_ms: ended,
            note: Some("skipped: for-update does not use Redis".into()).filter(|_| began.is_none()),
        }
    }

    #[test]
    fn recovery_is_the_first_sample_after_the_end_with_every_figure_back() {
        let run = run();
        let w = windows(
            &[applied(FaultKind::DbOutage, Some(1000), Some(2500))],
            &run,
        );
        // Lag is back to 0 at 4.2 s; the error rate (0 before) at 4 s.
        assert_eq!(w[0].recovered_ms, Some(4200));
        assert_eq!(w[0].recovery_ms(), Some(1700));
        let basis = w[0].basis_text();
        assert!(basis.contains("stream_lag back at 4.2 s"), "{basis}");
        assert!(basis.contains("error_rate back at 4.0 s"), "{basis}");
    }

    #[test]
    fn a_figure_never_back_means_not_recovered_and_a_skipped_fault_says_why() {
        let mut run = run();
        run.series[0].points.pop();
        let w = windows(
            &[
                applied(FaultKind::DbOutage, Some(1000), Some(2500)),
                applied(FaultKind::RedisRestart, None, None),
            ],
            &run,
        );
        assert_eq!(w[0].recovered_ms, None);
        assert!(w[0].basis_text().contains("stream_lag not back"));
        assert_eq!(w[1].recovery_text(), "skipped");
        assert_eq!((w[1].began_ms, w[1].ended_ms), (1000, 1000));
    }
}
