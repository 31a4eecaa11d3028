//! The capacity report: `report.json` (schema `oversell.capacity/v1`: per subject its
//! capacity, bracket and every probe), `report.md`, `report.html` with the charts, and the
//! terminal table. A subject whose correctness broke comes first, with the rate it broke at.

use super::search::rate;
use super::{CapacityPlan, Outcome, RATE_UNIT};
use crate::report::markup::{escape, md_cell};
use crate::report::table::{text, width, Align, TERMINAL_WIDTH};
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The schema id of a capacity `report.json`.
pub const SCHEMA: &str = "oversell.capacity/v1";

/// A limit of the objective as the report writes it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LimitRow {
    pub metric: String,
    pub limit: f64,
    /// `default`, `bundled_scenario`, `scenario` or `flag` (`--slo`).
    pub from: String,
}

/// `report.json` of `oversell capacity`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CapacityReport {
    pub schema: String,
    pub generated_at: String,
    pub tool_version: String,
    pub scenario: String,
    pub scenario_file: String,
    /// What a rate counts.
    pub rate_unit: String,
    pub objective: Vec<LimitRow>,
    pub probe_seconds: f64,
    pub precision: f64,
    pub budget_s: f64,
    pub start_rate_rps: f64,
    pub max_rate_rps: f64,
    pub elapsed_s: f64,
    /// `/proc/loadavg` when the command started (1, 5, 15 minutes).
    pub load_average: Option<[f64; 3]>,
    pub outcomes: Vec<Outcome>,
}

impl CapacityReport {
    /// A report of `plan` with no subject searched yet.
    pub fn new(plan: &CapacityPlan) -> Self {
        CapacityReport {
            schema: SCHEMA.into(),
            generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            scenario: plan.scenario.name.clone(),
            scenario_file: plan.scenario_file.display().to_string(),
            rate_unit: RATE_UNIT.into(),
            objective: plan
                .objective
                .limits
                .iter()
                .map(|l| LimitRow {
                    metric: l.metric.key(),
                    limit: l.value,
                    from: match l.origin {
                        crate::gate::Origin::Default => "default",
                        crate::gate::Origin::Bundled => "bundled_scenario",
                        crate::gate::Origin::Scenario => "scenario",
                        crate::gate::Origin::Flag => "--slo",
                    }
                    .into(),
                })
                .collect(),
            probe_seconds: plan.probe_seconds,
            precision: plan.settings.precision,
            budget_s: plan.budget.as_secs_f64(),
            start_rate_rps: plan.settings.start,
            max_rate_rps: plan.settings.max_rate,
            elapsed_s: 0.0,
            load_average: load_average(),
            outcomes: Vec::new(),
        }
    }

    /// The outcomes in report order: those whose correctness broke first.
    pub fn ordered(&self) -> Vec<&Outcome> {
        let mut v: Vec<&Outcome> = self.outcomes.iter().collect();
        v.sort_by_key(|o| o.correctness_broke_at_rps.is_none());
        v
    }
}

/// The machine's load average now (`/proc/loadavg`), when it can be read.
pub fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

fn cell(v: Option<f64>) -> String {
    v.map_or("-".into(), rate)
}

/// The table's rows: subject, capacity, bracket, what broke first, probes used.
fn rows(r: &CapacityReport) -> Vec<Vec<String>> {
    r.ordered()
        .iter()
        .map(|o| {
            vec![
                o.subject.clone(),
                match &o.answer {
                    super::search::Answer::Incorrect { at, .. } => {
                        format!("INCORRECT at {}/s", rate(*at))
                    }
                    super::search::Answer::AtLeast { lo, .. } => {
                        format!("at least {}", cell(*lo))
                    }
                    super::search::Answer::Below { hi } => format!("below {}", rate(*hi)),
                    super::search::Answer::Bracket { lo, .. } => rate(*lo),
                },
                format!("{}–{}", cell(o.bracket[0]), cell(o.bracket[1])),
                o.broke_first.clone().unwrap_or_else(|| "-".into()),
                o.probes_used.to_string(),
            ]
        })
        .collect()
}

