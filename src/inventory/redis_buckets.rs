//! `redis-buckets`: redis-lua's atomic pre-deduct with the hot item's stock split over B
//! buckets, each under its own hash tag (its own slot, so on a Redis Cluster one sale is not
//! bound to one Redis core).
//!
//! - **Buckets.** Bucket `b` of item `i` is a full redis-lua key set under the prefix
//!   [`super::redis_lua::keys::bucket_prefix`]`(prefix, b)`, i.e. the hash tag
//!   `{prefix:b<b>:i}`: its own stock, limits, orders, delayed queue, idempotency keys and event stream. Every redis-lua script serves a
//!   bucket unchanged, through a [`RedisLua`] view of the same connection under that prefix
//!   ([`RedisLua::with_prefix`]). Warm-up splits the stock evenly (the remainder spread over the
//!   first buckets).
//! - **Home bucket.** A buyer's home bucket is FNV-1a of the user id modulo B (stable across
//!   processes and restarts). His holdings (the per-user, per-device and per-IP limits) and his
//!   `Idempotency-Key`s live there, so he always meets his own holdings and a retry finds its
//!   order; the purchase is `lua/deduct.lua` on the home bucket's keys (one slot). Order ids
//!   carry the bucket ([`new_bucket_order_id`]), so pay, cancel and expiry find it.
//! - **No undersell.** When the home bucket is sold out, units move: `lua/lend.lua` on a donor
//!   bucket with stock takes units out and records the transfer (atomically, in the donor's
//!   slot); `lua/receive.lua` adds them to the home bucket once (idempotent by transfer id, in
//!   the home's slot); the donor's record is then deleted, and the deduct retried. The answer is
//!   "sold out" only when every bucket's stock plus the units still travelling is below the
//!   quantity asked. A transfer lent but never received (the process died between the two
//!   scripts) is completed by [`RedisBuckets::repair`], which the shop's background loop runs:
//!   no unit is lost or counted twice.
//! - **Persistence.** Each bucket's stream has its own consumer; orders go to the item's row as
//!   redis-lua's do; a batch that would take the database's stock below zero waits for the
//!   release on another bucket's stream that freed its unit (see `pipeline::batch`). Not
//!   supported: reconciliation and rewarm (docs/src/shop/redis-buckets.md,
//!   [`super::RedisKind::reconciles`]). The Redis
//!   faults act on every bucket (`redeliver` rewinds each bucket's stream).
//!
//! No command or script ever spans two buckets: nothing here assumes they share a node.

use super::redis_lua::keys::ItemKeys;
use super::{InventoryError, Outcome, RedisKind, RedisLua};
use crate::model::Purchase;
use crate::model::{bucket_of_order, item_of_order, new_bucket_order_id, Item, OrderStatus};
use crate::store::Transition;
use crate::telemetry::shop_metrics;
use redis::{AsyncCommands, Script};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most buckets a sale may be split over (`--buckets`).
pub const MAX_BUCKETS: u32 = 64;
/// How long one purchase keeps rebalancing (while units are travelling or other buyers keep
/// taking what it moved home) before answering busy; never "sold out" while stock is left.
const REBALANCE_FOR: Duration = Duration::from_secs(2);

/// FNV-1a (64 bits) of `bytes`: a hash with no random seed, the same in every process.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The home bucket of `user` among `buckets` (at least 1).
pub fn home_bucket(user: &str, buckets: u32) -> u32 {
    (fnv1a(user.as_bytes()) % u64::from(buckets.max(1))) as u32
}

/// `stock` split over `buckets`: equal shares, the remainder one unit each to the first ones.
pub fn split_stock(stock: i64, buckets: u32) -> Vec<i64> {
    let b = i64::from(buckets.max(1));
    (0..b)
        .map(|i| stock / b + i64::from(i < stock % b))
        .collect()
}

/// Units lent by one bucket to another and not yet forgotten by the donor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    pub id: String,
    pub from: u32,
    pub to: u32,
    pub units: i64,
}

/// What one rebalancing pass found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rebalanced {
    /// Units moved home (or stock is somewhere it can be moved from): deduct again.
    Retry,
    /// Every bucket's stock plus the units travelling is below what the buyer asked.
    Empty,
}

struct Scripts {
    lend: Script,
    receive: Script,
}

/// The Redis side of `redis-buckets`: B redis-lua views of one connection.
#[derive(Clone)]
pub struct RedisBuckets {
    base: RedisLua,
    views: Arc<[RedisLua]>,
    scripts: Arc<Scripts>,
}

