//! The `[target]` table: a shop's API as a scenario file writes it, parsed into typed requests
//! and answer rules when the file is read. The reference shop's API is the default mapping.
//!
//! Templates substitute `{item_id}`, `{user_id}`, `{device_id}`, `{qty}`, `{order_id}`,
//! `{stock}`, `{purchase_limit}`, `{name}` and `{price_cents}`; values are JSON-escaped, so a
//! body template writes the quotes itself: `{"user": "{user_id}"}`.
//!
//! [`RawMapping`] is the table as written (strings, unknown fields rejected); [`Mapping`] is
//! what it means (a method, a status pattern, an outcome). Serde goes through the raw form both
//! ways, so a bad method, status or outcome is an error naming its field while the file is read,
//! and a mapping echoed into a report reads back the same.

use super::recorder::Answer;
use serde::{Deserialize, Serialize};
use std::fmt;

/// An HTTP method a template may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    /// Every method, in the order error messages list them.
    pub const ALL: [Method; 5] = [
        Method::Get,
        Method::Post,
        Method::Put,
        Method::Patch,
        Method::Delete,
    ];

    /// The method's name, upper case.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }

    /// Parses a method name in any case.
    pub fn parse(s: &str) -> Option<Method> {
        Method::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
    }
}

/// Which status codes a rule applies to: one code (`"409"`) or a class (`"4xx"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusPattern {
    /// Exactly this code, 100..=599.
    Code(u16),
    /// Every code of this hundred, 1..=5.
    Class(u16),
}

impl StatusPattern {
    /// Parses `"409"` or `"4xx"`.
    pub fn parse(s: &str) -> Option<StatusPattern> {
        if let Some(class) = s.strip_suffix("xx") {
            let c: u16 = class.parse().ok().filter(|c| (1..=5).contains(c))?;
            return Some(StatusPattern::Class(c));
        }
        let p: u16 = s.parse().ok().filter(|p| (100..=599).contains(p))?;
        Some(StatusPattern::Code(p))
    }

    /// Whether `code` is one this pattern names.
    pub fn matches(self, code: u16) -> bool {
        match self {
            StatusPattern::Code(p) => p == code,
            StatusPattern::Class(c) => code / 100 == c,
        }
    }
}

impl fmt::Display for StatusPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StatusPattern::Code(p) => write!(f, "{p}"),
            StatusPattern::Class(c) => write!(f, "{c}xx"),
        }
    }
}

/// What a rule says an answer means: any [`Answer`] an HTTP response can be (never a timeout
/// or a connection error, which have no response to match).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(Answer);

impl Outcome {
    /// Whether a rule may name `a`.
    fn allowed(a: Answer) -> bool {
        !matches!(a, Answer::Timeout | Answer::ConnectError)
    }

    /// Every outcome a rule may name, in report order.
    pub fn all() -> impl Iterator<Item = Outcome> {
        Answer::ALL
            .into_iter()
            .filter(|a| Self::allowed(*a))
            .map(Outcome)
    }

    /// Parses an outcome name (`created`, `sold_out`, ...).
    pub fn parse(s: &str) -> Option<Outcome> {
        Self::all().find(|o| o.0.as_str() == s)
    }

    /// The answer the recorder counts.
    pub fn answer(self) -> Answer {
        self.0
    }
}

/// One action's request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestTemplate {
    pub method: Method,
    /// Starts with `/`.
    pub path: String,
    /// JSON body template (sent with `content-type: application/json`).
    pub body: Option<String>,
}

/// A JSON field (dot path) whose value must equal `equals` (a string, or a value's JSON text).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldMatch {
    pub path: String,
    pub equals: String,
}

/// A rule mapping an answer to an outcome; the first rule that matches wins.
#[derive(Debug, Clone, PartialEq)]
pub struct OutcomeRule {
    /// The rule applies when any of these matches the status code.
    pub status: Vec<StatusPattern>,
    /// And, when set, this field of the JSON body matches.
    pub field: Option<FieldMatch>,
    pub outcome: Outcome,
}

