//! Each run's timelines as one CSV (`timeline-<strategy>-<backend>.csv`), one row per second
//! after the sale opened (negative seconds: probe samples taken before it opened).
//!
//! Order answers per second come from the clients' records (by the second the answer
//! arrived); every other column is a probe series sampled once a second (the sample taken in
//! that second; empty when the series was not sampled). The header is fixed, so the same
//! columns exist for every strategy; series not listed here are appended in name order, then
//! each watched gauge as `watch.<name>` (its sample of that second).

use super::RunReport;
use crate::metric::SeriesName;
use crate::traffic::recorder::Answer;
use anyhow::Context;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Order answer columns: `(column, answers counted in it)`.
pub const ORDER_COLUMNS: [(&str, &[Answer]); 9] = [
    ("orders_created", &[Answer::Created]),
    ("orders_sold_out", &[Answer::SoldOut]),
    ("orders_duplicate", &[Answer::Duplicate]),
    ("orders_rate_limited", &[Answer::RateLimited]),
    ("orders_busy", &[Answer::Busy]),
    ("orders_server_error", &[Answer::ServerError]),
    ("orders_timeout", &[Answer::Timeout]),
    ("orders_connect_error", &[Answer::ConnectError]),
    (
        "orders_other",
        &[
            Answer::Ok,
            Answer::Rejected,
            Answer::NotFound,
            Answer::Invalid,
            Answer::Unauthorized,
            Answer::Unclassified,
            Answer::Redirect,
        ],
    ),
];

/// Probe series columns, always present (empty where not sampled): every series of the
/// table but `db_sold`, in its order.
pub static SERIES_COLUMNS: std::sync::LazyLock<Vec<&'static str>> =
    std::sync::LazyLock::new(|| {
        SeriesName::ALL
            .into_iter()
            .filter(|s| *s != SeriesName::DbSold)
            .map(SeriesName::name)
            .collect()
    });

fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The header line's columns for a run.
pub fn header(run: &RunReport) -> Vec<String> {
    let mut cols = vec!["second".to_string(), "requests".to_string()];
    cols.extend(ORDER_COLUMNS.iter().map(|(c, _)| c.to_string()));
    cols.extend(SERIES_COLUMNS.iter().map(|c| c.to_string()));
    let mut extra: Vec<&str> = run
        .series
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| !SERIES_COLUMNS.contains(n))
        .collect();
    extra.sort_unstable();
    extra.dedup();
    cols.extend(extra.into_iter().map(String::from));
    cols.extend(run.watch.keys().map(|n| format!("watch.{n}")));
    cols
}

/// The CSV text of a run's timelines.
pub fn render(run: &RunReport) -> String {
    let cols = header(run);
    let watched: Vec<(String, &Vec<(f64, f64)>)> = run
        .watch
        .iter()
        .map(|(n, g)| (format!("watch.{n}"), &g.series))
        .collect();
    let named = run
        .series
        .iter()
        .map(|s| (s.name.as_str(), &s.points))
        .chain(watched.iter().map(|(n, p)| (n.as_str(), *p)));
    let mut by_second: BTreeMap<i64, BTreeMap<&str, f64>> = BTreeMap::new();
    for (name, points) in named {
        for (t, v) in points {
            by_second
                .entry(t.floor() as i64)
                .or_default()
                .insert(name, *v);
        }
    }
    let n = run.timeline.seconds.len() as i64;
    let first = by_second.keys().next().copied().unwrap_or(0).min(0);
    let last = by_second
        .keys()
        .next_back()
        .copied()
        .unwrap_or(0)
        .max(n - 1);
    let mut out = cols.join(",");
    out.push('\n');
    for second in first..=last {
        let i = usize::try_from(second).ok().filter(|i| (*i as i64) < n);
        let mut row = vec![second.to_string()];
        row.push(
            i.map_or(0, |i| run.timeline.requests.get(i).copied().unwrap_or(0))
                .to_string(),
        );
        for (_, answers) in ORDER_COLUMNS {
            let count: u64 = answers
                .iter()
                .filter_map(|a| run.timeline.orders.get(a))
                .map(|v| i.and_then(|i| v.get(i)).copied().unwrap_or(0))
                .sum();
            row.push(count.to_string());
        }
        let samples = by_second.get(&second);
        for c in &cols[2 + ORDER_COLUMNS.len()..] {
            row.push(
                samples
                    .and_then(|s| s.get(c.as_str()))
                    .map_or(String::new(), |v| num(*v)),
            );
        }
        let _ = writeln!(out, "{}", row.join(","));
    }
    out
}

/// Writes `<dir>/timeline-<slug>.csv` for one run; returns the file name.
pub fn write(dir: &Path, run: &RunReport) -> anyhow::Result<String> {
    let name = format!("timeline-{}.csv", super::charts::run_slug(run));
    std::fs::write(dir.join(&name), render(run)).with_context(|| format!("writing {name}"))?;
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_plainly() {
        assert_eq!(num(3.0), "3");
        assert_eq!(num(0.5), "0.5");
        assert_eq!(num(1.0 / 3.0), "0.3333");
        assert_eq!(num(-2.0), "-2");
    }
}
