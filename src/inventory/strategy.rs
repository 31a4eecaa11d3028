//! The [`Strategy`] switch (`--strategy`): every inventory strategy and what it is, each fact
//! an exhaustive `match` on the enum, so a new strategy is asked for every one of them: its
//! CLI spelling, the kind of engine that runs it ([`EngineKind`]: where it decides, what it
//! needs: the database alone, a batcher, Redis), the shop knobs it owns ([`Strategy::knobs`]),
//! the known defects built into it ([`Strategy::defects`]) and its colour in every chart
//! ([`Strategy::colour`]). Its own file holds its purchase; its ceiling SQL is in
//! `bench/ceiling.rs` (exhaustive matches there too).

use super::Defect;
use serde::Serialize;

/// The inventory strategy, chosen by `--strategy` (parsed by clap's [`clap::ValueEnum`], the
/// one way to read its spelling).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Read stock, check, write: no lock. Reproduces the incident.
    Naive,
    /// `SELECT ... FOR UPDATE` in one transaction: the plain row lock, every waiter holding a
    /// pooled connection.
    ForUpdate,
    /// The row lock with a queue per item in the shop in front of it (`--row-lock-waiters`):
    /// the waiters beyond it wait without a connection.
    ForUpdateQueued,
    /// Version compare-and-swap with retries.
    Optimistic,
    /// Atomic pre-deduct in Redis with asynchronous persistence.
    RedisLua,
    /// One `UPDATE ... WHERE stock >= q`: no version, no lock across statements.
    Conditional,
    /// App-level group commit: a per-item queue, one transaction per batch of buyers.
    Batched,
    /// redis-lua with the stock split over B buckets in different slots, rebalanced on demand.
    RedisBuckets,
}

/// A database strategy: one purchase, one transaction (or statement) of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbStrategy {
    Naive,
    ForUpdate,
    ForUpdateQueued,
    Optimistic,
    Conditional,
}

/// A strategy that decides in Redis, its orders reaching the database through a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedisKind {
    /// `redis-lua`: one key set (one stream) per sale.
    Lua,
    /// `redis-buckets`: B key sets (B streams, B slots) per sale.
    Buckets,
}

/// What kind of engine runs a strategy (the shape of [`super::Engine`], without its
/// connections): what the runner, the bench and the nemesis ask before any shop starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// On the database alone, one purchase at a time.
    Db(DbStrategy),
    /// On the database alone, a batch of purchases per transaction (`batched`).
    Batched,
    /// In Redis.
    Redis(RedisKind),
}

impl Strategy {
    /// Every strategy, in the order reports show them (the enum's order).
    pub fn all() -> &'static [Strategy] {
        <Strategy as clap::ValueEnum>::value_variants()
    }

    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Naive => "naive",
            Strategy::ForUpdate => "for-update",
            Strategy::ForUpdateQueued => "for-update-queued",
            Strategy::Optimistic => "optimistic",
            Strategy::RedisLua => "redis-lua",
            Strategy::Conditional => "conditional",
            Strategy::Batched => "batched",
            Strategy::RedisBuckets => "redis-buckets",
        }
    }

    /// The engine that runs it.
    pub fn engine(self) -> EngineKind {
        match self {
            Strategy::Naive => EngineKind::Db(DbStrategy::Naive),
            Strategy::ForUpdate => EngineKind::Db(DbStrategy::ForUpdate),
            Strategy::ForUpdateQueued => EngineKind::Db(DbStrategy::ForUpdateQueued),
            Strategy::Optimistic => EngineKind::Db(DbStrategy::Optimistic),
            Strategy::Conditional => EngineKind::Db(DbStrategy::Conditional),
            Strategy::Batched => EngineKind::Batched,
            Strategy::RedisLua => EngineKind::Redis(RedisKind::Lua),
            Strategy::RedisBuckets => EngineKind::Redis(RedisKind::Buckets),
        }
    }

    /// The `[shop]` knobs (spelled as `ShopKnobs`' fields) only this strategy and some others
    /// read: what `sweep --vary` refuses for a strategy without them. A knob no strategy lists
    /// concerns every strategy (the pool, the timeouts).
    pub fn knobs(self) -> Vec<&'static str> {
        match self {
            Strategy::Naive => vec!["naive_gap"],
            Strategy::ForUpdate => vec!["work"],
            Strategy::ForUpdateQueued => vec!["work", "row_lock_waiters"],
            Strategy::Optimistic => vec!["work", "optimistic_retries", "optimistic_backoff"],
            Strategy::Conditional => vec![],
            Strategy::Batched => vec!["batch_window", "batch_max"],
            Strategy::RedisLua => REDIS_KNOBS.to_vec(),
            Strategy::RedisBuckets => [&REDIS_KNOBS[..], &["buckets"]].concat(),
        }
    }

    /// The known defects built into its code path (`serve --defect NAME`, `selftest`): naive
    /// has none (it is wrong already), nor have the Redis strategies; for-update-queued runs
    /// for-update's code, where its defects are fired.
    pub fn defects(self) -> &'static [Defect] {
        use Defect as D;
        const STATE_MACHINE: [Defect; 3] = [D::DoubleRestock, D::CancelPaidRestocks, D::KeyReuse];
        const CHECK_THEN_WRITE: [Defect; 5] = [
            D::LimitRace,
            D::GetThenDecr,
            D::DoubleRestock,
            D::CancelPaidRestocks,
            D::KeyReuse,
        ];
        match self {
            Strategy::Naive
            | Strategy::ForUpdateQueued
            | Strategy::RedisLua
            | Strategy::RedisBuckets => &[],
            Strategy::ForUpdate | Strategy::Conditional => &CHECK_THEN_WRITE,
            Strategy::Optimistic | Strategy::Batched => &STATE_MACHINE,
        }
    }

    /// Its fixed colour, the same in every chart (red, green, blue).
    pub const fn colour(self) -> (u8, u8, u8) {
        match self {
            Strategy::Naive => (0xd6, 0x27, 0x28),
            Strategy::ForUpdate => (0x1f, 0x77, 0xb4),
            Strategy::ForUpdateQueued => (0xe3, 0x77, 0xc2),
            Strategy::Optimistic => (0xff, 0x7f, 0x0e),
            Strategy::RedisLua => (0x2c, 0xa0, 0x2c),
            Strategy::Conditional => (0x94, 0x67, 0xbd),
            Strategy::Batched => (0x8c, 0x56, 0x4b),
            Strategy::RedisBuckets => (0x17, 0xbe, 0xcf),
        }
    }

    /// The Redis side's kind, for the strategies that decide in Redis.
    pub fn redis_kind(self) -> Option<RedisKind> {
        match self.engine() {
            EngineKind::Redis(kind) => Some(kind),
            EngineKind::Db(_) | EngineKind::Batched => None,
        }
    }

    /// Whether the strategy decides in Redis (redis-lua, redis-buckets): it needs Redis, its
    /// orders reach the database through the stream, and its keys are in Redis.
    pub fn uses_redis(self) -> bool {
        self.redis_kind().is_some()
    }

    /// Whether the shop runs reconciliation (and rewarm) for this strategy: `POST
    /// /api/items/{id}/reconcile` and `/rewarm` answer, and a run ends with a final pass.
    pub fn reconciles(self) -> bool {
        self.redis_kind().is_some_and(RedisKind::reconciles)
    }
}

