//! An order's moves after its reservation: pay, cancel and expiry, each a script
//! (`lua/pay.lua`, `lua/release.lua`) that moves its state in Redis atomically and appends the
//! stream entry the database follows; under `wait-replica` a move a client is told of waits
//! for a replica ([`RedisLua::transition`]).

use super::durability::Confirm;
use super::{RedisLua, StoredOrder};
use crate::inventory::InventoryError;
use crate::model::{item_of_order, now_ms, OrderStatus};
use crate::store::Transition;
use crate::telemetry::shop_metrics;
use redis::AsyncCommands;

impl RedisLua {
    /// `pending_payment → paid`.
    pub async fn pay(&self, order_id: &str) -> Result<Transition, InventoryError> {
        let Some(item) = item_of_order(order_id) else {
            return Ok(Transition::NotFound);
        };
        let keys = self.keys(item);
        let code: i64 = self
            .transition(
                &self.scripts.pay,
                &[&keys.orders, &keys.expiry, &keys.events],
                &[order_id],
                Confirm::Replica,
                "pay",
            )
            .await?;
        Ok(match code {
            1 => Transition::Applied { restocked: 0 },
            0 => Transition::AlreadyIn(OrderStatus::Paid),
            -1 => Transition::AlreadyIn(
                self.status(item, order_id)
                    .await?
                    .unwrap_or(OrderStatus::Cancelled),
            ),
            _ => Transition::NotFound,
        })
    }

    /// Cancel or expire a pending order: restocks Redis exactly once (see `lua/release.lua`);
    /// the database follows through the stream. Under `wait-replica` the answer waits for a
    /// replica (see [`Self::transition`]).
    pub async fn release(
        &self,
        order_id: &str,
        to: OrderStatus,
    ) -> Result<Transition, InventoryError> {
        self.release_with(order_id, to, Confirm::Replica).await
    }

    pub(super) async fn release_with(
        &self,
        order_id: &str,
        to: OrderStatus,
        confirm: Confirm,
    ) -> Result<Transition, InventoryError> {
        let Some(item) = item_of_order(order_id) else {
            return Ok(Transition::NotFound);
        };
        let keys = self.keys(item);
        let raw: Option<String> = self.conn.clone().hget(&keys.orders, order_id).await?;
        let (code, qty): (i64, i64) = self
            .transition(
                &self.scripts.release,
                &[
                    &keys.stock,
                    &keys.holders,
                    &keys.devices,
                    &keys.ips,
                    &keys.orders,
                    &keys.expiry,
                    &keys.restocked,
                    &keys.events,
                ],
                &[order_id, to.as_str()],
                confirm,
                "cancel",
            )
            .await?;
        Ok(match code {
            1 => {
                metrics::counter!(shop_metrics::RESTOCKS, "reason" => to.as_str()).increment(1);
                metrics::counter!(shop_metrics::RESTOCKED_UNITS).increment(qty.max(0) as u64);
                if let Some(o) = raw.and_then(|r| serde_json::from_str::<StoredOrder>(&r).ok()) {
                    let dev = (!o.d.is_empty()).then_some(o.d.as_str());
                    self.gateway.record_holding(item, &o.u, dev, &o.i, -qty);
                }
                Transition::Applied { restocked: qty }
            }
            0 => Transition::AlreadyIn(self.status(item, order_id).await?.unwrap_or(to)),
            -1 => Transition::AlreadyIn(OrderStatus::Paid),
            -3 => Transition::AlreadyIn(OrderStatus::PendingPayment),
            _ => Transition::NotFound,
        })
    }

    /// Expires every order of `item` whose payment deadline has passed (the delayed queue is a
    /// sorted set scored by due time). Safe to run from several places at once: the release
    /// script re-checks state and due time atomically.
    pub async fn expire_due(&self, item: i64) -> Result<u64, InventoryError> {
        let keys = self.keys(item);
        let due: Vec<String> = self
            .conn
            .clone()
            .zrangebyscore_limit(&keys.expiry, "-inf", now_ms(), 0, 500)
            .await?;
        let mut n = 0;
        for id in due {
            // Nobody is told of an expiry: no replica to wait for.
            if let Transition::Applied { .. } = self
                .release_with(&id, OrderStatus::Expired, Confirm::No)
                .await?
            {
                n += 1;
            }
        }
        Ok(n)
    }

    /// An order's state as Redis holds it.
    pub async fn status(
        &self,
        item: i64,
        order_id: &str,
    ) -> Result<Option<OrderStatus>, InventoryError> {
        let raw: Option<String> = self
            .conn
            .clone()
            .hget(self.keys(item).orders, order_id)
            .await?;
        Ok(raw
            .and_then(|r| serde_json::from_str::<StoredOrder>(&r).ok())
            .and_then(|o| OrderStatus::parse(&o.s)))
    }
}
