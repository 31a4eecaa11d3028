//! [`ServeConfig`]: everything `oversell serve` is told, as one typed document. `serve`'s flags
//! build one; `serve --config FILE|-` reads one whole (JSON), which is how `run`/`compare`/`gate`
//! hand their child shop its settings: on its stdin, so no URL or token is ever on a command
//! line or left on disk. [`ServeConfig::shop_config`] turns it into the [`ShopConfig`] the shop
//! is built from.

use super::{listener::Limits, ShopConfig, ShopKnobs, TrustedProxies};
use crate::inventory::Strategy;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// What `oversell serve` runs: the strategy, where it listens, its servers, its security
/// settings, its connection bounds and its knobs. Written and read as JSON (`serve --config`);
/// unknown fields are refused, absent optional ones keep `serve`'s defaults.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    pub strategy: Strategy,
    /// The address to bind (port 0: a free one, reported on the readiness channel).
    pub listen: SocketAddr,
    /// The database (`postgres://…` or `mysql://…`), created if missing.
    pub database_url: String,
    /// Redis (the Redis strategies decide there; the others never connect).
    pub redis_url: String,
    /// Prefix of every Redis key.
    #[serde(default = "default_prefix")]
    pub redis_prefix: String,
    /// redis-lua: reconciliation reads from this replica instead of the primary.
    #[serde(default)]
    pub replica_database_url: Option<String>,
    /// redis-lua: where reconciliation alerts are POSTed.
    #[serde(default)]
    pub alert_webhook: Option<String>,
    /// The admin routes need `Authorization: Bearer <this>` when set.
    #[serde(default)]
    pub admin_token: Option<String>,
    /// Listen off loopback without an admin token (`--allow-open-admin`).
    #[serde(default)]
    pub allow_open_admin: bool,
    /// Peers whose `X-Forwarded-For` names the client (addresses or networks).
    #[serde(default, with = "nets")]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// The connection cap and time-outs.
    #[serde(default, with = "limits")]
    pub limits: Limits,
    /// The shop's knobs (the `[shop]` form: absent knobs keep their defaults).
    #[serde(default)]
    pub knobs: ShopKnobs,
}

/// `serve --redis-prefix`'s default.
pub const DEFAULT_REDIS_PREFIX: &str = "oversell";

fn default_prefix() -> String {
    DEFAULT_REDIS_PREFIX.to_string()
}

/// Shows the strategy and the address, never a URL or the token (a `{:?}` may reach a log).
impl std::fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeConfig")
            .field("strategy", &self.strategy)
            .field("listen", &self.listen)
            .field("database_url", &crate::secret::url(&self.database_url))
            .field("redis_url", &crate::secret::url(&self.redis_url))
            .field("redis_prefix", &self.redis_prefix)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

impl ServeConfig {
    /// A shop selling through `strategy` with `knobs`, on the given servers, with no replica,
    /// webhook, admin token or trusted proxy and the default connection bounds.
    pub fn new(
        strategy: Strategy,
        listen: SocketAddr,
        database_url: &str,
        redis_url: &str,
        knobs: ShopKnobs,
    ) -> ServeConfig {
        ServeConfig {
            strategy,
            listen,
            database_url: database_url.to_string(),
            redis_url: redis_url.to_string(),
            redis_prefix: default_prefix(),
            replica_database_url: None,
            alert_webhook: None,
            admin_token: None,
            allow_open_admin: false,
            trusted_proxies: Vec::new(),
            limits: Limits::default(),
            knobs,
        }
    }

    /// The document as JSON (what a parent writes to `serve --config -`).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a ServeConfig always serializes")
    }

    /// Reads a document; the error names the line and column (and never quotes a value).
    pub fn from_json(text: &str) -> Result<ServeConfig, String> {
        serde_json::from_str(text).map_err(|e| {
            let what = match e.classify() {
                serde_json::error::Category::Io => "unreadable",
                serde_json::error::Category::Syntax => "not JSON",
                serde_json::error::Category::Eof => "cut short",
                serde_json::error::Category::Data => "not a serve configuration",
            };
            // A data error's message names the field and what it expects; a type error quotes
            // the value given, which may be a URL with a password: keep the part before it.
            let message = e.to_string();
            let detail = message.split(" at line ").next().unwrap_or_default();
            let detail = match detail.split_once("invalid type: ") {
                Some(_) => "a field has the wrong type".to_string(),
                None => crate::secret::url(detail),
            };
            format!(
                "{what} at line {} column {}: {detail}",
                e.line(),
                e.column()
            )
        })
    }

    /// The configuration the shop is built from.
    pub fn shop_config(&self) -> ShopConfig {
        let mut config = self.knobs.config(
            self.strategy,
            self.listen,
            &self.database_url,
            &self.redis_url,
            &self.redis_prefix,
        );
        config.pipeline.reconcile.webhook = self.alert_webhook.clone();
        config.replica_database_url = self.replica_database_url.clone();
        config.trusted_proxies = TrustedProxies::new(self.trusted_proxies.clone());
        config.admin_token = self.admin_token.clone().filter(|t| !t.is_empty());
        config.limits = self.limits;
        config
    }
}

/// The trusted proxies as text (`"127.0.0.1"`, `"10.0.0.0/8"`), read by `--trusted-proxy`'s
/// own parser.
mod nets {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[ipnet::IpNet], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|n| n.to_string()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ipnet::IpNet>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|n| super::TrustedProxies::parse(n).map_err(serde::de::Error::custom))
            .collect()
    }
}

