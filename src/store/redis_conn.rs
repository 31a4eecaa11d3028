//! One Redis connection type for a single Redis and for Redis Cluster.
//!
//! The URL decides: `redis://host:port` (or `rediss://`, `unix://`) is one Redis;
//! `redis+cluster://host:port[,host:port...]` (or `rediss+cluster://`) is a cluster reached
//! through any of the listed nodes. `--redis-cluster` turns a `redis://` URL into its
//! `redis+cluster://` spelling ([`with_cluster`]), so everything downstream only looks at the
//! URL.
//!
//! [`RedisConn`] implements [`ConnectionLike`], so commands, pipelines and scripts run on it
//! unchanged; on a cluster each is routed by its key's slot (a sale's keys share one hash
//! tag, see `inventory::redis_lua::keys`), follows MOVED/ASK and refreshes the slot map after a failover.
//! Node-level commands (INFO, CONFIG GET, SCAN) go to every master through
//! [`RedisConn::on_each_master`] and [`RedisConn::on_node`].
//!
//! A cluster connection heals itself: when a command times out or its connection breaks, a
//! fresh cluster connection (a new slot map, new node connections) replaces it for every clone,
//! once. The library's own recovery can stall after a failover (every command timing out
//! while its slot refresh waits), and a fresh connection is what gets the shop through it.

use crate::telemetry::shop_metrics;
use redis::aio::{ConnectionLike, ConnectionManager, MultiplexedConnection};
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, ResponsePolicy, RoutingInfo, SingleNodeRoutingInfo,
};
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Connection set-up time, per node.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Response time of one command when the caller sets none.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a Redis URL points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Topology {
    /// One Redis: its URL.
    Single(String),
    /// A cluster: one `redis://` URL per seed node.
    Cluster(Vec<String>),
}

/// `url` read as one Redis or a cluster. A cluster URL names at least one `host:port`; the
/// user, password, database path and query apply to every node.
pub fn topology(url: &str) -> RedisResult<Topology> {
    let (scheme, rest) = match url.split_once("://") {
        Some((s @ ("redis+cluster" | "rediss+cluster"), rest)) => (s, rest),
        _ => return Ok(Topology::Single(url.to_string())),
    };
    let node_scheme = scheme.trim_end_matches("+cluster");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (userinfo, hosts) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let nodes: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(|h| format!("{node_scheme}://{userinfo}{h}{tail}"))
        .collect();
    if nodes.is_empty() {
        return Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "a redis+cluster:// URL names no node",
            format!(
                "expected redis+cluster://host:port[,host:port...], got {}",
                crate::services::redact_url(url)
            ),
        )));
    }
    Ok(Topology::Cluster(nodes))
}

/// Whether `url` names a cluster.
pub fn is_cluster(url: &str) -> bool {
    matches!(topology(url), Ok(Topology::Cluster(_)))
}

/// `url`, in its cluster spelling when `cluster` is set (`redis://` → `redis+cluster://`,
/// `rediss://` → `rediss+cluster://`); a cluster URL, or `cluster` unset, is returned as is.
pub fn with_cluster(url: &str, cluster: bool) -> String {
    if !cluster || is_cluster(url) {
        return url.to_string();
    }
    for scheme in ["redis", "rediss"] {
        if let Some(rest) = url.strip_prefix(&format!("{scheme}://")) {
            return format!("{scheme}+cluster://{rest}");
        }
    }
    url.to_string()
}

/// The URL of one node (`host:port`) of the Redis `url` names, with its credentials: for a
/// cluster, the seed nodes' scheme, user and password; for one Redis, `url` itself.
pub fn node_url(url: &str, node: &str) -> String {
    match topology(url) {
        Ok(Topology::Cluster(nodes)) => {
            let first = &nodes[0];
            let (scheme, rest) = first.split_once("://").unwrap_or(("redis", first));
            let user = rest
                .split(['/', '?'])
                .next()
                .and_then(|a| a.rsplit_once('@'))
                .map(|(u, _)| format!("{u}@"))
                .unwrap_or_default();
            format!("{scheme}://{user}{node}")
        }
        _ => url.to_string(),
    }
}

/// A connection to one Redis or to a cluster.
#[derive(Clone)]
pub enum RedisConn {
    /// One Redis, reconnecting by itself (the shop's shared connection).
    Managed(ConnectionManager),
    /// One Redis, one multiplexed connection (dedicated or one-off).
    Plain(MultiplexedConnection),
    /// A cluster: a connection per node, routed by slot, following redirections.
    Cluster(HealingCluster),
}

