//! The persistence consumer: reads an item's stream through the consumer group, writes each
//! batch in one database transaction, and acknowledges only after the commit. A crash between
//! commit and XACK replays the batch, which the idempotent writes in [`crate::store`] absorb.
//!
//! It must never die nor go silent:
//! - Any Redis error drops its connection; it reconnects with capped, jittered exponential
//!   backoff, and every blocking read carries a response timeout (block time plus a margin), so
//!   a connection killed or half-open is noticed. `oversell_consumer_up` (per item) and
//!   `oversell_consumer_errors_total{kind}` show it; each failure is logged at warn.
//! - Entries pending on any consumer longer than `claim_idle` (a dead one's) are claimed on a
//!   timer, whether the stream is busy or idle.
//! - Acknowledgements that failed are kept and retried before the next read.
//! - A database that is unavailable is retried forever; a database that refuses one entry is
//!   handled in [`super::batch`] (isolated, then dead-lettered).

use super::mark::MarkKeeper;
use super::PipelineSettings;
use crate::backoff::Backoff;
use crate::inventory::redis_lua::RedisConn;
use crate::inventory::redis_lua::{RedisLua, GROUP};
use crate::store::Store;
use crate::telemetry::shop_metrics;
use redis::streams::{StreamAutoClaimOptions, StreamId, StreamReadOptions};
use redis::AsyncCommands;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Added to the BLOCK time of a read to give its response timeout.
const READ_MARGIN: Duration = Duration::from_secs(2);
/// Pause before retrying entries the database refused (fewer than N times so far).
const REFUSED_RETRY: Duration = Duration::from_millis(100);

/// The bounded `kind` label of `oversell_consumer_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Connecting (or naming the connection) failed.
    Connect,
    /// The blocking read failed or timed out.
    Read,
    /// XAUTOCLAIM (or pruning idle consumers) failed.
    Claim,
    /// XACK failed (the ids are kept and retried).
    Ack,
    /// Another Redis call of the consumer failed (dead-lettering, the low-water mark, trimming).
    Redis,
    /// The database was unavailable (the batch is retried).
    DbUnavailable,
    /// The database refused an entry.
    DbRefused,
}

impl ErrorKind {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connect => "connect",
            ErrorKind::Read => "read",
            ErrorKind::Claim => "claim",
            ErrorKind::Ack => "ack",
            ErrorKind::Redis => "redis",
            ErrorKind::DbUnavailable => "db_unavailable",
            ErrorKind::DbRefused => "db_refused",
        }
    }
}

/// One item's persistence consumer.
pub struct Consumer {
    pub(super) redis: RedisLua,
    pub(super) store: Store,
    pub(super) item: i64,
    pub(super) settings: PipelineSettings,
    /// Its name in the consumer group.
    pub(super) name: String,
    key: String,
    conn: Option<RedisConn>,
    backoff: Backoff,
    /// Ids committed (or otherwise handled) but not yet acknowledged.
    pub(super) to_ack: Vec<String>,
    /// How many times the database refused each entry (isolated) so far.
    pub(super) refusals: HashMap<String, u32>,
    pub(super) marks: MarkKeeper,
    claim_cursor: String,
    /// redis-buckets: the bucket whose stream this is (`self.redis` is that bucket's view).
    pub(super) bucket: Option<u32>,
    /// redis-buckets: the other buckets' views of the item (whose streams may hold the release
    /// a batch of this one waits for).
    pub(super) siblings: Vec<RedisLua>,
    /// redis-buckets: the next read of this consumer's own pending entries also reads the new
    /// ones after them, in one batch (a batch waits for a release further on its own stream).
    pub(super) extend: bool,
    /// The `item` label of its metrics: the item, or `<item>/b<bucket>`.
    label: String,
}

