//! Line charts of a metric against a rate or a knob (plotters, SVG + PNG like the report's
//! other charts): `capacity` draws p99, error rate and sold-out time against the offered rate,
//! `sweep` every headline metric against its knob, `compare`'s law the oversell against the
//! rush with its fitted line, all with [`line_chart`].

use super::{fmt_num, legend, register_font, series_line, Rendered, FONT, WIDTH};
use anyhow::Context;
use plotters::prelude::*;
use std::path::Path;

/// One line of a chart.
pub struct Line {
    pub label: String,
    pub colour: RGBColor,
    pub points: Vec<(f64, f64)>,
    /// An x to mark with a dashed vertical line (a capacity).
    pub mark: Option<f64>,
}

/// What one chart shows.
pub struct Chart<'a> {
    pub name: &'a str,
    pub title: &'a str,
    pub caption: String,
    pub x_desc: &'a str,
    pub y_desc: &'a str,
    /// Draw x on a log scale (rates double).
    pub log_x: bool,
}

const HEIGHT: u32 = 560;

/// Draws `chart` with `lines` as `<dir>/<name>.svg` and `.png`; returns what the page inlines.
pub fn line_chart(dir: &Path, chart: &Chart<'_>, lines: &[Line]) -> anyhow::Result<Rendered> {
    register_font();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, chart, lines)
            .map_err(|e| anyhow::anyhow!("drawing {}.svg: {e}", chart.name))?;
    }
    std::fs::write(dir.join(format!("{}.svg", chart.name)), &svg)
        .with_context(|| format!("writing {}.svg", chart.name))?;
    let png = dir.join(format!("{}.png", chart.name));
    {
        let root = BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, chart, lines).map_err(|e| anyhow::anyhow!("drawing {}: {e}", png.display()))?;
    }
    Ok(Rendered {
        name: chart.name.into(),
        title: chart.title.into(),
        caption: chart.caption.clone(),
        svg,
    })
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    chart: &Chart<'_>,
    lines: &[Line],
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let xs = lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
    let (mut x0, mut x1) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    if x0 > x1 {
        (x0, x1) = (1.0, 2.0);
    }
    if (x1 - x0).abs() < 1e-9 {
        x1 = x0 * 1.5 + 1.0;
    }
    let ymax = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(1e-6)
        * 1.15;
    if chart.log_x && x0 > 0.0 {
        let mut c = ChartBuilder::on(root)
            .caption(chart.title, (FONT, 24))
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(80)
            .build_cartesian_2d((x0 * 0.9..x1 * 1.1).log_scale(), 0.0..ymax)?;
        axes_and_lines(&mut c, chart, lines, ymax)
    } else {
        let pad = (x1 - x0) * 0.05;
        let mut c = ChartBuilder::on(root)
            .caption(chart.title, (FONT, 24))
            .margin(16)
            .x_label_area_size(56)
            .y_label_area_size(80)
            .build_cartesian_2d(x0 - pad..x1 + pad, 0.0..ymax)?;
        axes_and_lines(&mut c, chart, lines, ymax)
    }
}

/// The axes, every line and the legend, on either x scale.
fn axes_and_lines<'a, DB, X>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    chart: &Chart<'_>,
    lines: &[Line],
    ymax: f64,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>
        + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    c.configure_mesh()
        .x_desc(chart.x_desc)
        .y_desc(chart.y_desc)
        .x_label_formatter(&|v| fmt_num(*v))
        .y_label_formatter(&|v| fmt_num(*v))
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 17))
        .draw()?;
    for l in lines {
        lines_of(c, l, ymax)?;
    }
    legend(c, SeriesLabelPosition::UpperLeft)
}

fn lines_of<'a, DB, X>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    l: &Line,
    ymax: f64,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let style = l.colour.stroke_width(3);
    series_line(c, l.points.clone(), style, false, &l.label)?;
    c.draw_series(
        l.points
            .iter()
            .map(|p| Circle::new(*p, 5, l.colour.filled())),
    )?;
    if let Some(x) = l.mark {
        c.draw_series(DashedLineSeries::new(
            vec![(x, 0.0), (x, ymax)],
            8,
            6,
            l.colour.stroke_width(2),
        ))?;
    }
    Ok(())
}
