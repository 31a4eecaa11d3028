//! What each design loses under faults: the strategy × fault table `compare` prints (terminal,
//! `report.md`, `report.html`) when its runs went through faults.
//!
//! Each run lists the faults it went through (`faults` in `report.json`, written by the fault
//! engine): when each was due, began and ended, and when the run was back to its pre-fault
//! stream lag, reconciliation residual and error rate (`recovered_ms`, `null` when it never
//! was), with what that judgement rested on (`recovery_basis`). Times are milliseconds after
//! the sale opened. A row is a run; its loss figures (oversell, lost acknowledged orders,
//! indeterminate attempts and how many of them committed) are the oracle's for the whole run,
//! every fault of it together; a column per fault (kind and due time) gives its recovery time:
//! from the fault's end to `recovered_ms`.

use super::{Report, RunReport};
use crate::nemesis::FaultKind;
use serde::{Deserialize, Serialize};

/// One fault a run went through, as `report.json` carries it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FaultWindow {
    /// `shop-kill`, `redis-restart`, `db-outage`, ... (stored as the fault's own spelling).
    pub kind: FaultKind,
    /// When it was due, ms after the sale opened.
    pub at_ms: u64,
    /// When it took effect.
    pub began_ms: u64,
    /// When it was undone.
    pub ended_ms: u64,
    /// When the run was back to its pre-fault state; `None`: not before the run ended.
    pub recovered_ms: Option<u64>,
    /// What recovery was judged by (the figures compared with their pre-fault values).
    #[serde(default)]
    pub recovery_basis: serde_json::Value,
}

impl FaultWindow {
    /// `redis-restart @1.0 s`: the fault's column in the table.
    pub fn label(&self) -> String {
        format!("{} @{:.1} s", self.kind, self.at_ms as f64 / 1000.0)
    }

    /// From the fault's end to recovery, ms (`None`: it never recovered).
    pub fn recovery_ms(&self) -> Option<u64> {
        self.recovered_ms.map(|r| r.saturating_sub(self.ended_ms))
    }

    /// The recovery cell: `1.2 s`, `not recovered`, or `skipped` (the fault does not apply
    /// to the run's strategy: its basis says why).
    pub fn recovery_text(&self) -> String {
        if matches!(&self.recovery_basis, serde_json::Value::String(s) if s.starts_with("skipped"))
        {
            return "skipped".into();
        }
        match self.recovery_ms() {
            Some(ms) => format!("{:.1} s", ms as f64 / 1000.0),
            None => "not recovered".into(),
        }
    }

    /// What recovery was judged by, as text.
    pub fn basis_text(&self) -> String {
        match &self.recovery_basis {
            serde_json::Value::Null => String::new(),
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(a) => a
                .iter()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect::<Vec<_>>()
                .join(", "),
            other => other.to_string(),
        }
    }
}

/// What the table says under it.
pub const NOTE: &str = "Oversell, lost acknowledged orders and indeterminate attempts (timeouts, broken connections, 5xx; how many of them committed an order, by their Idempotency-Key) are the oracle's figures for each whole run; each fault's column is its recovery time, from the fault's end until stream lag, reconciliation residual and error rate were back to their pre-fault values.";

/// The strategy × fault table: a header and one row per run; `None` when no run had faults.
pub fn table(r: &Report) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let mut faults: Vec<(String, FaultKind, u64)> = Vec::new();
    for f in r.runs.iter().flat_map(|run| &run.faults) {
        if !faults
            .iter()
            .any(|(_, k, at)| *k == f.kind && *at == f.at_ms)
        {
            faults.push((f.label(), f.kind, f.at_ms));
        }
    }
    if faults.is_empty() {
        return None;
    }
    faults.sort_by_key(|(_, kind, at)| (*at, kind.to_string()));
    let mb = r.multi_backend();
    let header: Vec<String> = ["strategy", "oversold units", "lost acks", "indeterminate"]
        .into_iter()
        .map(String::from)
        .chain(
            faults
                .iter()
                .map(|(label, _, _)| format!("{label}: recovery")),
        )
        .collect();
    let rows = r
        .runs
        .iter()
        .map(|run| {
            let cells = [
                run.run_label(mb),
                run.oversell_cell(),
                opt(run.findings.lost_acks),
                indeterminate(run),
            ];
            cells
                .into_iter()
                .chain(faults.iter().map(|(_, kind, at)| {
                    run.faults
                        .iter()
                        .find(|f| f.kind == *kind && f.at_ms == *at)
                        .map_or_else(|| "—".into(), FaultWindow::recovery_text)
                }))
                .collect()
        })
        .collect();
    Some((header, rows))
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "n/a".into(), |v| v.to_string())
}

