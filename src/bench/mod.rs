//! `oversell bench`: our paths measured next to their raw ceiling, in the same run, so the
//! ratio holds on a busy machine even when the absolute figures move.
//!
//! - [`redis`]: `bench redis`, our redis-lua pre-deduct path in-process vs `redis-benchmark`
//!   EVALSHA of the same script (also the redis-lua ceiling of `bench shop`).
//! - [`shop`]: `bench shop`, the release reference shop as a child process, `POST /api/orders`
//!   end to end over HTTP (`wrk` at saturation, [`rate`] at a fixed rate), next to the
//!   strategy's ceiling ([`ceiling`]: redis-benchmark, pgbench or mysqlslap on the same work;
//!   [`ceiling_phase`]: which ceilings run, each with its own CPU meters; [`shop_plan`]:
//!   what the command line asked to measure).
//! - [`wrk`]: the `wrk` run (its Lua script gives every request its own buyer and key) and
//!   the parsing of its output.
//! - [`rate`]: a fixed-rate HTTP client over [`http1`] (a bare keep-alive HTTP/1.1
//!   connection: wrk's per-request cost rather than reqwest's), latency from each request's
//!   intended send time in an HdrHistogram (no coordinated omission).
//!
//! - [`generator`]: `bench generator`, our traffic generator with a real plan vs goose's bare
//!   request loop vs wrk on one trivial endpoint: CPU per request, send lag, peak RSS.
//! - [`cpu`] and [`servers`]: CPU per operation, process by process (the shop, Redis, the
//!   database server, the client), read from the kernel's counters before and after a phase.
//!
//! Ratios are measurements: tests check that they are produced, never how fast anything is.

pub mod ceiling;
pub mod ceiling_phase;
pub mod cpu;
pub mod generator;
pub mod http1;
pub mod rate;
pub mod redis;
pub mod saturation;
pub mod servers;
pub mod shop;
pub mod shop_plan;
pub mod wrk;

pub use redis::RedisBench;
pub use shop_plan::ShopBench;

use anyhow::bail;
use std::path::PathBuf;

/// Host and port of a `redis://[user:pass@]host:port[/db]` URL.
pub fn host_port(url: &str) -> Option<(String, u16)> {
    let rest = url.strip_prefix("redis://")?;
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let hostport = rest.split('/').next()?;
    match hostport.rsplit_once(':') {
        Some((h, p)) => Some((h.trim_matches(['[', ']']).to_string(), p.parse().ok()?)),
        None => Some((hostport.to_string(), 6379)),
    }
}

/// `cmd` on `PATH`, if any.
pub fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| std::path::Path::new(d).join(cmd))
        .find(|p| p.is_file())
}

/// Fails with the Debian package to install when `cmd` is not on `PATH`.
pub fn require_tool(cmd: &str, package: &str) -> anyhow::Result<PathBuf> {
    match which(cmd) {
        Some(p) => Ok(p),
        None => bail!(
            "{cmd} is not installed (not on PATH): install the Debian package {package} \
             (apt-get install {package})"
        ),
    }
}

/// `a / b` to three decimals (0 when `b` is 0).
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (a / b * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_come_from_the_url() {
        assert_eq!(
            host_port("redis://127.0.0.1:6380/0"),
            Some(("127.0.0.1".into(), 6380))
        );
        assert_eq!(
            host_port("redis://:pw@localhost"),
            Some(("localhost".into(), 6379))
        );
        assert_eq!(host_port("http://x"), None);
    }

    #[test]
    fn a_missing_tool_names_its_package() {
        let e = require_tool("surely-not-a-tool-oversell", "some-pkg").unwrap_err();
        assert!(e.to_string().contains("apt-get install some-pkg"), "{e}");
    }

    #[test]
    fn ratio_is_rounded_and_safe() {
        assert_eq!(ratio(1.0, 3.0), 0.333);
        assert_eq!(ratio(1.0, 0.0), 0.0);
    }
}
