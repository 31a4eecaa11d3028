//! [`MappingError`]: a `[target]` table that cannot be used, naming the field at fault (a
//! dotted path like `target.login.extract.token`) and what is allowed.

use super::{LoginWhen, Method, Outcome};
use crate::template;

/// A `[target]` table that cannot be used; the message names the field and what is allowed.
/// `action` is the request's place in the table: `order`, `login`, `setup[1]`, ...
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MappingError {
    #[error(
        "field `target.{action}.method` must be one of {} (got {got:?})",
        methods()
    )]
    Method { action: String, got: String },
    #[error(
        "field `target.{action}.path` must be a path on the target starting with a single '/' \
         (no scheme, no host, no backslash), like \"/api/orders\" (got {got:?})"
    )]
    Path { action: String, got: String },
    #[error(
        "field `target.{field}` names {{{name}}}, which is not a placeholder; allowed: the \
         built-in {}{}{}",
        template::names(),
        list("; extracted (target.*.extract)", extracted),
        list("; --buyers-csv columns", columns)
    )]
    UnknownPlaceholder {
        /// The field, after `target.`: `order.body`, `login.headers.Authorization`, ...
        field: String,
        name: String,
        extracted: Vec<String>,
        columns: Vec<String>,
    },
    #[error(
        "field `target.{field}` names {{{name}}}, which only a buyer's request has \
         (the set-up request is sent once, for the sale)"
    )]
    BuyerPlaceholder { field: String, name: String },
    #[error(
        "field `target.{action}.{part}` names {{order_id}}, which {}",
        if matches!(.action.as_str(), "pay" | "cancel" | "poll") {
            "needs `target.order_id_field` (where a created or pending order's JSON answer carries its id)"
        } else {
            "only pay, cancel and poll requests have"
        }
    )]
    OrderId { action: String, part: String },
    #[error(
        "field `target.{field}` names {{{name}}}, which `target.login.extract` only gives the \
         login's answer: the login request itself cannot use it"
    )]
    OwnExtract { field: String, name: String },
    #[error(
        "field `target.{rules}[{rule}].outcome` must be one of {} (got {got:?})",
        outcomes()
    )]
    Outcome {
        rules: String,
        rule: usize,
        got: String,
    },
    #[error("field `target.{rules}[{rule}].status` holds {got:?}: use a code like \"409\" or a class like \"4xx\"")]
    Status {
        rules: String,
        rule: usize,
        got: String,
    },
    #[error("field `target.{rules}[{rule}]`: `field` and `equals` go together")]
    FieldWithoutEquals { rules: String, rule: usize },
    #[error("field `target.order_id_field` must be a dot path like \"data.id\" (got {got:?})")]
    OrderIdField { got: String },
    #[error(
        "field `target.idempotency_header` must be an HTTP header name like \"Idempotency-Key\", \
         or \"\" to send none (got {got:?})"
    )]
    IdempotencyHeader { got: String },
    #[error(
        "field `target.outcomes[{rule}].outcome` is \"pending\" (accepted, not decided), which \
         needs `target.poll`: the request that asks the shop for the order's decision, e.g. \
         [target.poll] method = \"GET\", path = \"/orders/{{order_id}}\", outcomes = [...]"
    )]
    PendingWithoutPoll { rule: usize },
    #[error(
        "field `target.poll.outcomes` must hold a rule that decides the order (an outcome \
         other than \"pending\", e.g. {{ status = [\"200\"], field = \"status\", equals = \
         \"confirmed\", outcome = \"created\" }})"
    )]
    PollNeverDecides,
    #[error(
        "field `target.poll.{field}` must be between 1 and {max} ms, and interval_ms at most \
         max_wait_ms (got {got})",
        max = super::MAX_POLL_WAIT_MS
    )]
    PollTiming { field: &'static str, got: u64 },
    #[error(
        "field `target.settle.settle_s` must be seconds above 0 and at most {max} (got {got})",
        max = super::MAX_SETTLE_S
    )]
    SettleWindow { got: f64 },
    #[error(
        "field `target.{field}` must be given once: with its unit (`{written} = \"3s\"`) or in \
         the older field whose name carries the unit ({field}), not both"
    )]
    GivenTwice {
        field: &'static str,
        written: &'static str,
    },
    #[error(
        "field `target.{field}` names {{{name}}}, which only a buyer's request has (the backlog \
         is read for the whole sale)"
    )]
    BacklogPlaceholder { field: String, name: String },
    #[error(
        "field `target.settle.backlog.field` must be a dot path like \"queue.depth\" (got {got:?})"
    )]
    BacklogField { got: String },
    #[error(
        "field `target.settle.backlog` must be an endpoint table {{ method, path, field }}, \"watch.NAME\" (a [watch] gauge of the scenario) or \"none\" (the shop has no backlog) (got {got:?})"
    )]
    BacklogWord { got: String },
    #[error(
        "field `target.payment_window_s` must be between 1 and {max} seconds (got {got})",
        max = super::MAX_PAYMENT_WINDOW_S
    )]
    PaymentWindow { got: String },
    #[error("field `target.payment_window` must be a duration with its unit, like \"90s\" or \"1500ms\": {why}")]
    PaymentWindowDuration { why: String },
    #[error("`target.payment_window` and `target.payment_window_s` say the same thing: keep one")]
    PaymentWindowTwice,
    #[error("field `target.max_unclassified` must be a share between 0 and 1 (got {got})")]
    MaxUnclassified { got: f64 },
    #[error(
        "field `target.oracle.url` must be a path on the target (\"/stock\") or an http(s) URL \
         (got {got:?})"
    )]
    OracleUrl { got: String },
    #[error("field `target.oracle.{field}` must be a dot path like \"data.sold\" (got {got:?})")]
    OracleField { field: &'static str, got: String },
    #[error("field `target.{field}`: {got:?} is not an HTTP header name (letters, digits, `-`)")]
    HeaderName { field: String, got: String },
    #[error(
        "field `target.{field}` is the header the harness sets itself \
         (target.ip_header / target.idempotency_header): change that field instead"
    )]
    HarnessHeader { field: String },
    #[error(
        "field `target.{field}` holds a control character (CR, LF, ...): a header value is one \
         line of visible text (got {got:?})"
    )]
    HeaderValue { field: String, got: String },
    #[error(
        "fields `target.{action}.body` and `target.{action}.form` exclude each other: a \
         request has one body, JSON (`body`) or form-encoded (`form`)"
    )]
    BodyAndForm { action: String },
    #[error(
        "field `target.{action}.body` must be JSON once its placeholders are filled in (each \
         with 1 here): {expanded} does not parse: {error}"
    )]
    BodyNotJson {
        action: String,
        expanded: String,
        error: String,
    },
    #[error(
        "field `target.{action}.extract.{name}` must be a JSON dot path like \"data.token\" or \
         \"header:NAME\" (got {got:?})"
    )]
    ExtractPath {
        action: String,
        name: String,
        got: String,
    },
    #[error(
        "field `target.{action}.extract.{name}`: {{{name}}} {why}; an extracted name is \
         lower case (a-z, 0-9, _) and not one of {}",
        template::names()
    )]
    ExtractName {
        action: String,
        name: String,
        why: &'static str,
    },
    #[error("field `target.{action}.extract` is for a buyer's requests: the set-up has no buyer")]
    SetupExtract { action: String },
    #[error(
        "field `target.{field}` names {{env:{name}}}, but the environment variable {name} is not \
         set (or is not UTF-8): export it before running oversell"
    )]
    EnvUnset { field: String, name: String },
    #[error("field `target.secret_fields[{index}]` is empty: name a header, field or column")]
    SecretField { index: usize },
    #[error("field `target.login.when` must be one of {} (got {got:?})", whens())]
    LoginWhen { got: String },
    #[error("field `target.login.concurrency` must be 1 to 10000 logins at once (got {got})")]
    LoginConcurrency { got: u64 },
    #[error("field `target.setup` must be a request table or a list of them, not an empty list")]
    EmptySetup,
}

fn methods() -> String {
    let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
    names.join(", ")
}

fn outcomes() -> String {
    let names: Vec<&str> = Outcome::all().map(|o| o.answer().as_str()).collect();
    names.join(", ")
}

fn whens() -> String {
    let names: Vec<&str> = LoginWhen::ALL.iter().map(|w| w.as_str()).collect();
    names.join(", ")
}

/// `; what {a}, {b}`, or nothing when `names` is empty.
fn list(what: &str, names: &[String]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let names: Vec<String> = names.iter().map(|n| format!("{{{n}}}")).collect();
    format!("{what} {}", names.join(", "))
}
