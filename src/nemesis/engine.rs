//! The schedule: one task per fault sleeps until its time after the sale opens, applies it,
//! holds it for its window and undoes it; [`Engine::finish`] waits for every fault to end and
//! returns what was applied.
//!
//! Undo is not left to the happy path. [`Engine::finish`] undoes; dropping the engine (an
//! error, a cancelled run) aborts the tasks and undoes everything the faults could have left
//! behind, synchronously, on a thread of its own; ctrl-c while faults are live does the same
//! and then exits with 130. Everything undone is idempotent: re-allowing connections to the
//! run's database, SIGCONT and then SIGKILL of the private Redis, starting a crashed managed
//! database server (a running one is left alone), resuming a replica's replay. A lock dies with the
//! session that held it (the task's connection, dropped with the task).

use super::hold::{Hold, ShopControl};
use super::{cluster, crash, db, redis, replica, shop, FaultKind, FaultSpec, PrivateRedis};
use crate::services::managed::ManagedServer;
use crate::store::redis_conn::is_cluster;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What the run owns, and so what its faults may act on.
#[derive(Clone)]
pub struct Owned {
    /// The child shop (`None`: a foreign shop, which no fault touches).
    pub shop: Option<Arc<dyn ShopControl>>,
    /// The run's own database.
    pub database_url: String,
    /// The private Redis, when a fault needs one and the strategy uses Redis.
    pub private_redis: Option<Arc<PrivateRedis>>,
    /// The Redis the shop uses (the private one, or the shared one under the run's prefix).
    pub redis_url: String,
    /// The sale in the shop's Redis, as the shop under test lays it out (`None`: the strategy
    /// does not use Redis, and the Redis kinds are skipped).
    pub redis_sale: Option<RedisSale>,
    /// The strategy's name, for notes.
    pub strategy: String,
    /// The run's managed read replica (a database URL on it), when it has one: `replica-lag`.
    pub replica_url: Option<String>,
}

/// The sale in the shop's Redis: what `redeliver` rewinds and what `redis-failover` moves.
#[derive(Debug, Clone)]
pub struct RedisSale {
    /// The sale's order streams (one per key set of the sale).
    pub streams: Vec<String>,
    /// The consumer group reading them.
    pub group: String,
    /// A key in the slot a failover moves (the sale's first key set's).
    pub slot_key: String,
}

/// One fault as it happened, ms after the sale opened.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub kind: FaultKind,
    pub at_ms: u64,
    /// `None`: not applied (skipped, or it failed: see `note`).
    pub began_ms: Option<u64>,
    pub ended_ms: Option<u64>,
    /// Why it was skipped, what failed, or what it did.
    pub note: Option<String>,
}

/// The faults of one run, scheduled.
pub struct Engine {
    tasks: Vec<JoinHandle<Applied>>,
    stop: watch::Sender<bool>,
    undo: Arc<Undo>,
}

/// Everything the faults may have left behind, undone in one idempotent pass.
pub(super) struct Undo {
    database_url: Option<String>,
    private_redis: Option<Arc<PrivateRedis>>,
    /// A managed database server a crash or restart may have left down.
    managed_db: Option<Arc<ManagedServer>>,
    /// A replica whose replay may be left paused.
    replica_url: Option<String>,
    /// Killed on ctrl-c only (the process then exits without dropping it).
    shop: Option<Arc<dyn ShopControl>>,
    done: Mutex<bool>,
}

impl Undo {
    async fn run(&self) {
        if let Some(url) = &self.database_url {
            if let Err(e) = db::allow_connections(url).await {
                tracing::warn!(error = %format!("{e:#}"), "nemesis: re-allowing connections to the run's database failed");
            }
        }
        if let Some(r) = &self.private_redis {
            r.resume();
        }
        if let Some(server) = &self.managed_db {
            crash::start_again(server).await;
        }
        if let Some(url) = &self.replica_url {
            if let Err(e) = replica::resume(url).await {
                tracing::warn!(error = %format!("{e:#}"), "nemesis: resuming the replica's replay failed");
            }
        }
    }

    /// The undo, from synchronous code (Drop): on a thread with its own runtime, waited for
    /// up to 10 s.
    fn run_blocking(self: &Arc<Self>) {
        {
            let mut done = self.done.lock().unwrap_or_else(|e| e.into_inner());
            if *done {
                return;
            }
            *done = true;
        }
        let me = self.clone();
        let t = std::thread::spawn(move || {
            if let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                rt.block_on(async {
                    let _ = tokio::time::timeout(Duration::from_secs(10), me.run()).await;
                });
            }
        });
        let _ = t.join();
    }
}

