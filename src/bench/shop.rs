//! `oversell bench shop --strategy S`: the reference shop end to end over HTTP next to the
//! strategy's ceiling, in the same run.
//!
//! The shop runs as a child process (the runner's [`ChildShop`]) on a database and a Redis
//! prefix of its own, with 1,000,000 units (nothing sells out), a pool of `--pool-size` (64;
//! the SQL ceiling gets as many clients), no simulated work and every gateway limit off. Phases, one after the other so they never share the CPU:
//! 0. SQL strategies: [`WARM_UP_S`] of wrk, not measured (the pool opens its connections);
//! 1. `wrk` at saturation ([`super::wrk`]);
//! 2. with `--rate`, the fixed-rate client ([`super::rate`]) at that rate (or a share of the
//!    saturation rate just measured);
//! 3. the shop stops, and the ceilings run on the same servers ([`super::ceiling_phase`]).
//!
//! For redis-lua and redis-buckets each HTTP phase also reports persistence: orders the
//! consumers wrote to the database per second against orders acknowledged per second, the
//! stream's backlog (summed over the B bucket streams) when the phase ended, and how long it
//! then took to drain (the next phase starts drained).

use super::ceiling::Ceiling;
use super::ceiling_phase::{self, client_steady, Ceilings};
use super::rate::{self, RateResult};
use super::servers::{self, Ops, PhaseCpu, Servers, ShopCpu};
use super::shop_plan::ShopBench;
use super::wrk::{self, WrkResult};
use super::{ratio, require_tool};
use crate::inventory::redis_lua::keys::delete_prefix;
use crate::inventory::redis_lua::stream::Backlog;
use crate::inventory::{Durability, RedisEngine, RedisKind, RedisLua, RedisSettings, Strategy};
use crate::model::SaleSetup;
use crate::runner::Cell;
use crate::shop::ShopKnobs;
use crate::store::{Backend, PoolSettings, Store};
use crate::under_test::ChildShop;
use anyhow::Context;
use serde::Serialize;
use sqlx::migrate::MigrateDatabase;
use std::time::Duration;
use tokio::time::Instant;

/// Persistence of one phase (redis-lua).
#[derive(Debug, Clone, Serialize)]
pub struct Persistence {
    /// Orders acknowledged per second during the phase.
    pub purchases_per_s: f64,
    /// Orders written to the database per second during the phase.
    pub applied_per_s: f64,
    /// Stream entries not yet delivered to a consumer when the phase ended.
    pub backlog_lag: u64,
    /// Entries delivered but not yet acknowledged when the phase ended.
    pub backlog_pending: u64,
    /// From the phase's end until every entry was persisted (ms), up to 120 s.
    pub drain_ms: u64,
    pub drained: bool,
}

/// Both rates and their ratio, plus what surrounds them.
#[derive(Debug, Clone, Serialize)]
pub struct ShopBenchResult {
    pub strategy: String,
    pub backend: Option<String>,
    pub seconds: u64,
    pub connections: usize,
    pub stock: i64,
    /// The shop's database pool and the SQL ceiling's clients.
    pub pool_size: u32,
    /// `release` or `debug`: the shop's build.
    pub build: String,
    pub cores: usize,
    /// The shop's runtime worker threads, as it reported them (`--worker-threads`; 0 there:
    /// one per core, less one next to its servers, [`crate::shop::workers`]).
    pub shop_workers: usize,
    /// `/proc/loadavg` when the run started (the machine may be shared).
    pub load_average: String,
    /// Seconds of wrk before the measured phase (SQL strategies: the shop's pool connections
    /// opened and their statements prepared; not counted in any figure).
    pub warm_up_s: u64,
    pub saturation: WrkResult,
    pub saturation_persistence: Option<Persistence>,
    pub fixed_rate: Option<RateResult>,
    pub fixed_rate_persistence: Option<Persistence>,
    /// The ceiling the ratios are against (for-update and conditional on PostgreSQL: the
    /// shop's own statements, [`super::ceiling::shop_script`]).
    pub ceiling: Ceiling,
    /// for-update and conditional on PostgreSQL: the bare hot row, a second ceiling.
    pub ceiling_bare: Option<SecondCeiling>,
    /// Saturation orders/s over the ceiling's rate.
    pub ratio: f64,
    /// CPU per order of every process at saturation, and per operation of the ceiling.
    pub cpu: ShopCpu,
    pub shop_log: String,
}

