//! `oversell attack`: a rehearsal against the user's own shop, audited by the user's oracle;
//! `--probe` checks the mapping with one request of each kind instead.

use super::load_scenario;
use super::plan::{foreign, plan, OracleArgs, PlanArgs};
use crate::exit::Exit;
use crate::rehearsal::mapping_check;
use crate::runner::{self, Subject};
use crate::shard::ShardSpec;
use crate::traffic::schedule;
use crate::traffic::session::Session;
use crate::traffic::target::Sale;
use chrono::{DateTime, Utc};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// `oversell attack`.
#[derive(Debug, Args, Clone)]
pub struct AttackArgs {
    /// The shop to rehearse against (loopback only unless --allow-remote).
    #[arg(long, help_heading = super::values::TARGET)]
    pub target: String,
    /// Scenario: a TOML file or a bundled name; its `[target]` table maps actions to the
    /// shop's API (default: the small `smoke` rush, said on stderr: a shop nobody has sized
    /// yet does not get flash-100's 3000 buyers unasked).
    #[arg(short = 'S', long, value_name = "FILE|NAME", help_heading = super::values::SCENARIO)]
    pub scenario: Option<PathBuf>,
    /// Check the mapping instead of running: send one request of each kind (set-up, view,
    /// order, pay, cancel) and read the oracle once, printing how each answer was classified
    /// and why. Nothing else is sent; exit 1 when an answer matched no rule.
    #[arg(long, conflicts_with = "dry_run", help_heading = super::values::TARGET)]
    pub probe: bool,
    /// Send only shard i of N of the seeded schedule (the buyers whose index is i modulo N;
    /// the N shards together send exactly the whole schedule) at --target, from the shared
    /// --open-at instant, and write the raw results (shard.json, latency-order.hlog) into --out
    /// for `oversell merge`. Shard 0 sends the mapping's set-up request. No oracle is read.
    #[arg(
        long,
        value_name = "i/N",
        requires = "open_at",
        conflicts_with = "probe",
        help_heading = super::values::SHARDING
    )]
    pub shard: Option<ShardSpec>,
    /// With --shard: the UTC instant every shard opens the sale at (RFC 3339); ahead of now
    /// and at most 24 h ahead.
    #[arg(long, value_name = "RFC3339", value_parser = crate::shard::open_at_arg, requires = "shard",
          help_heading = super::values::SHARDING)]
    pub open_at: Option<DateTime<Utc>>,
    #[command(flatten)]
    pub oracle: OracleArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
}

/// `oversell attack`: exit 0 once the report is written (the verdict is in it), or 1 when more
/// answers than `[target].max_unclassified` allows matched no rule (the figures cannot be
/// trusted until the mapping reads them).
pub async fn attack(args: AttackArgs) -> anyhow::Result<Exit> {
    let (mut s, scenario_file) = load_scenario(&scenario_or_smoke(args.scenario.as_deref()))?;
    super::plan::max_send_lag(&mut s, args.plan.send_lag.ms())?;
    if !s.faults.is_empty() {
        anyhow::bail!(
            "{}: [[faults]] act only on the reference shop's own services, not on a foreign \
             target (run it with `oversell run` or `compare`)",
            scenario_file.display()
        );
    }
    let f = foreign(&args.target, &args.oracle, &mut s)?;
    if let Some(spec) = args.shard {
        return shard(&args, spec, s, scenario_file, f).await;
    }
    if args.probe {
        let csv = args.plan.buyers_csv.as_deref();
        let (buyers, columns) = super::plan::buyers(&s, &scenario_file, csv)?;
        anyhow::ensure!(
            !buyers.is_empty(),
            "{}: the scenario plans no buyers",
            scenario_file.display()
        );
        let first = buyers.get(0);
        let session = Session::with_values(columns.row(first.index));
        let timeout = Duration::from_millis(s.client.timeout_ms);
        let checked = mapping_check::run(&f, Sale::of(&s), &first, session, timeout).await?;
        let code = Exit::judged(checked.all_classified);
        args.plan.output.human(&checked.text);
        if args.plan.output.json.wanted() {
            super::output::json_line(&serde_json::json!({
                "schema": super::SUMMARY_SCHEMA,
                "probe": { "all_classified": checked.all_classified, "text": checked.text },
                "exit_code": code,
            }));
        }
        return Ok(code);
    }
    let subject = Subject::foreign(f);
    let Some(plan) = plan(&scenario_file, s, subject, &args.plan).await? else {
        return Ok(Exit::Success);
    };
    let (report, dir) = runner::execute(&plan).await?;
    args.plan.output.finish(&report, &dir, None);
    let incomplete = report.runs.iter().any(|r| r.findings.mapping_incomplete());
    Ok(Exit::judged(!incomplete))
}

/// `--scenario`, or the bundled `smoke` scenario when none is given (said on stderr).
fn scenario_or_smoke(given: Option<&std::path::Path>) -> PathBuf {
    match given {
        Some(p) => p.to_path_buf(),
        None => {
            crate::console::eoutln!(
                "no --scenario: using the small bundled `smoke` rush against a shop nobody has\n  \
                 sized yet (--scenario flash-100 for the post-mortem's 3000 buyers)"
            );
            PathBuf::from(SMOKE)
        }
    }
}

/// The scenario `attack` fires when none is given.
const SMOKE: &str = "smoke";

/// `attack --shard i/N --open-at T`: fires this shard at the target and writes its folder.
async fn shard(
    args: &AttackArgs,
    spec: ShardSpec,
    s: crate::traffic::Scenario,
    scenario_file: PathBuf,
    f: crate::rehearsal::Foreign,
) -> anyhow::Result<Exit> {
    super::plan::refuse_with_shard(
        &super::FaultArgs::default(),
        1,
        &args.plan.output,
        super::plan::Refused {
            dry_run: args.plan.dry_run,
            buyers_csv: args.plan.buyers_csv.is_some(),
            shops: false,
        },
    )?;
    let oracle_flags = args.oracle.oracle_sql.is_some() || args.oracle.oracle_http.is_some();
    anyhow::ensure!(
        !oracle_flags,
        "--shard cannot be combined with --oracle-sql or --oracle-http: a shard reads no oracle \
         (`oversell merge` judges the shards' sale by the clients' evidence)"
    );
    let open_at = args.open_at.ok_or_else(|| {
        anyhow::anyhow!("--shard needs --open-at: the instant every shard opens the sale at")
    })?;
    super::plan::check_names(&s, &scenario_file, &Default::default())?;
    anyhow::ensure!(
        s.target.as_ref().is_none_or(|m| m.login.is_none()),
        "{}: target.login is not supported with --shard yet (a shard's buyers would not log \
         in): run the rehearsal without --shard",
        scenario_file.display()
    );
    let whole = schedule::build(&s);
    let buyers_total = whole.len();
    let buyers = spec.take(&whole);
    let run = runner::ShardRun {
        scenario: s,
        scenario_file,
        shard: spec,
        open_at,
        shop_url: f.base_url.clone(),
        admin_token: None,
        subject: runner::Subject::foreign(f.clone()),
        buyers,
        buyers_total,
        out: args.plan.output.out.clone(),
        progress: !args.plan.output.quiet,
    };
    super::plan::fire_shard("attack shard", &run).await
}
