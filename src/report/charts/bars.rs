//! Bar charts, one horizontal bar per run in its run colour (strategy colour, pale on a second
//! backend) and labelled with the run's full name: the oracle's integrity counts (oversold,
//! undersold, lost acknowledged orders) and the post-mortem's four headline metrics as small
//! multiples. Panels of one row share their run labels (drawn once, on the left); a database
//! rate gets one panel per counter, so PostgreSQL transactions/s and MySQL Questions/s never
//! share an axis.

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

/// Pixels per bar.
const ROW: u32 = 28;
/// A panel's caption and x axis, around its bars.
const FRAME: u32 = 104;
/// The figure title.
const TITLE: u32 = 44;
/// The legend strip under the title.
const LEGEND: u32 = 34;
/// Size of the run labels and of the values printed at the bars' ends.
const LABEL_SIZE: u32 = 15;

/// Height of one row of panels holding `n` bars each.
pub fn row_height(n: usize) -> u32 {
    n.max(1) as u32 * ROW + FRAME
}

/// Height of the integrity figure.
pub fn integrity_height(runs: &[RunData<'_>]) -> u32 {
    TITLE + LEGEND + row_height(runs.len())
}

/// Height of the headline figure: one row of three panels, then the database rate's row.
pub fn headline_height(runs: &[RunData<'_>]) -> u32 {
    let rates = db_rates(runs, Metric::DbQpsPeak);
    let per_rate = rates
        .iter()
        .map(|rate| {
            runs.iter()
                .filter(|r| Metric::DbQpsPeak.unit_in(r.run).as_ref() == Some(rate))
                .count()
        })
        .max()
        .unwrap_or(runs.len());
    TITLE + LEGEND + row_height(runs.len()) + row_height(per_rate)
}

fn bars(runs: &[&RunData<'_>], value: impl Fn(&RunData<'_>) -> Option<f64>) -> Vec<Bar> {
    runs.iter()
        .map(|r| Bar {
            label: r.label.clone(),
            colour: r.colour,
            value: value(r),
        })
        .collect()
}

/// The width the run labels of `bars` need on `area`.
fn label_width<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, bars: &[Bar]) -> u32 {
    let style = TextStyle::from((FONT, LABEL_SIZE).into_font());
    let widest = bars
        .iter()
        .filter_map(|b| area.estimate_text_size(&b.label, &style).ok())
        .map(|(w, _)| w)
        .max()
        .unwrap_or(60);
    widest + 18
}

/// One panel of horizontal bars (the first at the top) with each value printed at its bar's
/// end. `labels`: the width of the run labels' area, or `None` to leave them to a panel on the
/// left with the same bars.
pub fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    bars: &[Bar],
    fmt: &dyn Fn(f64) -> String,
    labels: Option<u32>,
) -> DrawResult<DB> {
    let n = bars.len().max(1);
    let xmax = bars.iter().filter_map(|b| b.value).fold(0.0, f64::max);
    // All zero (the usual oversell): a 0–5 axis, so its ticks stay whole numbers. Room on the
    // right for the value printed after the longest bar.
    let xmax = if xmax > 0.0 { xmax * 1.3 } else { 5.0 };
    // Bar i is centred on y = n − 1 − i; with n labels the mesh puts one on each integer.
    let y = -0.5..n as f64 - 0.5;
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 18))
        .margin_top(8)
        .margin_bottom(8)
        .margin_left(if labels.is_some() { 8 } else { 0 })
        .margin_right(22)
        .x_label_area_size(52)
        .y_label_area_size(labels.unwrap_or(4))
        .build_cartesian_2d(0.0..xmax, y)?;
    let names: Vec<&str> = bars.iter().map(|b| b.label.as_str()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(x_desc)
        .x_labels(5)
        .y_labels(n)
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| {
            let i = v.round();
            if labels.is_some() && (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                names
                    .get(n - 1 - i as usize)
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .label_style((FONT, LABEL_SIZE))
        .axis_desc_style((FONT, 15))
        .draw()?;
    let row = |i: usize| (n - 1 - i) as f64;
    chart.draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
        let v = b.value?;
        Some(Rectangle::new(
            [(0.0, row(i) - 0.34), (v, row(i) + 0.34)],
            b.colour.filled(),
        ))
    }))?;
    let value_style = TextStyle::from((FONT, LABEL_SIZE).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
        let (text, x) = match b.value {
            Some(v) => (fmt(v), v),
            None => ("n/a".to_string(), 0.0),
        };
        Text::new(text, (x + xmax * 0.012, row(i)), value_style.clone())
    }))?;
    Ok(())
}

