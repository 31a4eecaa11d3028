//! The asynchronous parts of `[target]` as written: `[target.poll]` (how a pending order's
//! decision is asked for) and `[target.settle]` (the settle window and the backlog endpoint),
//! with the checks that turn them into [`PollSpec`] and [`SettleSpec`].

use super::super::check::{self, dot_path, Context, Step};
use super::super::{BacklogEndpoint, OutcomeRule, PollSpec, SettleSpec};
use super::{MappingError, RawRequest, RawRule};
use crate::traffic::recorder::Answer;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// `[target.poll]` as written: the request that asks for a pending order's decision.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawPoll {
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    /// A path on the target; may name `{order_id}` (read from the pending answer) or a value
    /// an earlier request extracted.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Header name → value template (besides `[target] headers`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Milliseconds between a poll's answer and the next poll (default 250).
    #[serde(default = "poll_interval_ms")]
    pub interval_ms: u64,
    /// Milliseconds after the pending answer the order may take to be decided (default
    /// 30000); then it is `undecided` (indeterminate).
    #[serde(default = "poll_max_wait_ms")]
    pub max_wait_ms: u64,
    /// How a poll's answer is read: `pending` (ask again) or the decision.
    pub outcomes: Vec<RawRule>,
}

/// `target.poll.interval_ms`'s default.
fn poll_interval_ms() -> u64 {
    250
}

/// `target.poll.max_wait_ms`'s default.
fn poll_max_wait_ms() -> u64 {
    30_000
}

/// The longest `target.poll.max_wait_ms` allowed: ten minutes.
pub const MAX_POLL_WAIT_MS: u64 = 600_000;

/// `[target.settle]` as written: how long the oracle must read unchanged after the last
/// buyer, and the shop's backlog endpoint.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawSettle {
    /// Seconds the oracle's reading must stay unchanged (default 3; `--settle-s` overrides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<RawBacklog>,
}

/// `[target.settle] backlog` as written: an endpoint on the target whose JSON answer holds the
/// shop's backlog (orders accepted and not yet written) at a dot path; 0 means nothing waits.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawBacklog {
    pub method: String,
    pub path: String,
    /// Dot path of the backlog's size, e.g. "queue.depth".
    pub field: String,
}

/// The longest settle window allowed, in seconds.
pub const MAX_SETTLE_S: f64 = 600.0;

impl RawPoll {
    /// The typed poll step, checked like every request (`cx`: what the table says).
    pub(in super::super) fn parse(self, cx: &Context<'_>) -> Result<PollSpec, MappingError> {
        let raw = RawRequest {
            method: self.method,
            path: self.path,
            body: self.body,
            headers: self.headers,
            ..RawRequest::default()
        };
        let request = cx.request(Step::Action("poll".into()), raw)?;
        let within = |v: u64| (1..=MAX_POLL_WAIT_MS).contains(&v);
        if !within(self.max_wait_ms) {
            return Err(MappingError::PollTiming {
                field: "max_wait_ms",
                got: self.max_wait_ms,
            });
        }
        if !within(self.interval_ms) || self.interval_ms > self.max_wait_ms {
            return Err(MappingError::PollTiming {
                field: "interval_ms",
                got: self.interval_ms,
            });
        }
        let outcomes = check::rules("poll.outcomes", self.outcomes)?;
        if outcomes
            .iter()
            .all(|r| r.outcome.answer() == Answer::Pending)
        {
            return Err(MappingError::PollNeverDecides);
        }
        Ok(PollSpec {
            request,
            interval: Duration::from_millis(self.interval_ms),
            max_wait: Duration::from_millis(self.max_wait_ms),
            outcomes,
        })
    }
}

impl From<PollSpec> for RawPoll {
    fn from(p: PollSpec) -> Self {
        let r = RawRequest::from(p.request);
        RawPoll {
            method: r.method,
            path: r.path,
            body: r.body,
            headers: r.headers,
            interval_ms: p.interval.as_millis() as u64,
            max_wait_ms: p.max_wait.as_millis() as u64,
            outcomes: p.outcomes.into_iter().map(Into::into).collect(),
        }
    }
}

impl RawSettle {
    /// The typed settle table (`cx`: what the table says).
    pub(in super::super) fn parse(self, cx: &Context<'_>) -> Result<SettleSpec, MappingError> {
        if let Some(got) = self.settle_s.filter(|s| !(*s > 0.0 && *s <= MAX_SETTLE_S)) {
            return Err(MappingError::SettleWindow { got });
        }
        let backlog = match self.backlog {
            None => None,
            Some(b) => {
                let raw = RawRequest {
                    method: b.method,
                    path: b.path,
                    ..RawRequest::default()
                };
                let request = cx.request(Step::Backlog, raw)?;
                if !dot_path(&b.field) {
                    return Err(MappingError::BacklogField { got: b.field });
                }
                Some(BacklogEndpoint {
                    request,
                    field: b.field,
                })
            }
        };
        Ok(SettleSpec {
            settle_s: self.settle_s,
            backlog,
        })
    }
}

impl From<SettleSpec> for RawSettle {
    fn from(st: SettleSpec) -> Self {
        RawSettle {
            settle_s: st.settle_s,
            backlog: st.backlog.map(|b| RawBacklog {
                method: b.request.method.as_str().into(),
                path: b.request.path,
                field: b.field,
            }),
        }
    }
}

/// The first rule that answers `pending`, if any.
pub(super) fn outcomes_pending(outcomes: &[OutcomeRule]) -> Option<usize> {
    outcomes
        .iter()
        .position(|r| r.outcome.answer() == Answer::Pending)
}
