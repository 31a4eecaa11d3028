//! The `[target]` table as written, and the checks that turn it into a [`Mapping`]: methods,
//! paths (a path on the target, never a URL of its own), placeholders (known, and available
//! where they are used), status patterns, outcomes, the unclassified bound and the oracle
//! endpoint. Every error names its field.

use super::template::{self, Placeholder};
use super::{
    FieldMatch, Mapping, Method, OracleFields, OracleSpec, Outcome, OutcomeRule, RequestTemplate,
    StatusPattern,
};
use serde::{Deserialize, Serialize};

mod asynchronous;
use asynchronous::outcomes_pending;
pub use asynchronous::{RawBacklog, RawPoll, RawSettle, MAX_POLL_WAIT_MS, MAX_SETTLE_S};

/// One action's request as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawRequest {
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    pub path: String,
    /// JSON body template (sent with `content-type: application/json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// A rule as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// Status codes this rule applies to: a code like `"409"` or a class like `"4xx"`.
    pub status: Vec<String>,
    /// Optional JSON field (dot path) that must equal `equals`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    /// created, ok, pending, sold_out, duplicate, rate_limited, rejected, not_found, invalid,
    /// unauthorized, busy, server_error.
    pub outcome: String,
}

/// `[target.oracle]` as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawOracle {
    /// A path on the target (`/stock`) or a full http(s) URL.
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sold_field: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock_field: Option<String>,
}

/// The `[target]` table as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup: Option<RawRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<RawRequest>,
    pub order: RawRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pay: Option<RawRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<RawRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id_field: Option<String>,
    #[serde(default = "forwarded_for")]
    pub ip_header: String,
    /// Header that names each order attempt (default `Idempotency-Key`; empty: not sent).
    #[serde(default = "idempotency_key")]
    pub idempotency_header: String,
    pub outcomes: Vec<RawRule>,
    /// The largest share of answers no rule may classify (default 0.01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unclassified: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle: Option<RawOracle>,
    /// Asynchronous orders: how to ask for a pending order's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<RawPoll>,
    /// After the last buyer: the settle window and the shop's backlog signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<RawSettle>,
}

pub(super) fn forwarded_for() -> String {
    "X-Forwarded-For".into()
}

pub(super) fn idempotency_key() -> String {
    "Idempotency-Key".into()
}

/// A `[target]` table that cannot be used; the message names the field and what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MappingError {
    #[error(
        "field `target.{action}.method` must be one of {} (got {got:?})",
        methods()
    )]
    Method { action: &'static str, got: String },
    #[error(
        "field `target.{action}.path` must be a path on the target starting with a single '/' \
         (no scheme, no host, no backslash), like \"/api/orders\" (got {got:?})"
    )]
    Path { action: &'static str, got: String },
    #[error(
        "field `target.{action}.{part}` names {{{name}}}, which is not a placeholder; allowed: {}",
        template::names()
    )]
    UnknownPlaceholder {
        action: &'static str,
        part: &'static str,
        name: String,
    },
    #[error(
        "field `target.setup.{part}` names {{{name}}}, which only a buyer's request has \
         (the set-up request is sent once, for the sale)"
    )]
    BuyerPlaceholder { part: &'static str, name: String },
    #[error(
        "field `target.{action}.{part}` names {{order_id}}, which {}",
        if matches!(*.action, "pay" | "cancel" | "poll") {
            "needs `target.order_id_field` (where a created or pending order's JSON answer carries its id)"
        } else {
            "only pay, cancel and poll requests have"
        }
    )]
    OrderId {
        action: &'static str,
        part: &'static str,
    },
    #[error(
        "field `target.outcomes[{rule}].outcome` must be one of {} (got {got:?})",
        outcomes()
    )]
    Outcome { rule: usize, got: String },
    #[error("field `target.outcomes[{rule}].status` holds {got:?}: use a code like \"409\" or a class like \"4xx\"")]
    Status { rule: usize, got: String },
    #[error("field `target.outcomes[{rule}]`: `field` and `equals` go together")]
    FieldWithoutEquals { rule: usize },
    #[error("field `target.order_id_field` must be a dot path like \"data.id\" (got {got:?})")]
    OrderIdField { got: String },
    #[error(
        "field `target.idempotency_header` must be an HTTP header name like \"Idempotency-Key\", \
         or \"\" to send none (got {got:?})"
    )]
    IdempotencyHeader { got: String },
    #[error("field `target.max_unclassified` must be a share between 0 and 1 (got {got})")]
    MaxUnclassified { got: f64 },
    #[error(
        "field `target.oracle.url` must be a path on the target (\"/stock\") or an http(s) URL \
         (got {got:?})"
    )]
    OracleUrl { got: String },
    #[error("field `target.oracle.{field}` must be a dot path like \"data.sold\" (got {got:?})")]
    OracleField { field: &'static str, got: String },
    #[error(
        "field `target.outcomes[{rule}].outcome` is \"pending\" (accepted, not decided), which \
         needs `target.poll`: the request that asks the shop for the order's decision, e.g. \
         [target.poll] method = \"GET\", path = \"/orders/{{order_id}}\", outcomes = [...]"
    )]
    PendingWithoutPoll { rule: usize },
    /// A rule of `target.poll.outcomes` that cannot be used (the message names it).
    #[error("{0}")]
    PollRule(String),
    #[error(
        "field `target.poll.outcomes` must hold a rule that decides the order (an outcome \
         other than \"pending\", e.g. {{ status = [\"200\"], field = \"status\", equals = \
         \"confirmed\", outcome = \"created\" }})"
    )]
    PollNeverDecides,
    #[error(
        "field `target.poll.{field}` must be between 1 and {MAX_POLL_WAIT_MS} ms, and \
         interval_ms at most max_wait_ms (got {got})"
    )]
    PollTiming { field: &'static str, got: u64 },
    #[error("field `target.settle.settle_s` must be seconds above 0 and at most {MAX_SETTLE_S} (got {got})")]
    SettleWindow { got: f64 },
    #[error(
        "field `target.settle.backlog.{part}` names {{{name}}}, which only a buyer's request has \
         (the backlog is read for the whole sale)"
    )]
    BacklogPlaceholder { part: &'static str, name: String },
    #[error(
        "field `target.settle.backlog.field` must be a dot path like \"queue.depth\" (got {got:?})"
    )]
    BacklogField { got: String },
}

