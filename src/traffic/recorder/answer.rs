//! The request kinds a buyer sends and how their answers are classified.

use serde::{Deserialize, Serialize};

/// Kinds of request a buyer sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    View,
    Order,
    Pay,
    Cancel,
    /// A buyer's login on its arrival (`[target.login] when = "on_arrival"`); never an order.
    Login,
    /// An asynchronous order's status request, repeated until the shop decides it
    /// (`[target.poll]`): never counted among the order figures.
    Poll,
}

impl Kind {
    /// All kinds.
    pub const ALL: [Kind; 6] = [
        Kind::View,
        Kind::Order,
        Kind::Pay,
        Kind::Cancel,
        Kind::Login,
        Kind::Poll,
    ];

    /// Report spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Login => "login",
            Kind::View => "view",
            Kind::Order => "order",
            Kind::Pay => "pay",
            Kind::Cancel => "cancel",
            Kind::Poll => "poll",
        }
    }
}

/// How a request was answered, as the client understood it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// 201: an order was created.
    Created,
    /// 200.
    Ok,
    /// Accepted, not decided (e.g. 202 with a ticket): the order is decided later, found by
    /// polling (`[target.poll]`). Never an order attempt's final answer.
    Pending,
    SoldOut,
    Duplicate,
    RateLimited,
    /// 409 on pay/cancel: the order was not in a state that allows it.
    Rejected,
    NotFound,
    /// Another 4xx: the client sent something the shop refused.
    Invalid,
    /// 401 or 403: the shop refused the harness's credentials. An error (BRIEF §4), and the
    /// request did not buy.
    Unauthorized,
    /// A 2xx that no rule of the mapping classifies: the mapping needs a rule for it.
    Unclassified,
    /// A 3xx that no rule classifies. The harness follows no redirect: it records the answer.
    Redirect,
    /// 503 busy: pool exhausted, lock timeout, retries exhausted.
    Busy,
    /// Any other 5xx.
    ServerError,
    /// No answer within the client timeout.
    Timeout,
    /// Could not connect, or the connection broke.
    ConnectError,
    /// Accepted (pending) but never decided within `target.poll.max_wait_ms`: it may or may
    /// not have bought.
    Undecided,
}

impl Answer {
    /// Every answer, in report order.
    pub const ALL: [Answer; 17] = [
        Answer::Created,
        Answer::Ok,
        Answer::Pending,
        Answer::SoldOut,
        Answer::Duplicate,
        Answer::RateLimited,
        Answer::Rejected,
        Answer::NotFound,
        Answer::Invalid,
        Answer::Unauthorized,
        Answer::Unclassified,
        Answer::Redirect,
        Answer::Busy,
        Answer::ServerError,
        Answer::Timeout,
        Answer::ConnectError,
        Answer::Undecided,
    ];

    /// Report spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Created => "created",
            Answer::Ok => "ok",
            Answer::Pending => "pending",
            Answer::SoldOut => "sold_out",
            Answer::Duplicate => "duplicate",
            Answer::RateLimited => "rate_limited",
            Answer::Rejected => "rejected",
            Answer::NotFound => "not_found",
            Answer::Invalid => "invalid",
            Answer::Unauthorized => "unauthorized",
            Answer::Unclassified => "unclassified",
            Answer::Redirect => "redirect",
            Answer::Busy => "busy",
            Answer::ServerError => "server_error",
            Answer::Timeout => "timeout",
            Answer::ConnectError => "connect_error",
            Answer::Undecided => "undecided",
        }
    }

    /// An error in the brief's sense: neither success nor a clean business answer.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Answer::Busy
                | Answer::ServerError
                | Answer::Timeout
                | Answer::ConnectError
                | Answer::Unauthorized
                | Answer::Undecided
        )
    }

    /// An answer no rule of the mapping classified (a 2xx or a 3xx): not an error, but the
    /// run cannot say what the shop meant by it.
    pub fn is_unclassified(self) -> bool {
        matches!(self, Answer::Unclassified | Answer::Redirect)
    }
}

/// What an order answer says about whether its attempt bought (BRIEF §4), Jepsen style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerClass {
    /// Created: the client was told it has an order.
    Acknowledged,
    /// A clean no (sold out, duplicate, rate limited, unauthorized, another 4xx): it did not
    /// buy.
    Refused,
    /// A timeout, a broken connection, a 5xx, or an answer no rule reads: it may or may not
    /// have bought. The oracle looks its key up among the orders.
    Indeterminate,
}

impl AnswerClass {
    /// The class of an order answer: created is acknowledged; a 5xx, a timeout, a broken
    /// connection, an answer the mapping cannot read, or an order accepted and never decided
    /// is indeterminate; the rest (unauthorized too) refused.
    pub fn of(answer: Answer) -> Self {
        match answer {
            Answer::Created => AnswerClass::Acknowledged,
            Answer::Unauthorized => AnswerClass::Refused,
            Answer::Pending => AnswerClass::Indeterminate,
            a if a.is_error() || a.is_unclassified() || a == Answer::Ok => {
                AnswerClass::Indeterminate
            }
            _ => AnswerClass::Refused,
        }
    }
}
