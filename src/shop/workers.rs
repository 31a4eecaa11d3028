//! How many worker threads the shop's tokio runtime gets (`--worker-threads`, a `[shop]`
//! table's `worker_threads`).
//!
//! Asked for N (> 0): N. Asked for 0, the default: one per core this process may run on
//! (`available_parallelism`: its CPU affinity and cgroup quota), **less one when a server the
//! shop uses is on this machine** (its database, and Redis for the strategies that use it, at
//! a loopback or Unix-socket address, or servers oversell starts itself), at least one. With
//! `TOKIO_WORKER_THREADS` set and 0 asked, tokio reads that variable as it always did.
//!
//! Why the core is left: a shop next to its servers shares the cores with them, and each
//! answer from the database or Redis that reaches a parked runtime wakes a worker, often two
//! (the one whose reactor saw it, and one more woken to steal the task): thread switches the
//! servers then wait behind. On this project's 2-core machine a second worker served no more
//! orders per second and cost a tenth to a fifth more CPU per order (docs/lab/lab-log.md, "One
//! worker less next to the servers"). A shop on a machine of its own, its
//! servers elsewhere, keeps one worker per core.

use crate::inventory::Strategy;
use crate::services::ServicesMode;

/// The workers a shop asked for `asked` gets on a machine of `cores` cores, its servers on
/// that machine (`servers_here`) or not.
pub fn choose(asked: u32, cores: usize, servers_here: bool) -> usize {
    match asked {
        0 if servers_here => cores.saturating_sub(1).max(1),
        0 => cores.max(1),
        n => n as usize,
    }
}

/// The cores this process may run on (1 when the OS does not say).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether a server a `strategy` shop uses is on this machine: its database (`database_url`),
/// or its Redis (`redis_url`) when the strategy uses Redis, at a loopback host (127.0.0.0/8,
/// ::1, `localhost`), with no host (a Unix socket, or the driver's local default), or with a
/// `host=` / `socket=` parameter that is a path; or `mode` starts servers of its own
/// ([`ServicesMode::Managed`]). An address that does not parse counts as elsewhere.
pub fn servers_here(
    strategy: Strategy,
    database_url: Option<&str>,
    redis_url: &str,
    mode: ServicesMode,
) -> bool {
    mode == ServicesMode::Managed
        || database_url.is_some_and(on_this_machine)
        || (strategy.uses_redis() && on_this_machine(redis_url))
}

fn on_this_machine(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    let socket_param = parsed
        .query_pairs()
        .any(|(k, v)| (k == "host" || k == "socket") && v.starts_with('/'));
    socket_param
        || parsed
            .host_str()
            .is_none_or(|h| h.is_empty() || super::host::is_loopback(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_is_left_to_servers_on_this_machine_and_an_asked_count_is_kept() {
        assert_eq!(choose(0, 2, true), 1);
        assert_eq!(choose(0, 8, true), 7);
        assert_eq!(choose(0, 1, true), 1, "never below one");
        assert_eq!(choose(0, 2, false), 2);
        assert_eq!(choose(0, 0, false), 1);
        assert_eq!(choose(3, 2, true), 3, "an asked count is what it says");
        assert_eq!(choose(1, 8, false), 1);
    }

    #[test]
    fn servers_on_this_machine_are_told_from_servers_elsewhere() {
        for here in [
            "postgres://postgres:pw@127.0.0.1:5432/shop",
            "postgres://localhost/shop",
            "mysql://root@[::1]:3306/shop",
            "redis://127.0.0.2:6379",
            "postgres:///shop?host=/var/run/postgresql",
            "mysql://root@db.internal/shop?socket=/run/mysqld/mysqld.sock",
        ] {
            assert!(on_this_machine(here), "{here}");
        }
        for elsewhere in [
            "postgres://postgres:pw@10.0.0.5:5432/shop",
            "redis://cache.example.com:6379",
            "not a url",
        ] {
            assert!(!on_this_machine(elsewhere), "{elsewhere}");
        }
        let (remote, local_redis) = (Some("postgres://10.0.0.5/shop"), "redis://127.0.0.1:6379");
        let external = ServicesMode::External;
        assert!(servers_here(
            Strategy::RedisLua,
            remote,
            local_redis,
            external
        ));
        assert!(servers_here(
            Strategy::Naive,
            remote,
            "redis://10.0.0.6",
            ServicesMode::Managed
        ));
        assert!(!servers_here(
            Strategy::Naive,
            remote,
            "redis://10.0.0.6",
            ServicesMode::Auto
        ));
    }
}
