//! `oversell bench`: its flags and how a measurement is printed (the measuring is
//! [`crate::bench`]).

use super::ConnArgs;
use crate::bench::ShopBench;
use crate::exit::Exit;
use crate::inventory::Strategy;
use crate::shop::ShopKnobs;
use crate::store::Backend;
use clap::{Args, Subcommand};

/// `oversell bench`.
#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchCommand,
}

impl BenchArgs {
    /// `bench shop`'s database and Redis flags.
    pub(super) fn conn_mut(&mut self) -> Option<&mut ConnArgs> {
        match &mut self.what {
            BenchCommand::Shop(s) => Some(&mut s.conn),
            BenchCommand::Redis(_) | BenchCommand::Generator(_) => None,
        }
    }

    /// `--json` and `--json-file` of the measurement asked for.
    pub(super) fn json(&self) -> &super::JsonArgs {
        match &self.what {
            BenchCommand::Redis(a) => &a.json,
            BenchCommand::Shop(a) => &a.json,
            BenchCommand::Generator(a) => &a.json,
        }
    }
}

/// What `oversell bench` measures.
#[derive(Debug, Subcommand, Clone)]
pub enum BenchCommand {
    /// Our pre-deduct path vs redis-benchmark EVALSHA of the same script, in the same run.
    Redis(BenchRedisArgs),
    /// The reference shop end to end over HTTP (wrk, and a fixed rate) vs the strategy's
    /// ceiling (redis-benchmark, pgbench or mysqlslap), in the same run.
    Shop(Box<BenchShopArgs>),
    /// What sending costs: our generator with a real plan vs goose's bare request loop vs
    /// wrk, one trivial endpoint, in the same run (CPU per request, send lag, peak RSS).
    Generator(BenchGeneratorArgs),
}

/// `oversell bench generator`.
#[derive(Debug, Args, Clone)]
pub struct BenchGeneratorArgs {
    /// How long each client's phase runs (our plan's window, goose's and wrk's run): 5s, 1m.
    #[arg(short, long, value_name = "DURATION", default_value = "5s",
          value_parser = super::values::duration)]
    pub duration: std::time::Duration,
    /// The old spelling of --duration, in whole seconds.
    #[arg(long, value_name = "S", hide = true, conflicts_with = "duration",
          value_parser = super::values::whole::<u64>(1, crate::duration::LONGEST.as_secs().into()))]
    pub seconds: Option<u64>,
    /// Our plan's arrivals per second (buyers = rate × duration; 1 to 1000000).
    #[arg(long, default_value_t = 5_000,
          value_parser = super::values::whole::<u64>(1, 1_000_000))]
    pub rate: u64,
    /// goose's users and wrk's connections (1 to 10000).
    #[arg(short, long, alias = "connections", default_value_t = 64,
          value_parser = super::values::whole::<usize>(1, 10_000))]
    pub concurrency: usize,
    /// Skip the search for the highest rate the generator holds (2 s probes from --rate up,
    /// doubling, then bisected: about 10 probes).
    #[arg(long)]
    pub no_saturation: bool,
    #[command(flatten)]
    pub json: super::JsonArgs,
}

/// `oversell bench redis`.
#[derive(Debug, Args, Clone)]
pub struct BenchRedisArgs {
    /// How long to run our path (5s, 500ms; the baseline makes the same number of calls).
    #[arg(short, long, value_name = "DURATION", default_value = "5s",
          value_parser = super::values::duration)]
    pub duration: std::time::Duration,
    /// The old spelling of --duration, in whole seconds.
    #[arg(long, value_name = "S", hide = true, conflicts_with = "duration",
          value_parser = super::values::whole::<u64>(1, crate::duration::LONGEST.as_secs().into()))]
    pub seconds: Option<u64>,
    /// Concurrent callers (tasks for ours, connections for redis-benchmark; 1 to 10000).
    #[arg(short, long, default_value_t = 50,
          value_parser = super::values::whole::<usize>(1, 10_000))]
    pub concurrency: usize,
    /// Redis URL (loopback).
    #[arg(
        long,
        env = "REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    #[command(flatten)]
    pub json: super::JsonArgs,
}

/// `oversell bench shop`.
#[derive(Debug, Args, Clone)]
pub struct BenchShopArgs {
    /// Inventory strategy of the shop.
    #[arg(short, long, value_enum, help_heading = super::values::SHOP)]
    pub strategy: Strategy,
    /// Database backend (default: inferred from --database-url, else postgres).
    #[arg(short, long, value_enum, help_heading = super::values::SHOP)]
    pub backend: Option<Backend>,
    /// How long each phase runs (saturation, fixed rate, and pgbench's run): 10s, 1m.
    #[arg(short, long, value_name = "DURATION", default_value = "10s",
          value_parser = super::values::duration)]
    pub duration: std::time::Duration,
    /// The old spelling of --duration, in whole seconds.
    #[arg(long, value_name = "S", hide = true, conflicts_with = "duration",
          value_parser = super::values::whole::<u64>(1, crate::duration::LONGEST.as_secs().into()))]
    pub seconds: Option<u64>,
    /// Connections in flight: wrk's, the fixed-rate client's most in flight, and the
    /// ceiling's clients (1 to 10000).
    #[arg(short, long, alias = "connections", default_value_t = 64,
          value_parser = super::values::whole::<usize>(1, 10_000))]
    pub concurrency: usize,
    /// Also measure at a fixed rate: requests per second (8000) or a share of the saturation
    /// rate just measured (80%).
    #[arg(long)]
    pub rate: Option<crate::bench::rate::RateSpec>,
    /// Units on sale (enough that nothing sells out; at least 1).
    #[arg(long, default_value_t = 1_000_000,
          value_parser = super::values::whole::<i64>(1, i64::MAX as i128))]
    pub stock: i64,
    /// The shop's knobs `bench shop` sets: `--consumers`, `--buckets`, `--pool-size`,
    /// `--worker-threads`, `--persist-linger`.
    #[command(flatten)]
    pub shop: BenchKnobs,
    #[command(flatten)]
    pub json: super::JsonArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// The shop knobs `bench shop` takes ([`crate::bench::shop_plan::FLAGS`]): `serve`'s flags
