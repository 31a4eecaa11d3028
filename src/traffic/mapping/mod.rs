//! The `[target]` table: a shop's API as a scenario file writes it, parsed into typed requests
//! and answer rules when the file is read. The reference shop's API is the default mapping.
//!
//! Templates substitute `{item_id}`, `{user_id}`, `{device_id}`, `{qty}`, `{order_id}`,
//! `{stock}`, `{purchase_limit}`, `{name}` and `{price_cents}` ([`template`]): in a path a value
//! is percent-encoded, in a body JSON-escaped (a body template writes the quotes itself:
//! `{"user": "{user_id}"}`), and nothing inserted is expanded again.
//!
//! - `raw`: the table as written (strings, unknown fields rejected), the checks that turn it
//!   into a [`Mapping`], and [`MappingError`], which names the field at fault; `raw/asynchronous`
//!   the asynchronous parts: `[target.poll]` (a `pending` order's decision, [`PollSpec`]) and
//!   `[target.settle]` (the settle window and the backlog endpoint, [`SettleSpec`]). Serde goes
//!   through the raw form both ways, so a mapping echoed into a report reads back the same.
//! - [`template`]: placeholders, found when the file is read and expanded when a request is
//!   built.
//!
//! Only the order request is required: `view`, `pay` and `cancel` may be left out when the
//! scenario never sends them (the scenario checks that against its shares), and
//! `order_id_field` may be left out when the shop gives no order ids (acknowledgements are then
//! counted by answer).

mod raw;
pub mod template;

use super::recorder::Answer;
pub use raw::{
    MappingError, RawBacklog, RawMapping, RawOracle, RawPoll, RawRequest, RawRule, RawSettle,
    MAX_POLL_WAIT_MS, MAX_SETTLE_S,
};
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

/// What a rule says an answer means: any [`Answer`] an HTTP response can be, except the ones
/// the harness gives when nothing matched (`unclassified`, `redirect`), no response came
/// (`timeout`, `connect_error`) or a pending order was never decided (`undecided`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome(Answer);

impl Outcome {
    /// Whether a rule may name `a`.
    fn allowed(a: Answer) -> bool {
        !matches!(
            a,
            Answer::Timeout | Answer::ConnectError | Answer::Undecided
        ) && !a.is_unclassified()
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
    /// A path on the target: starts with one `/`, no scheme, no host.
    pub path: String,
    /// JSON body template (sent with `content-type: application/json`).
    pub body: Option<String>,
}

impl RequestTemplate {
    /// Whether the path or body names `{order_id}`.
    pub fn needs_order_id(&self) -> bool {
        // Asked for every request a buyer sends: a substring test, no parse. Tokens never
        // overlap (a name holds no brace), so `{order_id}` in the text is that placeholder;
        // a mapping with an unknown placeholder was refused when it was read.
        let token = ORDER_ID_TOKEN;
        self.path.contains(token) || self.body.as_deref().is_some_and(|b| b.contains(token))
    }
}

/// The order id placeholder as it appears in a template.
const ORDER_ID_TOKEN: &str = "{order_id}";

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

impl fmt::Display for OutcomeRule {
    /// `status 409 and error = "sold_out" → sold_out`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status: Vec<String> = self.status.iter().map(ToString::to_string).collect();
        write!(f, "status {}", status.join(" or "))?;
        if let Some(m) = &self.field {
            write!(f, " and {} = {:?}", m.path, m.equals)?;
        }
        write!(f, " → {}", self.outcome.answer().as_str())
    }
}

/// `[target.oracle]`: the shop's own endpoint that says how many units are sold and/or left.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleSpec {
    /// A path on the target (`/stock`) or a full http(s) URL.
    pub url: String,
    pub fields: OracleFields,
}

/// Where sold and stock are in an oracle endpoint's JSON answer (dot paths).
///
/// With neither field named, the answer is `{"sold": N, "stock": M}` (`stock` optional). With
/// only `stock`, sold is derived: the stock read before the sale minus the stock after it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OracleFields {
    pub sold: Option<String>,
    pub stock: Option<String>,
}

impl OracleFields {
    /// Whether sold is derived from stock (only a stock field is named).
    pub fn derives_sold(&self) -> bool {
        self.sold.is_none() && self.stock.is_some()
    }
}

/// `[target.poll]`: how a pending order's decision is asked for. After a `pending` answer the
/// buyer sends `request` every `interval` (from the previous poll's answer) until a rule of
/// `outcomes` decides it, for at most `max_wait` after the pending answer.
#[derive(Debug, Clone, PartialEq)]
pub struct PollSpec {
    /// May name `{order_id}`: the id the pending answer carried at `order_id_field`.
    pub request: RequestTemplate,
    pub interval: std::time::Duration,
    pub max_wait: std::time::Duration,
    /// How a poll's answer reads: `pending` (not yet), or the decision.
    pub outcomes: Vec<OutcomeRule>,
}

