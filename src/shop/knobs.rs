//! The reference shop's knobs: one list, read by `serve`'s flags, a scenario's `[shop]` table
//! and the `knobs` of the [`super::ServeConfig`] a run hands to its child shop.
//!
//! Each knob is written once in the `knobs!` list below: its type, default, allowed range and
//! help text. From that list (the macro is in `knobs/declare.rs`) come the clap flags
//! (`--pool-size ...`), the serde form (the `[shop]` table is an overlay: absent fields keep the
//! defaults, unknown fields are refused), [`Default`], the range checks, and
//! [`ShopKnobs::command_line`]. A duration takes a unit (`--work 5ms`, `work = "5ms"`); its old
//! spelling with the unit in the name (`--work-ms 5`, `work_ms = 5`) is still read, and is
//! the key `report.json` keeps (`knobs/unit.rs`). The settings of the parts
//! ([`PoolSettings`], the strategies' [`Settings`], [`RedisSettings`] and its
//! [`GatewaySettings`], [`PipelineSettings`]) have no defaults of their own: they are built
//! from knobs ([`ShopKnobs::pool`] ...), so each default is written once, here.

#[macro_use]
mod declare;
mod unit;

use super::ShopConfig;
use crate::gateway::GatewaySettings;
use crate::inventory::{Defect, Durability, RedisSettings, Settings, Strategy};
use crate::pipeline::{reconcile::ReconcileSettings, PipelineSettings};
use crate::store::PoolSettings;
use std::net::SocketAddr;
use std::time::Duration;

/// The most reference shop processes one run starts (`--shops`, `[shop] shops`).
pub const MAX_SHOPS: u32 = 16;

knobs! {
    choices {
        /// redis-lua: what an acknowledged order survives on the Redis side (checked against
        /// the Redis configuration at start; see docs/src/shop/durability.md).
        redis_durability: Durability = Durability::None;
    }
    optional {
        /// A known defect built into the shop's own code path: a TESTING AID that makes this
        /// shop wrong on purpose, so you can see what the harness catches (`oversell
        /// selftest`; docs/src/gate/detection.md). Each applies to some strategies only.
        defect: Defect;
    }
    switches {
        /// redis-lua: Redis is a Redis Cluster reached through the node(s) of --redis-url
        /// (`redis://h:p` is read as `redis+cluster://h:p`; a `redis+cluster://` URL needs no
        /// flag).
        redis_cluster;
    }
    runner {
        /// `run`/`compare`/`gate` (`--shops`): how many reference shop processes the run starts
        /// on the one database and Redis, buyer i going to shop i mod K. Not a `serve` flag.
        shops: u32 = 1, 1..=MAX_SHOPS;
    }
    durations {
        /// How long a request waits for a pooled connection before answering 503 busy.
        acquire_timeout (acquire_timeout_ms in Ms) = 500, 1..=600_000;
        /// How long a statement waits for a row lock before giving up.
        lock_timeout (lock_timeout_ms in Ms) = 1000, 1..=600_000;
        /// naive: the business logic between the stock check and the write (a user check, a
        /// coupon, risk control): the race window.
        naive_gap (naive_gap_ms in Ms) = 20, 0..=60_000;
        /// for-update/optimistic: business logic between the read and the write.
        work (work_ms in Ms) = 1, 0..=60_000;
        /// optimistic: base backoff between retries (jittered, doubling; 0s = none).
        optimistic_backoff (optimistic_backoff_ms in Ms) = 2, 0..=10_000;
        /// batched: the longest a batch waits for more buyers after its first (0s = only those
        /// already queued).
        batch_window (batch_window_ms in Ms) = 2, 0..=10_000;
        /// Payment window: an unpaid order is expired and restocked after this long.
        payment_timeout (payment_timeout_s in S) = 900, 1..=604_800;
        /// redis-lua: time between reconciliation passes.
        reconcile_interval (reconcile_interval_s in S) = 300, 1..=86_400;
        /// redis-lua: how often the shop checks that Redis still holds its sales, and rebuilds
        /// one from the database when its keys vanished (0s = only when a purchase finds it
        /// gone).
        rewarm_check (rewarm_check_ms in Ms) = 1000, 0..=3_600_000;
        /// redis-lua `--redis-durability wait-replica`: longest wait for a replica to confirm
        /// an order before answering 503.
        replica_wait (replica_wait_ms in Ms) = 100, 1..=60_000;
        /// redis-lua: how long the product page cache serves a stock figure (0s = no cache).
        page_cache (page_cache_ms in Ms) = 1000, 0..=3_600_000;
        /// redis-lua: how long a persistence consumer waits after writing a batch smaller than
        /// its 1,000 entries before it reads again, so that the next batch shares its
        /// transaction and round trips with more orders (0s = read again at once). Orders reach
        /// the database up to this much later; none is held back longer.
        persist_linger (persist_linger_ms in Ms) = 25, 0..=10_000;
    }
    numbers {
        /// Database connection pool size.
        pool_size: u32 = 10, 1..=1000;
        /// for-update-queued: the most of this shop's purchases of one item in a transaction,
        /// waiting on its row lock in the database, at once (the holder included); the others
        /// queue in the shop in arrival order, without a connection, for at most
        /// --lock-timeout, then busy. (`for-update` is the plain lock: every buyer waits in the
        /// database, holding a connection.)
        row_lock_waiters: u32 = 4, 1..=1000;
        /// optimistic: retries after a lost compare-and-swap.
        optimistic_retries: u32 = 3, 0..=100;
        /// batched: the most buyers applied in one transaction.
        batch_max: u32 = 128, 1..=4096;
        /// redis-lua: |residual| above this raises an alert.
        reconcile_alert_threshold: i64 = 0, 0..=1_000_000_000;
        /// redis-lua gateway: global order admissions per second (0 = unlimited).
        rate_limit: f64 = 0.0, 0..=10_000_000;
        /// redis-lua gateway: per-IP order admissions per second (0 = unlimited).
        ip_rate_limit: f64 = 20.0, 0..=10_000_000;
        /// redis-lua gateway: per-IP burst size.
        ip_burst: f64 = 20.0, 0..=10_000_000;
        /// redis-lua gateway: most units the buyers behind one IP may hold (0 = no cap).
        ip_unit_cap: i64 = 0, 0..=1_000_000_000;
        /// redis-lua: a stream entry the database refuses this many times is dead-lettered.
        dead_letter_after: u32 = 3, 1..=100;
        /// redis-lua: persistence consumers per item in this shop, all in the item's one
        /// consumer group (each entry is delivered to one of them; more overlap Redis reads
        /// with database writes). Two by default: one consumer fell behind at saturation and at
        /// 80 % of it, two kept up with the backlog near zero (docs/lab/lab-log.md,
        /// "redis-lua").
        consumers: u32 = 2, 1..=32;
        /// redis-buckets: how many buckets (hash slots) a sale's stock is split over.
        buckets: u32 = 4, 1..=64;
        /// Worker threads of the shop's tokio runtime (0 = one per core, less one when its
        /// database or Redis is on this machine, at least one: a second worker next to its
        /// servers served no more orders and cost more CPU per order; docs/src/shop/
        /// overview.md, "Worker threads").
        worker_threads: u32 = 0, 0..=1024;
    }
}

