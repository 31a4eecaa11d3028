//! Each run's order latency as an HdrHistogram interval log (`latency-<strategy>-<backend>.hlog`,
//! V2 deflate, the format of the Java `HistogramLogWriter`), for HistogramLogAnalyzer,
//! `hdr-plot` and friends.
//!
//! Values are microseconds; the max column is divided by 1000 (milliseconds). Interval
//! timestamps are seconds after the sale opened: one interval per second of answers when the
//! report was built in-process (longer ones in a run past five minutes: the recorder keeps at
//! most 300), else one interval covering the whole run (a report read back
//! from `report.json` only carries the merged histogram). Merging every interval gives the
//! report's order latency histogram.

use super::RunReport;
use anyhow::Context;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use std::path::Path;
use std::time::Duration;

/// The tag on every interval.
pub const TAG: &str = "order";

/// `(start second, length, histogram)` of each non-empty interval of a run.
pub fn intervals(run: &RunReport) -> Vec<(Duration, Duration, Histogram<u64>)> {
    if let Some(m) = &run.measurements {
        if !m.order_intervals.is_empty() {
            return m
                .order_intervals
                .iter()
                .map(|(at, len, h)| (at, len, h.clone()))
                .collect();
        }
    }
    run.order_histogram()
        .filter(|h| !h.is_empty())
        .map(|h| {
            (
                Duration::ZERO,
                Duration::from_secs_f64(run.duration_s.max(0.0)),
                h,
            )
        })
        .into_iter()
        .collect()
}

/// The interval log of a run's order latency.
pub fn render(run: &RunReport) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut serializer = V2DeflateSerializer::new();
    {
        let mut w = IntervalLogWriterBuilder::new()
            .add_comment(&format!(
                "oversell order latency: strategy {}, backend {}, scenario {}",
                run.strategy_name(),
                run.backend_name(),
                run.scenario
            ))
            .add_comment("values in microseconds: full response time from each request's intended send time (all answers)")
            .add_comment("interval timestamps are seconds after the sale opened")
            .with_max_value_divisor(1000.0)
            .begin_log_with(&mut buf, &mut serializer)?;
        let tag = Tag::new(TAG);
        for (start, len, h) in intervals(run) {
            w.write_histogram(&h, start, len, tag)
                .map_err(|e| anyhow::anyhow!("writing an interval: {e:?}"))?;
        }
    }
    Ok(buf)
}

/// Writes `<dir>/latency-<slug>.hlog` for one run; returns the file name.
pub fn write(dir: &Path, run: &RunReport) -> anyhow::Result<String> {
    let name = format!("latency-{}.hlog", super::charts::run_slug(run));
    std::fs::write(dir.join(&name), render(run)?).with_context(|| format!("writing {name}"))?;
    Ok(name)
}
