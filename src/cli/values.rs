//! How flag values are read, one way for each kind across the commands: durations with a unit
//! (`10s`, `500ms`, `2m`; humantime), listen addresses (`127.0.0.1:8080`, `localhost:8080`,
//! `:9898`), and the help headings that group every command's `--help`.

use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// `--help` heading: what the run fires at (strategy, backend, shops).
pub const SHOP: &str = "Shop";
/// `--help` heading: the scenario and what changes it (repeat, defects).
pub const SCENARIO: &str = "Scenario";
/// `--help` heading: faults injected during the sale.
pub const FAULTS: &str = "Faults";
/// `--help` heading: where reports go and how the command talks back.
pub const OUTPUT: &str = "Output";
/// `--help` heading: database and Redis URLs.
pub const CONNECTIONS: &str = "Connections";
/// `--help` heading: `--shard` and the flags that go with it.
pub const SHARDING: &str = "Sharding";
/// `--help` heading: the gate's limits and CI files.
pub const THRESHOLDS: &str = "Thresholds";
/// `--help` heading: a foreign target and its oracle.
pub const TARGET: &str = "Target and oracle";
/// `--help` heading: who may call the shop's admin routes and whose client IP is believed.
pub const SECURITY: &str = "Security";
/// `--help` heading: the shop's tuning knobs (pools, timeouts, limits, the pipeline).
pub const KNOBS: &str = "Shop knobs";

/// A duration with its unit (`10s`, `500ms`, `1m 30s`; a bare number is refused with a hint):
/// [`crate::duration::parse`].
pub use crate::duration::parse as duration;

/// A listen address: `IP:PORT`, `HOST:PORT` (resolved; the first address wins, IPv4 first), or
/// `:PORT` for loopback (127.0.0.1). Port 0 picks a free one.
pub fn listen(v: &str) -> Result<SocketAddr, String> {
    let t = v.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let bad = || {
        format!(
            "{v:?} is not a listen address: give HOST:PORT (127.0.0.1:8080, localhost:8080, \
             0.0.0.0:8080 for every interface) or :PORT for loopback"
        )
    };
    if let Some(port) = t.strip_prefix(':') {
        let port: u16 = port.parse().map_err(|_| bad())?;
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    let (host, port) = t.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    let addrs: Vec<SocketAddr> = t
        .to_socket_addrs()
        .map_err(|e| format!("{v:?}: the host {host:?} does not resolve ({e})"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("{v:?}: the host {host:?} resolves to no address"))
}

/// The value of a duration flag given in its new spelling (`--drain-timeout 10s`) or its old,
/// hidden one in whole seconds (`--drain-timeout-s 10`), the old one winning when given.
pub fn seconds_or(new: Duration, old_seconds: Option<u64>) -> Duration {
    old_seconds.map_or(new, Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_take_host_names_and_a_bare_port() {
        assert_eq!(
            listen("127.0.0.1:8080"),
            Ok("127.0.0.1:8080".parse().unwrap())
        );
        assert_eq!(listen(":9898"), Ok("127.0.0.1:9898".parse().unwrap()));
        let local = listen("localhost:8080").unwrap();
        assert!(local.ip().is_loopback() && local.port() == 8080, "{local}");
        assert_eq!(listen("[::1]:0"), Ok("[::1]:0".parse().unwrap()));
        for bad in ["8080", "localhost", ":", ":http", "host:99999", ""] {
            let e = listen(bad).unwrap_err();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
    }
}
