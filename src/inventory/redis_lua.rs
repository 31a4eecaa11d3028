//! `redis-lua`: atomic pre-deduct in Redis, persistence through a stream.
//!
//! The decision "may this buyer have one?" is one Lua script (`lua/deduct.lua`): limits, stock
//! check, decrement and the order event appended to the item's stream, atomically. The client
//! gets `201` as soon as the script says yes; the persistence consumer
//! ([`crate::pipeline::consumer`]) writes orders to the database in batches. Pay, cancel and
//! expiry are scripts too (`lua/pay.lua`, `lua/release.lua`, run from `orders`), so Redis
//! holds the order state machine and the stream carries every change, in order, to the
//! database.
//!
//! The key layout of a sale lives in [`keys`]: every key of one item shares the hash tag
//! `{prefix:item}` so the scripts stay valid on Redis Cluster. The stream's bookkeeping
//! (backlog, low-water candidate, trimming, reconciliation, dead letters) is in [`stream`].
//! [`durability`] is what a 201 survives on the Redis side (`--redis-durability`); `rewarm`
//! rebuilds a sale Redis lost.

pub mod durability;
pub mod keys;
mod orders;
mod rewarm;
pub mod stream;

use super::{InventoryError, Outcome};
pub use crate::gateway::GatewaySettings;
use crate::gateway::{Gateway, Refusal};
use crate::model::{Item, OrderStatus, Purchase};
use crate::services::Service;
use crate::store::Transition;
use crate::telemetry::shop_metrics;
use crate::telemetry::Handles;
use redis::{AsyncCommands, Script};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, RwLock};
use std::time::Duration;

use crate::store::autopipe::AutoPipe;
pub use crate::store::redis_conn::RedisConn;
use durability::Confirm;
pub use durability::Durability;
pub use keys::ItemKeys;
pub use rewarm::{Rewarm, RewarmOutcome};

/// Name of the persistence consumer group on every item stream.
pub const GROUP: &str = "persist";

/// A script of `lua/` that writes or reads the events stream, after `lua/event.lua` (the
/// entry's one spelling in Lua, read by [`crate::pipeline::entry`] on the Rust side).
macro_rules! with_events {
    ($file:literal) => {
        concat!(
            include_str!("../../lua/event.lua"),
            include_str!(concat!("../../lua/", $file))
        )
    };
}

/// `lua/deduct.lua` as Redis runs it (after `lua/event.lua`).
const DEDUCT: &str = with_events!("deduct.lua");

/// Connection and behaviour of the Redis side.
#[derive(Debug, Clone)]
pub struct RedisSettings {
    pub url: String,
    /// Key prefix (inside the hash tag); tests use their own.
    pub prefix: String,
    /// How long an unpaid order holds its units before the delayed queue expires it.
    pub payment_timeout: Duration,
    pub gateway: GatewaySettings,
    /// What a 201 survives on the Redis side; checked against Redis at connect.
    pub durability: Durability,
    /// `wait-replica`: longest wait for a replica's confirmation.
    pub replica_wait: Duration,
}

struct Scripts {
    deduct: Script,
    release: Script,
    pay: Script,
    reconcile: Script,
    dead_letter: Script,
    trim: Script,
}

/// The Redis side of the `redis-lua` strategy.
#[derive(Clone)]
pub struct RedisLua {
    url: Arc<str>,
    conn: RedisConn,
    /// The pre-deducts' queue in front of `conn`: the purchases in flight together go to Redis
    /// in one write (`None` on a cluster, where a batch would span slots).
    pipe: Option<AutoPipe>,
    prefix: Arc<str>,
    scripts: Arc<Scripts>,
    gateway: Arc<Gateway>,
    payment_timeout: Duration,
    /// Pre-deduct script calls made by this instance (the gateway's refusals never get here).
    prededucts: Arc<std::sync::atomic::AtomicU64>,
    durability: Durability,
    replica_wait: Duration,
    /// The key names of the items this instance sold, by item (see [`Self::cached_keys`]).
    key_cache: Arc<RwLock<HashMap<i64, Arc<ItemKeys>>>>,
}