/// SQL strategies: seconds of wrk before the measured phase, so the shop's pool is open.
pub const WARM_UP_S: u64 = 1;

/// A second ceiling, with its rate ratio and its CPU.
#[derive(Debug, Clone, Serialize)]
pub struct SecondCeiling {
    pub ceiling: Ceiling,
    /// Saturation orders/s over this ceiling's rate.
    pub ratio: f64,
    pub cpu: PhaseCpu,
    /// The shop's CPU per order over this ceiling's client per transaction.
    pub shop_over_client: Option<f64>,
}

/// Checks every tool the run needs before anything starts.
pub fn check_tools(strategy: Strategy, backend: Backend) -> anyhow::Result<()> {
    require_tool("wrk", "wrk")?;
    match (strategy.uses_redis(), backend) {
        (true, _) => require_tool("redis-benchmark", "redis-tools"),
        (false, Backend::Postgres) => require_tool("pgbench", "postgresql-client"),
        (false, Backend::Mysql) => require_tool("mysqlslap", "mariadb-client"),
    }
    .map(|_| ())
}

/// Runs the whole benchmark and cleans up its database and Redis keys.
pub async fn shop(b: &ShopBench) -> anyhow::Result<ShopBenchResult> {
    check_tools(b.strategy, b.backend)?;
    let tag = uuid::Uuid::now_v7().simple().to_string()[20..].to_string();
    let (db_url, _) = crate::store::on_database(&b.database_url, &format!("oversell_bench_{tag}"))
        .with_context(|| {
            format!(
                "{} names no database",
                crate::services::redact_url(&b.database_url)
            )
        })?;
    let prefix = format!("oversell-bench-shop-{tag}");
    let result = phases(b, &tag, &db_url, &prefix).await;
    delete_prefix(&b.redis_url, &prefix).await;
    if let Err(e) = sqlx::any::Any::drop_database(&db_url).await {
        tracing::warn!("could not drop the bench database: {e}");
    }
    result
}

