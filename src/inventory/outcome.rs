//! What the inventory answers: a purchase's [`Outcome`] (sold out, duplicate, busy are normal
//! answers on a hot path), [`InventoryError`] for infrastructure failures, what a sale set-up
//! did ([`SaleSetupResult`]) and the shop's own [`Audit`] of an item.

use super::{redis_lua, Strategy};
use crate::model::{Item, OrderStatus};
use crate::store::StoreError;
use serde::Serialize;
use std::collections::BTreeMap;

/// The answer to one purchase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Units reserved; the order awaits payment.
    Reserved {
        order_id: String,
    },
    /// The request's `Idempotency-Key` already bought this order: the same answer again, and
    /// nothing moved (see [`super::idempotency`]).
    Replayed {
        order_id: String,
    },
    /// The request's `Idempotency-Key` bought an order for another buyer or quantity.
    KeyReused,
    SoldOut,
    /// The user (or device, or IP) already holds the purchase limit, or has a request in flight.
    Duplicate,
    /// The gateway's token bucket said no.
    RateLimited,
    UnknownItem,
    /// redis-lua: the sale was never warmed into Redis; refused rather than lazily loaded.
    NotWarmed,
    /// Contention: pool exhausted, lock wait timed out, retries exhausted.
    Busy(&'static str),
    /// More units than one buyer may ever hold: a bad request, nothing moved.
    OverLimit {
        limit: i64,
    },
    /// redis-lua `wait-replica`: no replica confirmed the reservation within `waited_ms`;
    /// nothing was acknowledged, and the unit was `released` back at once.
    NotReplicated {
        waited_ms: u64,
        released: bool,
    },
}

/// Infrastructure failures (not business answers).
#[derive(Debug, thiserror::Error)]
pub enum InventoryError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Redis (or another service) could not be reached.
    #[error(transparent)]
    Unreachable(#[from] crate::services::Unreachable),
    #[error("{0}")]
    Inconsistent(String),
    /// Redis is not configured the way `--redis-durability` claims (the shop refuses to start).
    #[error(transparent)]
    Durability(#[from] redis_lua::durability::DurabilityMismatch),
    /// `wait-replica`: a pay or cancel happened on the Redis primary, but no replica confirmed
    /// it within `waited_ms`, so it is not acknowledged (a failover could lose it).
    #[error("no Redis replica confirmed the {what} within {waited_ms} ms")]
    NotReplicated { what: &'static str, waited_ms: u64 },
}

impl From<sqlx::Error> for InventoryError {
    fn from(e: sqlx::Error) -> Self {
        InventoryError::Store(StoreError::Sql(e))
    }
}

/// The oracle's view of one item, as the shop sees it (`GET /api/items/{id}/audit`).
#[derive(Debug, Clone, Serialize)]
pub struct Audit {
    pub item_id: i64,
    pub strategy: Strategy,
    pub initial_stock: i64,
    pub db_stock: i64,
    pub redis_stock: Option<i64>,
    pub orders_by_status: BTreeMap<OrderStatus, i64>,
    pub sold: i64,
    pub oversell: i64,
    pub negative_stock: bool,
    /// No purchase is still running in the shop, and (redis-lua) every stream entry is in the
    /// database.
    pub queue_drained: bool,
    /// redis-lua: stream entries the database refused N times, moved to the dead-letter
    /// stream (each is an acknowledged order, or a change to one, that the database lacks).
    pub dead_letters: u64,
}

/// What `PUT /api/items/{id}` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaleSetupResult {
    /// A fresh sale is set up (and, for `redis-lua`, warmed and verified).
    Ready(Item),
    /// The item already has this many orders and no reset was asked for: nothing changed.
    HasOrders { orders: i64 },
}