/// `[target.settle]`: the settle window (`None`: `--settle-s` or the default) and the shop's
/// backlog endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct SettleSpec {
    pub settle_s: Option<f64>,
    pub backlog: Option<BacklogEndpoint>,
}

/// An endpoint on the target whose JSON answer holds the shop's backlog at `field`.
#[derive(Debug, Clone, PartialEq)]
pub struct BacklogEndpoint {
    pub request: RequestTemplate,
    /// Dot path of the backlog's size.
    pub field: String,
}

/// The `[target]` table: a shop's API, parsed.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(try_from = "RawMapping", into = "RawMapping")]
pub struct Mapping {
    /// Sets up the sale before the run; absent when the target does not allow it.
    pub setup: Option<RequestTemplate>,
    /// A product page view (absent: the scenario's buyers never browse).
    pub view: Option<RequestTemplate>,
    pub order: RequestTemplate,
    /// Absent: the scenario's buyers never pay.
    pub pay: Option<RequestTemplate>,
    /// Absent: the scenario's buyers never cancel.
    pub cancel: Option<RequestTemplate>,
    /// Dot path of the order id in a created order's JSON answer (absent: the shop gives no
    /// ids; acknowledgements are counted by answer).
    pub order_id_field: Option<String>,
    /// Header that carries the simulated client IP (empty: none).
    pub ip_header: String,
    /// Header that carries each order attempt's idempotency key (empty: none is sent; the
    /// oracle then sorts orders by id alone).
    pub idempotency_header: String,
    pub outcomes: Vec<OutcomeRule>,
    /// The largest share of answers no rule may classify (0..=1) before the run fails, when
    /// the table sets one (see [`Mapping::unclassified_bound`]).
    pub max_unclassified: Option<f64>,
    /// The shop's own oracle endpoint (`--oracle-http` overrides it).
    pub oracle: Option<OracleSpec>,
    /// Asynchronous orders: how a pending order's decision is asked for (required when a rule
    /// answers `pending`).
    pub poll: Option<PollSpec>,
    /// After the last buyer: the settle window and the backlog signal.
    pub settle: Option<SettleSpec>,
}

/// The default bound on unclassified answers: 1 % of all answers.
pub const MAX_UNCLASSIFIED: f64 = 0.01;

