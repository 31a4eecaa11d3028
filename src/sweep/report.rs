//! The sweep's files: `sweep.json` (`oversell.sweep/v1`), `report.md`, `report.html`, one
//! chart per headline metric against the knob, and the terminal table.

use super::SweepPlan;
use crate::inventory::Strategy;
use crate::metric::Metric;
use crate::report::charts::line::{line_chart, Chart, Line};
use crate::report::charts::strategy_colour;
use crate::report::markup::md_cell;
use crate::report::table::{text, width, wrap, Align, TERMINAL_WIDTH};
use crate::report::Report;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The schema id of `sweep.json`.
pub const SCHEMA: &str = "oversell.sweep/v1";

/// The headline metrics a sweep tabulates and charts (and the sold-out time beside them).
const HEADLINE: &[Metric] = &[
    Metric::P99Ms,
    Metric::ErrorRate,
    Metric::Throughput,
    Metric::DbQpsPeak,
    Metric::Oversell,
    Metric::LostAcks,
];

/// The name the sold-out time goes by in a sweep (not a catalog metric: no threshold limits it).
const SOLD_OUT: &str = "time_to_sell_out_s";

/// `sweep.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepReport {
    pub schema: String,
    pub generated_at: String,
    pub scenario: String,
    pub scenario_file: String,
    pub strategy: Strategy,
    pub backend: String,
    /// The knob as its flag: `pool-size`, `rate`.
    pub knob: String,
    pub repeat: u32,
    /// `/proc/loadavg` when the sweep started.
    pub load_average: Option<[f64; 3]>,
    pub points: Vec<SweepPoint>,
}

/// One value of the knob: its runs' headline metrics (the median over repeats) and report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepPoint {
    pub value: String,
    /// The value as a number for the charts (its position when it is not one).
    pub x: f64,
    /// Median over the value's runs; `null` when no run measured it. Sources: as the
    /// catalog names them (`report.json` of the value's folder), the sold-out time from the
    /// first sold-out answer.
    pub metrics: BTreeMap<String, Option<f64>>,
    /// Every run's value, in run order.
    pub samples: BTreeMap<String, Vec<Option<f64>>>,
    /// The database counter `db_qps_peak` counts (`transactions/s`, `Questions/s`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_counter: Option<String>,
    pub report: String,
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// A value's place on a chart's x axis: the number, or a duration (`5ms`) in milliseconds.
fn x_of(value: &str) -> Option<f64> {
    let v = value.trim();
    v.parse().ok().or_else(|| {
        crate::duration::parse(v)
            .ok()
            .map(|d| d.as_secs_f64() * 1000.0)
    })
}

/// The x axis of a sweep's charts: the knob, and `(ms)` when its values are durations.
fn x_desc(s: &SweepReport) -> String {
    let durations = s.points.iter().any(|p| {
        p.value.trim().parse::<f64>().is_err() && crate::duration::parse(&p.value).is_ok()
    });
    if durations {
        format!("{} (ms)", s.knob)
    } else {
        s.knob.clone()
    }
}

impl SweepPoint {
    /// The point of `value` (the `index`-th) from its runs' report in `dir`.
    pub fn of(value: &str, index: usize, report: &Report, dir: &Path) -> Self {
        let mut samples: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
        for run in &report.runs {
            for m in HEADLINE {
                samples.entry(m.key()).or_default().push(m.read(run).ok());
            }
            samples
                .entry(SOLD_OUT.into())
                .or_default()
                .push(run.time_to_sell_out_s);
        }
        let metrics = samples
            .iter()
            .map(|(k, v)| {
                let got: Vec<f64> = v.iter().flatten().copied().collect();
                (k.clone(), median(&got))
            })
            .collect();
        SweepPoint {
            value: value.into(),
            x: x_of(value).unwrap_or(index as f64),
            metrics,
            samples,
            db_counter: report
                .runs
                .iter()
                .find_map(|r| Metric::DbQpsPeak.unit_in(r))
                .map(|u| u.counter),
            report: dir.display().to_string(),
        }
    }
}

impl SweepReport {
    /// A sweep of `plan` with no value run yet.
    pub fn new(plan: &SweepPlan) -> Self {
        SweepReport {
            schema: SCHEMA.into(),
            generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            scenario: plan.scenario.name.clone(),
            scenario_file: plan.scenario_file.display().to_string(),
            strategy: plan.cell.strategy,
            backend: plan.cell.backend.as_str().into(),
            knob: plan.vary.knob.flag(),
            repeat: plan.repeat,
            load_average: crate::capacity::report::load_average(),
            points: Vec::new(),
        }
    }
}