impl Engine {
    /// Schedules `faults` against what the run owns; `opened` is the sale's opening.
    pub fn start(faults: &[FaultSpec], owned: Owned, opened: Instant) -> Engine {
        let (stop, stopped) = watch::channel(false);
        let undo = Arc::new(Undo {
            database_url: faults
                .iter()
                .any(|f| f.kind == FaultKind::DbOutage)
                .then(|| owned.database_url.clone()),
            private_redis: owned.private_redis.clone(),
            managed_db: faults
                .iter()
                .any(|f| f.kind.needs_managed_db())
                .then(|| crash::server_of(&owned.database_url))
                .flatten(),
            replica_url: faults
                .iter()
                .any(|f| f.kind.needs_replica())
                .then(|| owned.replica_url.clone())
                .flatten(),
            shop: owned.shop.clone(),
            done: Mutex::new(false),
        });
        let tasks = faults
            .iter()
            .cloned()
            .map(|f| {
                let owned = owned.clone();
                let stopped = stopped.clone();
                tokio::spawn(async move { one(f, owned, opened, stopped).await })
            })
            .collect();
        interrupt::watch(&undo, opened.into_std());
        Engine { tasks, stop, undo }
    }

    /// Waits for every fault to end (each is bounded by its time and window), undoes what
    /// could be left, and returns what happened, in the order given.
    pub async fn finish(mut self) -> Vec<Applied> {
        let mut out = Vec::new();
        for t in std::mem::take(&mut self.tasks) {
            match t.await {
                Ok(a) => out.push(a),
                Err(e) => tracing::warn!(error = %e, "nemesis: a fault's task failed"),
            }
        }
        self.undo.run().await;
        out
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        for t in &self.tasks {
            t.abort();
        }
        if !self.tasks.is_empty() {
            // Dropped before `finish`: an error or a cancelled run.
            self.undo.run_blocking();
        }
    }
}

/// Ctrl-c while faults may be live: every live engine's undo runs, then the process exits
/// with 130. The listener is installed with the first engine (a process without faults keeps
/// its ctrl-c as it was) on a thread with its own runtime, so it outlives any one run. It
/// registers once the first sale has opened: goose installs its own ctrl-c handler (the
/// `ctrlc` crate, which replaces whatever was there) while it sets up, and tokio's handler,
/// installed after it, calls it too — so goose still stops its users.
mod interrupt {
    use super::Undo;
    use std::sync::{Arc, Mutex, OnceLock, Weak};

    static LIVE: Mutex<Vec<Weak<Undo>>> = Mutex::new(Vec::new());
    static LISTENER: OnceLock<()> = OnceLock::new();

    pub(super) fn watch(undo: &Arc<Undo>, opened: std::time::Instant) {
        {
            let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
            live.retain(|w| w.strong_count() > 0);
            live.push(Arc::downgrade(undo));
        }
        LISTENER.get_or_init(|| {
            std::thread::spawn(move || {
                let after = opened + std::time::Duration::from_millis(200);
                if let Some(wait) = after.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(wait);
                }
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                rt.block_on(async {
                    if tokio::signal::ctrl_c().await.is_err() {
                        return;
                    }
                    crate::console::eoutln!("interrupted: undoing the faults");
                    let live: Vec<Arc<Undo>> = LIVE
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .iter()
                        .filter_map(Weak::upgrade)
                        .collect();
                    for undo in live {
                        let _ =
                            tokio::time::timeout(std::time::Duration::from_secs(10), undo.run())
                                .await;
                        if let Some(r) = &undo.private_redis {
                            r.stop();
                        }
                        if let Some(shop) = &undo.shop {
                            shop.kill_now();
                        }
                    }
                    crate::placement::give_back();
                    std::process::exit(130);
                });
            });
        });
    }
}

fn ms_since(opened: Instant) -> u64 {
    Instant::now()
        .checked_duration_since(opened)
        .unwrap_or_default()
        .as_millis() as u64
}

