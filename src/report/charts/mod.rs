//! Charts drawn with plotters, each written as SVG (also inlined in `report.html`) and as a
//! 1200 px wide PNG next to `report.json`:
//!
//! - `latency-histogram`, `latency-percentiles`: order latency per run ([`latency`]);
//! - `timeline-<strategy>-<backend>`: one stacked figure per run on a shared time axis
//!   ([`timeline`]);
//! - `integrity`, `headline`: oversell / undersell / lost-ack bars and the post-mortem's four
//!   headline metrics as small multiples ([`bars`]).
//!
//! Everything is drawn from the serialisable parts of a [`Report`] (histograms decoded from
//! their base64 V2 form, `timeline`, `series`), so a report read back from `report.json` draws
//! the same charts. Text is measured and rasterised with the DejaVu Sans file compiled into the
//! binary: no system font lookup at run time.

pub mod bars;
pub mod latency;
pub mod line;
pub mod timeline;
pub mod watch;

use super::{Report, RunReport};
use crate::inventory::Strategy;
use anyhow::Context;
use hdrhistogram::Histogram;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// One line of a panel.
pub struct Line {
    pub name: String,
    pub colour: plotters::style::RGBColor,
    pub dashed: bool,
    /// `(seconds after the sale opened, value)`.
    pub points: Vec<(f64, f64)>,
}

/// Width of every chart, in pixels (PNG) or user units (SVG).
pub const WIDTH: u32 = 1200;

/// The font every chart uses (registered with plotters under this family name).
pub const FONT: &str = "sans-serif";

static DEJAVU_SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");

pub(crate) fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The file is compiled in and known good; a failure here is a build defect.
        if plotters::style::register_font(FONT, FontStyle::Normal, DEJAVU_SANS).is_err() {
            panic!("the bundled DejaVu Sans font does not parse");
        }
    });
}

/// The colour of a shop that ran `strategy` (or none of ours), the same in every chart
/// ([`crate::report::colour_of`]).
pub fn strategy_colour(strategy: Option<Strategy>) -> RGBColor {
    let (r, g, b) = crate::report::colour_of(strategy);
    RGBColor(r, g, b)
}

/// A run's colour, as its shop describes it ([`crate::report::Shop::colour`]).
pub fn run_colour(run: &RunReport) -> RGBColor {
    strategy_colour(run.shop.strategy)
}

/// `strategy-backend`, the file-name form of a run's label.
pub fn run_slug(run: &RunReport) -> String {
    let repeat = run.repeat.map(|n| format!("-r{n}")).unwrap_or_default();
    format!("{}-{}{repeat}", run.strategy_name(), run.backend_name())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A run's colour on the `backend_index`-th backend of its report (in order of first
/// appearance): [`run_colour`] on the first, a paler tint of it on the others, so no two runs of
/// one chart share a colour.
pub fn tinted(base: RGBColor, backend_index: usize) -> RGBColor {
    if backend_index == 0 {
        return base;
    }
    let share = if backend_index == 1 { 0.5 } else { 0.7 };
    let l = |v: u8| v + ((255 - v) as f64 * share) as u8;
    RGBColor(l(base.0), l(base.1), l(base.2))
}

/// The backends of these runs, in order of first appearance.
pub fn backends(runs: &[RunData<'_>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in runs {
        let b = r.run.backend_name();
        if !out.iter().any(|o| o == b) {
            out.push(b.to_string());
        }
    }
    out
}

/// One run as the charts see it.
pub struct RunData<'a> {
    pub run: &'a RunReport,
    pub label: String,
    /// [`run_colour`]: the strategy's colour, paler on a second backend.
    pub colour: RGBColor,
    /// Which of the report's backends the run is on (0: the first).
    pub backend_index: usize,
    /// Runs on a second backend are also drawn dashed.
    pub dashed: bool,
    /// Order latency in microseconds, when the report carries it.
    pub order_latency: Option<Histogram<u64>>,
}

/// Prepares the runs of a report for drawing.
pub fn runs(report: &Report) -> Vec<RunData<'_>> {
    let mut backends: Vec<&str> = Vec::new();
    let mb = report.multi_backend();
    report
        .runs
        .iter()
        .map(|run| {
            let backend = run.backend_name();
            let backend_index = backends
                .iter()
                .position(|b| *b == backend)
                .unwrap_or_else(|| {
                    backends.push(backend);
                    backends.len() - 1
                });
            RunData {
                run,
                label: run.marked_label(mb),
                colour: tinted(run_colour(run), backend_index),
                backend_index,
                dashed: backend_index > 0,
                order_latency: run.order_histogram(),
            }
        })
        .collect()
}