/// What a metric's axis is labelled with, and the factor from its value to the axis.
fn axis(metric: Metric) -> (&'static str, f64) {
    match metric.spec().unit {
        Unit::Units => ("units", 1.0),
        Unit::Orders => ("orders", 1.0),
        Unit::Buyers => ("buyers", 1.0),
        Unit::Flag => ("1 = yes", 1.0),
        Unit::Share => ("% of order attempts", 100.0),
        Unit::Millis => ("ms", 1.0),
        Unit::OrdersPerSecond => ("orders/s", 1.0),
        Unit::BuyersPerSecond => ("buyers/s", 1.0),
        Unit::DbRate => ("per second", 1.0),
        Unit::Gauge => ("value", 1.0),
        Unit::Seconds => ("s", 1.0),
    }
}

/// One row of panels over the same runs, one panel per metric; the run labels are drawn once,
/// on the left of the first panel.
fn metric_row<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
    metrics: &[(Metric, &str)],
) -> DrawResult<DB> {
    let all: Vec<&RunData<'_>> = runs.iter().collect();
    let labelled = bars(&all, |_| None);
    let labels = label_width(area, &labelled);
    let (w, _) = area.dim_in_pixel();
    let inner = w.saturating_sub(labels + 8) / metrics.len().max(1) as u32;
    let mut rest = area.clone();
    for (k, (metric, title)) in metrics.iter().enumerate() {
        let (this, next) = if k + 1 == metrics.len() {
            (rest.clone(), rest.clone())
        } else {
            let width = if k == 0 { labels + 8 + inner } else { inner };
            rest.split_horizontally(width)
        };
        let (x_desc, scale) = axis(*metric);
        let value = |r: &RunData<'_>| metric.read(r.run).ok().map(|v| v * scale);
        let label = move |v: f64| metric.number(v / scale);
        let shared = (k == 0).then_some(labels);
        panel(&this, title, x_desc, &bars(&all, value), &label, shared)?;
        rest = next;
    }
    Ok(())
}

/// The counters a database-rate metric was read from in these runs, in the order the runs
/// first name them (so the first backend's panel comes first).
fn db_rates(runs: &[RunData<'_>], metric: Metric) -> Vec<DbRate> {
    let mut rates: Vec<DbRate> = Vec::new();
    for rate in runs.iter().filter_map(|r| metric.unit_in(r.run)) {
        if !rates.contains(&rate) {
            rates.push(rate);
        }
    }
    rates
}

/// One panel per counter of a database rate, each holding only the runs read from it.
fn db_rate_row<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
    metric: Metric,
    title: &str,
) -> DrawResult<DB> {
    let rates = db_rates(runs, metric);
    if rates.is_empty() {
        let all: Vec<&RunData<'_>> = runs.iter().collect();
        let b = bars(&all, |_| None);
        let labels = label_width(area, &b);
        return panel(area, title, "per second", &b, &fmt_num, Some(labels));
    }
    let areas = area.split_evenly((1, rates.len()));
    for (rate, area) in rates.iter().zip(areas.iter()) {
        let these: Vec<&RunData<'_>> = runs
            .iter()
            .filter(|r| metric.unit_in(r.run).as_ref() == Some(rate))
            .collect();
        let b = bars(&these, |r| metric.read(r.run).ok());
        let title = format!("{title}: {}", rate.label());
        let label = |v: f64| metric.number(v);
        let labels = label_width(area, &b);
        panel(area, &title, &rate.counter, &b, &label, Some(labels))?;
    }
    Ok(())
}

