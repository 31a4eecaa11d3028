//! `diff` on a terminal: the comparison in [`TERMINAL_WIDTH`] columns, one table per run with
//! each metric by its name, then the notes (runs on one side only, what is worse, `--fail-on`). The Markdown ([`super::render`], each metric's long label) is what a
//! pipe, `--markdown FILE` and `--wide` get.

use super::{change, describe, Diff, DiffPlan, RunDiff, Verdict};
use crate::report::table::{text, width, wrap, Align, TERMINAL_WIDTH};
use crate::report::Report;
use std::fmt::Write as _;

/// The comparison for a terminal; a `--repeat` side shows its median and min–max where that
/// fits, else its median alone (the Markdown has both).
pub fn render(plan: &DiffPlan, baseline: &Report, candidate: &Report, d: &Diff) -> String {
    let mut s = heading(plan, baseline, candidate, d);
    let mut medians_only = false;
    for r in &d.runs {
        let mut t = run_table(r, true);
        if width(&t) > TERMINAL_WIDTH {
            t = run_table(r, false);
            medians_only |= r.rows.iter().any(|x| x.spreads.is_some());
        }
        let _ = writeln!(s, "\n{}", r.label);
        s.push_str(&t);
    }
    s.push('\n');
    for n in notes(plan, d, medians_only) {
        let _ = writeln!(s, "{}", wrap(&n, TERMINAL_WIDTH));
    }
    s
}

/// The lines above the tables: both sides, the noise band, and a warning when the scenarios
/// differ; each wrapped to the terminal.
fn heading(plan: &DiffPlan, baseline: &Report, candidate: &Report, d: &Diff) -> String {
    let mut lines = vec![
        format!(
            "oversell diff: baseline {}",
            describe(baseline, &plan.baseline)
        ),
        format!("  candidate {}", describe(candidate, &plan.candidate)),
        format!(
            "  noise band ±{:.1} % of the baseline; the oracle's counts compare exactly",
            d.band * 100.0
        ),
    ];
    if baseline.scenario.name != candidate.scenario.name {
        lines.push(format!(
            "  warning: the scenarios differ ({} vs {}): the figures may not be comparable",
            baseline.scenario.name, candidate.scenario.name
        ));
    }
    lines
        .iter()
        .map(|l| wrap(l, TERMINAL_WIDTH) + "\n")
        .collect()
}

/// One run's table, each metric by its name; `spreads` shows a `--repeat` side's min–max.
fn run_table(r: &RunDiff, spreads: bool) -> String {
    let header = [
        "metric",
        "baseline",
        "candidate",
        "change",
        "relative",
        "verdict",
    ]
    .map(String::from);
    let mut align = vec![Align::Right; header.len()];
    (align[0], align[5]) = (Align::Left, Align::Left);
    let rows: Vec<Vec<String>> = r
        .rows
        .iter()
        .map(|row| {
            let (bs, cs) = match (&row.spreads, spreads) {
                (Some((b, c)), true) => (b.as_ref(), c.as_ref()),
                _ => (None, None),
            };
            let (abs, rel) = change(row);
            vec![
                row.metric.name().to_string(),
                row.side(row.baseline, bs),
                row.side(row.candidate, cs),
                abs,
                rel,
                word(row.verdict).to_string(),
            ]
        })
        .collect();
    text(&header, &rows, &align)
}

/// The notes under the tables: spreads, runs on one side only, what is worse, `--fail-on`.
fn notes(plan: &DiffPlan, d: &Diff, medians_only: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if d.runs
        .iter()
        .any(|r| r.rows.iter().any(|x| x.spreads.is_some()))
    {
        notes.push(super::spread::NOTE.to_string());
    }
    if medians_only {
        notes.push("(medians only where min–max did not fit: --wide, or --markdown FILE)".into());
    }
    notes.extend(super::verdict::one_sided(plan, d, false));
    let worse = d.worse(str::to_string);
    notes.push(if worse.is_empty() {
        "No metric is worse beyond the band.".to_string()
    } else {
        format!("Worse: {}.", worse.join("; "))
    });
    notes.extend(super::verdict::fail_on_line(plan, d, false));
    notes
}

/// A verdict in plain text (`WORSE` stands out without Markdown's bold).
fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Worse => "WORSE",
        v => v.as_str(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::v1;

    /// Every strategy on both backends, each repeated three times.
    fn big(oversold: i64) -> Report {
        v1::every_strategy(3, |run, repeat| {
            run.findings.oversell = Some(oversold + repeat)
        })
    }

    #[test]
    fn the_terminal_diff_fits_a_hundred_columns() {
        let (base, cand) = (big(0), big(7));
        let d = super::super::compare(&base, &cand, 0.05);
        let runs = 2 * crate::inventory::Strategy::all().len();
        assert_eq!(d.runs.len(), runs, "{:?}", d.only_in_baseline);
        let plan = DiffPlan::new(
            "reports/20261130T073444Z-flash-100/report.json".into(),
            "reports/20261201T090000Z-flash-100/report.json".into(),
            5.0,
            &["oversell".into(), "p99_ms".into()],
            None,
        )
        .unwrap();
        let t = render(&plan, &base, &cand, &d);
        print!("{t}");
        for line in t.lines() {
            assert!(line.chars().count() <= TERMINAL_WIDTH, "{line:?}");
        }
        assert!(t.lines().any(|l| l == "redis-buckets/mysql"), "{t}");
        assert!(
            t.contains("WORSE") && t.contains("FAIL on --fail-on oversell,p99_ms"),
            "{t}"
        );
        let md = super::super::render(&plan, &base, &cand, &d);
        assert!(
            width(&md) > TERMINAL_WIDTH,
            "the Markdown keeps the long labels"
        );
    }
}
