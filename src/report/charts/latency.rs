//! Order latency per run: a histogram on log-spaced bins, and the percentile spectrum
//! (latency against 1/(1 − percentile) on a log axis, the HdrHistogram plot).

use super::{fmt_ms, legend_column, run_line, with_legend_column, DrawResult, RunData, FONT};
use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;

/// Histogram bins per decade of latency.
const BINS_PER_DECADE: f64 = 10.0;

/// The percentile spectrum's x positions run from 1 (0 %) to this (99.99 %).
const SPECTRUM_MAX_X: f64 = 10_000.0;

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn with_data<'a, 'b>(
    runs: &'a [RunData<'b>],
) -> impl Iterator<Item = (&'a RunData<'b>, &'a Histogram<u64>)> {
    runs.iter()
        .filter_map(|r| r.order_latency.as_ref().map(|h| (r, h)))
        .filter(|(_, h)| !h.is_empty())
}

/// `(bin low ms, bin high ms, share of the run's orders in %)` on bins shared by all runs.
pub fn bins(h: &Histogram<u64>, lo_ms: f64, hi_ms: f64) -> Vec<(f64, f64, f64)> {
    let lo = lo_ms.log10().floor();
    let n = (((hi_ms.log10() - lo) * BINS_PER_DECADE).ceil() as usize).max(1);
    let edge = |i: usize| 10f64.powf(lo + i as f64 / BINS_PER_DECADE);
    let mut counts = vec![0u64; n];
    for v in h.iter_recorded() {
        let x = ms(h.highest_equivalent(v.value_iterated_to())).max(edge(0));
        let i = (((x.log10() - lo) * BINS_PER_DECADE).floor() as usize).min(n - 1);
        counts[i] += v.count_at_value();
    }
    let total = h.len().max(1) as f64;
    counts
        .iter()
        .enumerate()
        .map(|(i, c)| (edge(i), edge(i + 1), *c as f64 * 100.0 / total))
        .collect()
}

/// The quantiles the spectrum is drawn at: x = 1/(1 − q) from 1 to [`SPECTRUM_MAX_X`].
pub fn spectrum(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    (0..=200)
        .map(|i| {
            let x = 10f64.powf(i as f64 * SPECTRUM_MAX_X.log10() / 200.0);
            let q = 1.0 - 1.0 / x;
            (x, ms(h.value_at_quantile(q)).max(0.001))
        })
        .collect()
}

/// Percentile label of an x position of the spectrum.
pub fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    if p < 0.5 {
        "min".into()
    } else {
        let s = format!("{p:.2}");
        format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// The latency histogram: one outline per run.
pub fn histogram<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
) -> DrawResult<DB> {
    let lo = with_data(runs)
        .map(|(_, h)| ms(h.min().max(1)))
        .fold(f64::MAX, f64::min);
    let hi = with_data(runs)
        .map(|(_, h)| ms(h.max().max(1)))
        .fold(0.0, f64::max);
    if hi <= 0.0 {
        return Ok(());
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = hi * 1.3;
    let binned = with_data(runs)
        .map(|(r, h)| (r, bins(h, lo, hi)))
        .collect::<Vec<_>>();
    let ymax = binned
        .iter()
        .flat_map(|(_, b)| b.iter().map(|x| x.2))
        .fold(1.0, f64::max)
        * 1.15;
    let (plot, side) = with_legend_column(root, binned.iter().map(|(r, _)| *r));
    let mut chart = ChartBuilder::on(&plot)
        .caption("Order latency histogram", (FONT, 26))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..ymax)?;
    chart
        .configure_mesh()
        .x_desc("order latency (ms, log scale)")
        .y_desc("share of the run's order attempts (%)")
        .x_label_formatter(&|v| fmt_ms(*v))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 17))
        .draw()?;
    for (r, b) in &binned {
        let mut pts = vec![(b[0].0, 0.0)];
        for (a, z, y) in b {
            pts.push((*a, *y));
            pts.push((*z, *y));
        }
        pts.push((b[b.len() - 1].1, 0.0));
        run_line(&mut chart, r, pts, &r.label)?;
    }
    legend_column(&side, binned.iter().map(|(r, _)| *r))
}

