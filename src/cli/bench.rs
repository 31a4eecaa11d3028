//! `oversell bench`: its flags and how a measurement is printed (the measuring is
//! [`crate::bench`]).

use super::ConnArgs;
use crate::inventory::Strategy;
use crate::store::Backend;
use anyhow::Context;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `oversell bench`.
#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchCommand,
}

/// What `oversell bench` measures.
#[derive(Debug, Subcommand, Clone)]
pub enum BenchCommand {
    /// Our pre-deduct path vs redis-benchmark EVALSHA of the same script, in the same run.
    Redis(BenchRedisArgs),
    /// The reference shop end to end over HTTP (wrk, and a fixed rate) vs the strategy's
    /// ceiling (redis-benchmark, pgbench or mysqlslap), in the same run.
    Shop(BenchShopArgs),
}

/// `oversell bench redis`.
#[derive(Debug, Args, Clone)]
pub struct BenchRedisArgs {
    /// Seconds to run our path (the baseline makes the same number of calls).
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Concurrent callers (tasks for ours, connections for redis-benchmark).
    #[arg(long, default_value_t = 50)]
    pub concurrency: usize,
    /// Redis URL (loopback).
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    pub redis_url: String,
}

/// `oversell bench shop`.
#[derive(Debug, Args, Clone)]
pub struct BenchShopArgs {
    /// Inventory strategy of the shop.
    #[arg(long, value_enum)]
    pub strategy: Strategy,
    /// Database backend (default: inferred from --database-url, else postgres).
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,
    /// Seconds of each phase (saturation, fixed rate, and pgbench's run).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Connections: wrk's, the fixed-rate client's most in flight, and the ceiling's clients
    /// are 64.
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Also measure at a fixed rate: requests per second (8000) or a share of the saturation
    /// rate just measured (80%).
    #[arg(long)]
    pub rate: Option<crate::bench::rate::RateSpec>,
    /// Units on sale (enough that nothing sells out).
    #[arg(long, default_value_t = 1_000_000)]
    pub stock: i64,
    /// redis-lua: persistence consumers per item in the shop (its `--consumers`).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub consumers: u32,
    /// redis-buckets: buckets (hash slots) the sale's stock is split over (its `--buckets`).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub buckets: u32,
    /// Also write the result as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `oversell bench redis|shop`: runs the measurement and prints it (and `--json`).
pub(super) async fn bench(what: BenchCommand) -> anyhow::Result<i32> {
    match what {
        BenchCommand::Redis(args) => {
            let r = crate::bench::redis::redis(&crate::bench::RedisBench {
                redis_url: args.redis_url,
                seconds: args.seconds,
                concurrency: args.concurrency,
            })
            .await?;
            println!("our redis-lua pre-deduct path: {:>9.0} calls/s ({} calls in {:.1} s, {} tasks, one multiplexed connection)", r.ours_ops_per_s, r.ours_ops, r.ours_seconds, r.concurrency);
            println!(
                "redis-benchmark EVALSHA:       {:>9.0} calls/s ({} calls, {} connections)",
                r.baseline_ops_per_s, r.baseline_ops, r.concurrency
            );
            println!("ratio ours / baseline:         {:>9.3}", r.ratio);
            println!(
                "stock deducted by both phases: {} (every call took one unit)",
                r.deducted
            );
            println!("baseline: {}", r.baseline_command);
            Ok(0)
        }
        BenchCommand::Shop(mut args) => {
            let (backend, _) = args.conn.database_for(args.backend)?;
            let _services = args
                .conn
                .provide(&[backend], args.strategy.uses_redis())
                .await?;
            let (backend, database_url) = args.conn.database_for(args.backend)?;
            if args.seconds == 0 {
                anyhow::bail!("--seconds must be at least 1 (got 0)");
            }
            if args.connections == 0 {
                anyhow::bail!("--connections must be at least 1 (got 0)");
            }
            if args.stock < 1 {
                anyhow::bail!("--stock must be at least 1 (got {})", args.stock);
            }
            let r = crate::bench::shop::shop(&crate::bench::ShopBench {
                strategy: args.strategy,
                backend,
                database_url,
                redis_url: args.conn.redis_url,
                seconds: args.seconds,
                connections: args.connections,
                rate: args.rate,
                stock: args.stock,
                shop_exe: std::env::current_exe().context("locating the oversell binary")?,
                consumers: args.consumers,
                buckets: args.buckets,
            })
            .await?;
            print!("{}", crate::bench::shop::render(&r));
            if let Some(path) = args.json {
                std::fs::write(&path, serde_json::to_string_pretty(&r)? + "\n")
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("json: {}", path.display());
            }
            Ok(0)
        }
    }
}
