//! The loopback guard: load goes to 127.0.0.0/8, ::1 or `localhost` only, unless the user
//! passes `--allow-remote`. A name is checked by what it resolves to, when the command line is
//! read and again right before the first request (DNS may change in between).

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
}

impl Use {
    fn flag(self) -> &'static str {
        match self {
            Use::Target => "--target",
            Use::Oracle => "the oracle endpoint",
            Use::Shop => "--shop-url",
            Use::Watch => "a [watch] source",
        }
    }

    fn sending(self) -> &'static str {
        match self {
            Use::Target => "load",
            Use::Oracle => "oracle requests",
            Use::Shop => "a shard's load",
            Use::Watch => "gauge reads",
        }
    }

    fn allow(self) -> &'static str {
        match self {
            Use::Shop => "--allow-remote-shop",
            Use::Target | Use::Oracle | Use::Watch => "--allow-remote",
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

/// Checks the host of a URL of any scheme (a database's, Redis's, an endpoint's) the way
/// [`check_url`] checks a target's: loopback, or `allow_remote`; returns its `host[:port]`.
pub fn check_host(what: Use, url: &str, allow_remote: bool) -> Result<String, TargetError> {
    let bad = |why: &str| bad_url(what, url, why);
    let remote = |host: String| TargetError::Remote {
        sending: what.sending(),
        allow: what.allow(),
        host,
    };
    if !url.contains("://") {
        return Err(bad(&format!(
            "it has no scheme: did you mean http://{}?",
            url.trim_start_matches('/')
        )));
    }
    let parsed = Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| bad("it has no host"))?;
    let host_port = match parsed.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    if !allow_remote && !is_loopback_host(&parsed) {
        return Err(remote(host_port));
    }
    // A name like `localhost` is only as loopback as what it resolves to here.
    if !allow_remote && host.parse::<IpAddr>().is_err() && !host.starts_with('[') {
        use std::net::ToSocketAddrs;
        let port = parsed.port_or_known_default().unwrap_or(80);
        if let Ok(addrs) = (host, port).to_socket_addrs() {
            if addrs.into_iter().any(|a| !a.ip().is_loopback()) {
                return Err(remote(host_port));
            }
        }
    }
    Ok(host_port)
}

/// Resolves a checked URL right before the first request; refuses it unless every address it
/// resolves to is loopback (or the user allowed remote targets).
pub async fn resolve_again(
    what: Use,
    url: &str,
    allow_remote: bool,
) -> Result<Vec<SocketAddr>, TargetError> {
    let host = check_url(what, url, allow_remote)?;
    let bad = |why: String| TargetError::BadUrl {
        what: what.flag(),
        url: url.to_string(),
        why,
    };
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
