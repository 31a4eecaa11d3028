//! Settling (BRIEF §4): after the last buyer, a foreign shop is read until its oracle's reading
//! (totals and order rows) has stayed unchanged for the settle window and, when the shop gives
//! one, its backlog signal reads 0 (`--backlog-query`, or `[target.settle] backlog`: an endpoint
//! on the target, a `[watch]` gauge, or none declared: [`super::backlog`]), up to the deadline
//! (`--drain-timeout-s`). No run is called settled on a timer alone: without an oracle and
//! without a backlog signal the state is unknown.

use super::backlog::BacklogSource;
use super::{Oracle, Row, Tally};
use crate::report::{Drain, SettleState, Settling};
use std::time::Duration;
use tokio::time::Instant;

/// `settle_s`'s default: 3 s.
pub const DEFAULT_SETTLE_S: f64 = 3.0;

/// How a run settles: the window, and the backlog query when the flag gave one.
#[derive(Debug, Clone, PartialEq)]
pub struct SettlePlan {
    pub window: Duration,
    /// `--backlog-query`: one SELECT returning the backlog's size (with `--oracle-sql`).
    pub backlog_query: Option<String>,
}

impl Default for SettlePlan {
    fn default() -> Self {
        SettlePlan {
            window: Duration::from_secs_f64(DEFAULT_SETTLE_S),
            backlog_query: None,
        }
    }
}

/// What the oracle read once the shop settled (or the deadline passed).
pub struct Settled {
    pub drain: Drain,
    pub tally: Option<Tally>,
    pub rows: Option<Vec<Row>>,
}

/// Reads `oracle` (and `backlog`, the shop's backlog signal: [`BacklogSource::of`]) until the
/// reading has been unchanged for the window with the backlog at 0, up to `limit`.
pub async fn settle(
    oracle: &Oracle,
    backlog: Option<&BacklogSource>,
    plan: &SettlePlan,
    limit: Duration,
) -> anyhow::Result<Settled> {
    let start = Instant::now();
    let has_oracle = !matches!(oracle, Oracle::None);
    let step = (plan.window / 4).clamp(Duration::from_millis(50), Duration::from_millis(250));
    let read = || async { anyhow::Ok((oracle.read().await?, oracle.rows().await?)) };
    let mut last = read().await?;
    let mut backlog_last = match &backlog {
        Some(b) => b.read(oracle).await,
        None => None,
    };
    let mut readings = 1u64;
    let mut unchanged_since = Instant::now();
    let state = loop {
        if !has_oracle && backlog.is_none() {
            // Nothing can tell: give the shop the window, and say so.
            tokio::time::sleep(plan.window.min(limit)).await;
            break SettleState::Unknown;
        }
        let backlog_done = backlog.is_none() || backlog_last == Some(0);
        if backlog_done && unchanged_since.elapsed() >= plan.window {
            break SettleState::Settled;
        }
        if start.elapsed() >= limit {
            break SettleState::NotSettled;
        }
        tokio::time::sleep(step).await;
        let now = read().await?;
        if let Some(b) = &backlog {
            backlog_last = b.read(oracle).await;
        }
        readings += 1;
        if now != last {
            last = now;
            unchanged_since = Instant::now();
        }
    };
    let settle = Settling {
        state,
        window_ms: plan.window.as_millis() as u64,
        backlog: backlog.map(BacklogSource::describe),
        backlog_last,
        readings,
    };
    let (tally, rows) = last;
    Ok(Settled {
        drain: Drain {
            drained: state == SettleState::Settled,
            waited_ms: start.elapsed().as_millis() as u64,
            limit_ms: limit.as_millis() as u64,
            settle: Some(settle),
        },
        tally,
        rows,
    })
}
