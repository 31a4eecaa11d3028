//! Where each database and Redis URL came from (a flag or the environment) and whether it
//! fits its role: the checks `--dry-run` makes without connecting, and the names errors use.

use super::ConnArgs;
use crate::services::redact_url;
use crate::store::{Backend, StoreError};
use std::str::FromStr;

impl ConnArgs {
    /// The servers a command on `backends` (and Redis, when `redis`) would use, each URL
    /// checked against its role without connecting: a database URL of its backend's scheme
    /// that its driver can read, a Redis URL Redis can read. One line per server for the dry
    /// run, naming where its URL came from; the first misfit is the error, naming its flag or
    /// environment variable.
    pub fn check_servers(&self, backends: &[Backend], redis: bool) -> anyhow::Result<Vec<String>> {
        let several = backends.len() > 1;
        let mut lines = Vec::new();
        for b in backends {
            let (b, url) = match several {
                true => self.database_each(Some(*b))?,
                false => self.database_for(Some(*b))?,
            };
            let id = self.field_of(&url);
            let misfit = |why: String| {
                anyhow::anyhow!(
                    "{} must be a {}:// URL for the {} database ({why}; got {})",
                    self.named(id),
                    b.as_str(),
                    b.as_str(),
                    redact_url(&url)
                )
            };
            match Backend::from_url(&url) {
                Ok(named) if named == b => {}
                Ok(named) => return Err(misfit(format!("it names {}", named.as_str()))),
                Err(_) => return Err(misfit("another scheme".into())),
            }
            let readable = match b {
                Backend::Postgres => sqlx::postgres::PgConnectOptions::from_str(&url).map(drop),
                Backend::Mysql => sqlx::mysql::MySqlConnectOptions::from_str(&url).map(drop),
            };
            readable.map_err(|e| misfit(format!("it does not parse: {e}")))?;
            lines.push(format!(
                "{}: {} ({})",
                b.as_str(),
                redact_url(&url),
                self.named(id)
            ));
        }
        if redis {
            self.check_redis()?;
            lines.push(format!(
                "redis: {} ({})",
                redact_url(&self.redis_url),
                self.named("redis_url")
            ));
        }
        Ok(lines)
    }

    /// `--redis-url` read as Redis reads it (one Redis or a cluster's nodes), without
    /// connecting.
    fn check_redis(&self) -> anyhow::Result<()> {
        use crate::store::redis_conn::{topology, Topology};
        use redis::IntoConnectionInfo;
        let bad = |why: String| {
            anyhow::anyhow!(
                "{} must be a redis:// (or rediss://, redis+cluster://, unix://) URL ({why}; got {})",
                self.named("redis_url"),
                redact_url(&self.redis_url)
            )
        };
        let nodes = match topology(&self.redis_url).map_err(|e| bad(e.to_string()))? {
            Topology::Single(url) => vec![url],
            Topology::Cluster(nodes) => nodes,
        };
        for node in nodes {
            node.as_str()
                .into_connection_info()
                .map_err(|e| bad(e.to_string()))?;
        }
        Ok(())
    }

    /// Which field a database URL the command uses came from.
    fn field_of(&self, url: &str) -> &'static str {
        if self.database_url.as_deref() == Some(url) {
            "database_url"
        } else if self.mysql_url == url {
            "mysql_url"
        } else {
            "database_url"
        }
    }

    /// A bad database URL's error, naming where it came from.
    pub(super) fn url_error(&self, e: StoreError) -> anyhow::Error {
        anyhow::Error::new(e).context(format!(
            "{} is not a database URL oversell can use",
            self.named("database_url")
        ))
    }

    /// Whether the field `id` came from the environment.
    pub fn from_env(&self, id: &str) -> bool {
        self.from_env.contains(&id)
    }

    /// The field `id` as a person set it: `--database-url`, or `the environment variable
    /// DATABASE_URL` when it came from there.
    pub fn named(&self, id: &'static str) -> String {
        match (
            self.from_env(id),
            ConnArgs::ENV.iter().find(|(f, _, _)| *f == id),
        ) {
            (true, Some((_, _, var))) => format!("the environment variable {var}"),
            (_, Some((_, flag, _))) => (*flag).to_string(),
            (_, None) => id.to_string(),
        }
    }

    /// Each field read from the environment: its id, flag and variable.
    pub const ENV: [(&'static str, &'static str, &'static str); 4] = [
        ("database_url", "--database-url", "DATABASE_URL"),
        ("mysql_url", "--mysql-url", "MYSQL_URL"),
        ("redis_url", "--redis-url", "REDIS_URL"),
        ("services", "--services", "OVERSELL_SERVICES"),
    ];
}
