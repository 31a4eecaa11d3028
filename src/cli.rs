//! The command line: clap definitions, turned into typed plans before any work starts.

use crate::diff::DiffPlan;
use crate::exit::Exit;
use crate::inventory::{Defect, InventoryError, Strategy};
use crate::runner::{self, Cell, RunPlan, Subject};
use crate::services::Unreachable;
use crate::shop::ShopKnobs;
use crate::store::{Backend, StoreError};
use crate::traffic::scenario::{Scenario, ScenarioError};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

mod attack;
mod bench;
mod capacity;
mod command_flags;
mod conn;
mod diagnose;
mod dry_run;
mod fit;
mod gate;
mod merge;
mod output;
mod plan;
mod scenario_list;
mod selftest;
mod serve;
mod services;
#[cfg(test)]
mod tests;
pub mod values;
pub use attack::AttackArgs;
pub use capacity::{CapacityArgs, SweepArgs};
pub use command_flags::Verbosity;
pub use diagnose::DiagnoseArgs;
pub use fit::FitArgs;
pub use gate::GateArgs;
pub use merge::MergeArgs;
pub use output::{parse, parse_from};
pub use output::{summary, JsonArgs, OutputArgs, SUMMARY_SCHEMA};
pub use plan::{FaultArgs, OracleArgs, PlanArgs, ShardArgs};
pub use selftest::SelftestArgs;
pub use serve::ServeArgs;

/// Reproduce, measure and gate oversell in flash sales.
#[derive(Debug, Parser)]
#[command(name = "oversell", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

/// The command line as the binary reads it: [`Cli`] with a negative number reaching its
/// flag's own check ([`values::dash_values`]) and the long commands' common flags first
/// ([`values::common_first`]).
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let long: [(&str, &[&str]); 2] = [("serve", serve::COMMON), ("gate", gate::COMMON)];
    values::common_first(values::dash_values(Cli::command()), &long)
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the reference shop with one inventory strategy.
    Serve(Box<ServeArgs>),
    /// Fire a scenario at one strategy of the reference shop, audit it, and report.
    Run(RunArgs),
    /// Fire the same scenario at several strategies (and backends) and compare them.
    Compare(CompareArgs),
    /// CI gate: run a scenario and check its thresholds. Exit 0 all held, 1 a threshold was
    /// breached (or not verified), 2 bad usage or scenario, 3 target or service unreachable.
    Gate(Box<GateArgs>),
    /// Rehearse a sale against your own shop (loopback unless --allow-remote) and audit it with
    /// your oracle (--oracle-sql or --oracle-http).
    Attack(Box<AttackArgs>),
    /// Find each strategy's capacity: the highest arrival rate at which the scenario's
    /// objective holds (doubling, then bisection; each probe a short sale on a fresh stock).
    Capacity(Box<CapacityArgs>),
    /// Diagnose a shop: a battery of experiments within --budget (the rush, a capacity
    /// search, adversarial buyers, restocks), one row per failure class with its proof and
    /// remedy. Exit 0 nothing found, 1 found, 2 bad input, 3 too little could be tested.
    Diagnose(Box<DiagnoseArgs>),
    /// One run per value of a shop knob or of the arrival rate; headline metrics against it.
    Sweep(Box<SweepArgs>),
    /// Compare two reports run by run (exit 1 when a --fail-on metric got worse).
    Diff(DiffArgs),
    /// Fit a scenario to a real sale's access log: arrivals per second (replayed as a trace),
    /// viewers, bots, think times, pay/cancel/abandon, stock; --scale and --compress it. Writes
    /// the scenario (each number commented with its source), fit.md and a chart beside it.
    Fit(Box<FitArgs>),
    /// Combine the shard folders of one sale (`run --shard i/N`) into one report: check they
    /// are the same sale, add the histograms, run the oracle once against the shop's final state.
    Merge(Box<MergeArgs>),
    /// Measure our paths next to their raw ceiling in the same run: `bench redis`, `bench shop`.
    Bench(bench::BenchArgs),
    /// Show what the harness catches: fire each known defect's bundled scenario at a reference
    /// shop with that defect (caught?) and at the correct strategy (passes?). Exit 0 every
    /// defect caught and every correct run passed, 1 otherwise.
    Selftest(Box<SelftestArgs>),
    /// List the scenarios bundled with oversell (usable by name with --scenario).
    Scenarios(ScenariosArgs),
    /// Print a shell completion script: `oversell completions bash > /etc/bash_completion.d/oversell`.
    Completions(CompletionsArgs),
}

