//! The [`Strategy`] switch (`--strategy`): every inventory strategy, its CLI spelling, and
//! which of them decide in Redis.

use serde::Serialize;

/// The inventory strategy, chosen by `--strategy`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Read stock, check, write: no lock. Reproduces the incident.
    Naive,
    /// `SELECT ... FOR UPDATE` in one transaction.
    ForUpdate,
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

impl Strategy {
    /// Every strategy, in the order reports show them.
    pub const ALL: [Strategy; 7] = [
        Strategy::Naive,
        Strategy::ForUpdate,
        Strategy::Optimistic,
        Strategy::RedisLua,
        Strategy::Conditional,
        Strategy::Batched,
        Strategy::RedisBuckets,
    ];

    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Naive => "naive",
            Strategy::ForUpdate => "for-update",
            Strategy::Optimistic => "optimistic",
            Strategy::RedisLua => "redis-lua",
            Strategy::Conditional => "conditional",
            Strategy::Batched => "batched",
            Strategy::RedisBuckets => "redis-buckets",
        }
    }

    /// Whether the strategy decides in Redis (redis-lua, redis-buckets): it needs Redis, its
    /// orders reach the database through the stream, and its keys are in Redis.
    pub fn uses_redis(self) -> bool {
        matches!(self, Strategy::RedisLua | Strategy::RedisBuckets)
    }

    /// Parses the CLI spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
