//! The loopback guard: every address the harness sends to (the target, the oracle's endpoint or
//! database, a `[watch]` source, a shard's shop) is 127.0.0.0/8, ::1, `localhost` or a Unix
//! socket on this machine, unless the user passes `--allow-remote`. The address judged is the
//! one the driver will use ([`endpoint`]: after `?host=`, `?hostaddr=`, `?port=`, a socket
//! path), never the URL's host alone. A name is checked by what it resolves to, when the
//! command line is read and again right before a connection (DNS may change in between).

use reqwest::Url;
use std::net::{IpAddr, SocketAddr};

/// A URL the harness may not send to.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{what} {url:?} is not a usable URL: {why}")]
    BadUrl {
        /// The flag or field that named it (`--target`, the oracle endpoint).
        what: &'static str,
        url: String,
        why: String,
    },
    #[error(
        "refusing to send {sending} to {host}: it is not a loopback address (127.0.0.0/8, ::1, localhost). \
         Load goes to other machines only when you say so: pass {allow} if {host} is your own \
         staging system"
    )]
    Remote {
        /// What would be sent: `load`, `oracle requests`.
        sending: &'static str,
        /// The flag that allows it.
        allow: &'static str,
        host: String,
    },
}

/// What is sent to a URL the guard checks, for its messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// The target shop (`--target`).
    Target,
    /// The oracle endpoint (`--oracle-http`, `[target.oracle]`).
    Oracle,
    /// The reference shop a shard fires at (`--shop-url`).
    Shop,
    /// A `[watch]` gauge's source (a database, Redis, an endpoint).
    Watch,
    /// The oracle's database (`--oracle-sql`).
    Database,
}

impl Use {
    fn flag(self) -> &'static str {
        match self {
            Use::Target => "--target",
            Use::Oracle => "the oracle endpoint",
            Use::Shop => "--shop-url",
            Use::Watch => "a [watch] source",
            Use::Database => "--oracle-sql",
        }
    }

    fn sending(self) -> &'static str {
        match self {
            Use::Target => "load",
            Use::Oracle => "oracle requests",
            Use::Shop => "a shard's load",
            Use::Watch => "gauge reads",
            Use::Database => "oracle queries",
        }
    }

    fn allow(self) -> &'static str {
        match self {
            Use::Shop => "--allow-remote-shop",
            Use::Target | Use::Oracle | Use::Watch | Use::Database => "--allow-remote",
        }
    }
}

/// Whether a URL host is loopback: 127.0.0.0/8, ::1 (or v4-mapped 127.x), or `localhost`.
pub fn is_loopback_host(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => {
            let d = bare.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    }
}

/// Checks a target URL before anything is sent; returns its `host[:port]`.
pub fn check_target(url: &str, allow_remote: bool) -> Result<String, TargetError> {
    check_url(Use::Target, url, allow_remote)
}

/// Checks a URL the harness will send to before anything is sent; returns its `host[:port]`.
pub fn check_url(what: Use, url: &str, allow_remote: bool) -> Result<String, TargetError> {
    if !url.contains("://") {
        // The did-you-mean of `check_host`, before the parser's "relative URL without a base".
        return check_host(what, url, allow_remote);
    }
    let parsed = Url::parse(url).map_err(|e| bad_url(what, url, &e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad_url(what, url, "the scheme must be http or https"));
    }
    check_host(what, url, allow_remote)
}

/// A URL the guard cannot use; the message shows it with its credentials masked.
fn bad_url(what: Use, url: &str, why: &str) -> TargetError {
    TargetError::BadUrl {
        what: what.flag(),
        url: crate::secret::url(url),
        why: why.to_string(),
    }
}

/// Where a URL's driver will connect: a host and port, or a Unix socket on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp { host: String, port: u16 },
    Unix(std::path::PathBuf),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            Endpoint::Tcp { host, port } => write!(f, "{host}:{port}"),
            Endpoint::Unix(path) => write!(f, "the Unix socket {}", path.display()),
        }
    }
}

/// The address `url`'s driver will actually use: its host and port after the driver's own
/// parameters (PostgreSQL's `?host=`, `?hostaddr=`, `?port=`, a socket directory, the `PG*`
/// environment; MySQL's `?socket=`; a `redis+unix://` URL), read by the driver's own parser.
pub fn endpoint(url: &str) -> Result<Endpoint, String> {
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    let tcp = |host: &str, port: u16| Endpoint::Tcp {
        host: host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        port,
    };
    match scheme.as_deref() {
        Some("http" | "https") => {
            let u = Url::parse(url).map_err(|e| e.to_string())?;
            let host = u
                .host_str()
                .filter(|h| !h.is_empty())
                .ok_or("it has no host")?;
            Ok(tcp(host, u.port_or_known_default().unwrap_or(80)))
        }
        Some("postgres" | "postgresql") => {
            let o: sqlx::postgres::PgConnectOptions = url.parse().map_err(|e| driver(&e))?;
            Ok(match o.get_socket() {
                Some(dir) => Endpoint::Unix(dir.join(format!(".s.PGSQL.{}", o.get_port()))),
                None if o.get_host().starts_with('/') => Endpoint::Unix(
                    std::path::Path::new(o.get_host()).join(format!(".s.PGSQL.{}", o.get_port())),
                ),
                None => tcp(o.get_host(), o.get_port()),
            })
        }
        Some("mysql" | "mariadb") => {
            let o: sqlx::mysql::MySqlConnectOptions = url.parse().map_err(|e| driver(&e))?;
            Ok(match o.get_socket() {
                Some(path) => Endpoint::Unix(path.clone()),
                None => tcp(o.get_host(), o.get_port()),
            })
        }
        Some("redis" | "rediss" | "redis+unix" | "unix" | "valkey" | "valkeys" | "valkey+unix") => {
            let c = redis::Client::open(url).map_err(|e| e.to_string())?;
            Ok(match c.get_connection_info().addr() {
                redis::ConnectionAddr::Tcp(host, port)
                | redis::ConnectionAddr::TcpTls { host, port, .. } => tcp(host, *port),
                redis::ConnectionAddr::Unix(path) => Endpoint::Unix(path.clone()),
                other => {
                    return Err(format!(
                        "an address of a kind oversell does not know ({other})"
                    ))
                }
            })
        }
        _ => Err("its scheme must be http(s), postgres, mysql or redis".into()),
    }
}