/// The `[target]` table: a shop's API, parsed.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "RawMapping", into = "RawMapping")]
pub struct Mapping {
    /// Sets up the sale before the run; absent when the target does not allow it.
    pub setup: Option<RequestTemplate>,
    pub view: RequestTemplate,
    pub order: RequestTemplate,
    pub pay: RequestTemplate,
    pub cancel: RequestTemplate,
    /// Dot path of the order id in a created order's JSON answer.
    pub order_id_field: String,
    /// Header that carries the simulated client IP (empty: none).
    pub ip_header: String,
    pub outcomes: Vec<OutcomeRule>,
}

/// One action's request as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawRequest {
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    pub path: String,
    /// JSON body template (sent with `content-type: application/json`).
    #[serde(default)]
    pub body: Option<String>,
}

/// A rule as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    /// Status codes this rule applies to: a code like `"409"` or a class like `"4xx"`.
    pub status: Vec<String>,
    /// Optional JSON field (dot path) that must equal `equals`.
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub equals: Option<String>,
    /// created, ok, sold_out, duplicate, rate_limited, rejected, not_found, invalid, busy,
    /// server_error.
    pub outcome: String,
}

/// The `[target]` table as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawMapping {
    #[serde(default)]
    pub setup: Option<RawRequest>,
    pub view: RawRequest,
    pub order: RawRequest,
    pub pay: RawRequest,
    pub cancel: RawRequest,
    pub order_id_field: String,
    #[serde(default = "forwarded_for")]
    pub ip_header: String,
    pub outcomes: Vec<RawRule>,
}

fn forwarded_for() -> String {
    "X-Forwarded-For".into()
}

/// A `[target]` table that cannot be used; the message names the field and what is allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MappingError {
    #[error(
        "field `target.{action}.method` must be one of {} (got {got:?})",
        methods()
    )]
    Method { action: &'static str, got: String },
    #[error("field `target.{action}.path` must start with '/' (got {got:?})")]
    Path { action: &'static str, got: String },
    #[error(
        "field `target.outcomes[{rule}].outcome` must be one of {} (got {got:?})",
        outcomes()
    )]
    Outcome { rule: usize, got: String },
    #[error("field `target.outcomes[{rule}].status` holds {got:?}: use a code like \"409\" or a class like \"4xx\"")]
    Status { rule: usize, got: String },
    #[error("field `target.outcomes[{rule}]`: `field` and `equals` go together")]
    FieldWithoutEquals { rule: usize },
}

fn methods() -> String {
    let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
    names.join(", ")
}

fn outcomes() -> String {
    let names: Vec<&str> = Outcome::all().map(|o| o.answer().as_str()).collect();
    names.join(", ")
}

