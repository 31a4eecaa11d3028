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
    /// The shop's system calls and thread switches per order (HTTP phases only).
    pub shop_syscalls: Option<Syscalls>,
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

/// CPU per operation, process by process, of the saturation phase (from wrk's start until
/// persistence drained) and of the ceiling, with the ratios the targets are set in.
#[derive(Debug, Clone, Serialize)]
pub struct ShopCpu {
    /// The database server's kind (`PostgreSQL`, `MariaDB`).
    pub database_server: String,
    pub saturation: PhaseCpu,
    pub ceiling: PhaseCpu,
    /// The shop's CPU per order over Redis's own per order, same phase (redis strategies).
    pub shop_over_redis: Option<f64>,
    /// The shop's CPU per order over the ceiling client's per operation (pgbench's per
    /// transaction, redis-benchmark's per call, mysqlslap's per transaction).
    pub shop_over_ceiling_client: Option<f64>,
    /// The database server's CPU per order at saturation over its CPU per ceiling operation.
    pub database_over_ceiling: Option<f64>,
    /// pgbench: its client's CPU in a `-t 1` run of the ceiling's script, i.e. its clients'
    /// connection set-up plus one transaction each (`ops`: those transactions).
    pub ceiling_client_setup: Option<CpuUse>,
    /// pgbench: its client's CPU per transaction without that set-up (the ceiling's run minus
    /// the `-t 1` run, over the transactions between them): a divisor that does not move with
    /// the rate.
    pub ceiling_client_steady: Option<CpuUse>,
    /// The shop's CPU per order over `ceiling_client_steady`.
    pub shop_over_ceiling_client_steady: Option<f64>,
}

/// `a`'s CPU per operation over `b`'s (`None` when either is missing or `b` is 0).
pub fn over(a: &Option<CpuUse>, b: &Option<CpuUse>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b.us_per_op > 0.0 => Some(super::ratio(a.us_per_op, b.us_per_op)),
        _ => None,
    }
}

impl ShopCpu {
    pub fn of(saturation: PhaseCpu, ceiling: PhaseCpu, database_server: &str) -> ShopCpu {
        ShopCpu {
            database_server: database_server.to_string(),
            shop_over_redis: over(&saturation.shop, &saturation.redis),
            shop_over_ceiling_client: over(&saturation.shop, &ceiling.client),
            database_over_ceiling: over(&saturation.database, &ceiling.database),
            ceiling_client_setup: None,
            ceiling_client_steady: None,
            shop_over_ceiling_client_steady: None,
            saturation,
            ceiling,
        }
    }

    /// Adds pgbench's connection set-up (`setup`) and its client CPU without it (`steady`).
    pub fn with_client_setup(&mut self, setup: Option<CpuUse>, steady: Option<CpuUse>) {
        self.shop_over_ceiling_client_steady = over(&self.saturation.shop, &steady);
        self.ceiling_client_setup = setup;
        self.ceiling_client_steady = steady;
    }
}

/// The shop's system calls and thread switches per order: figures of the code, not of the
/// machine (a faster core makes each cheaper, not fewer).
#[derive(Debug, Clone, Serialize)]
pub struct Syscalls {
    /// `write(2)`-family calls (`write`, `writev`, `pwrite`) per order.
    pub writes_per_op: f64,
    /// `read(2)`-family calls per order (a socket's `recv(2)`, which the runtime reads
    /// sockets with, is not among them).
    pub reads_per_op: f64,
    /// Context switches of every thread per order, voluntary (a thread that parked) and not.
    pub switches_per_op: f64,
    pub unit: String,
    pub source: String,
}