/// [`Limits`] with its durations as text (`"10s"`), each field optional.
mod limits {
    use super::Limits;
    use crate::duration::{shown, Written};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Out {
        max_connections: usize,
        header_read_timeout: String,
        idle_timeout: String,
        body_timeout: String,
    }

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct In {
        max_connections: Option<usize>,
        header_read_timeout: Option<Written>,
        idle_timeout: Option<Written>,
        body_timeout: Option<Written>,
    }

    pub fn serialize<S: Serializer>(l: &Limits, s: S) -> Result<S::Ok, S::Error> {
        Out {
            max_connections: l.max_connections,
            header_read_timeout: shown(l.header_read_timeout),
            idle_timeout: shown(l.idle_timeout),
            body_timeout: shown(l.body_timeout),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Limits, D::Error> {
        let i = In::deserialize(d)?;
        let default = Limits::default();
        Ok(Limits {
            max_connections: i.max_connections.unwrap_or(default.max_connections),
            header_read_timeout: i
                .header_read_timeout
                .map_or(default.header_read_timeout, |w| w.0),
            idle_timeout: i.idle_timeout.map_or(default.idle_timeout, |w| w.0),
            body_timeout: i.body_timeout.map_or(default.body_timeout, |w| w.0),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn busy() -> ServeConfig {
        let knobs = ShopKnobs {
            pool_size: 33,
            work: Duration::from_micros(1500),
            payment_timeout: Duration::from_secs(90),
            redis_cluster: true,
            defect: Some(crate::inventory::Defect::DoubleRestock),
            ..ShopKnobs::default()
        };
        ServeConfig {
            redis_prefix: "t-42".into(),
            replica_database_url: Some("postgres://r:pw@127.0.0.1:5433/x".into()),
            alert_webhook: Some("http://127.0.0.1:9/alert".into()),
            admin_token: Some("0123456789abcdef0123".into()),
            allow_open_admin: true,
            trusted_proxies: vec![
                "127.0.0.1/32".parse().unwrap(),
                "10.0.0.0/8".parse().unwrap(),
            ],
            limits: Limits {
                max_connections: 7,
                header_read_timeout: Duration::from_millis(250),
                idle_timeout: Duration::from_secs(90),
                body_timeout: Duration::from_secs(3),
            },
            ..ServeConfig::new(
                Strategy::RedisLua,
                "127.0.0.1:0".parse().unwrap(),
                "postgres://postgres:secret@127.0.0.1:5432/shop",
                "redis://127.0.0.1:6379",
                knobs,
            )
        }
    }

    #[test]
    fn a_serve_config_reads_back_as_written() {
        let config = busy();
        let back = ServeConfig::from_json(&config.to_json()).unwrap();
        assert_eq!(back, config);
        let plain = ServeConfig::new(
            Strategy::Naive,
            "127.0.0.1:8080".parse().unwrap(),
            "mysql://root@127.0.0.1:3306/x",
            "redis://127.0.0.1:6379",
            ShopKnobs::default(),
        );
        assert_eq!(ServeConfig::from_json(&plain.to_json()).unwrap(), plain);
    }

    #[test]
    fn a_short_document_keeps_serves_defaults() {
        let text = r#"{"strategy": "for-update", "listen": "127.0.0.1:0",
            "database_url": "postgres://127.0.0.1/x", "redis_url": "redis://127.0.0.1",
            "knobs": {"pool_size": 3}, "limits": {"idle_timeout": "5s"}}"#;
        let config = ServeConfig::from_json(text).unwrap();
        assert_eq!(config.redis_prefix, DEFAULT_REDIS_PREFIX);
        assert_eq!(config.knobs.pool_size, 3);
        assert_eq!(config.knobs.work, ShopKnobs::default().work);
        assert_eq!(config.limits.idle_timeout, Duration::from_secs(5));
        assert_eq!(
            config.limits.max_connections,
            Limits::default().max_connections
        );
        assert_eq!(config.admin_token, None);
    }

    #[test]
    fn a_bad_document_is_refused_naming_the_place_and_never_quoting_a_value() {
        let unknown = r#"{"strategy": "naive", "listen": "127.0.0.1:0", "databse_url": "x"}"#;
        let e = ServeConfig::from_json(unknown).unwrap_err();
        assert!(e.contains("databse_url") && e.contains("line 1"), "{e}");
        let typed = r#"{"strategy": "naive", "listen": "127.0.0.1:0",
            "database_url": "postgres://u:hunter22@h/x", "redis_url": "r", "allow_open_admin":
            "postgres://u:hunter22@h/x"}"#;
        let e = ServeConfig::from_json(typed).unwrap_err();
        assert!(!e.contains("hunter22") && e.contains("line 3"), "{e}");
        let debug = format!("{:?}", busy());
        assert!(
            !debug.contains("secret") && !debug.contains("0123456789"),
            "{debug}"
        );
    }

    #[test]
    fn the_shop_config_carries_every_setting_of_the_document() {
        let doc = busy();
        let c = doc.shop_config();
        assert_eq!(c.strategy, Strategy::RedisLua);
        assert_eq!(c.pool.max_connections, 33);
        assert_eq!(c.redis.prefix, "t-42");
        assert_eq!(c.replica_database_url, doc.replica_database_url);
        assert_eq!(c.pipeline.reconcile.webhook, doc.alert_webhook);
        assert_eq!(c.admin_token, doc.admin_token);
        assert_eq!(c.limits, doc.limits);
        assert!(
            c.redis.url.starts_with("redis+cluster://"),
            "{}",
            c.redis.url
        );
    }
}
