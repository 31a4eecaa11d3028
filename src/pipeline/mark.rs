//! Upkeep of the low-water mark (BRIEF §4): raising it once the consumer goes quiet, and
//! trimming the stream below it.
//!
//! Every batch raises the mark inside its own transaction (see [`crate::store`]), to a
//! candidate read from Redis before the batch. After the last batch of a burst the mark lags
//! one batch behind, so [`MarkKeeper::upkeep`] raises it on its own a second later.
//!
//! Trimming uses only marks the database committed at least `trim_delay` ago: a
//! reconciliation snapshot (possibly from a lagging replica) older than the trim would miss
//! trimmed entries, and `lua/reconcile.lua` then defers its correction rather than guess.

use crate::inventory::{InventoryError, RedisLua};
use crate::store::{stream_id, Store};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How long the mark may lag after the last batch before it is raised on its own.
const RAISE_AFTER: Duration = Duration::from_secs(1);

/// Marks one consumer has seen committed, and when.
#[derive(Debug)]
pub struct MarkKeeper {
    item: i64,
    trim_delay: Duration,
    committed: VecDeque<(Instant, String)>,
    /// Something was applied since the mark was last raised on its own.
    dirty: bool,
    last_raise: Instant,
    /// The mark to trim below, while trimming still removes entries (one call removes at most
    /// 10 000; the next upkeep goes on).
    trim_to: Option<String>,
    /// redis-buckets: the database keeps no mark for this stream; the candidate proven from
    /// Redis (every entry at or below it acknowledged, hence committed or dead-lettered) is
    /// the mark trimming uses.
    untracked: bool,
}

impl MarkKeeper {
    /// A keeper for `item` that trims below marks at least `trim_delay` old.
    pub fn new(item: i64, trim_delay: Duration) -> Self {
        MarkKeeper {
            item,
            trim_delay,
            committed: VecDeque::new(),
            dirty: false,
            last_raise: Instant::now(),
            trim_to: None,
            untracked: false,
        }
    }

    /// A keeper of a redis-buckets bucket's stream: no database mark, trimming below the
    /// candidate read from Redis once it is `trim_delay` old.
    pub fn untracked(item: i64, trim_delay: Duration) -> Self {
        MarkKeeper {
            untracked: true,
            ..MarkKeeper::new(item, trim_delay)
        }
    }

    /// The database committed a batch whose mark is at least `mark`.
    pub fn committed(&mut self, mark: Option<&str>) {
        self.dirty = true;
        let Some(mark) = mark else { return };
        let newer = self
            .committed
            .back()
            .is_none_or(|(_, last)| stream_id(mark) > stream_id(last));
        if newer {
            self.committed.push_back((Instant::now(), mark.to_string()));
        }
    }

    /// Raises the mark if the consumer has gone quiet, and trims the stream below the newest
    /// mark old enough. Cheap when there is nothing to do.
    pub async fn upkeep(&mut self, redis: &RedisLua, store: &Store) -> Result<(), InventoryError> {
        if self.dirty && self.last_raise.elapsed() >= RAISE_AFTER {
            self.last_raise = Instant::now();
            if let Some(candidate) = redis.low_water_candidate(self.item).await? {
                let mark = if self.untracked {
                    candidate
                } else {
                    store.advance_mark(self.item, &candidate).await?
                };
                self.committed(Some(&mark));
                self.dirty = false;
            }
        }
        while let Some((at, _)) = self.committed.front() {
            if at.elapsed() < self.trim_delay {
                break;
            }
            self.trim_to = self.committed.pop_front().map(|(_, m)| m);
        }
        if let Some(mark) = &self.trim_to {
            let removed = redis.trim(self.item, mark).await?;
            tracing::debug!(item = self.item, removed, mark = %mark, "trimmed applied entries");
            if removed == 0 {
                self.trim_to = None;
            }
        }
        Ok(())
    }
}
