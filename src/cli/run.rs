//! `oversell run` and `oversell compare`: the reference shop on one strategy, or on several
//! strategies and backends one after another, each run audited and reported.

use super::scenario::{defect_warning, load_scenario, Overrides};
use super::{dry_run, plan, values, ConnArgs, FaultArgs, OutputArgs, ShardArgs};
use crate::exit::Exit;
use crate::inventory::{Defect, Strategy};
use crate::runner::{self, Cell, RunPlan, Subject};
use crate::store::Backend;
use clap::Args;
use std::path::PathBuf;

/// Scenario and output flags shared by `run` and `compare`.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = values::SCENARIO)]
pub struct ScenarioArgs {
    /// Scenario: a TOML file, or the name of a bundled one (`oversell scenarios` lists them;
    /// an existing file wins).
    #[arg(
        short = 'S',
        long,
        value_name = "FILE|NAME",
        default_value = "flash-100"
    )]
    pub scenario: PathBuf,
    #[command(flatten)]
    pub send_lag: plan::SendLagArgs,
    /// Run each strategy N times, each on a fresh sale (1 to 100): the report keeps every
    /// repeat and shows each metric as median (min–max); `diff` judges by that spread.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = values::repeat)]
    pub repeat: u32,
    /// redis-lua: the shop's Redis is a Redis Cluster reached through --redis-url's node(s)
    /// (sets the scenario's `[shop] redis_cluster`; a `redis+cluster://` URL needs no flag).
    #[arg(long, help_heading = values::SHOP)]
    pub redis_cluster: bool,
    /// Start K reference shop processes (1 to 16) on the one database and Redis, each with its
    /// own port and persistence consumer in the one consumer group; buyer i goes to shop
    /// i mod K. Overrides the scenario's `[shop] shops` (default 1).
    #[arg(long, value_name = "K", value_parser = plan::shops_arg, help_heading = values::SHOP)]
    pub shops: Option<u32>,
    /// TESTING AID: run the reference shop with this known defect built in (sets the
    /// scenario's `[shop] defect`; the report records it). See docs/src/gate/detection.md.
    #[arg(long, value_enum, value_name = "NAME")]
    pub defect: Option<Defect>,
    /// Print the plan of each run (strategy, backend, repeat; arrivals per second, request
    /// estimate, peak) and send nothing: no server or shop is started.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub faults: FaultArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

impl ScenarioArgs {
    /// The shop flags this command line sets on its scenario.
    pub(super) fn overrides(&self) -> Overrides<'_> {
        Overrides {
            faults: &self.faults,
            shops: self.shops,
            redis_cluster: self.redis_cluster,
            defect: self.defect,
        }
    }
}

/// `oversell run`.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    /// Inventory strategy.
    #[arg(short, long, value_enum, help_heading = values::SHOP)]
    pub strategy: Strategy,
    /// Database backend (default: inferred from --database-url, else postgres).
    #[arg(short, long, value_enum, help_heading = values::SHOP)]
    pub backend: Option<Backend>,
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub shard: ShardArgs,
}

/// `oversell compare`.
#[derive(Debug, Args, Clone)]
pub struct CompareArgs {
    /// Strategies to compare, comma-separated (default: all of them).
    #[arg(short, long = "strategy", alias = "strategies", value_enum, value_delimiter = ',',
          value_name = "LIST",
          default_values_t = Strategy::all().to_vec(), help_heading = values::SHOP)]
    pub strategies: Vec<Strategy>,
    /// Backends, comma-separated: postgres, mysql (default: inferred from --database-url).
    /// With both, --database-url serves the backend it names and --mysql-url (or the default
    /// PostgreSQL URL) the other.
    #[arg(short, long = "backend", alias = "backends", value_enum, value_delimiter = ',',
          value_name = "LIST",
          help_heading = values::SHOP)]
    pub backends: Vec<Backend>,
    /// Skip the oversell-against-the-rush series: when naive is compared, three rounds of short
    /// rushes of it at five rising arrival rates, a line fitted through each rate's median (the
    /// post-mortem's law; about a minute per backend).
    #[arg(long, help_heading = values::SHOP)]
    pub no_law: bool,
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `oversell run`: one strategy on one backend (or one shard of it: `--shard i/N`).
pub(super) async fn run(mut args: RunArgs) -> anyhow::Result<Exit> {
    let (backend, _) = args.conn.database_for(args.backend)?;
    if args.shard.shard.is_some() {
        anyhow::ensure!(
            args.conn.services != crate::services::ServicesMode::Managed,
            "--services managed: a shard fires at the shop serving at --shop-url, on \
             that shop's servers; start it with `oversell serve --services managed`"
        );
        let sa = &args.scenario;
        anyhow::ensure!(
            sa.defect.is_none(),
            "--defect is built into the shop a run starts; a shard fires at the shop \
             serving at --shop-url: start that one with `oversell serve --defect NAME`"
        );
        plan::refuse_with_shard(
            &sa.faults,
            sa.repeat,
            &sa.output,
            plan::Refused {
                shops: sa.shops.is_some(),
                dry_run: sa.dry_run,
                ..plan::Refused::default()
            },
        )?;
        return plan::shard(
            &sa.scenario,
            &args.shard,
            args.strategy,
            (args.backend, &args.conn),
            &sa.output,
            sa.send_lag.ms(),
        )
        .await;
    }
    if args.scenario.dry_run {
        let servers = args
            .conn
            .check_servers(&[backend], args.strategy.uses_redis())?;
        return dry_run::print(&args.scenario, &[(args.strategy, backend)], &servers);
    }
    let _services = args
        .conn
        .provide(&[backend], args.strategy.uses_redis())
        .await?;
    let (backend, url) = args.conn.database_for(args.backend)?;
    let cells = vec![Cell {
        strategy: args.strategy,
        backend,
        database_url: url,
    }];
    run_and_print(&args.scenario, cells, &args.conn).await
}

