//! `redis-failover` and `redis-takeover`: on a run whose Redis is a cluster, the master that
//! holds the sale's slot hands it to its replica mid-sale.
//!
//! - `redis-failover`: `CLUSTER FAILOVER` sent to the replica. The master stops taking writes,
//!   the replica catches up to its replication offset, then takes over: nothing acknowledged is
//!   lost by design, and clients see a short pause and MOVED redirections.
//! - `redis-takeover`: `CLUSTER FAILOVER TAKEOVER` sent to the replica: it takes the slot at
//!   once, without waiting for the master or the other masters' agreement (what an operator
//!   does when the master is gone). Writes the master acknowledged that the replica had not
//!   received yet, and any the old master acknowledges before it hears of the new epoch, are
//!   lost when it turns into a replica and resynchronises.
//!
//! The fault is instantaneous: its window runs from the command until the replica reports
//! itself master of the slot (at most [`SWITCH_LIMIT`]). The run's `--redis-durability` decides
//! what the 201s were worth.

use super::hold::Hold;
use crate::store::redis_conn::node_url;
use crate::store::redis_conn::RedisConn;
use anyhow::{bail, Context};
use std::time::Duration;
use tokio::time::Instant;

/// The longest the replica may take to report itself master.
pub const SWITCH_LIMIT: Duration = Duration::from_secs(15);

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    /// `host:port` (the client port).
    pub addr: String,
    pub master: bool,
    /// The master's id, for a replica.
    pub master_id: Option<String>,
    /// Flagged `fail` or `fail?`.
    pub failing: bool,
    /// Slot ranges served, inclusive.
    pub slots: Vec<(u16, u16)>,
}

/// Parses a `CLUSTER NODES` reply (`<id> <ip:port@cport[,hostname]> <flags> <master> <ping>
/// <pong> <epoch> <link> <slot>...`); lines it cannot read are skipped.
pub fn parse_nodes(text: &str) -> Vec<Node> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let addr = f[1].split(['@', ',']).next()?.to_string();
            let flags: Vec<&str> = f[2].split(',').collect();
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|n| (n, n)),
                })
                .collect();
            Some(Node {
                id: f[0].to_string(),
                addr,
                master: flags.contains(&"master"),
                master_id: (f[3] != "-").then(|| f[3].to_string()),
                failing: flags.iter().any(|x| x.starts_with("fail")),
                slots,
            })
        })
        .collect()
}