impl Consumer {
    /// A consumer of `item`'s stream named `name` in the group (not connected yet).
    pub fn new(
        redis: RedisLua,
        store: Store,
        item: i64,
        settings: PipelineSettings,
        name: String,
    ) -> Self {
        let cap = settings.backoff_cap.min(settings.claim_idle / 2);
        Consumer {
            key: redis.keys(item).events,
            backoff: Backoff::new(Duration::from_millis(100), cap),
            marks: MarkKeeper::new(item, settings.trim_delay),
            redis,
            store,
            item,
            settings,
            name,
            conn: None,
            to_ack: Vec::new(),
            refusals: HashMap::new(),
            claim_cursor: "0-0".into(),
            bucket: None,
            siblings: Vec::new(),
            extend: false,
            label: item.to_string(),
        }
    }

    /// A consumer of bucket `bucket`'s stream of `item` (redis-buckets): `view` is that
    /// bucket's redis-lua view; orders go to the item's row, and the item's low-water mark is
    /// left alone (see [`crate::store::Store::apply_bucket_events`]). `siblings`: the other
    /// buckets' views.
    pub fn for_bucket(
        view: RedisLua,
        siblings: Vec<RedisLua>,
        store: Store,
        item: i64,
        bucket: u32,
        settings: PipelineSettings,
        name: String,
    ) -> Self {
        let mut c = Consumer::new(view, store, item, settings, name);
        c.marks = MarkKeeper::untracked(item, c.settings.trim_delay);
        c.bucket = Some(bucket);
        c.siblings = siblings;
        c.label = format!("{item}/b{bucket}");
        c
    }

