//! `oversell bench redis`: the speed of our pre-deduct path against a baseline measured in the
//! same run on the same Redis: `redis-benchmark` calling the very same script by SHA.
//!
//! Ours is the whole redis-lua purchase as the shop runs it (gateway, order id, EVALSHA of
//! `lua/deduct.lua` over one multiplexed connection, decoding). The baseline is the script
//! alone, from redis-benchmark's C client. The ratio says how much of Redis's capacity our
//! path delivers; it is a measurement, never asserted in a test.

use super::{host_port, require_tool};
use crate::inventory::redis_lua::keys::delete_prefix;
use crate::inventory::{Outcome, RedisLua};
use crate::model::{Item, Purchase};
use anyhow::Context;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What to measure.
#[derive(Debug, Clone)]
pub struct RedisBench {
    pub redis_url: String,
    pub seconds: u64,
    pub concurrency: usize,
}

/// The result: both rates and their ratio.
#[derive(Debug, Clone, Serialize)]
pub struct RedisBenchResult {
    pub ours_ops_per_s: f64,
    pub ours_ops: u64,
    pub ours_seconds: f64,
    pub baseline_ops_per_s: f64,
    pub baseline_ops: u64,
    /// ours / baseline.
    pub ratio: f64,
    pub concurrency: usize,
    pub baseline_command: String,
    /// Stock the two phases took, read back from Redis (every call must have deducted one).
    pub deducted: i64,
}

pub(crate) const STOCK: i64 = 1_000_000_000_000;

pub(crate) fn bench_item() -> Item {
    Item {
        id: 1,
        name: "bench".into(),
        price_cents: 0,
        initial_stock: STOCK,
        stock: STOCK,
        version: 0,
        purchase_limit: 1_000_000_000,
    }
}

/// Runs both phases and removes the benchmark's keys.
pub async fn redis(b: &RedisBench) -> anyhow::Result<RedisBenchResult> {
    let (host, port) = host_port(&b.redis_url)
        .with_context(|| format!("cannot read host and port from {}", b.redis_url))?;
    require_tool("redis-benchmark", "redis-tools")?;
    let prefix = format!("oversell-bench-{}", uuid::Uuid::now_v7().simple());
    // A default shop's Redis side without the per-IP limit (every bench client is one IP).
    let settings = crate::shop::ShopKnobs {
        ip_rate_limit: 0.0,
        redis_durability: crate::inventory::Durability::None,
        ..crate::shop::ShopKnobs::default()
    }
    .redis(&b.redis_url, &prefix);
    let redis = RedisLua::connect(&settings).await?;
    let result = phases(b, &redis, &host, port).await;
    delete_prefix(&b.redis_url, &prefix).await;
    result
}

async fn phases(
    b: &RedisBench,
    redis: &RedisLua,
    host: &str,
    port: u16,
) -> anyhow::Result<RedisBenchResult> {
    redis.warm(&bench_item()).await?;
    // Ours: `concurrency` tasks, each a distinct stream of buyers, for `seconds`.
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs(b.seconds.max(1));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..b.concurrency.max(1) {
        let redis = redis.clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < deadline {
                let p = Purchase {
                    item_id: 1,
                    user_id: format!("b{t}-{n}"),
                    device_id: None,
                    qty: 1,
                    client_ip: String::new(),
                    idempotency_key: None,
                };
                match redis.purchase(&p, 1_000_000_000).await? {
                    Outcome::Reserved { .. } => {}
                    other => anyhow::bail!("benchmark purchase was refused: {other:?}"),
                }
                n += 1;
            }
            done.fetch_add(n, Ordering::Relaxed);
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let ours_seconds = start.elapsed().as_secs_f64();
    let ours_ops = done.load(Ordering::Relaxed);
    let after_ours = redis.stock(1).await?.unwrap_or(STOCK);
    // Baseline: the same script by SHA from redis-benchmark, the same number of calls.
    let n = ours_ops.max(10_000);
    let base = evalsha(redis, host, port, b.concurrency.max(1), n).await?;
    let baseline = base.calls_per_s;
    let after_base = redis.stock(1).await?.unwrap_or(after_ours);
    let ours = ours_ops as f64 / ours_seconds.max(1e-9);
    Ok(RedisBenchResult {
        ours_ops_per_s: ours.round(),
        ours_ops,
        ours_seconds,
        baseline_ops_per_s: baseline.round(),
        baseline_ops: n,
        ratio: if baseline > 0.0 {
            (ours / baseline * 1000.0).round() / 1000.0
        } else {
            0.0
        },
        concurrency: b.concurrency,
        baseline_command: base.command,
        deducted: STOCK - after_base,
    })
}

/// What `redis-benchmark` measured and how it was called.
#[derive(Debug, Clone, Serialize)]
pub struct Evalsha {
    pub calls_per_s: f64,
    pub calls: u64,
    pub command: String,
}

/// `redis-benchmark` calling `lua/deduct.lua` by SHA on `redis`'s item 1 (warmed by the
/// caller), `connections` connections, `n` calls, each with its own buyer and order id.
pub(crate) async fn evalsha(
    redis: &RedisLua,
    host: &str,
    port: u16,
    connections: usize,
    n: u64,
) -> anyhow::Result<Evalsha> {
    require_tool("redis-benchmark", "redis-tools")?;
    let keys = redis.keys(1);
    let mut args: Vec<String> = vec![
        "-h".into(),
        host.into(),
        "-p".into(),
        port.to_string(),
        "-c".into(),
        connections.to_string(),
        "-n".into(),
        n.to_string(),
        "-r".into(),
        "1000000000".into(),
        "-q".into(),
        "EVALSHA".into(),
        redis.deduct_sha().into(),
        keys.deduct().len().to_string(),
    ];
    args.extend(keys.deduct().map(String::from));
    // ARGV of lua/deduct.lua: qty, user, device, order id, payment timeout ms, ip, ip cap,
    // idempotency key.
    for a in [
        "1",
        "base-__rand_int__",
        "",
        "base-order-__rand_int__",
        "900000",
        "",
        "0",
        "",
    ] {
        args.push(a.to_string());
    }
    let out = tokio::process::Command::new("redis-benchmark")
        .args(&args)
        .output()
        .await
        .context("running redis-benchmark")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let calls_per_s = parse_rps(&text).with_context(|| {
        let err = String::from_utf8_lossy(&out.stderr);
        format!("unexpected redis-benchmark output: {text} {err}")
    })?;
    let shown: Vec<String> = args
        .iter()
        .map(|a| if a.is_empty() { "''".into() } else { a.clone() })
        .collect();
    Ok(Evalsha {
        calls_per_s: calls_per_s.round(),
        calls: n,
        command: format!("redis-benchmark {}", shown.join(" ")),
    })
}

/// Requests per second from `redis-benchmark -q` output (the last figure it printed).
pub fn parse_rps(text: &str) -> Option<f64> {
    text.split(['\r', '\n'])
        .filter_map(|l| l.split(": ").nth(1))
        .filter_map(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_benchmark_output_is_parsed() {
        let out = "EVALSHA abc 8 k: rps=1234.0 (overall: 1200.0) avg_msec=0.4\rEVALSHA abc 8 k: 81234.56 requests per second, p50=0.303 msec\n";
        assert_eq!(parse_rps(out), Some(81234.56));
    }
}
