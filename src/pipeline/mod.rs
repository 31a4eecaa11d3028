//! redis-lua's background machinery, plus the payment-timeout sweeper every strategy uses.
//!
//! - [`consumer`]: persists each item's stream into the database (batched, idempotent),
//!   surviving lost connections; [`entry`]: what one stream entry holds; [`batch`]: one
//!   batch, with refused entries isolated and
//!   dead-lettered; [`mark`]: the low-water mark's upkeep and trimming (retry waits from
//!   `crate::backoff`); [`alert`]: the webhook.
//! - [`reconcile`]: recomputes Redis stock from the database and corrects the residual.
//! - the expiry sweeper: expires unpaid orders past their payment deadline.
//!
//! [`spawn`] starts them for every item the shop knows, and for items set up later. A task
//! that ends before shutdown (a panic) is logged at error level and started again: no
//! background loop may die or go silent.

pub mod alert;
pub mod batch;
pub mod consumer;
pub mod entry;
pub mod mark;
pub mod reconcile;

use crate::inventory::{Engine, Inventory, RedisBuckets, RedisEngine, RedisLua};
use crate::telemetry::shop_metrics;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Background settings (built by [`crate::shop::ShopKnobs::pipeline`]; the ones no knob sets
/// are written once, in [`PipelineSettings::new`]).
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// Events per database transaction.
    pub batch: usize,
    /// Longest a consumer's read blocks waiting for new entries.
    pub block: Duration,
    /// Entries pending longer than this on a dead consumer are claimed (checked every half).
    pub claim_idle: Duration,
    /// Longest wait between a consumer's retries (capped exponential backoff).
    pub backoff_cap: Duration,
    /// An entry the database refuses this many times is dead-lettered.
    pub dead_letter_after: u32,
    /// The stream is trimmed only below low-water marks at least this old.
    pub trim_delay: Duration,
    /// How often due payments are expired.
    pub expiry_every: Duration,
    pub reconcile: reconcile::ReconcileSettings,
    /// Consumers per item stream in this process (one consumer group; Redis hands each entry
    /// to one of them).
    pub consumers: usize,
    /// How long a consumer waits after persisting a batch of fewer than `batch` entries before
    /// it reads again (zero: at once).
    pub linger: Duration,
}

impl PipelineSettings {
    /// The pipeline with its knobs (reconciliation, the dead-letter count, consumers per item)
    /// and its fixed internals (a test may still change any field).
    pub fn new(
        reconcile: reconcile::ReconcileSettings,
        dead_letter_after: u32,
        consumers: usize,
    ) -> Self {
        PipelineSettings {
            batch: 1000,
            block: Duration::from_millis(200),
            claim_idle: Duration::from_secs(10),
            backoff_cap: Duration::from_secs(2),
            dead_letter_after,
            trim_delay: Duration::from_secs(10),
            expiry_every: Duration::from_millis(500),
            reconcile,
            consumers,
            linger: Duration::ZERO,
        }
    }

    /// The same, with consumers that wait `linger` after a batch that was not full.
    pub fn with_linger(self, linger: Duration) -> Self {
        PipelineSettings { linger, ..self }
    }
}

/// Starts the background tasks; they stop when `shutdown` turns true.
pub async fn spawn(
    inventory: Inventory,
    settings: PipelineSettings,
    shutdown: watch::Receiver<bool>,
) -> JoinSet<()> {
    // Items that already exist are picked up at start (for redis-lua: those warmed in Redis).
    if let Ok(ids) = inventory.store().item_ids().await {
        for id in ids {
            let _ = inventory.item_meta(id).await;
        }
    }
    let mut set = JoinSet::new();
    set.spawn(supervise(inventory, settings, shutdown));
    set
}

/// The background tasks of one item, each with the Redis side it works on.
#[derive(Clone)]
enum Task {
    Expiry,
    /// redis-lua: a consumer of the item's stream.
    Consumer(RedisLua),
    Reconcile,
    /// redis-buckets: the consumer of one bucket's stream (the bucket's view, its number).
    BucketConsumer(RedisBuckets, u32),
    /// redis-buckets: completes transfers left half done.
    Repair(RedisBuckets),
}

impl Task {
    fn as_str(&self) -> &'static str {
        match self {
            Task::Expiry => "expiry",
            Task::Consumer(_) => "consumer",
            Task::Reconcile => "reconcile",
            Task::BucketConsumer(..) => "consumer",
            Task::Repair(_) => "repair",
        }
    }

    /// Every task an item needs under `engine` (`consumers`: redis-lua's per item).
    fn for_item(engine: &Engine, consumers: usize) -> Vec<Task> {
        let mut tasks = vec![Task::Expiry];
        match engine {
            Engine::Db(_) | Engine::ForUpdate { .. } | Engine::Batched(_) => {}
            Engine::Redis(RedisEngine::Lua(redis)) => {
                tasks.extend(std::iter::repeat_n(
                    Task::Consumer(redis.clone()),
                    consumers.max(1),
                ));
                tasks.push(Task::Reconcile);
            }
            Engine::Redis(RedisEngine::Buckets(buckets)) => {
                tasks.extend(
                    (0..buckets.buckets()).map(|b| Task::BucketConsumer(buckets.clone(), b)),
                );
                tasks.push(Task::Repair(buckets.clone()));
            }
        }
        tasks
    }
}