fn columns() -> Vec<String> {
    HEADLINE
        .iter()
        .map(|m| m.key())
        .chain([SOLD_OUT.to_string()])
        .collect()
}

fn show(p: &SweepPoint, name: &str) -> String {
    let v = p.metrics.get(name).copied().flatten();
    match (v, Metric::named(name)) {
        (None, _) => "n/a".into(),
        (Some(v), Some(Metric::DbQpsPeak)) => format!(
            "{} {}",
            Metric::DbQpsPeak.number(v),
            p.db_counter.as_deref().unwrap_or("")
        ),
        (Some(v), Some(m)) => m.format(v),
        (Some(v), None) => format!("{v:.2} s"),
    }
}

fn rows(s: &SweepReport) -> (Vec<String>, Vec<Vec<String>>) {
    rows_of(s, &columns())
}

fn rows_of(s: &SweepReport, columns: &[String]) -> (Vec<String>, Vec<Vec<String>>) {
    let mut header = vec![s.knob.clone()];
    header.extend(columns.iter().cloned());
    let rows = s
        .points
        .iter()
        .map(|p| {
            let mut row = vec![p.value.clone()];
            row.extend(columns.iter().map(|c| show(p, c)));
            row
        })
        .collect();
    (header, rows)
}

/// The default terminal table's columns, most important first: as many as fit
/// [`TERMINAL_WIDTH`] are shown.
const NARROW: &[&str] = &[
    "oversell",
    "lost_acks",
    "p99_ms",
    "error_rate",
    "throughput",
    "db_qps_peak",
    SOLD_OUT,
];

/// The terminal table: by default the [`NARROW`] columns that fit [`TERMINAL_WIDTH`]; `wide`,
/// every column (`report.md` has them all).
pub fn render(s: &SweepReport, wide: bool) -> String {
    let table = |columns: &[String]| {
        let (header, rows) = rows_of(s, columns);
        let mut align = vec![Align::Left];
        align.extend(std::iter::repeat_n(Align::Right, header.len() - 1));
        text(&header, &rows, &align)
    };
    let mut body = if wide {
        table(&columns())
    } else {
        let mut shown: Vec<String> = Vec::new();
        for c in NARROW {
            let mut more = shown.clone();
            more.push(c.to_string());
            if shown.is_empty() || width(&table(&more)) <= TERMINAL_WIDTH {
                shown = more;
            }
        }
        table(&shown)
    };
    if !wide && width(&body) < width(&table(&columns())) {
        body.push_str("(more columns: --wide, or the report)\n");
    }
    let heading = format!(
        "sweep of {} on {} ({}), scenario {}{}:",
        s.knob,
        s.strategy,
        s.backend,
        s.scenario,
        if s.repeat > 1 {
            format!(", median of {} runs each", s.repeat)
        } else {
            String::new()
        }
    );
    format!(
        "{}\n{body}",
        if wide {
            heading
        } else {
            wrap(&heading, TERMINAL_WIDTH)
        }
    )
}

fn markdown(s: &SweepReport) -> String {
    let (header, rows) = rows(s);
    let mut md = format!(
        "# Sweep: {} on {}\n\nScenario `{}` ({}), strategy {} on {}, {} run(s) per value (medians).\n\n",
        md_cell(&s.knob),
        md_cell(s.strategy.as_str()),
        md_cell(&s.scenario),
        md_cell(&s.scenario_file),
        md_cell(s.strategy.as_str()),
        md_cell(&s.backend),
        s.repeat
    );
    if let Some([a, b, c]) = s.load_average {
        md.push_str(&format!("Load average at the start: {a} {b} {c}.\n\n"));
    }
    md.push_str(&format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    ));
    for r in rows {
        md.push_str(&format!(
            "| {} |\n",
            r.iter().map(|c| md_cell(c)).collect::<Vec<_>>().join(" | ")
        ));
    }
    md.push_str("\nEach value's runs are a full report (every figure with its source) in:\n\n");
    for p in &s.points {
        md.push_str(&format!(
            "- {} = {}: `{}`\n",
            md_cell(&s.knob),
            md_cell(&p.value),
            md_cell(&p.report)
        ));
    }
    md
}

/// Writes `sweep.json` and `report.md`.
pub fn write_data(dir: &Path, s: &SweepReport) -> anyhow::Result<()> {
    std::fs::write(dir.join("sweep.json"), serde_json::to_string_pretty(s)?)
        .context("writing sweep.json")?;
    std::fs::write(dir.join("report.md"), markdown(s)).context("writing report.md")
}

