//! The `[target]` table as written (strings, unknown fields rejected), and the conversions
//! both ways: [`RawMapping`] → [`Mapping`] runs the checks (`check`, in file order), and a
//! [`Mapping`] writes back the table it was read from.

use super::check::{self, Step};
use super::{
    Body, Login, LoginWhen, Mapping, MappingError, OutcomeRule, RequestTemplate, LOGIN_CONCURRENCY,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod asynchronous;
use asynchronous::outcomes_pending;
#[cfg(test)]
pub use asynchronous::{RawBacklog, RawBacklogSignal};
pub use asynchronous::{RawPoll, RawSettle, MAX_POLL_WAIT_MS, MAX_SETTLE_S};

/// One action's request as written.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct RawRequest {
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    pub path: String,
    /// JSON body template (sent with `content-type: application/json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Form body: name → value template (sent `application/x-www-form-urlencoded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<BTreeMap<String, String>>,
    /// Header name → value template.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// This request's own answer rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<Vec<RawRule>>,
    /// Placeholder name → `data.token` (a JSON dot path) or `header:NAME`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extract: BTreeMap<String, String>,
}

/// `[target.login]` as written: a request plus when and how many at once.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct RawLogin {
    pub method: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<Vec<RawRule>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extract: BTreeMap<String, String>,
    /// `before_sale` (default) or `on_arrival`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// Logins at once before the sale (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u64>,
}

impl RawLogin {
    /// The request part.
    fn request(&self) -> RawRequest {
        RawRequest {
            method: self.method.clone(),
            path: self.path.clone(),
            body: self.body.clone(),
            form: self.form.clone(),
            headers: self.headers.clone(),
            outcomes: self.outcomes.clone(),
            extract: self.extract.clone(),
        }
    }
}

/// `setup` as written: one request table, or a list of them sent in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RawSetup {
    One(RawRequest),
    Many(Vec<RawRequest>),
}

impl<'de> Deserialize<'de> for RawSetup {
    /// A table or an array, each read with [`RawRequest`]'s own errors (an untagged enum
    /// would only say that nothing matched).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawSetup;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a request table or a list of request tables")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, a: A) -> Result<RawSetup, A::Error> {
                RawRequest::deserialize(serde::de::value::MapAccessDeserializer::new(a))
                    .map(RawSetup::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, a: A) -> Result<RawSetup, A::Error> {
                Vec::<RawRequest>::deserialize(serde::de::value::SeqAccessDeserializer::new(a))
                    .map(RawSetup::Many)
            }
        }
        d.deserialize_any(V)
    }
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
    pub setup: Option<RawSetup>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<RawLogin>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<RawRequest>,
    pub order: RawRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pay: Option<RawRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<RawRequest>,
    /// Headers on every request (a request's own header of the same name wins).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
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
    /// Seconds within which the shop never releases an unpaid order on its own (undeclared:
    /// unknown, never assumed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_window_s: Option<u64>,
    /// The same as a duration with its unit (`"1500ms"`, `"15m"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payment_window: Option<String>,
    /// Asynchronous orders: how to ask for a pending order's decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll: Option<RawPoll>,
    /// After the last buyer: the settle window and the shop's backlog signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<RawSettle>,
    /// More names whose values are secret (masked in reports, samples and shard files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secret_fields: Vec<String>,
}

impl super::Mapping {
    /// The payment window the mapped shop declares (after it an unpaid order may be released
    /// by the shop): `payment_window` (or `--payment-window`), and for a mapping with no `pay`
    /// request [`Duration::MAX`]: its orders need no payment, so none is ever released unpaid.
    /// `None`: a shop with a payment step that declared no window, which is unknown.
    ///
    /// [`Duration::MAX`]: std::time::Duration::MAX
    pub fn declared_payment_window(&self) -> Option<std::time::Duration> {
        self.payment_window
            .or_else(|| self.pay.is_none().then_some(std::time::Duration::MAX))
    }
}

/// The payment window `payment_window_s` (seconds) or `payment_window` (a duration) declares:
/// one of them, above 0 and at most [`super::MAX_PAYMENT_WINDOW_S`].
fn payment_window(
    seconds: Option<u64>,
    written: Option<&str>,
) -> Result<Option<std::time::Duration>, MappingError> {
    let window = match (seconds, written) {
        (Some(_), Some(_)) => return Err(MappingError::PaymentWindowTwice),
        (Some(s), None) => std::time::Duration::from_secs(s),
        (None, Some(w)) => {
            crate::duration::parse(w).map_err(|why| MappingError::PaymentWindowDuration { why })?
        }
        (None, None) => return Ok(None),
    };
    let max = std::time::Duration::from_secs(super::MAX_PAYMENT_WINDOW_S);
    if window.is_zero() || window > max {
        return Err(MappingError::PaymentWindow {
            got: crate::duration::shown(window),
        });
    }
    Ok(Some(window))
}

pub(super) fn forwarded_for() -> String {
    "X-Forwarded-For".into()
}

pub(super) fn idempotency_key() -> String {
    "Idempotency-Key".into()
}

impl TryFrom<RawMapping> for Mapping {
    type Error = MappingError;

