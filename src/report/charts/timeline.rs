//! One figure per run: stacked panels on a time axis shared by every run of the report
//! (orders/s by outcome, DB QPS, Redis ops/s, remaining stock, and redis-lua's pre-deduct
//! success rate, restocks and reconciliation residual when the shop reported them), then,
//! when the run watched gauges, the order latency p99 per second and one panel per gauge
//! ([`super::watch`]).

use super::{fmt_num, legend, series_line, DrawResult, Line, RunData, FONT};
use crate::metric::SeriesName;
use crate::report::catalog::DbRate;
use crate::report::RunReport;
use crate::traffic::recorder::Answer;
use plotters::coord::Shift;
use plotters::prelude::*;

const PANEL_HEIGHT: u32 = 230;
const TITLE_HEIGHT: u32 = 50;

/// The order answers drawn, each with its own colour (errors summed).
const OUTCOMES: [(&str, RGBColor); 5] = [
    ("created", RGBColor(0x1b, 0x9e, 0x77)),
    ("sold_out", RGBColor(0x75, 0x70, 0xb3)),
    ("duplicate", RGBColor(0xe7, 0x29, 0x8a)),
    ("rate_limited", RGBColor(0xa6, 0x76, 0x1d)),
    ("busy/errors", RGBColor(0x00, 0x00, 0x00)),
];

/// A panel: its title, y-axis description and the series it needs.
struct Panel {
    title: &'static str,
    y_desc: &'static str,
    /// Series names (from the probes) drawn in it; empty for the orders panel.
    series: &'static [&'static str],
}

const PANELS: [Panel; 7] = [
    Panel {
        title: "Order answers per second, by outcome",
        y_desc: "orders/s",
        series: &[],
    },
    Panel {
        title: "DB QPS",
        y_desc: "DB QPS",
        series: &[SeriesName::DbQps.name()],
    },
    Panel {
        title: "Redis commands per second",
        y_desc: "Redis ops/s",
        series: &[SeriesName::RedisOps.name()],
    },
    Panel {
        title: "Remaining stock",
        y_desc: "units",
        series: &[SeriesName::DbStock.name(), SeriesName::RedisStock.name()],
    },
    Panel {
        title: "Redis pre-deduct success rate",
        y_desc: "success (%)",
        series: &[SeriesName::PredeductSuccessRate.name()],
    },
    Panel {
        title: "Restocks per second",
        y_desc: "restocks/s",
        series: &[SeriesName::Restocks.name()],
    },
    Panel {
        title: "Reconciliation residual (Redis − expected)",
        y_desc: "units",
        series: &[SeriesName::ReconcileResidual.name()],
    },
];

/// Series every run draws when sampled; the others only when they moved (or on a strategy
/// that reconciles, redis-lua, where a flat zero is itself the news: no restocks, no
/// residual).
const ALWAYS: [&str; 4] = [
    SeriesName::DbQps.name(),
    SeriesName::RedisOps.name(),
    SeriesName::DbStock.name(),
    SeriesName::RedisStock.name(),
];

fn has(run: &RunReport, name: &str) -> bool {
    run.series.iter().any(|s| {
        s.name == name
            && !s.points.is_empty()
            && (ALWAYS.contains(&name) || reconciles(run) || s.points.iter().any(|p| p.1 != 0.0))
    })
}

/// Whether the run's strategy reconciles Redis against the database
/// ([`crate::inventory::Strategy::reconciles`]).
fn reconciles(run: &RunReport) -> bool {
    run.shop.strategy.is_some_and(|s| s.reconciles())
}

fn panels(run: &RunReport) -> Vec<&'static Panel> {
    PANELS
        .iter()
        .filter(|p| p.series.is_empty() || p.series.iter().any(|s| has(run, s)))
        .collect()
}

/// Pixel height of a run's timeline figure.
pub fn height(run: &RunReport) -> u32 {
    let n = panels(run).len() + super::watch::panels(run).len();
    TITLE_HEIGHT + PANEL_HEIGHT * n as u32
}

/// The figure caption: the run's verdict, which series it draws and where each came from.
pub fn caption(run: &RunReport) -> String {
    let mut parts =
        vec!["Orders/s: the simulated clients' records, per second of answer".to_string()];
    for p in panels(run) {
        for name in p.series {
            if let Some(s) = run.series.iter().find(|s| s.name == *name) {
                parts.push(format!("{} ({}): {}", s.name, s.unit, s.source));
            }
        }
    }
    parts.extend(super::watch::caption(run));
    let faults: Vec<String> = run
        .faults
        .iter()
        .filter(|f| f.ended_ms > f.began_ms)
        .map(|f| {
            format!(
                "{} {:.1}–{:.1} s",
                f.kind,
                f.began_ms as f64 / 1000.0,
                f.ended_ms as f64 / 1000.0
            )
        })
        .collect();
    let shaded = if faults.is_empty() {
        String::new()
    } else {
        format!(" Shaded: fault windows ({}).", faults.join(", "))
    };
    format!(
        "Verdict: {}. Time axis shared by every run of the report. Sources — {}.{shaded}",
        run.findings.verdict.trim_end_matches('.'),
        parts.join("; ")
    )
}

