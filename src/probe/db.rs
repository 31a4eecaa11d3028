//! Database counters: PostgreSQL `pg_stat_database` (and `pg_stat_statements` when installed),
//! MySQL/MariaDB `SHOW GLOBAL STATUS`.

use super::{push, push_in, Series, SeriesName, StockStatement};
use crate::store::Backend;
use sqlx::{MySqlPool, PgPool, Row};
use std::collections::BTreeMap;
use tokio::time::Instant;

/// The counters of one database server, and the stock of the shop's item on it.
pub(super) enum DbProbe {
    Postgres(PgProbe),
    Mysql(MysqlProbe),
}

pub(super) struct PgProbe {
    /// Connected to the `postgres` database, so the probe's own queries do not count
    /// against the shop's database.
    stats: PgPool,
    /// Connected to the shop's database, for the stock figure.
    shop: PgPool,
    datname: String,
    statements: bool,
    last: Option<(Instant, i64, Option<i64>)>,
    /// How to read the item's stock (`None`: the shop under test gave no statement, no stock
    /// read).
    stock: Option<StockStatement>,
}

pub(super) struct MysqlProbe {
    pool: MySqlPool,
    last: Option<(Instant, BTreeMap<String, i64>)>,
    stock: Option<StockStatement>,
}

impl DbProbe {
    /// Connects to the server's counters. Without `may_create` nothing is created (no
    /// extension); the item's stock is read only when the shop under test says how (`stock`).
    pub(super) async fn connect(
        url: &str,
        stock: Option<StockStatement>,
        may_create: bool,
    ) -> Option<Self> {
        match Backend::from_url(url).ok()? {
            Backend::Postgres => PgProbe::connect(url, stock, may_create)
                .await
                .map(DbProbe::Postgres),
            Backend::Mysql => Some(DbProbe::Mysql(MysqlProbe {
                pool: MySqlPool::connect(url).await.ok()?,
                last: None,
                stock,
            })),
        }
    }

    /// Pushes the server's rates since the last sample, and the item's stock and units sold.
    pub(super) async fn sample(&mut self, t: f64, series: &mut BTreeMap<&'static str, Series>) {
        let stock = match self {
            DbProbe::Postgres(p) => p.sample(t, series).await,
            DbProbe::Mysql(m) => m.sample(t, series).await,
        };
        let statement = match self {
            DbProbe::Postgres(p) => p.stock.as_ref(),
            DbProbe::Mysql(m) => m.stock.as_ref(),
        };
        if let (Some((stock, sold)), Some(st)) = (stock, statement) {
            push(
                series,
                SeriesName::DbStock,
                st.stock_source,
                t,
                stock as f64,
            );
            push(series, SeriesName::DbSold, st.sold_source, t, sold as f64);
        }
    }
}

/// Reads `(stock, sold)` with the shop's statement, bound to its item.
async fn read_stock<'e, E>(executor: E, st: Option<&StockStatement>) -> Option<(i64, i64)>
where
    E: sqlx::Executor<'e>,
    i64: sqlx::Type<E::Database> + for<'r> sqlx::Decode<'r, E::Database>,
    for<'q> i64: sqlx::Encode<'q, E::Database>,
    <E::Database as sqlx::Database>::Arguments: sqlx::IntoArguments<E::Database>,
    usize: sqlx::ColumnIndex<<E::Database as sqlx::Database>::Row>,
{
    let st = st?;
    let row = sqlx::query(st.sql)
        .bind(st.item)
        .fetch_optional(executor)
        .await
        .ok()??;
    Some((row.try_get(0).ok()?, row.try_get(1).ok()?))
}

impl PgProbe {
    async fn connect(url: &str, stock: Option<StockStatement>, may_create: bool) -> Option<Self> {
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
        if may_create && preload.is_some_and(|p| p.contains("pg_stat_statements")) {
            let _ = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                .execute(&stats)
                .await;
        }
        let statements = sqlx::query("SELECT 1 FROM pg_stat_statements LIMIT 1")
            .fetch_optional(&stats)
            .await
            .is_ok();
        Some(PgProbe {
            stats,
            shop,
            datname,
            statements,
            last: None,
            stock,
        })
    }

    /// Pushes transactions/s and statements/s since the last sample; the item's stock and sold.
    async fn sample(
        &mut self,
        t: f64,
        series: &mut BTreeMap<&'static str, Series>,
    ) -> Option<(i64, i64)> {
        let (xacts, calls) = self.counters().await;
        let now = Instant::now();
        if let (Some(x), Some((at, px, pc))) = (xacts, self.last.as_ref()) {
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
            self.last = Some((now, x, calls));
        }
        read_stock(&self.shop, self.stock.as_ref()).await
    }

    /// The shop's database's transactions, and its statements when pg_stat_statements is there.
    async fn counters(&self) -> (Option<i64>, Option<i64>) {
        let xacts: Option<i64> = sqlx::query_scalar(
            "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1",
        )
        .bind(&self.datname)
        .fetch_optional(&self.stats)
        .await
        .ok()
        .flatten();
        if !self.statements {
            return (xacts, None);
        }
        let calls = sqlx::query_scalar(
            "SELECT COALESCE(sum(s.calls), 0)::bigint FROM pg_stat_statements s \
             JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1",
        )
        .bind(&self.datname)
        .fetch_one(&self.stats)
        .await
        .ok();
        (xacts, calls)
    }
}

impl MysqlProbe {
    /// Pushes questions/s, transactions/s, row lock waits/s and deadlocks/s since the last
    /// sample (server-wide); the item's stock and sold.
    async fn sample(
        &mut self,
        t: f64,
        series: &mut BTreeMap<&'static str, Series>,
    ) -> Option<(i64, i64)> {
        let status = self.status().await;
        let now = Instant::now();
        if let Some((at, prev)) = self.last.as_ref() {
            let secs = now.duration_since(*at).as_secs_f64().max(1e-3);
            let d = |k: &str| {
                (status.get(k).copied().unwrap_or(0) - prev.get(k).copied().unwrap_or(0)).max(0)
                    as f64
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
        self.last = Some((now, status));
        read_stock(&self.pool, self.stock.as_ref()).await
    }

    /// `SHOW GLOBAL STATUS`, its numeric variables by name.
    async fn status(&self) -> BTreeMap<String, i64> {
        let rows = sqlx::query("SHOW GLOBAL STATUS")
            .fetch_all(&self.pool)
            .await
            .unwrap_or_default();
        rows.iter()
            .filter_map(|r| {
                let k: String = r.try_get(0).ok()?;
                let v: String = r.try_get(1).ok()?;
                Some((k, v.parse().ok()?))
            })
            .collect()
    }
}
