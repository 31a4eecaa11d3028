//! The post-mortem's law, measured: "the oversell grows almost linearly with concurrency".
//! `compare` fires short rushes of buyers at `naive` at five arrival rates or more, the stock
//! and the shop's business logic kept, and fits a line to the units oversold at the peak
//! against the rate (least squares, with its R²): `report.json`'s `law`, a table and a chart
//! (`law-<backend>.svg`/`.png`) in `report.md` and `report.html`. Each point is an ordinary
//! run whose report sits under `law/`; `sweep::law` runs them.

use super::charts::{strategy_colour, Rendered};
use super::markup::md_cell;
use crate::inventory::Strategy;
use crate::report::charts::line::{line_chart, Chart, Line};
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::path::Path;

/// One strategy's oversell against the rush on one backend.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Law {
    pub strategy: Strategy,
    pub backend: String,
    /// The units each rush sold (the scenario's stock).
    pub stock: i64,
    /// The business logic between check and write (`naive_gap`), ms.
    pub gap_ms: f64,
    /// How each rush was made: buyers, arrival, what they did after ordering.
    pub rush: String,
    pub points: Vec<LawPoint>,
    /// The line fitted to (rate, units oversold at the peak); `None` with fewer than two
    /// points measured.
    pub fit: Option<Fit>,
}

/// One rush: its arrival rate and what it oversold.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LawPoint {
    /// Buyers arriving per second (planned).
    pub rate: f64,
    /// Units promised beyond the stock at once (the oracle's headline; `None`: not measured).
    pub oversell: Option<i64>,
    /// Units oversold at the end.
    pub oversold_at_end: Option<i64>,
    /// Order requests in flight on average while buyers arrived (Little's law: orders answered
    /// per second times their mean latency; from the run's order histogram).
    pub in_flight: Option<f64>,
    /// The run was generator-bound (its rate was not what was sent).
    #[serde(default)]
    pub generator_bound: bool,
    /// The run's report folder, relative to the compare's.
    pub report: String,
}

/// A least-squares line `y = slope·x + intercept` and how much of y's variance it explains.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Fit {
    pub slope: f64,
    pub intercept: f64,
    pub r2: f64,
}

/// The least-squares line through `points`; `None` with fewer than two distinct x.
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx <= f64::EPSILON {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let ss_tot: f64 = points.iter().map(|p| (p.1 - my).powi(2)).sum();
    let ss_res: f64 = points
        .iter()
        .map(|p| (p.1 - (slope * p.0 + intercept)).powi(2))
        .sum();
    let r2 = if ss_tot <= f64::EPSILON {
        1.0
    } else {
        1.0 - ss_res / ss_tot
    };
    Some(Fit {
        slope,
        intercept,
        r2,
    })
}

