//! The ceiling of a strategy: the same work on the same server from the server's own C
//! benchmark client, with no HTTP and no shop.
//!
//! - redis-lua: `redis-benchmark` EVALSHA of `lua/deduct.lua` ([`super::redis::evalsha`]).
//! - for-update and conditional on PostgreSQL: `pgbench` running **the shop's own statements**
//!   ([`shop_script`]: the SQL of `store::dialect`, one round trip each, as the shop sends them
//!   for one order: the order row included), on a hot row (`items`, a second item of the bench
//!   database); and, as a second, labelled ceiling, the bare hot row ([`statements`]: the lock
//!   and the write, no order row), the ceiling these strategies were first measured against.
//! - naive, optimistic on PostgreSQL: `pgbench` with the strategy's bare statements; batched
//!   against the bare FOR UPDATE hot row it is meant to beat.
//! - the same on MariaDB/MySQL: `mysqlslap` with the bare statements.
//!
//! 64 clients by default (the shop's pool), `-M prepared` for pgbench as sqlx prepares too.

use super::require_tool;
use crate::inventory::Strategy;
use crate::model::{now_ms, OrderStatus, SaleSetup};
use crate::store::dialect::Statements;
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
    /// What the script is: `the shop's statements` or `the bare hot row` (SQL ceilings).
    pub label: String,
    /// The statements, one per line (SQL ceilings).
    pub script: String,
    pub command: String,
}

/// What a SQL ceiling's client runs per transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// What it is, for the output ([`Ceiling::label`]).
    pub label: &'static str,
    /// Statements (without their `;`) and pgbench meta-commands (`\set`), one per line.
    pub lines: Vec<String>,
    /// pgbench variables of fixed value (`-D name=value`).
    pub defines: Vec<(&'static str, String)>,
}

/// The bare statements' label.
pub const BARE: &str = "the bare hot row (no order row)";
/// The shop's statements' label.
pub const SHOP: &str = "the shop's statements (order row included)";

/// How long a pgbench run lasts.
#[derive(Debug, Clone, Copy)]
pub enum Length {
    /// `-T`: seconds.
    Seconds(u64),
    /// `-t`: transactions per client (`-t 1` measures the clients' connection set-up).
    PerClient(u64),
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
        Strategy::ForUpdate | Strategy::ForUpdateQueued | Strategy::Batched => vec![
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

/// The shop's own conversation with PostgreSQL for one order of `strategy` (for-update,
/// conditional), as a pgbench script: the statements of [`Statements`] exactly as the shop
/// sends them (`BEGIN`, each statement, `COMMIT`: one round trip each), each `$n` bound to a
/// pgbench variable. `u`, a fresh random number per transaction, is the order id, the buyer,
/// the device and the `Idempotency-Key` (wrk's requests are each a new buyer); the item, the
/// quantity, the status, the time and the purchase limit are fixed (`-D`). `None` for the
/// other strategies. The shop's own extra round trip, sqlx's ping when a connection goes back
/// to the pool, is not in it: pgbench needs none.
pub fn shop_script(strategy: Strategy) -> Option<Script> {
    let sql = Statements::for_backend(Backend::Postgres);
    // `rows::bind_order`'s order: id, item, buyer, device, qty, status, created, updated, key.
    let order = ["u", "item", "u", "u", "qty", "status", "t", "t", "u"];
    let body = match strategy {
        Strategy::ForUpdate | Strategy::ForUpdateQueued => vec![
            bind(sql.insert_order, &order),
            bind(sql.lock_for_purchase, &["item"]),
            bind(
                sql.deduct_within_limit,
                &["qty", "item", "item", "u", "limit"],
            ),
        ],
        Strategy::Conditional => vec![
            bind(sql.conditional_deduct, &["qty", "item", "qty"]),
            bind(
                sql.insert_order_within_limit,
                &[&order[..], &["item", "u", "qty", "limit"]].concat(),
            ),
        ],
        Strategy::Naive
        | Strategy::Optimistic
        | Strategy::Batched
        | Strategy::RedisLua
        | Strategy::RedisBuckets => return None,
    };
    let mut lines = vec![
        "\\set u random(1, 9000000000000000000)".to_string(),
        "BEGIN".into(),
    ];
    lines.extend(body);
    lines.push("COMMIT".into());
    Some(Script {
        label: SHOP,
        lines,
        defines: vec![
            ("item", HOT_ITEM.to_string()),
            ("qty", "1".into()),
            ("status", OrderStatus::PendingPayment.as_str().into()),
            ("t", now_ms().to_string()),
            // The hot row's limit (`prepare_hot_row`), as the shop binds its item's.
            ("limit", "1".into()),
        ],
    })
}

/// `sql` with its `$1, $2, ...` replaced by the pgbench variables `:vars[0], :vars[1], ...`.
fn bind(sql: &str, vars: &[&str]) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits = rest[at + 1..]
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len() - at - 1);
        let n: usize = rest[at + 1..at + 1 + digits].parse().unwrap_or(0);
        match vars.get(n.wrapping_sub(1)) {
            Some(v) => {
                out.push(':');
                out.push_str(v);
            }
            None => out.push_str(&rest[at..at + 1 + digits]),
        }
        rest = &rest[at + 1 + digits..];
    }
    out.push_str(rest);
    out
}