/// `3 committed of 17`: indeterminate attempts and how many of them bought.
fn indeterminate(run: &RunReport) -> String {
    let f = &run.findings;
    match f.indeterminate_committed {
        Some(c) => format!("{c} committed of {}", f.indeterminate),
        None => format!("{} (committed: n/a)", f.indeterminate),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::v1;

    /// The shape the fault engine writes into each run of `report.json`.
    const FAULTS: &str = r#"[
        {"kind": "redis-restart", "at_ms": 1000, "began_ms": 1004, "ended_ms": 3010,
         "recovered_ms": 4210, "recovery_basis": ["stream_lag", "reconcile_residual", "error_rate"]},
        {"kind": "db-outage", "at_ms": 500, "began_ms": 502, "ended_ms": 2500,
         "recovered_ms": null, "recovery_basis": "error rate"}
    ]"#;

    #[test]
    fn fault_windows_read_and_write_the_kinds_as_older_reports_spell_them() {
        let windows: Vec<FaultWindow> = serde_json::from_str(FAULTS).unwrap();
        assert_eq!(windows[0].kind, FaultKind::RedisRestart);
        assert_eq!(windows[1].kind, FaultKind::DbOutage);
        let back = serde_json::to_value(&windows).unwrap();
        assert_eq!(back[0]["kind"], "redis-restart");
        assert_eq!(back[1]["kind"], "db-outage");
        for kind in FaultKind::ALL {
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(
                json,
                kind.as_str(),
                "{kind}: the name scenarios and flags use"
            );
        }
        let bad = FAULTS.replace("db-outage", "db-melt");
        assert!(serde_json::from_str::<Vec<FaultWindow>>(&bad).is_err());
    }

    #[test]
    fn a_compare_over_faults_gives_one_row_per_strategy_and_a_column_per_fault() {
        let mut r = v1::read(serde_json::from_str(v1::FIXTURE).unwrap());
        assert!(table(&r).is_none(), "no faults, no table");
        let mut second = r.runs[0].clone();
        r.runs[0].faults = serde_json::from_str(FAULTS).unwrap();
        r.runs[0].findings.lost_acks = Some(3);
        r.runs[0].findings.indeterminate = 17;
        r.runs[0].findings.indeterminate_committed = Some(4);
        second.faults = vec![r.runs[0].faults[0].clone()];
        second.shop = crate::report::Shop::strategy_on(
            crate::inventory::Strategy::ForUpdate,
            crate::store::Backend::Postgres,
        );
        second.findings.indeterminate_committed = None;
        r.runs.push(second);

        let (header, rows) = table(&r).unwrap();

        assert_eq!(
            header,
            [
                "strategy",
                "oversold units",
                "lost acks",
                "indeterminate",
                "db-outage @0.5 s: recovery",
                "redis-restart @1.0 s: recovery"
            ]
        );
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0][2], "3");
        assert_eq!(rows[0][3], "4 committed of 17");
        assert_eq!(rows[0][4], "not recovered");
        assert_eq!(rows[0][5], "1.2 s", "from the fault's end to recovery");
        assert_eq!(rows[1][0], "for-update");
        assert_eq!(rows[1][4], "—", "this run had no db-outage");
        assert!(rows[1][3].ends_with("(committed: n/a)"));
        assert_eq!(
            r.runs[0].faults[0].basis_text(),
            "stream_lag, reconcile_residual, error_rate"
        );
        let back: Vec<FaultWindow> =
            serde_json::from_str(&serde_json::to_string(&r.runs[0].faults).unwrap()).unwrap();
        assert_eq!(back, r.runs[0].faults);
    }

    #[test]
    fn the_terminal_the_markdown_and_the_html_show_the_table_only_for_runs_with_faults() {
        let mut r = v1::read(serde_json::from_str(v1::FIXTURE).unwrap());
        let heading = "What each design lost under faults";
        assert!(!crate::report::table::render(&r).contains(heading));
        assert!(!crate::report::markdown::render(&r).contains(heading));
        r.runs[0].faults = serde_json::from_str(FAULTS).unwrap();
        let terminal = crate::report::table::render(&r);
        let md = crate::report::markdown::render(&r);
        let html = crate::report::html::render(&r, &[]);
        for text in [&terminal, &md, &html] {
            assert!(text.contains(heading), "{text}");
            assert!(text.contains("redis-restart @1.0 s: recovery"), "{text}");
        }
        assert!(md.contains("| naive | 133 (peak 142) | 0 |"), "{md}");
    }
}