async fn phases(
    b: &ShopBench,
    tag: &str,
    db_url: &str,
    prefix: &str,
) -> anyhow::Result<ShopBenchResult> {
    sqlx::any::install_default_drivers();
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let log = std::env::temp_dir().join(format!("oversell-bench-shop-{tag}.log"));
    let cell = Cell {
        strategy: b.strategy,
        backend: b.backend,
        database_url: db_url.to_string(),
    };
    let child = ChildShop::start(
        &b.shop_exe,
        &cell,
        &b.redis_url,
        prefix,
        &b.knobs,
        log.clone(),
    )
    .await?;
    let shop_workers = child.workers;
    let http = reqwest::Client::new();
    let servers = Servers::find(b.strategy.uses_redis(), &b.redis_url, b.backend, db_url).await;
    let measured = http_phases(b, tag, db_url, prefix, &child, &http, &servers).await;
    child.stop().await;
    let measured = match measured {
        Ok(m) => m,
        Err(e) => {
            servers.close().await;
            return Err(e);
        }
    };
    let HttpPhases {
        saturation,
        sat_persist,
        sat_cpu,
        fixed,
        fixed_persist,
    } = measured;
    let redis = settings(&b.redis_url, &format!("oversell-bench-ceiling-{tag}"));
    let ceilings = ceiling_phase::run(b, tag, db_url, saturation.created, &servers, redis).await;
    let database_server = servers.database_kind;
    servers.close().await;
    let Ceilings { main, bare, setup } = ceilings?;
    let steady = setup.as_ref().and_then(|s| client_steady(&main, s));
    let mut cpu = ShopCpu::of(sat_cpu, main.cpu, database_server);
    cpu.with_client_setup(setup.and_then(|s| s.cpu.client), steady);
    let shop_cpu = cpu.saturation.shop.clone();
    let ceiling_bare = bare.map(|m| SecondCeiling {
        ratio: ratio(saturation.orders_per_s, m.ceiling.per_s),
        shop_over_client: servers::over(&shop_cpu, &m.cpu.client),
        ceiling: m.ceiling,
        cpu: m.cpu,
    });
    let ceiling = main.ceiling;
    Ok(ShopBenchResult {
        strategy: b.strategy.to_string(),
        backend: (!b.strategy.uses_redis()).then(|| b.backend.as_str().to_string()),
        seconds: b.seconds,
        connections: b.connections,
        stock: b.stock,
        pool_size: b.knobs.pool_size,
        // The shop is this very binary.
        build: if cfg!(debug_assertions) {
            "debug".into()
        } else {
            "release".into()
        },
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        shop_workers,
        load_average,
        warm_up_s: if b.strategy.uses_redis() {
            0
        } else {
            WARM_UP_S
        },
        ratio: ratio(saturation.orders_per_s, ceiling.per_s),
        saturation,
        saturation_persistence: sat_persist,
        fixed_rate: fixed,
        fixed_rate_persistence: fixed_persist,
        ceiling,
        ceiling_bare,
        cpu,
        shop_log: log.display().to_string(),
    })
}

/// What the HTTP phases measured.
struct HttpPhases {
    saturation: WrkResult,
    sat_persist: Option<Persistence>,
    sat_cpu: PhaseCpu,
    fixed: Option<RateResult>,
    fixed_persist: Option<Persistence>,
}

async fn http_phases(
    b: &ShopBench,
    tag: &str,
    db_url: &str,
    prefix: &str,
    child: &ChildShop,
    http: &reqwest::Client,
    servers: &Servers,
) -> anyhow::Result<HttpPhases> {
    let setup = SaleSetup {
        stock: b.stock,
        name: "bench".into(),
        price_cents: 0,
        purchase_limit: 1,
    };
    child.put_sale(http, 1, &setup).await?;
    if !b.strategy.uses_redis() {
        // The shop's pool opens its connections (and prepares its statements on each) at
        // their first use: a warm-up takes that set-up out of the measured phase, as the
        // `-t 1` run takes pgbench's out of its figure (`ceiling_phase`).
        wrk::run(
            &child.base_url,
            b.connections,
            2,
            WARM_UP_S,
            &format!("{tag}-w"),
        )
        .await?;
    }
    let watch = match b.strategy.redis_kind() {
        Some(kind) => Some(Watch::connect(b, kind, db_url, prefix).await?),
        None => None,
    };
    let before = match &watch {
        Some(w) => w.persisted().await?,
        None => 0,
    };
    let meter = servers.start(child.pid().await, true).await;
    let sat = wrk::run(&child.base_url, b.connections, 2, b.seconds, tag).await?;
    let sat_persist = match &watch {
        Some(w) => Some(w.phase(before, sat.created, sat.seconds).await?),
        None => None,
    };
    // The database's divisor: the orders it persisted (redis strategies, counted once the
    // stream drained) or took itself.
    let (db_ops, db_unit) = match &watch {
        Some(w) => (
            w.persisted().await?.saturating_sub(before),
            "persisted order",
        ),
        None => (sat.created, "order"),
    };
    let sat_cpu = meter
        .done(&Ops {
            ops: sat.created,
            unit: "order",
            db_ops,
            db_unit,
            client_ops: sat.requests,
            client_unit: "request",
        })
        .await;
    let Some(spec) = b.rate else {
        return Ok(HttpPhases {
            saturation: sat,
            sat_persist,
            sat_cpu,
            fixed: None,
            fixed_persist: None,
        });
    };
    let per_s = spec.per_second(sat.orders_per_s);
    let before = match &watch {
        Some(w) => w.persisted().await?,
        None => 0,
    };
    let fixed = rate::run(
        &child.base_url,
        per_s,
        b.seconds,
        b.connections,
        &format!("{tag}-r"),
    )
    .await?;
    let fixed_persist = match &watch {
        Some(w) => Some(w.phase(before, fixed.created, fixed.seconds).await?),
        None => None,
    };
    Ok(HttpPhases {
        saturation: sat,
        sat_persist,
        sat_cpu,
        fixed: Some(fixed),
        fixed_persist,
    })
}

