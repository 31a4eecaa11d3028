//! `oversell merge`: the shards' records of one sale joined, audited by one oracle, written
//! as one report (and judged like `gate` with `--gate`).

use super::{values, ConnArgs, OutputArgs};
use crate::exit::Exit;
use crate::runner;
use crate::store::Backend;
use clap::Args;
use std::path::PathBuf;

/// `oversell merge`.
#[derive(Debug, Args, Clone)]
pub struct MergeArgs {
    /// The shard folders (each holds the shard.json `run --shard` wrote): all N of them.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The reference shop the shards fired at (default: the URL they recorded), drained and
    /// (redis-lua) reconciled before the oracle reads.
    #[arg(long, value_name = "URL")]
    pub shop_url: Option<String>,
    /// The shop's --admin-token, for the final reconciliation (redis-lua).
    #[arg(long, env = "OVERSELL_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// The shop's --redis-prefix (redis-lua: where the oracle reads Redis stock).
    #[arg(long, default_value = "oversell")]
    pub redis_prefix: String,
    /// Judge the merged report like `gate`: the scenario's [thresholds] (and --threshold
    /// overrides); exit 0 all held, 1 breached or not verified.
    #[arg(long, help_heading = values::THRESHOLDS)]
    pub gate: bool,
    /// With --gate: a limit, overriding the scenario: NAME=VALUE, repeatable (as `gate`).
    #[arg(short = 't', long = "threshold", value_name = "NAME=VALUE", requires = "gate",
          help_heading = values::THRESHOLDS)]
    pub thresholds: Vec<crate::gate::Override>,
    /// With --gate: let thresholds that could not be measured pass as "not verified".
    #[arg(long, requires = "gate", help_heading = values::THRESHOLDS)]
    pub allow_unverified: bool,
    /// With --gate: write JUnit XML here.
    #[arg(long, value_name = "FILE", requires = "gate", value_parser = values::file,
          help_heading = values::THRESHOLDS)]
    pub junit: Option<PathBuf>,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Runs `oversell merge`: the exit code (with `--gate`, the verdict's).
pub async fn merge(args: MergeArgs) -> anyhow::Result<Exit> {
    anyhow::ensure!(
        args.output.metrics_listen.is_none(),
        "merge fires no load, so --metrics-listen would serve nothing: drop it (it is \
         for run, compare, gate and attack; each shard's run can serve its own)"
    );
    anyhow::ensure!(
        args.conn.services != crate::services::ServicesMode::Managed,
        "merge --services managed: merge reads the database and Redis the shards' shop \
         wrote; a managed server would be empty (use auto or external)"
    );
    let databases = [Backend::Postgres, Backend::Mysql]
        .into_iter()
        .map(|b| args.conn.database_each(Some(b)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let plan = runner::MergePlan {
        dirs: args.dirs.clone(),
        shop_url: args.shop_url.clone(),
        admin_token: args.admin_token.clone().filter(|t| !t.is_empty()),
        databases,
        redis_url: args.conn.redis_url.clone(),
        redis_prefix: args.redis_prefix.clone(),
        out: args.output.out.clone(),
        drain_limit: args.output.drain_limit(),
        progress: !args.output.quiet,
        // The report flags a generator-bound run by the bound the gate checks.
        send_lag_bound: args
            .thresholds
            .iter()
            .rev()
            .find(|o| o.metric == crate::gate::Metric::SendLagP99Ms)
            .map(|o| o.value),
    };
    let (report, dir) = crate::under_test::merge(&plan).await?;
    if args.gate {
        return super::gate::judge_merged(
            &report,
            &dir,
            &args.thresholds,
            args.allow_unverified,
            args.junit.as_deref(),
            &args.output,
        );
    }
    args.output.finish(&report, &dir, None);
    Ok(Exit::Success)
}
