//! The ceiling of a strategy: the same work on the same server from the server's own C
//! benchmark client, with no HTTP, no shop and no order row.
//!
//! - redis-lua: `redis-benchmark` EVALSHA of `lua/deduct.lua` ([`super::redis::evalsha`]).
//! - for-update, naive, optimistic, conditional on PostgreSQL: `pgbench` with a custom script
//!   of the strategy's statements on a hot row (`items`, a second item of the bench database);
//!   batched against the FOR UPDATE hot-row ceiling it is meant to beat.
//! - the same on MariaDB/MySQL: `mysqlslap` with the same statements.
//!
//! 64 clients by default (the shop's pool), `-M prepared` for pgbench as sqlx prepares too.

use super::require_tool;
use crate::inventory::Strategy;
use crate::model::SaleSetup;
use crate::store::{Backend, Store};
use anyhow::{bail, Context};
use serde::Serialize;
use std::time::Duration;

/// One ceiling measurement.
#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    /// `redis-benchmark`, `pgbench` or `mysqlslap`.
    pub tool: String,
    /// What one unit is: `evalsha calls` or `transactions`.
    pub unit: String,
    pub per_s: f64,
    /// Operations the tool completed (redis-benchmark's `-n`, pgbench's "actually
    /// processed", mysqlslap's clients × repeats): the divisor of its CPU per operation.
    pub operations: u64,
    pub clients: usize,
    /// The statements, one per line (SQL ceilings).
    pub script: String,
    pub command: String,
}

/// The hot row of the SQL ceilings (the shop sells item 1).
pub const HOT_ITEM: i64 = 2;

const ITEM_COLS: &str = "id, name, price_cents, initial_stock, stock, version, purchase_limit";

/// The statements of `strategy`'s critical path on the hot row, without the order row.
/// `gset`: PostgreSQL (pgbench `\gset`) vs MySQL user variables for optimistic's version.
pub fn statements(strategy: Strategy, backend: Backend) -> anyhow::Result<Vec<String>> {
    let id = HOT_ITEM;
    let deduct =
        format!("UPDATE items SET stock = stock - 1, version = version + 1 WHERE id = {id}");
    let begin = match backend {
        Backend::Postgres => "BEGIN",
        Backend::Mysql => "START TRANSACTION",
    };
    Ok(match strategy {
        // batched is measured against the hot-row FOR UPDATE ceiling it is meant to beat: its
        // own transaction serves a whole batch, so a ratio above 1 is its point.
        Strategy::ForUpdate | Strategy::Batched => vec![
            begin.into(),
            format!("SELECT {ITEM_COLS} FROM items WHERE id = {id} FOR UPDATE"),
            deduct,
            "COMMIT".into(),
        ],
        Strategy::Naive => vec![
            format!("SELECT {ITEM_COLS} FROM items WHERE id = {id}"),
            deduct,
        ],
        Strategy::Optimistic => {
            let (read, v) = match backend {
                Backend::Postgres => (
                    format!("SELECT version AS v FROM items WHERE id = {id} \\gset"),
                    ":v",
                ),
                Backend::Mysql => (
                    format!("SELECT version INTO @v FROM items WHERE id = {id}"),
                    "@v",
                ),
            };
            vec![
                read,
                format!(
                    "UPDATE items SET stock = stock - 1, version = version + 1 \
                     WHERE id = {id} AND stock >= 1 AND version = {v}"
                ),
            ]
        }
        Strategy::Conditional => vec![format!(
            "UPDATE items SET stock = stock - 1 WHERE id = {id} AND stock >= 1"
        )],
        Strategy::RedisLua => bail!("redis-lua's ceiling is redis-benchmark, not SQL"),
        Strategy::RedisBuckets => {
            bail!("redis-buckets has no single ceiling (its buckets are several scripts); compare it with redis-lua through `compare`")
        }
    })
}

/// Puts the hot row in the bench database (the shop's schema is already migrated there).
pub async fn prepare_hot_row(database_url: &str) -> anyhow::Result<()> {
    let store = Store::connect(database_url, &crate::shop::ShopKnobs::default().pool()).await?;
    let setup = SaleSetup {
        stock: 1_000_000_000_000,
        name: "ceiling hot row".into(),
        price_cents: 0,
        purchase_limit: 1,
    };
    let done = store.setup_sale(HOT_ITEM, &setup).await;
    store.close().await;
    done?;
    Ok(())
}

