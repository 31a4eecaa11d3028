//! Persisting one batch, so that no entry can block the queue.
//!
//! The database's answer decides what happens ([`crate::store::refuses_entry`]):
//! - **unavailable** (connection refused or reset, pool timeout, shutting down, lock waits):
//!   the whole batch stays pending and is retried with backoff, forever; nothing is ever
//!   dead-lettered for it.
//! - **refused** (a data or constraint error): the batch is split in halves, recursively, and
//!   every part that commits is acknowledged, which isolates the refused entries. An entry
//!   refused `dead_letter_after` times is moved to the item's dead-letter stream by
//!   `lua/deadletter.lua` (its units released: no order row can exist for it), acknowledged,
//!   and alerted on: an error-level log line, `oversell_dead_letters_total`, and the alert
//!   webhook when one is configured.
//!
//! Entries that follow a dead-lettered order (its pay, cancel or expiry) never reach the
//! database: their order has no row, and inserting one now would resurrect units already
//! given back. They are dead-lettered at once, as are entries that are not oversell events.

use super::consumer::{Consumer, ErrorKind};
use super::entry::{decode, order_of};
use crate::inventory::redis_lua::stream::ToDeadLetter;
use crate::inventory::InventoryError;
use crate::store::{PersistEvent, PersistKind, StoreError};
use crate::telemetry::shop_metrics;
use redis::streams::StreamId;

/// What a batch left behind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Persisted {
    /// Entries committed (acknowledgement queued).
    pub committed: usize,
    /// Entries moved to the dead-letter stream.
    pub dead_lettered: usize,
    /// Entries the database refused fewer than N times: still pending, to be retried.
    pub left_pending: bool,
}

/// Why a batch could not be finished.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    /// The database is unavailable: retry the batch later.
    #[error("database unavailable: {0}")]
    DbUnavailable(StoreError),
    /// A Redis call failed.
    #[error("redis: {0}")]
    Redis(InventoryError),
}

impl PersistError {
    pub(super) fn kind_and_message(&self) -> (ErrorKind, String) {
        let kind = match self {
            PersistError::DbUnavailable(_) => ErrorKind::DbUnavailable,
            PersistError::Redis(_) => ErrorKind::Redis,
        };
        (kind, self.to_string())
    }
}

impl From<InventoryError> for PersistError {
    fn from(e: InventoryError) -> Self {
        match e {
            InventoryError::Store(s) => PersistError::DbUnavailable(s),
            other => PersistError::Redis(other),
        }
    }
}

impl Consumer {
    /// Persists `entries` (read or claimed by this consumer): commits what the database takes,
    /// isolates and counts what it refuses, dead-letters what it refused N times.
    pub async fn persist(&mut self, entries: &[StreamId]) -> Result<Persisted, PersistError> {
        let mut done = Persisted::default();
        let mut events = Vec::with_capacity(entries.len());
        let mut direct: Vec<(String, Option<String>, String)> = Vec::new();
        for e in entries {
            match decode(e) {
                Some(ev) => events.push(ev),
                None => direct.push((
                    e.id.clone(),
                    order_of(e),
                    "not an oversell event (undecodable stream entry)".into(),
                )),
            }
        }
        let follow_ups: Vec<&str> = events
            .iter()
            .filter(|e| e.kind != PersistKind::Order)
            .map(|e| e.order_id.as_str())
            .collect();
        let dead = self
            .redis
            .dead_lettered_orders(self.item, &follow_ups)
            .await?;
        if !dead.is_empty() {
            events.retain(|e| {
                let follows = e.kind != PersistKind::Order && dead.contains(&e.order_id);
                if follows {
                    direct.push((
                        e.stream_id.clone(),
                        Some(e.order_id.clone()),
                        format!("follows the dead-lettered order {}", e.order_id),
                    ));
                }
                !follows
            });
        }
        for (id, order, reason) in direct {
            // Not an `order` entry of a live order: nothing to release (db_has_order = true).
            if self
                .dead_letter(&id, order.as_deref(), None, &reason, 1, true)
                .await?
            {
                done.dead_lettered += 1;
            }
        }
        if events.is_empty() {
            return Ok(done);
        }
        let candidate = match self.bucket {
            None => self.redis.low_water_candidate(self.item).await?,
            Some(_) => None,
        };
        self.apply_isolating(&events, candidate.as_deref(), &mut done)
            .await?;
        Ok(done)
    }

