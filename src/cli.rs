//! The command line: clap definitions, turned into typed plans before any work starts.

use crate::gateway::GatewaySettings;
use crate::inventory::{RedisSettings, Settings, Strategy};
use crate::pipeline::{reconcile::ReconcileSettings, PipelineSettings};
use crate::shop::{Application, ShopConfig};
use crate::store::PoolSettings;
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::time::Duration;

/// Reproduce, measure and gate oversell in flash sales.
#[derive(Debug, Parser)]
#[command(name = "oversell", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the reference shop with one inventory strategy.
    Serve(ServeArgs),
}

/// `oversell serve`.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Inventory strategy.
    #[arg(long, value_enum)]
    pub strategy: Strategy,
    /// Address to listen on (port 0 picks a free port; the bound address is printed).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub shop: ShopArgs,
}

/// Shop settings shared by `serve`, `run` and `compare`.
#[derive(Debug, Args, Clone)]
pub struct ShopArgs {
    /// Database URL: postgres://... or mysql://... (the database is created if missing).
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres:postgres@127.0.0.1:5432/oversell"
    )]
    pub database_url: String,
    /// Redis URL (used by redis-lua).
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    pub redis_url: String,
    /// Prefix of every Redis key (isolates parallel runs).
    #[arg(long, default_value = "oversell")]
    pub redis_prefix: String,
    /// Database connection pool size.
    #[arg(long, default_value_t = 10)]
    pub pool_size: u32,
    /// How long a request waits for a pooled connection before answering 503 busy (ms).
    #[arg(long, default_value_t = 500)]
    pub acquire_timeout_ms: u64,
    /// How long a statement waits for a row lock before giving up (ms).
    #[arg(long, default_value_t = 1000)]
    pub lock_timeout_ms: u64,
    /// naive: business logic between the stock check and the write (ms): the race window.
    #[arg(long, default_value_t = 3)]
    pub naive_gap_ms: u64,
    /// for-update/optimistic: business logic between the read and the write (ms).
    #[arg(long, default_value_t = 1)]
    pub work_ms: u64,
    /// optimistic: retries after a lost compare-and-swap.
    #[arg(long, default_value_t = 3)]
    pub optimistic_retries: u32,
    /// optimistic: base backoff between retries (ms, jittered, doubling; 0 = none).
    #[arg(long, default_value_t = 2)]
    pub optimistic_backoff_ms: u64,
    /// Payment window: an unpaid order is expired and restocked after this many seconds.
    #[arg(long, default_value_t = 900)]
    pub payment_timeout_s: u64,
    /// redis-lua: seconds between reconciliation passes.
    #[arg(long, default_value_t = 300)]
    pub reconcile_interval_s: u64,
    /// redis-lua: |residual| above this raises an alert.
    #[arg(long, default_value_t = 0)]
    pub reconcile_alert_threshold: i64,
    /// redis-lua: URL that receives reconciliation alerts as JSON POSTs.
    #[arg(long)]
    pub alert_webhook: Option<String>,
    /// redis-lua: read reconciliation snapshots from this replica instead of the primary.
    #[arg(long, env = "REPLICA_DATABASE_URL")]
    pub replica_database_url: Option<String>,
    /// redis-lua gateway: global order admissions per second (0 = unlimited).
    #[arg(long, default_value_t = 0.0)]
    pub rate_limit: f64,
    /// redis-lua gateway: per-IP order admissions per second (0 = unlimited).
    #[arg(long, default_value_t = 20.0)]
    pub ip_rate_limit: f64,
    /// redis-lua gateway: per-IP burst size.
    #[arg(long, default_value_t = 20.0)]
    pub ip_burst: f64,
    /// redis-lua gateway: most units the buyers behind one IP may hold (0 = no cap).
    #[arg(long, default_value_t = 0)]
    pub ip_unit_cap: i64,
    /// redis-lua: how long the product page cache serves a stock figure (ms).
    #[arg(long, default_value_t = 1000)]
    pub page_cache_ms: u64,
}

impl ShopArgs {
    /// The flags' defaults (environment variables still apply), for embedding and tests.
    pub fn defaults() -> Self {
        #[derive(Parser)]
        struct Only {
            #[command(flatten)]
            shop: ShopArgs,
        }
        Only::parse_from(["oversell"]).shop
    }

    /// The shop configuration these flags describe.
    pub fn config(&self, strategy: Strategy, listen: SocketAddr) -> ShopConfig {
        ShopConfig {
            listen,
            strategy,
            database_url: self.database_url.clone(),
            pool: PoolSettings {
                max_connections: self.pool_size,
                acquire_timeout: Duration::from_millis(self.acquire_timeout_ms),
                lock_timeout: Duration::from_millis(self.lock_timeout_ms),
            },
            inventory: Settings {
                naive_gap: Duration::from_millis(self.naive_gap_ms),
                work: Duration::from_millis(self.work_ms),
                optimistic_retries: self.optimistic_retries,
                optimistic_backoff: Duration::from_millis(self.optimistic_backoff_ms),
                payment_timeout: Duration::from_secs(self.payment_timeout_s),
            },
            redis: RedisSettings {
                url: self.redis_url.clone(),
                prefix: self.redis_prefix.clone(),
                payment_timeout: Duration::from_secs(self.payment_timeout_s),
                gateway: GatewaySettings {
                    rate_per_s: self.rate_limit,
                    burst: self.rate_limit,
                    ip_rate_per_s: self.ip_rate_limit,
                    ip_burst: self.ip_burst,
                    ip_unit_cap: self.ip_unit_cap,
                },
            },
            pipeline: PipelineSettings {
                reconcile: ReconcileSettings {
                    interval: Duration::from_secs(self.reconcile_interval_s.max(1)),
                    alert_threshold: self.reconcile_alert_threshold,
                    webhook: self.alert_webhook.clone(),
                    replica: None,
                },
                ..PipelineSettings::default()
            },
            replica_database_url: self.replica_database_url.clone(),
            page_cache_ttl: Duration::from_millis(self.page_cache_ms),
            trust_forwarded_for: true,
        }
    }
}

/// Runs the parsed command; the returned code is the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Serve(args) => {
            let app = Application::build(args.shop.config(args.strategy, args.listen)).await?;
            // The first stdout line is the contract with `oversell run`, which reads it.
            println!("oversell shop listening on http://{}", app.local_addr());
            tracing::info!(strategy = %args.strategy, addr = %app.local_addr(), "shop ready");
            app.run_until_stopped(crate::shop::shutdown_signal())
                .await?;
            Ok(0)
        }
    }
}

/// The exit code for an error that ended a command: 3 when a service could not be reached,
/// 2 for anything else that stopped the command before it could judge anything.
pub fn exit_code_for(e: &anyhow::Error) -> i32 {
    let unreachable = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<crate::store::StoreError>(),
            Some(crate::store::StoreError::Unreachable { .. })
        ) || c.to_string().starts_with("cannot reach ")
    });
    if unreachable {
        3
    } else {
        2
    }
}
