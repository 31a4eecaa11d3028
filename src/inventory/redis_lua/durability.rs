//! What an acknowledged redis-lua order survives on the Redis side: `--redis-durability`, the
//! start-up check that Redis is configured the way the mode claims, and `wait-replica`'s WAIT.
//!
//! A redis-lua order is acknowledged (201) once the pre-deduct script has run in Redis; it
//! reaches the database a little later through the stream. Until then Redis alone holds it, so
//! what Redis promises about its own writes is what the client's 201 is worth:
//! - `none`: memory only. A Redis crash or restart loses the orders not yet persisted.
//! - `aof-everysec`: `appendonly yes`, `appendfsync everysec` (or `always`). A Redis process
//!   crash loses nothing; a machine crash loses up to about a second of them.
//! - `aof-always`: `appendonly yes`, `appendfsync always`: Redis fsyncs the AOF before it
//!   replies, so a 201 is on the Redis machine's disk.
//! - `wait-replica`: a 201 only after `WAIT 1 <--replica-wait>` says a replica holds the write
//!   (in its memory), so a failover to that replica keeps it. When no replica confirms in time
//!   the reservation is released at once (a cancel, restocked exactly once like any other) and
//!   the client gets `503 not_replicated`: nothing was acknowledged, and the unit is free again.
//!
//! On Redis Cluster the check runs on every master (a sale lives on one of them, and which one
//! changes with a failover), and `WAIT` rides in the same pipeline as the script, so it goes
//! to the node that holds the sale's keys.

use super::RedisConn;
use super::RedisLua;
use crate::inventory::InventoryError;
use crate::services::redact_url;
use crate::telemetry::shop_metrics;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The error Redis answers a call by SHA of a script it does not hold.
pub(super) const NOSCRIPT: redis::ErrorKind =
    redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);

/// `--redis-durability`: what an acknowledged order survives on the Redis side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Durability {
    /// Redis memory only: a Redis restart loses the orders not yet in the database.
    #[default]
    None,
    /// AOF fsynced every second: a machine crash loses up to about a second of orders.
    AofEverysec,
    /// AOF fsynced before every reply: an acknowledged order is on disk.
    AofAlways,
    /// 201 only after a replica confirmed the write (`WAIT`); else 503 and the unit released.
    WaitReplica,
}

impl Durability {
    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::None => "none",
            Durability::AofEverysec => "aof-everysec",
            Durability::AofAlways => "aof-always",
            Durability::WaitReplica => "wait-replica",
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Redis is not configured the way `--redis-durability` claims: the shop refuses to start.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "--redis-durability {mode} needs {needs}, but Redis at {url} has {found}; {fix}, or start \
     the shop with a --redis-durability that matches"
)]
pub struct DurabilityMismatch {
    pub mode: Durability,
    /// The setting the mode needs, e.g. `appendfsync always`.
    pub needs: String,
    /// What Redis reported, e.g. `appendfsync everysec`.
    pub found: String,
    /// How to configure Redis for the mode.
    pub fix: String,
    /// The Redis URL (password redacted).
    pub url: String,
}

/// What the start-up check established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// `none`: nothing to check.
    NothingToCheck,
    /// Redis reported the settings the mode needs.
    Verified,
    /// Redis refused to say (managed Redis often disables `CONFIG`): the mode is trusted as
    /// given, with this reason (the shop logs it as a warning).
    Unverifiable(String),
}

/// Checks that the Redis behind `conn` is configured as `mode` claims: `CONFIG GET appendonly`
/// and `appendfsync` for the AOF modes, `INFO replication`'s `connected_slaves` for
/// `wait-replica`; on a cluster, on every master (the first that falls short is named).
pub async fn check(
    conn: &mut RedisConn,
    url: &str,
    mode: Durability,
) -> Result<Checked, DurabilityMismatch> {
    let claim = Claim { mode, url };
    match mode {
        Durability::None => Ok(Checked::NothingToCheck),
        Durability::AofEverysec => check_aof(conn, &claim, &["everysec", "always"]).await,
        Durability::AofAlways => check_aof(conn, &claim, &["always"]).await,
        Durability::WaitReplica => check_replicas(conn, &claim).await,
    }
}

/// The mode claimed of the Redis at `url`: what a mismatch names.
struct Claim<'a> {
    mode: Durability,
    url: &'a str,
}

