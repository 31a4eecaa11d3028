//! `[watch]`: the shop's own gauges (its connection pool, its queue backlog), sampled every
//! second during the sale and until the run settles, charted beside the clients' figures,
//! kept in `report.json` (`runs[].watch.<name>`) and the CSV, and gateable
//! (`watch.<name>.max`, `watch.<name>.drained_within_s`). docs/src/rehearsal/watch.md.
//!
//! - `spec`: the `[watch.<name>]` tables as written, checked into a typed [`Source`] when the
//!   scenario is read (one source per gauge; its own fields only).
//! - `prometheus`: a text endpoint's samples of one metric, label matchers, the sum.
//! - `redis_cmd`: the read commands a gauge may send, and their answers as numbers.
//! - `read`: a source made ready for a run (`{env:NAME}`, the default database, the loopback
//!   guard) and one read.
//! - `sampler`: the background task per gauge (1 s, backoff, logged once per state change).
//! - `gauge`: what the report keeps of a gauge: peak, drain, series ([`Gauge`]).
//! - `shop`: the reference shop's own gauges (pool in use and waiting, stream backlog), from
//!   the probes' series, so a `run` reads like an `attack`.

pub mod read;
pub mod sampler;
pub mod shop;

pub use crate::metric::gauge::{rush_at_s, DrainTime};
pub use crate::traffic::scenario::watch::{
    gauge_names, prometheus, redis_cmd, Source, WatchError, WatchSpec,
};
pub use read::{Context, Reader};
pub use sampler::Watcher;

/// Every gauge of `spec` made ready for a run with `ctx`; the first that cannot be (an unset
/// `{env:NAME}`, no database to default to, a host the loopback guard refuses) is an error
/// naming its field. Nothing is contacted.
pub fn readers(spec: &WatchSpec, ctx: &Context) -> Result<Vec<(String, Reader)>, WatchError> {
    spec.validate()?;
    spec.sources()
        .into_iter()
        .map(|(name, source)| Ok((name.clone(), Reader::new(&name, &source, ctx)?)))
        .collect()
}

/// Starts watching `spec`'s gauges for a run with `ctx` (times after `opened`).
pub fn start(
    spec: &WatchSpec,
    ctx: &Context,
    opened: tokio::time::Instant,
) -> Result<Watcher, WatchError> {
    Ok(sampler::start(readers(spec, ctx)?, opened))
}
