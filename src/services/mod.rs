//! The outside services oversell needs, how to tell a user that one is not there, and the
//! [`managed`] servers the harness starts itself when none is configured.

pub mod leftovers;
pub mod managed;
pub mod provide;
pub use provide::ServicesMode;

use std::fmt::Display;

/// A service the shop or the oracle connects to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Postgres,
    Mysql,
    Redis,
    Shop,
    /// A foreign shop's oracle endpoint (`--oracle-http`).
    Oracle,
}

impl Service {
    /// Human name.
    pub fn name(self) -> &'static str {
        match self {
            Service::Postgres => "PostgreSQL",
            Service::Mysql => "MySQL/MariaDB",
            Service::Redis => "Redis",
            Service::Shop => "the target shop",
            Service::Oracle => "the oracle endpoint",
        }
    }

    /// How to start one locally.
    pub fn how_to_start(self) -> &'static str {
        match self {
            Service::Postgres => {
                "start it with `docker compose up -d --wait postgres`, or on Debian \
                 `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`; \
                 or let oversell start its own: `--services auto` (the default) or `managed` with \
                 the server package installed (docs/src/running/services.md)"
            }
            Service::Mysql => {
                "start it with `docker compose up -d --wait mariadb`, or on Debian \
                 `start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`; \
                 or let oversell start its own: `--services auto` (the default) or `managed` with \
                 the server package installed (docs/src/running/services.md)"
            }
            Service::Redis => {
                "start it with `docker compose up -d --wait redis`, or \
                 `redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no`; \
                 or let oversell start its own: `--services auto` (the default) or `managed` with \
                 the server package installed (docs/src/running/services.md)"
            }
            Service::Shop => "check the URL and that the shop is running",
            Service::Oracle => "check the --oracle-http URL and that the endpoint is up",
        }
    }

    /// The one-line message for an unreachable service.
    pub fn unreachable(self, url: &str, err: &dyn Display) -> String {
        format!(
            "cannot reach {} at {}: {err}; {}",
            self.name(),
            redact_url(url),
            self.how_to_start()
        )
    }

    /// The typed error for an unreachable service (exit code 3).
    pub fn unreachable_error(self, url: &str, err: &dyn Display) -> Unreachable {
        Unreachable {
            service: Some(self),
            message: self.unreachable(url, err),
        }
    }
}

/// A service (database, Redis, the target shop, an oracle) could not be reached.
///
/// Commands end with exit code 3 when this (or a store or inventory error saying the same) is
/// anywhere in an error's chain; see `cli::exit_code_for`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Unreachable {
    /// Which service, when known (`None`: relayed from a child process's own report).
    pub service: Option<Service>,
    /// The full message: what, where, and how to start it.
    pub message: String,
}

impl Unreachable {
    /// A message another process already printed for an unreachable service.
    pub fn relayed(message: impl Into<String>) -> Self {
        Unreachable {
            service: None,
            message: message.into(),
        }
    }
}

/// A URL as oversell stores or prints it: password and secret query values masked (the one
/// home is [`crate::secret::url`]).
pub use crate::secret::url as redact_url;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(redact_url("mysql://root:pw@h/db"), "mysql://root:***@h/db");
    }
}
