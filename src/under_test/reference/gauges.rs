//! The reference shop's own gauges in the watch view: its pool's connections in use and
//! tasks waiting for one, and (redis-lua, redis-buckets) its stream backlog, taken from the
//! probes' once-a-second scrape of the shop's `/metrics` (summed over `--shops K`; the
//! stream's gauges, which every shop reads from one stream, taken once). They get the same
//! [`Gauge`] figures as a `[watch]` gauge of a foreign shop, so both paths read alike; a
//! `[watch]` gauge of the same name wins.

use crate::metric::SeriesName;
use crate::probe::Series;
use crate::watch::Gauge;
use std::collections::BTreeMap;

/// The built-in gauges' names, and the series each sums.
pub const GAUGES: [(&str, &[SeriesName]); 5] = [
    ("shop_pool_in_use", &[SeriesName::PoolInUse]),
    ("shop_pool_waiting", &[SeriesName::PoolWaiting]),
    (
        "shop_stream_backlog",
        &[SeriesName::StreamLag, SeriesName::StreamPending],
    ),
    ("shop_cas_retries", &[SeriesName::CasRetries]),
    ("shop_pool_wait_s", &[SeriesName::PoolWait]),
];

/// The reference shop's gauges from the run's probe `series` (those it sampled).
pub fn gauges(series: &[Series], rush_at_s: Option<f64>) -> BTreeMap<String, Gauge> {
    let mut out = BTreeMap::new();
    for (name, parts) in GAUGES {
        let found: Vec<&Series> = parts
            .iter()
            .filter_map(|p| series.iter().find(|s| s.name == p.name()))
            .filter(|s| !s.points.is_empty())
            .collect();
        if found.len() != parts.len() {
            continue;
        }
        let points = sum_at_times(&found);
        let metrics: Vec<&str> = parts.iter().filter_map(|p| p.shop_metric()).collect();
        let source = format!(
            "the reference shop's /metrics {} (the probe's 1 s scrape)",
            metrics.join(" + ")
        );
        out.insert(
            name.to_string(),
            Gauge::from_series(source, points, 0, None, rush_at_s),
        );
    }
    out
}

/// The series summed at the times the first one has (the probe samples them together).
fn sum_at_times(series: &[&Series]) -> Vec<(f64, f64)> {
    let Some((first, rest)) = series.split_first() else {
        return Vec::new();
    };
    first
        .points
        .iter()
        .filter_map(|&(t, v)| {
            let others = rest
                .iter()
                .map(|s| s.points.iter().find(|p| p.0 == t).map(|p| p.1))
                .sum::<Option<f64>>()?;
            Some((t, v + others))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: SeriesName, points: &[(f64, f64)]) -> Series {
        Series {
            name: name.name().into(),
            unit: "count".into(),
            source: "shop /metrics".into(),
            points: points.to_vec(),
        }
    }

    #[test]
    fn the_stream_backlog_is_lag_plus_pending_and_absent_series_give_no_gauge() {
        let s = vec![
            series(SeriesName::StreamLag, &[(0.0, 5.0), (1.0, 2.0), (2.0, 0.0)]),
            series(
                SeriesName::StreamPending,
                &[(0.0, 1.0), (1.0, 3.0), (2.0, 0.0)],
            ),
            series(SeriesName::PoolInUse, &[(0.0, 1.0), (1.0, 4.0)]),
        ];
        let g = gauges(&s, Some(0.0));
        let backlog = &g["shop_stream_backlog"];
        assert_eq!(backlog.series, vec![(0.0, 6.0), (1.0, 5.0), (2.0, 0.0)]);
        assert!(backlog
            .source
            .contains("oversell_stream_lag + oversell_stream_pending"));
        assert_eq!(g["shop_pool_in_use"].peak, Some(4.0));
        assert!(!g.contains_key("shop_pool_waiting"), "not sampled");
    }
}