/// A cluster connection shared by its clones, replaced by a fresh one when a command on it
/// times out or its connection breaks.
#[derive(Clone)]
pub struct HealingCluster {
    client: Arc<ClusterClient>,
    /// The connection in use and its generation (bumped at each replacement).
    current: Arc<Mutex<(u64, ClusterConnection)>>,
    /// Held while a replacement connects, so one failure burst replaces it once.
    replacing: Arc<tokio::sync::Mutex<()>>,
}

impl HealingCluster {
    async fn connect(client: ClusterClient) -> RedisResult<HealingCluster> {
        let conn = client.get_async_connection().await?;
        Ok(HealingCluster {
            client: Arc::new(client),
            current: Arc::new(Mutex::new((0, conn))),
            replacing: Arc::default(),
        })
    }

    fn get(&self) -> (u64, ClusterConnection) {
        let g = self.current.lock().unwrap_or_else(|e| e.into_inner());
        (g.0, g.1.clone())
    }

    /// After `result` on the connection of generation `gen`: a timeout or a broken connection
    /// replaces it (unless a newer one already did).
    async fn heal<T>(&self, gen: u64, result: &RedisResult<T>) {
        let Err(e) = result else { return };
        if !(e.is_timeout() || e.is_io_error() || e.is_connection_dropped()) {
            return;
        }
        let _one = self.replacing.lock().await;
        if self.get().0 != gen {
            return;
        }
        match self.client.get_async_connection().await {
            Ok(fresh) => {
                tracing::warn!(error = %e, "Redis Cluster: replaced the cluster connection");
                metrics::counter!(shop_metrics::REDIS_CLUSTER_RECONNECTS).increment(1);
                *self.current.lock().unwrap_or_else(|e| e.into_inner()) = (gen + 1, fresh);
            }
            Err(err) => {
                tracing::warn!(error = %err, "Redis Cluster: reconnecting failed; retrying on the next error")
            }
        }
    }
}

/// How a connection behaves.
#[derive(Debug, Clone, Copy)]
pub struct ConnOptions {
    /// Longest wait for one reply (must exceed any BLOCK the connection carries).
    pub response_timeout: Duration,
    /// Reconnect by itself (a single Redis: a connection manager; a cluster always does).
    pub managed: bool,
}

impl Default for ConnOptions {
    fn default() -> Self {
        ConnOptions {
            response_timeout: RESPONSE_TIMEOUT,
            managed: false,
        }
    }
}

impl RedisConn {
    /// A one-off connection to `url` (default timeouts).
    pub async fn open(url: &str) -> RedisResult<RedisConn> {
        Self::open_with(url, ConnOptions::default()).await
    }

    /// A connection to `url` behaving as `opts` says.
    pub async fn open_with(url: &str, opts: ConnOptions) -> RedisResult<RedisConn> {
        match topology(url)? {
            Topology::Single(url) => {
                let client = redis::Client::open(url.as_str())?;
                if opts.managed {
                    let config = redis::aio::ConnectionManagerConfig::new()
                        .set_connection_timeout(Some(CONNECT_TIMEOUT))
                        .set_response_timeout(Some(opts.response_timeout))
                        .set_number_of_retries(2);
                    let conn = ConnectionManager::new_with_config(client, config).await?;
                    Ok(RedisConn::Managed(conn))
                } else {
                    let cfg = redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(CONNECT_TIMEOUT))
                        .set_response_timeout(Some(opts.response_timeout));
                    let conn = client
                        .get_multiplexed_async_connection_with_config(&cfg)
                        .await?;
                    Ok(RedisConn::Plain(conn))
                }
            }
            Topology::Cluster(nodes) => {
                // Retries cover a failover: MOVED, then a refreshed slot map, within about a
                // few seconds (10 ms doubling, capped at 1 s); past that the caller sees the
                // error (the shop answers 503, the consumer backs off and reconnects).
                let client = ClusterClientBuilder::new(nodes)
                    .connection_timeout(CONNECT_TIMEOUT)
                    .response_timeout(opts.response_timeout)
                    .overall_response_timeout(Some(opts.response_timeout))
                    .retries(8)
                    .min_retry_wait(10)
                    .max_retry_wait(1000)
                    .build()?;
                Ok(RedisConn::Cluster(HealingCluster::connect(client).await?))
            }
        }
    }

    /// Whether this is a cluster connection.
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisConn::Cluster(_))
    }

    /// Runs `cmd` on every master (one Redis: on it, named `""`): each master's address
    /// (`host:port`) and its own answer, an error reply kept as that node's `Err`.
    pub async fn on_each_master(
        &mut self,
        cmd: &Cmd,
    ) -> RedisResult<Vec<(String, RedisResult<Value>)>> {
        let RedisConn::Cluster(c) = self else {
            return Ok(vec![(String::new(), cmd.query_async(self).await)]);
        };
        let routing = RoutingInfo::MultiNode((
            MultipleNodeRoutingInfo::AllMasters,
            Some(ResponsePolicy::Special),
        ));
        let (gen, mut conn) = c.get();
        let reply = conn.route_command(cmd.clone(), routing).await;
        c.heal(gen, &reply).await;
        let reply = reply?;
        let Value::Map(pairs) = reply else {
            return Err(RedisError::from((
                ErrorKind::Client,
                "a command sent to every master did not answer per node",
                format!("{reply:?}"),
            )));
        };
        Ok(pairs
            .into_iter()
            .map(|(node, value)| {
                let node: String = redis::from_redis_value(node).unwrap_or_default();
                let value = match value {
                    Value::ServerError(e) => Err(RedisError::from(e)),
                    v => Ok(v),
                };
                (node, value)
            })
            .collect())
    }

    /// Runs `cmd` on the node `node` (`host:port`, as [`RedisConn::on_each_master`] names
    /// it); one Redis ignores `node`.
    pub async fn on_node(&mut self, node: &str, cmd: &Cmd) -> RedisResult<Value> {
        let RedisConn::Cluster(c) = self else {
            return cmd.query_async(self).await;
        };
        let (host, port) = node
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
            .ok_or_else(|| {
                RedisError::from((
                    ErrorKind::Client,
                    "not a cluster node address",
                    node.to_string(),
                ))
            })?;
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port });
        let (gen, mut conn) = c.get();
        let reply = conn.route_command(cmd.clone(), routing).await;
        c.heal(gen, &reply).await;
        reply
    }
}