/// Starts every known item's tasks (new items on a 200 ms tick) and starts a task again when
/// it ends before shutdown; at shutdown waits for all of them.
async fn supervise(
    inventory: Inventory,
    settings: PipelineSettings,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tasks = Tasks::new(inventory, settings, shutdown.clone());
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            _ = tick.tick() => {}
            Some(ended) = tasks.set.join_next_with_id(), if !tasks.set.is_empty() => {
                if *shutdown.borrow() {
                    break;
                }
                tasks.restart(ended).await;
                continue;
            }
        }
        tasks.start_new_items();
    }
    while tasks.set.join_next().await.is_some() {}
}

/// The running background tasks, each known by its id as the task and item it serves.
struct Tasks {
    inventory: Inventory,
    settings: PipelineSettings,
    shutdown: watch::Receiver<bool>,
    set: JoinSet<()>,
    running: HashMap<tokio::task::Id, (Task, i64)>,
    started: HashSet<i64>,
}

impl Tasks {
    fn new(
        inventory: Inventory,
        settings: PipelineSettings,
        shutdown: watch::Receiver<bool>,
    ) -> Tasks {
        Tasks {
            inventory,
            settings,
            shutdown,
            set: JoinSet::new(),
            running: HashMap::new(),
            started: HashSet::new(),
        }
    }

    /// Every task of each item the inventory knows and that has none started yet.
    fn start_new_items(&mut self) {
        for id in self.inventory.known_items() {
            if !self.started.insert(id) {
                continue;
            }
            for task in Task::for_item(self.inventory.engine(), self.settings.consumers) {
                self.start(task, id);
            }
        }
    }

    /// A task that ended (returned or panicked) before shutdown: counted in
    /// `BACKGROUND_RESTARTS`, logged, and started again after 200 ms.
    async fn restart(&mut self, ended: Result<(tokio::task::Id, ()), tokio::task::JoinError>) {
        let (id, error) = match ended {
            Ok((id, ())) => (id, None),
            Err(e) => (e.id(), Some(e.to_string())),
        };
        let Some((task, item)) = self.running.remove(&id) else {
            return;
        };
        metrics::counter!(shop_metrics::BACKGROUND_RESTARTS, "task" => task.as_str()).increment(1);
        tracing::error!(
            item,
            task = task.as_str(),
            error = error.as_deref().unwrap_or("returned"),
            "a background task ended before shutdown; starting it again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        self.start(task, item);
    }

    /// Spawns `task` for `item` and remembers it by its id.
    fn start(&mut self, task: Task, item: i64) {
        let (inventory, settings) = (&self.inventory, &self.settings);
        let shutdown = self.shutdown.clone();
        let handle = match task.clone() {
            Task::Expiry => self.set.spawn(expiry_loop(
                inventory.clone(),
                item,
                settings.expiry_every,
                shutdown,
            )),
            Task::Consumer(redis) => {
                let consumer = consumer::Consumer::new(
                    redis,
                    inventory.store().clone(),
                    item,
                    settings.clone(),
                    consumer_name(),
                );
                self.set.spawn(consumer.run(shutdown))
            }
            Task::Reconcile => self.set.spawn(reconcile::run(
                inventory.clone(),
                item,
                settings.reconcile.clone(),
                shutdown,
            )),
            Task::BucketConsumer(buckets, b) => {
                let consumer = bucket_consumer(&buckets, b, inventory, item, settings);
                self.set.spawn(consumer.run(shutdown))
            }
            Task::Repair(buckets) => {
                self.set
                    .spawn(repair_loop(buckets, item, settings.expiry_every, shutdown))
            }
        };
        self.running.insert(handle.id(), (task, item));
    }
}

/// A consumer's name in its stream's group: unique to this process and this start.
fn consumer_name() -> String {
    format!(
        "shop-{}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    )
}

/// Bucket `b`'s consumer for `item`, which knows its sibling buckets.
fn bucket_consumer(
    buckets: &RedisBuckets,
    b: u32,
    inventory: &Inventory,
    item: i64,
    settings: &PipelineSettings,
) -> consumer::Consumer {
    let siblings = (0..buckets.buckets())
        .filter(|other| *other != b)
        .map(|other| buckets.bucket(other).clone())
        .collect();
    consumer::Consumer::for_bucket(
        buckets.bucket(b).clone(),
        siblings,
        inventory.store().clone(),
        item,
        b,
        settings.clone(),
        consumer_name(),
    )
}

async fn expiry_loop(
    inventory: Inventory,
    item: i64,
    every: Duration,
    shutdown: watch::Receiver<bool>,
) {
    every_tick(every, shutdown, || async {
        match inventory.expire_overdue(item).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(item, expired = n, "expired unpaid orders"),
            Err(e) => {
                metrics::counter!(shop_metrics::BACKGROUND_ERRORS, "task" => "expiry").increment(1);
                tracing::warn!(item, error = %e, "expiry sweep failed; will retry");
            }
        }
    })
    .await
}

/// redis-buckets: completes, every `every`, the transfers a buyer left half done (lent by one
/// bucket and never received by the other: the process died between the two scripts).
async fn repair_loop(
    buckets: RedisBuckets,
    item: i64,
    every: Duration,
    shutdown: watch::Receiver<bool>,
) {
    every_tick(every, shutdown, || async {
        match buckets.repair(item).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!(item, transfers = n, "completed transfers left half done"),
            Err(e) => {
                metrics::counter!(shop_metrics::BACKGROUND_ERRORS, "task" => "repair").increment(1);
                tracing::warn!(item, error = %e, "transfer repair failed; will retry");
            }
        }
    })
    .await
}

/// Runs `pass` every `every` (a late tick delays the next rather than bunching up) until
/// `shutdown`.
async fn every_tick<F, Fut>(every: Duration, mut shutdown: watch::Receiver<bool>, mut pass: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {}
        }
        pass().await;
    }
}