/// Reads the shop's persistence from outside: the backlog of the item's stream in Redis (of
/// every bucket's stream, for redis-buckets) and the order rows in the database.
struct Watch {
    streams: Vec<RedisLua>,
    store: Store,
}

impl Watch {
    async fn connect(
        b: &ShopBench,
        kind: RedisKind,
        db_url: &str,
        prefix: &str,
    ) -> anyhow::Result<Watch> {
        let engine =
            RedisEngine::connect(kind, &settings(&b.redis_url, prefix), b.knobs.buckets).await?;
        let streams = engine.streams().into_iter().cloned().collect();
        let store = Store::connect(
            db_url,
            &PoolSettings {
                max_connections: 2,
                ..ShopKnobs::default().pool()
            },
        )
        .await?;
        Ok(Watch { streams, store })
    }

    async fn persisted(&self) -> anyhow::Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM orders WHERE item_id = 1")
            .fetch_one(self.store.pool())
            .await?;
        Ok(n.max(0) as u64)
    }

    /// The backlog summed over every stream (drained when each one is).
    async fn backlog(&self) -> anyhow::Result<Backlog> {
        let mut sum = Backlog {
            lag_exact: true,
            delivered_all: true,
            ..Backlog::default()
        };
        for stream in &self.streams {
            let b = stream.backlog(1).await?;
            sum.lag += b.lag;
            sum.pending += b.pending;
            sum.lag_exact &= b.lag_exact;
            sum.delivered_all &= b.delivered_all;
        }
        Ok(sum)
    }

    /// The phase that just ended: `created` acknowledged orders in `seconds`, `before` rows
    /// persisted when it began. Waits for the drain (up to 120 s) before answering.
    async fn phase(&self, before: u64, created: u64, seconds: f64) -> anyhow::Result<Persistence> {
        let applied = self.persisted().await?.saturating_sub(before);
        let backlog = self.backlog().await?;
        let start = Instant::now();
        let mut drained = backlog.drained();
        while !drained && start.elapsed() < Duration::from_secs(120) {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drained = self.backlog().await?.drained();
        }
        let s = seconds.max(1e-9);
        Ok(Persistence {
            purchases_per_s: (created as f64 / s).round(),
            applied_per_s: (applied as f64 / s).round(),
            backlog_lag: backlog.lag,
            backlog_pending: backlog.pending,
            drain_ms: start.elapsed().as_millis() as u64,
            drained,
        })
    }
}

/// A default shop's Redis side without the per-IP limit (every bench client is one IP).
fn settings(redis_url: &str, prefix: &str) -> RedisSettings {
    ShopKnobs {
        ip_rate_limit: 0.0,
        redis_durability: Durability::None,
        ..ShopKnobs::default()
    }
    .redis(redis_url, prefix)
}

/// The terminal summary, every line wrapped to 100 columns but the ceiling's command (kept
/// whole, to copy).
pub fn render(r: &ShopBenchResult) -> String {
    let command = format!("ceiling: {}", r.ceiling.command);
    render_lines(r)
        .lines()
        .map(|l| {
            if l == command {
                l.to_string()
            } else {
                crate::report::table::wrap(l, crate::report::table::TERMINAL_WIDTH)
            }
        })
        .fold(String::new(), |s, l| s + &l + "\n")
}