/// One fault's life: prepare (connect), wait for its time, apply, hold, undo.
async fn one(
    f: FaultSpec,
    owned: Owned,
    opened: Instant,
    stopped: watch::Receiver<bool>,
) -> Applied {
    let mut applied = Applied {
        kind: f.kind,
        at_ms: f.at_ms(),
        began_ms: None,
        ended_ms: None,
        note: None,
    };
    if let Some(why) = skip_reason(&f, &owned) {
        applied.note = Some(why);
        return applied;
    }
    let mut hold = Hold::new(
        opened + Duration::from_millis(f.at_ms()),
        Duration::from_millis(f.duration_ms),
        stopped,
    );
    let result = act(&f, &owned, &mut hold).await;
    let ms = |t: Instant| {
        t.checked_duration_since(opened)
            .unwrap_or_default()
            .as_millis() as u64
    };
    applied.began_ms = hold.began.map(ms);
    applied.ended_ms = hold.began.map(|_| ms_since(opened));
    applied.note = match result {
        Ok(_) if hold.began.is_none() => {
            Some("not applied: the run ended before it was due".into())
        }
        Ok(note) => note,
        Err(e) => {
            tracing::warn!(fault = %f.label(), error = %format!("{e:#}"), "nemesis: a fault failed");
            Some(format!("failed: {e:#}"))
        }
    };
    applied
}

/// Why a fault does not apply to this run, if it does not.
fn skip_reason(f: &FaultSpec, owned: &Owned) -> Option<String> {
    if f.kind.redis_only() && owned.redis_sale.is_none() {
        return Some(format!("skipped: {} does not use Redis", owned.strategy));
    }
    let cluster = is_cluster(&owned.redis_url);
    if f.kind.needs_cluster() && !cluster {
        return Some(
            "skipped: the run's Redis is not a cluster (--redis-cluster or a redis+cluster:// URL)"
                .into(),
        );
    }
    if f.kind.needs_private_redis() && cluster {
        return Some(
            "skipped: the run's Redis is a cluster (its fault kinds are redis-failover and \
             redis-takeover)"
                .into(),
        );
    }
    if f.kind.needs_private_redis() && owned.private_redis.is_none() {
        return Some("skipped: no private Redis for this run".into());
    }
    if f.kind.needs_managed_db() {
        if let Some(why) = crash::refused(&owned.database_url) {
            return Some(why);
        }
    }
    if f.kind.needs_replica() && owned.replica_url.is_none() {
        return Some(
            "skipped: the run has no replica (a managed PostgreSQL streaming replica: \
             redis-lua or redis-buckets on --services managed with PostgreSQL)"
                .into(),
        );
    }
    if f.kind == FaultKind::ShopKill && owned.shop.is_none() {
        return Some("skipped: the shop is not this run's child".into());
    }
    None
}

/// Prepares `f`, applies it at its time, holds it for its window, then undoes it.
async fn act(f: &FaultSpec, owned: &Owned, hold: &mut Hold) -> anyhow::Result<Option<String>> {
    match f.kind {
        FaultKind::ShopKill => {
            let shop = owned.shop.as_ref().expect("checked by skip_reason");
            shop::kill(shop.as_ref(), hold).await
        }
        FaultKind::RedisRestart | FaultKind::RedisPause | FaultKind::RedisConnKill => {
            let r = owned
                .private_redis
                .as_ref()
                .expect("checked by skip_reason");
            redis::act(f.kind, r, hold).await
        }
        FaultKind::Redeliver => {
            let sale = owned.redis_sale.as_ref().expect("checked by skip_reason");
            redis::redeliver(&owned.redis_url, sale, f.rewind_to.as_deref(), hold).await
        }
        FaultKind::RedisFailover | FaultKind::RedisTakeover => {
            let takeover = f.kind == FaultKind::RedisTakeover;
            let sale = owned.redis_sale.as_ref().expect("checked by skip_reason");
            cluster::failover(&owned.redis_url, &sale.slot_key, takeover, hold).await
        }
        FaultKind::DbOutage => db::outage(&owned.database_url, hold).await,
        FaultKind::DbLock => db::lock(&owned.database_url, hold).await,
        FaultKind::DbCrash => crash::act(&owned.database_url, false, hold).await,
        FaultKind::DbRestart => crash::act(&owned.database_url, true, hold).await,
        FaultKind::ReplicaLag => {
            let url = owned
                .replica_url
                .as_deref()
                .expect("checked by skip_reason");
            replica::lag(url, hold).await
        }
    }
}
