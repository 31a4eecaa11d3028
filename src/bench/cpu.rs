//! CPU per operation, process by process: what the shop, Redis, the database server and the
//! client each spent on one order (or one ceiling operation), from the kernel's own counters.
//!
//! - A process ([`Meter::Process`]): `utime + stime` of `/proc/<pid>/stat`, every thread.
//! - The PostgreSQL server ([`Meter::Tree`]): the postmaster's own time **plus its
//!   `cutime + cstime`** (the children it reaped: every backend that exited during the phase)
//!   **plus every live child's** `utime + stime`. A backend that exits moves its time from
//!   the live sum into the postmaster's reaped sum, so nothing is lost or counted twice, and
//!   the WAL writer, checkpointer and background writer are included. This is the whole
//!   server: on a shared server other sessions' work is in it too; [`Backends`] measures the
//!   bench database's own backends apart (sampled, see there).
//! - MariaDB/MySQL: the `mariadbd` process (threads, not processes: one `/proc/<pid>/stat`).
//! - Redis ([`Meter::Redis`]): `INFO cpu` (`used_cpu_user + used_cpu_sys` and the children's),
//!   µs precision, the whole server.
//! - A client tool this process ran (wrk, pgbench, redis-benchmark, mysqlslap):
//!   `getrusage(RUSAGE_CHILDREN)` before and after it ([`Meter::Children`]): the only child
//!   reaped in between is the tool itself.
//!
//! `/proc` counts in clock ticks of 10 ms (`USER_HZ` = 100 on every Linux ABI), so a phase of a
//! few seconds gives a figure to the percent.

use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `USER_HZ`: the unit of `/proc/<pid>/stat`'s times on every Linux ABI.
const TICKS_PER_S: f64 = 100.0;

/// The times of `/proc/<pid>/stat`, in seconds: (ppid, utime + stime, cutime + cstime).
pub fn proc_stat(pid: u32) -> Option<(u32, f64, f64)> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// (ppid, utime + stime, cutime + cstime) of one `stat` line, in seconds.
fn parse_stat(text: &str) -> Option<(u32, f64, f64)> {
    // The command name is in parentheses and may hold spaces: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
    let n = |i: usize| f.get(i)?.parse::<f64>().ok();
    let ppid = f.get(1)?.parse().ok()?;
    Some((
        ppid,
        (n(11)? + n(12)?) / TICKS_PER_S,
        (n(13)? + n(14)?) / TICKS_PER_S,
    ))
}

/// User + system CPU seconds of this process's reaped children (`RUSAGE_CHILDREN`).
pub fn children_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or(0.0, |u| tv(u.user_time()) + tv(u.system_time()))
}

/// Every process whose parent is `root`.
fn children_of(root: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| proc_stat(pid).is_some_and(|(ppid, _, _)| ppid == root))
        .collect()
}

/// One CPU counter to read before and after a phase.
#[derive(Debug, Clone)]
pub enum Meter {
    /// One process, every thread (`/proc/<pid>/stat` utime + stime).
    Process(u32),
    /// A server that forks a process per connection (the PostgreSQL postmaster): its own
    /// time, its reaped children's and its live children's.
    Tree(u32),
    /// A Redis server, through `INFO cpu`.
    Redis(String),
    /// The children this process reaped (a client tool run to completion in between).
    Children,
}

impl Meter {
    /// CPU seconds so far (`None`: the process or server cannot be read).
    pub async fn read(&self) -> Option<f64> {
        match self {
            Meter::Process(pid) => proc_stat(*pid).map(|(_, own, _)| own),
            Meter::Tree(root) => {
                let (_, own, reaped) = proc_stat(*root)?;
                let live: f64 = children_of(*root)
                    .into_iter()
                    .filter_map(|c| proc_stat(c).map(|(_, t, _)| t))
                    .sum();
                Some(own + reaped + live)
            }
            Meter::Redis(url) => redis_cpu(url).await,
            Meter::Children => Some(children_seconds()),
        }
    }