fn methods() -> String {
    let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
    names.join(", ")
}

fn outcomes() -> String {
    let names: Vec<&str> = Outcome::all().map(|o| o.answer().as_str()).collect();
    names.join(", ")
}

/// Whether `p` stays on the target when appended to its base URL: one leading `/`, no `\`
/// (which URL parsers read as `/`), no scheme.
fn path_on_target(p: &str) -> bool {
    p.starts_with('/') && !p.starts_with("//") && !p.contains('\\') && !p.contains("://")
}

/// A dot path into a JSON answer: non-empty parts.
fn dot_path(p: &str) -> bool {
    !p.trim().is_empty() && p.split('.').all(|k| !k.is_empty())
}

impl RawRequest {
    /// The typed request of action `action` (named in errors). `with_ids`: whether the
    /// mapping names an order id field.
    fn parse(self, action: &'static str, with_ids: bool) -> Result<RequestTemplate, MappingError> {
        let method = Method::parse(&self.method).ok_or_else(|| MappingError::Method {
            action,
            got: self.method.clone(),
        })?;
        if !path_on_target(&self.path) {
            return Err(MappingError::Path {
                action,
                got: self.path,
            });
        }
        let parts = [("path", Some(&self.path)), ("body", self.body.as_ref())];
        for (part, text) in parts {
            let Some(text) = text else { continue };
            let used = template::used(text).map_err(|name| MappingError::UnknownPlaceholder {
                action,
                part,
                name,
            })?;
            for p in used {
                if action == "setup" && p.is_buyer() {
                    return Err(MappingError::BuyerPlaceholder {
                        part,
                        name: p.name().into(),
                    });
                }
                if action == "settle.backlog" && p.is_buyer() {
                    return Err(MappingError::BacklogPlaceholder {
                        part,
                        name: p.name().into(),
                    });
                }
                let follow_up = matches!(action, "pay" | "cancel" | "poll");
                if p == Placeholder::OrderId && !(follow_up && with_ids) {
                    return Err(MappingError::OrderId { action, part });
                }
            }
        }
        Ok(RequestTemplate {
            method,
            path: self.path,
            body: self.body,
        })
    }
}

impl RawRule {
    /// The typed rule at index `rule` (named in errors).
    fn parse(self, rule: usize) -> Result<OutcomeRule, MappingError> {
        let outcome = Outcome::parse(&self.outcome).ok_or_else(|| MappingError::Outcome {
            rule,
            got: self.outcome.clone(),
        })?;
        let status = self
            .status
            .iter()
            .map(|s| {
                StatusPattern::parse(s).ok_or_else(|| MappingError::Status {
                    rule,
                    got: s.clone(),
                })
            })
            .collect::<Result<_, _>>()?;
        let field = match (self.field, self.equals) {
            (Some(path), Some(equals)) => Some(FieldMatch { path, equals }),
            (None, None) => None,
            _ => return Err(MappingError::FieldWithoutEquals { rule }),
        };
        Ok(OutcomeRule {
            status,
            field,
            outcome,
        })
    }
}

