//! The `[target]` table: a shop's API as a scenario file writes it, parsed into typed requests
//! and answer rules when the file is read. The reference shop's API is the default mapping.
//!
//! Templates substitute `{item_id}`, `{user_id}`, `{device_id}`, `{qty}`, `{order_id}`,
//! `{stock}`, `{purchase_limit}`, `{name}` and `{price_cents}` ([`crate::template`]), a `--buyers-csv`
//! file's extra columns (`{email}`) and the values a request extracts from its answer
//! (`extract = { token = "data.token" }` makes `{token}`): in a path a value is
//! percent-encoded, in a body JSON-escaped (a body template writes the quotes itself:
//! `{"user": "{user_id}"}`), in a header its control characters escaped, in a form
//! form-encoded; nothing inserted is expanded again.
//!
//! Every request may carry `headers`, a `form` body instead of a JSON `body`, its own
//! `outcomes` and an `extract` table; `[target] headers` go on every request (a request's own
//! header of the same name wins; a header whose values the request does not have, like a
//! buyer's token on the set-up, is left out). `[target.login]` is a buyer's login
//! ([`Login`]), sent before the sale opens or on the buyer's arrival.
//!
//! - `raw`: the table as written (strings, unknown fields rejected) and the conversions both
//!   ways: serde goes through the raw form, so a mapping echoed into a report reads back the
//!   same.
//! - `check`: the checks that turn a written request into a [`RequestTemplate`] (methods,
//!   paths, headers, form, a body that must be JSON, extract paths, placeholders available
//!   where they are used) and the plan-time check of named placeholders
//!   ([`Mapping::check_names`]).
//! - `error`: [`MappingError`], which names the field at fault.
//! - `raw/asynchronous`: the asynchronous parts, `[target.poll]` (a `pending` order's
//!   decision, [`PollSpec`]) and `[target.settle]` (the settle window and the backlog
//!   endpoint, [`SettleSpec`]).
//! - [`crate::template`]: placeholders, found when the file is read and expanded when a request is
//!   built.
//!
//! Only the order request is required: `view`, `pay` and `cancel` may be left out when the
//! scenario never sends them (the scenario checks that against its shares), and
//! `order_id_field` may be left out when the shop gives no order ids (acknowledgements are then
//! counted by answer).

mod check;
mod error;
mod raw;

use super::recorder::{Answer, Kind};
use crate::shop::error::ErrorCode;
use crate::shop::routes::Route;
pub use error::MappingError;
#[cfg(test)]
pub(crate) use raw::{RawBacklog, RawBacklogSignal, RawPoll, RawSettle, RawSetup};
pub use raw::{RawMapping, RawOracle, RawRequest, RawRule, MAX_POLL_WAIT_MS, MAX_SETTLE_S};
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

/// Which status codes a rule applies to: one code (`"409"`) or a class (`"4xx"`). A class
/// never covers 401 and 403: those are `unauthorized` unless a rule names them by code.
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

    /// Whether `code` is one this pattern names (a class: not 401 or 403).
    pub fn matches(self, code: u16) -> bool {
        match self {
            StatusPattern::Code(p) => p == code,
            StatusPattern::Class(c) => code / 100 == c && !is_unauthorized(code),
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

/// Whether `code` says the shop refused the client's credentials (401, 403).
pub fn is_unauthorized(code: u16) -> bool {
    matches!(code, 401 | 403)
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

/// A request's body template.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// JSON (sent with `content-type: application/json`); it parses as JSON once filled in.
    Json(String),
    /// `application/x-www-form-urlencoded` pairs: each value a template, expanded then
    /// form-encoded.
    Form(Vec<(String, String)>),
}

/// Where an extracted value is read from in an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtractFrom {
    /// A dot path into the JSON body (`data.token`).
    Json(String),
    /// A response header (`header:X-CSRF-Token`).
    Header(String),
}

impl ExtractFrom {
    /// The prefix that reads a header.
    pub const HEADER: &'static str = "header:";
}

impl fmt::Display for ExtractFrom {
    /// As written: `data.token` or `header:X-CSRF-Token`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtractFrom::Json(p) => write!(f, "{p}"),
            ExtractFrom::Header(h) => write!(f, "{}{h}", Self::HEADER),
        }
    }
}

/// One value a request takes from its answer, a placeholder of the buyer's later requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extract {
    /// The placeholder's name (`token` for `{token}`).
    pub name: String,
    pub from: ExtractFrom,
}

/// One action's request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestTemplate {
    pub method: Method,
    /// A path on the target: starts with one `/`, no scheme, no host.
    pub path: String,
    pub body: Option<Body>,
    /// This request's headers (name, value template), sorted by name.
    pub headers: Vec<(String, String)>,
    /// This request's own answer rules (absent: `[target] outcomes`; for a view or a login,
    /// the harness's defaults).
    pub outcomes: Option<Vec<OutcomeRule>>,
    /// Values taken from the answer for the buyer's later requests.
    pub extract: Vec<Extract>,
}