fn render_lines(r: &ShopBenchResult) -> String {
    let mut out = String::new();
    let on = r
        .backend
        .as_deref()
        .map_or(String::new(), |b| format!(" on {b}"));
    let s = &r.saturation;
    out.push_str(&format!(
        "bench shop: {}{on}, {} s per phase, {} connections, {} build, {} cores, the shop's \
         runtime workers: {} (load {})\n",
        r.strategy, r.seconds, r.connections, r.build, r.cores, r.shop_workers, r.load_average
    ));
    if r.warm_up_s > 0 {
        out.push_str(&format!(
            "warm-up: {} s of wrk first (the shop's pool opened), not counted\n",
            r.warm_up_s
        ));
    }
    out.push_str(&format!(
        "shop, saturation (wrk):   {:>9.0} orders/s  p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  \
         ({} created, {} other answers, {} socket errors)\n",
        s.orders_per_s, s.p50_ms, s.p90_ms, s.p99_ms, s.created, s.non_2xx, s.socket_errors
    ));
    if let Some(p) = &r.saturation_persistence {
        out.push_str(&persistence_line(p));
    }
    if let Some(f) = &r.fixed_rate {
        out.push_str(&format!(
            "shop, fixed rate {:.0}/s:  {:>9.0} orders/s  p50 {:.2} ms  p90 {:.2} ms  p99 {:.2} ms  \
             p99.9 {:.2} ms  max {:.2} ms  (send lag p99 {:.2} ms; {} refused, {} failed)\n",
            f.target_per_s,
            f.orders_per_s,
            f.p50_ms,
            f.p90_ms,
            f.p99_ms,
            f.p999_ms,
            f.max_ms,
            f.send_lag_p99_ms,
            f.refused,
            f.failed
        ));
    }
    if let Some(p) = &r.fixed_rate_persistence {
        out.push_str(&persistence_line(p));
    }
    let c = &r.ceiling;
    out.push_str(&format!(
        "ceiling ({}, {}):  {:>9.0} {}/s  ({} clients)\n",
        c.tool, c.label, c.per_s, c.unit, c.clients
    ));
    out.push_str(&format!("ratio shop / ceiling:     {:>9.3}\n", r.ratio));
    out.push_str(&servers::render(&r.cpu, &c.tool, "ceiling"));
    if let Some(second) = &r.ceiling_bare {
        let b = &second.ceiling;
        out.push_str(&format!(
            "second ceiling ({}, {}):  {:>9.0} {}/s  ratio shop / it {:.3}\n",
            b.tool, b.label, b.per_s, b.unit, second.ratio
        ));
        out.push_str(&servers::line(
            "second ceiling",
            &second.cpu,
            &r.cpu.database_server,
            &b.tool,
        ));
        if let Some(x) = second.shop_over_client {
            out.push_str(&format!(
                "CPU ratio: shop / {} client (second ceiling) {x:.2}\n",
                b.tool
            ));
        }
    }
    out.push_str(&format!("ceiling: {}\n", c.command));
    out.push_str(&format!("shop log: {}\n", r.shop_log));
    if r.build != "release" {
        out.push_str(
            "note: the shop ran from a debug build; use target/release/oversell for real figures\n",
        );
    }
    out
}

fn persistence_line(p: &Persistence) -> String {
    format!(
        "  persistence: {:.0} applied/s vs {:.0} purchases/s; backlog at the end {} undelivered \
         + {} pending, {} after {} ms\n",
        p.applied_per_s,
        p.purchases_per_s,
        p.backlog_lag,
        p.backlog_pending,
        if p.drained { "drained" } else { "NOT drained" },
        p.drain_ms
    )
}