/// A knob outside its allowed range. Displays as the `serve` flag; [`KnobError::knob`] is the
/// key a `[shop]` table uses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--{} {}", .knob.replace('_', "-"), self.range())]
pub struct KnobError {
    /// The knob's name, e.g. `pool_size`, `acquire_timeout`.
    pub knob: &'static str,
    bounds: Bounds,
}

/// The allowed range and the value given: `[min, max, got]`.
#[derive(Debug, Clone, PartialEq)]
enum Bounds {
    Number([f64; 3]),
    Duration([Duration; 3]),
}

impl KnobError {
    fn check(knob: &'static str, got: f64, min: f64, max: f64) -> Result<(), KnobError> {
        if got.is_finite() && got >= min && got <= max {
            return Ok(());
        }
        let bounds = Bounds::Number([min, max, got]);
        Err(KnobError { knob, bounds })
    }

    fn check_duration(
        knob: &'static str,
        got: Duration,
        min: Duration,
        max: Duration,
    ) -> Result<(), KnobError> {
        if (min..=max).contains(&got) {
            return Ok(());
        }
        let bounds = Bounds::Duration([min, max, got]);
        Err(KnobError { knob, bounds })
    }

    /// What is allowed and what was given, e.g. `must be between 1 and 1000 (got 0)`,
    /// `must be between 1ms and 10m (got 0s)`.
    pub fn range(&self) -> String {
        let [min, max, got] = match &self.bounds {
            Bounds::Number(v) => v.map(|x| x.to_string()),
            Bounds::Duration(v) => v.map(crate::duration::shown),
        };
        format!("must be between {min} and {max} (got {got})")
    }

    /// The `[shop]` key as a scenario names it: `` `shop.pool_size` ``, or for a duration
    /// `` `shop.acquire_timeout` (or `acquire_timeout_ms`) ``.
    pub fn field(&self) -> String {
        match ShopKnobs::OLD_KEYS
            .iter()
            .find(|(new, _)| *new == self.knob)
        {
            Some((_, old)) => format!("`shop.{}` (or `{old}`)", self.knob),
            None => format!("`shop.{}`", self.knob),
        }
    }
}

/// A choice's flag spelling (`aof-everysec`).
fn spelling(v: &impl clap::ValueEnum) -> String {
    v.to_possible_value()
        .expect("a knob's choices skip no variant")
        .get_name()
        .to_string()
}

/// The `serve` flags: [`ShopKnobs`] is read through the macro's `KnobFlags` (which also holds
/// the hidden old spellings), so the knobs themselves carry one value each.
impl clap::FromArgMatches for ShopKnobs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        KnobFlags::from_arg_matches(m).map(ShopKnobs::from)
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl clap::Args for ShopKnobs {
    fn group_id() -> Option<clap::Id> {
        KnobFlags::group_id()
    }

    fn augment_args(cmd: clap::Command) -> clap::Command {
        KnobFlags::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        KnobFlags::augment_args_for_update(cmd)
    }
}

