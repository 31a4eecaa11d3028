//! Bar charts, one bar per run in its strategy colour: the oracle's integrity counts
//! (oversold, undersold, lost acknowledged orders) and the post-mortem's four headline metrics
//! as small multiples.

use super::{fmt_ms, fmt_num, DrawResult, RunData, FONT};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One bar: a run's value of one metric (`None`: not measured or not verifiable).
pub struct Bar {
    pub label: String,
    pub colour: RGBColor,
    pub value: Option<f64>,
}

fn lighter(c: RGBColor) -> RGBColor {
    let l = |v: u8| v + ((255 - v) as f64 * 0.45) as u8;
    RGBColor(l(c.0), l(c.1), l(c.2))
}

fn bars(runs: &[RunData<'_>], value: impl Fn(&RunData<'_>) -> Option<f64>) -> Vec<Bar> {
    runs.iter()
        .map(|r| Bar {
            label: r.label.clone(),
            colour: if r.dashed {
                lighter(r.colour)
            } else {
                r.colour
            },
            value: value(r),
        })
        .collect()
}

/// One panel of bars with its value printed above each bar.
pub fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    y_desc: &str,
    bars: &[Bar],
    fmt: &dyn Fn(f64) -> String,
) -> DrawResult<DB> {
    let n = bars.len().max(1);
    let ymax = bars.iter().filter_map(|b| b.value).fold(0.0, f64::max);
    // All zero (the usual oversell): a 0–5 axis, so its ticks stay whole numbers.
    let ymax = if ymax > 0.0 { ymax * 1.25 } else { 5.0 };
    // Bar i is centred on x = i; with at most n labels the mesh puts one on each integer.
    let x = -0.5..n as f64 - 0.5;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 19))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(78)
        .build_cartesian_2d(x, 0.0..ymax)?;
    // Eight bars (four strategies on two backends) do not fit their full names: abbreviate.
    let crowded = n > 4;
    let labels: Vec<String> = bars
        .iter()
        .map(|b| {
            if crowded {
                short_label(&b.label)
            } else {
                b.label.clone()
            }
        })
        .collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(y_desc)
        .y_labels(6)
        .x_labels(n)
        .x_label_formatter(&|v| {
            let i = v.round();
            if (v - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| fmt_num(*v))
        .label_style((FONT, if crowded { 12 } else { 15 }))
        .axis_desc_style((FONT, 15))
        .draw()?;
    chart.draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
        let v = b.value?;
        let x0 = i as f64 - 0.3;
        Some(Rectangle::new(
            [(x0, 0.0), (x0 + 0.6, v)],
            b.colour.filled(),
        ))
    }))?;
    let label_style = TextStyle::from((FONT, 16).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        let (text, y) = match b.value {
            Some(v) => (fmt(v), v),
            None => ("n/a".to_string(), 0.0),
        };
        Text::new(text, (i as f64, y + ymax * 0.02), label_style.clone())
    }))?;
    Ok(())
}

fn count(v: f64) -> String {
    format!("{v:.0}")
}

/// Oversold units, undersold units and lost acknowledged orders per run.
pub fn integrity<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
) -> DrawResult<DB> {
    let root = root.titled(
        "Oracle: units oversold, units left unsold, acknowledged orders lost",
        (FONT, 22),
    )?;
    let areas = root.split_evenly((1, 3));
    panel(
        &areas[0],
        "Oversold units",
        "units",
        &bars(runs, |r| r.run.oversell.map(|v| v as f64)),
        &count,
    )?;
    panel(
        &areas[1],
        "Undersold units",
        "units",
        &bars(runs, |r| r.run.undersell.map(|v| v as f64)),
        &count,
    )?;
    panel(
        &areas[2],
        "Lost acknowledged orders",
        "orders",
        &bars(runs, |r| r.run.lost_acks.map(|v| v as f64)),
        &count,
    )
}

/// The post-mortem's four headline metrics, one panel each.
pub fn headline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
) -> DrawResult<DB> {
    let root = root.titled("The post-mortem's headline metrics", (FONT, 22))?;
    let areas = root.split_evenly((2, 2));
    panel(
        &areas[0],
        "Oversold units (oracle)",
        "units",
        &bars(runs, |r| r.run.oversell.map(|v| v as f64)),
        &count,
    )?;
    panel(
        &areas[1],
        "Average order latency",
        "ms",
        &bars(runs, |r| r.run.order_latency().map(|l| l.mean_ms)),
        &fmt_ms,
    )?;
    panel(
        &areas[2],
        "Database peak QPS",
        "queries/s",
        &bars(runs, |r| r.run.db_qps.as_ref().map(|q| q.peak)),
        &count,
    )?;
    panel(
        &areas[3],
        "Order error rate",
        "% of order attempts",
        &bars(runs, |r| Some(r.run.error_rate * 100.0)),
        &|v| format!("{v:.2}"),
    )
}

/// `for-update/postgres` → `f-upd/pg`: short enough for eight bars side by side.
fn short_label(label: &str) -> String {
    label
        .replace("for-update", "f-upd")
        .replace("optimistic", "optim")
        .replace("redis-lua", "redis")
        .replace("postgres", "pg")
        .replace("mysql", "my")
}