/// `(first, last)` second of the time axis shared by every run.
pub fn time_range(runs: &[RunData<'_>]) -> (f64, f64) {
    let mut lo = 0.0f64;
    let mut hi = 1.0f64;
    for r in runs {
        hi = hi.max(r.run.timeline.seconds.len() as f64);
        let watched = r.run.watch.values().map(|g| &g.series);
        for points in r.run.series.iter().map(|s| &s.points).chain(watched) {
            for (t, _) in points {
                lo = lo.min(t.floor());
                hi = hi.max(t.ceil());
            }
        }
    }
    (lo, hi)
}

/// The orders panel's lines: orders per second by outcome, at the middle of each second.
pub fn outcome_lines(run: &RunReport) -> Vec<Line> {
    let n = run.timeline.seconds.len();
    let per_second = |pick: &dyn Fn(Answer) -> bool| -> Vec<(f64, f64)> {
        (0..n)
            .map(|i| {
                let v: u64 = run
                    .timeline
                    .orders
                    .iter()
                    .filter(|(a, _)| pick(**a))
                    .map(|(_, v)| v.get(i).copied().unwrap_or(0))
                    .sum();
                (i as f64 + 0.5, v as f64)
            })
            .collect()
    };
    OUTCOMES
        .iter()
        .map(|(name, colour)| {
            let pts = if *name == "busy/errors" {
                per_second(&|a: Answer| a.is_error())
            } else {
                per_second(&|a: Answer| a.as_str() == *name)
            };
            Line {
                name: name.to_string(),
                colour: *colour,
                dashed: false,
                points: pts,
            }
        })
        .collect()
}

fn series_colour(run: &RunData<'_>, name: &str) -> (RGBColor, bool) {
    match SeriesName::named(name) {
        Some(SeriesName::DbStock) => (RGBColor(0x33, 0x33, 0x33), false),
        Some(SeriesName::RedisStock) => (RGBColor(0x94, 0x67, 0xbd), true),
        _ => (run.colour, run.dashed),
    }
}

/// A panel's title, y-axis description, and whether it is the last (the x axis is named there).
pub(super) struct PanelText<'a> {
    pub title: &'a str,
    pub y_desc: &'a str,
    pub last: bool,
}

/// Draws one panel of a run's timeline: its mesh, the run's fault windows shaded, its lines
/// and their legend.
pub(super) fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    run: &RunReport,
    text: PanelText<'_>,
    (x0, x1): (f64, f64),
    lines: Vec<Line>,
) -> DrawResult<DB> {
    let ys = lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
    let (ymin, ymax) = ys.fold((0.0f64, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
    let ymax = if ymax <= 0.0 { 1.0 } else { ymax * 1.15 };
    let ymin = if ymin < 0.0 { ymin * 1.15 } else { 0.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(text.title, (FONT, 18))
        .margin_left(16)
        .margin_right(24)
        .margin_top(6)
        .margin_bottom(4)
        .x_label_area_size(if text.last { 50 } else { 28 })
        .y_label_area_size(80)
        .build_cartesian_2d(x0..x1, ymin..ymax)?;
    let mut mesh = chart.configure_mesh();
    mesh.y_desc(text.y_desc)
        .x_labels(16)
        .y_labels(5)
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15));
    if text.last {
        mesh.x_desc("seconds after the sale opened");
    }
    mesh.draw()?;
    // Each fault's window, shaded (applied faults only: a skipped one has no window).
    for f in run.faults.iter().filter(|f| f.ended_ms > f.began_ms) {
        let (a, b) = (f.began_ms as f64 / 1000.0, f.ended_ms as f64 / 1000.0);
        chart.draw_series(std::iter::once(Rectangle::new(
            [(a, ymin), (b.max(a + 0.05), ymax)],
            RGBColor(220, 50, 47).mix(0.12).filled(),
        )))?;
    }
    for l in lines {
        series_line(
            &mut chart,
            l.points,
            l.colour.stroke_width(2),
            l.dashed,
            &l.name,
        )?;
    }
    legend(&mut chart, SeriesLabelPosition::UpperRight)
}

/// Draws the timeline of `runs[index]`.
pub fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
    index: usize,
) -> DrawResult<DB> {
    let r = &runs[index];
    let (x0, x1) = time_range(runs);
    // A short title; the verdict is in the figure's caption ([`caption`]).
    let root = root.titled(&format!("Timeline: {}", r.label), (FONT, 22))?;
    let ps = panels(r.run);
    let watched = super::watch::panels(r.run);
    let total = ps.len() + watched.len();
    let areas = root.split_evenly((total, 1));
    for (k, (p, area)) in ps.iter().zip(areas.iter()).enumerate() {
        let mut lines = if p.series.is_empty() {
            outcome_lines(r.run)
        } else {
            Vec::new()
        };
        for name in p.series {
            if let Some(s) = r.run.series.iter().find(|s| s.name == *name) {
                let scale = if *name == SeriesName::PredeductSuccessRate.name() {
                    100.0
                } else {
                    1.0
                };
                let (colour, dashed) = series_colour(r, name);
                lines.push(Line {
                    name: name.to_string(),
                    colour,
                    dashed,
                    points: s.points.iter().map(|(t, v)| (*t, v * scale)).collect(),
                });
            }
        }
        // A database rate is labelled with the counter it is (transactions/s, Questions/s).
        let rate = p
            .series
            .first()
            .filter(|n| **n == SeriesName::DbQps.name())
            .and_then(|n| r.run.series.iter().find(|s| s.name == *n))
            .map(|s| DbRate::new(&s.unit, &s.source));
        let (title, y_desc) = match &rate {
            Some(rate) => (
                format!("{} ({})", p.title, rate.label()),
                rate.counter.as_str(),
            ),
            None => (p.title.to_string(), p.y_desc),
        };
        let panel = PanelText {
            title: &title,
            y_desc,
            last: k + 1 == total,
        };
        draw_panel(area, r.run, panel, (x0, x1), lines)?;
    }
    for (k, (w, area)) in watched.iter().zip(areas.iter().skip(ps.len())).enumerate() {
        let panel = PanelText {
            title: &w.title,
            y_desc: w.y_desc,
            last: ps.len() + k + 1 == total,
        };
        draw_panel(area, r.run, panel, (x0, x1), w.lines(r.colour))?;
    }
    Ok(())
}