impl Mapping {
    /// The largest share of answers no rule may classify: `max_unclassified`, or 1 %.
    pub fn unclassified_bound(&self) -> f64 {
        self.max_unclassified.unwrap_or(MAX_UNCLASSIFIED)
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
            view: Some(tpl(Method::Get, "/api/items/{item_id}", None)),
            order: tpl(
                Method::Post,
                "/api/orders",
                Some(
                    r#"{"item_id": {item_id}, "user_id": "{user_id}", "qty": {qty}, "device_id": "{device_id}"}"#,
                ),
            ),
            pay: Some(tpl(Method::Post, "/api/orders/{order_id}/pay", None)),
            cancel: Some(tpl(Method::Post, "/api/orders/{order_id}/cancel", None)),
            order_id_field: Some("order_id".into()),
            ip_header: raw::forwarded_for(),
            idempotency_header: raw::idempotency_key(),
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
            max_unclassified: None,
            oracle: None,
            poll: None,
            settle: None,
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
        m.pay.as_mut().unwrap().method = "FETCH".into();
        assert!(Mapping::try_from(m)
            .unwrap_err()
            .to_string()
            .contains("target.pay.method"));
        let mut m = RawMapping::from(Mapping::default());
        m.outcomes[0].outcome = "unclassified".into();
        assert!(Mapping::try_from(m).is_err(), "the harness's own answer");
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

    #[test]
    fn the_idempotency_header_is_a_header_name_or_empty() {
        let mut m = RawMapping::from(Mapping::default());
        assert_eq!(m.idempotency_header, "Idempotency-Key");
        m.idempotency_header = String::new();
        assert_eq!(Mapping::try_from(m).unwrap().idempotency_header, "");
        let mut m = RawMapping::from(Mapping::default());
        m.idempotency_header = "Idem Key:".into();
        let e = Mapping::try_from(m).unwrap_err().to_string();
        assert!(e.contains("target.idempotency_header"), "{e}");
    }

    #[test]
    fn paths_that_leave_the_target_are_refused_when_read() {
        for bad in [
            "//evil.example/x",
            "http://evil.example/x",
            "evil",
            "/\\evil.example",
        ] {
            let mut m = RawMapping::from(Mapping::default());
            m.order.path = bad.into();
            let e = Mapping::try_from(m).unwrap_err().to_string();
            assert!(e.contains("target.order.path"), "{bad}: {e}");
        }
    }

    #[test]
    fn placeholders_are_checked_against_where_they_are_used() {
        let mut m = RawMapping::from(Mapping::default());
        m.order.body = Some(r#"{"u": "{usr_id}"}"#.into());
        let e = Mapping::try_from(m).unwrap_err().to_string();
        assert!(
            e.contains("target.order.body") && e.contains("{usr_id}") && e.contains("{user_id}"),
            "{e}"
        );
        let mut m = RawMapping::from(Mapping::default());
        m.setup.as_mut().unwrap().path = "/reset/{user_id}".into();
        let e = Mapping::try_from(m).unwrap_err().to_string();
        assert!(e.contains("target.setup.path"), "{e}");
        let mut m = RawMapping::from(Mapping::default());
        m.order_id_field = None;
        let e = Mapping::try_from(m).unwrap_err().to_string();
        assert!(
            e.contains("target.pay.path") && e.contains("target.order_id_field"),
            "{e}"
        );
    }

    fn with_poll(outcomes: &[(&str, &str)]) -> RawMapping {
        let mut m = RawMapping::from(Mapping::default());
        m.outcomes[0].outcome = "pending".into();
        m.poll = Some(RawPoll {
            method: "GET".into(),
            path: "/api/orders/{order_id}".into(),
            body: None,
            interval_ms: 250,
            max_wait_ms: 30_000,
            outcomes: outcomes
                .iter()
                .map(|(status, outcome)| RawRule {
                    status: vec![status.to_string()],
                    field: None,
                    equals: None,
                    outcome: outcome.to_string(),
                })
                .collect(),
        });
        m
    }

    #[test]
    fn a_pending_outcome_needs_a_poll_step_that_can_decide() {
        let mut m = with_poll(&[("200", "created")]);
        m.poll = None;
        let e = Mapping::try_from(m).unwrap_err().to_string();
        assert!(
            e.contains("target.outcomes[0].outcome") && e.contains("target.poll"),
            "{e}"
        );
        let e = Mapping::try_from(with_poll(&[("202", "pending")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("target.poll.outcomes"), "{e}");
        let e = Mapping::try_from(with_poll(&[("200", "won")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("target.poll.outcomes[0].outcome"), "{e}");
        let mut m = with_poll(&[("200", "created")]);
        m.poll.as_mut().unwrap().interval_ms = 60_000;
        let e = Mapping::try_from(m).unwrap_err().to_string();
        assert!(e.contains("target.poll.interval_ms"), "{e}");
        let mut m = with_poll(&[("200", "created")]);
        m.order_id_field = None;
        m.pay = None;
        m.cancel = None;
        let e = Mapping::try_from(m).unwrap_err().to_string();
        assert!(
            e.contains("target.poll.path") && e.contains("target.order_id_field"),
            "{e}"
        );
        let ok = Mapping::try_from(with_poll(&[("202", "pending"), ("200", "created")])).unwrap();
        assert_eq!(
            RawMapping::from(ok.clone()),
            with_poll(&[("202", "pending"), ("200", "created")])
        );
        assert_eq!(
            ok.poll.unwrap().interval,
            std::time::Duration::from_millis(250)
        );
    }

    #[test]
    fn the_settle_table_names_its_fields() {
        let settle = |settle_s, path: &str, field: &str| {
            let mut m = RawMapping::from(Mapping::default());
            m.settle = Some(RawSettle {
                settle_s,
                backlog: Some(RawBacklog {
                    method: "GET".into(),
                    path: path.into(),
                    field: field.into(),
                }),
            });
            Mapping::try_from(m)
        };
        let ok = settle(Some(2.0), "/queue/{item_id}", "queue.depth").unwrap();
        assert_eq!(ok.settle.as_ref().unwrap().settle_s, Some(2.0));
        assert_eq!(Mapping::try_from(RawMapping::from(ok.clone())), Ok(ok));
        let e = settle(Some(0.0), "/q", "n").unwrap_err().to_string();
        assert!(e.contains("target.settle.settle_s"), "{e}");
        let e = settle(None, "/q/{user_id}", "n").unwrap_err().to_string();
        assert!(e.contains("target.settle.backlog.path"), "{e}");
        let e = settle(None, "/q", "a..b").unwrap_err().to_string();
        assert!(e.contains("target.settle.backlog.field"), "{e}");
        let e = settle(None, "http://x/q", "n").unwrap_err().to_string();
        assert!(e.contains("target.settle.backlog.path"), "{e}");
    }
}