/// `oversell scenarios`.
#[derive(Debug, Args, Clone)]
pub struct ScenariosArgs {
    #[command(flatten)]
    pub json: JsonArgs,
}

/// `oversell completions`.
#[derive(Debug, Args, Clone)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `oversell diff`.
#[derive(Debug, Args, Clone)]
pub struct DiffArgs {
    /// The baseline: a report.json or a report folder.
    pub baseline: PathBuf,
    /// The candidate: a report.json or a report folder.
    pub candidate: PathBuf,
    /// Noise band in percent of the baseline: smaller changes are "same" (oracle counts such
    /// as oversell compare exactly).
    #[arg(long, default_value_t = 5.0)]
    pub band: f64,
    /// Exit 1 when the candidate is worse on any of these metrics (comma-separated), e.g.
    /// oversell,lost_acks,p99 (the names `gate --threshold` takes). A run only the candidate
    /// has is held to each metric's default limit; a run only the baseline has fails.
    #[arg(long, value_delimiter = ',')]
    pub fail_on: Vec<String>,
    /// Also write the Markdown to this file.
    #[arg(long, value_name = "FILE", alias = "out", value_parser = values::file)]
    pub markdown: Option<PathBuf>,
    /// On a terminal, print the Markdown (every metric's long label, min–max of repeats) as a
    /// pipe gets it, instead of the 100-column tables.
    #[arg(long)]
    pub wide: bool,
    #[command(flatten)]
    pub json: JsonArgs,
}

/// Where the databases and Redis are.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = values::CONNECTIONS)]
pub struct ConnArgs {
    /// Database URL: postgres://... or mysql://... (the database is created if missing).
    #[arg(long, value_name = "URL", env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// MySQL/MariaDB URL used when the backend is mysql and --database-url is not a mysql:// URL.
    #[arg(
        long,
        value_name = "URL",
        env = "MYSQL_URL",
        hide_env_values = true,
        default_value = "mysql://root@127.0.0.1:3306/oversell"
    )]
    pub mysql_url: String,
    /// Redis URL (used by redis-lua).
    #[arg(
        long,
        value_name = "URL",
        env = "REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// Where the databases and Redis come from: auto (the URLs when they answer, else private
    /// servers started from the installed binaries), managed (always private servers),
    /// external (the URLs only). See docs/src/running/services.md.
    #[arg(long, value_enum, env = "OVERSELL_SERVICES", hide_env_values = true,
          default_value_t = crate::services::ServicesMode::Auto)]
    pub services: crate::services::ServicesMode,
    /// The managed PostgreSQL's URL when --database-url names a MySQL database.
    #[arg(skip)]
    pub managed_postgres: Option<String>,
    /// The fields whose value came from the environment (`database_url`: `DATABASE_URL`), not
    /// a flag: set by [`output::parse_from`]. `DATABASE_URL` serves the backend it names; a
    /// flag of another backend than `--backend` is refused; errors name the variable.
    #[arg(skip)]
    pub from_env: Vec<&'static str>,
}

impl ConnArgs {
    /// The database URL for the one `backend` a command asks for (default: the backend
    /// --database-url names, else postgres). `DATABASE_URL` of another backend than
    /// `--backend` leaves it to the other's URL (`--mysql-url`/`MYSQL_URL`, or the default
    /// PostgreSQL URL), as the environment table says; a `--database-url` flag of another
    /// backend is refused: the run would otherwise quietly use another database than the one
    /// the command line names.
    pub fn database_for(&self, backend: Option<Backend>) -> anyhow::Result<(Backend, String)> {
        if let (Some(asked), Some(url)) = (backend, self.database_url.as_deref()) {
            let named = Backend::from_url(url).map_err(|e| self.url_error(e))?;
            let mysql = asked == Backend::Mysql;
            let (asked, named) = (asked.as_str(), named.as_str());
            anyhow::ensure!(
                named == asked || self.from_env("database_url"),
                "--backend {asked} but --database-url is a {named} URL ({}): give a {asked} \
                 --database-url{}, or drop --backend to use the {named} one",
                crate::services::redact_url(url),
                if mysql {
                    " (or drop it and use --mysql-url)"
                } else {
                    ""
                }
            );
        }
        self.database_each(backend)
    }

