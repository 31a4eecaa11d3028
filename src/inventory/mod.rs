//! Inventory strategies: how one purchase decides "may this buyer have it?".
//!
//! [`Strategy`] is the closed enum of the switch; each strategy lives in its own file, and an
//! [`Inventory`] runs ONE [`Engine`] (`engine`: the strategy's state in its variant, a Redis
//! strategy's side in [`RedisEngine`]), dispatched with one `match` per operation. A purchase
//! returns an [`Outcome`] value (sold out, duplicate, busy are normal answers on a hot path);
//! [`InventoryError`] is for infrastructure failures (both in `outcome`).

mod batched;
mod conditional;
pub mod defect;
mod engine;
mod for_update;
pub mod idempotency;
mod naive;
mod optimistic;
mod outcome;
pub mod redis_buckets;
pub mod redis_lua;
mod strategy;

use crate::model::{Item, OrderStatus, Purchase, SaleSetup};
use crate::store::{HasOrders, Store, StoreError, Transition};
use crate::telemetry::shop_metrics;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

pub use defect::Defect;
pub use engine::{Engine, RedisEngine};
pub use outcome::{Audit, InventoryError, Outcome, SaleSetupResult};
pub use redis_buckets::RedisBuckets;
pub use redis_lua::{Durability, RedisLua, RedisSettings, Rewarm, RewarmOutcome};
pub use strategy::{RedisKind, Strategy};

/// Knobs of the strategies (built from [`crate::shop::ShopKnobs`], where their defaults are).
#[derive(Debug, Clone)]
pub struct Settings {
    /// naive: business logic between the stock check and the write (the race window); also
    /// the gap of a [`Defect`]'s check-then-write.
    pub naive_gap: Duration,
    /// for-update / optimistic: business logic done between the read and the write (under the
    /// row lock for `for-update`, before the compare-and-swap for `optimistic`).
    pub work: Duration,
    /// for-update: the most of this shop's purchases of one item in a transaction (so waiting
    /// on its row lock in the database) at once, the holder included (0: no limit); the rest
    /// queue in the shop.
    pub row_lock_waiters: u32,
    /// optimistic: retries after a lost compare-and-swap before answering busy.
    pub optimistic_retries: u32,
    /// optimistic: base backoff between retries (jittered, doubling).
    pub optimistic_backoff: Duration,
    /// How long an unpaid order holds its units.
    pub payment_timeout: Duration,
    /// batched: the longest a batch waits for more buyers after its first.
    pub batch_window: Duration,
    /// batched: the most buyers in one batch.
    pub batch_max: usize,
    /// redis-buckets: how many buckets a sale's stock is split over.
    pub buckets: u32,
    /// A known defect built in (a testing aid: `serve --defect NAME`); `None` in every shop
    /// to trust.
    pub defect: Option<Defect>,
}

/// One strategy's engine bound to its store.
#[derive(Clone)]
pub struct Inventory {
    engine: Engine,
    store: Store,
    settings: Arc<Settings>,
    items: Arc<RwLock<HashMap<i64, Item>>>,
    rewarming: Arc<tokio::sync::Mutex<()>>,
    /// Purchases started and not finished: the shop is drained only when none is.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

/// Counts one purchase in `count` for as long as it lives (in flight; for-update: waiting for
/// its turn), however it ends.
pub(super) struct CountGuard<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> CountGuard<'a> {
    pub(super) fn new(count: &'a std::sync::atomic::AtomicUsize) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        CountGuard(count)
    }
}

impl Drop for CountGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Inventory {
    /// Binds `strategy` to its store, connecting to Redis (`redis`) only when the strategy
    /// decides there.
    pub async fn connect(
        strategy: Strategy,
        store: Store,
        redis: &RedisSettings,
        settings: Settings,
    ) -> Result<Self, InventoryError> {
        let engine = Engine::connect(strategy, &store, redis, &settings).await?;
        Ok(Inventory {
            engine,
            store,
            settings: Arc::new(settings),
            items: Arc::default(),
            rewarming: Arc::default(),
            in_flight: Arc::default(),
        })
    }

    /// The strategy in use.
    pub fn strategy(&self) -> Strategy {
        self.engine.strategy()
    }

    /// The engine that runs it.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The database store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The Redis side, for `redis-lua`.
    pub fn redis(&self) -> Option<&RedisLua> {
        match self.engine.redis()? {
            RedisEngine::Lua(redis) => Some(redis),
            RedisEngine::Buckets(_) => None,
        }
    }