/// A chart written to disk.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// File stem: `<name>.svg` and `<name>.png`.
    pub name: String,
    pub title: String,
    /// What the chart shows and where its numbers come from.
    pub caption: String,
    /// The SVG document (also inlined in `report.html`).
    pub svg: String,
}

/// What to draw.
pub enum Figure {
    LatencyHistogram,
    LatencyPercentiles,
    /// The timeline of the run at this index.
    Timeline(usize),
    Integrity,
    Headline,
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

impl Figure {
    fn height(&self, runs: &[RunData<'_>]) -> u32 {
        match self {
            Figure::LatencyHistogram => 640,
            Figure::LatencyPercentiles => latency::percentiles_height(runs),
            Figure::Timeline(i) => timeline::height(runs[*i].run),
            Figure::Integrity => bars::integrity_height(runs),
            Figure::Headline => bars::headline_height(runs),
        }
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        runs: &[RunData<'_>],
    ) -> DrawResult<DB> {
        root.fill(&WHITE)?;
        match self {
            Figure::LatencyHistogram => latency::histogram(root, runs),
            Figure::LatencyPercentiles => latency::percentiles(root, runs),
            Figure::Timeline(i) => timeline::draw(root, runs, *i),
            Figure::Integrity => bars::integrity(root, runs),
            Figure::Headline => bars::headline(root, runs),
        }?;
        root.present()
    }
}

/// Draws `figure` as `<dir>/<name>.svg` and `<dir>/<name>.png`; returns the SVG text.
pub fn render(
    dir: &Path,
    name: &str,
    figure: &Figure,
    runs: &[RunData<'_>],
) -> anyhow::Result<String> {
    register_font();
    let size = (WIDTH, figure.height(runs));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        figure
            .draw(&root, runs)
            .map_err(|e| anyhow::anyhow!("drawing {name}.svg: {e}"))?;
    }
    std::fs::write(dir.join(format!("{name}.svg")), &svg)
        .with_context(|| format!("writing {name}.svg"))?;
    let png = dir.join(format!("{name}.png"));
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        figure
            .draw(&root, runs)
            .map_err(|e| anyhow::anyhow!("drawing {}: {e}", png.display()))?;
    }
    Ok(svg)
}

/// Draws every chart of a report into `dir`.
pub fn write_all(dir: &Path, report: &Report) -> anyhow::Result<Vec<Rendered>> {
    let runs = runs(report);
    let mut out = Vec::new();
    let mut add = |name: String, title: String, caption: String, figure: Figure| {
        let svg = render(dir, &name, &figure, &runs)?;
        out.push(Rendered {
            name,
            title,
            caption,
            svg,
        });
        anyhow::Ok(())
    };
    let latency_source = "Source: oversell's HdrHistograms of every order attempt (all answers), full response time from the intended send time.";
    if runs
        .iter()
        .any(|r| r.order_latency.as_ref().is_some_and(|h| !h.is_empty()))
    {
        add(
            "latency-histogram".into(),
            "Order latency histogram".into(),
            format!("Share of order attempts per latency bin (log-spaced bins). {latency_source}"),
            Figure::LatencyHistogram,
        )?;
        add(
            "latency-percentiles".into(),
            "Order latency by percentile".into(),
            format!("Latency at each percentile, x = 1/(1 − percentile) on a log axis. {latency_source}"),
            Figure::LatencyPercentiles,
        )?;
    }
    for (i, r) in runs.iter().enumerate() {
        add(
            format!("timeline-{}", run_slug(r.run)),
            format!("Timeline: {}", r.label),
            timeline::caption(r.run),
            Figure::Timeline(i),
        )?;
    }
    let (_, left_out) = bars::integrity_panels(&runs);
    let zeros = match left_out.as_slice() {
        [] => String::new(),
        some => format!(
            " {}: 0 in every run (no panel).",
            some.join(" and ").to_lowercase()
        ),
    };
    add(
        "integrity".into(),
        "Oversold, undersold and lost acknowledged orders".into(),
        format!("Source: the oracle (final database rows, and Redis for redis-lua, after the queue drained, against the clients' records). n/a = not verifiable.{zeros}"),
        Figure::Integrity,
    )?;
    add(
        "headline".into(),
        "The post-mortem's four headline metrics".into(),
        "Oversold units (oracle), average order latency (HdrHistogram), DB peak QPS (the database server's counters), order error rate (clients' records: 5xx, timeouts, connection errors over all first order attempts; retries are counted apart).".into(),
        Figure::Headline,
    )?;
    for law in &report.law {
        out.push(law.draw(dir)?);
    }
    Ok(out)
}

/// A style for a run's line: its run colour (dashed on a second backend, by [`run_line`]).
pub(crate) fn line_style(r: &RunData<'_>, width: u32) -> ShapeStyle {
    r.colour.stroke_width(width)
}

/// Draws a polyline for `r` (solid, or dashed for a second backend) and its legend entry.
pub(crate) fn run_line<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    r: &RunData<'_>,
    points: Vec<(X::ValueType, Y::ValueType)>,
    label: &str,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
    X::ValueType: Clone + 'static,
    Y::ValueType: Clone + 'static,
{
    series_line(chart, points, line_style(r, 3), r.dashed, label)
}

/// Draws one labelled line (dashed if asked) with a matching legend entry.
pub(crate) fn series_line<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    points: Vec<(X::ValueType, Y::ValueType)>,
    style: ShapeStyle,
    dashed: bool,
    label: &str,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
    X::ValueType: Clone + 'static,
    Y::ValueType: Clone + 'static,
{
    let anno = if dashed {
        chart.draw_series(DashedLineSeries::new(points, 10, 6, style))?
    } else {
        chart.draw_series(LineSeries::new(points, style))?
    };
    // The legend's sample is dashed like its line: two strokes with a gap, or one unbroken.
    let gap = if dashed { (10, 16) } else { (12, 12) };
    anno.label(label).legend(move |(x, y)| {
        EmptyElement::at((x, y))
            + PathElement::new(vec![(0, 0), (gap.0, 0)], style.stroke_width(4))
            + PathElement::new(vec![(gap.1, 0), (26, 0)], style.stroke_width(4))
    });
    Ok(())
}

/// Draws the legend box of a chart.
pub(crate) fn legend<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    position: SeriesLabelPosition,
) -> DrawResult<DB>
where
    DB: DrawingBackend + 'a,
    X: plotters::coord::ranged1d::Ranged,
    Y: plotters::coord::ranged1d::Ranged,
{
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font((FONT, 15))
        .draw()
}

/// Splits `root` into the plot and, on its right, a column wide enough for the runs' labels.
pub(crate) fn with_legend_column<'a, DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: impl Iterator<Item = &'a RunData<'a>>,
) -> (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>) {
    let style = TextStyle::from((FONT, 15).into_font());
    let widest = runs
        .filter_map(|r| root.estimate_text_size(&r.label, &style).ok())
        .map(|(w, _)| w)
        .max()
        .unwrap_or(120);
    let (w, _) = root.dim_in_pixel();
    root.split_horizontally(w.saturating_sub(widest + 64))
}

