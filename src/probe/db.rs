//! Database counters: PostgreSQL `pg_stat_database` (and `pg_stat_statements` when installed),
//! MySQL/MariaDB `SHOW GLOBAL STATUS`.

use super::{push, push_in, Series, SeriesName};
use crate::store::dialect::Statements;
use crate::store::Backend;
use sqlx::{MySqlPool, PgPool, Row};
use std::collections::BTreeMap;
use tokio::time::Instant;

pub(super) enum DbProbe {
    Postgres {
        /// Connected to the `postgres` database, so the probe's own queries do not count
        /// against the shop's database.
        stats: PgPool,
        /// Connected to the shop's database, for the stock figure.
        shop: PgPool,
        datname: String,
        statements: bool,
        last: Option<(Instant, i64, Option<i64>)>,
        /// The item whose stock to read (`None`: a foreign database, no stock read).
        item: Option<i64>,
    },
    Mysql {
        pool: MySqlPool,
        last: Option<(Instant, BTreeMap<String, i64>)>,
        item: Option<i64>,
    },
}

impl DbProbe {
    /// Connects to the server's counters. On a `foreign` database nothing is created (no
    /// extension) and the reference shop's `items` table is not read.
    pub(super) async fn connect(url: &str, item: i64, foreign: bool) -> Option<Self> {
        let item = (!foreign).then_some(item);
        match Backend::from_url(url).ok()? {
            Backend::Postgres => {
                let (stats_url, datname) = crate::store::on_database(url, "postgres")?;
                let stats = PgPool::connect(&stats_url).await.ok()?;
                let shop = PgPool::connect(url).await.ok()?;
                // Statement counts need pg_stat_statements: create the view when the server
                // preloads the library (docker-compose's PostgreSQL does) and the database is
                // ours; otherwise use it if it is there, else fall back to transactions from
                // pg_stat_database.
                let preload: Option<String> = sqlx::query_scalar("SHOW shared_preload_libraries")
                    .fetch_optional(&stats)
                    .await
                    .ok()
                    .flatten();
                if !foreign && preload.is_some_and(|p| p.contains("pg_stat_statements")) {
                    let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                        .execute(&stats)
                        .await;
                }
                let statements = sqlx::query("SELECT 1 FROM pg_stat_statements LIMIT 1")
                    .fetch_optional(&stats)
                    .await
                    .is_ok();
                Some(DbProbe::Postgres {
                    stats,
                    shop,
                    datname,
                    statements,
                    last: None,
                    item,
                })
            }
            Backend::Mysql => Some(DbProbe::Mysql {
                pool: MySqlPool::connect(url).await.ok()?,
                last: None,
                item,
            }),
        }
    }

    pub(super) async fn sample(&mut self, t: f64, series: &mut BTreeMap<&'static str, Series>) {
        let stock: Option<(i64, i64)> = match self {
            DbProbe::Postgres {
                stats,
                shop,
                datname,
                statements,
                last,
                item,
            } => {
                let xacts: Option<i64> = sqlx::query_scalar(
                    "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1",
                )
                .bind(&*datname)
                .fetch_optional(&*stats)
                .await
                .ok()
                .flatten();
                let calls: Option<i64> = if *statements {
                    sqlx::query_scalar(
                        "SELECT COALESCE(sum(s.calls), 0)::bigint FROM pg_stat_statements s \
                         JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1",
                    )
                    .bind(&*datname)
                    .fetch_one(&*stats)
                    .await
                    .ok()
                } else {
                    None
                };
                let now = Instant::now();
                if let (Some(x), Some((at, px, pc))) = (xacts, last.as_ref()) {
                    let secs = now.duration_since(*at).as_secs_f64().max(1e-3);
                    // Minus the probe's own stock read (one transaction per sample).
                    let tps = ((x - px - 1).max(0)) as f64 / secs;
                    push(series, SeriesName::DbTps,
                        "PostgreSQL pg_stat_database xact_commit + xact_rollback for the shop's database (busy backends flush these at most once a second, idle ones up to 10 s late)", t, tps);
                    match (calls, pc) {
                        (Some(c), Some(pc)) => push(series, SeriesName::DbQps,
                            "PostgreSQL pg_stat_statements sum(calls) for the shop's database", t, ((c - pc - 1).max(0)) as f64 / secs),
                        _ => push_in(series, SeriesName::DbQps, "transactions/s",
                            "PostgreSQL pg_stat_database xact_commit + xact_rollback (pg_stat_statements not installed)", t, tps),
                    }
                }
                if let Some(x) = xacts {
                    *last = Some((now, x, calls));
                }
                match item {
                    Some(item) => {
                        sqlx::query(Statements::for_backend(Backend::Postgres).read_stock)
                            .bind(*item)
                            .fetch_optional(&*shop)
                            .await
                            .ok()
                            .flatten()
                            .and_then(|r| Some((r.try_get(0).ok()?, r.try_get(1).ok()?)))
                    }
                    None => None,
                }
            }
            DbProbe::Mysql { pool, last, item } => {
                let rows = sqlx::query("SHOW GLOBAL STATUS")
                    .fetch_all(&*pool)
                    .await
                    .unwrap_or_default();
                let status: BTreeMap<String, i64> = rows
                    .iter()
                    .filter_map(|r| {
                        let k: String = r.try_get(0).ok()?;
                        let v: String = r.try_get(1).ok()?;
                        Some((k, v.parse().ok()?))
                    })
                    .collect();
                let now = Instant::now();
                if let Some((at, prev)) = last.as_ref() {
                    let secs = now.duration_since(*at).as_secs_f64().max(1e-3);
                    let d = |k: &str| {
                        (status.get(k).copied().unwrap_or(0) - prev.get(k).copied().unwrap_or(0))
                            .max(0) as f64
                    };
                    // Minus the probe's own two statements per sample.
                    push(
                        series,
                        SeriesName::DbQps,
                        "MySQL SHOW GLOBAL STATUS Questions (server-wide), delta per second",
                        t,
                        (d("Questions") - 2.0).max(0.0) / secs,
                    );
                    push(
                        series,
                        SeriesName::DbTps,
                        "MySQL SHOW GLOBAL STATUS Com_commit + Com_rollback (server-wide)",
                        t,
                        (d("Com_commit") + d("Com_rollback")) / secs,
                    );
                    push(
                        series,
                        SeriesName::DbRowLockWaits,
                        "MySQL SHOW GLOBAL STATUS Innodb_row_lock_waits",
                        t,
                        d("Innodb_row_lock_waits") / secs,
                    );
                    push(
                        series,
                        SeriesName::DbDeadlocks,
                        "MySQL SHOW GLOBAL STATUS Innodb_deadlocks",
                        t,
                        d("Innodb_deadlocks") / secs,
                    );
                }
                *last = Some((now, status));
                match item {
                    Some(item) => sqlx::query(Statements::for_backend(Backend::Mysql).read_stock)
                        .bind(*item)
                        .fetch_optional(&*pool)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|r| Some((r.try_get(0).ok()?, r.try_get(1).ok()?))),
                    None => None,
                }
            }
        };
        if let Some((stock, sold)) = stock {
            push(
                series,
                SeriesName::DbStock,
                "SELECT stock FROM items",
                t,
                stock as f64,
            );
            push(
                series,
                SeriesName::DbSold,
                "SELECT SUM(qty) FROM orders WHERE status IN ('pending_payment', 'paid')",
                t,
                sold as f64,
            );
        }
    }
}
