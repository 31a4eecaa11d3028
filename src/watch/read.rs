//! One gauge's source made ready to read: `{env:NAME}` expanded, the default database filled
//! in, every host held to the loopback guard (unless `--allow-remote`; the address the driver
//! will use, checked again before the first connection), then one read at a time. A read gives
//! a number or why not; it never panics and never writes: SQL runs as the oracle's scalar
//! queries do (as the run's reader, a role that can only read, in a read-only transaction,
//! under a statement timeout, on a connection of its own; an error is its SQLSTATE, never the
//! server's message), Redis gets only [`super::redis_cmd::ALLOWED`] commands, HTTP sources are
//! GETs that follow no redirect and whose answer is read up to 4 MiB.

use super::redis_cmd::ReadCommand;
use super::{Source, WatchError};
use crate::guard::{self, scalar, Use};
use crate::store::Backend;
use crate::template::{self, Encoding, Name};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one read may take (the database stops a query then; HTTP and Redis give up).
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What a run gives its watch: the database a `sql` gauge reads by default, and whether
/// sources off this machine are allowed.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// `--oracle-sql`'s URL (a foreign shop), the reference shop's database (a `run`).
    pub default_database: Option<String>,
    /// `--allow-remote` (with `--target`).
    pub allow_remote: bool,
}

/// A gauge's source, resolved.
enum Resolved {
    Sql {
        url: String,
        query: String,
        /// Who the query runs as (opened at the first read: [`guard::Reader`]).
        reader: Option<std::sync::Arc<guard::Reader>>,
        allow_remote: bool,
    },
    Prometheus {
        url: String,
        metric: String,
        labels: BTreeMap<String, String>,
        client: reqwest::Client,
    },
    Redis {
        client: redis::Client,
        conn: Option<redis::aio::MultiplexedConnection>,
        command: ReadCommand,
    },
    Http {
        url: String,
        field: String,
        client: reqwest::Client,
    },
}

/// One gauge, ready to read.
pub struct Reader {
    resolved: Resolved,
    describe: String,
}

/// `url` with its `{env:NAME}` placeholders expanded (percent-encoded); an unset variable is
/// an error naming `field`.
fn expand_env(field: &str, url: &str) -> Result<String, WatchError> {
    for n in template::used(url) {
        if let Name::Env(var) = n {
            if std::env::var(var).is_err() {
                return Err(WatchError::new(
                    field,
                    format!("a URL whose {{env:{var}}} names a set environment variable"),
                    format!("{{env:{var}}}, but {var} is not set"),
                ));
            }
        }
    }
    Ok(template::expand(url, Encoding::Path, |n| match n {
        Name::Env(var) => std::env::var(var).ok().map(Cow::Owned),
        _ => None,
    }))
}

/// Holds `url` (expanded) to the loopback guard; an error shows the URL as `written` (before
/// `{env:NAME}` expansion, credentials masked) and the host the driver would have used.
fn guard(field: &str, url: &str, written: &str, ctx: &Context) -> Result<(), WatchError> {
    guard::check_host(Use::Watch, url, ctx.allow_remote)
        .map(drop)
        .map_err(|e| match e {
            guard::TargetError::Remote { host, .. } => WatchError::new(
                field,
                "a loopback address (127.0.0.0/8, ::1, localhost) or a Unix socket, unless you \
                 pass --allow-remote (attack or gate with --target)",
                format!(
                    "{} (its driver would connect to {host})",
                    crate::secret::url(written)
                ),
            ),
            guard::TargetError::BadUrl { why, .. } => WatchError::new(
                field,
                "a usable URL",
                format!("{}: {why}", crate::secret::url(written)),
            ),
        })
}

/// The source's URL field: expanded and guarded.
fn ready(name: &str, field: &str, url: &str, ctx: &Context) -> Result<String, WatchError> {
    let field = format!("watch.{name}.{field}");
    let expanded = expand_env(&field, url)?;
    guard(&field, &expanded, url, ctx)?;
    Ok(expanded)
}