/// (type, help, range: [`ShopKnobs`], one definition), with bench's defaults
/// ([`ShopBench::default_knobs`]: a pool of 64).
#[derive(Debug, Clone)]
pub struct BenchKnobs(pub ShopKnobs);

/// What a knob's flag means in `bench shop` beyond its `serve` help.
fn bench_note(name: &str) -> Option<&'static str> {
    (name == "pool_size").then_some(
        "Here also the SQL ceiling's clients (pgbench -c, mysqlslap --concurrency): the hot \
         row's contention on both sides",
    )
}

impl clap::FromArgMatches for BenchKnobs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(BenchKnobs(ShopBench::default_knobs().with_flags(m)))
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0 = self.0.clone().with_flags(m);
        Ok(())
    }
}

impl clap::Args for BenchKnobs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let flags = ShopBench::default_knobs().flags_of(&crate::bench::shop_plan::FLAGS);
        cmd.args(
            flags
                .into_iter()
                .map(|a| match bench_note(a.get_id().as_str()) {
                    Some(note) => {
                        let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                        a.help(format!("{}. {note}", help.trim_end_matches('.')))
                    }
                    None => a,
                }),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

/// `oversell bench redis|shop`: runs the measurement and prints it (and `--json`).
pub(super) async fn bench(what: BenchCommand) -> anyhow::Result<Exit> {
    match what {
        BenchCommand::Redis(args) => {
            let r = crate::bench::redis::redis(&crate::bench::RedisBench {
                redis_url: args.redis_url,
                seconds: whole_seconds("--duration", args.seconds, args.duration)?,
                concurrency: args.concurrency,
            })
            .await?;
            let text = format!(
                "our redis-lua pre-deduct path: {:>9.0} calls/s ({} calls in {:.1} s, {} tasks, \
                 one multiplexed connection)\n\
                 redis-benchmark EVALSHA:       {:>9.0} calls/s ({} calls, {} connections)\n\
                 ratio ours / baseline:         {:>9.3}\n\
                 stock deducted by both phases: {} (every call took one unit)\n\
                 baseline: {}\n",
                r.ours_ops_per_s,
                r.ours_ops,
                r.ours_seconds,
                r.concurrency,
                r.baseline_ops_per_s,
                r.baseline_ops,
                r.concurrency,
                r.ratio,
                r.deducted,
                r.baseline_command
            );
            emit(&args.json, &text, &r)?;
            Ok(Exit::Success)
        }
        BenchCommand::Generator(args) => {
            let seconds = whole_seconds("--duration", args.seconds, args.duration)?;
            let r = crate::bench::generator::generator(&crate::bench::generator::GeneratorBench {
                seconds,
                rate: args.rate,
                connections: args.concurrency,
                saturation: !args.no_saturation,
            })
            .await?;
            emit(&args.json, &crate::bench::generator::render(&r), &r)?;
            Ok(Exit::Success)
        }
        BenchCommand::Shop(mut args) => {
            args.shop.0.validate()?;
            let (backend, _) = args.conn.database_for(args.backend)?;
            let _services = args
                .conn
                .provide(&[backend], args.strategy.uses_redis())
                .await?;
            let (backend, database_url) = args.conn.database_for(args.backend)?;
            let seconds = whole_seconds("--duration", args.seconds, args.duration)?;
            let r = crate::bench::shop::shop(&ShopBench {
                strategy: args.strategy,
                backend,
                database_url,
                redis_url: args.conn.redis_url,
                seconds,
                connections: args.concurrency,
                rate: args.rate,
                stock: args.stock,
                shop_exe: crate::runner::shop_exe()?,
                knobs: args.shop.0,
            })
            .await?;
            emit(&args.json, &crate::bench::shop::render(&r), &r)?;
            Ok(Exit::Success)
        }
    }
}

/// A bench phase's length in whole seconds: `--duration` (at least 1s, whole seconds: the
/// baselines take seconds), or the old `--seconds`.
fn whole_seconds(
    flag: &str,
    old: Option<u64>,
    duration: std::time::Duration,
) -> anyhow::Result<u64> {
    let secs = match old {
        Some(s) => s,
        None => {
            anyhow::ensure!(
                duration.subsec_nanos() == 0,
                "{flag} takes whole seconds here (the baselines run for seconds): got {}",
                humantime::format_duration(duration)
            );
            duration.as_secs()
        }
    };
    anyhow::ensure!(secs >= 1, "{flag} must be at least 1s (got {secs}s)");
    Ok(secs)
}

/// The measurement for people (stdout, or stderr under `--json`, which moved stdout there)
/// and its JSON document where `--json`/`--json-file` asked.
fn emit(json: &super::JsonArgs, text: &str, r: &impl serde::Serialize) -> anyhow::Result<()> {
    crate::console::out!("{text}");
    if json.wanted() {
        super::output::json_line(&serde_json::to_value(r)?);
    }
    if let Some(path) = &json.json_file {
        crate::console::outln!("json: {}", path.display());
    }
    Ok(())
}