    /// Applies `events`, splitting on refusal until the refused entries stand alone.
    async fn apply_isolating(
        &mut self,
        events: &[PersistEvent],
        low_water: Option<&str>,
        done: &mut Persisted,
    ) -> Result<(), PersistError> {
        // Halves are pushed second-then-first, so parts commit in stream order.
        let mut parts: Vec<&[PersistEvent]> = vec![events];
        while let Some(part) = parts.pop() {
            let applied = match self.bucket {
                Some(_) => self.apply_bucket_in_any_order(part).await?,
                None => self.apply_in_any_order(part, low_water).await?,
            };
            let Some(applied) = applied else {
                // A release is still in another consumer's batch, or further on this stream:
                // wait for it.
                done.left_pending = true;
                continue;
            };
            match applied {
                Ok(stats) => {
                    metrics::counter!(shop_metrics::PERSISTED_EVENTS).increment(part.len() as u64);
                    metrics::counter!(shop_metrics::PERSIST_ANOMALIES).increment(stats.anomalies);
                    for ev in part {
                        self.refusals.remove(&ev.stream_id);
                        self.to_ack.push(ev.stream_id.clone());
                    }
                    self.marks.committed(low_water);
                    done.committed += part.len();
                }
                Err(e) if e.refuses_entry() => {
                    if let [ev] = part {
                        if self.refused(ev, &e).await? {
                            done.dead_lettered += 1;
                        } else {
                            done.left_pending = true;
                        }
                    } else {
                        let (first, second) = part.split_at(part.len() / 2);
                        parts.push(second);
                        parts.push(first);
                    }
                }
                Err(e) => return Err(PersistError::DbUnavailable(e)),
            }
        }
        Ok(())
    }

    /// Applies `part` with its orders' units taken inside the batch. A batch that would leave
    /// the database's stock below zero is not written: while another consumer holds entries
    /// (the cancel or expiry that gave back the units, committed out of stream order) it waits
    /// for them (`None`: left pending, read again shortly); with no one else holding any, the
    /// stock really lacks them, and the batch is applied as one consumer would (each order
    /// without stock kept, undeducted, and counted as an anomaly).
    async fn apply_in_any_order(
        &mut self,
        part: &[PersistEvent],
        low_water: Option<&str>,
    ) -> Result<Option<Result<crate::store::ApplyStats, StoreError>>, PersistError> {
        match self
            .store
            .apply_events_if_stock_holds(self.item, part, low_water)
            .await
        {
            Ok(Some(stats)) => return Ok(Some(Ok(stats))),
            Ok(None) => {}
            Err(e) => return Ok(Some(Err(e))),
        }
        if self
            .redis
            .pending_elsewhere(self.item, &self.name)
            .await
            .map_err(PersistError::Redis)?
        {
            tracing::debug!(
                item = self.item,
                entries = part.len(),
                "the batch needs units another consumer's batch gives back; waiting for it"
            );
            return Ok(None);
        }
        Ok(Some(
            self.store.apply_events(self.item, part, low_water).await,
        ))
    }

    /// redis-buckets' [`Consumer::apply_in_any_order`]. Units move between buckets, so an
    /// order on this bucket's stream may have bought a unit given back by a cancel or expiry
    /// on another bucket's stream (or further on this one, past what this batch read). A
    /// batch that would leave the database's stock below zero therefore waits (`None`) while
    /// any bucket's stream of the item holds an entry not yet persisted: on another bucket's
    /// stream it is that bucket's consumer's to apply; on this one it is further on. A batch
    /// that waits is read again with every entry of its stream not yet persisted
    /// (`Consumer::extend`). Progress is certain: the database's stock S plus all the
    /// buckets' unpersisted entries U₁…U_B is what Redis holds, at least 0; were every
    /// bucket's whole backlog short (S + Uᵢ < 0 for each i), summing would give
    /// (B − 1)·S < 0. So once the streams are read to their ends, one bucket commits.
    /// Only when nothing is left anywhere does the stock really lack the units: the batch is
    /// applied as one consumer would (each order without stock kept and counted an anomaly).
    async fn apply_bucket_in_any_order(
        &mut self,
        part: &[PersistEvent],
    ) -> Result<Option<Result<crate::store::ApplyStats, StoreError>>, PersistError> {
        match self
            .store
            .apply_bucket_events_if_stock_holds(self.item, part)
            .await
        {
            Ok(Some(stats)) => return Ok(Some(Ok(stats))),
            Ok(None) => {}
            Err(e) => return Ok(Some(Err(e))),
        }
        let own = self.redis.backlog(self.item).await?;
        let mut waiting = !own.delivered_all
            || self
                .redis
                .pending_elsewhere(self.item, &self.name)
                .await
                .map_err(PersistError::Redis)?;
        for sibling in &self.siblings {
            if waiting {
                break;
            }
            waiting = !sibling.drained(self.item).await?;
        }
        if waiting {
            // Retried with every entry of this stream not yet persisted, in one batch.
            self.extend = true;
            tracing::debug!(
                item = self.item,
                bucket = ?self.bucket,
                entries = part.len(),
                "the batch needs units a release not yet persisted gives back; waiting for it"
            );
            return Ok(None);
        }
        Ok(Some(self.store.apply_bucket_events(self.item, part).await))
    }

