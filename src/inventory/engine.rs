//! The one engine an [`super::Inventory`] runs: its strategy's state, in the variant.
//!
//! [`Engine`] is `Db` (naive, optimistic, conditional: a purchase is a function of the store),
//! `ForUpdate` (its queues in front of the row lock), `Batched` (the per-item queues) or
//! `Redis` ([`RedisEngine`]: redis-lua or
//! redis-buckets, each in its own file, dispatched here by one `match` per operation). A wrong
//! combination (a database strategy with Redis, redis-lua without it) cannot be built:
//! [`Engine::connect`] makes what [`Strategy::engine`] says the strategy needs.

use super::batched::Batcher;
use super::for_update::RowQueues;
use super::strategy::{DbStrategy, EngineKind, RedisKind};
use super::{
    conditional, for_update, naive, optimistic, InventoryError, Outcome, RedisBuckets, RedisLua,
    RedisSettings, Settings, Strategy,
};
use crate::model::{Item, OrderStatus, Purchase};
use crate::store::{Store, Transition};

/// A strategy with what it runs on.
#[derive(Clone)]
pub enum Engine {
    /// A database strategy with no state of its own.
    Db(Stateless),
    /// The row lock: `for-update` (`queued` false: no queue), or `for-update-queued` (the
    /// shop's per-item queues in front of it).
    ForUpdate { queued: bool, queues: RowQueues },
    /// `batched`: per-item queues, one transaction per batch.
    Batched(Batcher),
    /// The decision in Redis.
    Redis(RedisEngine),
}

/// The database strategies whose purchase is a function of the store alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stateless {
    Naive,
    Optimistic,
    Conditional,
}

/// The Redis side of a strategy that decides in Redis.
#[derive(Clone)]
pub enum RedisEngine {
    /// `redis-lua`.
    Lua(RedisLua),
    /// `redis-buckets`.
    Buckets(RedisBuckets),
}

/// Runs `$body` with `$r` bound to whichever Redis side `$engine` holds: each variant's own
/// method of the same name (the files `redis_lua.rs`, `redis_buckets.rs`).
macro_rules! each_redis {
    ($engine:expr, $r:ident => $body:expr) => {
        match $engine {
            RedisEngine::Lua($r) => $body,
            RedisEngine::Buckets($r) => $body,
        }
    };
}

impl Engine {
    /// The engine `strategy` needs: for a Redis strategy, connected to `redis` (the
    /// database strategies never connect to Redis).
    pub async fn connect(
        strategy: Strategy,
        store: &Store,
        redis: &RedisSettings,
        settings: &Settings,
    ) -> Result<Engine, InventoryError> {
        Ok(match strategy.engine() {
            EngineKind::Db(DbStrategy::Naive) => Engine::Db(Stateless::Naive),
            EngineKind::Db(DbStrategy::Optimistic) => Engine::Db(Stateless::Optimistic),
            EngineKind::Db(DbStrategy::Conditional) => Engine::Db(Stateless::Conditional),
            EngineKind::Db(DbStrategy::ForUpdate) => Engine::ForUpdate {
                queued: false,
                queues: RowQueues::default(),
            },
            EngineKind::Db(DbStrategy::ForUpdateQueued) => Engine::ForUpdate {
                queued: true,
                queues: RowQueues::new(settings.row_lock_waiters),
            },
            EngineKind::Batched => Engine::Batched(Batcher::new(store.clone(), settings)),
            EngineKind::Redis(kind) => {
                Engine::Redis(RedisEngine::connect(kind, redis, settings.buckets).await?)
            }
        })
    }

    /// The strategy it runs.
    pub fn strategy(&self) -> Strategy {
        match self {
            Engine::Db(Stateless::Naive) => Strategy::Naive,
            Engine::Db(Stateless::Optimistic) => Strategy::Optimistic,
            Engine::Db(Stateless::Conditional) => Strategy::Conditional,
            Engine::ForUpdate { queued: false, .. } => Strategy::ForUpdate,
            Engine::ForUpdate { queued: true, .. } => Strategy::ForUpdateQueued,
            Engine::Batched(_) => Strategy::Batched,
            Engine::Redis(RedisEngine::Lua(_)) => Strategy::RedisLua,
            Engine::Redis(RedisEngine::Buckets(_)) => Strategy::RedisBuckets,
        }
    }

