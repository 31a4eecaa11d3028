//! `--services auto|managed|external`: where a command's databases and Redis come from.
//!
//! - `external`: the configured URLs, as given.
//! - `managed`: a private server of each kind the command needs ([`super::managed`]), the
//!   configured URLs' database names kept.
//! - `auto` (the default): per kind, the configured URL when something answers there, a
//!   managed server otherwise. Neither: an [`Unreachable`] error (exit 3) naming the URL, the
//!   packages to install and the compose command.

use super::managed::{self, ManagedSet, ServerKind, ServerOptions};
use super::{redact_url, Unreachable};
use std::time::Duration;

/// Where the servers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ServicesMode {
    /// The configured URLs when they answer, managed servers otherwise.
    #[default]
    Auto,
    /// Private servers started from the installed binaries, whatever the URLs say.
    Managed,
    /// The configured URLs only (docker compose, your own servers).
    External,
}

/// How long `auto` waits for a configured URL to accept a connection.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What [`provide`] decided: the managed set (held for the command's length: dropping it stops
/// the servers) and, per kind it manages, the server's URL without a database.
#[derive(Debug, Default)]
pub struct Provided {
    pub set: Option<ManagedSet>,
    pub managed: Vec<(ServerKind, String)>,
}

impl Provided {
    /// The managed URL for `kind`, if it is managed.
    pub fn base(&self, kind: ServerKind) -> Option<&str> {
        self.managed
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, u)| u.as_str())
    }

    /// Stops the managed servers (cleanly) and removes their directory.
    pub async fn shutdown(self) {
        if let Some(set) = self.set {
            set.shutdown().await;
        }
    }
}

/// Decides, per `(kind, configured URL)` the command needs, between the URL and a managed
/// server, and starts the managed ones (once: every run of the command shares them).
pub async fn provide(
    mode: ServicesMode,
    wanted: &[(ServerKind, String)],
) -> anyhow::Result<Provided> {
    let mut to_manage: Vec<ServerKind> = Vec::new();
    let mut missing: Vec<(ServerKind, Option<String>)> = Vec::new();
    for (kind, url) in wanted {
        if to_manage.contains(kind) {
            continue;
        }
        let manage = match mode {
            ServicesMode::External => false,
            ServicesMode::Managed => true,
            ServicesMode::Auto => match probe(url).await {
                Ok(()) => false,
                Err(why) => {
                    if managed::binaries::find(*kind).is_none() {
                        missing.push((*kind, Some(format!("{} ({why})", redact_url(url)))));
                        continue;
                    }
                    crate::console::eoutln!(
                        "nothing answers at {} ({why}): starting a managed {}",
                        redact_url(url),
                        kind.service().name()
                    );
                    true
                }
            },
        };
        if manage {
            if managed::binaries::find(*kind).is_none() {
                missing.push((*kind, None));
            } else {
                to_manage.push(*kind);
            }
        }
    }
    if !missing.is_empty() {
        return Err(missing_error(&missing).into());
    }
    if to_manage.is_empty() {
        return Ok(Provided::default());
    }
    to_manage.sort();
    let set = ManagedSet::new()?;
    let mut bases = Vec::new();
    for kind in to_manage {
        let s = set.start(kind, ServerOptions::default()).await?;
        crate::console::eoutln!(
            "managed {} {} at {} (data {})",
            kind.service().name(),
            s.version(),
            redact_url(&s.url()),
            s.data_dir().display()
        );
        bases.push((kind, s.url()));
    }
    Ok(Provided {
        set: Some(set),
        managed: bases,
    })
}

fn missing_error(missing: &[(ServerKind, Option<String>)]) -> Unreachable {
    let kinds: Vec<ServerKind> = missing.iter().map(|(k, _)| *k).collect();
    let base = managed::missing(&kinds);
    let unreachable: Vec<String> = missing
        .iter()
        .filter_map(|(k, why)| {
            why.as_ref()
                .map(|w| format!("cannot reach {} at {w}", k.service().name()))
        })
        .collect();
    if unreachable.is_empty() {
        return base;
    }
    Unreachable {
        service: base.service,
        message: format!("{}, and {}", unreachable.join("; "), base.message),
    }
}

/// Whether something accepts a TCP connection at the URL's host and port (a URL that names no
/// single host, such as a Redis Cluster's or a socket path, counts as answering: it is used
/// as given).
pub async fn probe(url: &str) -> Result<(), String> {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return Ok(());
    };
    let port = match (parsed.port(), parsed.scheme()) {
        (Some(p), _) => p,
        (None, "postgres" | "postgresql") => 5432,
        (None, "mysql" | "mariadb") => 3306,
        (None, "redis") => 6379,
        _ => return Ok(()),
    };
    let Some(host) = parsed.host_str().filter(|h| !h.is_empty()) else {
        return Ok(());
    };
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    match tokio::time::timeout(
        PROBE_TIMEOUT,
        tokio::net::TcpStream::connect((host.as_str(), port)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} s", PROBE_TIMEOUT.as_secs())),
    }
}

/// `url` with its scheme, user, password, host and port replaced by `base`'s (the database
/// name and the query kept): `postgres://u:p@db:5432/shop?x=1` on a managed
/// `postgres://postgres:postgres@127.0.0.1:41234` → `.../127.0.0.1:41234/shop?x=1`.
pub fn rebase(url: &str, base: &str) -> String {
    let tail = match reqwest::Url::parse(url) {
        Ok(u) => {
            let mut t = u.path().to_string();
            if t == "/" {
                t.clear();
            }
            if let Some(q) = u.query() {
                t.push('?');
                t.push_str(q);
            }
            t
        }
        Err(_) => String::new(),
    };
    format!("{}{tail}", base.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebase_keeps_the_database_and_the_query() {
        let base = "postgres://postgres:postgres@127.0.0.1:41234";
        assert_eq!(
            rebase(
                "postgres://u:secret@db.example:5432/shop?sslmode=disable",
                base
            ),
            "postgres://postgres:postgres@127.0.0.1:41234/shop?sslmode=disable"
        );
        assert_eq!(
            rebase("redis://127.0.0.1:6379", "redis://127.0.0.1:40000"),
            "redis://127.0.0.1:40000"
        );
        assert_eq!(
            rebase(
                "mysql://root@127.0.0.1:3306/oversell",
                "mysql://root@127.0.0.1:4"
            ),
            "mysql://root@127.0.0.1:4/oversell"
        );
    }

    #[tokio::test]
    async fn a_closed_port_does_not_answer_and_a_cluster_url_is_used_as_given() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        assert!(probe(&format!("postgres://u@127.0.0.1:{port}/db"))
            .await
            .is_err());
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("redis://127.0.0.1:{}", open.local_addr().unwrap().port());
        assert!(probe(&url).await.is_ok());
        assert!(probe("redis+cluster://a:1,b:2").await.is_ok());
    }
}