/// A driver's parse error, with no part of the URL in it.
fn driver(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Configuration(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

/// Checks a URL of any scheme (a database's, Redis's, an endpoint's) the way [`check_url`]
/// checks a target's: the address its driver will use ([`endpoint`]) must be loopback, a Unix
/// socket on this machine, or `allow_remote`; returns that address as `host:port` (an HTTP
/// URL's as written: `host[:port]`).
pub fn check_host(what: Use, url: &str, allow_remote: bool) -> Result<String, TargetError> {
    let bad = |why: &str| bad_url(what, url, why);
    if !url.contains("://") {
        return Err(bad(&format!(
            "it has no scheme: did you mean http://{}?",
            url.trim_start_matches('/')
        )));
    }
    let end = endpoint(url).map_err(|why| bad(&why))?;
    let shown = match (&end, Url::parse(url)) {
        (Endpoint::Tcp { .. }, Ok(u)) if matches!(u.scheme(), "http" | "https") => {
            let host = u.host_str().unwrap_or_default();
            match u.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            }
        }
        _ => end.to_string(),
    };
    match &end {
        Endpoint::Unix(_) => Ok(shown),
        Endpoint::Tcp { host, port } => {
            if !allow_remote && !loopback_name(host, *port) {
                return Err(TargetError::Remote {
                    sending: what.sending(),
                    allow: what.allow(),
                    host: shown,
                });
            }
            Ok(shown)
        }
    }
}

/// Whether `host` is loopback: an address in 127.0.0.0/8 or ::1, or a name (`localhost`) every
/// address of which is one (a name is only as loopback as what it resolves to here).
fn loopback_name(host: &str, port: u16) -> bool {
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => {
            let d = host.trim_end_matches('.').to_ascii_lowercase();
            if d != "localhost" && !d.ends_with(".localhost") {
                return false;
            }
            use std::net::ToSocketAddrs;
            match (host, port).to_socket_addrs() {
                Ok(addrs) => addrs.into_iter().all(|a| a.ip().is_loopback()),
                Err(_) => true,
            }
        }
    }
}

/// Checks `url` again right before a connection is opened (a name may resolve elsewhere by
/// now); `Err` names the host, never the URL's credentials.
pub async fn check_again(what: Use, url: &str, allow_remote: bool) -> Result<(), TargetError> {
    let host = check_host(what, url, allow_remote)?;
    if allow_remote {
        return Ok(());
    }
    if let Ok(Endpoint::Tcp { host: name, port }) = endpoint(url) {
        if name.parse::<IpAddr>().is_err() {
            let found = tokio::net::lookup_host((name.as_str(), port)).await;
            if found.is_ok_and(|mut a| a.any(|a| !a.ip().is_loopback())) {
                return Err(TargetError::Remote {
                    sending: what.sending(),
                    allow: what.allow(),
                    host,
                });
            }
        }
    }
    Ok(())
}

/// Resolves a checked URL right before the first request; refuses it unless every address it
/// resolves to is loopback (or the user allowed remote targets).
pub async fn resolve_again(
    what: Use,
    url: &str,
    allow_remote: bool,
) -> Result<Vec<SocketAddr>, TargetError> {
    let host = check_url(what, url, allow_remote)?;
    let bad = |why: String| bad_url(what, url, &why);
    let parsed = Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let name = parsed.host_str().unwrap_or_default();
    let name = name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), port))
        .await
        .map_err(|e| bad(format!("its host does not resolve: {e}")))?
        .collect();
    if !allow_remote && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(TargetError::Remote {
            sending: what.sending(),
            allow: what.allow(),
            host,
        });
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_targets_pass_without_allow_remote() {
        for ok in [
            "http://127.0.0.1:8080",
            "http://127.9.9.9/",
            "http://[::1]:80",
            "http://localhost:3000/api",
            "http://LOCALHOST",
        ] {
            assert!(check_target(ok, false).is_ok(), "{ok}");
        }
        for remote in [
            "http://10.0.0.1",
            "http://example.com",
            "http://128.0.0.1",
            "http://[::2]",
            "http://localhost.example.com",
        ] {
            let e = check_target(remote, false).unwrap_err();
            assert!(
                matches!(e, TargetError::Remote { .. }) && e.to_string().contains("--allow-remote"),
                "{remote}: {e}"
            );
            assert!(check_target(remote, true).is_ok(), "{remote}");
        }
        assert!(matches!(
            check_target("ftp://127.0.0.1", false),
            Err(TargetError::BadUrl { .. })
        ));
        assert_eq!(
            check_target("http://127.0.0.1:9/x", false).unwrap(),
            "127.0.0.1:9"
        );
    }
}