    /// How this meter reads its figure (the `source` of a [`CpuUse`]).
    pub fn describe(&self, what: &str) -> String {
        match self {
            Meter::Process(pid) => format!("{what}: /proc/{pid}/stat utime+stime"),
            Meter::Tree(pid) => format!(
                "{what}: /proc/{pid}/stat utime+stime+cutime+cstime (the postmaster and the \
                 backends it reaped) + utime+stime of its live children"
            ),
            Meter::Redis(_) => {
                format!("{what}: INFO cpu used_cpu_user+used_cpu_sys (+ _children)")
            }
            Meter::Children => format!("{what}: getrusage(RUSAGE_CHILDREN) before and after it"),
        }
    }
}

/// `INFO cpu` of the Redis at `url`: user + system seconds, children included.
async fn redis_cpu(url: &str) -> Option<f64> {
    let client = redis::Client::open(url).ok()?;
    let mut conn = tokio::time::timeout(
        Duration::from_secs(5),
        client.get_multiplexed_async_connection(),
    )
    .await
    .ok()?
    .ok()?;
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query_async(&mut conn)
        .await
        .ok()?;
    parse_redis_cpu(&info)
}

/// The sum of `used_cpu_{user,sys}{,_children}` in an `INFO cpu` answer.
pub fn parse_redis_cpu(info: &str) -> Option<f64> {
    let mut sum = None;
    for line in info.lines() {
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        if matches!(
            k,
            "used_cpu_user" | "used_cpu_sys" | "used_cpu_user_children" | "used_cpu_sys_children"
        ) {
            *sum.get_or_insert(0.0) += v.parse::<f64>().ok()?;
        }
    }
    sum
}

/// What one process (or server) spent over a phase, and per operation.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CpuUse {
    /// CPU milliseconds (user + system) over the phase.
    pub cpu_ms: f64,
    /// Operations it is divided by.
    pub ops: u64,
    /// What one operation is (`order`, `persisted order`, `request`, `transaction`, `call`).
    pub unit: String,
    /// `cpu_ms * 1000 / ops`: µs of CPU per operation.
    pub us_per_op: f64,
    /// How the figure was read.
    pub source: String,
}

impl CpuUse {
    /// `seconds` of CPU over `ops` operations of `unit`.
    pub fn of(seconds: f64, ops: u64, unit: &str, source: String) -> CpuUse {
        let us = if ops > 0 {
            (seconds * 1e6 / ops as f64 * 10.0).round() / 10.0
        } else {
            0.0
        };
        CpuUse {
            cpu_ms: (seconds * 1e4).round() / 10.0,
            ops,
            unit: unit.to_string(),
            us_per_op: us,
            source,
        }
    }
}

/// A meter's reading at the start of a phase.
pub struct Started {
    meter: Meter,
    what: String,
    at: Option<f64>,
}

impl Started {
    /// Reads `meter` now, for `what` (named in the source).
    pub async fn now(meter: Meter, what: &str) -> Started {
        let at = meter.read().await;
        Started {
            meter,
            what: what.to_string(),
            at,
        }
    }

    /// The CPU since the start over `ops` operations of `unit` (`None`: unreadable).
    pub async fn done(&self, ops: u64, unit: &str) -> Option<CpuUse> {
        let end = self.meter.read().await?;
        let seconds = (end - self.at?).max(0.0);
        Some(CpuUse::of(
            seconds,
            ops,
            unit,
            self.meter.describe(&self.what),
        ))
    }
}

/// The backends of one database but the one asking (the sampling connection itself).
const BACKENDS: &str =
    "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()";

