//! The capacity charts: p99, error rate and sold-out time against the offered rate, one line per
//! strategy with its capacity marked, drawn with the report's
//! [`line_chart`](crate::report::charts::line::line_chart).

use super::report::CapacityReport;
use crate::report::charts::line::{line_chart, Chart, Line};
use crate::report::charts::{strategy_colour, Rendered};
use std::path::Path;

/// The capacity charts: p99, error rate and sold-out time against the offered rate.
pub fn capacity(dir: &Path, r: &CapacityReport) -> anyhow::Result<Vec<Rendered>> {
    type Pick = fn(&super::Probe) -> Option<f64>;
    let figures: [(&str, &str, &str, Pick); 3] = [
        (
            "capacity-p99",
            "Order latency p99 against the offered rate",
            "p99 (ms)",
            |p| p.p99_ms,
        ),
        (
            "capacity-error-rate",
            "Order error rate against the offered rate",
            "error rate (%)",
            |p| p.error_rate.map(|e| e * 100.0),
        ),
        (
            "capacity-sold-out",
            "Time to sell out against the offered rate",
            "sold out after (s)",
            |p| p.sold_out_s,
        ),
    ];
    let mut out = Vec::new();
    for (name, title, y, pick) in figures {
        let lines: Vec<Line> = r
            .outcomes
            .iter()
            .map(|o| {
                let mut points: Vec<(f64, f64)> = o
                    .probes
                    .iter()
                    .filter_map(|p| pick(p).map(|v| (p.rate_rps, v)))
                    .collect();
                points.sort_by(|a, b| a.0.total_cmp(&b.0));
                Line {
                    label: match o.capacity_rps {
                        Some(c) => format!("{} (capacity {})", o.subject, super::search::rate(c)),
                        None => o.subject.clone(),
                    },
                    colour: strategy_colour(o.strategy),
                    points,
                    mark: o.capacity_rps,
                }
            })
            .collect();
        out.push(line_chart(
            dir,
            &Chart {
                name,
                title,
                caption: format!(
                    "One point per probe, one line per subject; the dashed vertical line marks its capacity. Rates are {}. Source: each probe's own report (p99: order-latency HdrHistogram from the intended send; error rate: clients' records of first order attempts; sold out: the first sold-out answer).",
                    r.rate_unit
                ),
                x_desc: "offered rate (buyers/s, log scale)",
                y_desc: y,
                log_x: true,
            },
            &lines,
        )?);
    }
    Ok(out)
}