/// The HTTP client a Prometheus or HTTP gauge reads with; an error names gauge `name`.
fn http_client(name: &str) -> Result<reqwest::Client, WatchError> {
    crate::guard::http::client(READ_TIMEOUT)
        .map_err(|e| WatchError::new(format!("watch.{name}"), "an HTTP client", e.to_string()))
}

/// Each source resolved with its description (credentials masked).
impl Resolved {
    /// A `sql` source: its database (or the run's), expanded, guarded and its backend known.
    fn sql(
        name: &str,
        query: &str,
        database: &Option<String>,
        ctx: &Context,
    ) -> Result<(Resolved, String), WatchError> {
        let written = match (database, &ctx.default_database) {
            (Some(db), _) => db.clone(),
            (None, Some(db)) => db.clone(),
            (None, None) => {
                return Err(WatchError::new(
                    format!("watch.{name}.database"),
                    "a postgres:// or mysql:// URL (there is no --oracle-sql to default to)",
                    "nothing",
                ))
            }
        };
        let url = ready(name, "database", &written, ctx)?;
        Backend::from_url(&url).map_err(|e| {
            WatchError::new(
                format!("watch.{name}.database"),
                "a postgres:// or mysql:// URL",
                e.to_string(),
            )
        })?;
        let describe = format!(
            "SQL on {}{}: `{query}`",
            crate::secret::url(&written),
            if database.is_none() {
                " (the run's database)"
            } else {
                ""
            }
        );
        let query = query.to_string();
        Ok((
            Resolved::Sql {
                url,
                query,
                reader: None,
                allow_remote: ctx.allow_remote,
            },
            describe,
        ))
    }

    /// A `prometheus` source: its URL expanded and guarded, the series it sums.
    fn prometheus(
        name: &str,
        url: &str,
        metric: &str,
        labels: &BTreeMap<String, String>,
        ctx: &Context,
    ) -> Result<(Resolved, String), WatchError> {
        let real = ready(name, "prometheus", url, ctx)?;
        let describe = format!(
            "Prometheus {} {metric}{} (matching series summed)",
            crate::secret::url(url),
            if labels.is_empty() {
                String::new()
            } else {
                super::prometheus::labels_text(labels)
            }
        );
        let resolved = Resolved::Prometheus {
            url: real,
            metric: metric.to_string(),
            labels: labels.clone(),
            client: http_client(name)?,
        };
        Ok((resolved, describe))
    }

    /// A `redis` source: its URL expanded, guarded and opened as a client (not connected).
    fn redis(
        name: &str,
        url: &str,
        command: &ReadCommand,
        ctx: &Context,
    ) -> Result<(Resolved, String), WatchError> {
        let real = ready(name, "redis", url, ctx)?;
        let client = redis::Client::open(real.as_str()).map_err(|e| {
            WatchError::new(
                format!("watch.{name}.redis"),
                "a redis:// URL",
                e.to_string(),
            )
        })?;
        let describe = format!("Redis {} `{}`", crate::secret::url(url), command.line());
        let command = command.clone();
        Ok((
            Resolved::Redis {
                client,
                conn: None,
                command,
            },
            describe,
        ))
    }

    /// An `http` source: its URL expanded and guarded, the JSON field it reads.
    fn http(
        name: &str,
        url: &str,
        field: &str,
        ctx: &Context,
    ) -> Result<(Resolved, String), WatchError> {
        let real = ready(name, "http", url, ctx)?;
        let describe = format!("HTTP GET {} at `{field}`", crate::secret::url(url));
        let resolved = Resolved::Http {
            url: real,
            field: field.to_string(),
            client: http_client(name)?,
        };
        Ok((resolved, describe))
    }
}

