//! Reading `oversell.report/v1` files: each is rewritten into the current shape before it is
//! deserialized, so `diff` compares old reports with new ones.
//!
//! What changed in v2: a run stores the oracle's findings once, flattened into the run (v1 kept
//! a `findings` object and copied `sold`, `oversell`, ... next to it); a run names its shop with
//! a typed `shop` tag (`reference` with `strategy` and `backend`, or `foreign` with `host`,
//! `url` and `oracle`) instead of the strings `strategy`/`backend`/`target`; the scenario
//! summary no longer repeats the item's stock and purchase limit (they are in `spec.item`).

use anyhow::{bail, Context};
use serde_json::{Map, Value};

/// The schema id of the files this module reads.
pub const SCHEMA: &str = "oversell.report/v1";

/// The run fields v1 copied from its `findings`.
const COPIED: [&str; 11] = [
    "initial_stock",
    "sold",
    "oversell",
    "peak_oversell",
    "undersell",
    "negative_stock",
    "conservation_drift",
    "redis_drift",
    "lost_acks",
    "phantom_orders",
    "duplicate_buyers",
];

/// What v1 wrote as a reference run's `target`.
const REFERENCE_TARGET: &str = "reference shop";

/// Rewrites a v1 report (as JSON) into the current schema.
pub fn upgrade(report: &mut Value) -> anyhow::Result<()> {
    let Some(top) = report.as_object_mut() else {
        bail!("a report is a JSON object");
    };
    top.insert("schema".into(), super::SCHEMA.into());
    if let Some(scenario) = top.get_mut("scenario").and_then(Value::as_object_mut) {
        scenario.remove("initial_stock");
        scenario.remove("purchase_limit");
    }
    let runs = top
        .get_mut("runs")
        .and_then(Value::as_array_mut)
        .context("a report has a list of runs")?;
    for (i, run) in runs.iter_mut().enumerate() {
        let run = run
            .as_object_mut()
            .with_context(|| format!("run {i} is not an object"))?;
        upgrade_run(run).with_context(|| format!("run {i}"))?;
    }
    Ok(())
}

fn upgrade_run(run: &mut Map<String, Value>) -> anyhow::Result<()> {
    let Some(Value::Object(findings)) = run.remove("findings") else {
        bail!("no findings object");
    };
    for k in COPIED {
        run.remove(k);
    }
    run.extend(findings);
    let text = |run: &mut Map<String, Value>, k: &str| match run.remove(k) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(anyhow::anyhow!("no {k} string")),
    };
    let strategy = text(run, "strategy")?;
    let backend = text(run, "backend")?;
    let target = text(run, "target")?;
    if target == REFERENCE_TARGET {
        run.insert("shop".into(), "reference".into());
        run.insert("strategy".into(), strategy.into());
        run.insert("backend".into(), backend.into());
    } else {
        let oracle = match backend.as_str() {
            "sql oracle" => "sql",
            "http oracle" => "http",
            _ => "none",
        };
        run.insert("shop".into(), "foreign".into());
        run.insert("host".into(), strategy.into());
        run.insert("url".into(), target.into());
        run.insert("oracle".into(), oracle.into());
    }
    Ok(())
}

/// A real v1 report (one naive run on PostgreSQL, written by oversell before v2).
#[cfg(test)]
pub(crate) const FIXTURE: &str = include_str!("../../tests/fixtures/report-v1.json");

/// [`FIXTURE`] (or another v1 report), upgraded and read.
#[cfg(test)]
pub(crate) fn read(mut v: Value) -> super::Report {
    upgrade(&mut v).unwrap();
    serde_json::from_value(v).unwrap()
}

/// [`FIXTURE`]'s run once per reference strategy on each backend, `repeats` times each (the
/// longest labels a terminal table meets); `each` adjusts a run given its repeat number.
#[cfg(test)]
pub(crate) fn every_strategy(
    repeats: i64,
    each: impl Fn(&mut super::RunReport, i64),
) -> super::Report {
    let mut r = read(serde_json::from_str(FIXTURE).unwrap());
    let one = r.runs[0].clone();
    r.runs.clear();
    for backend in [
        crate::store::Backend::Postgres,
        crate::store::Backend::Mysql,
    ] {
        for &strategy in crate::inventory::Strategy::all() {
            for repeat in 0..repeats {
                let mut run = one.clone();
                run.shop = super::Shop::strategy_on(strategy, backend);
                each(&mut run, repeat);
                r.runs.push(run);
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{OracleKind, Shop};

    #[test]
    fn a_v1_report_reads_with_every_finding_in_its_one_place() {
        let v1: Value = serde_json::from_str(FIXTURE).unwrap();
        let r = read(v1.clone());
        let (old, new) = (&v1["runs"][0], &r.runs[0]);
        assert_eq!(r.schema, crate::report::SCHEMA);
        assert_eq!(new.strategy_name(), old["strategy"]);
        assert_eq!(new.backend_name(), old["backend"]);
        assert_eq!(new.shop.target, REFERENCE_TARGET);
        assert_eq!(new.findings.oversell, old["oversell"].as_i64());
        assert_eq!(new.findings.sold, old["findings"]["sold"].as_i64());
        assert_eq!(new.findings.verdict, old["findings"]["verdict"]);
        assert_eq!(
            new.findings.initial_stock,
            old["initial_stock"].as_i64().unwrap()
        );
        assert_eq!(r.scenario.spec.item.stock, new.findings.initial_stock);
        assert_eq!(
            new.order_latency().unwrap().p99_ms,
            old["requests"]["order"]["latency"]["p99_ms"]
                .as_f64()
                .unwrap()
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["runs"][0]["oversell"], old["oversell"],
            "v2 keeps the path"
        );
        assert!(json["runs"][0].get("findings").is_none());
    }

    #[test]
    fn a_v1_foreign_run_becomes_a_foreign_shop() {
        let mut v1: Value = serde_json::from_str(FIXTURE).unwrap();
        let run = &mut v1["runs"][0];
        run["strategy"] = "127.0.0.1:9000".into();
        run["backend"] = "sql oracle".into();
        run["target"] = "http://127.0.0.1:9000".into();
        let r = read(v1);
        assert_eq!(
            r.runs[0].shop,
            Shop {
                name: "127.0.0.1:9000".into(),
                detail: OracleKind::Sql.as_str().into(),
                target: "http://127.0.0.1:9000".into(),
                strategy: None,
            }
        );
        assert_eq!(r.runs[0].label(true), "127.0.0.1:9000/sql oracle");
    }
}
