//! Reconciliation: the database is the source of truth for stock; Redis is corrected to match.
//!
//! One pass reads the stock, the low-water mark and the stream ids applied above it from one
//! database snapshot (from a replica when one is configured: a lagging replica only means a
//! longer in-flight tail), then `lua/reconcile.lua` computes, atomically in Redis, what the
//! stock should be given the events still in flight, and corrects the residual. The mark is
//! contiguous (every entry at or below it is applied), so the pass is exact with any number of
//! consumers committing batches in any order. A residual beyond the threshold raises an alert:
//! an error-level log line, the `oversell_reconcile_alerts_total` metric and, when configured,
//! a JSON POST to a webhook.

use crate::inventory::{Inventory, InventoryError};
use crate::store::Store;
use crate::telemetry::shop_metrics;
use std::time::Duration;
use tokio::sync::watch;

/// Reconciliation knobs.
#[derive(Debug, Clone)]
pub struct ReconcileSettings {
    /// Time between passes (the post-mortem's job ran every 5 minutes).
    pub interval: Duration,
    /// |residual| above this raises an alert.
    pub alert_threshold: i64,
    /// Optional URL that receives each alert as JSON.
    pub webhook: Option<String>,
    /// Read from this store (a replica) instead of the primary.
    pub replica: Option<Store>,
}

pub use crate::model::ReconcilePass as Pass;

/// Runs one pass for `item`. `Ok(None)` when the item is not warmed or not in the database.
pub async fn pass(
    inventory: &Inventory,
    item: i64,
    settings: &ReconcileSettings,
) -> Result<Option<Pass>, InventoryError> {
    let Some(redis) = inventory.redis() else {
        return Ok(None);
    };
    let (source_store, source) = match &settings.replica {
        Some(replica) => (replica, "replica"),
        None => (inventory.store(), "primary"),
    };
    let Some(snapshot) = source_store.reconcile_snapshot(item).await? else {
        return Ok(None);
    };
    let Some(r) = redis.reconcile(item, &snapshot, true).await? else {
        return Ok(None);
    };
    let (redis_stock, expected, residual, deferred) =
        (r.redis_stock, r.expected, r.residual, r.deferred);
    let alerted = residual.abs() > settings.alert_threshold;
    let result = Pass {
        item_id: item,
        db_stock: snapshot.db_stock,
        redis_stock,
        expected_redis_stock: expected,
        residual,
        corrected: residual != 0 && !deferred,
        deferred,
        alerted,
        source: source.into(),
        low_water_mark: snapshot.mark,
        in_flight: r.in_flight,
    };
    metrics::gauge!(shop_metrics::RECONCILE_RESIDUAL, "item" => item.to_string())
        .set(residual as f64);
    metrics::counter!(shop_metrics::RECONCILE_PASSES).increment(1);
    if deferred && residual != 0 {
        tracing::warn!(
            item,
            residual,
            "reconciliation deferred: an entry at or below the mark is still pending, or the stream was trimmed past the snapshot"
        );
    } else if residual != 0 {
        metrics::counter!(shop_metrics::RECONCILE_CORRECTIONS).increment(1);
        tracing::warn!(item, residual, "reconciliation corrected Redis stock");
    }
    if alerted {
        metrics::counter!(shop_metrics::RECONCILE_ALERTS).increment(1);
        tracing::error!(
            item,
            residual,
            threshold = settings.alert_threshold,
            "ALERT: reconciliation residual beyond threshold; a person should look"
        );
        if let Some(url) = &settings.webhook {
            let body = serde_json::json!({ "alert": "reconciliation_residual", "pass": &result });
            super::alert::post(url.clone(), body).await;
        }
    }
    // History goes to the primary; failing to record it does not undo the correction.
    if let Err(e) = inventory
        .store()
        .record_reconciliation(item, redis_stock, expected, result.corrected)
        .await
    {
        tracing::warn!(item, error = %e, "could not record the reconciliation pass");
    }
    Ok(Some(result))
}

/// Runs a pass every `interval` until shutdown.
pub async fn run(
    inventory: Inventory,
    item: i64,
    settings: ReconcileSettings,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(settings.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await; // the first tick is immediate; warm-up has just verified Redis
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = pass(&inventory, item, &settings).await {
            metrics::counter!(shop_metrics::BACKGROUND_ERRORS, "task" => "reconcile").increment(1);
            tracing::warn!(item, error = %e, "reconciliation pass failed; will retry");
        }
    }
}