impl Law {
    /// The measured points: (rate, units oversold at the peak), one per rate in rising order,
    /// the median of the rushes at that rate (one rush stalled by the machine moves nothing).
    pub fn measured(&self) -> Vec<(f64, f64)> {
        let mut by_rate: Vec<(f64, Vec<i64>)> = Vec::new();
        for p in &self.points {
            let Some(o) = p.oversell else { continue };
            match by_rate.iter_mut().find(|(r, _)| *r == p.rate) {
                Some((_, v)) => v.push(o),
                None => by_rate.push((p.rate, vec![o])),
            }
        }
        by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
        by_rate
            .into_iter()
            .map(|(rate, mut v)| {
                v.sort_unstable();
                let n = v.len();
                let median = if n % 2 == 1 {
                    v[n / 2] as f64
                } else {
                    (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
                };
                (rate, median)
            })
            .collect()
    }

    /// The rushes by rate (in the order they ran at each).
    pub fn by_rate(&self) -> Vec<&LawPoint> {
        let mut v: Vec<&LawPoint> = self.points.iter().collect();
        v.sort_by(|a, b| a.rate.total_cmp(&b.rate));
        v
    }

    /// The line through [`Law::measured`].
    pub fn fitted(mut self) -> Self {
        self.fit = fit(&self.measured());
        self
    }

    /// How the rushes were made, in a few words: `5 rushes` or `5 rates × 3 rushes, the median
    /// at each`.
    fn rushes(&self) -> String {
        let rates = self.measured().len().max(1);
        let per = self.points.len().div_ceil(rates);
        if per > 1 {
            format!("{rates} rates × {per} rushes, the median at each,")
        } else {
            format!("{} rushes", self.points.len())
        }
    }

    /// The law in one sentence: `naive/postgres: +2.3 units oversold per 100 buyers/s (R² 0.97)`.
    pub fn sentence(&self) -> String {
        match self.fit {
            Some(f) => format!(
                "{}/{}: {:+.1} units oversold at the peak per 100 buyers/s more (R² {:.2}, {} of {} units, {} ms of business logic between check and write)",
                self.strategy,
                self.backend,
                f.slope * 100.0,
                f.r2,
                self.rushes(),
                self.stock,
                self.gap_ms
            ),
            None => format!(
                "{}/{}: too few rushes measured to fit a line",
                self.strategy, self.backend
            ),
        }
    }

    fn chart_name(&self) -> String {
        format!("law-{}-{}", self.strategy, self.backend)
    }

    /// Draws the chart into `dir`: the measured points and the fitted line.
    pub fn draw(&self, dir: &Path) -> anyhow::Result<Rendered> {
        let measured = self.measured();
        let mut lines = vec![Line {
            label: format!("{} (measured, the median at each rate)", self.strategy),
            colour: strategy_colour(Some(self.strategy)),
            points: measured.clone(),
            mark: None,
        }];
        if let Some(f) = self.fit {
            let (lo, hi) = measured
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
            lines.push(Line {
                label: format!(
                    "fit: {:.3}·rate {:+.1} (R² {:.2})",
                    f.slope, f.intercept, f.r2
                ),
                colour: plotters::style::RGBColor(0x44, 0x44, 0x44),
                points: vec![
                    (lo, f.slope * lo + f.intercept),
                    (hi, f.slope * hi + f.intercept),
                ],
                mark: None,
            });
        }
        let title = format!(
            "{} on {}: units oversold at the peak against the rush",
            self.strategy, self.backend
        );
        line_chart(
            dir,
            &Chart {
                name: &self.chart_name(),
                title: &title,
                caption: self.sentence(),
                x_desc: "arrival rate (buyers/s)",
                y_desc: "units oversold at the peak",
                log_x: false,
            },
            &lines,
        )
    }
}

/// The laws as Markdown: a sentence, the chart and the table per law.
pub fn markdown(laws: &[Law]) -> String {
    let mut s = String::new();
    if laws.is_empty() {
        return s;
    }
    let _ = writeln!(s, "\n## Oversell against the rush\n");
    let _ = writeln!(
        s,
        "The post-mortem: a non-atomic read-check-write oversells with certainty, and the \
         oversell grows almost linearly with concurrency. Each row is a rush of buyers at one \
         arrival rate on the same stock (its own report under `law/`); each point of the chart \
         is the median of the rushes at its rate, and the line a least-squares fit through \
         them.\n"
    );
    for law in laws {
        let _ = writeln!(s, "**{}**\n", md_cell(&law.sentence()));
        let _ = writeln!(s, "![{0}]({0}.svg)\n", law.chart_name());
        let _ = writeln!(s, "Rush: {}.\n", md_cell(&law.rush));
        let _ = writeln!(
            s,
            "| arrival rate (buyers/s) | oversold at the peak | at the end | orders in flight | report |"
        );
        let _ = writeln!(s, "|---:|---:|---:|---:|---|");
        for p in law.by_rate() {
            let n = |v: Option<i64>| v.map_or("n/a".into(), |v| v.to_string());
            let _ = writeln!(
                s,
                "| {:.0}{} | {} | {} | {} | [{}]({}/report.md) |",
                p.rate,
                if p.generator_bound { " ⚠" } else { "" },
                n(p.oversell),
                n(p.oversold_at_end),
                p.in_flight.map_or("n/a".into(), |v| format!("{v:.1}")),
                md_cell(&p.report),
                p.report
            );
        }
        s.push('\n');
    }
    s
}

/// The laws for the HTML page: a sentence and the table per law, pointing at its chart.
pub fn html(laws: &[Law]) -> String {
    let esc = super::markup::escape;
    let mut s = String::new();
    if laws.is_empty() {
        return s;
    }
    s.push_str("<h2 id=\"law\">Oversell against the rush</h2>\n<p>The post-mortem: a non-atomic read-check-write oversells with certainty, and the oversell grows almost linearly with concurrency. Each row is a rush of buyers at one arrival rate on the same stock; each point of the chart is the median of the rushes at its rate, and the line a least-squares fit through them (chart below).</p>\n");
    for law in laws {
        let _ = writeln!(
            s,
            "<p><b>{}</b> — <a href=\"#{}\">chart</a>. Rush: {}.</p>\n<table class=\"law\"><tr><th>arrival rate (buyers/s)</th><th>oversold at the peak</th><th>at the end</th><th>orders in flight</th><th>report</th></tr>",
            esc(&law.sentence()),
            esc(&law.chart_name()),
            esc(&law.rush)
        );
        for p in law.by_rate() {
            let n = |v: Option<i64>| v.map_or("n/a".into(), |v| v.to_string());
            let _ = writeln!(
                s,
                "<tr><td>{:.0}</td><td>{}</td><td>{}</td><td>{}</td><td><a href=\"{}/report.html\">{}</a></td></tr>",
                p.rate,
                n(p.oversell),
                n(p.oversold_at_end),
                p.in_flight.map_or("n/a".into(), |v| format!("{v:.1}")),
                esc(&p.report),
                esc(&p.report)
            );
        }
        s.push_str("</table>\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_through_exact_points_has_r2_of_one_and_noise_lowers_it() {
        let exact = [(100.0, 3.0), (200.0, 5.0), (300.0, 7.0), (400.0, 9.0)];
        let f = fit(&exact).unwrap();
        assert!((f.slope - 0.02).abs() < 1e-9 && (f.intercept - 1.0).abs() < 1e-9);
        assert!((f.r2 - 1.0).abs() < 1e-9);
        let noisy = [(100.0, 3.0), (200.0, 8.0), (300.0, 5.0), (400.0, 9.0)];
        let g = fit(&noisy).unwrap();
        assert!(g.r2 < 0.9 && g.r2 > 0.0, "{g:?}");
        assert!(fit(&[(1.0, 1.0)]).is_none());
        assert!(fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none(), "one x: no line");
    }

    fn point(rate: f64, oversell: i64) -> LawPoint {
        LawPoint {
            rate,
            oversell: Some(oversell),
            oversold_at_end: Some(oversell),
            in_flight: None,
            generator_bound: false,
            report: format!("law/rush-{rate}"),
        }
    }

    #[test]
    fn the_line_goes_through_each_rates_median_so_one_stalled_rush_moves_nothing() {
        // Three rounds of three rates, interleaved as the rushes run; 720's second rush stalled.
        let oversold = [[5, 10, 15], [6, 92, 14], [4, 11, 16]];
        let points = oversold
            .iter()
            .flat_map(|round| [240.0, 480.0, 720.0].into_iter().zip(*round))
            .map(|(rate, o)| point(rate, o))
            .collect();
        let law = Law {
            strategy: Strategy::Naive,
            backend: "postgres".into(),
            stock: 100,
            gap_ms: 20.0,
            rush: String::new(),
            points,
            fit: None,
        }
        .fitted();
        assert_eq!(law.measured(), [(240.0, 5.0), (480.0, 11.0), (720.0, 15.0)]);
        let f = law.fit.unwrap();
        assert!(
            (f.slope - 10.0 / 480.0).abs() < 1e-9 && f.r2 > 0.98,
            "{f:?}"
        );
        assert!(
            law.sentence()
                .contains("3 rates × 3 rushes, the median at each, of 100 units"),
            "{}",
            law.sentence()
        );
        let one = Law {
            points: vec![point(240.0, 5), point(480.0, 9)],
            ..law
        }
        .fitted();
        assert!(
            one.sentence().contains("(R² 1.00, 2 rushes of 100 units"),
            "{}",
            one.sentence()
        );
    }
}
