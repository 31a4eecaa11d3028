//! `fit-arrivals.svg` and `.png`: the log's arrivals per second against the fitted scenario's
//! (its schedule, built and counted) and the closest burst shape's expected arrivals
//! (plotters, drawn like `report::charts`).

use super::model::Model;
use super::CHART;
use crate::report::charts::{fmt_num, legend, register_font, series_line, FONT, WIDTH};
use anyhow::Context;
use plotters::prelude::*;
use std::path::Path;

const HEIGHT: u32 = 560;

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// The three series, per second from the sale start.
struct Series {
    log: Vec<(f64, f64)>,
    model: Vec<(f64, f64)>,
    burst: Vec<(f64, f64)>,
    title: String,
}

fn series(m: &Model, replayed: &[u32]) -> Series {
    let points = |v: &[u32]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(k, n)| (k as f64, f64::from(*n)))
            .collect()
    };
    let n = m.count() as f64;
    let (b, p, w) = (m.burst.burst_s, m.burst.share, m.trace.len() as f64);
    let burst = (0..m.trace.len())
        .map(|k| {
            let k = k as f64;
            let rate = if k < b {
                n * p / b
            } else {
                n * (1.0 - p) / (w - b).max(1.0)
            };
            (k, rate)
        })
        .collect();
    let shaped = m.shaping.scale != 1.0 || m.shaping.compress != 1.0;
    Series {
        log: points(&m.log_trace),
        model: points(replayed),
        burst,
        title: if shaped {
            format!(
                "Arrivals per second: the log, and the scenario (×{} buyers, ×{} faster)",
                m.shaping.scale, m.shaping.compress
            )
        } else {
            "Arrivals per second: the log and the fitted scenario".into()
        },
    }
}

/// Draws the chart into `dir` as `fit-arrivals.svg` and `.png`.
pub fn draw(dir: &Path, m: &Model, replayed: &[u32]) -> anyhow::Result<()> {
    register_font();
    let s = series(m, replayed);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        plot(&root, &s).map_err(|e| anyhow::anyhow!("drawing {CHART}.svg: {e}"))?;
    }
    let svg_path = dir.join(format!("{CHART}.svg"));
    std::fs::write(&svg_path, &svg).with_context(|| format!("writing {}", svg_path.display()))?;
    let png = dir.join(format!("{CHART}.png"));
    let root = BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area();
    plot(&root, &s).map_err(|e| anyhow::anyhow!("drawing {}: {e}", png.display()))
}

fn plot<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    s: &Series,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let x_max = s.log.len().max(s.model.len()).max(1) as f64;
    let y_max = s
        .log
        .iter()
        .chain(&s.model)
        .chain(&s.burst)
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.15;
    let mut c = ChartBuilder::on(root)
        .caption(&s.title, (FONT, 24))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    c.configure_mesh()
        .x_desc("seconds from the sale start")
        .y_desc("buyers arriving in the second")
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 17))
        .draw()?;
    let grey = RGBColor(0x9a, 0x9a, 0x9a);
    c.draw_series(
        AreaSeries::new(steps(&s.log), 0.0, grey.mix(0.35)).border_style(grey.stroke_width(1)),
    )?
    .label("the log: first requests per second")
    .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 26, y + 6)], grey.mix(0.5).filled()));
    let blue = RGBColor(0x1f, 0x77, 0xb4);
    series_line(
        &mut c,
        steps(&s.model),
        blue.stroke_width(2),
        false,
        "the scenario (arrival = \"trace\"): its schedule",
    )?;
    let orange = RGBColor(0xff, 0x7f, 0x0e);
    series_line(
        &mut c,
        steps(&s.burst),
        orange.stroke_width(2),
        true,
        "the closest burst shape (expected)",
    )?;
    legend(&mut c, SeriesLabelPosition::UpperRight)?;
    root.present()
}

/// Per-second counts as steps: each second's value held across it.
fn steps(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    points
        .iter()
        .flat_map(|(x, y)| [(*x, *y), (*x + 1.0, *y)])
        .collect()
}
