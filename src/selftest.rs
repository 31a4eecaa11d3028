//! `oversell selftest`: what the harness catches, shown on the user's own machine.
//!
//! For each known [`Defect`] it fires the bundled scenario meant for it
//! (`scenarios/selftest-<defect>.toml`) at a reference shop with that defect built in, and
//! judges the run as `gate` does ([`Verdict::judge`], the scenario's `[thresholds]` over the
//! defaults, nothing loosened): the defect is *caught* when a correctness check breached
//! (`send_lag_p99_ms`, `late_sends` or a latency limit breached only by the send lag: a
//! generator-bound run, catches nothing). Then it fires the same scenario
//! at the correct strategy (the same code path without the defect), which must pass, `--repeat
//! N` times. Every run goes through [`runner::execute`] with a [`RunPlan`], like `gate`, and
//! leaves its report.
//!
//! The command line is `cli/selftest.rs`; this module plans the cases, runs one, and renders
//! the table (`defect | strategy | scenario | caught by | seconds | result`) and the JSON.

use crate::gate::{self, Metric, Status, Verdict};
use crate::inventory::{Defect, Strategy};
use crate::report::table::{text, Align};
use crate::runner::{self, Cell, RunPlan};
use crate::scenarios::Bundled;
use crate::store::Backend;
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The schema id of `selftest --json`.
pub const SCHEMA: &str = "oversell.selftest/v1";

/// The name of the bundled scenario meant for `defect`.
pub fn scenario_name(defect: Defect) -> String {
    format!("selftest-{defect}")
}

/// The bundled scenario meant for `defect`, if it is bundled yet.
pub fn scenario_for(defect: Defect) -> Option<Bundled> {
    Bundled::named(&scenario_name(defect))
}

/// One run of the self-test: `defect` built in (or none: the correct strategy), fired with the
/// scenario meant for `meant_for`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    pub defect: Option<Defect>,
    pub meant_for: Defect,
    pub strategy: Strategy,
    /// Which repeat of a correct run this is (1-based).
    pub repeat: u32,
}

