//! Recovery after Redis lost a sale: `lua/rewarm.lua` rebuilds it from the database's item and
//! orders (read, never written), and [`RedisLua::sale_present`] is the cheap check that
//! notices the loss.

use super::{RedisLua, GROUP};
use crate::inventory::InventoryError;
use crate::model::{Item, Order, OrderStatus};
use redis::Script;
use serde::Serialize;
use std::sync::LazyLock;

/// `lua/rewarm.lua`, called by SHA with a NOSCRIPT fallback (after a data loss Redis has
/// forgotten every script too).
static REWARM: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../../lua/rewarm.lua")));

/// What a rewarm did to Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RewarmOutcome {
    /// The sale was missing and has been rebuilt from the database.
    Rebuilt,
    /// Only the stream (and its consumer group) was missing: recreated, the rest kept.
    StreamRecreated,
    /// Nothing was missing; nothing changed.
    AlreadyWarm,
    /// The stream still holds entries the database has not applied: nothing changed; the
    /// rebuild waits until the consumer has persisted them.
    InFlight,
}

impl RewarmOutcome {
    /// Whether Redis was changed.
    pub fn changed(self) -> bool {
        matches!(
            self,
            RewarmOutcome::Rebuilt | RewarmOutcome::StreamRecreated
        )
    }
}

/// The answer of `POST /api/items/{id}/rewarm`: what was done, and what was loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rewarm {
    pub item_id: i64,
    pub outcome: RewarmOutcome,
    /// Stock written to Redis (the database's).
    pub stock: i64,
    /// Orders loaded into the orders hash (every state).
    pub orders: usize,
    /// Pending orders put back on the delayed queue.
    pub pending: usize,
    /// Cancelled or expired orders put in the restock idempotency set.
    pub released: usize,
    /// Users holding units.
    pub holders: usize,
    /// The database's applied stream mark the new stream continues after.
    pub mark: String,
}

impl RedisLua {
    /// Whether Redis still holds the sale: its stock, meta and stream keys all exist.
    pub async fn sale_present(&self, item: i64) -> Result<bool, InventoryError> {
        let keys = self.keys(item);
        let n: i64 = redis::cmd("EXISTS")
            .arg(&keys.stock)
            .arg(&keys.meta)
            .arg(&keys.events)
            .query_async(&mut self.conn())
            .await?;
        Ok(n == 3)
    }

    /// How many orders of the item Redis holds (the orders hash's size; 0 when not warm).
    pub async fn order_count(&self, item: i64) -> Result<i64, InventoryError> {
        Ok(redis::cmd("HLEN")
            .arg(&self.keys(item).orders)
            .query_async(&mut self.conn())
            .await?)
    }

    /// Rebuilds the sale from the database's `item` and `orders` (see `lua/rewarm.lua`),
    /// atomically; `mark` is the database's applied stream mark, read before the orders.
    pub async fn rewarm(
        &self,
        item: &Item,
        orders: &[Order],
        mark: &str,
    ) -> Result<Rewarm, InventoryError> {
        let keys = self.keys(item.id);
        let mut call = REWARM.prepare_invoke();
        for key in keys.all() {
            call.key(key);
        }
        call.arg(item.stock)
            .arg(item.purchase_limit)
            .arg(item.initial_stock)
            .arg(&item.name)
            .arg(item.price_cents)
            .arg(mark)
            .arg(self.payment_timeout.as_millis() as i64)
            .arg(GROUP);
        for o in orders {
            call.arg(&o.id)
                .arg(o.status.as_str())
                .arg(o.qty)
                .arg(&o.user_id)
                .arg(o.device_id.as_deref().unwrap_or(""))
                .arg(o.created_at_ms)
                .arg(o.idempotency_key.as_deref().unwrap_or(""));
        }
        let (code, _n): (i64, i64) = call.invoke_async(&mut self.conn()).await?;
        let outcome = match code {
            1 => RewarmOutcome::Rebuilt,
            2 => RewarmOutcome::StreamRecreated,
            0 => RewarmOutcome::AlreadyWarm,
            _ => RewarmOutcome::InFlight,
        };
        if outcome == RewarmOutcome::Rebuilt {
            // The gateway's cache of holders described the lost state; the script is the
            // authority again.
            self.gateway.reset_item(item.id);
        }
        let count = |f: fn(OrderStatus) -> bool| orders.iter().filter(|o| f(o.status)).count();
        let mut holders: Vec<&str> = orders
            .iter()
            .filter(|o| o.status.holds_stock())
            .map(|o| o.user_id.as_str())
            .collect();
        holders.sort_unstable();
        holders.dedup();
        Ok(Rewarm {
            item_id: item.id,
            outcome,
            stock: item.stock,
            orders: orders.len(),
            pending: count(|s| s == OrderStatus::PendingPayment),
            released: count(|s| !s.holds_stock()),
            holders: holders.len(),
            mark: mark.to_string(),
        })
    }
}
