//! `diff --json`: the comparison as one document for machines, every figure in the metric's
//! unit its key names (`p99_ms`: milliseconds).

use super::{Diff, DiffPlan, LoneCheck, Verdict};
use crate::exit::Exit;
use serde_json::{json, Value};

/// The schema id of `diff --json`.
pub const SCHEMA: &str = "oversell.diff/v1";

/// The verdict's JSON spelling.
fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::Same => "same",
        Verdict::NotComparable => "not_comparable",
        Verdict::New => "new",
    }
}

/// The document: each run's metrics with both figures and the verdict, the runs on one side
/// only (a candidate-only run's checks against the default limits), and `--fail-on`'s verdict.
pub fn document(plan: &DiffPlan, d: &Diff, code: Exit) -> Value {
    let runs: Vec<Value> = d
        .runs
        .iter()
        .map(|r| {
            let metrics: Vec<Value> = r
                .rows
                .iter()
                .map(|row| {
                    json!({
                        "metric": row.metric.key(),
                        "baseline": row.baseline,
                        "candidate": row.candidate,
                        "unit": row.unit,
                        "verdict": word(row.verdict),
                    })
                })
                .collect();
            json!({ "run": r.label, "metrics": metrics })
        })
        .collect();
    let lone: Vec<Value> = d
        .only_in_candidate
        .iter()
        .map(|r| {
            let checks: Vec<Value> = plan
                .fail_on
                .iter()
                .map(|f| {
                    let c = r.check(f.metric);
                    let (value, limit, why) = match &c {
                        LoneCheck::Held { value, limit } | LoneCheck::Broken { value, limit } => {
                            (Some(*value), Some(*limit), None)
                        }
                        LoneCheck::NotVerified(why) => (None, f.metric.default_limit(), Some(why)),
                        LoneCheck::NoLimit => (r.figure(f.metric).ok(), None, None),
                    };
                    json!({
                        "metric": f.metric.key(),
                        "value": value,
                        "default_limit": limit,
                        "status": c.status(),
                        "reason": why,
                    })
                })
                .collect();
            json!({ "run": r.label, "repeats": r.repeats, "checks": checks })
        })
        .collect();
    let fail_on = (!plan.fail_on.is_empty()).then(|| {
        let breaches: Vec<String> = d
            .breaches(&plan.fail_on)
            .iter()
            .map(|b| b.describe(false))
            .collect();
        json!({
            "metrics": plan.fail_on.iter().map(|f| f.metric.key()).collect::<Vec<_>>(),
            "passed": breaches.is_empty(),
            "breaches": breaches,
        })
    });
    json!({
        "schema": SCHEMA,
        "baseline": plan.baseline.display().to_string(),
        "candidate": plan.candidate.display().to_string(),
        "band": d.band,
        "runs": runs,
        "only_in_baseline": d.only_in_baseline,
        "only_in_candidate": lone,
        "fail_on": fail_on,
        "exit_code": code,
    })
}
