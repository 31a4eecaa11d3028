//! `oversell attack`: a rehearsal against the user's own shop, audited by the user's oracle.

use super::load_scenario;
use super::plan::{foreign, plan, OracleArgs, PlanArgs};
use crate::runner::{self, Subject};
use clap::Args;
use std::path::PathBuf;

/// `oversell attack`.
#[derive(Debug, Args, Clone)]
pub struct AttackArgs {
    /// The shop to rehearse against (loopback only unless --allow-remote).
    #[arg(long)]
    pub target: String,
    /// Scenario: a TOML file or a bundled name; its `[target]` table maps actions to the
    /// shop's API.
    #[arg(long, default_value = "flash-100")]
    pub scenario: PathBuf,
    #[command(flatten)]
    pub oracle: OracleArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
}

/// `oversell attack`: exit 0 once the report is written (the verdict is in it).
pub async fn attack(args: AttackArgs) -> anyhow::Result<i32> {
    let (s, scenario_file) = load_scenario(&args.scenario)?;
    let subject = Subject::Foreign(Box::new(foreign(&args.target, &args.oracle, &s)?));
    let Some(plan) = plan(&scenario_file, s, subject, &args.plan).await? else {
        return Ok(0);
    };
    let (report, dir) = runner::execute(&plan).await?;
    args.plan.output.finish(&report, &dir, None);
    Ok(0)
}
