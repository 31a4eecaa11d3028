//! Runs the battery: each experiment an ordinary run ([`runner::execute`]) with its own
//! report under the diagnosis's folder, the capacity search ([`crate::capacity::execute`])
//! with what is left of the budget. An experiment that no longer fits the budget when its turn
//! comes is skipped, and says so.

use super::battery::{Battery, Kind, Skipped};
use crate::capacity::{self, search::Settings, slo::Objective, CapacityPlan};
use crate::report::Report;
use crate::runner::{self, RunPlan, Subject};
use crate::traffic::Scenario;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Seconds of the budget the capacity search leaves unused: its first probe is budgeted before
/// it is measured, and may take longer.
pub const CAPACITY_RESERVE_S: f64 = 10.0;

/// Builds the subject one experiment's scenario runs against (the reference shop's cell, or
/// the foreign target with its mapping and oracle): the scenario is the experiment's own.
pub type SubjectFor = Box<dyn Fn(&mut Scenario) -> anyhow::Result<Subject> + Send + Sync>;

/// Where and how the battery runs.
pub struct Setup {
    /// The diagnosis's folder: the runs' reports go under `runs/`.
    pub dir: PathBuf,
    pub scenario_file: PathBuf,
    pub subject: SubjectFor,
    pub drain_limit: Duration,
    /// The capacity search's objective.
    pub objective: Objective,
    /// The capacity search's highest rate (buyers/s).
    pub max_rate: f64,
    /// Progress lines on stderr.
    pub progress: bool,
}

/// One experiment that ran.
pub struct Done {
    pub kind: Kind,
    pub scenario: Scenario,
    pub report: Report,
    /// Its report folder.
    pub dir: PathBuf,
    pub elapsed_s: f64,
}

/// The capacity search that ran.
pub struct CapacityDone {
    pub report: capacity::report::CapacityReport,
    pub dir: PathBuf,
    pub elapsed_s: f64,
}

/// The battery as it ran.
pub struct Ran {
    pub done: Vec<Done>,
    pub capacity: Option<CapacityDone>,
    /// Planned and not run (the budget, or a run that failed), with why.
    pub skipped: Vec<Skipped>,
    pub elapsed_s: f64,
}

/// Runs the battery. The rush failing ends the diagnosis (nothing could be judged); a later
/// experiment failing is recorded as skipped with its error.
pub async fn execute(battery: &Battery, setup: &Setup) -> anyhow::Result<Ran> {
    let started = Instant::now();
    let runs = setup.dir.join("runs");
    std::fs::create_dir_all(&runs)?;
    let mut ran = Ran {
        done: Vec::new(),
        capacity: None,
        skipped: battery.skipped.clone(),
        elapsed_s: 0.0,
    };
    let budget = battery.budget.as_secs_f64();
    for (i, p) in battery.planned.iter().enumerate() {
        let used = started.elapsed().as_secs_f64();
        if i > 0 && used + p.estimate_s > budget {
            ran.skipped.push(Skipped {
                experiment: p.kind,
                why: format!(
                    "the budget ran out: it needs about {:.0}s and {:.0}s were left",
                    p.estimate_s,
                    budget - used
                ),
            });
            continue;
        }
        progress(
            setup,
            &format!("diagnose: {} ({})", p.kind.as_str(), p.what),
        );
        let t0 = Instant::now();
        match one(&p.scenario, setup, &runs).await {
            Ok((report, dir)) => ran.done.push(Done {
                kind: p.kind,
                scenario: p.scenario.clone(),
                report,
                dir,
                elapsed_s: t0.elapsed().as_secs_f64(),
            }),
            Err(e) if i == 0 => return Err(e.context("the rush could not run")),
            Err(e) => ran.skipped.push(Skipped {
                experiment: p.kind,
                why: format!("the run failed: {e:#}"),
            }),
        }
    }
    // A probe can take longer than the search budgets for its first: kept in reserve.
    let left = budget - started.elapsed().as_secs_f64() - CAPACITY_RESERVE_S;
    if battery.capacity_s > 0.0 {
        if let Some(rush) = ran.done.first().filter(|d| d.kind == Kind::Rush) {
            let scenario = rush.scenario.clone();
            ran.capacity = search(battery, setup, scenario, left, &mut ran.skipped).await;
        }
    }
    ran.elapsed_s = started.elapsed().as_secs_f64();
    Ok(ran)
}

/// One experiment's run.
async fn one(s: &Scenario, setup: &Setup, out: &Path) -> anyhow::Result<(Report, PathBuf)> {
    let mut s = s.clone();
    let subject = (setup.subject)(&mut s)?;
    let plan = RunPlan::new(s, setup.scenario_file.clone(), subject, out.to_path_buf())
        .with_drain_limit(setup.drain_limit);
    runner::execute(&plan).await
}

/// The capacity search on the rush's scenario with `left` seconds; `None` (and a skipped
/// line) when it could not run.
async fn search(
    battery: &Battery,
    setup: &Setup,
    mut scenario: Scenario,
    left: f64,
    skipped: &mut Vec<Skipped>,
) -> Option<CapacityDone> {
    let one_probe = battery.probe_s + capacity::PROBE_OVERHEAD.as_secs_f64();
    if left < one_probe {
        skipped.push(Skipped {
            experiment: Kind::Capacity,
            why: format!(
                "the budget ran out: a probe takes about {one_probe:.0}s and {:.0}s were left",
                left.max(0.0)
            ),
        });
        return None;
    }
    scenario.name = scenario.name.replace("-rush", "");
    let who = match (setup.subject)(&mut scenario) {
        Ok(w) => w,
        Err(e) => {
            skipped.push(Skipped {
                experiment: Kind::Capacity,
                why: format!("{e:#}"),
            });
            return None;
        }
    };
    let start = capacity::own_rate(&scenario).min(setup.max_rate);
    let plan = CapacityPlan {
        scenario,
        scenario_file: setup.scenario_file.clone(),
        who: vec![who],
        objective: setup.objective.clone(),
        settings: Settings {
            start,
            precision: 0.25,
            max_rate: setup.max_rate,
            min_rate: (1.0 / battery.probe_s).min(start),
        },
        probe_seconds: battery.probe_s,
        budget: Duration::from_secs_f64(left),
        out: setup.dir.join("runs"),
        drain_limit: setup.drain_limit,
        progress: setup.progress,
    };
    progress(
        setup,
        "diagnose: capacity (the highest rate at which the objective holds)",
    );
    let t0 = Instant::now();
    match capacity::execute(&plan).await {
        Ok((report, dir)) => Some(CapacityDone {
            report,
            dir,
            elapsed_s: t0.elapsed().as_secs_f64(),
        }),
        Err(e) => {
            skipped.push(Skipped {
                experiment: Kind::Capacity,
                why: format!("the search failed: {e:#}"),
            });
            None
        }
    }
}

fn progress(setup: &Setup, line: &str) {
    if setup.progress {
        crate::telemetry::stderr_line(line);
    }
}