impl RedisBuckets {
    /// Splits every sale of `base`'s prefix over `buckets` buckets (clamped to 1..=64).
    pub fn new(base: RedisLua, buckets: u32) -> Self {
        let views: Vec<RedisLua> = RedisKind::Buckets
            .prefixes(base.prefix(), buckets)
            .iter()
            .map(|prefix| base.with_prefix(prefix))
            .collect();
        RedisBuckets {
            base,
            views: views.into(),
            scripts: Arc::new(Scripts {
                lend: Script::new(include_str!("../../lua/lend.lua")),
                receive: Script::new(include_str!("../../lua/receive.lua")),
            }),
        }
    }

    /// How many buckets a sale is split over.
    pub fn buckets(&self) -> u32 {
        self.views.len() as u32
    }

    /// The redis-lua view of bucket `b` (its keys under the bucket's prefix).
    pub fn bucket(&self, b: u32) -> &RedisLua {
        &self.views[b as usize]
    }

    /// The keys of bucket `b` of `item`.
    pub fn keys(&self, item: i64, b: u32) -> ItemKeys {
        self.bucket(b).keys(item)
    }

    fn transfers_key(&self, item: i64, b: u32) -> String {
        self.keys(item, b).sibling("transfers")
    }

    fn received_key(&self, item: i64, b: u32) -> String {
        self.keys(item, b).sibling("received")
    }

    fn all(&self) -> impl Iterator<Item = u32> {
        0..self.buckets()
    }

    /// Orders Redis holds for `item`, over every bucket.
    pub async fn order_count(&self, item: i64) -> Result<i64, InventoryError> {
        let mut n = 0;
        for b in self.all() {
            n += self.bucket(b).order_count(item).await?;
        }
        Ok(n)
    }

    /// Warm-up: every bucket warmed (and verified) with its share of the stock, its transfer
    /// bookkeeping cleared, and the bucket count written into each bucket's `meta` (the
    /// runner's oracle reads it there).
    pub async fn warm(&self, item: &Item) -> Result<(), InventoryError> {
        let shares = split_stock(item.stock, self.buckets());
        let mut conn = self.base.conn();
        for (b, share) in self.all().zip(shares) {
            let _: () = conn
                .del(&[
                    self.transfers_key(item.id, b),
                    self.received_key(item.id, b),
                ])
                .await?;
            let part = Item {
                stock: share,
                ..item.clone()
            };
            self.bucket(b).warm(&part).await?;
            let _: () = conn
                .hset(&self.keys(item.id, b).meta, "buckets", self.buckets())
                .await?;
        }
        Ok(())
    }

    /// The item as warmed (bucket 0's description; the stock summed over every bucket).
    pub async fn warmed_item(&self, id: i64) -> Result<Option<Item>, InventoryError> {
        let Some(item) = self.bucket(0).warmed_item(id).await? else {
            return Ok(None);
        };
        let stock = self.stock(id).await?.unwrap_or(0);
        Ok(Some(Item { stock, ..item }))
    }

