//! The item stream's bookkeeping in Redis: backlog (lag and pending, O(1)), the low-water
//! candidate, trimming, reconciliation's Redis half and dead letters.
//!
//! Nothing here reads the stream's tail except `lua/reconcile.lua`, whose tail is the entries
//! after the database's low-water mark: the unapplied backlog (applied entries are trimmed).

use super::{RedisLua, StoredOrder, GROUP};
use crate::inventory::InventoryError;
use crate::store::{format_stream_id, stream_id, stream_id_before, ReconcileSnapshot};
use redis::streams::{StreamInfoGroupsReply, StreamInfoStreamReply, StreamPendingReply};
use redis::AsyncCommands;
use serde::Serialize;
use std::collections::HashSet;

/// Order state `lua/deadletter.lua` writes into the orders hash.
pub const DEAD_LETTERED: &str = "dead_lettered";

/// How far the persistence consumers are behind, read in O(1) from `XINFO GROUPS`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    /// Entries not yet delivered to any consumer (Redis 7's `lag`). When Redis cannot tell
    /// (`lag` is null), the stream's length: an upper bound.
    pub lag: u64,
    /// Entries delivered but not yet acknowledged.
    pub pending: u64,
    /// False when `lag` is the upper bound.
    pub lag_exact: bool,
    /// Every entry has been delivered (exact even when `lag` is not).
    pub delivered_all: bool,
}

impl Backlog {
    /// Every entry persisted (or dead-lettered) and acknowledged.
    pub fn drained(&self) -> bool {
        self.delivered_all && self.pending == 0
    }
}

/// What `lua/reconcile.lua` found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RedisReconcile {
    pub redis_stock: i64,
    pub expected: i64,
    /// Redis stock minus what it should be.
    pub residual: i64,
    /// The correction was held back (see the script).
    pub deferred: bool,
    /// Entries counted as in flight.
    pub in_flight: i64,
}

/// One entry of an item's dead-letter stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeadLetter {
    /// The entry's id in the item's event stream.
    pub stream_id: String,
    /// `order`, `pay`, `cancel`, `expire` (`None` for an entry that could not be decoded).
    pub kind: Option<crate::store::PersistKind>,
    pub order_id: String,
    /// The database's reason.
    pub reason: String,
    pub attempts: u32,
    /// The order's state in Redis when it was dead-lettered.
    pub was: String,
    /// Units given back to Redis stock by the dead-lettering.
    pub released: i64,
}

/// One entry to move to the dead-letter stream.
#[derive(Debug, Clone, Copy)]
pub struct ToDeadLetter<'a> {
    /// The entry's id in the item's event stream.
    pub entry_id: &'a str,
    /// The consumer it is pending on.
    pub consumer: &'a str,
    /// The database's reason (or ours).
    pub reason: &'a str,
    pub attempts: u32,
    /// Its order, when known.
    pub order_id: Option<&'a str>,
    /// The database has a row for the order: nothing is released.
    pub db_has_order: bool,
}

/// A dead-lettering that happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLettered {
    /// Units given back to Redis stock.
    pub released: i64,
}

impl RedisLua {
    /// Lag and pending of the item's stream: one `XINFO GROUPS` (plus `XINFO STREAM` only when
    /// Redis cannot give the lag). Never reads the tail.
    pub async fn backlog(&self, item: i64) -> Result<Backlog, InventoryError> {
        let keys = self.keys(item);
        let mut conn = self.conn.clone();
        let groups: redis::RedisResult<StreamInfoGroupsReply> =
            conn.xinfo_groups(&keys.events).await;
        let groups = match groups {
            Ok(g) => g,
            Err(e) if no_such_key(&e) => {
                return Ok(Backlog {
                    lag_exact: true,
                    delivered_all: true,
                    ..Backlog::default()
                })
            }
            Err(e) => return Err(e.into()),
        };
        let group = groups.groups.iter().find(|g| g.name == GROUP);
        if let Some(g) = group {
            if let Some(lag) = g.lag {
                return Ok(Backlog {
                    lag: lag as u64,
                    pending: g.pending as u64,
                    lag_exact: true,
                    delivered_all: lag == 0,
                });
            }
        }
        let info: StreamInfoStreamReply = conn.xinfo_stream(&keys.events).await?;
        let delivered = group.map(|g| stream_id(&g.last_delivered_id));
        let delivered_all = delivered.is_some_and(|d| d >= stream_id(&info.last_generated_id));
        Ok(Backlog {
            lag: if delivered_all { 0 } else { info.length as u64 },
            pending: group.map_or(0, |g| g.pending as u64),
            lag_exact: delivered_all,
            delivered_all,
        })
    }