impl Claim<'_> {
    /// `node` (empty: the one Redis) falls short: it `needs` what it lacks, has `found`.
    fn mismatch(&self, node: &str, needs: &str, found: String, fix: &str) -> DurabilityMismatch {
        DurabilityMismatch {
            mode: self.mode,
            needs: needs.into(),
            found,
            fix: fix.into(),
            url: if node.is_empty() {
                redact_url(self.url)
            } else {
                format!("{} (master {node})", redact_url(self.url))
            },
        }
    }
}

/// `cmd`'s answer from every master (one Redis: itself), or why it could not be had (`what`
/// names the command in the reason).
async fn each_master<T: redis::FromRedisValue>(
    conn: &mut RedisConn,
    cmd: &redis::Cmd,
    what: &str,
) -> Result<Vec<(String, T)>, String> {
    let nodes = conn
        .on_each_master(cmd)
        .await
        .map_err(|e| format!("{what}: {e}"))?;
    nodes
        .into_iter()
        .map(
            |(node, got)| match got.and_then(|v| Ok(redis::from_redis_value(v)?)) {
                Ok(v) => Ok((node, v)),
                Err(e) => Err(format!("{what}{}: {e}", on(&node))),
            },
        )
        .collect()
}

/// `wait-replica`: every master has at least one connected replica.
async fn check_replicas(
    conn: &mut RedisConn,
    claim: &Claim<'_>,
) -> Result<Checked, DurabilityMismatch> {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("replication");
    let nodes: Vec<(String, String)> = match each_master(conn, &cmd, "INFO replication").await {
        Ok(n) => n,
        Err(why) => return Ok(Checked::Unverifiable(why)),
    };
    for (node, info) in nodes {
        let replicas = info_field(&info, "connected_slaves").unwrap_or("0");
        if replicas.parse::<u64>().unwrap_or(0) == 0 {
            return Err(claim.mismatch(
                &node,
                "at least one connected replica",
                format!("connected_slaves:{replicas}"),
                "start a replica with `redis-server --replicaof <primary host> <port>` \
                 (on a cluster: `redis-cli --cluster add-node NEW EXISTING \
                 --cluster-slave`) and wait until it is connected",
            ));
        }
    }
    Ok(Checked::Verified)
}

/// The AOF modes: every master has `appendonly yes` and one of `fsync_ok` (the first is what
/// the fix sets).
async fn check_aof(
    conn: &mut RedisConn,
    claim: &Claim<'_>,
    fsync_ok: &[&str],
) -> Result<Checked, DurabilityMismatch> {
    let mut config: Vec<(String, HashMap<String, String>)> = Vec::new();
    for name in ["appendonly", "appendfsync"] {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg(name);
        let nodes = match each_master(conn, &cmd, &format!("CONFIG GET {name}")).await {
            Ok(n) => n,
            Err(why) => return Ok(Checked::Unverifiable(why)),
        };
        for (node, got) in nodes {
            match config.iter_mut().find(|(n, _)| *n == node) {
                Some((_, c)) => c.extend(got),
                None => config.push((node, got)),
            }
        }
    }
    let fix = aof_fix(fsync_ok[0]);
    for (node, config) in &config {
        let get = |k: &str| config.get(k).cloned().unwrap_or_else(|| "(unset)".into());
        if get("appendonly") != "yes" {
            let found = format!("appendonly {}", get("appendonly"));
            return Err(claim.mismatch(node, "appendonly yes", found, &fix));
        }
        if !fsync_ok.contains(&get("appendfsync").as_str()) {
            let needs = format!("appendfsync {}", fsync_ok.join(" or "));
            let found = format!("appendfsync {}", get("appendfsync"));
            return Err(claim.mismatch(node, &needs, found, &fix));
        }
    }
    Ok(Checked::Verified)
}

/// How to turn the AOF on with `fsync`.
fn aof_fix(fsync: &str) -> String {
    format!(
        "start redis-server with `--appendonly yes --appendfsync {fsync}` (or run `CONFIG \
         SET appendonly yes`, `CONFIG SET appendfsync {fsync}` and `CONFIG REWRITE`)"
    )
}

