//! Rehearsal against someone else's shop: which URLs load may go to, the plan printed before
//! (or instead of) sending, the user's own oracle, and the one-request-per-kind mapping check.
//!
//! Safety first: every URL passes the loopback guard ([`crate::guard`]) before any request, and
//! a target that is not on this machine needs `--allow-remote`, then a banner names the host
//! and the planned peak rate before the first request goes out.
//!
//! - `oracle`: the user's oracle (read-only SQL, or an HTTP endpoint read at field paths),
//!   read before and after the sale, its SQL through [`crate::guard::scalar`]; [`order_rows`]:
//!   `--orders-query`, the shop's order rows; [`settle`]: after the last buyer, the oracle
//!   read until it is at rest (and the backlog at 0).
//! - `stock_sampler`: the oracle's stock read once a second during the sale.
//! - `plan`: the plan as numbers, for `--dry-run` and the remote banner.
//! - `mapping_check`: `attack --probe`: one request of each kind, each answer's classification
//!   and why.

pub mod backlog;
pub mod mapping_check;
mod oracle;
pub mod order_rows;
mod plan;
pub mod settle;
pub mod stock_sampler;

pub use oracle::{baseline_notes, run_totals, Oracle, OracleSource, Tally};
pub use order_rows::{OrdersQuery, Row};
pub use plan::PlanSummary;

use crate::guard::{check_again, resolve_again, Use};
use crate::traffic::mapping::Mapping;

/// A foreign shop: where it is, how its API looks, and how to audit it.
#[derive(Debug, Clone)]
pub struct Foreign {
    pub base_url: String,
    /// `host[:port]` of the target, for labels and banners.
    pub host: String,
    /// The user allowed a target (and oracle endpoint) that is not loopback.
    pub allow_remote: bool,
    pub mapping: Mapping,
    pub oracle: OracleSource,
    /// How the run settles after the last buyer.
    pub settle: settle::SettlePlan,
}

impl Foreign {
    /// The run's label in reports: the target's `host:port`.
    pub fn label(&self) -> String {
        self.host.clone()
    }
}

/// Checks every endpoint a run will use before anything is sent to the shop: the target's name
/// (resolved again: DNS may have changed since the command line was read) against the loopback
/// guard, one TCP connection to it (opened and closed, no request), the oracle endpoint's name,
/// and the oracle itself ([`Oracle::check`]). Returns the connected oracle.
///
/// An unreachable shop or oracle is a typed [`crate::services::Unreachable`] (exit 3); the
/// shop has then received no request at all.
pub async fn preflight(f: &Foreign) -> anyhow::Result<Oracle> {
    use crate::services::Service;
    use std::time::Duration;
    let addrs = resolve_again(Use::Target, &f.base_url, f.allow_remote).await?;
    let unreachable = |e: &dyn std::fmt::Display| Service::Shop.unreachable_error(&f.base_url, e);
    let connect = tokio::net::TcpStream::connect(&*addrs);
    match tokio::time::timeout(Duration::from_secs(5), connect).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(unreachable(&e).into()),
        Err(_) => return Err(unreachable(&"no answer within 5 s").into()),
    }
    match &f.oracle {
        OracleSource::Http { url, .. } => {
            resolve_again(Use::Oracle, url, f.allow_remote).await?;
        }
        OracleSource::Sql { url, .. } => check_again(Use::Database, url, f.allow_remote).await?,
        OracleSource::None => {}
    }
    let oracle = f.oracle.connect().await?;
    oracle.check().await?;
    Ok(oracle)
}
