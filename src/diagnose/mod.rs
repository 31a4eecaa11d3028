//! `oversell diagnose`: the post-mortem's architecture diagnosis of a shop in one command.
//!
//! It plans a battery of experiments within a time budget ([`battery`]), runs each as an
//! ordinary run with its own report and the capacity search with what is left ([`run`]), and
//! reads one row per failure class from them ([`class`]): the oracle's findings, given to the
//! class the experiment isolates ([`correctness`]), and the rush's behaviour — the pool, the
//! retry storm, bots, a cold start ([`behaviour`]). Each row is `found` (with its proof and
//! figures), `not_found` (with what was tried and how hard) or `not_testable` (with what to
//! declare or map), and carries the post-mortem's remedy with its section of the book. Then
//! where the time goes at the rush ([`time`]) and the capacity at the objective. `render`
//! writes `diagnosis.md`, `diagnosis.html`, `diagnosis.json` and the terminal summary.
//!
//! The command line is `cli/diagnose.rs`; the exit code is `gate`'s: 0 nothing found, 1 found,
//! 2 bad input, 3 too little could be tested to say.

pub mod battery;
pub mod behaviour;
pub mod class;
pub mod correctness;
pub mod render;
pub mod row;
pub mod run;
pub mod time;

use crate::exit::Exit;
pub use battery::{Battery, Kind, Skipped};
use class::{Class, Status};
use row::Row;
use run::Ran;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The schema id of `diagnosis.json`.
pub const SCHEMA: &str = "oversell.diagnosis/v1";

/// Fewer classes than this tested (found or not found), and nothing found: too little could be
/// tested to say the shop is sound (exit 3).
pub const MIN_TESTED: usize = 6;

/// One experiment of the plan as it went.
#[derive(Debug, Clone, Serialize)]
pub struct PlanEntry {
    pub experiment: Kind,
    pub what: String,
    /// Budgeted before it ran (s).
    pub planned_s: f64,
    /// What it took (absent: it did not run; see `skipped`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// Its report, relative to the diagnosis's folder.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
}

/// The diagnosis: `diagnosis.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    pub schema: &'static str,
    /// What was diagnosed: the reference strategy, or the target's URL.
    pub subject: String,
    pub scenario: String,
    pub scenario_file: String,
    /// The scenario fitted from `--access-log`, when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fitted_from: Option<String>,
    pub budget_s: f64,
    pub elapsed_s: f64,
    pub within_budget: bool,
    pub plan: Vec<PlanEntry>,
    pub skipped: Vec<Skipped>,
    pub rows: Vec<Row>,
    /// Where the time goes at the rush.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<time::TimeSplit>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity: Option<time::Capacity>,
    pub found: Vec<Class>,
    pub tested: usize,
    pub verdict: String,
    pub exit_code: Exit,
}

/// What the diagnosis is about, for its header.
pub struct About {
    pub subject: String,
    pub scenario_file: PathBuf,
    pub fitted_from: Option<PathBuf>,
    /// What the experiments could drive and read of the shop.
    pub shop: crate::runner::Levers,
    /// The capacity search's objective, described.
    pub objective: String,
}