    /// Every strategy on every backend (`--backend` empty: the one `--database-url` names),
    /// strategy by strategy within a backend; with several backends each URL is
    /// [`ConnArgs::database_each`]'s. Asked after the managed servers started, whose URLs
    /// these then are.
    pub fn cells(
        &self,
        strategies: &[Strategy],
        backends: &[Backend],
    ) -> anyhow::Result<Vec<Cell>> {
        let backends: Vec<Option<Backend>> = match backends {
            [] => vec![None],
            some => some.iter().copied().map(Some).collect(),
        };
        let several = backends.len() > 1;
        let mut cells = Vec::new();
        for b in backends {
            let (backend, url) = match several {
                true => self.database_each(b)?,
                false => self.database_for(b)?,
            };
            cells.extend(strategies.iter().map(|s| Cell {
                strategy: *s,
                backend,
                database_url: url.clone(),
            }));
        }
        Ok(cells)
    }

    /// The database URL for `backend` when a command runs several backends (`compare
    /// --backend postgres,mysql`, `merge`): --database-url serves the backend it names, the
    /// other comes from --mysql-url or the default PostgreSQL URL.
    pub fn database_each(&self, backend: Option<Backend>) -> anyhow::Result<(Backend, String)> {
        let given = self
            .database_url
            .as_deref()
            .map(|u| Backend::from_url(u).map(|b| (b, u.to_string())))
            .transpose()
            .map_err(|e| self.url_error(e))?;
        Ok(match (backend, given) {
            (None, Some(g)) => g,
            (None, None) => (
                Backend::Postgres,
                Backend::Postgres.default_url().to_string(),
            ),
            (Some(b), Some((gb, url))) if gb == b => (b, url),
            (Some(Backend::Mysql), _) => (Backend::Mysql, self.mysql_url.clone()),
            (Some(Backend::Postgres), _) => (
                Backend::Postgres,
                self.managed_postgres
                    .clone()
                    .unwrap_or_else(|| Backend::Postgres.default_url().to_string()),
            ),
        })
    }
}

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
    /// Skip the oversell-against-the-rush series: when naive is compared, five short rushes of
    /// it at rising arrival rates, a line fitted through what each oversold (the post-mortem's
    /// law; about half a minute per backend).
    #[arg(long, help_heading = values::SHOP)]
    pub no_law: bool,
    #[command(flatten)]
    pub scenario: ScenarioArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// The tokio runtime the command runs on: multi-threaded, every driver on; `serve`'s workers
/// are [`ServeArgs::workers`] (`--worker-threads N`, else one per core, less one next to its
/// servers), every other command's tokio's default (one per core, or `TOKIO_WORKER_THREADS`).
pub fn runtime(cli: &Cli) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    match &cli.command {
        Command::Serve(args) => {
            if let Some(n) = args.workers() {
                builder.worker_threads(n);
            }
        }
        // Every other command generates load (or judges it): it takes the generator's place
        // before the runtime's threads exist, so they inherit it.
        _ => crate::placement::take_generator_place(),
    }
    builder.build()
}

/// Runs the parsed command; the returned code is the process exit code. A command that stops
/// with an error and was asked for `--json` also says so on stdout.
pub async fn run(cli: Cli) -> anyhow::Result<Exit> {
    crate::traffic::goose_output::enable();
    let json = cli.command.json().cloned().unwrap_or_default();
    json.claim()?;
    let result = dispatch(cli.command).await;
    if let Err(e) = &result {
        if json.wanted() {
            output::json_line(&output::error(e, exit_code_for(e)));
        }
    }
    result
}