    /// The Redis side, for `redis-buckets`.
    pub fn buckets(&self) -> Option<&RedisBuckets> {
        match self.engine.redis()? {
            RedisEngine::Buckets(buckets) => Some(buckets),
            RedisEngine::Lua(_) => None,
        }
    }

    /// Sets up a fresh sale in the database and, for `redis-lua`, warms Redis and verifies it.
    /// Without `reset`, an item that already has orders (in the database, or for `redis-lua`
    /// in Redis) is left alone: [`SaleSetupResult::HasOrders`]. With it, its orders are deleted.
    pub async fn setup_sale(
        &self,
        id: i64,
        setup: &SaleSetup,
        reset: bool,
    ) -> Result<SaleSetupResult, InventoryError> {
        let in_redis = match (self.engine.redis(), reset) {
            (Some(redis), false) => redis.order_count(id).await?,
            (Some(_), true) | (None, _) => 0,
        };
        if in_redis > 0 {
            return Ok(SaleSetupResult::HasOrders { orders: in_redis });
        }
        let item = if reset {
            self.store.setup_sale(id, setup).await?
        } else {
            match self.store.setup_new_sale(id, setup).await? {
                Ok(item) => item,
                Err(HasOrders(orders)) => return Ok(SaleSetupResult::HasOrders { orders }),
            }
        };
        if let Some(redis) = self.engine.redis() {
            redis.warm(&item).await?;
        }
        self.items
            .write()
            .expect("item cache poisoned")
            .insert(id, item.clone());
        Ok(SaleSetupResult::Ready(item))
    }

    /// redis-lua: rebuilds a sale Redis lost from the database (see `lua/rewarm.lua`), never
    /// writing the database. `None` when the item is not in the database (or the strategy has
    /// no Redis). `trigger` says who asked: `manual` (the admin route), `check` (the shop's
    /// background check) or `purchase` (an order found the sale missing).
    pub async fn rewarm(
        &self,
        id: i64,
        trigger: &'static str,
    ) -> Result<Option<Rewarm>, InventoryError> {
        let Some(redis) = self.redis() else {
            return Ok(None);
        };
        // One rebuild at a time in this process; across processes the script's own check
        // makes a second one find the sale warm.
        let _one = self.rewarming.lock().await;
        // The mark first, then the orders: everything up to the mark is in what is read next.
        let Some(snap) = self.store.reconcile_snapshot(id).await? else {
            return Ok(None);
        };
        // The new stream must start past every id the database has applied: the low-water
        // mark and any batch applied above it.
        let mark = snap
            .applied_above
            .iter()
            .chain(std::iter::once(&snap.mark))
            .max_by_key(|id| crate::store::stream_id(id))
            .cloned()
            .unwrap_or(snap.mark);
        let Some((item, orders)) = self.store.snapshot(id).await? else {
            return Ok(None);
        };
        let done = redis.rewarm(&item, &orders, &mark).await?;
        if done.outcome.changed() {
            metrics::counter!(shop_metrics::REWARMS, "trigger" => trigger).increment(1);
            tracing::warn!(
                item = id, trigger, outcome = ?done.outcome, stock = done.stock,
                orders = done.orders, pending = done.pending, mark = %done.mark,
                "Redis had lost this sale: rebuilt it from the database"
            );
            self.items
                .write()
                .expect("item cache poisoned")
                .insert(id, item);
        } else if done.outcome == RewarmOutcome::InFlight {
            tracing::warn!(
                item = id,
                trigger,
                "Redis lost this sale but its stream still holds entries the database has not applied; rebuilding once they are persisted"
            );
        }
        Ok(Some(done))
    }

    /// The item's static description (name, price, limit), cached after the first read.
    /// For `redis-lua` an item that was never warmed is not looked up in the database.
    pub async fn item_meta(&self, id: i64) -> Result<Option<Item>, InventoryError> {
        if let Some(item) = self.items.read().expect("item cache poisoned").get(&id) {
            return Ok(Some(item.clone()));
        }
        let item = match self.engine.redis() {
            Some(redis) => redis.warmed_item(id).await?,
            None => self.store.item(id).await?,
        };
        if let Some(item) = &item {
            self.items
                .write()
                .expect("item cache poisoned")
                .insert(id, item.clone());
        }
        Ok(item)
    }