impl ShopKnobs {
    /// Whether `strategy` has the defect these knobs ask for (none asked: yes).
    pub fn check_defect(
        &self,
        strategy: Strategy,
    ) -> Result<(), crate::inventory::defect::NotBuiltIn> {
        self.defect.map_or(Ok(()), |d| d.check(strategy))
    }

    /// The configuration of a shop with these knobs selling through `strategy`, its Redis keys
    /// under `redis_prefix`. No alert webhook, no replica, no trusted proxy and no admin token:
    /// set those on the result.
    pub fn config(
        &self,
        strategy: Strategy,
        listen: SocketAddr,
        database_url: &str,
        redis_url: &str,
        redis_prefix: &str,
    ) -> ShopConfig {
        ShopConfig {
            listen,
            strategy,
            database_url: database_url.to_string(),
            pool: self.pool(),
            inventory: self.strategies(),
            redis: self.redis(redis_url, redis_prefix),
            pipeline: self.pipeline(),
            replica_database_url: None,
            page_cache_ttl: self.page_cache,
            trusted_proxies: super::TrustedProxies::default(),
            admin_token: None,
            rewarm_check: (!self.rewarm_check.is_zero()).then_some(self.rewarm_check),
            limits: Default::default(),
        }
    }
}

impl ShopKnobs {
    /// `serve`'s flags of the knobs `names` (their type, help and value parser: one definition),
    /// each defaulting to its value in these knobs: how another command takes some knobs as
    /// its own flags with its own defaults (`bench shop`); read them back with
    /// [`ShopKnobs::with_flags`] and check them with [`ShopKnobs::validate`]. A name that is no
    /// knob's flag is left out.
    pub fn flags_of(&self, names: &[&str]) -> Vec<clap::Arg> {
        // No display order of their own: they list where the other command adds them.
        let serve = clap::Command::new("serve").next_display_order(None);
        let serve = <KnobFlags as clap::Args>::augment_args(serve);
        let line = self.command_line();
        let value = |name: &str| {
            let flag = format!("--{}", name.replace('_', "-"));
            let at = line.iter().position(|a| *a == flag)?;
            line.get(at + 1).filter(|v| !v.starts_with("--")).cloned()
        };
        names
            .iter()
            .filter_map(|name| {
                let arg = serve.get_arguments().find(|a| a.get_id() == *name)?.clone();
                Some(match value(name) {
                    Some(v) => arg.default_value(v),
                    None => arg,
                })
            })
            .collect()
    }

    /// The database pool (`ShopKnobs::default().pool()`: the pool a shop has by default, which
    /// the harness's own connections use too).
    pub fn pool(&self) -> PoolSettings {
        PoolSettings {
            max_connections: self.pool_size,
            acquire_timeout: self.acquire_timeout,
            lock_timeout: self.lock_timeout,
        }
    }

    /// The strategies' settings.
    pub fn strategies(&self) -> Settings {
        Settings {
            naive_gap: self.naive_gap,
            work: self.work,
            row_lock_waiters: self.row_lock_waiters,
            optimistic_retries: self.optimistic_retries,
            optimistic_backoff: self.optimistic_backoff,
            payment_timeout: self.payment_timeout,
            batch_window: self.batch_window,
            batch_max: self.batch_max as usize,
            buckets: self.buckets,
            defect: self.defect,
        }
    }

    /// The gateway in front of the Redis strategies' pre-deduct.
    pub fn gateway(&self) -> GatewaySettings {
        GatewaySettings {
            rate_per_s: self.rate_limit,
            burst: self.rate_limit,
            ip_rate_per_s: self.ip_rate_limit,
            ip_burst: self.ip_burst,
            ip_unit_cap: self.ip_unit_cap,
        }
    }

    /// The Redis side at `redis_url` (a cluster with `redis_cluster`), keys under `prefix`.
    pub fn redis(&self, redis_url: &str, prefix: &str) -> RedisSettings {
        RedisSettings {
            url: crate::store::redis_conn::with_cluster(redis_url, self.redis_cluster),
            prefix: prefix.to_string(),
            payment_timeout: self.payment_timeout,
            gateway: self.gateway(),
            durability: self.redis_durability,
            replica_wait: self.replica_wait,
        }
    }

    /// The background pipeline (no alert webhook, no replica: set those on the result).
    pub fn pipeline(&self) -> PipelineSettings {
        PipelineSettings::new(
            ReconcileSettings {
                interval: self.reconcile_interval.max(Duration::from_secs(1)),
                alert_threshold: self.reconcile_alert_threshold,
                webhook: None,
                replica: None,
            },
            self.dead_letter_after,
            self.consumers as usize,
        )
        .with_linger(self.persist_linger)
    }
}

#[cfg(test)]
mod tests;