impl ConnectionLike for RedisConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RedisConn::Managed(c) => c.req_packed_command(cmd),
            RedisConn::Plain(c) => c.req_packed_command(cmd),
            RedisConn::Cluster(c) => Box::pin(async move {
                let (gen, mut conn) = c.get();
                let reply = conn.req_packed_command(cmd).await;
                c.heal(gen, &reply).await;
                reply
            }),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RedisConn::Managed(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConn::Plain(c) => c.req_packed_commands(pipeline, offset, count),
            RedisConn::Cluster(c) => Box::pin(async move {
                let (gen, mut conn) = c.get();
                let reply = conn.req_packed_commands(pipeline, offset, count).await;
                c.heal(gen, &reply).await;
                reply
            }),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConn::Managed(c) => c.get_db(),
            RedisConn::Plain(c) => c.get_db(),
            RedisConn::Cluster(_) => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_url_names_every_seed_node_with_its_credentials() {
        assert_eq!(
            topology("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001/0?protocol=3").unwrap(),
            Topology::Cluster(vec![
                "redis://:pw@10.0.0.1:7000/0?protocol=3".into(),
                "redis://:pw@10.0.0.2:7001/0?protocol=3".into(),
            ])
        );
        assert_eq!(
            topology("rediss+cluster://h:1").unwrap(),
            Topology::Cluster(vec!["rediss://h:1".into()])
        );
        assert_eq!(
            topology("redis://127.0.0.1:6379").unwrap(),
            Topology::Single("redis://127.0.0.1:6379".into())
        );
        let e = topology("redis+cluster://,/").unwrap_err().to_string();
        assert!(e.contains("redis+cluster://host:port"), "{e}");
    }

    #[test]
    fn the_flag_turns_a_url_into_its_cluster_spelling() {
        assert_eq!(
            with_cluster("redis://127.0.0.1:7000", true),
            "redis+cluster://127.0.0.1:7000"
        );
        assert_eq!(with_cluster("rediss://h:1", true), "rediss+cluster://h:1");
        assert_eq!(with_cluster("redis://h:1", false), "redis://h:1");
        assert_eq!(
            with_cluster("redis+cluster://h:1,h:2", true),
            "redis+cluster://h:1,h:2"
        );
        assert!(is_cluster("redis+cluster://h:1"));
        assert!(!is_cluster("redis://h:1"));
    }

    #[test]
    fn a_node_url_keeps_the_clusters_credentials() {
        assert_eq!(
            node_url("redis+cluster://u:pw@h:1,h:2/0", "10.0.0.9:7005"),
            "redis://u:pw@10.0.0.9:7005"
        );
        assert_eq!(node_url("redis://h:1", "x:2"), "redis://h:1");
    }
}
