//! `[watch]` as written: one table per gauge, named by the user, with exactly one source
//! (`sql`, `prometheus`, `redis` or `http`) and that source's own fields; checked into a
//! typed [`Source`] when the scenario is read ([`GaugeSpec::source`]). Every error names the
//! field (`watch.<name>.<field>`) and what it may be.

use super::{prometheus, redis_cmd};
use crate::metric::watch::{is_gauge_name, GAUGE_NAME_RULE};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[watch]`: the gauges, by name.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct WatchSpec(pub BTreeMap<String, GaugeSpec>);

/// One `[watch.<name>]` table as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct GaugeSpec {
    /// A read-only query returning one number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sql: Option<String>,
    /// The database `sql` runs on (default: `--oracle-sql`'s, or the reference shop's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// A Prometheus text endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<String>,
    /// The metric read from `prometheus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// Label matchers: the series whose labels have these values (summed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// A Redis server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<String>,
    /// The read command sent to `redis`: `["XLEN", "orders"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// An HTTP endpoint answering JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    /// The dot path of the number in `http`'s answer: `data.pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// Where one gauge is read, checked; URLs as written (`{env:NAME}` not yet expanded).
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    Sql {
        query: String,
        /// `None`: the run's default database.
        database: Option<String>,
    },
    Prometheus {
        url: String,
        metric: String,
        labels: BTreeMap<String, String>,
    },
    Redis {
        url: String,
        command: redis_cmd::ReadCommand,
    },
    Http {
        url: String,
        field: String,
    },
}

/// A `[watch]` entry that cannot be used: the field, what it may be, what it is.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field `{field}` must be {allowed} (got {got})")]
pub struct WatchError {
    /// `watch.<name>.<field>`.
    pub field: String,
    pub allowed: String,
    pub got: String,
}

impl WatchError {
    pub fn new(
        field: impl Into<String>,
        allowed: impl Into<String>,
        got: impl Into<String>,
    ) -> Self {
        WatchError {
            field: field.into(),
            allowed: allowed.into(),
            got: got.into(),
        }
    }
}

/// The source fields, each with the fields only it takes.
const SOURCES: [(&str, &[&str]); 4] = [
    ("sql", &["database"]),
    ("prometheus", &["metric", "labels"]),
    ("redis", &["command"]),
    ("http", &["field"]),
];

/// What a gauge's table must hold, for messages.
const ONE_SOURCE: &str = "exactly one source: sql (with database), prometheus (with metric and labels), redis (with command) or http (with field)";

/// The most gauges one scenario may watch.
pub const MAX_GAUGES: usize = 32;

/// What a `watch.<name>` threshold may name, for messages: the scenario's gauges.
pub fn gauge_names(spec: &WatchSpec) -> String {
    if spec.0.is_empty() {
        "a gauge of [watch] (the scenario watches none: add a [watch.<name>] table)".into()
    } else {
        let names: Vec<&str> = spec.0.keys().map(String::as_str).collect();
        format!("a gauge of [watch]: {}", names.join(", "))
    }
}

impl WatchSpec {
    /// Whether no gauge is watched.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Checks every gauge: its name and its one source.
    pub fn validate(&self) -> Result<(), WatchError> {
        if self.0.len() > MAX_GAUGES {
            return Err(WatchError::new(
                "watch",
                format!("at most {MAX_GAUGES} gauges"),
                self.0.len().to_string(),
            ));
        }
        for (name, g) in &self.0 {
            if !is_gauge_name(name) {
                return Err(WatchError::new(
                    format!("watch.{name}"),
                    format!("a gauge name of {GAUGE_NAME_RULE}"),
                    format!("{name:?}"),
                ));
            }
            g.source(name)?;
        }
        Ok(())
    }

    /// Every gauge with its checked source.
    pub fn sources(&self) -> Vec<(String, Source)> {
        self.0
            .iter()
            .filter_map(|(n, g)| Some((n.clone(), g.source(n).ok()?)))
            .collect()
    }
}