const HEADER: [&str; 5] = [
    "subject",
    "capacity (buyers/s)",
    "bracket",
    "broke first",
    "probes",
];

/// The terminal table and each subject's answer in words: by default every line wrapped to
/// [`TERMINAL_WIDTH`]; `wide`, lines as they are.
pub fn render(r: &CapacityReport, wide: bool) -> String {
    let fit = |l: String| crate::report::table::fit(&l, wide);
    let header = HEADER.map(String::from);
    let mut s = fit(format!(
        "capacity: scenario {} ({} s probes, precision {:.0} %), rates in {}",
        r.scenario,
        r.probe_seconds,
        r.precision * 100.0,
        r.rate_unit
    ));
    s.push('\n');
    let align = [
        Align::Left,
        Align::Right,
        Align::Right,
        Align::Left,
        Align::Right,
    ];
    let rows = rows(r);
    let table = text(&header, &rows, &align);
    if wide || width(&table) <= TERMINAL_WIDTH {
        s.push_str(&table);
    } else {
        // A subject too long to share a line: each on its own line, its figures under it.
        let figures: Vec<Vec<String>> = rows.iter().map(|row| row[1..].to_vec()).collect();
        let table = text(&header[1..], &figures, &align[1..]);
        let mut lines = table.lines();
        for l in lines.by_ref().take(2) {
            s.push_str(&format!("  {l}\n"));
        }
        for (row, l) in rows.iter().zip(lines) {
            s.push_str(&fit(row[0].clone()));
            s.push_str(&format!("\n  {l}\n"));
        }
    }
    for o in r.ordered() {
        s.push_str(&fit(format!("{}: {}", o.subject, o.answer.describe())));
        s.push('\n');
    }
    s
}

/// `report.md`.
pub fn markdown(r: &CapacityReport) -> String {
    let mut s = format!(
        "# Capacity: {}\n\nScenario `{}` ({}), probes of {} s on a fresh sale each, precision {:.0} %, budget {:.0} s (used {:.0} s). Rates are {}.\n\n",
        md_cell(&r.scenario),
        md_cell(&r.scenario),
        md_cell(&r.scenario_file),
        r.probe_seconds,
        r.precision * 100.0,
        r.budget_s,
        r.elapsed_s,
        r.rate_unit
    );
    if let Some([a, b, c]) = r.load_average {
        s.push_str(&format!("Load average at the start: {a} {b} {c}.\n\n"));
    }
    let set: Vec<String> = r
        .objective
        .iter()
        .filter(|l| l.from != "default")
        .map(|l| format!("`{} <= {}` ({})", l.metric, l.limit, l.from))
        .collect();
    s.push_str(&format!(
        "Objective: {}, and the catalog's default limits ({} in all, every one in `report.json`); \
         oversell or lost acknowledged orders at any rate end a search.\n\n",
        if set.is_empty() {
            "no limit of its own".to_string()
        } else {
            set.join(", ")
        },
        r.objective.len()
    ));
    s.push_str(&format!(
        "| {} |\n|---|---:|---:|---|---:|\n",
        HEADER.join(" | ")
    ));
    for row in rows(r) {
        let cells: Vec<String> = row.iter().map(|c| md_cell(c)).collect();
        s.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    s.push('\n');
    for o in r.ordered() {
        s.push_str(&format!(
            "## {}\n\n{}\n\n| rate | buyers | stock | judged | p99 ms | error rate | sold out s | report |\n|---:|---:|---:|---|---:|---:|---:|---|\n",
            md_cell(&o.subject),
            md_cell(&o.answer.describe())
        ));
        for p in &o.probes {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | `{}` |\n",
                rate(p.rate_rps),
                p.buyers,
                p.stock,
                md_cell(&super::judged_line(&p.judged)),
                p.p99_ms.map_or("-".into(), |v| format!("{v:.1}")),
                p.error_rate
                    .map_or("-".into(), |v| format!("{:.2} %", v * 100.0)),
                p.sold_out_s.map_or("-".into(), |v| format!("{v:.2}")),
                md_cell(&p.report)
            ));
        }
        s.push('\n');
    }
    s.push_str("Sources: p99 from each probe's order-latency HdrHistogram (from the intended send); error rate from the clients' records of first order attempts; sold-out time from the first sold-out answer; oversell and lost acknowledged orders from the oracle and the clients' records. Each probe's own report (under `probes/`) names every figure's source.\n");
    s
}