impl Reader {
    /// Resolves gauge `name`'s `source` for a run with `ctx`; an error names the field. Opens
    /// nothing: the first read connects.
    pub fn new(name: &str, source: &Source, ctx: &Context) -> Result<Reader, WatchError> {
        let (resolved, describe) = match source {
            Source::Sql { query, database } => Resolved::sql(name, query, database, ctx)?,
            Source::Prometheus {
                url,
                metric,
                labels,
            } => Resolved::prometheus(name, url, metric, labels, ctx)?,
            Source::Redis { url, command } => Resolved::redis(name, url, command, ctx)?,
            Source::Http { url, field } => Resolved::http(name, url, field, ctx)?,
        };
        Ok(Reader { resolved, describe })
    }

    /// Where the numbers come from, credentials masked.
    pub fn describe(&self) -> &str {
        &self.describe
    }

    /// One reading, or why there is none (a message with no secret in it).
    pub async fn read(&mut self) -> Result<f64, String> {
        match &mut self.resolved {
            Resolved::Sql {
                url,
                query,
                reader,
                allow_remote,
            } => {
                let reader = match reader {
                    Some(r) => r.clone(),
                    None => {
                        guard::check_again(Use::Watch, url, *allow_remote)
                            .await
                            .map_err(|e| e.to_string())?;
                        let r = guard::Reader::open(url).await.map_err(|e| e.to_string())?;
                        reader.insert(r).clone()
                    }
                };
                match scalar::read(&reader, query, READ_TIMEOUT).await {
                    Ok(Some(n)) => Ok(n as f64),
                    Ok(None) => Err("the query returned no row, or NULL".into()),
                    Err(e) => Err(e.to_string()),
                }
            }
            Resolved::Prometheus {
                url,
                metric,
                labels,
                client,
            } => {
                let text = get_text(client, url).await?;
                super::prometheus::read(&text, metric, labels)
            }
            Resolved::Http { url, field, client } => {
                let text = get_text(client, url).await?;
                let json: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| format!("the answer is not JSON: {e}"))?;
                number_at(&json, field)
                    .ok_or_else(|| format!("the answer has no number at `{field}`"))
            }
            Resolved::Redis {
                client,
                conn,
                command,
            } => {
                let read = redis_read(client, conn, command);
                match tokio::time::timeout(READ_TIMEOUT, read).await {
                    Ok(r) => r,
                    Err(_) => {
                        *conn = None;
                        Err(format!(
                            "no answer within {}",
                            crate::duration::shown(READ_TIMEOUT)
                        ))
                    }
                }
            }
        }
    }
}

/// A GET's body, when it answered 2xx and is at most
/// [`crate::guard::body::MAX_SOURCE_BYTES`]; `Err` names the status or the failure
/// (no URL: the caller's description has it, masked).
async fn get_text(client: &reqwest::Client, url: &str) -> Result<String, String> {
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot connect: {}", chain(&e.without_url())))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("it answered {status}"));
    }
    let limit = crate::guard::body::MAX_SOURCE_BYTES;
    crate::guard::body::read_limited(resp, limit)
        .await
        .map_err(|e| e.to_string())
}

/// An error and its causes, `: `-joined (reqwest's own text leaves out "connection refused").
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(&format!(": {c}"));
        cause = c.source();
    }
    out
}

/// The number at a dot path of a JSON answer (a number, or a string holding one).
fn number_at(v: &serde_json::Value, path: &str) -> Option<f64> {
    let v = path.split('.').try_fold(v, |v, k| v.get(k))?;
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
        .filter(|f: &f64| f.is_finite())
}

/// One Redis read on the kept connection (opened again after a failure).
async fn redis_read(
    client: &redis::Client,
    conn: &mut Option<redis::aio::MultiplexedConnection>,
    command: &ReadCommand,
) -> Result<f64, String> {
    if conn.is_none() {
        let c = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| format!("cannot connect: {e}"))?;
        *conn = Some(c);
    }
    let Some(c) = conn.as_mut() else {
        return Err("no connection".into());
    };
    match command.cmd().query_async::<redis::Value>(c).await {
        Ok(v) => command.number(&v),
        Err(e) => {
            *conn = None;
            Err(e.to_string())
        }
    }
}
