//! `report.md`: the headline table (the post-mortem's four metrics first), the oracle's
//! verdicts, and the details per run.

use super::details;
use super::markup::{md_cell, md_text};
use super::repeats;
use super::table::{Column, HEADLINE};
use super::{Report, RunReport};
use crate::metric::Metric;
use std::fmt::Write;

/// The headline table alone (also used for `$GITHUB_STEP_SUMMARY`).
pub fn headline(r: &Report) -> String {
    let mb = r.multi_backend();
    let mut s = String::new();
    let headers: Vec<&str> = HEADLINE.iter().map(|c| c.header()).collect();
    let _ = writeln!(s, "| strategy | {} |", headers.join(" | "));
    let _ = writeln!(s, "|---|{}", "---:|".repeat(HEADLINE.len()));
    for (_, runs) in repeats::groups(r) {
        let cells: Vec<String> = HEADLINE
            .iter()
            .map(|c| match c {
                Column::Metric(Metric::Oversell) => {
                    format!("**{}**", md_cell(&super::table::repeats_cell(*c, &runs)))
                }
                _ => md_cell(&super::table::repeats_cell(*c, &runs)),
            })
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} |",
            md_cell(&repeats::row_label(&runs, mb)),
            cells.join(" | ")
        );
    }
    if repeats::repeated(r) {
        let _ = writeln!(s, "\n{}", repeats::NOTE);
    }
    if let Some(legend) = super::bound_legend(r) {
        let _ = writeln!(s, "\n{legend}");
    }
    s
}

fn details(s: &mut String, run: &RunReport, mb: bool) {
    let _ = writeln!(s, "\n### {}\n", run.run_label(mb));
    let _ = writeln!(s, "**Verdict:** {}\n", md_text(&run.findings.verdict));
    for p in &run.findings.proofs {
        s.push_str(&super::proofs::markdown(p));
    }
    for fact in details::facts(run) {
        let _ = writeln!(s, "- {fact}");
    }
    let _ = writeln!(s, "\n| {} |", details::REQUEST_HEADER.join(" | "));
    let _ = writeln!(s, "|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for row in details::requests(run) {
        let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    let _ = writeln!(s, "\n{}\n", details::TIMING_INTRO);
    let _ = writeln!(s, "| {} |", details::TIMING_HEADER.join(" | "));
    let _ = writeln!(
        s,
        "|---|{}",
        "---:|".repeat(details::TIMING_HEADER.len() - 1)
    );
    for row in details::timing(run) {
        let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    let goose = details::goose(run);
    if !goose.is_empty() {
        let _ = writeln!(s, "\n{}", details::GOOSE_INTRO);
        for g in goose {
            let _ = writeln!(s, "- {}", md_text(&g));
        }
    }
}

/// The whole `report.md`.
pub fn render(r: &Report) -> String {
    let mb = r.multi_backend();
    let mut s = String::new();
    let _ = writeln!(s, "# oversell report: {}\n", r.scenario.name);
    let _ = writeln!(
        s,
        "{} buyers, {} units, purchase limit {} — scenario `{}`, generated {} by oversell {} on {} cores.\n",
        r.scenario.buyers, r.scenario.spec.item.stock, r.scenario.spec.item.purchase_limit, r.scenario.file, r.generated_at, r.tool_version, r.machine.cores
    );
    if !r.scenario.description.is_empty() {
        let _ = writeln!(s, "> {}\n", md_text(r.scenario.description.trim()));
    }
    s.push_str(&headline(r));
    if let Some((header, rows)) = super::faults::table(r) {
        let _ = writeln!(s, "\n## What each design lost under faults\n");
        let cells = |row: &[String]| row.iter().map(|c| md_cell(c)).collect::<Vec<_>>();
        let _ = writeln!(s, "| {} |", cells(&header).join(" | "));
        let _ = writeln!(s, "|---|{}", "---:|".repeat(header.len() - 1));
        for row in &rows {
            let _ = writeln!(s, "| {} |", cells(row).join(" | "));
        }
        let _ = writeln!(s, "\n{}", super::faults::NOTE);
    }
    s.push_str(&super::law::markdown(&r.law));
    let _ = writeln!(s, "\n## Verdicts\n");
    for run in &r.runs {
        let _ = writeln!(
            s,
            "- **{}**: {}",
            run.run_label(mb),
            md_text(&run.findings.verdict)
        );
    }
    let failures = details::failures(r);
    if !failures.is_empty() {
        let _ = writeln!(s, "\n## Runs that did not finish\n");
        for f in failures {
            let _ = writeln!(s, "- **{}**", md_text(&f));
        }
    }
    let _ = writeln!(s, "\n## Details");
    for run in &r.runs {
        details(&mut s, run, mb);
    }
    let _ = writeln!(s, "\n## Metadata\n");
    for (k, v) in details::metadata(r) {
        let _ = writeln!(s, "- {k}: `{}`", v.replace('`', "'"));
    }
    let _ = writeln!(s, "\n## Where the figures come from\n");
    for (k, v) in &r.sources {
        let _ = writeln!(s, "- **{k}**: {}", md_text(v));
    }
    s
}
