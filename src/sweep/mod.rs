//! `oversell sweep`: one run (or `--repeat N`) of a scenario per value of one knob, a shop knob
//! of `[shop]` (`pool-size`, `batch-max`, `consumers`, `buckets`, ...) or the arrival `rate`,
//! and a table and charts of every headline metric against it.
//!
//! Each value's runs are an ordinary report under `runs/`; `sweep.json` (`oversell.sweep/v1`),
//! `report.md`, `report.html` and one chart per headline metric sit beside them.

pub mod knobs;
pub mod law;
mod report;

pub use knobs::Vary;
pub use report::{SweepPoint, SweepReport};

use crate::runner::{self, Cell, RunPlan, Subject};
use crate::traffic::{schedule, Scenario};
use std::path::PathBuf;
use std::time::Duration;

/// Everything `sweep` needs, decided before the first run.
#[derive(Debug, Clone)]
pub struct SweepPlan {
    pub scenario: Scenario,
    pub scenario_file: PathBuf,
    pub cell: Cell,
    pub redis_url: String,
    pub shop_exe: PathBuf,
    pub vary: Vary,
    pub repeat: u32,
    /// The sweep goes to `<out>/<UTC timestamp>-<scenario>-sweep/`.
    pub out: PathBuf,
    pub drain_limit: Duration,
    pub progress: bool,
}

impl SweepPlan {
    /// The scenario at each value, checked before any run (a bad value: exit 2).
    pub fn scenarios(&self) -> anyhow::Result<Vec<Scenario>> {
        self.vary
            .values
            .iter()
            .map(|v| {
                let mut s = self.vary.knob.apply(&self.scenario, v)?;
                s.name = format!(
                    "{}-{}-{}",
                    self.scenario.name,
                    self.vary.knob.flag(),
                    slug(v)
                );
                Ok(s)
            })
            .collect()
    }
}

fn slug(v: &str) -> String {
    v.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Runs every value in turn (each on a fresh sale), writing the sweep's files as each
/// finishes; returns the sweep and its folder.
pub async fn execute(plan: &SweepPlan) -> anyhow::Result<(SweepReport, PathBuf)> {
    let scenarios = plan.scenarios()?;
    let dir = crate::report::new_dir(&plan.out, &format!("{}-sweep", plan.scenario.name));
    let runs_dir = dir.join("runs");
    std::fs::create_dir_all(&runs_dir)?;
    let mut sweep = SweepReport::new(plan);
    for (i, (value, s)) in plan.vary.values.iter().zip(scenarios).enumerate() {
        if plan.progress {
            crate::telemetry::stderr_line(&format!(
                "== sweep {} ({}/{}): {}={value}",
                plan.cell.strategy,
                i + 1,
                plan.vary.values.len(),
                plan.vary.knob.flag()
            ));
        }
        let run_plan = RunPlan {
            buyers: schedule::build(&s),
            scenario: s,
            scenario_file: plan.scenario_file.clone(),
            subject: Subject::reference_served_by(
                vec![plan.cell.clone()],
                plan.redis_url.clone(),
                plan.shop_exe.clone(),
            ),
            columns: Default::default(),
            out: runs_dir.clone(),
            drain_limit: plan.drain_limit,
            progress: plan.progress,
            live: None,
            repeat: plan.repeat,
        };
        let (report, run_dir) = runner::execute(&run_plan).await?;
        sweep
            .points
            .push(SweepPoint::of(value, i, &report, &run_dir));
        report::write_data(&dir, &sweep)?;
    }
    report::write(&dir, &sweep)?;
    Ok((sweep, dir))
}

/// The terminal table (`wide`: every column).
pub fn render(s: &SweepReport, wide: bool) -> String {
    report::render(s, wide)
}