/// The diagnosis of the battery as it ran, written into `dir`.
pub fn diagnose(battery: &Battery, ran: &Ran, about: &About, dir: &Path) -> Diagnosis {
    let judged = correctness::judge(ran);
    let skipped: Vec<(Kind, String)> = ran
        .skipped
        .iter()
        .map(|s| (s.experiment, s.why.clone()))
        .collect();
    let counts_retries = about.shop.counts_retries;
    let mut rows: Vec<Row> = Class::ALL
        .iter()
        .map(|&c| match c {
            Class::PoolExhaustion => behaviour::pool_exhaustion(&ran.done, dir, counts_retries),
            Class::RetryStorm => behaviour::retry_storm(&ran.done, dir, counts_retries),
            Class::BotsTakeUnits => {
                behaviour::bots_take_units(&ran.done, dir, about.shop.buyer_in_order)
            }
            Class::ColdStart => behaviour::cold_start(&ran.done, dir, about.shop.answers_not_found),
            c => correctness::row(c, &judged, &skipped, dir, &about.shop),
        })
        .collect();
    if let Some(r) = rows
        .iter_mut()
        .find(|r| r.class == Class::ReconcileResidual && r.status == Status::NotTestable)
    {
        if let Some(watched) = behaviour::watched_residual(&ran.done, dir) {
            *r = watched;
        }
    }
    let found: Vec<Class> = rows
        .iter()
        .filter(|r| r.status == Status::Found)
        .map(|r| r.class)
        .collect();
    let tested = rows
        .iter()
        .filter(|r| r.status != Status::NotTestable)
        .count();
    let race_tested = rows
        .iter()
        .any(|r| r.class == Class::OversellRace && r.status != Status::NotTestable);
    let (verdict, exit_code) = verdict(&found, tested, race_tested);
    let scenario = ran
        .done
        .first()
        .map_or(String::new(), |d| d.scenario.name.replace("-rush", ""));
    Diagnosis {
        schema: SCHEMA,
        subject: about.subject.clone(),
        scenario,
        scenario_file: about.scenario_file.display().to_string(),
        fitted_from: about.fitted_from.as_ref().map(|p| p.display().to_string()),
        budget_s: battery.budget.as_secs_f64(),
        elapsed_s: ran.elapsed_s,
        within_budget: ran.elapsed_s <= battery.budget.as_secs_f64(),
        plan: plan_entries(battery, ran, dir),
        skipped: ran.skipped.clone(),
        rows,
        time: time::split(&ran.done, dir),
        capacity: ran
            .capacity
            .as_ref()
            .map(|c| time::capacity(c, &about.objective, dir)),
        found,
        tested,
        verdict,
        exit_code,
    }
}

/// The verdict line and the exit code: found (1), too little tested (3), or sound (0).
fn verdict(found: &[Class], tested: usize, race_tested: bool) -> (String, Exit) {
    let all = Class::ALL.len();
    if !found.is_empty() {
        let names: Vec<&str> = found.iter().map(|c| c.as_str()).collect();
        return (
            format!(
                "FOUND {}: {} ({tested} of {all} classes tested)",
                found.len(),
                names.join(", ")
            ),
            Exit::Failed,
        );
    }
    if !race_tested || tested < MIN_TESTED {
        return (
            format!(
                "NOT ENOUGH TESTED: nothing found, but only {tested} of {all} classes could be \
                 tested{} (at least {MIN_TESTED} and oversell_race are needed to say): see the \
                 not_testable rows for what to declare or map",
                if race_tested {
                    ""
                } else {
                    ", oversell_race not among them"
                }
            ),
            Exit::Unreachable,
        );
    }
    (
        format!("PASS: nothing found in the {tested} of {all} classes tested"),
        Exit::Success,
    )
}

/// The plan with what each experiment took and its report.
fn plan_entries(battery: &Battery, ran: &Ran, dir: &Path) -> Vec<PlanEntry> {
    let mut out: Vec<PlanEntry> = battery
        .planned
        .iter()
        .map(|p| {
            let done = ran.done.iter().find(|d| d.kind == p.kind);
            PlanEntry {
                experiment: p.kind,
                what: p.what.clone(),
                planned_s: p.estimate_s,
                elapsed_s: done.map(|d| d.elapsed_s),
                report: done.map(|d| row::report_link(d, dir)),
            }
        })
        .collect();
    if battery.capacity_s > 0.0 {
        let c = ran.capacity.as_ref();
        out.push(PlanEntry {
            experiment: Kind::Capacity,
            what: "the highest rate at which the objective holds".into(),
            planned_s: battery.capacity_s,
            elapsed_s: c.map(|c| c.elapsed_s),
            report: c.map(|c| {
                let md = c.dir.join("report.md");
                md.strip_prefix(dir).unwrap_or(&md).display().to_string()
            }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_says_found_then_too_little_tested_then_pass() {
        assert_eq!(verdict(&[Class::OversellRace], 2, true).1, Exit::Failed);
        let (line, exit) = verdict(&[], 4, true);
        assert_eq!(exit, 3);
        assert!(line.contains("only 4 of 12"), "{line}");
        assert_eq!(verdict(&[], 10, false).1, 3);
        assert_eq!(verdict(&[], 10, true).1, Exit::Success);
    }
}
