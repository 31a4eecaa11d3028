//! Tables: the headline columns `report.md` and `report.html` share, the terminal table
//! printed at the end of `run` / `compare` / `gate` / `attack`, and the fixed-width text layout
//! the terminal tables (this one and the gate's verdict) use. Metric cells come from the
//! catalog ([`crate::metric`], read through [`super::catalog`]).

use super::{Report, RunReport};
use crate::metric::Metric;
use std::fmt::Write;

/// A column of a run table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// A catalog metric (oversold units also show the peak when cancels covered some).
    Metric(Metric),
    /// Units sold of the initial stock (oracle).
    SoldOfStock,
    /// Order latency p50 / p99 / p99.9.
    Latencies,
    /// From the sale opening to the first sold-out answer.
    SellOut,
    /// Peak Redis commands per second.
    RedisPeak,
}

/// The headline table of `report.md` and `report.html`: the post-mortem's four metrics first.
pub const HEADLINE: &[Column] = &[
    Column::Metric(Metric::Oversell),
    Column::Metric(Metric::ClientOversell),
    Column::Metric(Metric::MeanMs),
    Column::Metric(Metric::DbQpsPeak),
    Column::Metric(Metric::ErrorRate),
    Column::SoldOfStock,
    Column::Metric(Metric::LostAcks),
    Column::Metric(Metric::DeadLetters),
    Column::Metric(Metric::DuplicateBuyers),
    Column::Metric(Metric::Undersell),
    Column::Latencies,
    Column::Metric(Metric::Throughput),
    Column::SellOut,
    Column::RedisPeak,
];

/// The terminal table's columns: the headline's that fit a terminal, then order p99.
pub fn terminal() -> impl Iterator<Item = Column> {
    HEADLINE
        .iter()
        .copied()
        .filter(|c| {
            !matches!(
                c,
                Column::Metric(Metric::Undersell)
                    | Column::Metric(Metric::DeadLetters)
                    | Column::Latencies
                    | Column::SellOut
                    | Column::RedisPeak
            )
        })
        .chain([
            Column::Metric(Metric::P99Ms),
            Column::Metric(Metric::ServiceP99Ms),
            Column::Metric(Metric::SendLagP99Ms),
        ])
}

impl Column {
    /// The column's header.
    pub fn header(self) -> &'static str {
        match self {
            Column::Metric(m) => m.spec().column,
            Column::SoldOfStock => "sold / stock",
            Column::Latencies => "order p50 / p99 / p99.9",
            Column::SellOut => "sell-out",
            Column::RedisPeak => "Redis peak ops/s",
        }
    }

    /// A run's cell, as plain text.
    pub fn cell(self, run: &RunReport) -> String {
        match self {
            Column::Metric(Metric::Oversell) => run.oversell_cell(),
            Column::Metric(m) => m.show(run),
            Column::SoldOfStock => format!(
                "{} / {}",
                run.findings
                    .sold
                    .map_or_else(|| "n/a".into(), |v| v.to_string()),
                run.findings.initial_stock
            ),
            Column::Latencies => {
                let ms = [Metric::P50Ms, Metric::P99Ms, Metric::P999Ms]
                    .map(|m| m.read(run).map(|v| m.number(v)));
                match ms {
                    [Ok(a), Ok(b), Ok(c)] => format!("{a} / {b} / {c} ms"),
                    _ => "n/a".into(),
                }
            }
            Column::SellOut => run
                .time_to_sell_out_s
                .map_or_else(|| "never".into(), |t| format!("{t:.1} s")),
            Column::RedisPeak => run
                .redis_ops
                .as_ref()
                .map_or_else(|| "—".into(), |q| format!("{:.0}", q.peak)),
        }
    }
}

/// How a text column is aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A fixed-width text table: header, a rule of dashes, rows; columns two spaces apart.
pub fn text(header: &[String], rows: &[Vec<String>], align: &[Align]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .chain([&header.to_vec()])
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let cells: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(
                |(i, (c, w))| match align.get(i).copied().unwrap_or(Align::Left) {
                    Align::Left => format!("{c:<w$}"),
                    Align::Right => format!("{c:>w$}"),
                },
            )
            .collect();
        cells.join("  ").trim_end().to_string()
    };
    let mut s = String::new();
    let _ = writeln!(s, "{}", line(header));
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    let _ = writeln!(s, "{}", rule.join("  "));
    for row in rows {
        let _ = writeln!(s, "{}", line(row));
    }
    s
}

/// The terminal table of the headline figures, then each run's verdict.
pub fn render(r: &Report) -> String {
    let mb = r.multi_backend();
    let header: Vec<String> = std::iter::once("strategy")
        .chain(terminal().map(Column::header))
        .map(String::from)
        .collect();
    let rows: Vec<Vec<String>> = super::repeats::groups(r)
        .into_iter()
        .map(|(_, runs)| {
            std::iter::once(super::repeats::row_label(&runs, mb))
                .chain(terminal().map(|c| repeats_cell(c, &runs)))
                .collect()
        })
        .collect();
    let mut align = vec![Align::Right; header.len()];
    align[0] = Align::Left;
    let mut s = text(&header, &rows, &align);
    for run in &r.runs {
        let _ = writeln!(s, "{}: {}", run.run_label(mb), run.findings.verdict);
        if let Some(why) = super::details::generator_bound(run) {
            let _ = writeln!(s, "{}: GENERATOR-BOUND: {why}", run.run_label(mb));
        }
        if let Some(retries) = super::details::retries_line(run) {
            let _ = writeln!(s, "{}: {retries}", run.run_label(mb));
        }
    }
    if super::repeats::repeated(r) {
        let _ = writeln!(s, "{}", super::repeats::NOTE);
    }
    if let Some((header, rows)) = super::faults::table(r) {
        let _ = writeln!(s, "\nWhat each design lost under faults:");
        let mut align = vec![Align::Right; header.len()];
        align[0] = Align::Left;
        s.push_str(&text(&header, &rows, &align));
        let _ = writeln!(s, "{}", super::faults::NOTE);
    }
    s
}

/// A column's cell over the repeats: a metric as `median (min–max)` (with the run's unit for
/// a database rate), any other column each repeat's value when they differ.
pub fn repeats_cell(c: Column, runs: &[&RunReport]) -> String {
    if runs.len() == 1 {
        return c.cell(runs[0]);
    }
    match c {
        Column::Metric(m) => match super::repeats::spread(m, runs) {
            Some(s) => match m.unit_in(runs[0]) {
                Some(u) => format!("{} {}", s.show(m), u.counter),
                None => s.show(m),
            },
            None => "n/a".into(),
        },
        _ => {
            let mut cells: Vec<String> = runs.iter().map(|r| c.cell(r)).collect();
            cells.dedup();
            cells.join(" · ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::v1;

    #[test]
    fn a_database_rate_carries_the_unit_of_its_own_counter() {
        let mut r = v1::read(serde_json::from_str(v1::FIXTURE).unwrap());
        let table = render(&r);
        assert!(table.contains("DB peak QPS"), "{table}");
        assert!(table.contains(" transactions/s"), "{table}");
        let q = r.runs[0].db_qps.as_mut().unwrap();
        q.unit = "statements/s".into();
        q.source = "MySQL SHOW GLOBAL STATUS Questions (server-wide), delta per second".into();
        let cell = Column::Metric(Metric::DbQpsPeak).cell(&r.runs[0]);
        assert!(cell.ends_with(" Questions/s"), "{cell}");
        assert!(!render(&r).contains("queries/s"));
    }
}