/// `pgbench` running `statements` with `clients` clients for `seconds`.
pub async fn pgbench(
    database_url: &str,
    statements: &[String],
    clients: usize,
    seconds: u64,
    tag: &str,
) -> anyhow::Result<Ceiling> {
    require_tool("pgbench", "postgresql-client")?;
    // `\gset` ends its statement instead of the semicolon.
    let script: String = statements
        .iter()
        .map(|s| {
            if s.ends_with("\\gset") {
                format!("{s}\n")
            } else {
                format!("{s};\n")
            }
        })
        .collect();
    let file = std::env::temp_dir().join(format!("oversell-pgbench-{tag}.sql"));
    std::fs::write(&file, &script).with_context(|| format!("writing {}", file.display()))?;
    let args: Vec<String> = vec![
        "-n".into(),
        "-c".into(),
        clients.to_string(),
        "-j".into(),
        "2".into(),
        "-T".into(),
        seconds.max(1).to_string(),
        "-M".into(),
        "prepared".into(),
        "-f".into(),
        file.display().to_string(),
        database_url.into(),
    ];
    let out = tokio::time::timeout(
        Duration::from_secs(seconds + 120),
        tokio::process::Command::new("pgbench")
            .args(&args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .context("pgbench did not finish")?
    .context("running pgbench")?;
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&out.stdout);
    let per_s = parse_pgbench(&text).with_context(|| {
        format!(
            "unexpected pgbench output ({}): {text} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let shown = args[..args.len() - 1].join(" ");
    Ok(Ceiling {
        tool: "pgbench".into(),
        unit: "transactions".into(),
        per_s: per_s.round(),
        operations: parse_pgbench_count(&text)
            .unwrap_or_else(|| (per_s * seconds.max(1) as f64).round() as u64),
        clients,
        script: script.trim_end().to_string(),
        command: format!("pgbench {shown} <database url>"),
    })
}

/// `tps = 1234.5 (without initial connection time)`.
pub fn parse_pgbench(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("tps = "))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .next_back()
}

/// `number of transactions actually processed: 12345` (pgbench 15; `12345/12345` in older ones).
pub fn parse_pgbench_count(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("number of transactions actually processed:")
        })
        .filter_map(|rest| rest.split(['/', ' ']).find(|w| !w.is_empty())?.parse().ok())
        .next_back()
}

/// `mysqlslap` running `statements` `per_client` times in each of `clients` clients, in the
/// bench database (which it neither creates nor drops).
pub async fn mysqlslap(
    database_url: &str,
    statements: &[String],
    clients: usize,
    per_client: usize,
) -> anyhow::Result<Ceiling> {
    require_tool("mysqlslap", "mariadb-client")?;
    let url = reqwest::Url::parse(database_url)
        .with_context(|| format!("reading {database_url} as a URL"))?;
    let db = url.path().trim_start_matches('/').to_string();
    let one = statements.join(";") + ";";
    let query = one.repeat(per_client.max(1));
    let mut args: Vec<String> = vec![
        format!("--host={}", url.host_str().unwrap_or("127.0.0.1")),
        format!("--port={}", url.port().unwrap_or(3306)),
        format!(
            "--user={}",
            if url.username().is_empty() {
                "root"
            } else {
                url.username()
            }
        ),
        format!("--create-schema={db}"),
        "--no-drop".into(),
        format!("--concurrency={clients}"),
        "--iterations=1".into(),
        "--delimiter=;".into(),
    ];
    let shown = args.join(" ");
    if let Some(pw) = url.password() {
        args.push(format!("--password={pw}"));
    }
    args.push(format!("--query={query}"));
    let out = tokio::process::Command::new("mysqlslap")
        .args(&args)
        .kill_on_drop(true)
        .output()
        .await
        .context("running mysqlslap")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let secs = parse_mysqlslap(&text).with_context(|| {
        format!(
            "unexpected mysqlslap output ({}): {text} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let tx = (clients * per_client.max(1)) as f64;
    Ok(Ceiling {
        tool: "mysqlslap".into(),
        unit: "transactions".into(),
        per_s: (tx / secs.max(1e-6)).round(),
        operations: tx as u64,
        clients,
        script: statements.join(";\n") + ";",
        command: format!(
            "mysqlslap {shown} --query=\"<the script {} times>\"",
            per_client.max(1)
        ),
    })
}

/// `Average number of seconds to run all queries: 1.234 seconds`.
pub fn parse_mysqlslap(text: &str) -> Option<f64> {
    text.lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("Average number of seconds to run all queries:")
        })
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pgbench_and_mysqlslap_outputs_are_parsed() {
        let pg = "number of failed transactions: 0 (0.000%)\nlatency average = 50.1 ms\ntps = 1234.567 (without initial connection time)\n";
        assert_eq!(parse_pgbench(pg), Some(1234.567));
        let count = "number of transactions actually processed: 12345\nnumber of failed";
        assert_eq!(parse_pgbench_count(count), Some(12345));
        assert_eq!(parse_pgbench_count("x: 1\n"), None);
        let my = "Benchmark\n\tAverage number of seconds to run all queries: 2.345 seconds\n\tMinimum number of seconds to run all queries: 2.345 seconds\n";
        assert_eq!(parse_mysqlslap(my), Some(2.345));
        assert_eq!(parse_pgbench("nothing"), None);
    }

    #[test]
    fn for_update_locks_reads_writes_commits() {
        let s = statements(Strategy::ForUpdate, Backend::Postgres).unwrap();
        assert_eq!(s.len(), 4);
        assert!(s[1].ends_with("FOR UPDATE"));
        assert!(statements(Strategy::RedisLua, Backend::Mysql).is_err());
    }
}
