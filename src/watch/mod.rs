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
//!
//! Everything of `[watch]` is here; the scenario holds a [`WatchSpec`], the runner starts the
//! watch ([`start`]), the report and its charts keep and draw [`Gauge`]s, and the gate reads
//! them (`gate::watch`), each calling in. The reference shop's own gauges (its pool, its
//! stream's backlog) are its own to give, from its probes (`under_test`'s reference shop).

pub mod gauge;
pub mod prometheus;
pub mod read;
pub mod redis_cmd;
pub mod sampler;
pub mod spec;

pub use gauge::{rush_at_s, Gauge};
pub use read::{Context, Reader};
pub use sampler::Watcher;
pub use spec::{gauge_names, Source, WatchError, WatchSpec};

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