impl RedisLua {
    /// Connects (a multiplexed connection that reconnects by itself), checks that Redis is
    /// configured as `settings.durability` claims (refusing when it is not, warning when Redis
    /// will not say), and loads the scripts.
    pub async fn connect(settings: &RedisSettings) -> Result<Self, InventoryError> {
        let unreachable = |e: &dyn std::fmt::Display| {
            InventoryError::Unreachable(Service::Redis.unreachable_error(&settings.url, e))
        };
        let opts = crate::store::redis_conn::ConnOptions {
            response_timeout: Duration::from_secs(5),
            managed: true,
        };
        let mut conn = RedisConn::open_with(&settings.url, opts)
            .await
            .map_err(|e| unreachable(&e))?;
        let mode = settings.durability;
        match durability::check(&mut conn, &settings.url, mode).await? {
            durability::Checked::Unverifiable(why) => tracing::warn!(
                %mode, %why, "cannot verify that Redis is configured for this durability mode; trusting it"
            ),
            durability::Checked::Verified => tracing::info!(%mode, "Redis durability verified"),
            durability::Checked::NothingToCheck => {}
        }
        let scripts = Scripts {
            deduct: Script::new(DEDUCT),
            release: Script::new(with_events!("release.lua")),
            pay: Script::new(with_events!("pay.lua")),
            reconcile: Script::new(with_events!("reconcile.lua")),
            dead_letter: Script::new(with_events!("deadletter.lua")),
            trim: Script::new(include_str!("../../lua/trim.lua")),
        };
        // Load once up front; calls go by SHA and fall back to loading on NOSCRIPT.
        for s in [
            &scripts.deduct,
            &scripts.release,
            &scripts.pay,
            &scripts.reconcile,
            &scripts.dead_letter,
            &scripts.trim,
        ] {
            s.prepare_invoke()
                .load_async(&mut conn)
                .await
                .map_err(|e| unreachable(&e))?;
        }
        // Named so an operator (or a test) can tell the shop's connections apart in CLIENT
        // LIST. The name is not restored when the manager reconnects.
        let _: redis::RedisResult<()> = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(client_name(&settings.prefix, "shop"))
            .query_async(&mut conn)
            .await;
        Ok(RedisLua {
            url: settings.url.as_str().into(),
            pipe: (!conn.is_cluster()).then(|| AutoPipe::start(conn.clone())),
            conn,
            prefix: settings.prefix.as_str().into(),
            scripts: Arc::new(scripts),
            gateway: Arc::new(Gateway::new(settings.gateway.clone())),
            payment_timeout: settings.payment_timeout,
            prededucts: Arc::default(),
            durability: mode,
            replica_wait: settings.replica_wait,
            key_cache: Arc::default(),
        })
    }

    /// The keys of one item.
    pub fn keys(&self, item: i64) -> ItemKeys {
        ItemKeys::new(&self.prefix, item)
    }

    /// The same connection, scripts and gateway under another key prefix: `redis-buckets`
    /// runs each bucket of a sale as a full redis-lua key set under its own prefix
    /// ([`keys::bucket_prefix`]), so every script here serves a bucket unchanged.
    pub fn with_prefix(&self, prefix: &str) -> RedisLua {
        RedisLua {
            prefix: prefix.into(),
            key_cache: Arc::default(),
            ..self.clone()
        }
    }

    /// The key prefix (inside the hash tag).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A connection handle (cheap clone of the multiplexed or cluster connection).
    pub fn conn(&self) -> RedisConn {
        self.conn.clone()
    }