/// ` on master host:port` for a cluster's node, nothing for one Redis.
fn on(node: &str) -> String {
    if node.is_empty() {
        String::new()
    } else {
        format!(" on master {node}")
    }
}

/// One `field:value` line of an `INFO` reply.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines()
        .filter_map(|l| l.trim().split_once(':'))
        .find(|(k, _)| *k == field)
        .map(|(_, v)| v)
}

impl RedisLua {
    /// `wait-replica`'s pre-deduct: the script and `WAIT 1 <replica wait>` in one pipeline on
    /// one connection, so the WAIT covers this very write (a separate call could land on a
    /// reconnected connection with nothing to wait for, and confirm nothing). Returns the
    /// script's answer and how many replicas confirmed.
    pub(super) async fn deduct_and_wait(
        &self,
        call: &redis::Cmd,
    ) -> Result<((i64, i64), i64), InventoryError> {
        let mut conn = self.conn.clone();
        let mut pipe = redis::pipe();
        pipe.add_command(call.clone())
            .cmd("WAIT")
            .arg(1)
            .arg(self.replica_wait.as_millis() as u64);
        Ok(match pipe.query_async(&mut conn).await {
            Err(e) if e.kind() == NOSCRIPT => {
                self.load_deduct(&mut conn).await?;
                pipe.query_async(&mut conn).await?
            }
            other => other?,
        })
    }
}

/// Whether a pay or release must be confirmed by a replica before it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Confirm {
    /// A client is told the new state: under `wait-replica`, only once a replica holds it.
    Replica,
    /// Nobody is told (an expiry, the release of an unreplicated reservation): no WAIT.
    No,
}

impl RedisLua {
    /// Runs the pay or release `script` on `keys` and `args`. Under `wait-replica` with
    /// [`Confirm::Replica`], `WAIT 1 <replica wait>` rides in the same pipeline (as for the
    /// pre-deduct: on a cluster it goes to the node that holds the keys), and when no replica
    /// confirmed in time the answer is [`InventoryError::NotReplicated`]: the move happened on
    /// the primary but a failover could lose it, so the client is not told it did; its retry
    /// is idempotent (and answered once a replica holds the state). `what` names the move.
    pub(super) async fn transition<T: redis::FromRedisValue>(
        &self,
        script: &redis::Script,
        keys: &[&str],
        args: &[&str],
        confirm: Confirm,
        what: &'static str,
    ) -> Result<T, InventoryError> {
        let mut call = redis::cmd("EVALSHA");
        call.arg(script.get_hash())
            .arg(keys.len())
            .arg(keys)
            .arg(args);
        let mut conn = self.conn.clone();
        if confirm == Confirm::No || self.durability != Durability::WaitReplica {
            return Ok(match call.query_async(&mut conn).await {
                Err(e) if e.kind() == NOSCRIPT => {
                    script.prepare_invoke().load_async(&mut conn).await?;
                    call.query_async(&mut conn).await?
                }
                other => other?,
            });
        }
        let mut pipe = redis::pipe();
        pipe.add_command(call)
            .cmd("WAIT")
            .arg(1)
            .arg(self.replica_wait.as_millis() as u64);
        let (answer, replicas): (T, i64) = match pipe.query_async(&mut conn).await {
            Err(e) if e.kind() == NOSCRIPT => {
                script.prepare_invoke().load_async(&mut conn).await?;
                pipe.query_async(&mut conn).await?
            }
            other => other?,
        };
        if replicas < 1 {
            metrics::counter!(shop_metrics::NOT_REPLICATED, "move" => what).increment(1);
            return Err(InventoryError::NotReplicated {
                what,
                waited_ms: self.replica_wait.as_millis() as u64,
            });
        }
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields_are_read_by_name() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=x\r\n";
        assert_eq!(info_field(info, "connected_slaves"), Some("2"));
        assert_eq!(info_field(info, "role"), Some("master"));
        assert_eq!(info_field(info, "missing"), None);
    }

    #[test]
    fn modes_are_spelled_as_the_flag_takes_them() {
        for m in [
            Durability::None,
            Durability::AofEverysec,
            Durability::AofAlways,
            Durability::WaitReplica,
        ] {
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{m}\""));
            let parsed = <Durability as clap::ValueEnum>::from_str(m.as_str(), false).unwrap();
            assert_eq!(parsed, m);
        }
    }
}