    /// Gateway, then the pre-deduct on the buyer's home bucket, rebalancing while it is sold
    /// out and stock is left elsewhere.
    pub async fn purchase(&self, p: &Purchase, limit: i64) -> Result<Outcome, InventoryError> {
        let home_b = home_bucket(&p.user_id, self.buckets());
        let home = self.bucket(home_b);
        let _admission = match home.admit(p, limit).await? {
            Ok(a) => a,
            Err(answer) => return Ok(answer),
        };
        // A key lives in its buyer's home bucket; another buyer reusing it (another home) is
        // answered from the bucket that holds it. Read outside the scripts: two buyers racing
        // with one key into two buckets are not caught here (the database's unique key is).
        // The other buckets are asked at once (one round trip, not B - 1, on the multiplexed
        // connection; in parallel over a cluster's masters).
        if p.idempotency_key.is_some() {
            let lookups = self
                .all()
                .filter(|b| *b != home_b)
                .map(|b| self.bucket(b).replay(p));
            let answers = futures_util::future::try_join_all(lookups).await?;
            if let Some(answer) = answers.into_iter().flatten().next() {
                return Ok(answer);
            }
        }
        let order_id = new_bucket_order_id(p.item_id, home_b);
        let deadline = Instant::now() + REBALANCE_FOR;
        let mut passes = 0u32;
        loop {
            let outcome = home.prededuct(p, &order_id).await?;
            if outcome != Outcome::SoldOut {
                if passes > 0 {
                    metrics::counter!(shop_metrics::BUCKET_FALLBACKS).increment(1);
                }
                return Ok(outcome);
            }
            if self.rebalance(p.item_id, home_b, p.qty).await? == Rebalanced::Empty {
                return Ok(Outcome::SoldOut);
            }
            passes += 1;
            if Instant::now() >= deadline {
                return Ok(Outcome::Busy("rebalancing"));
            }
            if passes > self.buckets() {
                // Others keep taking what moved home: let them finish.
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// One pass: borrows from the first donor (after `home`, round the ring) that has stock;
    /// when none has, says whether stock is still left anywhere (refilled meanwhile by a
    /// restock or a transfer, or travelling).
    async fn rebalance(
        &self,
        item: i64,
        home: u32,
        qty: i64,
    ) -> Result<Rebalanced, InventoryError> {
        let n = self.buckets();
        for step in 1..n {
            let donor = (home + step) % n;
            if let Some(t) = self.lend(item, donor, home, qty).await? {
                self.receive(item, &t).await?;
                return Ok(Rebalanced::Retry);
            }
        }
        let left = self.stock(item).await?.unwrap_or(0);
        Ok(if left >= qty {
            Rebalanced::Retry
        } else {
            Rebalanced::Empty
        })
    }

    /// Step 1 of a transfer (`lua/lend.lua` on bucket `from`): moves units (at least `want`
    /// when `from` has them) out of its stock into a transfer record for bucket `to`. `None`
    /// when `from` has no stock (or is not warmed).
    pub async fn lend(
        &self,
        item: i64,
        from: u32,
        to: u32,
        want: i64,
    ) -> Result<Option<Transfer>, InventoryError> {
        let id = uuid::Uuid::now_v7().simple().to_string();
        let units: i64 = self
            .scripts
            .lend
            .key(&self.keys(item, from).stock)
            .key(self.transfers_key(item, from))
            .arg(&id)
            .arg(to)
            .arg(want)
            .invoke_async(&mut self.base.conn())
            .await?;
        Ok((units > 0).then_some(Transfer {
            id,
            from,
            to,
            units,
        }))
    }

    /// Step 2 (`lua/receive.lua` on bucket `to`, idempotent by transfer id), then the donor
    /// forgets the record. True when this call delivered the units (false: delivered before).
    pub async fn receive(&self, item: i64, t: &Transfer) -> Result<bool, InventoryError> {
        let code: i64 = self
            .scripts
            .receive
            .key(&self.keys(item, t.to).stock)
            .key(self.received_key(item, t.to))
            .arg(&t.id)
            .arg(t.units)
            .invoke_async(&mut self.base.conn())
            .await?;
        if code < 0 {
            return Err(InventoryError::Inconsistent(format!(
                "transfer {} of item {item}: bucket {} is not warmed; the record stays in bucket {} for the repair",
                t.id, t.to, t.from
            )));
        }
        let _: i64 = self
            .base
            .conn()
            .hdel(self.transfers_key(item, t.from), &t.id)
            .await?;
        Ok(code == 1)
    }

    /// Every transfer record still held by a donor (lent, and not yet forgotten).
    pub async fn transfers(&self, item: i64) -> Result<Vec<Transfer>, InventoryError> {
        let mut out = Vec::new();
        let mut conn = self.base.conn();
        for from in self.all() {
            let records: HashMap<String, String> =
                conn.hgetall(self.transfers_key(item, from)).await?;
            for (id, value) in records {
                let parsed = value
                    .split_once(':')
                    .and_then(|(to, n)| Some((to.parse::<u32>().ok()?, n.parse::<i64>().ok()?)));
                match parsed {
                    Some((to, units)) if to < self.buckets() => out.push(Transfer {
                        id,
                        from,
                        to,
                        units,
                    }),
                    _ => tracing::error!(
                        item, bucket = from, transfer = %id, record = %value,
                        "unreadable transfer record: left alone"
                    ),
                }
            }
        }
        Ok(out)
    }

    /// Completes every transfer lent and not yet forgotten (its buyer died between the two
    /// steps, or is about to finish it: delivery is idempotent). Returns the transfers this
    /// call delivered.
    pub async fn repair(&self, item: i64) -> Result<u64, InventoryError> {
        let mut delivered = 0;
        for t in self.transfers(item).await? {
            if self.receive(item, &t).await? {
                delivered += 1;
                metrics::counter!(shop_metrics::BUCKET_REPAIRS).increment(1);
                tracing::warn!(
                    item, transfer = %t.id, from = t.from, to = t.to, units = t.units,
                    "completed a transfer its buyer left half done"
                );
            }
        }
        Ok(delivered)
    }

    /// Units lent and not yet received (a record whose id the receiving bucket lacks).
    pub async fn in_transit(&self, item: i64) -> Result<i64, InventoryError> {
        let mut units = 0;
        let mut conn = self.base.conn();
        for t in self.transfers(item).await? {
            let received: bool = conn.sismember(self.received_key(item, t.to), &t.id).await?;
            if !received {
                units += t.units;
            }
        }
        Ok(units)
    }

    /// Each bucket's stock (`None`: that bucket is not warmed).
    pub async fn bucket_stocks(&self, item: i64) -> Result<Vec<Option<i64>>, InventoryError> {
        let mut out = Vec::with_capacity(self.views.len());
        for b in self.all() {
            out.push(self.bucket(b).stock(item).await?);
        }
        Ok(out)
    }

    /// The item's Redis stock: every bucket's plus the units travelling between them (`None`
    /// if no bucket is warmed). Read bucket by bucket, so exact only while nothing moves.
    pub async fn stock(&self, item: i64) -> Result<Option<i64>, InventoryError> {
        let stocks = self.bucket_stocks(item).await?;
        if stocks.iter().all(Option::is_none) {
            return Ok(None);
        }
        let sum: i64 = stocks.into_iter().flatten().sum();
        Ok(Some(sum + self.in_transit(item).await?))
    }

    /// `pending_payment → paid`, in the order's bucket.
    pub async fn pay(&self, order_id: &str) -> Result<Transition, InventoryError> {
        match self.bucket_of(order_id) {
            Some(b) => self.bucket(b).pay(order_id).await,
            None => Ok(Transition::NotFound),
        }
    }

    /// Cancel or expire a pending order: restocks its own bucket exactly once.
    pub async fn release(
        &self,
        order_id: &str,
        to: OrderStatus,
    ) -> Result<Transition, InventoryError> {
        match self.bucket_of(order_id) {
            Some(b) => self.bucket(b).release(order_id, to).await,
            None => Ok(Transition::NotFound),
        }
    }

    fn bucket_of(&self, order_id: &str) -> Option<u32> {
        item_of_order(order_id)?;
        bucket_of_order(order_id).filter(|b| *b < self.buckets())
    }

    /// Expires every overdue order of `item`, bucket by bucket.
    pub async fn expire_due(&self, item: i64) -> Result<u64, InventoryError> {
        let mut n = 0;
        for b in self.all() {
            n += self.bucket(b).expire_due(item).await?;
        }
        Ok(n)
    }

    /// True when every bucket's stream is persisted and acknowledged.
    pub async fn drained(&self, item: i64) -> Result<bool, InventoryError> {
        for b in self.all() {
            if !self.bucket(b).drained(item).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Dead letters over every bucket.
    pub async fn dead_letter_count(&self, item: i64) -> Result<u64, InventoryError> {
        let mut n = 0;
        for b in self.all() {
            n += self.bucket(b).dead_letter_count(item).await?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_the_published_function() {
        // Test vectors of FNV-1a 64 (Fowler, Noll, Vo).
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn home_buckets_are_stable_and_spread() {
        assert_eq!(home_bucket("user-1", 1), 0);
        assert_eq!(home_bucket("user-1", 4), home_bucket("user-1", 4));
        let mut seen = [0u32; 4];
        for i in 0..1000 {
            seen[home_bucket(&format!("user-{i}"), 4) as usize] += 1;
        }
        assert!(seen.iter().all(|n| *n > 150), "{seen:?}");
        assert_eq!(home_bucket("x", 0), 0, "no division by zero");
    }

    #[test]
    fn the_stock_split_is_exact_and_even() {
        assert_eq!(split_stock(10, 4), vec![3, 3, 2, 2]);
        assert_eq!(split_stock(3, 4), vec![1, 1, 1, 0]);
        assert_eq!(split_stock(0, 2), vec![0, 0]);
        assert_eq!(split_stock(7, 1), vec![7]);
        for (stock, b) in [(100, 4), (101, 7), (1, 64), (1_000_000_000, 64)] {
            let s = split_stock(stock, b);
            assert_eq!(s.len(), b as usize);
            assert_eq!(s.iter().sum::<i64>(), stock);
            assert!(s.iter().max().unwrap() - s.iter().min().unwrap() <= 1);
        }
    }
}
