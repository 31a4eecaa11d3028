//! `oversell selftest`: flags, the cases they pick, and how the table (or JSON) is printed;
//! the cases themselves run in [`crate::selftest`].

use super::{ConnArgs, OutputArgs};
use crate::exit::Exit;
use crate::inventory::{Defect, Strategy};
use crate::selftest::{self, Setup};
use crate::store::Backend;
use clap::Args;

/// `oversell selftest`.
#[derive(Debug, Args, Clone)]
pub struct SelftestArgs {
    /// Only these defects, comma-separated (default: every known defect).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "NAME",
          help_heading = super::values::SHOP)]
    pub defect: Vec<Defect>,
    /// Fire at these strategies, comma-separated: each defect on those that have it, and the
    /// correct runs on all of them (default: each defect's first strategy).
    #[arg(short, long, value_enum, value_delimiter = ',', help_heading = super::values::SHOP)]
    pub strategy: Vec<Strategy>,
    /// Run each correct strategy N times (1 to 100): a false alarm shows up by the fifth.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = super::values::repeat,
          help_heading = super::values::SCENARIO)]
    pub repeat: u32,
    /// Database backend of the reference shop (default: from --database-url, else postgres).
    #[arg(short, long, value_enum, help_heading = super::values::SHOP)]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub send_lag: super::plan::SendLagArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs the cases in turn and prints the table; 0 when every defect was caught and every
/// correct run passed, 1 otherwise.
pub async fn selftest(mut args: SelftestArgs) -> anyhow::Result<Exit> {
    anyhow::ensure!(
        args.output.metrics_listen.is_none(),
        "selftest runs many short runs: --metrics-listen is for run, compare and gate"
    );
    let cases = selftest::cases(&args.defect, &args.strategy, args.repeat)?;
    let (backend, _) = args.conn.database_for(args.backend)?;
    let redis = cases.iter().any(|c| c.strategy.uses_redis());
    let _services = args.conn.provide(&[backend], redis).await?;
    let (backend, database_url) = args.conn.database_for(args.backend)?;
    let setup = Setup {
        backend,
        database_url,
        redis_url: args.conn.redis_url.clone(),
        shop_exe: crate::runner::shop_exe()?,
        out: args.output.out.join("selftest"),
        drain_limit: args.output.drain_limit(),
        max_send_lag_ms: args.send_lag.ms(),
    };
    let mut rows = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        if !args.output.quiet {
            crate::console::eoutln!(
                "selftest {}/{}: {} on {} ({})",
                i + 1,
                cases.len(),
                case.defect
                    .map_or("no defect".to_string(), |d| format!("defect {d}")),
                case.strategy,
                selftest::scenario_name(case.meant_for)
            );
        }
        rows.push(selftest::run(*case, &setup).await);
    }
    args.output.human(&selftest::render(&rows));
    if args.output.json.wanted() {
        super::output::json_line(&selftest::json(&rows));
    }
    Ok(Exit::judged(selftest::passed(&rows)))
}