/// Height of the percentile figure: one panel per backend.
pub fn percentiles_height(runs: &[RunData<'_>]) -> u32 {
    match super::backends(runs).len() {
        0 | 1 => 640,
        n => 40 + 520 * n as u32,
    }
}

/// The percentile spectrum: one line per run, one panel per backend (each strategy keeps its
/// own colour there, solid: no two lines of a panel look alike). The panels share their axes
/// and legend width, so a line reads against the other backend's straight down.
pub fn percentiles<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
) -> DrawResult<DB> {
    let Some(y) = latency_range(runs) else {
        return Ok(());
    };
    let backends = super::backends(runs);
    if backends.len() < 2 {
        return percentile_panel(root, runs, "Order latency by percentile", runs, y);
    }
    let root = root.titled("Order latency by percentile", (FONT, 26))?;
    let areas = root.split_evenly((backends.len(), 1));
    for (backend, area) in backends.iter().zip(areas.iter()) {
        let own: Vec<RunData<'_>> = runs
            .iter()
            .filter(|r| r.run.backend_name() == backend)
            .map(|r| RunData {
                run: r.run,
                label: r.label.clone(),
                colour: super::run_colour(r.run),
                backend_index: 0,
                dashed: false,
                order_latency: r.order_latency.clone(),
            })
            .collect();
        percentile_panel(area, &own, backend, runs, y)?;
    }
    Ok(())
}

/// The latency axis of every run's spectrum: from the decade below the fastest to half again
/// the slowest, ms (`None`: no run has latencies).
fn latency_range(runs: &[RunData<'_>]) -> Option<(f64, f64)> {
    let ys: Vec<f64> = with_data(runs)
        .flat_map(|(_, h)| spectrum(h).into_iter().map(|p| p.1))
        .collect();
    if ys.is_empty() {
        return None;
    }
    let (ymin, ymax) = ys
        .iter()
        .fold((f64::MAX, 0.0f64), |(a, b), y| (a.min(*y), b.max(*y)));
    Some((10f64.powf(ymin.log10().floor()), ymax * 1.5))
}

/// One panel of the percentile spectrum, titled `title`, on latency axis `y`; its legend column
/// as wide as `all`'s labels need.
fn percentile_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[RunData<'_>],
    title: &str,
    all: &[RunData<'_>],
    (ymin, ymax): (f64, f64),
) -> DrawResult<DB> {
    let lines: Vec<(&RunData<'_>, Vec<(f64, f64)>)> =
        with_data(runs).map(|(r, h)| (r, spectrum(h))).collect();
    let x = (1.0..SPECTRUM_MAX_X * 1.25)
        .log_scale()
        .with_key_points(vec![1.0, 2.0, 10.0, 100.0, 1_000.0, 10_000.0]);
    let (plot, side) = with_legend_column(root, all.iter());
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, (FONT, 22))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d(x, (ymin..ymax).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("percentile (log scale of 1/(1 − percentile))")
        .y_desc("order latency (ms, log scale)")
        .x_label_formatter(&|v| percentile_label(*v))
        .y_label_formatter(&|v| fmt_ms(*v))
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 17))
        .draw()?;
    for (r, pts) in &lines {
        run_line(&mut chart, r, pts.clone(), &r.label)?;
    }
    legend_column(&side, lines.iter().map(|(r, _)| *r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_labels_read_as_the_spectrum_convention() {
        assert_eq!(percentile_label(1.0), "min");
        assert_eq!(percentile_label(2.0), "50%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1_000.0), "99.9%");
        assert_eq!(percentile_label(10_000.0), "99.99%");
    }

    #[test]
    fn bins_hold_every_recorded_value_once() {
        let mut h = crate::traffic::recorder::new_histogram();
        for us in [150u64, 900, 1_200, 15_000, 15_100, 2_000_000] {
            h.record(us).unwrap();
        }
        let b = bins(&h, 0.1, 2_600.0);
        let total: f64 = b.iter().map(|x| x.2).sum();
        assert!((total - 100.0).abs() < 1e-9, "{total}");
        let at_15ms = b.iter().find(|x| x.0 <= 15.0 && 15.0 < x.1).unwrap();
        assert!((at_15ms.2 - 100.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn the_spectrum_climbs_from_the_minimum_to_the_maximum() {
        let mut h = crate::traffic::recorder::new_histogram();
        for us in 1..=10_000u64 {
            h.record(us).unwrap();
        }
        let s = spectrum(&h);
        assert_eq!(s[0].0, 1.0);
        assert!(s.windows(2).all(|w| w[0].1 <= w[1].1));
        assert!((s.last().unwrap().1 - 10.0).abs() < 0.05);
    }
}
