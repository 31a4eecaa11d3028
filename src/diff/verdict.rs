//! `--fail-on`'s one verdict: every way the candidate breaks it ([`Breach`]), and the lines
//! both renderers print for it (Markdown, `md`, or plain text): the runs on one side only, and
//! PASS or FAIL with what broke it. A PASS line is printed only when nothing did.

use super::{Diff, DiffPlan, FailOn, LoneCheck, Verdict};
use crate::metric::Metric;

/// One way the candidate breaks `--fail-on`.
#[derive(Debug, Clone, PartialEq)]
pub enum Breach<'a> {
    /// A run in both reports got worse on a `--fail-on` metric.
    Worse { run: &'a str, given: &'a str },
    /// A run only the candidate has broke a `--fail-on` metric's default limit, or could not
    /// measure it.
    Lone {
        run: &'a str,
        given: &'a str,
        metric: Metric,
        check: LoneCheck,
    },
    /// A run only the baseline has: nothing shows it did not get worse.
    Missing { run: &'a str },
}

impl Breach<'_> {
    /// The breach in a list item: `naive/postgres oversell`, metric names quoted in Markdown.
    pub fn describe(&self, md: bool) -> String {
        let q = |n: &str| if md { format!("`{n}`") } else { n.to_string() };
        match self {
            Breach::Worse { run, given } => format!("{run} {}", q(given)),
            Breach::Lone {
                run,
                given,
                metric,
                check,
            } => format!(
                "{run} {} (only in the candidate: {})",
                q(given),
                check.describe(*metric)
            ),
            Breach::Missing { run } => {
                format!("{run} (only in the baseline: the candidate has no such run)")
            }
        }
    }
}

impl Diff {
    /// Every breach of `fail_on` (none without `--fail-on`): metrics worse in a run of both
    /// reports, a run only in the candidate beyond a default limit, a run only in the baseline.
    pub fn breaches<'a>(&'a self, fail_on: &'a [FailOn]) -> Vec<Breach<'a>> {
        if fail_on.is_empty() {
            return Vec::new();
        }
        let worse = self.runs.iter().flat_map(|r| {
            r.rows
                .iter()
                .filter(|row| row.verdict == Verdict::Worse)
                .filter_map(move |row| {
                    let f = fail_on.iter().find(|f| f.metric == row.metric)?;
                    Some(Breach::Worse {
                        run: &r.label,
                        given: &f.given,
                    })
                })
        });
        let lone = self.only_in_candidate.iter().flat_map(|r| {
            fail_on.iter().filter_map(move |f| {
                let check = r.check(f.metric);
                check.fails().then_some(Breach::Lone {
                    run: &r.label,
                    given: &f.given,
                    metric: f.metric,
                    check,
                })
            })
        });
        let missing = self
            .only_in_baseline
            .iter()
            .map(|run| Breach::Missing { run });
        worse.chain(lone).chain(missing).collect()
    }
}

/// The lines on runs only one report has: listed as not compared, and with `--fail-on` what
/// that means for each (a candidate-only run's checks against the default limits).
pub fn one_sided(plan: &DiffPlan, d: &Diff, md: bool) -> Vec<String> {
    let gated = !plan.fail_on.is_empty();
    let mut lines = Vec::new();
    if !d.only_in_baseline.is_empty() {
        lines.push(format!(
            "Runs only in the baseline (not compared{}): {}.",
            if gated {
                "; each fails --fail-on, since the candidate cannot show it did not get worse"
            } else {
                ""
            },
            d.only_in_baseline.join(", ")
        ));
    }
    if d.only_in_candidate.is_empty() {
        return lines;
    }
    let labels: Vec<&str> = d
        .only_in_candidate
        .iter()
        .map(|r| r.label.as_str())
        .collect();
    if !gated {
        lines.push(format!(
            "Runs only in the candidate (not compared): {}.",
            labels.join(", ")
        ));
        return lines;
    }
    lines.push(format!(
        "Runs only in the candidate (no baseline to compare with: each judged on its own \
         figures, the worst of its repeats, against each --fail-on metric's default limit): {}.",
        labels.join(", ")
    ));
    for r in &d.only_in_candidate {
        let checks: Vec<String> = plan
            .fail_on
            .iter()
            .map(|f| {
                let c = r.check(f.metric);
                let name = if md {
                    format!("`{}`", f.given)
                } else {
                    f.given.clone()
                };
                let word = match (&c, md) {
                    (c, true) if c.fails() => " — **FAIL**",
                    (c, false) if c.fails() => " — FAIL",
                    _ => "",
                };
                format!("{name} {}{word}", c.describe(f.metric))
            })
            .collect();
        let bullet = if md { "- " } else { "  " };
        lines.push(format!("{bullet}{}: {}", r.label, checks.join("; ")));
    }
    lines
}

/// `PASS on --fail-on …` when nothing breaks it, else `FAIL on --fail-on …:` and every
/// breach; nothing without `--fail-on`.
pub fn fail_on_line(plan: &DiffPlan, d: &Diff, md: bool) -> Option<String> {
    if plan.fail_on.is_empty() {
        return None;
    }
    let names: Vec<&str> = plan.fail_on.iter().map(|f| f.given.as_str()).collect();
    let breaches = d.breaches(&plan.fail_on);
    let (pass, fail) = if md {
        ("**PASS**", "**FAIL**")
    } else {
        ("PASS", "FAIL")
    };
    Some(if breaches.is_empty() {
        format!("{pass} on --fail-on {}.", names.join(","))
    } else {
        let list: Vec<String> = breaches.iter().map(|b| b.describe(md)).collect();
        format!(
            "{fail} on --fail-on {}: {}.",
            names.join(","),
            list.join("; ")
        )
    })
}