impl RequestTemplate {
    /// `method path`, no body, headers, rules or extracts.
    pub fn new(method: Method, path: &str) -> Self {
        RequestTemplate {
            method,
            path: path.into(),
            body: None,
            headers: Vec::new(),
            outcomes: None,
            extract: Vec::new(),
        }
    }

    /// Whether the path or body names `{order_id}`.
    pub fn needs_order_id(&self) -> bool {
        // Asked for every request a buyer sends: a substring test, no parse. Tokens never
        // overlap (a name holds no brace), so `{order_id}` in the text is that placeholder.
        let token = ORDER_ID_TOKEN;
        self.path.contains(token)
            || match &self.body {
                Some(Body::Json(b)) => b.contains(token),
                Some(Body::Form(pairs)) => pairs.iter().any(|(_, v)| v.contains(token)),
                None => false,
            }
    }
}

/// When buyers log in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoginWhen {
    /// All logins after the set-up and before the sale opens, `concurrency` at a time; their
    /// time is reported apart from the sale's figures.
    #[default]
    BeforeSale,
    /// Each buyer's first request at its arrival (kind `login`).
    OnArrival,
}

impl LoginWhen {
    /// Every value, in the order error messages list them.
    pub const ALL: [LoginWhen; 2] = [LoginWhen::BeforeSale, LoginWhen::OnArrival];

    /// The spelling in `[target.login] when`.
    pub fn as_str(self) -> &'static str {
        match self {
            LoginWhen::BeforeSale => "before_sale",
            LoginWhen::OnArrival => "on_arrival",
        }
    }
}

/// `[target.login]`: a buyer's login, sent once per buyer; what it extracts (and the cookies
/// it sets) goes with the buyer's later requests.
#[derive(Debug, Clone, PartialEq)]
pub struct Login {
    pub request: RequestTemplate,
    pub when: LoginWhen,
    /// Logins in flight at once before the sale (`before_sale`).
    pub concurrency: usize,
}

/// Logins in flight at once before the sale, unless `concurrency` says otherwise.
pub const LOGIN_CONCURRENCY: usize = 16;

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
/// backlog signal.
#[derive(Debug, Clone, PartialEq)]
pub struct SettleSpec {
    pub settle_s: Option<f64>,
    pub backlog: Option<Backlog>,
}

/// Where the shop's backlog (orders acknowledged and not yet written where its oracle reads)
/// is read, or the owner's word that it has none. A run settles on it, and the stock samples
/// are held against the clients' records only at instants it reads 0 (an asynchronous shop's
/// stock lags its acknowledgements while anything waits).
#[derive(Debug, Clone, PartialEq)]
pub enum Backlog {
    /// An endpoint on the target (`{ method, path, field }`).
    Endpoint(BacklogEndpoint),
    /// A `[watch]` gauge of the scenario (`backlog = "watch.NAME"`): its name.
    Gauge(String),
    /// `backlog = "none"`: the shop writes what its oracle reads before it acknowledges.
    None,
}

impl Backlog {
    /// The endpoint, when the signal is one.
    pub fn endpoint(&self) -> Option<&BacklogEndpoint> {
        match self {
            Backlog::Endpoint(e) => Some(e),
            Backlog::Gauge(_) | Backlog::None => None,
        }
    }

    /// The endpoint, when the signal is one (to mask its secrets).
    pub fn endpoint_mut(&mut self) -> Option<&mut BacklogEndpoint> {
        match self {
            Backlog::Endpoint(e) => Some(e),
            Backlog::Gauge(_) | Backlog::None => None,
        }
    }
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
    /// Sets up the sale before the run, in order, each answering 2xx; empty when the target
    /// does not allow it.
    pub setup: Vec<RequestTemplate>,
    /// Each buyer's login (absent: buyers do not log in).
    pub login: Option<Login>,
    /// A product page view (absent: the scenario's buyers never browse).
    pub view: Option<RequestTemplate>,
    pub order: RequestTemplate,
    /// Absent: the scenario's buyers never pay.
    pub pay: Option<RequestTemplate>,
    /// Absent: the scenario's buyers never cancel.
    pub cancel: Option<RequestTemplate>,
    /// `[target] headers`: on every request (a request's own header of the same name wins).
    pub headers: Vec<(String, String)>,
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
    /// How long after an order's send the shop never releases it on its own (its payment
    /// window), when the table (`payment_window = "90s"` or `payment_window_s = 90`) or
    /// `--payment-window` declares one. Undeclared, it is unknown: the clients' evidence never
    /// assumes one.
    pub payment_window: Option<std::time::Duration>,
    /// Asynchronous orders: how a pending order's decision is asked for (required when a rule
    /// answers `pending`).
    pub poll: Option<PollSpec>,
    /// After the last buyer: the settle window and the backlog signal.
    pub settle: Option<SettleSpec>,
    /// `secret_fields`: more names (headers, body fields, CSV columns, query parameters) whose
    /// values are secret, beside the ones [`crate::secret::is_secret_name`] knows.
    pub secret_fields: Vec<String>,
}