/// Writes `report.json` and `report.md` into `dir`.
pub fn write_data(dir: &Path, r: &CapacityReport) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join("report.json"), serde_json::to_string_pretty(r)?)
        .context("writing report.json")?;
    std::fs::write(dir.join("report.md"), markdown(r)).context("writing report.md")
}

pub(super) fn markdown_table_html(r: &CapacityReport) -> String {
    let mut s = String::from("<table><tr>");
    for h in HEADER {
        s.push_str(&format!("<th>{}</th>", escape(h)));
    }
    s.push_str("</tr>");
    for row in rows(r) {
        s.push_str("<tr>");
        for c in row {
            s.push_str(&format!("<td>{}</td>", escape(&c)));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
    for o in r.ordered() {
        s.push_str(&format!(
            "<p><b>{}</b>: {}</p>",
            escape(&o.subject),
            escape(&o.answer.describe())
        ));
    }
    s.push_str(&format!("<p>Rates are {}.</p>", escape(&r.rate_unit)));
    s
}

/// A page: title, a body of HTML, and the charts inlined (SVG) with their captions.
pub fn html(title: &str, body: &str, charts: &[crate::report::charts::Rendered]) -> String {
    let mut s = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title><style>body{{font-family:sans-serif;max-width:1240px;margin:auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px}}</style></head><body><h1>{t}</h1>{body}",
        t = escape(title)
    );
    for c in charts {
        s.push_str(&format!(
            "<h2>{}</h2>{}<p>{}</p>",
            escape(&c.title),
            c.svg,
            escape(&c.caption)
        ));
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real capacity report (for-update and naive on PostgreSQL, its probes trimmed to two
    /// and their figures dropped), and subjects with the longest labels and answers.
    fn long_report() -> CapacityReport {
        let mut v: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/fixtures/capacity-v1.json")).unwrap();
        let one = v["outcomes"][0].clone();
        let outcomes = v["outcomes"].as_array_mut().unwrap();
        for (subject, answer) in [
            (
                "redis-buckets/mysql",
                serde_json::json!({"kind": "incorrect", "at": 12_800.0,
                    "metric": "client_duplicate_devices", "held": 9_600.0}),
            ),
            (
                "http://127.0.0.1:18080/api/v1/flash-sales/orders",
                serde_json::json!({"kind": "below", "hi": 5.0}),
            ),
        ] {
            let mut o = one.clone();
            o["subject"] = subject.into();
            o["answer"] = answer;
            o["broke_first"] = "client_duplicate_devices 1234567".into();
            outcomes.push(o);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_terminal_capacity_fits_a_hundred_columns_and_wide_keeps_lines_whole() {
        let r = long_report();
        let narrow = render(&r, false);
        for line in narrow.lines() {
            assert!(line.chars().count() <= TERMINAL_WIDTH, "{line:?}\n{narrow}");
        }
        for subject in ["for-update/postgres", "redis-buckets/mysql", "/api/v1/"] {
            assert!(narrow.contains(subject), "{subject}: {narrow}");
        }
        let wide = render(&r, true);
        assert!(
            wide.lines().any(|l| l.chars().count() > TERMINAL_WIDTH),
            "--wide does not wrap: {wide}"
        );
    }
}