impl RawOracle {
    fn parse(self) -> Result<OracleSpec, MappingError> {
        let url_ok = path_on_target(&self.url)
            || ((self.url.starts_with("http://") || self.url.starts_with("https://"))
                && reqwest::Url::parse(&self.url).is_ok());
        if !url_ok {
            return Err(MappingError::OracleUrl { got: self.url });
        }
        for (field, v) in [
            ("sold_field", &self.sold_field),
            ("stock_field", &self.stock_field),
        ] {
            if let Some(v) = v.as_ref().filter(|v| !dot_path(v)) {
                return Err(MappingError::OracleField {
                    field,
                    got: v.clone(),
                });
            }
        }
        Ok(OracleSpec {
            url: self.url,
            fields: OracleFields {
                sold: self.sold_field,
                stock: self.stock_field,
            },
        })
    }
}

impl TryFrom<RawMapping> for Mapping {
    type Error = MappingError;

    /// Checks in file order: each action's method, path and placeholders (set-up last), then
    /// the order id field, each rule, the idempotency header, the bound and the oracle.
    fn try_from(raw: RawMapping) -> Result<Mapping, MappingError> {
        if let Some(f) = raw.order_id_field.as_ref().filter(|f| !dot_path(f)) {
            return Err(MappingError::OrderIdField { got: f.clone() });
        }
        let ids = raw.order_id_field.is_some();
        let view = raw.view.map(|r| r.parse("view", ids)).transpose()?;
        let order = raw.order.parse("order", ids)?;
        let pay = raw.pay.map(|r| r.parse("pay", ids)).transpose()?;
        let cancel = raw.cancel.map(|r| r.parse("cancel", ids)).transpose()?;
        let setup = raw.setup.map(|s| s.parse("setup", ids)).transpose()?;
        let outcomes: Vec<OutcomeRule> = raw
            .outcomes
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.parse(i))
            .collect::<Result<_, _>>()?;
        let header = &raw.idempotency_header;
        if !header.is_empty() && reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err()
        {
            return Err(MappingError::IdempotencyHeader {
                got: header.clone(),
            });
        }
        if let Some(got) = raw.max_unclassified.filter(|m| !(0.0..=1.0).contains(m)) {
            return Err(MappingError::MaxUnclassified { got });
        }
        let poll = raw.poll.map(|p| p.parse(ids)).transpose()?;
        let pending = outcomes_pending(&outcomes);
        if let (Some(rule), None) = (pending, &poll) {
            return Err(MappingError::PendingWithoutPoll { rule });
        }
        Ok(Mapping {
            setup,
            view,
            order,
            pay,
            cancel,
            order_id_field: raw.order_id_field,
            ip_header: raw.ip_header,
            idempotency_header: raw.idempotency_header,
            outcomes,
            max_unclassified: raw.max_unclassified,
            oracle: raw.oracle.map(RawOracle::parse).transpose()?,
            poll,
            settle: raw.settle.map(RawSettle::parse).transpose()?,
        })
    }
}

impl From<RequestTemplate> for RawRequest {
    fn from(t: RequestTemplate) -> Self {
        RawRequest {
            method: t.method.as_str().into(),
            path: t.path,
            body: t.body,
        }
    }
}

impl From<OutcomeRule> for RawRule {
    fn from(r: OutcomeRule) -> Self {
        let (field, equals) = r.field.map(|f| (f.path, f.equals)).unzip();
        RawRule {
            status: r.status.iter().map(ToString::to_string).collect(),
            field,
            equals,
            outcome: r.outcome.answer().as_str().into(),
        }
    }
}

impl From<Mapping> for RawMapping {
    fn from(m: Mapping) -> Self {
        RawMapping {
            setup: m.setup.map(Into::into),
            view: m.view.map(Into::into),
            order: m.order.into(),
            pay: m.pay.map(Into::into),
            cancel: m.cancel.map(Into::into),
            order_id_field: m.order_id_field,
            ip_header: m.ip_header,
            idempotency_header: m.idempotency_header,
            outcomes: m.outcomes.into_iter().map(Into::into).collect(),
            max_unclassified: m.max_unclassified,
            oracle: m.oracle.map(|o| RawOracle {
                url: o.url,
                sold_field: o.fields.sold,
                stock_field: o.fields.stock,
            }),
            poll: m.poll.map(|p| RawPoll {
                method: p.request.method.as_str().into(),
                path: p.request.path,
                body: p.request.body,
                interval_ms: p.interval.as_millis() as u64,
                max_wait_ms: p.max_wait.as_millis() as u64,
                outcomes: p.outcomes.into_iter().map(Into::into).collect(),
            }),
            settle: m.settle.map(|st| RawSettle {
                settle_s: st.settle_s,
                backlog: st.backlog.map(|b| RawBacklog {
                    method: b.request.method.as_str().into(),
                    path: b.request.path,
                    field: b.field,
                }),
            }),
        }
    }
}
