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
/// `--help` heading: the flags most runs of a long command use, shown first; `-h` shows only
/// these ([`common_first`]).
pub const COMMON: &str = "Common";

/// `cmd` with the common flags (by argument id) of each long subcommand of `long` first,
/// under [`COMMON`], and the others only in `--help` (under their own headings, which a reader
/// can skip); `-h` says so.
pub fn common_first(cmd: clap::Command, long: &[(&str, &[&str])]) -> clap::Command {
    cmd.mut_subcommands(|sub| {
        let Some((name, common)) = long.iter().find(|(n, _)| *n == sub.get_name()) else {
            return sub;
        };
        let sub = sub.after_help(format!(
            "These are the common flags; `oversell {name} --help` shows every one, grouped."
        ));
        sub.mut_args(|a| {
            let id = a.get_id().as_str();
            if let Some(at) = common.iter().position(|c| *c == id) {
                a.help_heading(COMMON).display_order(at)
            } else if id == "help" || a.is_global_set() {
                a
            } else {
                a.hide_short_help(true)
            }
        })
    })
}

/// A duration with its unit (`10s`, `500ms`, `1m 30s`; a bare number is refused with a hint):
/// [`crate::duration::parse`].
pub use crate::duration::parse as duration;

/// A file a flag reads or writes: refused when it names a folder (`--junit reports/`), so the
/// command stops before it starts anything, naming the flag.
pub fn file(v: &str) -> Result<std::path::PathBuf, String> {
    let p = std::path::PathBuf::from(v);
    if v.trim().is_empty() {
        return Err("needs a file name (got nothing)".into());
    }
    if p.is_dir() {
        return Err(format!(
            "{v:?} is a folder: give a file (e.g. {})",
            p.join("name").display()
        ));
    }
    Ok(p)
}

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

/// `cmd` with every option that takes exactly one value (and has no fixed list of values)
/// also taking a value that starts with `-`, in every subcommand: `--repeat -3` and
/// `--drain-timeout -1s` then reach the flag's own check and are refused with a sentence
/// ("must be at least 1") instead of clap's "unexpected argument '-3' found".
pub fn dash_values(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let one = a
            .get_num_args()
            .is_none_or(|n| n.min_values() == 1 && n.max_values() == 1);
        let free = a.get_possible_values().is_empty();
        if a.get_action().takes_values() && !a.is_positional() && one && free {
            a.allow_hyphen_values(true)
        } else {
            a
        }
    })
    .mut_subcommands(dash_values)
}

/// A whole number from `lo` to `hi`, refused with a sentence otherwise: "must be at least 1
/// (got -3)", "must be at most 100", "is not a whole number".
pub fn whole<T>(
    lo: i128,
    hi: i128,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<i128> + Clone + Send + Sync + 'static,
{
    move |v: &str| {
        let n: i128 = v
            .trim()
            .parse()
            .map_err(|_| format!("{v:?} is not a whole number: give one from {lo} to {hi}"))?;
        if n < lo {
            return Err(format!("must be at least {lo} (got {n})"));
        }
        if n > hi {
            return Err(format!("must be at most {hi} (got {n})"));
        }
        T::try_from(n).map_err(|_| format!("must be at most {hi} (got {n})"))
    }
}

/// `--repeat N`: 1 to 100 runs of each strategy.
pub fn repeat(v: &str) -> Result<u32, String> {
    whole(1, 100)(v)
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
    fn whole_numbers_are_refused_with_a_sentence() {
        assert_eq!(repeat("3"), Ok(3));
        assert_eq!(repeat("-3").unwrap_err(), "must be at least 1 (got -3)");
        assert_eq!(repeat("0").unwrap_err(), "must be at least 1 (got 0)");
        assert_eq!(repeat("101").unwrap_err(), "must be at most 100 (got 101)");
        assert!(repeat("2.5").unwrap_err().contains("not a whole number"));
    }

    #[test]
    fn a_folder_given_as_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let e = file(dir.path().to_str().unwrap()).unwrap_err();
        assert!(e.contains("is a folder: give a file"), "{e}");
        assert!(file("").is_err());
        assert_eq!(file("a/b.xml"), Ok("a/b.xml".into()));
    }

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