/// `oversell compare`: every `--strategy` on every `--backend`, one after another.
pub(super) async fn compare(mut args: CompareArgs) -> anyhow::Result<Exit> {
    let backends: Vec<Option<Backend>> = if args.backends.is_empty() {
        vec![None]
    } else {
        args.backends.iter().copied().map(Some).collect()
    };
    // One set of managed servers for all of compare's runs. With several backends
    // --database-url serves the one it names (database_each), as --help says.
    let several = backends.len() > 1;
    let used = backends
        .iter()
        .map(|b| match several {
            true => args.conn.database_each(*b),
            false => args.conn.database_for(*b),
        })
        .map(|r| r.map(|(b, _)| b))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let redis = args.strategies.iter().any(|s| s.uses_redis());
    if args.scenario.dry_run {
        let cells: Vec<_> = used
            .iter()
            .flat_map(|b| args.strategies.iter().map(move |s| (*s, *b)))
            .collect();
        let servers = args.conn.check_servers(&used, redis)?;
        return dry_run::print(&args.scenario, &cells, &servers);
    }
    let _services = args.conn.provide(&used, redis).await?;
    let cells = args.conn.cells(&args.strategies, &args.backends)?;
    run_and_print_law(&args.scenario, cells, &args.conn, !args.no_law).await
}

async fn run_and_print(
    sa: &ScenarioArgs,
    cells: Vec<Cell>,
    conn: &ConnArgs,
) -> anyhow::Result<Exit> {
    run_and_print_law(sa, cells, conn, false).await
}

/// Runs `cells` on the scenario and prints the result; `law`: then the law's rushes of naive
/// on each backend it ran on ([`crate::sweep::law`]), added to the same report.
async fn run_and_print_law(
    sa: &ScenarioArgs,
    cells: Vec<Cell>,
    conn: &ConnArgs,
    law: bool,
) -> anyhow::Result<Exit> {
    let (mut scenario, scenario_file) = load_scenario(&sa.scenario)?;
    sa.overrides().apply(&mut scenario);
    let runs: Vec<(bool, &str)> = cells
        .iter()
        .map(|c| (c.strategy.uses_redis(), c.database_url.as_str()))
        .collect();
    crate::nemesis::refuse_unmanaged(&scenario.faults, &runs)?;
    let redis_url =
        crate::store::redis_conn::with_cluster(&conn.redis_url, scenario.shop.redis_cluster);
    defect_warning(&scenario.shop, cells.iter().map(|c| c.strategy))?;
    plan::max_send_lag(&mut scenario, sa.send_lag.ms())?;
    let live = sa.output.live().await?;
    let naive: Vec<Cell> = cells
        .iter()
        .filter(|c| law && c.strategy == Strategy::Naive)
        .cloned()
        .collect();
    let subject = Subject::reference(cells, redis_url.clone())?;
    let plan = RunPlan::new(scenario, scenario_file, subject, sa.output.out.clone())
        .with_drain_limit(sa.output.drain_limit())
        .with_progress(!sa.output.quiet)
        .with_live(live)
        .with_repeat(sa.repeat);
    let (mut report, dir) = runner::execute(&plan).await?;
    if !naive.is_empty() {
        for cell in naive {
            let law = crate::sweep::law::run(&crate::sweep::law::LawPlan {
                scenario: &plan.scenario,
                scenario_file: &plan.scenario_file,
                cell,
                redis_url: redis_url.clone(),
                out: dir.join("law"),
                relative_to: &dir,
                drain_limit: plan.drain_limit,
                progress: plan.progress,
            })
            .await?;
            if plan.progress {
                crate::telemetry::stderr_line(&format!("   the law: {}", law.sentence()));
            }
            report.law.push(law);
        }
        if !report.law.is_empty() {
            crate::report::write(&dir, &report)?;
        }
    }
    sa.output.finish(&report, &dir, None);
    Ok(Exit::Success)
}