impl GaugeSpec {
    /// The fields set, by name.
    fn set(&self) -> Vec<&'static str> {
        let fields = [
            ("sql", self.sql.is_some()),
            ("database", self.database.is_some()),
            ("prometheus", self.prometheus.is_some()),
            ("metric", self.metric.is_some()),
            ("labels", !self.labels.is_empty()),
            ("redis", self.redis.is_some()),
            ("command", self.command.is_some()),
            ("http", self.http.is_some()),
            ("field", self.field.is_some()),
        ];
        fields.iter().filter(|f| f.1).map(|f| f.0).collect()
    }

    /// The gauge's one source, checked: exactly one source field, only that source's fields,
    /// each valid.
    pub fn source(&self, name: &str) -> Result<Source, WatchError> {
        let set = self.set();
        let sources: Vec<&str> = SOURCES
            .iter()
            .map(|s| s.0)
            .filter(|s| set.contains(s))
            .collect();
        let at = |field: &str| format!("watch.{name}.{field}");
        let [source] = sources.as_slice() else {
            let got = if sources.is_empty() {
                "no source".to_string()
            } else {
                format!("{} together", sources.join(" and "))
            };
            return Err(WatchError::new(format!("watch.{name}"), ONE_SOURCE, got));
        };
        let own = SOURCES
            .iter()
            .find(|s| s.0 == *source)
            .map_or(&[][..], |s| s.1);
        if let Some(stray) = set.iter().find(|f| **f != *source && !own.contains(*f)) {
            return Err(WatchError::new(
                at(stray),
                format!(
                    "absent: a {source} gauge takes {source}{}",
                    own.iter().map(|f| format!(", {f}")).collect::<String>()
                ),
                "a value",
            ));
        }
        match *source {
            "sql" => self.sql_source(name),
            "prometheus" => self.prometheus_source(name),
            "redis" => self.redis_source(name),
            _ => self.http_source(name),
        }
    }

    fn sql_source(&self, name: &str) -> Result<Source, WatchError> {
        let query = self.sql.clone().unwrap_or_default();
        crate::read_only::refuse(&query).map_err(|e| {
            WatchError::new(
                format!("watch.{name}.sql"),
                "one read-only SELECT (or WITH, VALUES, TABLE) returning one number",
                format!("{query:?}, {e}"),
            )
        })?;
        if let Some(db) = &self.database {
            url_of(name, "database", db, &DATABASE_SCHEMES)?;
        }
        Ok(Source::Sql {
            query,
            database: self.database.clone(),
        })
    }

    fn prometheus_source(&self, name: &str) -> Result<Source, WatchError> {
        let url = self.prometheus.clone().unwrap_or_default();
        url_of(name, "prometheus", &url, &HTTP_SCHEMES)?;
        let metric = self.metric.clone().unwrap_or_default();
        if !prometheus::is_metric_name(&metric) {
            return Err(WatchError::new(
                format!("watch.{name}.metric"),
                "a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), e.g. rabbitmq_queue_messages_ready",
                if self.metric.is_none() { "nothing".into() } else { format!("{metric:?}") },
            ));
        }
        if let Some(l) = self.labels.keys().find(|l| !prometheus::is_label_name(l)) {
            return Err(WatchError::new(
                format!("watch.{name}.labels"),
                "label names of [a-zA-Z_][a-zA-Z0-9_]* with string values, e.g. { queue = \"orders\" }",
                format!("{l:?}"),
            ));
        }
        Ok(Source::Prometheus {
            url,
            metric,
            labels: self.labels.clone(),
        })
    }

    fn redis_source(&self, name: &str) -> Result<Source, WatchError> {
        let url = self.redis.clone().unwrap_or_default();
        url_of(name, "redis", &url, &REDIS_SCHEMES)?;
        let words = self.command.clone().unwrap_or_default();
        let command = redis_cmd::ReadCommand::parse(&words).map_err(|allowed| {
            WatchError::new(
                format!("watch.{name}.command"),
                allowed,
                format!("{words:?}"),
            )
        })?;
        Ok(Source::Redis { url, command })
    }

    fn http_source(&self, name: &str) -> Result<Source, WatchError> {
        let url = self.http.clone().unwrap_or_default();
        url_of(name, "http", &url, &HTTP_SCHEMES)?;
        let field = self.field.clone().unwrap_or_default();
        if field.trim().is_empty() || field.split('.').any(str::is_empty) {
            return Err(WatchError::new(
                format!("watch.{name}.field"),
                "the dot path of a number in the JSON answer, e.g. data.pending",
                if self.field.is_none() {
                    "nothing".into()
                } else {
                    format!("{field:?}")
                },
            ));
        }
        Ok(Source::Http { url, field })
    }
}

const HTTP_SCHEMES: [&str; 2] = ["http", "https"];
const REDIS_SCHEMES: [&str; 2] = ["redis", "rediss"];
const DATABASE_SCHEMES: [&str; 4] = ["postgres", "postgresql", "mysql", "mariadb"];

/// Checks that `url` is a URL of one of `schemes` with a host; the message shows it masked.
fn url_of(name: &str, field: &str, url: &str, schemes: &[&str]) -> Result<(), WatchError> {
    let allowed = format!(
        "a {} URL with a host ({{env:NAME}} may stand for a part of it)",
        schemes
            .iter()
            .map(|s| format!("{s}://"))
            .collect::<Vec<_>>()
            .join(" or ")
    );
    let bad = || {
        WatchError::new(
            format!("watch.{name}.{field}"),
            allowed.clone(),
            format!("{:?}", crate::secret::url(url)),
        )
    };
    let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    if !scheme.is_some_and(|s| schemes.contains(&s.as_str())) {
        return Err(bad());
    }
    // `{env:NAME}` stands for text: check the URL's shape with a stand-in.
    let shape = crate::template::expand(url, crate::template::Encoding::Path, |_| {
        Some(std::borrow::Cow::Borrowed("x"))
    });
    match reqwest::Url::parse(&shape) {
        Ok(u) if u.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests;