/// The legend of a chart's runs as a column of its own (so no line runs under it): each run's
/// line sample — its colour, dashed on a second backend — and its label.
pub(crate) fn legend_column<'a, DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    runs: impl Iterator<Item = &'a RunData<'a>>,
) -> DrawResult<DB> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    let text = TextStyle::from((FONT, 15).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, r) in runs.enumerate() {
        let y = 70 + 22 * i as i32;
        let style = r.colour.stroke_width(4);
        let segments: &[(i32, i32)] = if r.dashed {
            &[(6, 16), (22, 32)]
        } else {
            &[(6, 32)]
        };
        for (a, b) in segments {
            area.draw(&PathElement::new(vec![(*a, y), (*b, y)], style))?;
        }
        area.draw(&Text::new(r.label.clone(), (40, y), text.clone()))?;
    }
    Ok(())
}

/// An axis number without noise: `3`, `2.5`, `0.25`, `-1`.
pub fn fmt_num(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Milliseconds in a readable form: `0.25`, `3`, `1500`.
pub fn fmt_ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{:.1}", v).trim_end_matches(".0").to_string()
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_has_its_own_colour() {
        let colours: Vec<RGBColor> = Strategy::all()
            .iter()
            .map(|s| strategy_colour(Some(*s)))
            .collect();
        for (i, a) in colours.iter().enumerate() {
            assert_ne!(
                *a,
                strategy_colour(None),
                "{i} looks like a shop of no strategy of ours"
            );
            for b in &colours[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn a_second_backend_gets_a_colour_of_its_own() {
        for s in Strategy::all() {
            let (name, base) = (s.as_str(), strategy_colour(Some(*s)));
            assert_eq!(tinted(base, 0), base);
            assert_ne!(tinted(base, 1), tinted(base, 0), "{name}");
            assert_ne!(tinted(base, 2), tinted(base, 1), "{name}");
            for t in Strategy::all() {
                assert_ne!(
                    tinted(base, 1),
                    tinted(strategy_colour(Some(*t)), 0),
                    "{name} / {t:?}"
                );
            }
        }
    }

    #[test]
    fn milliseconds_are_printed_without_noise() {
        assert_eq!(fmt_ms(0.25), "0.25");
        assert_eq!(fmt_ms(3.0), "3");
        assert_eq!(fmt_ms(12.5), "12.5");
        assert_eq!(fmt_ms(1500.0), "1500");
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(-0.0), "0");
        assert_eq!(fmt_num(200.0), "200");
    }
}
