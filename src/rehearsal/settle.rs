//! Settling (BRIEF §4): after the last buyer, a foreign shop is read until its oracle's reading
//! (totals and order rows) has stayed unchanged for the settle window and, when the shop gives
//! one, its backlog signal reads 0 (`--backlog-query`, or `[target.settle] backlog`: an endpoint
//! on the target), up to the deadline (`--drain-timeout-s`). No run is called settled on a
//! timer alone: without an oracle and without a backlog signal the state is unknown.

use super::{Oracle, Row, Tally};
use crate::report::{Drain, SettleState, Settling};
use crate::traffic::target::{self, Prepared, Target};
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

/// Where the shop's backlog is read.
enum Backlog<'a> {
    Sql(&'a str),
    Http {
        target: &'a Target,
        request: Prepared,
        field: &'a str,
        client: reqwest::Client,
    },
}

impl Backlog<'_> {
    /// The signal, for the report.
    fn describe(&self) -> String {
        match self {
            Backlog::Sql(q) => format!("`{q}` (--backlog-query)"),
            Backlog::Http {
                target,
                request,
                field,
                ..
            } => {
                format!(
                    "{} at `{field}` ([target.settle] backlog)",
                    target.line(request)
                )
            }
        }
    }

    /// The backlog now; `None` when it could not be read (an error, not a number).
    async fn read(&self, oracle: &Oracle) -> Option<i64> {
        match self {
            Backlog::Sql(q) => oracle.backlog(q).await.ok().flatten(),
            Backlog::Http {
                target,
                request,
                field,
                client,
            } => {
                let url = target.url(request).ok()?;
                let resp = request
                    .apply(client.request(request.reqwest_method(), url))
                    .send()
                    .await
                    .ok()?;
                let limit = target::body::MAX_SOURCE_BYTES;
                let body = target::body::read_limited(resp, limit).await.ok()?;
                let json: serde_json::Value = serde_json::from_str(&body).ok()?;
                super::oracle::number_at(&json, field)
            }
        }
    }
}

/// What the oracle read once the shop settled (or the deadline passed).
pub struct Settled {
    pub drain: Drain,
    pub tally: Option<Tally>,
    pub rows: Option<Vec<Row>>,
}

/// Reads `oracle` (and the backlog: the plan's query, else the mapping's endpoint) until the
/// reading has been unchanged for the window with the backlog at 0, up to `limit`.
pub async fn settle(
    oracle: &Oracle,
    target: &Target,
    plan: &SettlePlan,
    limit: Duration,
) -> anyhow::Result<Settled> {
    let start = Instant::now();
    let backlog = match (&plan.backlog_query, target.backlog_request()) {
        (Some(q), _) => Some(Backlog::Sql(q)),
        (None, Some(request)) => Some(Backlog::Http {
            target,
            request,
            field: target
                .mapping
                .settle
                .as_ref()
                .and_then(|s| s.backlog.as_ref())
                .map_or("", |b| b.field.as_str()),
            client: target::client(Duration::from_secs(10))?,
        }),
        (None, None) => None,
    };
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
        backlog: backlog.as_ref().map(Backlog::describe),
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