/// The legend strip: each strategy's colour, and the shade of each further backend.
fn legend_strip<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
) -> DrawResult<DB> {
    let style = TextStyle::from((FONT, LABEL_SIZE).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let mut entries: Vec<(String, RGBColor)> = Vec::new();
    for r in runs.iter().filter(|r| r.backend_index == 0) {
        let name = r.run.strategy_name().to_string();
        if !entries.iter().any(|(n, _)| *n == name) {
            entries.push((name, r.colour));
        }
    }
    let backends = super::backends(runs);
    let note = match backends.as_slice() {
        [first, rest @ ..] if !rest.is_empty() => {
            let pale: Vec<&str> = rest.iter().map(|b| b.as_str()).collect();
            format!("strong: {first}, pale: {}", pale.join(", "))
        }
        _ => String::new(),
    };
    let (w, h) = area.dim_in_pixel();
    let y = h as i32 / 2;
    let mut x = 16i32;
    for (name, colour) in &entries {
        area.draw(&Rectangle::new(
            [(x, y - 7), (x + 14, y + 7)],
            colour.filled(),
        ))?;
        area.draw(&Text::new(name.clone(), (x + 20, y), style.clone()))?;
        let tw = area
            .estimate_text_size(name, &style)
            .map_or(80, |(tw, _)| tw as i32);
        x += 20 + tw + 22;
    }
    if !note.is_empty() && (x as u32) < w {
        area.draw(&Text::new(note, (x + 10, y), style))?;
    }
    Ok(())
}

/// Oversold units, undersold units and lost acknowledged orders per run.
pub fn integrity<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
) -> DrawResult<DB> {
    let root = root.titled("Oracle: what the final state shows", (FONT, 22))?;
    let (strip, rest) = root.split_vertically(LEGEND);
    legend_strip(&strip, runs)?;
    let (shown, _) = integrity_panels(runs);
    metric_row(&rest, runs, &shown)
}

/// The integrity figure's panels: oversold units always; undersold units and lost
/// acknowledged orders only when some run has one (or could not verify it) — a panel of zeros
/// only says what the caption says. Returns the panels and the titles left out.
pub fn integrity_panels(runs: &[RunData<'_>]) -> (Vec<(Metric, &'static str)>, Vec<&'static str>) {
    let mut shown = vec![(Metric::Oversell, "Oversold units")];
    let mut left_out = Vec::new();
    for (metric, title) in [
        (Metric::Undersell, "Undersold units"),
        (Metric::LostAcks, "Lost acknowledged orders"),
    ] {
        let happened = runs
            .iter()
            .any(|r| !metric.read(r.run).is_ok_and(|v| v == 0.0));
        if happened {
            shown.push((metric, title));
        } else {
            left_out.push(title);
        }
    }
    (shown, left_out)
}

/// The post-mortem's four headline metrics: oversold units, average order latency and error
/// rate over every run, then the database's peak rate, one panel per counter.
pub fn headline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
) -> DrawResult<DB> {
    let root = root.titled("The post-mortem's headline metrics", (FONT, 22))?;
    let (strip, rest) = root.split_vertically(LEGEND);
    legend_strip(&strip, runs)?;
    let (first, second) = rest.split_vertically(row_height(runs.len()));
    metric_row(
        &first,
        runs,
        &[
            (Metric::Oversell, "Oversold units (oracle)"),
            (Metric::MeanMs, "Average order latency"),
            (Metric::ErrorRate, "Order error rate"),
        ],
    )?;
    db_rate_row(&second, runs, Metric::DbQpsPeak, "Database peak")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_grows_with_its_bars() {
        assert_eq!(row_height(0), row_height(1));
        assert_eq!(row_height(14) - row_height(7), 7 * ROW);
    }
}