/// The knobs of the Redis side (the gateway, the persistence consumers, reconciliation and
/// rewarm, durability, the cluster), which both Redis strategies read.
const REDIS_KNOBS: [&str; 13] = [
    "reconcile_interval",
    "reconcile_alert_threshold",
    "rewarm_check",
    "replica_wait",
    "rate_limit",
    "ip_rate_limit",
    "ip_burst",
    "ip_unit_cap",
    "page_cache",
    "dead_letter_after",
    "consumers",
    "redis_durability",
    "redis_cluster",
];

impl RedisKind {
    /// Whether it reconciles Redis against the database and rebuilds a lost sale (redis-lua).
    /// redis-buckets does neither: its stock is spread over buckets that reconciliation's one
    /// expected figure does not describe.
    pub fn reconciles(self) -> bool {
        match self {
            RedisKind::Lua => true,
            RedisKind::Buckets => false,
        }
    }

    /// The key prefixes a sale under `prefix` lives under: one per stream (redis-lua: the
    /// prefix itself; redis-buckets: one per bucket, `buckets` of them). What acts on the
    /// sale from outside the shop (a fault, the bench's watch) reads these.
    pub fn prefixes(self, prefix: &str, buckets: u32) -> Vec<String> {
        match self {
            RedisKind::Lua => vec![prefix.to_string()],
            RedisKind::Buckets => (0..buckets.clamp(1, super::redis_buckets::MAX_BUCKETS))
                .map(|b| super::redis_lua::keys::bucket_prefix(prefix, b))
                .collect(),
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_strategy_is_listed_once_in_the_enums_order() {
        let all = Strategy::all();
        assert_eq!(all.first(), Some(&Strategy::Naive));
        assert_eq!(all.last(), Some(&Strategy::RedisBuckets));
        for (i, s) in all.iter().enumerate() {
            assert!(!all[i + 1..].contains(s), "{s} twice");
        }
    }

    #[test]
    fn the_redis_strategies_are_the_ones_with_a_redis_engine() {
        let redis: Vec<Strategy> = Strategy::all()
            .iter()
            .copied()
            .filter(|s| s.uses_redis())
            .collect();
        assert_eq!(redis, [Strategy::RedisLua, Strategy::RedisBuckets]);
        assert!(Strategy::RedisLua.reconciles());
        assert!(!Strategy::RedisBuckets.reconciles());
        assert_eq!(RedisKind::Lua.prefixes("p", 4), ["p"]);
        assert_eq!(RedisKind::Buckets.prefixes("p", 3).len(), 3);
    }

    #[test]
    fn each_strategy_has_its_own_colour_and_knobs_listed_once() {
        for (i, s) in Strategy::all().iter().enumerate() {
            for t in &Strategy::all()[i + 1..] {
                assert_ne!(s.colour(), t.colour(), "{s} and {t}");
            }
            let knobs = s.knobs();
            for (j, k) in knobs.iter().enumerate() {
                assert!(!knobs[j + 1..].contains(k), "{s}: {k} twice");
            }
        }
        assert_eq!(Strategy::RedisBuckets.knobs().last(), Some(&"buckets"));
        assert!(Strategy::Conditional.knobs().is_empty());
    }
}