    /// Checks in file order: the order id field and the harness's headers, each action's
    /// request (login, then the buyers' actions, set-up last), the rules, the bound and the
    /// oracle.
    fn try_from(raw: RawMapping) -> Result<Mapping, MappingError> {
        if let Some(f) = raw.order_id_field.as_ref().filter(|f| !check::dot_path(f)) {
            return Err(MappingError::OrderIdField { got: f.clone() });
        }
        let header = &raw.idempotency_header;
        if !header.is_empty() && reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_err()
        {
            return Err(MappingError::IdempotencyHeader {
                got: header.clone(),
            });
        }
        let cx = check::Context {
            with_ids: raw.order_id_field.is_some(),
            harness_headers: [raw.ip_header.as_str(), raw.idempotency_header.as_str()],
        };
        let headers = cx.headers("headers", &raw.headers)?;
        let login = raw.login.map(|l| parse_login(&cx, l)).transpose()?;
        let one = |r: Option<RawRequest>, name: &str| {
            r.map(|r| cx.request(Step::Action(name.into()), r))
                .transpose()
        };
        let view = one(raw.view, "view")?;
        let order = cx.request(Step::Action("order".into()), raw.order)?;
        let pay = one(raw.pay, "pay")?;
        let cancel = one(raw.cancel, "cancel")?;
        let setup = match raw.setup {
            None => Vec::new(),
            Some(RawSetup::One(r)) => vec![cx.request(Step::Setup(None), r)?],
            Some(RawSetup::Many(list)) if list.is_empty() => return Err(MappingError::EmptySetup),
            Some(RawSetup::Many(list)) => list
                .into_iter()
                .enumerate()
                .map(|(i, r)| cx.request(Step::Setup(Some(i)), r))
                .collect::<Result<_, _>>()?,
        };
        let outcomes = check::rules("outcomes", raw.outcomes)?;
        if let Some(got) = raw.max_unclassified.filter(|m| !(0.0..=1.0).contains(m)) {
            return Err(MappingError::MaxUnclassified { got });
        }
        let payment_window = payment_window(raw.payment_window_s, raw.payment_window.as_deref())?;
        let poll = raw.poll.map(|p| p.parse(&cx)).transpose()?;
        if let (Some(rule), None) = (outcomes_pending(&outcomes), &poll) {
            return Err(MappingError::PendingWithoutPoll { rule });
        }
        let settle = raw.settle.map(|st| st.parse(&cx)).transpose()?;
        if let Some(i) = raw.secret_fields.iter().position(|f| f.trim().is_empty()) {
            return Err(MappingError::SecretField { index: i });
        }
        let mapping = Mapping {
            setup,
            login,
            view,
            order,
            pay,
            cancel,
            headers,
            order_id_field: raw.order_id_field,
            ip_header: raw.ip_header,
            idempotency_header: raw.idempotency_header,
            outcomes,
            max_unclassified: raw.max_unclassified,
            oracle: raw.oracle.map(check::oracle).transpose()?,
            payment_window,
            poll,
            settle,
            secret_fields: raw.secret_fields,
        };
        check::extract_names(&mapping)?;
        Ok(mapping)
    }
}

/// `[target.login]`, checked.
fn parse_login(cx: &check::Context, l: RawLogin) -> Result<Login, MappingError> {
    let when = match l.when.as_deref() {
        None => LoginWhen::default(),
        Some(w) => LoginWhen::ALL
            .into_iter()
            .find(|v| v.as_str() == w)
            .ok_or_else(|| MappingError::LoginWhen { got: w.into() })?,
    };
    let concurrency = match l.concurrency {
        None => LOGIN_CONCURRENCY,
        Some(c) if (1..=10_000).contains(&c) => c as usize,
        Some(got) => return Err(MappingError::LoginConcurrency { got }),
    };
    Ok(Login {
        request: cx.request(Step::Action("login".into()), l.request())?,
        when,
        concurrency,
    })
}

impl From<RequestTemplate> for RawRequest {
    fn from(t: RequestTemplate) -> Self {
        let (body, form) = match t.body {
            None => (None, None),
            Some(Body::Json(b)) => (Some(b), None),
            Some(Body::Form(pairs)) => (None, Some(pairs.into_iter().collect())),
        };
        RawRequest {
            method: t.method.as_str().into(),
            path: t.path,
            body,
            form,
            headers: t.headers.into_iter().collect(),
            outcomes: t
                .outcomes
                .map(|rules| rules.into_iter().map(Into::into).collect()),
            extract: t
                .extract
                .into_iter()
                .map(|e| (e.name, e.from.to_string()))
                .collect(),
        }
    }
}

impl From<Login> for RawLogin {
    fn from(l: Login) -> Self {
        let r = RawRequest::from(l.request);
        RawLogin {
            method: r.method,
            path: r.path,
            body: r.body,
            form: r.form,
            headers: r.headers,
            outcomes: r.outcomes,
            extract: r.extract,
            when: Some(l.when.as_str().into()),
            concurrency: Some(l.concurrency as u64),
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
        let mut setup: Vec<RawRequest> = m.setup.into_iter().map(Into::into).collect();
        RawMapping {
            setup: match setup.len() {
                0 => None,
                1 => setup.pop().map(RawSetup::One),
                _ => Some(RawSetup::Many(setup)),
            },
            login: m.login.map(Into::into),
            view: m.view.map(Into::into),
            order: m.order.into(),
            pay: m.pay.map(Into::into),
            cancel: m.cancel.map(Into::into),
            headers: m.headers.into_iter().collect(),
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
            payment_window_s: m
                .payment_window
                .filter(|w| w.subsec_nanos() == 0)
                .map(|w| w.as_secs()),
            payment_window: m
                .payment_window
                .filter(|w| w.subsec_nanos() != 0)
                .map(crate::duration::shown),
            poll: m.poll.map(RawPoll::from),
            settle: m.settle.map(RawSettle::from),
            secret_fields: m.secret_fields,
        }
    }
}