async fn dispatch(command: Command) -> anyhow::Result<Exit> {
    match command {
        Command::Serve(args) => serve::serve(*args).await,
        Command::Run(args) => run_one(args).await,
        Command::Compare(args) => compare(args).await,
        Command::Gate(args) => gate::gate(*args).await,
        Command::Merge(args) => merge::merge(*args).await,
        Command::Attack(args) => attack::attack(*args).await,
        Command::Selftest(args) => selftest::selftest(*args).await,
        Command::Capacity(args) => capacity::capacity(*args).await,
        Command::Sweep(args) => capacity::sweep(*args).await,
        Command::Diagnose(args) => diagnose::diagnose(*args).await,
        Command::Bench(args) => bench::bench(args.what).await,
        Command::Fit(args) => fit::fit(*args),
        Command::Scenarios(args) => {
            crate::console::out!("{}", scenario_list::render());
            if args.json.wanted() {
                output::json_line(&scenario_list::json());
            }
            Ok(Exit::Success)
        }
        Command::Completions(args) => {
            clap_complete::generate(
                args.shell,
                &mut self::command(),
                "oversell",
                &mut crate::console::Stdout,
            );
            Ok(Exit::Success)
        }
        Command::Diff(args) => {
            let plan = DiffPlan::new(
                args.baseline,
                args.candidate,
                args.band,
                &args.fail_on,
                args.markdown,
            )?;
            let (code, doc) = crate::diff::run(&plan, args.wide)?;
            if args.json.wanted() {
                output::json_line(&doc);
            }
            Ok(code)
        }
    }
}

/// `oversell run`: one strategy on one backend (or one shard of it: `--shard i/N`).
async fn run_one(mut args: RunArgs) -> anyhow::Result<Exit> {
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
            backend,
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
async fn compare(mut args: CompareArgs) -> anyhow::Result<Exit> {
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

/// Loads `--scenario`: a file, or a bundled scenario by name (a bad scenario: exit 2 with the
/// file and field named). Says which on stderr; returns it and how reports name its origin.
pub fn load_scenario(arg: &std::path::Path) -> Result<(Scenario, PathBuf), ScenarioError> {
    let (scenario, source) = crate::scenarios::resolve(arg)?;
    crate::console::eoutln!("{}", source.describe());
    Ok((scenario, source.origin()))
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
    sa.faults.apply(&mut scenario);
    let runs: Vec<(bool, &str)> = cells
        .iter()
        .map(|c| (c.strategy.uses_redis(), c.database_url.as_str()))
        .collect();
    crate::nemesis::refuse_unmanaged(&scenario.faults, &runs)?;
    scenario.shop.redis_cluster |= sa.redis_cluster;
    let redis_url =
        crate::store::redis_conn::with_cluster(&conn.redis_url, scenario.shop.redis_cluster);
    if let Some(k) = sa.shops {
        scenario.shop.shops = k;
    }
    if let Some(d) = sa.defect {
        scenario.shop.defect = Some(d);
    }
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

/// With a defect asked for (`--defect`, `[shop] defect`): refuses it when a strategy lacks it
/// (naming the ones that have it), else prints the loud warning on stderr.
pub fn defect_warning(
    knobs: &ShopKnobs,
    strategies: impl IntoIterator<Item = Strategy>,
) -> anyhow::Result<()> {
    let Some(defect) = knobs.defect else {
        return Ok(());
    };
    for strategy in strategies {
        knobs.check_defect(strategy)?;
        crate::console::eoutln!("{}", defect.warning(strategy));
    }
    Ok(())
}

/// The exit code for an error that ended a command: [`Exit::Unreachable`] when a service could
/// not be reached (a typed [`Unreachable`] or store/inventory equivalent anywhere in the chain),
/// [`Exit::Error`] for anything else that stopped the command before it could judge anything (bad usage, bad
/// scenario, bad CSV, a refused remote target).
pub fn exit_code_for(e: &anyhow::Error) -> Exit {
    if e.chain().any(is_unreachable) {
        Exit::Unreachable
    } else {
        Exit::Error
    }
}

/// Whether one error of a chain says a service could not be reached: [`Unreachable`], a
/// [`StoreError::Unreachable`], or an [`InventoryError`] carrying either (those wrap their cause
/// transparently, so the chain alone would skip it).
fn is_unreachable(e: &(dyn std::error::Error + 'static)) -> bool {
    let store_unreachable = |s: &StoreError| matches!(s, StoreError::Unreachable { .. });
    e.is::<Unreachable>()
        || e.downcast_ref::<StoreError>()
            .is_some_and(store_unreachable)
        || match e.downcast_ref::<InventoryError>() {
            Some(InventoryError::Unreachable(_)) => true,
            Some(InventoryError::Store(s)) => store_unreachable(s),
            _ => false,
        }
}
