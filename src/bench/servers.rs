//! The CPU meters of one `bench shop` run: the shop, Redis, the database server (and the bench
//! database's own backends on PostgreSQL) and the client tool, each read before and after a
//! phase ([`super::cpu`] says how), so the run reports CPU per order next to the ceiling's
//! CPU per operation.

use super::cpu::{self, Backends, CpuUse, Meter, Started};
use crate::store::Backend;
use serde::Serialize;
use std::collections::HashMap;

/// CPU per operation of every process of one phase (`None`: not measured, e.g. a server that
/// is not on this machine, or one the strategy does not use).
#[derive(Debug, Clone, Serialize, Default)]
pub struct PhaseCpu {
    /// The shop process, its persistence consumers included (HTTP phases only).
    pub shop: Option<CpuUse>,
    /// The Redis server (redis strategies).
    pub redis: Option<CpuUse>,
    /// The whole database server: every backend, the reaped ones included, and its background
    /// processes (a shared server's other sessions too).
    pub database: Option<CpuUse>,
    /// PostgreSQL: the bench database's own backends only.
    pub database_backends: Option<CpuUse>,
    /// The load client: wrk, or the ceiling's redis-benchmark, pgbench or mysqlslap.
    pub client: Option<CpuUse>,
}

/// The meters that outlive a phase: where the servers are.
pub struct Servers {
    redis: Option<Meter>,
    database: Option<Meter>,
    database_name: String,
    /// The database server's kind, for the line ("PostgreSQL", "MariaDB").
    pub database_kind: &'static str,
    pg: Option<sqlx::PgPool>,
}

impl Servers {
    /// Finds the servers' processes: Redis through `INFO cpu` (when the strategy uses it and it
    /// is not a cluster), PostgreSQL's postmaster as the parent of a backend of ours,
    /// MariaDB's `mariadbd` from its `@@pid_file`.
    pub async fn find(
        uses_redis: bool,
        redis_url: &str,
        backend: Backend,
        db_url: &str,
    ) -> Servers {
        let redis = (uses_redis && !crate::inventory::redis_lua::conn::is_cluster(redis_url))
            .then(|| Meter::Redis(redis_url.to_string()));
        let database_name = db_url
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .split('?')
            .next()
            .unwrap_or_default()
            .to_string();
        let (database, pg) = match backend {
            Backend::Postgres => match sqlx::PgPool::connect(db_url).await {
                Ok(pool) => {
                    let pid: Option<i32> = sqlx::query_scalar("SELECT pg_backend_pid()")
                        .fetch_one(&pool)
                        .await
                        .ok();
                    let postmaster = pid
                        .and_then(|p| u32::try_from(p).ok())
                        .and_then(cpu::proc_stat)
                        .map(|(ppid, _, _)| Meter::Tree(ppid));
                    (postmaster, Some(pool))
                }
                Err(e) => {
                    tracing::warn!("the database's CPU is not measured: {e}");
                    (None, None)
                }
            },
            Backend::Mysql => (mariadbd(db_url).await.map(Meter::Process), None),
        };
        Servers {
            redis,
            database,
            database_name,
            database_kind: match backend {
                Backend::Postgres => "PostgreSQL",
                Backend::Mysql => "MariaDB",
            },
            pg,
        }
    }

    /// Reads every meter at the start of a phase; `shop` is the shop's pid (HTTP phases).
    pub async fn start(&self, shop: Option<u32>) -> Phase {
        let shop = match shop {
            Some(pid) => Some(Started::now(Meter::Process(pid), "the shop").await),
            None => None,
        };
        let redis = match &self.redis {
            Some(m) => Some(Started::now(m.clone(), "the Redis server").await),
            None => None,
        };
        let database = match &self.database {
            Some(m) => Some(Started::now(m.clone(), "the database server").await),
            None => None,
        };
        let backends = match &self.pg {
            Some(pool) => {
                let first = cpu::backends_now(pool, &self.database_name).await;
                let watch = Backends::watch(pool.clone(), self.database_name.clone());
                Some((first, watch))
            }
            None => None,
        };
        Phase {
            shop,
            redis,
            database,
            backends,
            client: Started::now(Meter::Children, "the client").await,
        }
    }

    /// Closes the connection the meters used.
    pub async fn close(self) {
        if let Some(pool) = self.pg {
            pool.close().await;
        }
    }
}

/// Every meter's reading at the start of one phase.
pub struct Phase {
    shop: Option<Started>,
    redis: Option<Started>,
    database: Option<Started>,
    backends: Option<(HashMap<u32, f64>, Backends)>,
    client: Started,
}

/// What each meter divides by at the end of a phase.
pub struct Ops<'a> {
    /// Orders (HTTP phases) or the ceiling's operations: the shop's, Redis's and the client's.
    pub ops: u64,
    pub unit: &'a str,
    /// The database's divisor (persisted orders for redis strategies) and its unit.
    pub db_ops: u64,
    pub db_unit: &'a str,
    /// The client's divisor (its requests) and unit.
    pub client_ops: u64,
    pub client_unit: &'a str,
}

impl Phase {
    /// Reads every meter again: the phase's CPU, per operation.
    pub async fn done(self, o: &Ops<'_>) -> PhaseCpu {
        let read = |s: Option<Started>, ops: u64, unit: &str| {
            let unit = unit.to_string();
            async move {
                match s {
                    Some(s) => s.done(ops, &unit).await,
                    None => None,
                }
            }
        };
        PhaseCpu {
            shop: read(self.shop, o.ops, o.unit).await,
            redis: read(self.redis, o.ops, o.unit).await,
            database: read(self.database, o.db_ops, o.db_unit).await,
            database_backends: self
                .backends
                .map(|(first, watch)| watch.stop(o.db_ops, o.db_unit, &first)),
            client: self.client.done(o.client_ops, o.client_unit).await,
        }
    }
}

/// The `mariadbd` process of the server at `db_url`, from its `@@pid_file` (a local server).
async fn mariadbd(db_url: &str) -> Option<u32> {
    use sqlx::Connection;
    let mut conn = sqlx::MySqlConnection::connect(db_url).await.ok()?;
    let file: Option<String> = sqlx::query_scalar("SELECT @@pid_file")
        .fetch_one(&mut conn)
        .await
        .ok()?;
    let _ = conn.close().await;
    std::fs::read_to_string(file?).ok()?.trim().parse().ok()
}

/// One line of CPU per operation: `label: shop 40.5 µs/order  Redis 25.5 µs/order ...`.
pub fn line(label: &str, c: &PhaseCpu, db_kind: &str, client: &str) -> String {
    let fig = |u: &CpuUse| format!("{:.1} µs/{}", u.us_per_op, u.unit);
    let mut parts = Vec::new();
    if let Some(u) = &c.shop {
        parts.push(format!("shop {}", fig(u)));
    }
    if let Some(u) = &c.redis {
        parts.push(format!("Redis {}", fig(u)));
    }
    if let Some(u) = &c.database {
        parts.push(format!("{db_kind} {}", fig(u)));
    }
    if let Some(u) = &c.database_backends {
        parts.push(format!("(its bench backends {})", fig(u)));
    }
    if let Some(u) = &c.client {
        parts.push(format!("{client} {}", fig(u)));
    }
    format!("CPU per op, {label}: {}\n", parts.join("  "))
}