/// The cases for `defects` (default: all) on `strategies` (default: each defect's first):
/// each defect on every chosen strategy that has it, then the correct runs of its scenario on
/// every chosen strategy, `repeat` times. A defect none of the chosen strategies has is left
/// out, unless it was named in `defects` (an error listing the strategies that have it).
pub fn cases(
    defects: &[Defect],
    strategies: &[Strategy],
    repeat: u32,
) -> anyhow::Result<Vec<Case>> {
    let named = !defects.is_empty();
    let defects: Vec<Defect> = if named {
        defects.to_vec()
    } else {
        Defect::ALL.to_vec()
    };
    let mut out = Vec::new();
    for d in defects {
        let chosen: Vec<Strategy> = if strategies.is_empty() {
            vec![d.strategies()[0]]
        } else {
            strategies.to_vec()
        };
        let with_defect: Vec<Strategy> = chosen
            .iter()
            .copied()
            .filter(|s| d.strategies().contains(s))
            .collect();
        if with_defect.is_empty() {
            if named {
                d.check(chosen[0])?;
            }
            continue;
        }
        for &strategy in &with_defect {
            out.push(Case {
                defect: Some(d),
                meant_for: d,
                strategy,
                repeat: 1,
            });
        }
        for &strategy in &chosen {
            for r in 1..=repeat.max(1) {
                out.push(Case {
                    defect: None,
                    meant_for: d,
                    strategy,
                    repeat: r,
                });
            }
        }
    }
    anyhow::ensure!(
        !out.is_empty(),
        "no known defect is built into {}: the defects apply to {}",
        strategies
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        Defect::ALL
            .iter()
            .map(|d| format!(
                "{d} ({})",
                d.strategies()
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    Ok(out)
}

/// Where and how the cases run.
#[derive(Debug, Clone)]
pub struct Setup {
    pub backend: Backend,
    pub database_url: String,
    pub redis_url: String,
    pub shop_exe: PathBuf,
    /// Reports go under this folder.
    pub out: PathBuf,
    pub drain_limit: Duration,
    /// `--max-send-lag-ms`: the generator-bound bound, over the scenario's.
    pub max_send_lag_ms: Option<f64>,
}

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseResult {
    /// The defect's run breached a correctness check.
    Caught,
    /// The defect's run passed every correctness check: the harness missed it.
    Missed,
    /// The correct strategy passed every check.
    Passed,
    /// The correct strategy failed a check (a false alarm, or a generator-bound run).
    Failed,
    /// The case could not run (no bundled scenario yet, or the run failed).
    NotTested,
}

impl CaseResult {
    /// Whether the case is what the self-test wants.
    pub fn good(&self) -> bool {
        matches!(self, CaseResult::Caught | CaseResult::Passed)
    }

    fn word(&self) -> &'static str {
        match self {
            CaseResult::Caught => "caught",
            CaseResult::Missed => "MISSED",
            CaseResult::Passed => "pass",
            CaseResult::Failed => "FAIL",
            CaseResult::NotTested => "NOT TESTED",
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The defect built in (`None`: the correct strategy).
    pub defect: Option<Defect>,
    /// The defect whose scenario was fired.
    pub meant_for: Defect,
    pub strategy: Strategy,
    pub repeat: u32,
    pub scenario: String,
    /// Correctness checks that breached (for a defect: what caught it).
    pub caught_by: Vec<String>,
    /// The run was generator-bound ([`crate::report::lateness`]: `send_lag_p99_ms` or
    /// `late_sends` breached, or a latency limit breached only by the send lag).
    pub generator_bound: bool,
    /// Checks the run could not measure.
    pub not_verified: Vec<String>,
    pub seconds: f64,
    pub result: CaseResult,
    /// Why, when the case could not run.
    pub reason: Option<String>,
    /// The run's report folder.
    pub report: Option<PathBuf>,
}

/// Runs one case: the scenario meant for its defect, at a reference shop with the defect built
/// in (or none), judged as `gate` judges.
pub async fn run(case: Case, setup: &Setup) -> Row {
    let started = Instant::now();
    let mut row = Row {
        defect: case.defect,
        meant_for: case.meant_for,
        strategy: case.strategy,
        repeat: case.repeat,
        scenario: scenario_name(case.meant_for),
        caught_by: Vec::new(),
        generator_bound: false,
        not_verified: Vec::new(),
        seconds: 0.0,
        result: CaseResult::NotTested,
        reason: None,
        report: None,
    };
    let verdict = match judge(case, setup).await {
        Ok((verdict, dir)) => {
            row.report = Some(dir);
            verdict
        }
        Err(e) => {
            row.reason = Some(format!("{e:#}"));
            row.seconds = started.elapsed().as_secs_f64();
            return row;
        }
    };
    row.seconds = started.elapsed().as_secs_f64();
    for c in &verdict.checks {
        match &c.status {
            Status::Breached if c.breach_reason().is_some() => row.generator_bound = true,
            Status::Breached => row.caught_by.push(c.limit.metric.name().to_string()),
            Status::NotVerified(why) => {
                row.generator_bound |= why.starts_with("generator-bound");
                row.not_verified.push(c.limit.metric.name().to_string())
            }
            Status::Passed | Status::NotRequired(_) => {}
        }
    }
    row.result = match (case.defect, row.caught_by.is_empty()) {
        (Some(_), false) => CaseResult::Caught,
        (Some(_), true) => CaseResult::Missed,
        (None, _) if verdict.passed() => CaseResult::Passed,
        (None, _) => CaseResult::Failed,
    };
    row
}

/// The case's run and the gate's verdict on it.
async fn judge(case: Case, setup: &Setup) -> anyhow::Result<(Verdict, PathBuf)> {
    let bundled = scenario_for(case.meant_for).ok_or_else(|| {
        anyhow::anyhow!(
            "no bundled scenario {} (scenarios/{}.toml)",
            scenario_name(case.meant_for),
            scenario_name(case.meant_for)
        )
    })?;
    let mut s = bundled.load()?;
    s.shop.defect = case.defect;
    s.shop.check_defect(case.strategy)?;
    if let Some(ms) = setup.max_send_lag_ms {
        s.thresholds
            .set(Metric::SendLagP99Ms.name(), ms)
            .map_err(|e| anyhow::anyhow!("--max-send-lag: {e}"))?;
    }
    let limits = gate::limits(&s.thresholds, None, &[], true);
    let cell = Cell {
        strategy: case.strategy,
        backend: setup.backend,
        database_url: setup.database_url.clone(),
    };
    let plan = RunPlan::reference(
        s,
        crate::scenarios::Source::Bundled(bundled.name).origin(),
        vec![cell],
        setup.redis_url.clone(),
        setup.shop_exe.clone(),
        setup.out.clone(),
    )
    .with_drain_limit(setup.drain_limit);
    let (report, dir) = runner::execute(&plan).await?;
    Ok((Verdict::judge(&report, &limits, false), dir))
}

/// Whether every defect was caught and every correct run passed.
pub fn passed(rows: &[Row]) -> bool {
    !rows.is_empty() && rows.iter().all(|r| r.result.good())
}

/// The terminal table and its one-line verdict.
pub fn render(rows: &[Row]) -> String {
    let header = [
        "defect",
        "strategy",
        "scenario",
        "caught by",
        "seconds",
        "result",
    ]
    .map(String::from);
    let body: Vec<Vec<String>> = rows.iter().map(cells).collect();
    let align = [
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Left,
        Align::Right,
        Align::Left,
    ];
    let mut s = text(&header, &body, &align);
    s.push_str(&notes(rows));
    s.push_str(&verdict_line(rows));
    s
}

/// One row of the table.
fn cells(r: &Row) -> Vec<String> {
    let defect = match r.defect {
        Some(d) => d.to_string(),
        None if r.repeat > 1 => format!("none (correct) #{}", r.repeat),
        None => "none (correct)".into(),
    };
    let mut caught = if r.caught_by.is_empty() {
        "-".to_string()
    } else {
        r.caught_by.join(", ")
    };
    if r.generator_bound {
        caught.push_str(" (generator-bound)");
    }
    vec![
        defect,
        r.strategy.to_string(),
        r.scenario.clone(),
        caught,
        match r.result {
            CaseResult::NotTested => "-".into(),
            _ => format!("{:.1}", r.seconds),
        },
        r.result.word().to_string(),
    ]
}

/// Under the table: why a scenario was not tested (once each), what a run could not verify.
fn notes(rows: &[Row]) -> String {
    let mut s = String::new();
    let mut reasons: Vec<&str> = Vec::new();
    for r in rows {
        if let Some(why) = r.reason.as_deref().filter(|w| !reasons.contains(w)) {
            reasons.push(why);
            s.push_str(&format!("  {}: not tested: {why}\n", r.scenario));
        }
        if !r.not_verified.is_empty() {
            s.push_str(&format!(
                "  {} on {}: not verified: {}\n",
                r.defect.map_or("correct run".into(), |d| d.to_string()),
                r.strategy,
                r.not_verified.join(", ")
            ));
        }
    }
    s
}

/// `oversell selftest: PASS — ...`: defect runs caught and correct runs passed.
fn verdict_line(rows: &[Row]) -> String {
    let caught = rows
        .iter()
        .filter(|r| r.result == CaseResult::Caught)
        .count();
    let defects = rows.iter().filter(|r| r.defect.is_some()).count();
    let passed_correct = rows
        .iter()
        .filter(|r| r.result == CaseResult::Passed)
        .count();
    let correct = rows.iter().filter(|r| r.defect.is_none()).count();
    let untested = rows
        .iter()
        .filter(|r| r.defect.is_some() && r.result == CaseResult::NotTested)
        .count();
    format!(
        "oversell selftest: {} — {caught} of {defects} defect runs caught{}, {passed_correct} of \
         {correct} correct runs passed\n",
        if passed(rows) { "PASS" } else { "FAIL" },
        if untested > 0 {
            format!(" ({untested} not tested)")
        } else {
            String::new()
        }
    )
}

/// The `--json` document.
pub fn json(rows: &[Row]) -> serde_json::Value {
    serde_json::json!({
        "schema": SCHEMA,
        "passed": passed(rows),
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_default_each_defect_runs_on_its_first_strategy_then_the_same_strategy_correct() {
        let c = cases(&[], &[], 1).unwrap();
        assert_eq!(c.len(), 2 * Defect::ALL.len());
        for d in Defect::ALL {
            let mine: Vec<&Case> = c.iter().filter(|c| c.meant_for == d).collect();
            assert_eq!(mine.len(), 2);
            assert_eq!(mine[0].defect, Some(d));
            assert_eq!(mine[1].defect, None);
            assert_eq!(mine[0].strategy, d.strategies()[0]);
            assert_eq!(mine[1].strategy, d.strategies()[0]);
        }
    }

    #[test]
    fn repeat_runs_only_the_correct_strategies_again() {
        let c = cases(&[Defect::LimitRace], &[], 5).unwrap();
        assert_eq!(c.iter().filter(|c| c.defect.is_some()).count(), 1);
        let correct: Vec<u32> = c
            .iter()
            .filter(|c| c.defect.is_none())
            .map(|c| c.repeat)
            .collect();
        assert_eq!(correct, vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_strategy_without_a_named_defect_is_refused_with_the_ones_that_have_it() {
        let e = cases(&[Defect::LimitRace], &[Strategy::RedisLua], 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("conditional, for-update"), "{e}");
        // Unnamed, it is left out; the correct runs of the others stay.
        let c = cases(&[], &[Strategy::Optimistic], 1).unwrap();
        assert!(c.iter().all(|c| c.meant_for != Defect::LimitRace));
        assert!(c.iter().any(|c| c.meant_for == Defect::DoubleRestock));
        let e = cases(&[], &[Strategy::RedisLua], 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("limit-race (conditional, for-update)"), "{e}");
    }

    #[test]
    fn the_defects_whose_trigger_exists_have_a_bundled_scenario() {
        for d in [
            Defect::LimitRace,
            Defect::GetThenDecr,
            Defect::DoubleRestock,
        ] {
            let s = scenario_for(d).unwrap().load().unwrap();
            assert_eq!(s.name, scenario_name(d));
            assert_eq!(
                s.shop.defect, None,
                "the self-test sets the defect, not the file"
            );
        }
    }

    #[test]
    fn a_missed_defect_or_a_failed_correct_run_fails_the_selftest() {
        let row = |defect, result| Row {
            defect,
            meant_for: Defect::LimitRace,
            strategy: Strategy::Conditional,
            repeat: 1,
            scenario: "selftest-limit-race".into(),
            caught_by: vec!["duplicate_buyers".into()],
            generator_bound: false,
            not_verified: vec![],
            seconds: 3.0,
            result,
            reason: None,
            report: None,
        };
        let good = [
            row(Some(Defect::LimitRace), CaseResult::Caught),
            row(None, CaseResult::Passed),
        ];
        assert!(passed(&good));
        let table = render(&good);
        assert!(
            table.contains("duplicate_buyers") && table.contains("PASS"),
            "{table}"
        );
        for bad in [CaseResult::Missed, CaseResult::NotTested] {
            assert!(!passed(&[row(Some(Defect::LimitRace), bad)]));
        }
        assert!(!passed(&[row(None, CaseResult::Failed)]));
        assert!(!passed(&[]));
        assert_eq!(json(&good)["rows"][0]["result"], "caught");
    }
}