impl RawRequest {
    /// The typed request of action `action` (named in errors).
    fn parse(self, action: &'static str) -> Result<RequestTemplate, MappingError> {
        let method = Method::parse(&self.method).ok_or_else(|| MappingError::Method {
            action,
            got: self.method.clone(),
        })?;
        if !self.path.starts_with('/') {
            return Err(MappingError::Path {
                action,
                got: self.path,
            });
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

impl TryFrom<RawMapping> for Mapping {
    type Error = MappingError;

    /// Checks in file order: each action's method and path (set-up last), then each rule.
    fn try_from(raw: RawMapping) -> Result<Mapping, MappingError> {
        let view = raw.view.parse("view")?;
        let order = raw.order.parse("order")?;
        let pay = raw.pay.parse("pay")?;
        let cancel = raw.cancel.parse("cancel")?;
        let setup = raw.setup.map(|s| s.parse("setup")).transpose()?;
        let outcomes = raw
            .outcomes
            .into_iter()
            .enumerate()
            .map(|(i, r)| r.parse(i))
            .collect::<Result<_, _>>()?;
        Ok(Mapping {
            setup,
            view,
            order,
            pay,
            cancel,
            order_id_field: raw.order_id_field,
            ip_header: raw.ip_header,
            outcomes,
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
            view: m.view.into(),
            order: m.order.into(),
            pay: m.pay.into(),
            cancel: m.cancel.into(),
            order_id_field: m.order_id_field,
            ip_header: m.ip_header,
            outcomes: m.outcomes.into_iter().map(Into::into).collect(),
        }
    }
}

fn tpl(method: Method, path: &str, body: Option<&str>) -> RequestTemplate {
    RequestTemplate {
        method,
        path: path.into(),
        body: body.map(str::to_string),
    }
}

fn rule(status: StatusPattern, error: Option<&str>, answer: Answer) -> OutcomeRule {
    debug_assert!(Outcome::allowed(answer));
    OutcomeRule {
        status: vec![status],
        field: error.map(|e| FieldMatch {
            path: "error".into(),
            equals: e.into(),
        }),
        outcome: Outcome(answer),
    }
}

impl Default for Mapping {
    /// The reference shop's API.
    fn default() -> Self {
        use StatusPattern::{Class, Code};
        Mapping {
            setup: Some(tpl(
                Method::Put,
                "/api/items/{item_id}",
                Some(
                    r#"{"stock": {stock}, "name": "{name}", "price_cents": {price_cents}, "purchase_limit": {purchase_limit}}"#,
                ),
            )),
            view: tpl(Method::Get, "/api/items/{item_id}", None),
            order: tpl(
                Method::Post,
                "/api/orders",
                Some(
                    r#"{"item_id": {item_id}, "user_id": "{user_id}", "qty": {qty}, "device_id": "{device_id}"}"#,
                ),
            ),
            pay: tpl(Method::Post, "/api/orders/{order_id}/pay", None),
            cancel: tpl(Method::Post, "/api/orders/{order_id}/cancel", None),
            order_id_field: "order_id".into(),
            ip_header: forwarded_for(),
            outcomes: vec![
                rule(Code(201), None, Answer::Created),
                rule(Class(2), None, Answer::Ok),
                rule(Code(409), Some("sold_out"), Answer::SoldOut),
                rule(Code(409), Some("duplicate"), Answer::Duplicate),
                rule(Code(409), Some("invalid_state"), Answer::Rejected),
                rule(Code(429), None, Answer::RateLimited),
                rule(Code(503), Some("busy"), Answer::Busy),
                rule(Code(404), None, Answer::NotFound),
                rule(Class(4), None, Answer::Invalid),
                rule(Class(5), None, Answer::ServerError),
            ],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_mapping_names_the_field() {
        let mut m = RawMapping::from(Mapping::default());
        m.outcomes[0].outcome = "won".into();
        assert!(Mapping::try_from(m)
            .unwrap_err()
            .to_string()
            .contains("target.outcomes[0].outcome"));
        let mut m = RawMapping::from(Mapping::default());
        m.pay.method = "FETCH".into();
        assert!(Mapping::try_from(m)
            .unwrap_err()
            .to_string()
            .contains("target.pay.method"));
    }

    #[test]
    fn the_reference_mapping_reads_back_from_its_written_form() {
        let raw = RawMapping::from(Mapping::default());
        assert_eq!(raw.outcomes[1].status, vec!["2xx".to_string()]);
        assert_eq!(raw.setup.as_ref().unwrap().method, "PUT");
        assert_eq!(Mapping::try_from(raw), Ok(Mapping::default()));
    }

    #[test]
    fn status_patterns_and_methods_are_decided_when_read() {
        assert_eq!(StatusPattern::parse("4xx"), Some(StatusPattern::Class(4)));
        assert_eq!(StatusPattern::parse("409"), Some(StatusPattern::Code(409)));
        for bad in ["6xx", "0xx", "99", "600", "4XX", "abc"] {
            assert_eq!(StatusPattern::parse(bad), None, "{bad}");
        }
        assert!(StatusPattern::Class(4).matches(418) && !StatusPattern::Class(4).matches(500));
        assert_eq!(Method::parse("delete"), Some(Method::Delete));
        assert_eq!(Method::parse("FETCH"), None);
        assert_eq!(Outcome::parse("timeout"), None);
        let mut m = RawMapping::from(Mapping::default());
        m.outcomes[2].equals = None;
        assert_eq!(
            Mapping::try_from(m),
            Err(MappingError::FieldWithoutEquals { rule: 2 })
        );
    }
}