    /// A connection of its own, for blocking reads (a blocking command on the shared
    /// multiplexed connection would stall every other caller), named `oversell:<prefix>:<role>`
    /// in CLIENT LIST. `response_timeout` must exceed the longest BLOCK it will carry.
    pub async fn dedicated_conn(
        &self,
        role: &str,
        response_timeout: Duration,
    ) -> Result<RedisConn, InventoryError> {
        let opts = crate::store::redis_conn::ConnOptions {
            response_timeout,
            managed: false,
        };
        let mut conn = RedisConn::open_with(&self.url, opts).await?;
        let named = redis::cmd("CLIENT")
            .arg("SETNAME")
            .arg(client_name(&self.prefix, role))
            .exec_async(&mut conn)
            .await;
        // On a cluster the name goes to every node, and a node down (a failover under way)
        // must not keep the consumer from reading from the others: the name is best effort.
        if !conn.is_cluster() {
            named?;
        }
        Ok(conn)
    }

    /// SHA1 of `lua/deduct.lua` (what EVALSHA calls).
    pub fn deduct_sha(&self) -> &str {
        self.scripts.deduct.get_hash()
    }

    /// How many pre-deduct scripts this instance has run.
    pub fn prededuct_calls(&self) -> u64 {
        self.prededucts.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Warm-up: loads the sale into Redis before the first order, then reads it back and
    /// verifies it. Clears the previous sale's keys and (re)creates the consumer group.
    pub async fn warm(&self, item: &Item) -> Result<(), InventoryError> {
        let keys = self.keys(item.id);
        let mut conn = self.conn.clone();
        redis::pipe()
            .atomic()
            .del(keys.all().to_vec())
            .ignore()
            .set(&keys.stock, item.stock)
            .ignore()
            .hset_multiple(
                &keys.meta,
                &[
                    ("limit", item.purchase_limit.to_string()),
                    ("initial", item.initial_stock.to_string()),
                    ("name", item.name.clone()),
                    ("price_cents", item.price_cents.to_string()),
                ],
            )
            .ignore()
            .cmd("XGROUP")
            .arg("CREATE")
            .arg(&keys.events)
            .arg(GROUP)
            .arg("$")
            .arg("MKSTREAM")
            .ignore()
            .exec_async(&mut conn)
            .await?;
        self.gateway.reset_item(item.id);
        let warmed = self.warmed_item(item.id).await?;
        let stock: Option<i64> = conn.get(&keys.stock).await?;
        match warmed {
            Some(w) if stock == Some(item.stock) && w.purchase_limit == item.purchase_limit => {
                Ok(())
            }
            _ => Err(InventoryError::Inconsistent(format!(
                "warm-up of item {} did not verify: Redis stock {stock:?}, expected {}",
                item.id, item.stock
            ))),
        }
    }

    /// The item as warmed into Redis, or `None` if it never was.
    pub async fn warmed_item(&self, id: i64) -> Result<Option<Item>, InventoryError> {
        let keys = self.keys(id);
        let mut conn = self.conn.clone();
        let meta: HashMap<String, String> = conn.hgetall(&keys.meta).await?;
        let stock: Option<i64> = conn.get(&keys.stock).await?;
        let (Some(limit), Some(stock)) = (meta.get("limit"), stock) else {
            return Ok(None);
        };
        let num = |k: &str| meta.get(k).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(Some(Item {
            id,
            name: meta.get("name").cloned().unwrap_or_default(),
            price_cents: num("price_cents"),
            initial_stock: num("initial"),
            stock,
            version: 0,
            purchase_limit: limit.parse().unwrap_or(1),
        }))
    }

    /// Gateway, then the atomic pre-deduct.
    pub async fn purchase(&self, p: &Purchase, limit: i64) -> Result<Outcome, InventoryError> {
        let _admission = match self.admit(p, limit).await? {
            Ok(a) => a,
            Err(answer) => return Ok(answer),
        };
        let order_id = crate::model::new_order_id(p.item_id);
        self.prededuct(p, &order_id).await
    }

    /// The gateway's admission of `p`, or the answer when it refuses: a retry of a purchase
    /// that went through meets the gateway first (its buyer now holds the limit), so its key's
    /// order is the answer then.
    pub(crate) async fn admit<'a>(
        &'a self,
        p: &'a Purchase,
        limit: i64,
    ) -> Result<Result<crate::gateway::Admission<'a>, Outcome>, InventoryError> {
        let device = p.device_id.as_deref();
        match self
            .gateway
            .admit(p.item_id, &p.user_id, device, &p.client_ip, p.qty, limit)
        {
            Ok(a) => Ok(Ok(a)),
            Err(refusal) => {
                if let Some(replay) = self.replay(p).await? {
                    return Ok(Err(replay));
                }
                Ok(Err(match refusal {
                    Refusal::RateLimited => Outcome::RateLimited,
                    Refusal::Duplicate => Outcome::Duplicate,
                }))
            }
        }
    }

    /// The atomic pre-deduct (`lua/deduct.lua`) on this instance's keys of `p.item_id`, under
    /// `order_id`, for a purchase the gateway admitted.
    pub(crate) async fn prededuct(
        &self,
        p: &Purchase,
        order_id: &str,
    ) -> Result<Outcome, InventoryError> {
        let device = p.device_id.as_deref();
        self.prededucts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (code, _n): (i64, i64) = if self.durability == Durability::WaitReplica {
            let call = self.deduct_call(p, order_id);
            let ((code, n), replicas) = self.deduct_and_wait(&call).await?;
            if code >= 0 && replicas < 1 {
                return self.unreplicated(p, order_id).await;
            }
            (code, n)
        } else {
            self.deduct(p, order_id).await?
        };
        if code == -5 {
            return Ok(self
                .replay(p)
                .await?
                .unwrap_or(Outcome::Busy("idempotency_race")));
        }
        let result = match code {
            c if c >= 0 => "success",
            -1 => "sold_out",
            -2 | -4 => "duplicate",
            _ => "not_warmed",
        };
        static RESULTS: LazyLock<Handles<&'static str, metrics::Counter>> =
            LazyLock::new(Handles::new);
        RESULTS
            .get(
                result,
                |result| metrics::counter!(shop_metrics::PREDEDUCT, "result" => result),
            )
            .increment(1);
        Ok(match code {
            c if c >= 0 => {
                self.gateway
                    .record_holding(p.item_id, &p.user_id, device, &p.client_ip, p.qty);
                Outcome::Reserved {
                    order_id: order_id.to_string(),
                }
            }
            -1 => Outcome::SoldOut,
            -2 | -4 => Outcome::Duplicate,
            _ => Outcome::NotWarmed,
        })
    }

    /// `EVALSHA` of `lua/deduct.lua` for `p` under `order_id`: one command built in one buffer
    /// (a `ScriptInvocation` would copy every key and argument twice), on the item's cached key
    /// names.
    fn deduct_call(&self, p: &Purchase, order_id: &str) -> redis::Cmd {
        let keys = self.cached_keys(p.item_id);
        let mut call = redis::cmd("EVALSHA");
        call.arg(self.scripts.deduct.get_hash()).arg(9);
        for key in keys.deduct() {
            call.arg(key);
        }
        call.arg(p.qty)
            .arg(&p.user_id)
            .arg(p.device_id.as_deref().unwrap_or(""))
            .arg(order_id)
            .arg(self.payment_timeout.as_millis() as i64)
            .arg(&p.client_ip)
            .arg(self.gateway.settings().ip_unit_cap)
            .arg(p.idempotency_key.as_deref().unwrap_or(""));
        call
    }

    /// Runs the [`Self::deduct_call`] of `p` under `order_id`; a Redis that lost the script
    /// (restarted, `SCRIPT FLUSH`) gets it loaded again and the call, built again, retried
    /// once (the command goes to the pipeline as it is, not as a copy kept for a retry).
    async fn deduct(&self, p: &Purchase, order_id: &str) -> Result<(i64, i64), InventoryError> {
        let call = self.deduct_call(p, order_id);
        let mut conn = self.conn.clone();
        let first = match &self.pipe {
            Some(pipe) => pipe
                .query(call)
                .await
                .and_then(|v| Ok(redis::from_redis_value(v)?)),
            None => call.query_async(&mut conn).await,
        };
        Ok(match first {
            Err(e) if e.kind() == durability::NOSCRIPT => {
                self.load_deduct(&mut conn).await?;
                self.deduct_call(p, order_id).query_async(&mut conn).await?
            }
            other => other?,
        })
    }

    /// Loads `lua/deduct.lua` into Redis (after a `NOSCRIPT`).
    pub(super) async fn load_deduct(&self, conn: &mut RedisConn) -> Result<(), InventoryError> {
        self.scripts
            .deduct
            .prepare_invoke()
            .load_async(conn)
            .await?;
        Ok(())
    }

    /// The keys of `item`, named once per item and shared: the purchase path must not format
    /// thirteen key names per order.
    fn cached_keys(&self, item: i64) -> Arc<ItemKeys> {
        if let Some(keys) = self
            .key_cache
            .read()
            .expect("key cache poisoned")
            .get(&item)
        {
            return keys.clone();
        }
        let keys = Arc::new(self.keys(item));
        self.key_cache
            .write()
            .expect("key cache poisoned")
            .insert(item, keys.clone());
        keys
    }

    /// The order `p`'s `Idempotency-Key` bought, as the answer to `p` (`None`: no key, or
    /// it bought nothing). Read outside the script: an entry, once written, only goes with
    /// the sale.
    pub(crate) async fn replay(&self, p: &Purchase) -> Result<Option<Outcome>, InventoryError> {
        let Some(key) = p.idempotency_key.as_deref() else {
            return Ok(None);
        };
        let keys = self.keys(p.item_id);
        let mut conn = self.conn.clone();
        let Some(order_id): Option<String> = conn.hget(&keys.idempotency, key).await? else {
            return Ok(None);
        };
        let raw: Option<String> = conn.hget(&keys.orders, &order_id).await?;
        let Some(o) = raw.and_then(|r| serde_json::from_str::<StoredOrder>(&r).ok()) else {
            return Ok(None);
        };
        metrics::counter!(shop_metrics::IDEMPOTENT_REPLAYS).increment(1);
        Ok(Some(super::idempotency::replay_of(&order_id, &o.u, o.q, p)))
    }

    /// `wait-replica`: no replica confirmed the reservation in time. Nothing is acknowledged,
    /// so the unit goes back at once (a cancel: restocked exactly once, and persisted as a
    /// cancelled order); if even that fails, the order expires with the payment window.
    async fn unreplicated(&self, p: &Purchase, order_id: &str) -> Result<Outcome, InventoryError> {
        metrics::counter!(shop_metrics::PREDEDUCT, "result" => "not_replicated").increment(1);
        let device = p.device_id.as_deref();
        self.gateway
            .record_holding(p.item_id, &p.user_id, device, &p.client_ip, p.qty);
        let released = self
            .release_with(order_id, OrderStatus::Cancelled, Confirm::No)
            .await;
        if let Err(e) = &released {
            tracing::error!(order = order_id, error = %e, "could not release an unreplicated reservation; it expires unpaid");
        }
        Ok(Outcome::NotReplicated {
            waited_ms: self.replica_wait.as_millis() as u64,
            released: matches!(released, Ok(Transition::Applied { .. })),
        })
    }

    /// Redis stock of an item (`None` if not warmed).
    pub async fn stock(&self, item: i64) -> Result<Option<i64>, InventoryError> {
        Ok(self.conn.clone().get(self.keys(item).stock).await?)
    }
}

/// An order as `lua/deduct.lua` stores it (JSON in the item's `orders` hash).
#[derive(Debug, serde::Deserialize)]
struct StoredOrder {
    s: String,
    q: i64,
    u: String,
    d: String,
    i: String,
}

/// A CLIENT SETNAME name for one of the shop's connections: `oversell:<prefix>:<role>`, with
/// anything Redis does not accept in a name (spaces, control characters) replaced by `_`.
pub fn client_name(prefix: &str, role: &str) -> String {
    format!("oversell:{prefix}:{role}")
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect()
}