/// A process's counters at one moment: (syscw, syscr, context switches of its threads).
fn io_counts(pid: u32) -> Option<(u64, u64, u64)> {
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok()?;
    let field = |name: &str| -> Option<u64> {
        io.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
    };
    let mut switches = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(task) = task else { continue };
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        switches += status
            .lines()
            .filter_map(|l| {
                l.strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            })
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum::<u64>();
    }
    Some((field("syscw:")?, field("syscr:")?, switches))
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
        let redis = (uses_redis && !crate::store::redis_conn::is_cluster(redis_url))
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

    /// Reads every meter at the start of a phase; `shop` is the shop's pid (HTTP phases);
    /// `database`: whether the database takes part (not in a Redis ceiling).
    pub async fn start(&self, shop: Option<u32>, with_database: bool) -> Phase {
        let shop_io = shop.and_then(|pid| Some((pid, io_counts(pid)?)));
        let shop = match shop {
            Some(pid) => Some(Started::now(Meter::Process(pid), "the shop").await),
            None => None,
        };
        let redis = match &self.redis {
            Some(m) => Some(Started::now(m.clone(), "the Redis server").await),
            None => None,
        };
        let database = match self.database.as_ref().filter(|_| with_database) {
            Some(m) => Some(Started::now(m.clone(), "the database server").await),
            None => None,
        };
        let backends = match self.pg.as_ref().filter(|_| with_database) {
            Some(pool) => {
                let first = cpu::backends_now(pool, &self.database_name).await;
                let watch = Backends::watch(pool.clone(), self.database_name.clone());
                Some((first, watch))
            }
            None => None,
        };
        Phase {
            shop,
            shop_io,
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
    /// The shop's pid and its [`io_counts`] at the start.
    shop_io: Option<(u32, (u64, u64, u64))>,
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
        let shop_syscalls = self.shop_io.and_then(|(pid, (w0, r0, s0))| {
            let (w1, r1, s1) = io_counts(pid)?;
            let per = |a: u64, b: u64| a.saturating_sub(b) as f64 / o.ops.max(1) as f64;
            Some(Syscalls {
                writes_per_op: per(w1, w0),
                reads_per_op: per(r1, r0),
                switches_per_op: per(s1, s0),
                unit: o.unit.to_string(),
                source: format!(
                    "/proc/{pid}/io syscw and syscr; voluntary_ctxt_switches + \
                     nonvoluntary_ctxt_switches of /proc/{pid}/task/*/status"
                ),
            })
        });
        PhaseCpu {
            shop: read(self.shop, o.ops, o.unit).await,
            shop_syscalls,
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
    let mut out = format!("CPU per op, {label}: {}\n", parts.join("  "));
    if let Some(s) = &c.shop_syscalls {
        out.push_str(&format!(
            "  shop system calls per {unit}: {:.2} writes, {:.2} reads (read(2) family; recv \
             not counted), {:.2} thread switches\n",
            s.writes_per_op,
            s.reads_per_op,
            s.switches_per_op,
            unit = s.unit
        ));
    }
    out
}

/// The CPU lines of `bench shop`'s summary; `tool` is the ceiling's client, `ceiling_label`
/// names its line.
pub fn render(cpu: &ShopCpu, tool: &str, ceiling_label: &str) -> String {
    let mut out = String::new();
    let db = cpu.database_server.as_str();
    out.push_str(&line(
        "saturation, until persisted",
        &cpu.saturation,
        db,
        "wrk",
    ));
    out.push_str(&line(ceiling_label, &cpu.ceiling, db, tool));
    if let (Some(setup), Some(steady)) = (&cpu.ceiling_client_setup, &cpu.ceiling_client_steady) {
        out.push_str(&format!(
            "  {tool} client without its connections' set-up: {:.1} µs/{} (a `-t 1` run of the \
             same script spent {:.1} ms on {} transactions, subtracted)\n",
            steady.us_per_op, steady.unit, setup.cpu_ms, setup.ops
        ));
    }
    let mut ratios = Vec::new();
    if let Some(x) = cpu.shop_over_redis {
        ratios.push(format!("shop / Redis {x:.2}"));
    }
    if let Some(x) = cpu.shop_over_ceiling_client {
        ratios.push(format!("shop / {} client {x:.2}", tool));
    }
    if let Some(x) = cpu.shop_over_ceiling_client_steady {
        ratios.push(format!("shop / {tool} client without its set-up {x:.2}"));
    }
    if let Some(x) = cpu.database_over_ceiling {
        ratios.push(format!("{db} per order / per ceiling op {x:.2}"));
    }
    if !ratios.is_empty() {
        out.push_str(&format!("CPU ratios: {}\n", ratios.join("  ")));
    }
    out
}