/// The bare statements ([`statements`]) as a script.
pub fn bare_script(strategy: Strategy, backend: Backend) -> anyhow::Result<Script> {
    Ok(Script {
        label: BARE,
        lines: statements(strategy, backend)?,
        defines: Vec::new(),
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

/// `pgbench` running `script` with `clients` clients for `length`.
pub async fn pgbench(
    database_url: &str,
    script: &Script,
    clients: usize,
    length: Length,
    tag: &str,
) -> anyhow::Result<Ceiling> {
    require_tool("pgbench", "postgresql-client")?;
    // A meta-command (`\set`) and `\gset` end their line instead of the semicolon.
    let text: String = script
        .lines
        .iter()
        .map(|s| {
            if s.starts_with('\\') || s.ends_with("\\gset") {
                format!("{s}\n")
            } else {
                format!("{s};\n")
            }
        })
        .collect();
    let file = std::env::temp_dir().join(format!("oversell-pgbench-{tag}.sql"));
    std::fs::write(&file, &text).with_context(|| format!("writing {}", file.display()))?;
    let (flag, n, seconds) = match length {
        Length::Seconds(s) => ("-T", s.max(1), s.max(1)),
        Length::PerClient(t) => ("-t", t.max(1), 0),
    };
    let mut args: Vec<String> = vec![
        "-n".into(),
        "-c".into(),
        clients.to_string(),
        "-j".into(),
        "2".into(),
        flag.into(),
        n.to_string(),
        "-M".into(),
        "prepared".into(),
    ];
    for (name, value) in &script.defines {
        args.push("-D".into());
        args.push(format!("{name}={value}"));
    }
    args.push("-f".into());
    args.push(file.display().to_string());
    let (url, password) = without_password(database_url)?;
    args.push(url);
    let mut cmd = tokio::process::Command::new("pgbench");
    cmd.args(&args).kill_on_drop(true);
    // The password through the environment, never argv (which every local user reads in `ps`).
    if let Some(pw) = password {
        cmd.env("PGPASSWORD", pw);
    }
    let out = tokio::time::timeout(Duration::from_secs(seconds + 120), cmd.output())
        .await
        .context("pgbench did not finish")?
        .context("running pgbench")?;
    let _ = std::fs::remove_file(&file);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let per_s = parse_pgbench(&stdout).with_context(|| {
        format!(
            "unexpected pgbench output ({}): {stdout} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let shown = args[..args.len() - 1].join(" ");
    let expected = match length {
        Length::Seconds(s) => (per_s * s.max(1) as f64).round() as u64,
        Length::PerClient(t) => t.max(1) * clients as u64,
    };
    Ok(Ceiling {
        tool: "pgbench".into(),
        unit: "transactions".into(),
        per_s: per_s.round(),
        operations: parse_pgbench_count(&stdout).unwrap_or(expected),
        clients,
        label: script.label.into(),
        script: text.trim_end().to_string(),
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

/// `url` without its password (userinfo or `?password=`), and the password, percent-decoded,
/// for a child tool's environment.
fn without_password(url: &str) -> anyhow::Result<(String, Option<String>)> {
    let mut u = reqwest::Url::parse(url)
        .with_context(|| format!("reading {} as a URL", crate::secret::url(url)))?;
    let decode = |p: &str| {
        sqlx_core::percent_encoding::percent_decode_str(p)
            .decode_utf8_lossy()
            .into_owned()
    };
    let mut password = u.password().map(decode);
    let _ = u.set_password(None);
    let pairs: Vec<(String, String)> = u
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if pairs.iter().any(|(k, _)| k == "password") {
        u.set_query(None);
        let mut q = u.query_pairs_mut();
        for (k, v) in &pairs {
            match k.as_str() {
                "password" => password = Some(v.clone()),
                _ => {
                    q.append_pair(k, v);
                }
            }
        }
    }
    let mut text = u.to_string();
    if text.ends_with('?') {
        text.pop();
    }
    Ok((text, password))
}

/// `mysqlslap` running `statements` `per_client` times in each of `clients` clients, in the
/// bench database (which it neither creates nor drops).
pub async fn mysqlslap(
    database_url: &str,
    script: &Script,
    clients: usize,
    per_client: usize,
) -> anyhow::Result<Ceiling> {
    require_tool("mysqlslap", "mariadb-client")?;
    let statements = &script.lines;
    let url = reqwest::Url::parse(database_url)
        .with_context(|| format!("reading {} as a URL", crate::secret::url(database_url)))?;
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
    args.push(format!("--query={query}"));
    let mut cmd = tokio::process::Command::new("mysqlslap");
    cmd.args(&args).kill_on_drop(true);
    // The password through the environment, never argv (which every local user reads in `ps`).
    if let (_, Some(pw)) = without_password(database_url)? {
        cmd.env("MYSQL_PWD", pw);
    }
    let out = cmd.output().await.context("running mysqlslap")?;
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
        label: script.label.into(),
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
    fn a_child_tools_url_carries_no_password_which_goes_apart() {
        let (url, pw) = without_password("postgres://u:p%2Fw@127.0.0.1:5432/db").unwrap();
        assert_eq!(
            (url.as_str(), pw.as_deref()),
            ("postgres://u@127.0.0.1:5432/db", Some("p/w"))
        );
        let (url, pw) = without_password("postgres://u@h/db?sslmode=disable&password=x9").unwrap();
        assert_eq!(
            (url.as_str(), pw.as_deref()),
            ("postgres://u@h/db?sslmode=disable", Some("x9"))
        );
        let (url, pw) = without_password("mysql://root@h:3306/db").unwrap();
        assert_eq!((url.as_str(), pw), ("mysql://root@h:3306/db", None));
    }

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
    fn the_shop_script_is_the_shops_own_sql_with_pgbench_variables() {
        let sql = Statements::for_backend(Backend::Postgres);
        let s = shop_script(Strategy::Conditional).unwrap();
        assert_eq!(s.label, SHOP);
        assert!(s.lines[0].starts_with("\\set u random("), "{s:?}");
        assert_eq!(
            (s.lines[1].as_str(), s.lines[4].as_str()),
            ("BEGIN", "COMMIT")
        );
        assert_eq!(
            s.lines[2],
            sql.conditional_deduct
                .replace("$1", ":qty")
                .replace("$2", ":item")
                .replace("$3", ":qty")
        );
        // Every parameter is bound, each defined (`-D`) or set per transaction (`u`).
        for line in &s.lines {
            assert!(!line.contains('$'), "{line}");
        }
        let f = shop_script(Strategy::ForUpdate).unwrap();
        assert_eq!(f.lines.len(), 6, "{f:?}");
        assert!(f.lines[2].starts_with("INSERT INTO orders"), "{f:?}");
        assert!(f.lines[3].ends_with("FOR UPDATE"), "{f:?}");
        assert!(
            f.lines[4]
                .ends_with("user_id = :u AND status IN ('pending_payment', 'paid')) <= :limit"),
            "{f:?}"
        );
        for var in ["item", "qty", "status", "t", "limit"] {
            assert!(f.defines.iter().any(|(n, _)| *n == var), "{var}: {f:?}");
        }
        assert!(shop_script(Strategy::Naive).is_none());
        assert_eq!(
            bind(
                "a = $1 AND b = $10 AND c = $2",
                &["x", "y", "", "", "", "", "", "", "", "z"]
            ),
            "a = :x AND b = :z AND c = :y"
        );
    }

    #[test]
    fn for_update_locks_reads_writes_commits() {
        let s = statements(Strategy::ForUpdate, Backend::Postgres).unwrap();
        assert_eq!(s.len(), 4);
        assert!(s[1].ends_with("FOR UPDATE"));
        assert!(statements(Strategy::RedisLua, Backend::Mysql).is_err());
    }
}