    /// An item's purchase limit, as [`Self::item_meta`] knows it, without copying the item
    /// (the purchase path needs nothing else).
    async fn purchase_limit(&self, id: i64) -> Result<Option<i64>, InventoryError> {
        let cached = self
            .items
            .read()
            .expect("item cache poisoned")
            .get(&id)
            .map(|item| item.purchase_limit);
        match cached {
            Some(limit) => Ok(Some(limit)),
            None => Ok(self.item_meta(id).await?.map(|item| item.purchase_limit)),
        }
    }

    /// Ids of the items this shop has set up or looked up (the background tasks serve these).
    pub fn known_items(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self
            .items
            .read()
            .expect("item cache poisoned")
            .keys()
            .copied()
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Purchases waiting for a turn in the shop's queue in front of an item's row lock
    /// (`for-update`; 0 for the other strategies).
    pub fn purchases_queued(&self) -> usize {
        match &self.engine {
            Engine::ForUpdate { queues, .. } => queues.waiting(),
            _ => 0,
        }
    }

    /// Purchases started and not finished yet.
    pub fn purchases_in_flight(&self) -> usize {
        self.in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits (at most `limit`) until no purchase is in flight: `batched`'s queues are empty
    /// then, and every purchase a client left behind has committed or not. True when drained.
    pub async fn drain(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while self.purchases_in_flight() > 0 {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    /// Tries to buy. Business answers are `Ok(Outcome)`; contention maps to `Outcome::Busy`.
    pub async fn purchase(&self, p: &Purchase) -> Result<Outcome, InventoryError> {
        let _counted = CountGuard::new(&self.in_flight);
        let Some(limit) = self.purchase_limit(p.item_id).await? else {
            let known =
                self.engine.redis().is_some() && self.store.item(p.item_id).await?.is_some();
            return Ok(if known {
                Outcome::NotWarmed
            } else {
                Outcome::UnknownItem
            });
        };
        if p.qty > limit {
            return Ok(Outcome::OverLimit { limit });
        }
        // DEFECT key-reuse (a testing aid, see `defect`): the handler read the
        // Idempotency-Key and never passed it down, so nothing stores or checks it.
        let unkeyed;
        let p = if self.settings.defect == Some(Defect::KeyReuse) && p.idempotency_key.is_some() {
            unkeyed = Purchase {
                idempotency_key: None,
                ..p.clone()
            };
            &unkeyed
        } else {
            p
        };
        let result = self
            .engine
            .purchase(&self.store, &self.settings, p, limit)
            .await;
        let result = match result {
            Err(InventoryError::Store(e)) if e.is_busy() => Ok(Outcome::Busy(busy_reason(&e))),
            other => other,
        };
        match self.engine {
            // redis-lua and redis-buckets keep their keys in Redis, atomically with the deduct.
            Engine::Redis(_) => result,
            Engine::Db(_) | Engine::ForUpdate { .. } | Engine::Batched(_) => {
                idempotency::settle(&self.store, p, limit, result).await
            }
        }
    }

    /// `pending_payment → paid`.
    pub async fn pay(&self, order_id: &str) -> Result<Transition, InventoryError> {
        match self.engine.redis() {
            Some(redis) => redis.pay(order_id).await,
            None => Ok(self.store.pay(order_id).await?),
        }
    }

    /// `pending_payment → cancelled` (or `expired`), restocking exactly once.
    pub async fn release(
        &self,
        order_id: &str,
        to: OrderStatus,
    ) -> Result<Transition, InventoryError> {
        match self.engine.redis() {
            Some(redis) => redis.release(order_id, to).await,
            None => {
                let done = self.store.release(order_id, to).await?;
                self.after_release(order_id, to, done).await
            }
        }
    }

    /// The database strategies' release as it was done, then (only with a [`Defect`] built in)
    /// what the defective shop does after it.
    async fn after_release(
        &self,
        order_id: &str,
        to: OrderStatus,
        done: Transition,
    ) -> Result<Transition, InventoryError> {
        match (self.settings.defect, &done) {
            // DEFECT double-restock: the "order released" listener restocks again, without
            // the guard (the order's state move) that made the first restock happen once.
            (Some(Defect::DoubleRestock), Transition::Applied { restocked }) if *restocked > 0 => {
                self.store.restock_again(order_id).await?;
            }
            // DEFECT cancel-paid-restocks: the cancel restocked before checking the state, and
            // the refusal (the order is paid) does not undo it: the answer is right, the stock
            // is not.
            (Some(Defect::CancelPaidRestocks), Transition::AlreadyIn(OrderStatus::Paid))
                if to == OrderStatus::Cancelled =>
            {
                self.store.restock_again(order_id).await?;
            }
            _ => {}
        }
        Ok(done)
    }

    /// Expires every pending order of `item` whose payment window has passed (database
    /// strategies; `redis-lua` uses its delayed queue). Returns how many expired.
    pub async fn expire_overdue(&self, item: i64) -> Result<u64, InventoryError> {
        if let Some(redis) = self.engine.redis() {
            return redis.expire_due(item).await;
        }
        let cutoff = crate::model::now_ms() - self.settings.payment_timeout.as_millis() as i64;
        let mut n = 0;
        for id in self.store.overdue_orders(item, cutoff).await? {
            let done = self.store.release(&id, OrderStatus::Expired).await?;
            if let Transition::Applied { .. } =
                self.after_release(&id, OrderStatus::Expired, done).await?
            {
                n += 1;
            }
        }
        Ok(n)
    }

    /// Whether item `id`'s sale has settled: no purchase still running (its client may have
    /// given up on it, it may yet commit) and, with a queue, every stream entry in the
    /// database. Reads no order row.
    pub async fn drained(&self, id: i64) -> Result<bool, InventoryError> {
        Ok(self.queue_drained(id).await? && self.purchases_in_flight() == 0)
    }

    /// Whether every stream entry of item `id` is in the database (always, without a queue).
    async fn queue_drained(&self, id: i64) -> Result<bool, InventoryError> {
        match self.engine.redis() {
            Some(redis) => redis.drained(id).await,
            None => Ok(true),
        }
    }

    /// The shop's own audit of one item: its order rows counted as the database streams them
    /// (never every row in memory).
    pub async fn audit(&self, id: i64) -> Result<Option<Audit>, InventoryError> {
        /// Orders per status, and the units of those holding stock.
        struct Counted {
            by_status: BTreeMap<OrderStatus, i64>,
            sold: i64,
        }
        impl crate::store::OrderSink for Counted {
            fn order(&mut self, o: &crate::model::Order) {
                *self.by_status.entry(o.status).or_default() += 1;
                if o.status.holds_stock() {
                    self.sold += o.qty;
                }
            }
        }
        // Drained before and after one consistent read: nothing moved the database meanwhile.
        let drained_before = self.queue_drained(id).await?;
        let mut counted = Counted {
            by_status: OrderStatus::ALL.into_iter().map(|s| (s, 0)).collect(),
            sold: 0,
        };
        let Some(item) = self.store.snapshot_into(id, &mut counted).await? else {
            return Ok(None);
        };
        let Counted { by_status, sold } = counted;
        let (redis_stock, dead_letters) = match self.engine.redis() {
            Some(redis) => (redis.stock(id).await?, redis.dead_letter_count(id).await?),
            None => (None, 0),
        };
        let queue_drained = drained_before && self.drained(id).await?;
        Ok(Some(Audit {
            item_id: id,
            strategy: self.strategy(),
            initial_stock: item.initial_stock,
            db_stock: item.stock,
            redis_stock,
            orders_by_status: by_status,
            sold,
            oversell: (sold - item.initial_stock).max(0),
            negative_stock: item.stock < 0,
            queue_drained,
            dead_letters,
        }))
    }
}

/// The unlocked read-and-check `naive` and `optimistic` share: a fresh read of the item (no
/// transaction, so no stale snapshot), the buyer's holdings against the limit, then the stock.
/// `Ok(Err(outcome))` is a business answer to return as is. Nothing here is atomic with the
/// write that follows: that is `naive`'s bug and what `optimistic`'s compare-and-swap guards.
async fn read_and_check(
    store: &Store,
    p: &Purchase,
) -> Result<Result<Item, Outcome>, InventoryError> {
    let Some(item) = store.item(p.item_id).await? else {
        return Ok(Err(Outcome::UnknownItem));
    };
    if store.held_by_user(p.item_id, &p.user_id).await? + p.qty > item.purchase_limit {
        return Ok(Err(Outcome::Duplicate));
    }
    if item.stock < p.qty {
        return Ok(Err(Outcome::SoldOut));
    }
    Ok(Ok(item))
}

fn busy_reason(e: &StoreError) -> &'static str {
    match e {
        StoreError::Sql(sqlx::Error::PoolTimedOut) => "pool_exhausted",
        _ => "lock_timeout",
    }
}