    /// Runs until `shutdown`.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let item = self.item;
        let claim_every = (self.settings.claim_idle / 2).max(Duration::from_millis(100));
        // After a failure, re-read our own pending entries ("0") before new ones (">").
        let mut retry_own = true;
        let mut last_claim = Instant::now();
        let mut last_gauge = Instant::now()
            .checked_sub(Duration::from_secs(1))
            .unwrap_or_else(Instant::now);
        loop {
            if *shutdown.borrow() {
                break;
            }
            let wait = match self
                .step(&mut retry_own, &mut last_claim, claim_every)
                .await
            {
                Ok(wait) => {
                    self.backoff.reset();
                    wait
                }
                Err((kind, error)) => Some(self.failed(kind, &error)),
            };
            if last_gauge.elapsed() >= Duration::from_secs(1) {
                last_gauge = Instant::now();
                self.gauges().await;
            }
            if let Err(e) = self.marks.upkeep(&self.redis, &self.store).await {
                metrics::counter!(shop_metrics::CONSUMER_ERRORS, "kind" => ErrorKind::Redis.as_str())
                    .increment(1);
                tracing::warn!(item, error = %e, "low-water mark upkeep failed; will retry");
            }
            if let Some(wait) = wait {
                if sleep_or_stop(&mut shutdown, wait).await {
                    break;
                }
            }
        }
        metrics::gauge!(shop_metrics::CONSUMER_UP, "item" => self.label.clone()).set(0.0);
    }

    /// One round: connect, retry acknowledgements, claim on the timer, read, persist. Returns
    /// how long to pause before the next round, if at all.
    async fn step(
        &mut self,
        retry_own: &mut bool,
        last_claim: &mut Instant,
        claim_every: Duration,
    ) -> Result<Option<Duration>, (ErrorKind, String)> {
        self.ensure_conn()
            .await
            .map_err(|e| (ErrorKind::Connect, e.to_string()))?;
        self.ack()
            .await
            .map_err(|e| (ErrorKind::Ack, e.to_string()))?;
        let mut entries = Vec::new();
        if last_claim.elapsed() >= claim_every {
            *last_claim = Instant::now();
            entries = self
                .claim()
                .await
                .map_err(|e| (ErrorKind::Claim, e.to_string()))?;
        }
        if entries.is_empty() {
            if *retry_own && std::mem::take(&mut self.extend) {
                entries = self
                    .read_extended()
                    .await
                    .map_err(|e| (ErrorKind::Read, e.to_string()))?;
            } else {
                let start = if *retry_own { "0" } else { ">" };
                entries = self
                    .read(start)
                    .await
                    .map_err(|e| (ErrorKind::Read, e.to_string()))?;
            }
            if *retry_own && entries.is_empty() {
                *retry_own = false;
            }
        }
        if entries.is_empty() {
            return Ok(None);
        }
        match self.persist(&entries).await {
            Ok(p) => {
                self.ack()
                    .await
                    .map_err(|e| (ErrorKind::Ack, e.to_string()))?;
                *retry_own |= p.left_pending;
                if p.left_pending {
                    Ok(Some(REFUSED_RETRY))
                } else {
                    Ok(self.linger_after(entries.len()))
                }
            }
            Err(e) => {
                *retry_own = true;
                Err(e.kind_and_message())
            }
        }
    }

    /// The pause after persisting `persisted` entries: the linger when the batch was not full
    /// (the stream had no more waiting), so the next read finds more; none after a full one.
    fn linger_after(&self, persisted: usize) -> Option<Duration> {
        let linger = self.settings.linger;
        (persisted < self.settings.batch && !linger.is_zero()).then_some(linger)
    }

    /// Counts, logs and (for Redis) drops the connection; returns the backoff wait.
    fn failed(&mut self, kind: ErrorKind, error: &str) -> Duration {
        metrics::counter!(shop_metrics::CONSUMER_ERRORS, "kind" => kind.as_str()).increment(1);
        if kind != ErrorKind::DbUnavailable {
            // Any Redis error: the connection may be dead or half-open. Start afresh.
            self.conn = None;
            metrics::gauge!(shop_metrics::CONSUMER_UP, "item" => self.label.clone()).set(0.0);
        }
        let wait = self.backoff.next_wait();
        tracing::warn!(
            item = self.item,
            consumer = %self.name,
            kind = kind.as_str(),
            error = %error,
            failures = self.backoff.failures(),
            retry_in_ms = wait.as_millis() as u64,
            "persistence consumer failed; retrying"
        );
        wait
    }

    async fn ensure_conn(&mut self) -> Result<&mut RedisConn, crate::inventory::InventoryError> {
        if self.conn.is_none() {
            let timeout = self.settings.block + READ_MARGIN;
            let conn = self
                .redis
                .dedicated_conn(&format!("consumer:{}", self.label), timeout)
                .await?;
            if self.backoff.failures() > 0 {
                tracing::warn!(item = self.item, consumer = %self.name, "persistence consumer reconnected");
            }
            metrics::gauge!(shop_metrics::CONSUMER_UP, "item" => self.label.clone()).set(1.0);
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// Reads up to `batch` entries: new ones (`">"`) or this consumer's own pending ones
    /// (`"0"`), blocking at most `block` for new ones.
    pub async fn read(&mut self, start: &str) -> Result<Vec<StreamId>, redis::RedisError> {
        let opts = StreamReadOptions::default()
            .group(GROUP, &self.name)
            .count(self.settings.batch)
            .block(self.settings.block.as_millis() as usize);
        let key = self.key.clone();
        let conn = self.conn_or_connect().await?;
        let reply: redis::Value = conn.xread_options(&[&key], &[start], &opts).await?;
        stream_entries(reply)
    }

    /// All of this consumer's own pending entries (page after page), then up to `batch` new
    /// ones: in stream order, as one batch.
    async fn read_extended(&mut self) -> Result<Vec<StreamId>, redis::RedisError> {
        let mut entries: Vec<StreamId> = Vec::new();
        loop {
            let after = entries
                .last()
                .map_or_else(|| "0".to_string(), |e| e.id.clone());
            let page = self.read(&after).await?;
            if page.is_empty() {
                break;
            }
            entries.extend(page);
        }
        entries.extend(self.read(">").await?);
        Ok(entries)
    }

    /// Claims entries pending on any consumer for longer than `claim_idle` (XAUTOCLAIM, a
    /// cursor kept across calls), then removes idle consumers that hold nothing.
    pub async fn claim(&mut self) -> Result<Vec<StreamId>, redis::RedisError> {
        let (key, name, cursor) = (
            self.key.clone(),
            self.name.clone(),
            self.claim_cursor.clone(),
        );
        let claim_idle = self.settings.claim_idle;
        let min_idle = claim_idle.as_millis() as u64;
        let count = self.settings.batch;
        let conn = self.conn_or_connect().await?;
        let claimed: redis::streams::StreamAutoClaimReply = conn
            .xautoclaim_options(
                &key,
                GROUP,
                &name,
                min_idle,
                &cursor,
                StreamAutoClaimOptions::default().count(count),
            )
            .await?;
        prune_consumers(conn, &key, &name, claim_idle).await?;
        self.claim_cursor = claimed.next_stream_id;
        if !claimed.claimed.is_empty() {
            tracing::warn!(
                item = self.item,
                n = claimed.claimed.len(),
                "claimed entries left pending by another consumer"
            );
            metrics::counter!(shop_metrics::CLAIMED_ENTRIES)
                .increment(claimed.claimed.len() as u64);
        }
        Ok(claimed.claimed)
    }

    /// Acknowledges every id handled so far; on failure they are kept for the next try.
    pub async fn ack(&mut self) -> Result<(), redis::RedisError> {
        if self.to_ack.is_empty() {
            return Ok(());
        }
        let key = self.key.clone();
        let ids = std::mem::take(&mut self.to_ack);
        let conn = match self.conn_or_connect().await {
            Ok(c) => c,
            Err(e) => {
                self.to_ack = ids;
                return Err(e);
            }
        };
        let acked: redis::RedisResult<i64> = conn.xack(&key, GROUP, &ids).await;
        if let Err(e) = acked {
            self.to_ack = ids;
            return Err(e);
        }
        Ok(())
    }

    async fn conn_or_connect(&mut self) -> Result<&mut RedisConn, redis::RedisError> {
        match self.ensure_conn().await {
            Ok(c) => Ok(c),
            Err(crate::inventory::InventoryError::Redis(e)) => Err(e),
            Err(other) => Err(redis::RedisError::from((
                redis::ErrorKind::Io,
                "connecting the consumer",
                other.to_string(),
            ))),
        }
    }

    async fn gauges(&self) {
        match self.redis.backlog(self.item).await {
            Ok(b) => {
                let label = self.label.clone();
                metrics::gauge!(shop_metrics::STREAM_LAG, "item" => label.clone())
                    .set(b.lag as f64);
                metrics::gauge!(shop_metrics::STREAM_PENDING, "item" => label)
                    .set(b.pending as f64);
            }
            Err(e) => {
                metrics::counter!(shop_metrics::CONSUMER_ERRORS, "kind" => ErrorKind::Redis.as_str())
                    .increment(1);
                tracing::warn!(item = self.item, error = %e, "reading the stream backlog failed");
            }
        }
    }
}

/// The entries of an `XREADGROUP` reply on one stream, taken apart by value: redis-rs's
/// `StreamReadReply` deep-copies the whole reply before converting it (~7 % of the shop's CPU
/// at saturation, with 1,000-entry batches). RESP2 answers `[[key, entries]]`, RESP3 `{key:
/// entries}`, and a read that found nothing `nil`; each entry is `[id, [field, value, ...]]`,
/// its fields `nil` when the entry was deleted while pending (an empty map then, which
/// [`decode`] refuses).
pub fn stream_entries(reply: redis::Value) -> Result<Vec<StreamId>, redis::RedisError> {
    use redis::Value;
    let bad = |what: &str| {
        redis::RedisError::from((
            redis::ErrorKind::Parse,
            "unexpected XREADGROUP reply",
            what.to_string(),
        ))
    };
    let text = |v: Value| match v {
        Value::BulkString(b) => String::from_utf8(b).map_err(|_| bad("a name that is not UTF-8")),
        Value::SimpleString(s) => Ok(s),
        _ => Err(bad("a name that is not a string")),
    };
    let streams: Vec<Value> = match reply {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(keys) => keys
            .into_iter()
            .map(|k| match k {
                Value::Array(mut pair) if pair.len() == 2 => Ok(pair.pop().expect("two")),
                _ => Err(bad("a stream that is not [key, entries]")),
            })
            .collect::<Result<_, _>>()?,
        Value::Map(pairs) => pairs.into_iter().map(|(_, v)| v).collect(),
        _ => return Err(bad("neither an array nor a map of streams")),
    };
    let mut out = Vec::new();
    for entries in streams {
        let Value::Array(entries) = entries else {
            return Err(bad("entries that are not an array"));
        };
        out.reserve(entries.len());
        for entry in entries {
            let Value::Array(entry) = entry else {
                return Err(bad("an entry that is not an array"));
            };
            let mut parts = entry.into_iter();
            let id = text(parts.next().ok_or_else(|| bad("an entry without an id"))?)?;
            let mut map = std::collections::HashMap::new();
            match parts.next() {
                None | Some(Value::Nil) => {}
                Some(Value::Array(fields)) => {
                    let mut fields = fields.into_iter();
                    while let (Some(k), Some(v)) = (fields.next(), fields.next()) {
                        map.insert(text(k)?, v);
                    }
                }
                Some(Value::Map(fields)) => {
                    for (k, v) in fields {
                        map.insert(text(k)?, v);
                    }
                }
                Some(_) => return Err(bad("fields that are not an array")),
            }
            out.push(StreamId {
                id,
                map,
                ..StreamId::default()
            });
        }
    }
    Ok(out)
}

/// Removes consumers of the group that hold nothing and have been idle longer than
/// `claim_idle` (earlier shop processes): otherwise every restart leaves one behind.
async fn prune_consumers(
    conn: &mut RedisConn,
    key: &str,
    me: &str,
    claim_idle: Duration,
) -> Result<(), redis::RedisError> {
    let info: redis::streams::StreamInfoConsumersReply = conn.xinfo_consumers(key, GROUP).await?;
    for c in info.consumers {
        if c.name != me && c.pending == 0 && c.idle as u128 > claim_idle.as_millis() {
            let _: i64 = conn.xgroup_delconsumer(key, GROUP, &c.name).await?;
            tracing::info!(consumer = %c.name, "removed an idle consumer with nothing pending");
        }
    }
    Ok(())
}

/// Sleeps; returns true if shutdown was requested meanwhile.
pub(super) async fn sleep_or_stop(shutdown: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = shutdown.changed() => true,
        _ = tokio::time::sleep(d) => *shutdown.borrow(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::streams::StreamReadReply;
    use redis::Value;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn stream_entries_are_what_redis_rs_reads_from_the_same_reply() {
        let entries = Value::Array(vec![
            Value::Array(vec![
                bulk("1-0"),
                Value::Array(vec![bulk("type"), bulk("order"), bulk("qty"), bulk("1")]),
            ]),
            Value::Array(vec![bulk("1-1"), Value::Nil]),
        ]);
        let resp2 = Value::Array(vec![Value::Array(vec![bulk("k"), entries.clone()])]);
        let ours = stream_entries(resp2.clone()).unwrap();
        let theirs: StreamReadReply = redis::from_redis_value(resp2).unwrap();
        let theirs: Vec<StreamId> = theirs.keys.into_iter().flat_map(|k| k.ids).collect();
        assert_eq!(ours, theirs);
        assert_eq!(ours.len(), 2);
        assert_eq!(ours[0].get::<String>("type").as_deref(), Some("order"));
        assert!(ours[1].map.is_empty(), "a deleted entry has no fields");
        let resp3 = Value::Map(vec![(bulk("k"), entries)]);
        assert_eq!(stream_entries(resp3).unwrap(), ours);
        assert!(stream_entries(Value::Nil).unwrap().is_empty());
        assert!(stream_entries(Value::Int(3)).is_err());
    }
}
