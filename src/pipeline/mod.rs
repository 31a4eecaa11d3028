//! redis-lua's background machinery, plus the payment-timeout sweeper every strategy uses.
//!
//! - [`consumer`]: persists each item's stream into the database (batched, idempotent).
//! - [`reconcile`]: recomputes Redis stock from the database and corrects the residual.
//! - the expiry sweeper: expires unpaid orders past their payment deadline.
//!
//! [`spawn`] starts them for every item the shop knows, and for items set up later.

pub mod consumer;
pub mod reconcile;

use crate::inventory::Inventory;
use std::collections::HashSet;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Background settings.
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// Events per database transaction.
    pub batch: usize,
    /// Entries pending longer than this on a dead consumer are claimed.
    pub claim_idle: Duration,
    /// How often due payments are expired.
    pub expiry_every: Duration,
    pub reconcile: reconcile::ReconcileSettings,
}

impl Default for PipelineSettings {
    fn default() -> Self {
        PipelineSettings {
            batch: 500,
            claim_idle: Duration::from_secs(10),
            expiry_every: Duration::from_millis(500),
            reconcile: reconcile::ReconcileSettings::default(),
        }
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

async fn supervise(
    inventory: Inventory,
    settings: PipelineSettings,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut started: HashSet<i64> = HashSet::new();
    let mut tasks = JoinSet::new();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            _ = tick.tick() => {}
        }
        for id in inventory.known_items() {
            if !started.insert(id) {
                continue;
            }
            tasks.spawn(expiry_loop(
                inventory.clone(),
                id,
                settings.expiry_every,
                shutdown.clone(),
            ));
            if let Some(redis) = inventory.redis() {
                tasks.spawn(consumer::run(
                    redis.clone(),
                    inventory.store().clone(),
                    id,
                    settings.clone(),
                    shutdown.clone(),
                ));
                tasks.spawn(reconcile::run(
                    inventory.clone(),
                    id,
                    settings.reconcile.clone(),
                    shutdown.clone(),
                ));
            }
        }
    }
    while tasks.join_next().await.is_some() {}
}

async fn expiry_loop(
    inventory: Inventory,
    item: i64,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {}
        }
        match inventory.expire_overdue(item).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(item, expired = n, "expired unpaid orders"),
            Err(e) => tracing::warn!(item, error = %e, "expiry sweep failed"),
        }
    }
}