/// Writes everything: the data, one chart per headline metric, `report.html`.
pub fn write(dir: &Path, s: &SweepReport) -> anyhow::Result<()> {
    write_data(dir, s)?;
    let mut charts = Vec::new();
    for c in columns() {
        let name = format!("sweep-{c}");
        let title = format!("{c} against {}", s.knob);
        let metric = Metric::named(&c);
        // Shares are drawn in percent.
        let scale = match metric.map(|m| m.spec().unit) {
            Some(crate::metric::Unit::Share) => 100.0,
            _ => 1.0,
        };
        let y_desc = match metric {
            Some(m) if scale != 1.0 => format!("{} (%)", m.spec().label),
            Some(m) => m.spec().label.to_string(),
            None => "time to sell out (s)".to_string(),
        };
        let mut points: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|p| {
                p.metrics
                    .get(&c)
                    .copied()
                    .flatten()
                    .map(|v| (p.x, v * scale))
            })
            .collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let line = Line {
            label: format!("{} ({})", s.strategy, s.backend),
            colour: strategy_colour(Some(s.strategy)),
            points,
            mark: None,
        };
        let source = Metric::named(&c)
            .map_or("the first sold-out answer (clients' records)", |m| {
                m.source()
            });
        charts.push(line_chart(
            dir,
            &Chart {
                name: &name,
                title: &title,
                caption: format!("Median over each value's runs. Source: {source}."),
                x_desc: &x_desc(s),
                y_desc: &y_desc,
                log_x: false,
            },
            &[line],
        )?);
    }
    let (header, rows) = rows(s);
    let mut body = String::from("<table><tr>");
    for h in &header {
        body.push_str(&format!("<th>{}</th>", crate::report::markup::escape(h)));
    }
    body.push_str("</tr>");
    for r in rows {
        body.push_str("<tr>");
        for c in r {
            body.push_str(&format!("<td>{}</td>", crate::report::markup::escape(&c)));
        }
        body.push_str("</tr>");
    }
    body.push_str("</table>");
    std::fs::write(
        dir.join("report.html"),
        crate::capacity::report::html(
            &format!("Sweep: {} on {}", s.knob, s.strategy),
            &body,
            &charts,
        ),
    )
    .context("writing report.html")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sweep of `work` over five values with wide figures: a MariaDB counter, four-digit
    /// latencies and rates.
    fn sweep() -> SweepReport {
        let point = |i: usize, value: &str| SweepPoint {
            value: value.into(),
            x: x_of(value).unwrap_or(i as f64),
            metrics: [
                ("p99_ms", Some(12345.678)),
                ("error_rate", Some(0.123456)),
                ("throughput", Some(12345.6)),
                ("db_qps_peak", Some(123456.0)),
                ("oversell", Some(0.0)),
                ("lost_acks", Some(0.0)),
                (SOLD_OUT, Some(123.45)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            samples: BTreeMap::new(),
            db_counter: Some("Questions/s".into()),
            report: format!("runs/{i}"),
        };
        SweepReport {
            schema: SCHEMA.into(),
            generated_at: "2026-12-01T20:00:00Z".into(),
            scenario: "flash-100".into(),
            scenario_file: "scenarios/flash-100.toml".into(),
            strategy: Strategy::RedisBuckets,
            backend: "mysql".into(),
            knob: "optimistic-backoff".into(),
            repeat: 5,
            load_average: None,
            points: ["0s", "1ms", "20ms", "1s 500ms", "10s"]
                .iter()
                .enumerate()
                .map(|(i, v)| point(i, v))
                .collect(),
        }
    }

    #[test]
    fn the_terminal_table_fits_a_hundred_columns() {
        let s = sweep();
        let table = render(&s, false);
        print!("{table}");
        for line in table.lines() {
            assert!(line.chars().count() <= TERMINAL_WIDTH, "{line:?}");
        }
        for c in &NARROW[..4] {
            assert!(table.contains(c), "{c}: {table}");
        }
        assert!(table.contains("--wide"), "{table}");
        let wide = render(&s, true);
        assert!(width(&wide) > TERMINAL_WIDTH, "{wide}");
        for c in columns() {
            assert!(wide.contains(&c), "{c}: {wide}");
        }
    }

    #[test]
    fn duration_values_are_charted_in_milliseconds() {
        let s = sweep();
        let xs: Vec<f64> = s.points.iter().map(|p| p.x).collect();
        assert_eq!(xs, [0.0, 1.0, 20.0, 1500.0, 10000.0]);
        assert_eq!(x_desc(&s), "optimistic-backoff (ms)");
        assert_eq!(x_of("8"), Some(8.0));
    }
}
