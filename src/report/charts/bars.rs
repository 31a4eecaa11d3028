//! Bar charts, one bar per run in its strategy colour: the oracle's integrity counts
//! (oversold, undersold, lost acknowledged orders) and the post-mortem's four headline metrics
//! as small multiples.

use super::{fmt_num, DrawResult, RunData, FONT};
use crate::metric::{Metric, Unit};
use crate::report::catalog::DbRate;
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
    // Eight bars or more (strategies on two backends) do not fit their full names: abbreviate.
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

/// One panel per metric: bars of each run's value, labelled at the metric's precision. A
/// database rate gets one panel per counter (PostgreSQL transactions/s and MySQL Questions/s
/// never share an axis); runs without it show `n/a`.
fn metric_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
    metric: Metric,
    title: &str,
) -> DrawResult<DB> {
    let (y_desc, scale) = match metric.spec().unit {
        Unit::Units => ("units", 1.0),
        Unit::Orders => ("orders", 1.0),
        Unit::Buyers => ("buyers", 1.0),
        Unit::Flag => ("1 = yes", 1.0),
        Unit::Share => ("% of order attempts", 100.0),
        Unit::Millis => ("ms", 1.0),
        Unit::OrdersPerSecond => ("orders/s", 1.0),
        Unit::BuyersPerSecond => ("buyers/s", 1.0),
        Unit::DbRate => return db_rate_panels(area, runs, metric, title),
    };
    let value = |r: &RunData<'_>| metric.read(r.run).ok().map(|v| v * scale);
    let label = move |v: f64| metric.number(v / scale);
    panel(area, title, y_desc, &bars(runs, value), &label)
}

fn db_rate_panels<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
    metric: Metric,
    title: &str,
) -> DrawResult<DB> {
    let mut rates: Vec<DbRate> = runs.iter().filter_map(|r| metric.unit_in(r.run)).collect();
    rates.sort();
    rates.dedup();
    if rates.is_empty() {
        return panel(area, title, "per second", &bars(runs, |_| None), &fmt_num);
    }
    let areas = area.split_evenly((1, rates.len()));
    for (rate, area) in rates.iter().zip(areas.iter()) {
        let value = |r: &RunData<'_>| {
            (metric.unit_in(r.run).as_ref() == Some(rate))
                .then(|| metric.read(r.run).ok())
                .flatten()
        };
        let title = if rates.len() > 1 {
            format!("{title}: {}", rate.server)
        } else {
            title.to_string()
        };
        let label = |v: f64| metric.number(v);
        panel(area, &title, &rate.label(), &bars(runs, value), &label)?;
    }
    Ok(())
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
    metric_panel(&areas[0], runs, Metric::Oversell, "Oversold units")?;
    metric_panel(&areas[1], runs, Metric::Undersell, "Undersold units")?;
    metric_panel(
        &areas[2],
        runs,
        Metric::LostAcks,
        "Lost acknowledged orders",
    )
}

/// The post-mortem's four headline metrics, one panel each.
pub fn headline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
) -> DrawResult<DB> {
    let root = root.titled("The post-mortem's headline metrics", (FONT, 22))?;
    let areas = root.split_evenly((2, 2));
    metric_panel(&areas[0], runs, Metric::Oversell, "Oversold units (oracle)")?;
    metric_panel(&areas[1], runs, Metric::MeanMs, "Average order latency")?;
    metric_panel(&areas[2], runs, Metric::DbQpsPeak, "Database peak QPS")?;
    metric_panel(&areas[3], runs, Metric::ErrorRate, "Order error rate")
}

/// `for-update/postgres` → `f-upd/pg`: short enough for a dozen bars side by side.
fn short_label(label: &str) -> String {
    label
        .replace("for-update", "f-upd")
        .replace("optimistic", "optim")
        .replace("redis-lua", "redis")
        .replace("redis-buckets", "buckets")
        .replace("conditional", "cond")
        .replace("batched", "batch")
        .replace("postgres", "pg")
        .replace("mysql", "my")
}
