//! Which database server a store talks to, read from its URL's scheme.

use super::StoreError;
use crate::services::{redact_url, Service};

/// Which database server the shop runs on.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Postgres,
    Mysql,
}

impl Backend {
    /// The backend a URL's scheme names.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let scheme = url.split("://").next().unwrap_or_default();
        match scheme {
            "postgres" | "postgresql" => Ok(Backend::Postgres),
            "mysql" | "mariadb" => Ok(Backend::Mysql),
            _ => Err(StoreError::BadUrl(format!(
                "database URL {} must start with postgres:// or mysql://",
                redact_url(url)
            ))),
        }
    }

    /// Lower-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Mysql => "mysql",
        }
    }

    /// The default URL for this backend.
    pub fn default_url(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres://postgres:postgres@127.0.0.1:5432/oversell",
            Backend::Mysql => "mysql://root@127.0.0.1:3306/oversell",
        }
    }

    /// The service to name when this backend cannot be reached.
    pub(super) fn service(self) -> Service {
        match self {
            Backend::Postgres => Service::Postgres,
            Backend::Mysql => Service::Mysql,
        }
    }
}

/// Splits `scheme://auth@host/db?query` into (the same URL on database `db` of that server,
/// the database it named); an empty `db` gives the server with no database. `None`: the URL
/// names no database.
pub fn on_database(url: &str, db: &str) -> Option<(String, String)> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://")? + 3;
    let slash = base[scheme_end..].find('/').map(|i| i + scheme_end)?;
    let current = base[slash + 1..].to_string();
    let mut out = if db.is_empty() {
        base[..slash].to_string()
    } else {
        format!("{}/{db}", &base[..slash])
    };
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Some((out, current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_name_is_swapped() {
        assert_eq!(
            on_database("postgres://u:p@h:5432/shop?sslmode=disable", "postgres"),
            Some((
                "postgres://u:p@h:5432/postgres?sslmode=disable".into(),
                "shop".into()
            ))
        );
        assert_eq!(on_database("postgres://h", "x"), None);
    }
}
