//! `oversell attack`: a rehearsal against the user's own shop, audited by the user's oracle;
//! `--probe` checks the mapping with one request of each kind instead.

use super::load_scenario;
use super::plan::{foreign, plan, OracleArgs, PlanArgs};
use crate::rehearsal::mapping_check;
use crate::runner::{self, Subject};
use crate::traffic::schedule;
use crate::traffic::target::Sale;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Check the mapping instead of running: send one request of each kind (set-up, view,
    /// order, pay, cancel) and read the oracle once, printing how each answer was classified
    /// and why. Nothing else is sent; exit 1 when an answer matched no rule.
    #[arg(long, conflicts_with = "dry_run")]
    pub probe: bool,
    #[command(flatten)]
    pub oracle: OracleArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
}

/// `oversell attack`: exit 0 once the report is written (the verdict is in it), or 1 when more
/// answers than `[target].max_unclassified` allows matched no rule (the figures cannot be
/// trusted until the mapping reads them).
pub async fn attack(args: AttackArgs) -> anyhow::Result<i32> {
    let (mut s, scenario_file) = load_scenario(&args.scenario)?;
    super::plan::max_send_lag(&mut s, args.plan.max_send_lag_ms)?;
    if !s.faults.is_empty() {
        anyhow::bail!(
            "{}: [[faults]] act only on the reference shop's own services, not on a foreign \
             target (run it with `oversell run` or `compare`)",
            scenario_file.display()
        );
    }
    let f = foreign(&args.target, &args.oracle, &s)?;
    if args.probe {
        let buyers = schedule::build(&s);
        let first = buyers.first().expect("a scenario has at least one buyer");
        let timeout = Duration::from_millis(s.client.timeout_ms);
        let checked = mapping_check::run(&f, Sale::of(&s), first, timeout).await?;
        print!("{}", checked.text);
        return Ok(if checked.all_classified { 0 } else { 1 });
    }
    let subject = Subject::Foreign(Box::new(f));
    let Some(plan) = plan(&scenario_file, s, subject, &args.plan).await? else {
        return Ok(0);
    };
    let (report, dir) = runner::execute(&plan).await?;
    args.plan.output.finish(&report, &dir, None);
    let incomplete = report.runs.iter().any(|r| r.findings.mapping_incomplete());
    Ok(if incomplete { 1 } else { 0 })
}