    /// The Redis side, for a strategy that decides in Redis.
    pub fn redis(&self) -> Option<&RedisEngine> {
        match self {
            Engine::Redis(r) => Some(r),
            Engine::Db(_) | Engine::ForUpdate { .. } | Engine::Batched(_) => None,
        }
    }

    /// The strategy's own decision (before the shared idempotency rule and busy mapping).
    pub(super) async fn purchase(
        &self,
        store: &Store,
        settings: &Settings,
        p: &Purchase,
        limit: i64,
    ) -> Result<Outcome, InventoryError> {
        match self {
            Engine::Db(Stateless::Naive) => naive::purchase(store, settings, p).await,
            Engine::ForUpdate { queues, .. } => {
                for_update::purchase(store, settings, queues, p).await
            }
            Engine::Db(Stateless::Optimistic) => optimistic::purchase(store, settings, p).await,
            Engine::Db(Stateless::Conditional) => {
                conditional::purchase(store, settings, p, limit).await
            }
            Engine::Batched(batcher) => Ok(batcher.purchase(p).await),
            Engine::Redis(redis) => redis.purchase(p, limit).await,
        }
    }
}

impl RedisEngine {
    /// The Redis side of `kind` on `base`'s connection and key prefix (`buckets`: how many
    /// buckets redis-buckets splits a sale over).
    pub fn new(kind: RedisKind, base: RedisLua, buckets: u32) -> RedisEngine {
        match kind {
            RedisKind::Lua => RedisEngine::Lua(base),
            RedisKind::Buckets => RedisEngine::Buckets(RedisBuckets::new(base, buckets)),
        }
    }

    /// Connects and builds the Redis side of `kind`.
    pub async fn connect(
        kind: RedisKind,
        settings: &RedisSettings,
        buckets: u32,
    ) -> Result<RedisEngine, InventoryError> {
        Ok(RedisEngine::new(
            kind,
            RedisLua::connect(settings).await?,
            buckets,
        ))
    }

    /// The redis-lua key sets the sale's streams live in (redis-lua: one; redis-buckets: one
    /// per bucket, in bucket order): each has its own consumers.
    pub fn streams(&self) -> Vec<&RedisLua> {
        match self {
            RedisEngine::Lua(r) => vec![r],
            RedisEngine::Buckets(b) => (0..b.buckets()).map(|i| b.bucket(i)).collect(),
        }
    }

    /// Orders Redis holds for `item`.
    pub async fn order_count(&self, item: i64) -> Result<i64, InventoryError> {
        each_redis!(self, r => r.order_count(item).await)
    }

    /// Warms (and verifies) a fresh sale.
    pub async fn warm(&self, item: &Item) -> Result<(), InventoryError> {
        each_redis!(self, r => r.warm(item).await)
    }

    /// The item as warmed (`None`: never warmed).
    pub async fn warmed_item(&self, id: i64) -> Result<Option<Item>, InventoryError> {
        each_redis!(self, r => r.warmed_item(id).await)
    }

    /// The gateway and the atomic pre-deduct.
    pub async fn purchase(&self, p: &Purchase, limit: i64) -> Result<Outcome, InventoryError> {
        each_redis!(self, r => r.purchase(p, limit).await)
    }

    /// `pending_payment → paid`.
    pub async fn pay(&self, order_id: &str) -> Result<Transition, InventoryError> {
        each_redis!(self, r => r.pay(order_id).await)
    }

    /// `pending_payment → cancelled` (or `expired`), restocking exactly once.
    pub async fn release(
        &self,
        order_id: &str,
        to: OrderStatus,
    ) -> Result<Transition, InventoryError> {
        each_redis!(self, r => r.release(order_id, to).await)
    }

    /// Expires the overdue orders of `item` (the delayed queue).
    pub async fn expire_due(&self, item: i64) -> Result<u64, InventoryError> {
        each_redis!(self, r => r.expire_due(item).await)
    }

    /// True when every stream entry of `item` is persisted and acknowledged.
    pub async fn drained(&self, item: i64) -> Result<bool, InventoryError> {
        each_redis!(self, r => r.drained(item).await)
    }

    /// The Redis stock of `item` (`None`: not warmed).
    pub async fn stock(&self, item: i64) -> Result<Option<i64>, InventoryError> {
        each_redis!(self, r => r.stock(item).await)
    }

    /// Stream entries of `item` the database refused and that were dead-lettered.
    pub async fn dead_letter_count(&self, item: i64) -> Result<u64, InventoryError> {
        each_redis!(self, r => r.dead_letter_count(item).await)
    }
}
