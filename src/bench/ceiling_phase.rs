//! The last phase of `bench shop`: the strategy's ceilings on the same servers once the shop
//! has stopped, each run with its own CPU meters ([`super::servers`]).
//!
//! - redis strategies: `redis-benchmark` EVALSHA of the shop's script.
//! - for-update and conditional on PostgreSQL: first `pgbench -t 1` of the shop's statements
//!   ([`ceiling::shop_script`]), which is the 64 clients' connection set-up plus one
//!   transaction each; then the shop's statements for `--seconds` (the primary ceiling); then
//!   the bare hot row for `--seconds` (the second, labelled ceiling). The set-up run lets the
//!   report give pgbench's client CPU per transaction without its connections' set-up, a
//!   divisor that does not move with pgbench's rate.
//! - any other SQL ceiling: the bare statements (pgbench after its `-t 1` set-up run, or
//!   mysqlslap).

use super::ceiling::{self, Ceiling, Length, Script};
use super::cpu::CpuUse;
use super::host_port;
use super::redis::evalsha;
use super::servers::{Ops, PhaseCpu, Servers};
use super::shop_plan::ShopBench;
use crate::inventory::redis_lua::keys::delete_prefix;
use crate::inventory::{RedisKind, RedisLua, RedisSettings};
use crate::store::Backend;
use anyhow::Context;
use std::future::Future;

/// The ceilings' clients when the ceiling is not SQL (redis-benchmark).
const CLIENTS: usize = 64;

/// One ceiling run with what every process spent on it.
#[derive(Debug, Clone)]
pub struct Measured {
    pub ceiling: Ceiling,
    pub cpu: PhaseCpu,
}

/// Every ceiling of one run.
#[derive(Debug, Clone)]
pub struct Ceilings {
    /// The ceiling the ratios are against: the shop's statements where there is such a
    /// script, the bare ones otherwise.
    pub main: Measured,
    /// The bare hot row, when `main` is the shop's statements.
    pub bare: Option<Measured>,
    /// pgbench `-t 1` of `main`'s script: its clients' connection set-up (and one
    /// transaction each).
    pub setup: Option<Measured>,
}

/// Runs the strategy's ceilings one after the other, each metered on its own.
pub async fn run(
    b: &ShopBench,
    tag: &str,
    db_url: &str,
    shop_calls: u64,
    servers: &Servers,
    redis: RedisSettings,
) -> anyhow::Result<Ceilings> {
    if let Some(kind) = b.strategy.redis_kind() {
        let main = metered(
            servers,
            false,
            "call",
            evalsha_ceiling(b, kind, redis, shop_calls),
        )
        .await?;
        return Ok(Ceilings {
            main,
            bare: None,
            setup: None,
        });
    }
    let bare = ceiling::bare_script(b.strategy, b.backend)?;
    // As many clients as the shop has connections: the same contention on the row.
    let clients = b.knobs.pool_size as usize;
    ceiling::prepare_hot_row(db_url).await?;
    let tx = "transaction";
    if b.backend == Backend::Mysql {
        let per_client = (b.seconds as usize * 40).max(10);
        let main = metered(
            servers,
            true,
            tx,
            ceiling::mysqlslap(db_url, &bare, clients, per_client),
        )
        .await?;
        return Ok(Ceilings {
            main,
            bare: None,
            setup: None,
        });
    }
    let shop = ceiling::shop_script(b.strategy);
    let main_script: &Script = shop.as_ref().unwrap_or(&bare);
    let pgbench = |script: &Script, length: Length, tag: String| {
        let script = script.clone();
        async move { ceiling::pgbench(db_url, &script, clients, length, &tag).await }
    };
    let setup = metered(
        servers,
        true,
        tx,
        pgbench(main_script, Length::PerClient(1), format!("{tag}-setup")),
    )
    .await?;
    let seconds = Length::Seconds(b.seconds);
    let main = metered(servers, true, tx, pgbench(main_script, seconds, tag.into())).await?;
    let bare = match shop {
        Some(_) => Some(
            metered(
                servers,
                true,
                tx,
                pgbench(&bare, seconds, format!("{tag}-bare")),
            )
            .await?,
        ),
        None => None,
    };
    Ok(Ceilings {
        main,
        bare,
        setup: Some(setup),
    })
}

