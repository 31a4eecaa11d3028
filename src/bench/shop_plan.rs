//! What `bench shop` measures: the strategy, its servers, the load and the shop's knobs, as
//! the command line gave them (read by the HTTP phases in [`super::shop`] and the ceilings in
//! [`super::ceiling_phase`]).

use super::rate::RateSpec;
use crate::inventory::Strategy;
use crate::shop::ShopKnobs;
use crate::store::Backend;
use std::path::PathBuf;

/// What to measure.
#[derive(Debug, Clone)]
pub struct ShopBench {
    pub strategy: Strategy,
    pub backend: Backend,
    /// A URL of the database server; the bench uses a fresh database on it, then drops it.
    pub database_url: String,
    pub redis_url: String,
    pub seconds: u64,
    pub connections: usize,
    pub rate: Option<RateSpec>,
    pub stock: i64,
    /// The oversell binary the shop runs from (the release build for real figures).
    pub shop_exe: PathBuf,
    /// The shop's knobs: [`ShopBench::default_knobs`] with the command line's [`FLAGS`]
    /// (`--consumers`, `--buckets`, `--pool-size`: also the SQL ceiling's clients,
    /// `--row-lock-waiters`, `--worker-threads`, `--persist-linger`).
    pub knobs: ShopKnobs,
}

/// The shop knobs `bench shop` takes as flags (`serve`'s flags, [`ShopBench::default_knobs`]'s
/// defaults).
pub const FLAGS: [&str; 6] = [
    "consumers",
    "buckets",
    "pool_size",
    "row_lock_waiters",
    "worker_threads",
    "persist_linger",
];

impl ShopBench {
    /// The knobs `bench shop` runs its shop with unless its flags say otherwise: `serve`'s, but
    /// a pool of 64, as many connections as the SQL ceiling has clients (the hot row's
    /// contention on both sides; docs/src/performance/bench.md), no simulated work and no rate
    /// limit (the ceiling has neither).
    pub fn default_knobs() -> ShopKnobs {
        ShopKnobs {
            pool_size: 64,
            work: std::time::Duration::ZERO,
            rate_limit: 0.0,
            ip_rate_limit: 0.0,
            ip_unit_cap: 0,
            ..ShopKnobs::default()
        }
    }
}
