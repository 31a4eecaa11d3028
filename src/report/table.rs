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

/// How wide the terminal result is by default (`--wide` lifts it).
pub const TERMINAL_WIDTH: usize = 100;

/// The default terminal table's candidates, most important first: as many as fit
/// [`TERMINAL_WIDTH`] are shown (oversold units always), in this order.
pub const NARROW: &[Column] = &[
    Column::Metric(Metric::Oversell),
    Column::Metric(Metric::LostAcks),
    Column::Metric(Metric::ErrorRate),
    Column::Metric(Metric::DbQpsPeak),
    Column::Metric(Metric::MeanMs),
    Column::Metric(Metric::P99Ms),
    Column::SoldOfStock,
    Column::Metric(Metric::ClientOversell),
    Column::Metric(Metric::Throughput),
];

/// The `--wide` terminal table's columns: the headline's that fit a wide terminal, then the
/// order, service and send-lag p99.
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

    /// The column's header in the default (narrow) terminal table: short where the full one
    /// is long ([`Column::header`] in the report and with `--wide`).
    pub fn narrow_header(self) -> &'static str {
        match self {
            Column::Metric(Metric::ClientOversell) => "client oversold",
            Column::Metric(Metric::ErrorRate) => "errors",
            Column::Metric(Metric::MeanMs) => "mean",
            Column::Metric(Metric::P99Ms) => "p99",
            Column::SoldOfStock => "sold/stock",
            c => c.header(),
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

/// The terminal table of the headline figures, then each run's verdict: [`render_for`]'s wide
/// form.
#[cfg(test)]
pub fn render(r: &Report) -> String {
    render_for(r, true)
}

/// The terminal result: by default the [`NARROW`] columns that fit [`TERMINAL_WIDTH`] and
/// every line wrapped to it; `wide`, every [`terminal`] column and lines as they are.
pub fn render_for(r: &Report, wide: bool) -> String {
    let mb = r.multi_backend();
    let groups = super::repeats::groups(r);
    let table = |columns: &[Column]| {
        let header: Vec<String> = std::iter::once("strategy")
            .chain(
                columns
                    .iter()
                    .map(|c| if wide { c.header() } else { c.narrow_header() }),
            )
            .map(String::from)
            .collect();
        let rows: Vec<Vec<String>> = groups
            .iter()
            .map(|(_, runs)| {
                std::iter::once(super::repeats::row_label(runs, mb))
                    .chain(columns.iter().map(|c| repeats_cell(*c, runs)))
                    .collect()
            })
            .collect();
        let mut align = vec![Align::Right; header.len()];
        align[0] = Align::Left;
        text(&header, &rows, &align)
    };
    let mut s = if wide {
        table(&terminal().collect::<Vec<_>>())
    } else {
        let mut shown: Vec<Column> = vec![NARROW[0]];
        for c in &NARROW[1..] {
            let mut more = shown.clone();
            more.push(*c);
            if width(&table(&more)) <= TERMINAL_WIDTH {
                shown = more;
            }
        }
        table(&shown)
    };
    let mut lines = Vec::new();
    for run in &r.runs {
        lines.push(format!("{}: {}", run.run_label(mb), run.findings.verdict));
        if let Some(why) = super::details::generator_bound(run) {
            lines.push(format!("{}: GENERATOR-BOUND: {why}", run.run_label(mb)));
        }
        if let Some(retries) = super::details::retries_line(run) {
            lines.push(format!("{}: {retries}", run.run_label(mb)));
        }
    }
    if super::repeats::repeated(r) {
        lines.push(super::repeats::NOTE.to_string());
    }
    lines.extend(super::bound_legend(r).map(str::to_string));
    for l in lines {
        let _ = writeln!(s, "{}", fit(&l, wide));
    }
    if let Some((header, rows)) = super::faults::table(r) {
        let _ = writeln!(s, "\nWhat each design lost under faults:");
        let mut align = vec![Align::Right; header.len()];
        align[0] = Align::Left;
        s.push_str(&text(&header, &rows, &align));
        let _ = writeln!(s, "{}", fit(super::faults::NOTE, wide));
    }
    if !wide {
        let _ = writeln!(s, "(more columns: --wide, or the report)");
    }
    s
}

/// The widest line of a text, in characters.
pub fn width(text: &str) -> usize {
    text.lines().map(|l| l.chars().count()).max().unwrap_or(0)
}

/// `text` for the terminal: each of its lines [`wrap`]ped to [`TERMINAL_WIDTH`], or as it is
/// with `--wide`.
pub fn fit(text: &str, wide: bool) -> String {
    if wide {
        return text.to_string();
    }
    text.split('\n')
        .map(|l| wrap(l, TERMINAL_WIDTH))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `line` folded at spaces to lines of at most `max` characters (a longer word stays whole),
/// the continuation lines indented two further than the line's own indent.
pub fn wrap(line: &str, max: usize) -> String {
    let body = line.trim_start_matches(' ');
    let indent = &line[..line.len() - body.len()];
    let mut out = String::new();
    let mut current = indent.to_string();
    for word in body.split(' ') {
        let len = current.chars().count();
        if len > indent.len() && len + 1 + word.chars().count() > max {
            out.push_str(current.trim_end());
            out.push('\n');
            current = format!("{indent}  {word}");
        } else {
            if len > indent.len() {
                current.push(' ');
            }
            current.push_str(word);
        }
    }
    out.push_str(&current);
    out
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
        let narrow = render_for(&r, false);
        assert!(narrow.contains(" Questions/s"), "{narrow}");
    }

    /// A compare of every strategy on both backends, repeated: the longest labels and cells.
    fn big_report() -> Report {
        v1::every_strategy(1, |_, _| {})
    }

    #[test]
    fn the_default_result_fits_a_hundred_columns_and_wide_shows_every_column() {
        let r = big_report();
        let narrow = render_for(&r, false);
        print!("{narrow}");
        for line in narrow.lines() {
            assert!(line.chars().count() <= TERMINAL_WIDTH, "{line:?}\n{narrow}");
        }
        assert!(narrow.contains("redis-buckets/mysql"), "{narrow}");
        assert!(narrow.starts_with("strategy  "), "{narrow}");
        for c in &NARROW[..5] {
            assert!(
                narrow.contains(c.narrow_header()),
                "{}: {narrow}",
                c.narrow_header()
            );
        }
        assert!(narrow.contains("--wide"), "{narrow}");
        let wide = render_for(&r, true);
        for c in terminal() {
            assert!(wide.contains(c.header()), "{}: {wide}", c.header());
        }
        println!("narrow: {} columns, wide: {}", width(&narrow), width(&wide));
        assert!(
            width(&wide) > TERMINAL_WIDTH,
            "the wide table is wider: {wide}"
        );
    }

    #[test]
    fn long_lines_fold_at_spaces() {
        let folded = wrap("aaa bbb ccc ddd", 7);
        assert_eq!(folded, "aaa bbb\n  ccc\n  ddd");
        assert_eq!(wrap("short", 100), "short");
        assert_eq!(wrap("averyverylongword x", 5), "averyverylongword\n  x");
        assert_eq!(
            wrap("  aaa bbb ccc", 9),
            "  aaa bbb\n    ccc",
            "its own indent kept"
        );
    }
}