/// The client's CPU per transaction of `main` without the connection set-up that `setup`
/// (the same script, `-t 1`) measured: `(main − setup) / (main's transactions − setup's)`.
pub fn client_steady(main: &Measured, setup: &Measured) -> Option<CpuUse> {
    let (m, s) = (main.cpu.client.as_ref()?, setup.cpu.client.as_ref()?);
    let ops = m.ops.checked_sub(s.ops).filter(|&n| n > 0)?;
    Some(CpuUse::of(
        (m.cpu_ms - s.cpu_ms).max(0.0) / 1000.0,
        ops,
        &m.unit,
        format!(
            "{}, minus a `-t 1` run of the same script ({:.1} ms for {} transactions: its \
             clients' connection set-up)",
            m.source, s.cpu_ms, s.ops
        ),
    ))
}

/// Runs one ceiling between a start and an end reading of every meter.
async fn metered(
    servers: &Servers,
    with_database: bool,
    unit: &str,
    run: impl Future<Output = anyhow::Result<Ceiling>>,
) -> anyhow::Result<Measured> {
    let meter = servers.start(None, with_database).await;
    let ceiling = run.await;
    let ops = ceiling.as_ref().map_or(0, |c| c.operations);
    let cpu = meter
        .done(&Ops {
            ops,
            unit,
            db_ops: ops,
            db_unit: unit,
            client_ops: ops,
            client_unit: unit,
        })
        .await;
    Ok(Measured {
        ceiling: ceiling?,
        cpu,
    })
}

/// redis-benchmark EVALSHA of the shop's script, on keys of its own (its stream entries must
/// not reach the shop's tables).
async fn evalsha_ceiling(
    b: &ShopBench,
    kind: RedisKind,
    settings: RedisSettings,
    shop_calls: u64,
) -> anyhow::Result<Ceiling> {
    let redis = RedisLua::connect(&settings).await?;
    let out = async {
        redis.warm(&super::redis::bench_item()).await?;
        let (host, port) = ceiling_node(&b.redis_url, &redis.keys(1).stock).await?;
        evalsha(&redis, &host, port, CLIENTS, shop_calls.max(20_000)).await
    }
    .await;
    delete_prefix(&b.redis_url, &settings.prefix).await;
    let e = out?;
    Ok(Ceiling {
        tool: "redis-benchmark".into(),
        unit: "evalsha calls".into(),
        per_s: e.calls_per_s,
        operations: e.calls,
        clients: CLIENTS,
        label: "the shop's script".into(),
        script: match kind {
            RedisKind::Buckets => "EVALSHA lua/deduct.lua on one slot (one bucket's work: \
                 the one-slot ceiling redis-buckets spreads past)"
                .into(),
            RedisKind::Lua => "EVALSHA lua/deduct.lua (the shop's own script)".into(),
        },
        command: e.command,
    })
}

/// Where the EVALSHA ceiling runs: the Redis itself, or on a cluster the master serving the
/// sale's slot (redis-benchmark, not cluster-aware here, must reach the keys' owner).
async fn ceiling_node(redis_url: &str, stock_key: &str) -> anyhow::Result<(String, u16)> {
    let url = if crate::store::redis_conn::is_cluster(redis_url) {
        let mut conn = crate::store::redis_conn::RedisConn::open(redis_url).await?;
        let addr = crate::nemesis::cluster::master_of(&mut conn, stock_key).await?;
        crate::store::redis_conn::node_url(redis_url, &addr)
    } else {
        redis_url.to_string()
    };
    host_port(&url).with_context(|| {
        format!(
            "cannot read host and port from {}",
            crate::services::redact_url(&url)
        )
    })
}
