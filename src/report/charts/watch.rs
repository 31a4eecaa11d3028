//! The watched gauges on a run's timeline: when the run watched any, a panel of the order
//! latency p99 per second (beside the orders panel's sold units and errors), then one panel
//! per gauge with its samples, its peak and, when it drained, the drain marked.

use super::Line;
use crate::report::RunReport;
use plotters::style::RGBColor;

/// The latency line's colour.
const LATENCY: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// The colour of a gauge's peak and drain marks.
const MARK: RGBColor = RGBColor(0x44, 0x44, 0x44);

/// One extra panel of a run's timeline.
pub struct WatchPanel<'a> {
    pub title: String,
    pub y_desc: &'static str,
    what: What<'a>,
}

enum What<'a> {
    Latency(&'a [f64]),
    Gauge(&'a crate::watch::Gauge),
}

impl WatchPanel<'_> {
    /// Its lines, the gauge's in the run's colour.
    pub fn lines(&self, colour: RGBColor) -> Vec<Line> {
        match &self.what {
            What::Latency(p99) => vec![Line {
                name: "order p99 (ms)".into(),
                colour: LATENCY,
                dashed: false,
                points: p99
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i as f64 + 0.5, *v))
                    .collect(),
            }],
            What::Gauge(g) => {
                let mut lines = vec![Line {
                    name: "samples".into(),
                    colour,
                    dashed: false,
                    points: g.series.clone(),
                }];
                let top = g.peak.unwrap_or(0.0).max(0.0);
                for (name, at) in [("peak", g.peak_at_s), ("drained", g.drained_at_s)] {
                    if let Some(t) = at {
                        lines.push(Line {
                            name: format!("{name} at {t:.1} s"),
                            colour: MARK,
                            dashed: true,
                            points: vec![(t, 0.0), (t, top)],
                        });
                    }
                }
                lines
            }
        }
    }
}

/// The run's extra panels (none when it watched no gauge).
pub fn panels(run: &RunReport) -> Vec<WatchPanel<'_>> {
    if run.watch.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if run.timeline.order_p99_ms.iter().any(|v| *v > 0.0) {
        out.push(WatchPanel {
            title: "Order latency p99 per second".into(),
            y_desc: "ms",
            what: What::Latency(&run.timeline.order_p99_ms),
        });
    }
    for (name, g) in &run.watch {
        let unread = if g.samples == 0 {
            " (no sample could be read: see the report's details)"
        } else {
            ""
        };
        out.push(WatchPanel {
            title: format!("watch.{name}{unread}"),
            y_desc: "value",
            what: What::Gauge(g),
        });
    }
    out
}

/// The caption's parts for the extra panels: where each figure comes from.
pub fn caption(run: &RunReport) -> Vec<String> {
    if run.watch.is_empty() {
        return Vec::new();
    }
    let mut parts = vec![
        "order p99: oversell HdrHistogram of the order answers of each second (full response time from the intended send)"
            .to_string(),
    ];
    for (name, g) in &run.watch {
        parts.push(format!(
            "watch.{name}: {} (baseline {}; dashed: its peak and its drain)",
            g.source,
            g.baseline.map_or("n/a".into(), |b| format!("{b}"))
        ));
    }
    parts
}
