//! What `bench shop` measures: the strategy, its servers, the load and the shop's knobs, as
//! the command line gave them (read by the HTTP phases in [`super::shop`] and the ceilings in
//! [`super::ceiling_phase`]).

use super::rate::RateSpec;
use crate::inventory::Strategy;
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
    /// redis-lua: persistence consumers per item in the shop (`--consumers`).
    pub consumers: u32,
    /// redis-buckets: buckets per sale (`--buckets`).
    pub buckets: u32,
    /// The shop's database pool, and the SQL ceiling's clients (`--pool-size`).
    pub pool_size: u32,
    /// The shop's tokio worker threads (`--worker-threads`; 0 = tokio's default).
    pub worker_threads: u32,
}