/// How long `at_timeout` buyers of a foreign shop that declares no payment window wait before
/// paying: 15 minutes (the post-mortem's). Traffic only: evidence never assumes it.
pub const PAYMENT_WINDOW_S: u64 = 900;

/// The longest payment window a table may declare: one week.
pub const MAX_PAYMENT_WINDOW_S: u64 = 604_800;

/// The default bound on unclassified answers: 1 % of all answers.
pub const MAX_UNCLASSIFIED: f64 = 0.01;

impl Mapping {
    /// The largest share of answers no rule may classify: `max_unclassified`, or 1 %.
    pub fn unclassified_bound(&self) -> f64 {
        self.max_unclassified.unwrap_or(MAX_UNCLASSIFIED)
    }

    /// The request a buyer sends for `kind`, if the mapping has one.
    pub fn request(&self, kind: Kind) -> Option<&RequestTemplate> {
        match kind {
            Kind::Login => self.login.as_ref().map(|l| &l.request),
            Kind::View => self.view.as_ref(),
            Kind::Order => Some(&self.order),
            Kind::Pay => self.pay.as_ref(),
            Kind::Cancel => self.cancel.as_ref(),
            Kind::Poll => self.poll.as_ref().map(|p| &p.request),
        }
    }

    /// The rules that classify `kind`'s answers and the field that holds them: the request's
    /// own `outcomes`, else `[target] outcomes` (a view or a login: none, the harness's
    /// defaults apply; a poll: `target.poll.outcomes`).
    pub fn rules_for(&self, kind: Kind) -> (&[OutcomeRule], String) {
        if let Some(own) = self.request(kind).and_then(|t| t.outcomes.as_deref()) {
            return (own, format!("target.{}.outcomes", kind.as_str()));
        }
        match kind {
            Kind::View | Kind::Login => (&[], String::new()),
            Kind::Poll => match &self.poll {
                Some(p) => (&p.outcomes, "target.poll.outcomes".into()),
                None => (&[], String::new()),
            },
            _ => (&self.outcomes, "target.outcomes".into()),
        }
    }

    /// The names the mapping's requests extract (each a placeholder of later requests).
    pub fn extracted_names(&self) -> Vec<&str> {
        Kind::ALL
            .iter()
            .filter_map(|k| self.request(*k))
            .flat_map(|t| t.extract.iter().map(|e| e.name.as_str()))
            .collect()
    }
}

fn tpl(method: Method, path: &str, body: Option<&str>) -> RequestTemplate {
    RequestTemplate {
        body: body.map(|b| Body::Json(b.to_string())),
        ..RequestTemplate::new(method, path)
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

/// The rule for one of the reference shop's error codes: its status and its `error` field.
fn shop_code(code: ErrorCode, answer: Answer) -> OutcomeRule {
    rule(
        StatusPattern::Code(code.status().as_u16()),
        Some(code.as_str()),
        answer,
    )
}

impl Default for Mapping {
    /// The reference shop's API.
    fn default() -> Self {
        use StatusPattern::{Class, Code};
        Mapping {
            setup: vec![tpl(
                Method::Put,
                &Route::Item.path_with("{item_id}"),
                Some(
                    r#"{"stock": {stock}, "name": "{name}", "price_cents": {price_cents}, "purchase_limit": {purchase_limit}}"#,
                ),
            )],
            login: None,
            view: Some(tpl(Method::Get, &Route::Item.path_with("{item_id}"), None)),
            order: tpl(
                Method::Post,
                Route::Orders.path(),
                Some(
                    r#"{"item_id": {item_id}, "user_id": "{user_id}", "qty": {qty}, "device_id": "{device_id}"}"#,
                ),
            ),
            pay: Some(tpl(Method::Post, &Route::Pay.path_with("{order_id}"), None)),
            cancel: Some(tpl(
                Method::Post,
                &Route::Cancel.path_with("{order_id}"),
                None,
            )),
            headers: Vec::new(),
            order_id_field: Some("order_id".into()),
            ip_header: raw::forwarded_for(),
            idempotency_header: raw::idempotency_key(),
            outcomes: vec![
                rule(Code(201), None, Answer::Created),
                rule(Class(2), None, Answer::Ok),
                shop_code(ErrorCode::SoldOut, Answer::SoldOut),
                shop_code(ErrorCode::Duplicate, Answer::Duplicate),
                shop_code(ErrorCode::InvalidState, Answer::Rejected),
                rule(
                    Code(ErrorCode::RateLimited.status().as_u16()),
                    None,
                    Answer::RateLimited,
                ),
                shop_code(ErrorCode::Busy, Answer::Busy),
                rule(Code(404), None, Answer::NotFound),
                rule(Class(4), None, Answer::Invalid),
                rule(Class(5), None, Answer::ServerError),
            ],
            max_unclassified: None,
            oracle: None,
            payment_window: None,
            poll: None,
            settle: None,
            secret_fields: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