    /// Counts one refusal of `ev`; dead-letters it once it reaches N. True if dead-lettered.
    async fn refused(
        &mut self,
        ev: &PersistEvent,
        error: &StoreError,
    ) -> Result<bool, PersistError> {
        metrics::counter!(shop_metrics::CONSUMER_ERRORS, "kind" => ErrorKind::DbRefused.as_str())
            .increment(1);
        let attempts = {
            let n = self.refusals.entry(ev.stream_id.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let reason = refusal_reason(error);
        if attempts < self.settings.dead_letter_after {
            tracing::warn!(
                item = self.item,
                entry = %ev.stream_id,
                order = %ev.order_id,
                attempts,
                reason = %reason,
                "the database refused an entry; will retry it alone"
            );
            return Ok(false);
        }
        // Units are released only if no row exists for the order (checked now: the entry's
        // refusal proves this insert failed, not that no other event inserted it).
        let db_has_order = ev.kind != PersistKind::Order
            || self
                .store
                .order(&ev.order_id)
                .await
                .map_err(PersistError::DbUnavailable)?
                .is_some();
        let moved = self
            .dead_letter(
                &ev.stream_id,
                Some(&ev.order_id),
                Some(ev.kind),
                &reason,
                attempts,
                db_has_order,
            )
            .await?;
        self.refusals.remove(&ev.stream_id);
        Ok(moved)
    }

    /// Moves one entry to the dead-letter stream and raises the alert. False when another
    /// consumer had claimed it meanwhile (nothing done; it is theirs now).
    pub(super) async fn dead_letter(
        &mut self,
        entry: &str,
        order: Option<&str>,
        kind: Option<PersistKind>,
        reason: &str,
        attempts: u32,
        db_has_order: bool,
    ) -> Result<bool, PersistError> {
        let request = ToDeadLetter {
            entry_id: entry,
            consumer: &self.name,
            reason,
            attempts,
            order_id: order,
            db_has_order,
        };
        let Some(moved) = self
            .redis
            .dead_letter(self.item, request)
            .await
            .map_err(PersistError::Redis)?
        else {
            return Ok(false);
        };
        let kind = kind.map_or("other", PersistKind::as_str);
        metrics::counter!(shop_metrics::DEAD_LETTERS, "kind" => kind).increment(1);
        tracing::error!(
            item = self.item,
            entry = %entry,
            order = order.unwrap_or(""),
            kind,
            attempts,
            released = moved.released,
            reason = %reason,
            "ALERT: dead-lettered a stream entry the database refused; a person should look"
        );
        if let Some(url) = &self.settings.reconcile.webhook {
            let body = serde_json::json!({
                "alert": "dead_letter",
                "item_id": self.item,
                "stream_id": entry,
                "order_id": order,
                "kind": kind,
                "reason": reason,
                "attempts": attempts,
                "released_units": moved.released,
            });
            // Sent aside: a slow webhook must not hold up the queue.
            tokio::spawn(super::alert::post(url.clone(), body));
        }
        Ok(true)
    }
}

/// The database's own words for a refusal (without sqlx's wrapping).
fn refusal_reason(e: &StoreError) -> String {
    match e {
        StoreError::Sql(sqlx::Error::Database(db)) => match db.code() {
            Some(code) => format!("{} (SQLSTATE {code})", db.message()),
            None => db.message().to_string(),
        },
        other => other.to_string(),
    }
}