/// The master serving `slot`, if any.
fn master_serving(nodes: &[Node], slot: u16) -> Option<&Node> {
    nodes
        .iter()
        .find(|n| n.master && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
}

/// The master serving `slot` and a healthy replica of it.
pub fn master_and_replica(nodes: &[Node], slot: u16) -> anyhow::Result<(Node, Node)> {
    let master = master_serving(nodes, slot)
        .with_context(|| format!("no master serves slot {slot} (CLUSTER NODES)"))?;
    let replica = nodes
        .iter()
        .find(|n| !n.master && !n.failing && n.master_id.as_deref() == Some(&master.id))
        .with_context(|| {
            format!(
                "master {} (slot {slot}) has no healthy replica to fail over to",
                master.addr
            )
        })?;
    Ok((master.clone(), replica.clone()))
}

/// The hash slot of `key` and the cluster's nodes, read from the cluster itself.
async fn slot_and_nodes(conn: &mut RedisConn, key: &str) -> anyhow::Result<(u16, Vec<Node>)> {
    let slot: u16 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query_async(conn)
        .await
        .with_context(|| format!("CLUSTER KEYSLOT {key}"))?;
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(conn)
        .await
        .context("CLUSTER NODES")?;
    Ok((slot, parse_nodes(&nodes)))
}

/// The `host:port` of the master serving `key` on the cluster `conn` is connected to.
pub async fn master_of(conn: &mut RedisConn, key: &str) -> anyhow::Result<String> {
    let (slot, nodes) = slot_and_nodes(conn, key).await?;
    master_serving(&nodes, slot)
        .map(|n| n.addr.clone())
        .with_context(|| format!("no master serves slot {slot} of {key} (CLUSTER NODES)"))
}

/// Fails the sale's master over to its replica (`takeover`: without the master's agreement),
/// at the fault's time; returns what was done.
pub(super) async fn failover(
    url: &str,
    stock: &str,
    takeover: bool,
    hold: &mut Hold,
) -> anyhow::Result<Option<String>> {
    let mut conn = RedisConn::open(url).await.with_context(|| {
        format!(
            "connecting to the cluster {}",
            crate::services::redact_url(url)
        )
    })?;
    if !conn.is_cluster() {
        bail!("the run's Redis is not a cluster (give --redis-cluster or a redis+cluster:// URL)");
    }
    let (slot, nodes) = slot_and_nodes(&mut conn, stock).await?;
    let (master, replica) = master_and_replica(&nodes, slot)?;
    let replica_url = node_url(url, &replica.addr);
    let mut to_replica = redis::Client::open(replica_url.as_str())?
        .get_multiplexed_async_connection()
        .await
        .with_context(|| format!("connecting to the replica {}", replica.addr))?;
    if !hold.start().await {
        return Ok(None);
    }
    let began = Instant::now();
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("FAILOVER");
    if takeover {
        cmd.arg("TAKEOVER");
    }
    let () = cmd
        .query_async(&mut to_replica)
        .await
        .with_context(|| format!("CLUSTER FAILOVER on the replica {}", replica.addr))?;
    loop {
        let role: Vec<redis::Value> = redis::cmd("ROLE").query_async(&mut to_replica).await?;
        let is_master = role
            .first()
            .and_then(|v| redis::from_redis_value_ref::<String>(v).ok())
            .is_some_and(|r| r == "master");
        if is_master {
            break;
        }
        if began.elapsed() > SWITCH_LIMIT {
            bail!(
                "the replica {} did not become master within {} s of CLUSTER FAILOVER",
                replica.addr,
                SWITCH_LIMIT.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Some(format!(
        "CLUSTER FAILOVER{}: replica {} took slot {slot} over from master {} in {} ms",
        if takeover { " TAKEOVER" } else { "" },
        replica.addr,
        master.addr,
        began.elapsed().as_millis()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 master - 0 1 2 connected 5461-10922 [5462->-c3]
c3 127.0.0.1:7002@17002,host3 master - 0 1 3 connected 10923-16383
d4 127.0.0.1:7003@17003 slave a1 0 1 1 connected
e5 127.0.0.1:7004@17004 slave,fail b2 0 1 2 disconnected
f6 127.0.0.1:7005@17005 slave c3 0 1 3 connected
";

    #[test]
    fn cluster_nodes_are_read_with_their_slots_and_masters() {
        let nodes = parse_nodes(NODES);
        assert_eq!(nodes.len(), 6);
        assert_eq!(nodes[0].addr, "127.0.0.1:7000");
        assert_eq!(nodes[1].slots, vec![(5461, 10922)]);
        assert_eq!(nodes[2].addr, "127.0.0.1:7002");
        assert_eq!(nodes[3].master_id.as_deref(), Some("a1"));
        assert!(nodes[4].failing && !nodes[4].master);
    }

    #[test]
    fn the_slots_master_and_a_healthy_replica_are_found() {
        let nodes = parse_nodes(NODES);
        let (m, r) = master_and_replica(&nodes, 12000).unwrap();
        assert_eq!(
            (m.addr.as_str(), r.addr.as_str()),
            ("127.0.0.1:7002", "127.0.0.1:7005")
        );
        let e = master_and_replica(&nodes, 6000).unwrap_err().to_string();
        assert!(
            e.contains("127.0.0.1:7001") && e.contains("no healthy replica"),
            "{e}"
        );
    }
}
