//! The asynchronous parts of `[target]` as written: `[target.poll]` (how a pending order's
//! decision is asked for) and `[target.settle]` (the settle window and the backlog endpoint),
//! with the checks that turn them into [`PollSpec`] and [`SettleSpec`].

use super::super::check::{self, dot_path, Context, Step};
use super::super::{Backlog, BacklogEndpoint, OutcomeRule, PollSpec, SettleSpec};
use super::{MappingError, RawRequest, RawRule};
use crate::duration::Written;
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
    /// Milliseconds between a poll's answer and the next poll (default 250; or `interval =
    /// "250ms"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// `interval = "250ms"`: `interval_ms` with its unit.
    #[serde(default, skip_serializing)]
    pub interval: Option<Written>,
    /// Milliseconds after the pending answer the order may take to be decided (default
    /// 30000; or `max_wait = "30s"`); then it is `undecided` (indeterminate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u64>,
    /// `max_wait = "30s"`: `max_wait_ms` with its unit.
    #[serde(default, skip_serializing)]
    pub max_wait: Option<Written>,
    /// How a poll's answer is read: `pending` (ask again) or the decision.
    pub outcomes: Vec<RawRule>,
}

/// Milliseconds from the older field or the one written with its unit (`names`: the older
/// field under `target.`, the newer key), else `default`; both given is refused.
fn one_of(
    names: (&'static str, &'static str),
    old: Option<u64>,
    written: Option<Written>,
    default: u64,
) -> Result<u64, MappingError> {
    match (old, written) {
        (Some(_), Some(_)) => Err(MappingError::GivenTwice {
            field: names.0,
            written: names.1,
        }),
        (Some(ms), None) => Ok(ms),
        (None, Some(w)) => Ok(u64::try_from(w.0.as_millis()).unwrap_or(u64::MAX)),
        (None, None) => Ok(default),
    }
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
    /// Seconds the oracle's reading must stay unchanged (default 3; or `window = "3s"`;
    /// `--settle` overrides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle_s: Option<f64>,
    /// `window = "3s"`: `settle_s` with its unit.
    #[serde(default, skip_serializing)]
    pub window: Option<Written>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog: Option<RawBacklogSignal>,
}

/// `[target.settle] backlog` as written: an endpoint table, or a word: `"watch.NAME"` (a
/// `[watch]` gauge of the scenario) or `"none"` (the shop has no backlog).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum RawBacklogSignal {
    Endpoint(RawBacklog),
    Word(String),
}

/// `[target.settle] backlog` as an endpoint on the target whose JSON answer holds the shop's
/// backlog (orders accepted and not yet written) at a dot path; 0 means nothing waits.
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
        let max_wait_ms = one_of(
            ("poll.max_wait_ms", "max_wait"),
            self.max_wait_ms,
            self.max_wait,
            poll_max_wait_ms(),
        )?;
        let interval_ms = one_of(
            ("poll.interval_ms", "interval"),
            self.interval_ms,
            self.interval,
            poll_interval_ms(),
        )?;
        let within = |v: u64| (1..=MAX_POLL_WAIT_MS).contains(&v);
        if !within(max_wait_ms) {
            return Err(MappingError::PollTiming {
                field: "max_wait_ms",
                got: max_wait_ms,
            });
        }
        if !within(interval_ms) || interval_ms > max_wait_ms {
            return Err(MappingError::PollTiming {
                field: "interval_ms",
                got: interval_ms,
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
            interval: Duration::from_millis(interval_ms),
            max_wait: Duration::from_millis(max_wait_ms),
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
            interval_ms: Some(p.interval.as_millis() as u64),
            interval: None,
            max_wait_ms: Some(p.max_wait.as_millis() as u64),
            max_wait: None,
            outcomes: p.outcomes.into_iter().map(Into::into).collect(),
        }
    }
}

impl RawSettle {
    /// The typed settle table (`cx`: what the table says).
    pub(in super::super) fn parse(self, cx: &Context<'_>) -> Result<SettleSpec, MappingError> {
        let settle_s = match (self.settle_s, self.window) {
            (Some(_), Some(_)) => {
                return Err(MappingError::GivenTwice {
                    field: "settle.settle_s",
                    written: "window",
                })
            }
            (s, w) => s.or(w.map(|w| w.0.as_secs_f64())),
        };
        if let Some(got) = settle_s.filter(|s| !(*s > 0.0 && *s <= MAX_SETTLE_S)) {
            return Err(MappingError::SettleWindow { got });
        }
        let backlog = match self.backlog {
            None => None,
            Some(RawBacklogSignal::Word(w)) => Some(match w.trim() {
                "none" => Backlog::None,
                word => match word.strip_prefix("watch.").filter(|n| !n.is_empty()) {
                    Some(name) => Backlog::Gauge(name.to_string()),
                    None => return Err(MappingError::BacklogWord { got: w }),
                },
            }),
            Some(RawBacklogSignal::Endpoint(b)) => {
                let raw = RawRequest {
                    method: b.method,
                    path: b.path,
                    ..RawRequest::default()
                };
                let request = cx.request(Step::Backlog, raw)?;
                if !dot_path(&b.field) {
                    return Err(MappingError::BacklogField { got: b.field });
                }
                Some(Backlog::Endpoint(BacklogEndpoint {
                    request,
                    field: b.field,
                }))
            }
        };
        Ok(SettleSpec { settle_s, backlog })
    }
}

impl From<SettleSpec> for RawSettle {
    fn from(st: SettleSpec) -> Self {
        RawSettle {
            settle_s: st.settle_s,
            window: None,
            backlog: st.backlog.map(|b| match b {
                Backlog::Endpoint(b) => RawBacklogSignal::Endpoint(RawBacklog {
                    method: b.request.method.as_str().into(),
                    path: b.request.path,
                    field: b.field,
                }),
                Backlog::Gauge(name) => RawBacklogSignal::Word(format!("watch.{name}")),
                Backlog::None => RawBacklogSignal::Word("none".into()),
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
