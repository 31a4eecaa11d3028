//! The command line: clap definitions, turned into typed plans before any work starts.

use crate::exit::Exit;
use crate::inventory::InventoryError;
use crate::services::Unreachable;
use crate::store::StoreError;
use clap::{Args, Parser, Subcommand};

mod attack;
mod bench;
mod capacity;
mod command_flags;
mod conn;
mod diagnose;
mod diff;
mod dry_run;
mod fit;
mod gate;
mod merge;
mod output;
mod plan;
mod run;
mod scenario;
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
pub use conn::ConnArgs;
pub use diagnose::DiagnoseArgs;
pub use diff::DiffArgs;
pub use fit::FitArgs;
pub use gate::GateArgs;
pub use merge::MergeArgs;
pub use output::{parse, parse_from};
pub use output::{JsonArgs, OutputArgs, SUMMARY_SCHEMA};
pub use plan::{FaultArgs, ShardArgs};
pub use run::{CompareArgs, RunArgs, ScenarioArgs};
pub use scenario::{defect_warning, load_scenario};
pub use scenario_list::ScenariosArgs;
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

/// `oversell completions`.
#[derive(Debug, Args, Clone)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
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
        _ => {
            crate::placement::take_generator_place();
            builder.on_thread_unpark(crate::traffic::attack::pace_on_unpark);
        }
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
        Command::Run(args) => run::run(args).await,
        Command::Compare(args) => run::compare(args).await,
        Command::Gate(args) => gate::gate(*args).await,
        Command::Merge(args) => merge::merge(*args).await,
        Command::Attack(args) => attack::attack(*args).await,
        Command::Selftest(args) => selftest::selftest(*args).await,
        Command::Capacity(args) => capacity::capacity(*args).await,
        Command::Sweep(args) => capacity::sweep(*args).await,
        Command::Diagnose(args) => diagnose::diagnose(*args).await,
        Command::Bench(args) => bench::bench(args.what).await,
        Command::Fit(args) => fit::fit(*args),
        Command::Scenarios(args) => Ok(scenario_list::scenarios(args)),
        Command::Completions(args) => {
            clap_complete::generate(
                args.shell,
                &mut self::command(),
                "oversell",
                &mut crate::console::Stdout,
            );
            Ok(Exit::Success)
        }
        Command::Diff(args) => diff::diff(args),
    }
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
