//! The shop's watch over its redis-lua sales: it notices a sale whose Redis keys vanished
//! (Redis restarted without persistence, failed over to an empty replica, was flushed) and
//! rebuilds it from the database through [`Inventory::rewarm`].
//!
//! It looks every `--rewarm-check`, and at once when a purchase was answered `not_warmed`
//! ([`RewarmWatch::nudge`]). It watches the sales this shop has set up or found warm: a sale
//! never warmed into this Redis is not loaded behind the operator's back (warm explicitly with
//! `PUT`, or `POST /api/items/{id}/rewarm`).

use crate::inventory::Inventory;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// Shortest time between two looks, however often purchases nudge.
const MIN_GAP: Duration = Duration::from_millis(100);

/// Wakes the watch early.
#[derive(Debug, Clone, Default)]
pub struct RewarmWatch {
    nudge: Arc<Notify>,
}

impl RewarmWatch {
    /// Asks for a look now (a purchase found a sale missing from Redis).
    pub fn nudge(&self) {
        self.nudge.notify_one();
    }

    /// Runs until `shutdown`: a look every `every` (`None`: only when nudged).
    pub async fn run(
        self,
        inventory: Inventory,
        every: Option<Duration>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let Some(redis) = inventory.redis().cloned() else {
            return;
        };
        loop {
            let tick = async {
                match every {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            let trigger = tokio::select! {
                _ = shutdown.changed() => return,
                _ = tick => "check",
                _ = self.nudge.notified() => "purchase",
            };
            for id in inventory.known_items() {
                match redis.sale_present(id).await {
                    Ok(true) => {}
                    Ok(false) => {
                        if let Err(e) = inventory.rewarm(id, trigger).await {
                            tracing::warn!(item = id, error = %e, "rewarm failed; will retry");
                        }
                    }
                    // Redis itself is down: purchases and the consumer say so.
                    Err(e) => tracing::debug!(item = id, error = %e, "sale check failed"),
                }
            }
            tokio::time::sleep(MIN_GAP).await;
        }
    }
}
