//! The terminal table printed at the end of `run` / `compare`.

use super::Report;
use std::fmt::Write;

/// A fixed-width table of the headline figures.
pub fn render(r: &Report) -> String {
    let mb = r.runs.iter().any(|x| x.backend != r.runs[0].backend);
    let header = [
        "strategy",
        "oversold",
        "avg ms",
        "DB peak QPS",
        "errors",
        "sold/stock",
        "lost acks",
        "dup buyers",
        "p99 ms",
        "orders/s",
    ];
    let rows: Vec<Vec<String>> = r
        .runs
        .iter()
        .map(|run| {
            let lat = run.order_latency();
            vec![
                run.label(mb),
                run.oversell_cell(),
                lat.map_or("n/a".into(), |l| format!("{:.1}", l.mean_ms)),
                run.db_qps
                    .as_ref()
                    .map_or("n/a".into(), |q| format!("{:.0}", q.peak)),
                format!("{:.2}%", run.error_rate * 100.0),
                format!(
                    "{}/{}",
                    run.sold.map_or("?".into(), |v| v.to_string()),
                    run.initial_stock
                ),
                run.lost_acks.map_or("n/a".into(), |v| v.to_string()),
                run.duplicate_buyers.map_or("n/a".into(), |v| v.to_string()),
                lat.map_or("n/a".into(), |l| format!("{:.1}", l.p99_ms)),
                format!("{:.0}", run.order_throughput_rps),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    let line = |cells: &[String]| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    let _ = writeln!(s, "{}", line(&header.map(String::from)));
    let _ = writeln!(
        s,
        "{}",
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("  ")
    );
    for row in &rows {
        let _ = writeln!(s, "{}", line(row));
    }
    for run in &r.runs {
        let _ = writeln!(s, "{}: {}", run.label(mb), run.findings.verdict);
    }
    s
}