/// The CPU of one database's PostgreSQL backends (`pg_stat_activity.datname`), sampled every
/// 100 ms from `/proc/<pid>/stat` while they live (not the sampling connection itself): a
/// backend's last sample before it exits is its figure, so each backend that exits during the
/// phase loses at most its last 100 ms (and its fork and exit are not counted: a lower bound).
/// No WAL writer, checkpointer or other database: the bench's own share of a shared server.
pub struct Backends {
    seen: Arc<Mutex<HashMap<u32, (f64, f64)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Backends {
    /// Starts sampling the backends of `database` through `pool` (a connection of its own).
    pub fn watch(pool: sqlx::PgPool, database: String) -> Backends {
        let seen: Arc<Mutex<HashMap<u32, (f64, f64)>>> = Arc::default();
        let s = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let pids: Vec<i32> = sqlx::query_scalar(BACKENDS)
                    .bind(&database)
                    .fetch_all(&pool)
                    .await
                    .unwrap_or_default();
                {
                    let mut seen = s.lock().unwrap_or_else(|e| e.into_inner());
                    for pid in pids.into_iter().filter_map(|p| u32::try_from(p).ok()) {
                        if let Some((_, t, _)) = proc_stat(pid) {
                            // (first sample, latest sample)
                            seen.entry(pid).or_insert((t, t)).1 = t;
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Backends { seen, task }
    }

    /// The backends' CPU since the watch started: a backend already there at the first sample
    /// from that sample on, a later one all of it.
    pub fn stop(self, ops: u64, unit: &str, first: &HashMap<u32, f64>) -> CpuUse {
        self.task.abort();
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let seconds: f64 = seen
            .iter()
            .map(|(pid, (_, last))| last - first.get(pid).copied().unwrap_or(0.0))
            .map(|s| s.max(0.0))
            .sum();
        CpuUse::of(
            seconds,
            ops,
            unit,
            format!(
                "the bench database's backends ({} seen): /proc/<pid>/stat utime+stime, \
                 sampled every 100 ms (pg_stat_activity.datname)",
                seen.len()
            ),
        )
    }
}

/// The CPU so far of each backend of `database` now (the base of a [`Backends`] watch).
pub async fn backends_now(pool: &sqlx::PgPool, database: &str) -> HashMap<u32, f64> {
    let pids: Vec<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(database)
    .fetch_all(pool)
    .await
    .unwrap_or_default();
    pids.into_iter()
        .filter_map(|p| u32::try_from(p).ok())
        .filter_map(|pid| proc_stat(pid).map(|(_, t, _)| (pid, t)))
        .collect()
}

/// This process's peak resident set since the last [`reset_peak_rss`], MiB (`VmHWM`).
pub fn peak_rss_mib() -> f64 {
    status_mib("VmHWM:")
}

/// This process's resident set now, MiB (`VmRSS`).
pub fn rss_mib() -> f64 {
    status_mib("VmRSS:")
}

fn status_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| (kb / 1024.0 * 10.0).round() / 10.0)
}

/// Resets this process's peak resident set to its current one (`/proc/self/clear_refs` 5),
/// so the next phase's peak is its own.
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// CPU seconds of one thread of this process (`/proc/self/task/<tid>/stat`).
pub fn thread_seconds(tid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    parse_stat(&text).map(|(_, own, _)| own)
}

/// The calling thread's id (`/proc/thread-self` → `<pid>/task/<tid>`).
pub fn current_tid() -> Option<u32> {
    std::fs::read_link("/proc/thread-self")
        .ok()?
        .file_name()?
        .to_str()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_stat_is_read() {
        let (ppid, own, _) = proc_stat(std::process::id()).unwrap();
        assert!(ppid > 0);
        assert!(own >= 0.0);
        let tid = current_tid().unwrap();
        assert!(thread_seconds(tid).is_some());
    }

    #[test]
    fn redis_info_cpu_is_summed() {
        let info = "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\n\
                    used_cpu_sys_children:0.25\r\nused_cpu_user_children:0.000000\r\n\
                    used_cpu_sys_main_thread:1.0\r\n";
        assert_eq!(parse_redis_cpu(info), Some(4.0));
        assert_eq!(parse_redis_cpu("# CPU\r\n"), None);
    }

    #[test]
    fn cpu_per_operation_is_rounded_and_safe() {
        let c = CpuUse::of(0.5, 1000, "order", "x".into());
        assert_eq!(c.cpu_ms, 500.0);
        assert_eq!(c.us_per_op, 500.0);
        assert_eq!(CpuUse::of(1.0, 0, "order", "x".into()).us_per_op, 0.0);
    }
}
