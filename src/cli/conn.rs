//! Where the databases and Redis are: the flags, the database URL each backend uses (the
//! rules `--backend`, `--database-url` and `DATABASE_URL` follow), where each URL came from (a
//! flag or the environment) and whether it fits its role: the checks `--dry-run` makes
//! without connecting, and the names errors use.

use super::values;
use crate::inventory::Strategy;
use crate::runner::Cell;
use crate::services::redact_url;
use crate::store::{Backend, StoreError};
use clap::Args;
use std::str::FromStr;

/// Where the databases and Redis are.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = values::CONNECTIONS)]
pub struct ConnArgs {
    /// Database URL: postgres://... or mysql://... (the database is created if missing).
    #[arg(long, value_name = "URL", env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// MySQL/MariaDB URL used when the backend is mysql and --database-url is not a mysql:// URL.
    #[arg(
        long,
        value_name = "URL",
        env = "MYSQL_URL",
        hide_env_values = true,
        default_value = "mysql://root@127.0.0.1:3306/oversell"
    )]
    pub mysql_url: String,
    /// Redis URL (used by redis-lua).
    #[arg(
        long,
        value_name = "URL",
        env = "REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis_url: String,
    /// Where the databases and Redis come from: auto (the URLs when they answer, else private
    /// servers started from the installed binaries), managed (always private servers),
    /// external (the URLs only). See docs/src/running/services.md.
    #[arg(long, value_enum, env = "OVERSELL_SERVICES", hide_env_values = true,
          default_value_t = crate::services::ServicesMode::Auto)]
    pub services: crate::services::ServicesMode,
    /// The managed PostgreSQL's URL when --database-url names a MySQL database.
    #[arg(skip)]
    pub managed_postgres: Option<String>,
    /// The fields whose value came from the environment (`database_url`: `DATABASE_URL`), not
    /// a flag: set by [`output::parse_from`]. `DATABASE_URL` serves the backend it names; a
    /// flag of another backend than `--backend` is refused; errors name the variable.
    #[arg(skip)]
    pub from_env: Vec<&'static str>,
}

impl ConnArgs {
    /// The database URL for the one `backend` a command asks for (default: the backend
    /// --database-url names, else postgres). `DATABASE_URL` of another backend than
    /// `--backend` leaves it to the other's URL (`--mysql-url`/`MYSQL_URL`, or the default
    /// PostgreSQL URL), as the environment table says; a `--database-url` flag of another
    /// backend is refused: the run would otherwise quietly use another database than the one
    /// the command line names.
    pub fn database_for(&self, backend: Option<Backend>) -> anyhow::Result<(Backend, String)> {
        if let (Some(asked), Some(url)) = (backend, self.database_url.as_deref()) {
            let named = Backend::from_url(url).map_err(|e| self.url_error(e))?;
            let mysql = asked == Backend::Mysql;
            let (asked, named) = (asked.as_str(), named.as_str());
            anyhow::ensure!(
                named == asked || self.from_env("database_url"),
                "--backend {asked} but --database-url is a {named} URL ({}): give a {asked} \
                 --database-url{}, or drop --backend to use the {named} one",
                crate::services::redact_url(url),
                if mysql {
                    " (or drop it and use --mysql-url)"
                } else {
                    ""
                }
            );
        }
        self.database_each(backend)
    }

    /// Every strategy on every backend (`--backend` empty: the one `--database-url` names),
    /// strategy by strategy within a backend; with several backends each URL is
    /// [`ConnArgs::database_each`]'s. Asked after the managed servers started, whose URLs
    /// these then are.
    pub fn cells(
        &self,
        strategies: &[Strategy],
        backends: &[Backend],
    ) -> anyhow::Result<Vec<Cell>> {
        let backends: Vec<Option<Backend>> = match backends {
            [] => vec![None],
            some => some.iter().copied().map(Some).collect(),
        };
        let several = backends.len() > 1;
        let mut cells = Vec::new();
        for b in backends {
            let (backend, url) = match several {
                true => self.database_each(b)?,
                false => self.database_for(b)?,
            };
            cells.extend(strategies.iter().map(|s| Cell {
                strategy: *s,
                backend,
                database_url: url.clone(),
            }));
        }
        Ok(cells)
    }

    /// The database URL for `backend` when a command runs several backends (`compare
    /// --backend postgres,mysql`, `merge`): --database-url serves the backend it names, the
    /// other comes from --mysql-url or the default PostgreSQL URL.
    pub fn database_each(&self, backend: Option<Backend>) -> anyhow::Result<(Backend, String)> {
        let given = self
            .database_url
            .as_deref()
            .map(|u| Backend::from_url(u).map(|b| (b, u.to_string())))
            .transpose()
            .map_err(|e| self.url_error(e))?;
        Ok(match (backend, given) {
            (None, Some(g)) => g,
            (None, None) => (
                Backend::Postgres,
                Backend::Postgres.default_url().to_string(),
            ),
            (Some(b), Some((gb, url))) if gb == b => (b, url),
            (Some(Backend::Mysql), _) => (Backend::Mysql, self.mysql_url.clone()),
            (Some(Backend::Postgres), _) => (
                Backend::Postgres,
                self.managed_postgres
                    .clone()
                    .unwrap_or_else(|| Backend::Postgres.default_url().to_string()),
            ),
        })
    }

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
