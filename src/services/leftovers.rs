//! What a killed harness leaves on shared servers, and its clean-up by a later run.
//!
//! A run's Redis key prefix is named `oversell-run-<host>-<pid>-<unix seconds>-<random>`
//! ([`run_prefix`]): the host (a hash of the host name), the process that owns it, and when it
//! was made. A run deletes its own keys when it ends; one killed with -9 cannot, so every
//! later run on the same Redis sweeps ([`sweep_redis`]) the prefixes whose owner was on this
//! host, is gone, and started more than [`SAFE_AGE`] ago. Prefixes of other hosts are never
//! touched (their pids mean nothing here). The test suite names its databases the same way
//! (`oversell_t_<host>_<pid>_<secs>_<random>`) and sweeps them alike.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How old a dead owner's leftovers must be before a later run removes them.
pub const SAFE_AGE: Duration = Duration::from_secs(300);

/// The start of every run's key prefix.
pub const RUN_PREFIX: &str = "oversell-run-";

/// Who owns a leftover and since when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// A hash of the owner's host name ([`host_tag`]).
    pub host: u32,
    pub pid: u32,
    /// Unix seconds at creation.
    pub since: u64,
}

impl Owner {
    /// This process, now.
    pub fn this() -> Owner {
        Owner {
            host: host_tag(),
            pid: std::process::id(),
            since: now_secs(),
        }
    }

    /// Its fields joined by `sep`: `<host hex>-<pid>-<secs>`.
    pub fn tag(&self, sep: char) -> String {
        format!("{:08x}{sep}{}{sep}{}", self.host, self.pid, self.since)
    }

    /// Parses [`Owner::tag`] at the start of `s` (the rest, after one more `sep`, ignored).
    pub fn parse(s: &str, sep: char) -> Option<Owner> {
        let mut parts = s.split(sep);
        let host = u32::from_str_radix(parts.next()?, 16).ok()?;
        let pid = parts.next()?.parse().ok()?;
        let since = parts.next()?.parse().ok()?;
        Some(Owner { host, pid, since })
    }

    /// Whether what it left may go: made on this host, by a process that is gone, longer
    /// than [`SAFE_AGE`] ago.
    pub fn is_stale(&self) -> bool {
        self.host == host_tag()
            && now_secs().saturating_sub(self.since) >= SAFE_AGE.as_secs()
            && !super::managed::process::alive(self.pid)
    }
}

/// A new name `<start><host><sep><pid><sep><secs><sep><random>` owned by this process.
pub fn owned_name(start: &str, sep: char) -> String {
    format!(
        "{start}{}{sep}{:016x}",
        Owner::this().tag(sep),
        rand::random::<u64>()
    )
}

/// The owner of a name made by [`owned_name`] with the same `start` and `sep`.
pub fn owner_of(name: &str, start: &str, sep: char) -> Option<Owner> {
    Owner::parse(name.strip_prefix(start)?, sep)
}

/// A new run's Redis key prefix (see the module's note).
pub fn run_prefix() -> String {
    owned_name(RUN_PREFIX, '-')
}

/// The owner of a run prefix, if it is one.
#[cfg(test)]
pub fn run_prefix_owner(prefix: &str) -> Option<Owner> {
    owner_of(prefix, RUN_PREFIX, '-')
}

/// A 32-bit FNV-1a hash of the host name (`unknown` when it cannot be read).
pub fn host_tag() -> u32 {
    let name = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown".into());
    name.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_prefix_names_its_owner_and_age() {
        let p = run_prefix();
        let o = run_prefix_owner(&p).unwrap();
        assert_eq!(o.pid, std::process::id());
        assert_eq!(o.host, host_tag());
        assert!(now_secs() - o.since < 5);
        // Ours, alive and young: kept.
        assert!(!o.is_stale());
        assert_eq!(run_prefix_owner("oversell"), None);
        assert_eq!(run_prefix_owner("oversell-run-0195a1b2c3d4"), None);
    }

    #[test]
    fn only_an_old_leftover_of_a_dead_process_on_this_host_is_stale() {
        let dead = 2_147_483_000;
        let old = now_secs() - SAFE_AGE.as_secs() - 1;
        let here = host_tag();
        let stale = |host, pid, since| Owner { host, pid, since }.is_stale();
        assert!(stale(here, dead, old));
        assert!(!stale(here, dead, now_secs()), "too young");
        assert!(!stale(here, std::process::id(), old), "alive");
        assert!(!stale(here.wrapping_add(1), dead, old), "another host's");
        let o = Owner {
            host: here,
            pid: 7,
            since: 99,
        };
        assert_eq!(Owner::parse(&o.tag('_'), '_'), Some(o));
    }
}