    /// True when every event on the item's stream has been persisted and acknowledged.
    pub async fn drained(&self, item: i64) -> Result<bool, InventoryError> {
        Ok(self.backlog(item).await?.drained())
    }

    /// Whether a consumer of the item's group other than `me` holds entries it has not
    /// acknowledged yet (a batch of its own in flight).
    pub async fn pending_elsewhere(&self, item: i64, me: &str) -> Result<bool, InventoryError> {
        let keys = self.keys(item);
        let reply: redis::RedisResult<StreamPendingReply> = redis::cmd("XPENDING")
            .arg(&keys.events)
            .arg(GROUP)
            .query_async(&mut self.conn.clone())
            .await;
        Ok(match reply {
            Ok(StreamPendingReply::Data(p)) => {
                p.consumers.iter().any(|c| c.name != me && c.pending > 0)
            }
            Ok(_) => false,
            Err(e) if no_such_key(&e) || e.code() == Some("NOGROUP") => false,
            Err(e) => return Err(e.into()),
        })
    }

    /// The highest stream id at or below which every entry has been acknowledged (hence
    /// committed or dead-lettered): just below the group's smallest pending id, or the group's
    /// last delivered id when nothing is pending. Both read in one MULTI, so no delivery can
    /// fall between them. `None` when the stream or the group does not exist.
    pub async fn low_water_candidate(&self, item: i64) -> Result<Option<String>, InventoryError> {
        let keys = self.keys(item);
        let reply: redis::RedisResult<(StreamPendingReply, StreamInfoGroupsReply)> = redis::pipe()
            .atomic()
            .cmd("XPENDING")
            .arg(&keys.events)
            .arg(GROUP)
            .cmd("XINFO")
            .arg("GROUPS")
            .arg(&keys.events)
            .query_async(&mut self.conn.clone())
            .await;
        let (pending, groups) = match reply {
            Ok(r) => r,
            Err(e) if no_such_key(&e) || e.code() == Some("NOGROUP") => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        Ok(match pending {
            StreamPendingReply::Data(p) => {
                Some(format_stream_id(stream_id_before(stream_id(&p.start_id))))
            }
            _ => groups
                .groups
                .into_iter()
                .find(|g| g.name == GROUP)
                .map(|g| g.last_delivered_id),
        })
    }

    /// Trims the item's stream below `mark` (`lua/trim.lua`); `mark` must be one the database
    /// has committed. Returns the entries removed.
    pub async fn trim(&self, item: i64, mark: &str) -> Result<u64, InventoryError> {
        let keys = self.keys(item);
        let n: u64 = self
            .scripts
            .trim
            .key(&keys.events)
            .key(&keys.trimmed)
            .key(&keys.dead_ids)
            .arg(mark)
            .invoke_async(&mut self.conn.clone())
            .await?;
        Ok(n)
    }

    /// Runs `lua/reconcile.lua` against a database snapshot, correcting Redis when `correct`
    /// is set and nothing defers it. `None` when the item is not warmed.
    pub async fn reconcile(
        &self,
        item: i64,
        snapshot: &ReconcileSnapshot,
        correct: bool,
    ) -> Result<Option<RedisReconcile>, InventoryError> {
        let keys = self.keys(item);
        let mut call = self.scripts.reconcile.prepare_invoke();
        call.key(&keys.stock)
            .key(&keys.events)
            .key(&keys.orders)
            .key(&keys.dead_ids)
            .key(&keys.trimmed)
            .arg(snapshot.db_stock)
            .arg(&snapshot.mark)
            .arg(if correct { "1" } else { "0" })
            .arg(GROUP);
        for id in &snapshot.applied_above {
            call.arg(id);
        }
        let (current, expected, residual, deferred, in_flight): (i64, i64, i64, i64, i64) =
            call.invoke_async(&mut self.conn.clone()).await?;
        let not_warmed = current < 0 && expected == 0 && residual == 0;
        Ok((!not_warmed).then_some(RedisReconcile {
            redis_stock: current,
            expected,
            residual,
            deferred: deferred == 1,
            in_flight,
        }))
    }

    /// Moves one entry pending on its consumer to the dead-letter stream
    /// (`lua/deadletter.lua`), releasing its order's units unless the database has the order.
    /// `None` when the entry is no longer pending on that consumer (claimed by another):
    /// nothing was done.
    pub async fn dead_letter(
        &self,
        item: i64,
        e: ToDeadLetter<'_>,
    ) -> Result<Option<DeadLettered>, InventoryError> {
        let keys = self.keys(item);
        let mut conn = self.conn.clone();
        let stored: Option<String> = match e.order_id {
            Some(o) => conn.hget(&keys.orders, o).await?,
            None => None,
        };
        let mut call = self.scripts.dead_letter.prepare_invoke();
        for key in keys.dead_letter() {
            call.key(key);
        }
        let (code, released): (i64, i64) = call
            .arg(e.entry_id)
            .arg(GROUP)
            .arg(e.consumer)
            .arg(e.reason)
            .arg(e.attempts)
            .arg(if e.db_has_order { "0" } else { "1" })
            .invoke_async(&mut conn)
            .await?;
        if code != 1 {
            return Ok(None);
        }
        if released > 0 {
            if let Some(o) = stored.and_then(|r| serde_json::from_str::<StoredOrder>(&r).ok()) {
                let dev = (!o.d.is_empty()).then_some(o.d.as_str());
                self.gateway
                    .record_holding(item, &o.u, dev, &o.i, -released);
            }
        }
        Ok(Some(DeadLettered { released }))
    }

    /// Which of `order_ids` are dead-lettered (one `HMGET` of their states).
    pub async fn dead_lettered_orders(
        &self,
        item: i64,
        order_ids: &[&str],
    ) -> Result<HashSet<String>, InventoryError> {
        if order_ids.is_empty() {
            return Ok(HashSet::new());
        }
        let raw: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(self.keys(item).orders)
            .arg(order_ids)
            .query_async(&mut self.conn.clone())
            .await?;
        Ok(order_ids
            .iter()
            .zip(raw)
            .filter(|(_, r)| {
                r.as_deref()
                    .and_then(|r| serde_json::from_str::<StoredOrder>(r).ok())
                    .is_some_and(|o| o.s == DEAD_LETTERED)
            })
            .map(|(id, _)| id.to_string())
            .collect())
    }

    /// How many entries the item's dead-letter stream holds.
    pub async fn dead_letter_count(&self, item: i64) -> Result<u64, InventoryError> {
        Ok(self.conn.clone().xlen(self.keys(item).dead_letters).await?)
    }
}

/// Reads up to `limit` entries of a dead-letter stream, oldest first (any connection: the
/// runner's oracle reads them after a run).
pub async fn read_dead_letters<C: redis::aio::ConnectionLike + Send>(
    conn: &mut C,
    key: &str,
    limit: usize,
) -> redis::RedisResult<Vec<DeadLetter>> {
    let reply: redis::streams::StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .arg("COUNT")
        .arg(limit)
        .query_async(conn)
        .await?;
    Ok(reply
        .ids
        .iter()
        .map(|e| {
            let text = |k: &str| e.get::<String>(k).unwrap_or_default();
            DeadLetter {
                stream_id: text("stream_id"),
                kind: crate::store::PersistKind::parse(&text("type")),
                order_id: text("order"),
                reason: text("reason"),
                attempts: text("attempts").parse().unwrap_or(0),
                was: text("was"),
                released: text("released").parse().unwrap_or(0),
            }
        })
        .collect())
}

fn no_such_key(e: &redis::RedisError) -> bool {
    e.to_string().to_ascii_lowercase().contains("no such key")
}
