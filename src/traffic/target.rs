//! The shop under test as the traffic model sees it: how each action becomes an HTTP request,
//! and how each answer maps to an outcome. The reference shop is the default mapping; a
//! scenario's `[target]` table describes any other shop's API.
//!
//! Templates substitute `{item_id}`, `{user_id}`, `{device_id}`, `{qty}`, `{order_id}`,
//! `{stock}`, `{purchase_limit}`, `{name}` and `{price_cents}`; values are JSON-escaped, so a
//! body template writes the quotes itself: `{"user": "{user_id}"}`.

use super::recorder::{Answer, Kind};
use super::schedule::BuyerPlan;
use goose::prelude::GooseMethod;
use serde::{Deserialize, Serialize};

/// One action's request.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RequestTemplate {
    /// GET, POST, PUT, PATCH or DELETE.
    pub method: String,
    pub path: String,
    /// JSON body template (sent with `content-type: application/json`).
    #[serde(default)]
    pub body: Option<String>,
}

/// A rule mapping an answer to an outcome; the first rule that matches wins.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OutcomeRule {
    /// Status codes this rule applies to; a code like 400 also accepts `"4xx"` ranges.
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

/// The `[target]` table: a shop's API.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// Sets up the sale before the run; absent when the target does not allow it.
    #[serde(default)]
    pub setup: Option<RequestTemplate>,
    pub view: RequestTemplate,
    pub order: RequestTemplate,
    pub pay: RequestTemplate,
    pub cancel: RequestTemplate,
    /// Dot path of the order id in a created order's JSON answer.
    pub order_id_field: String,
    /// Header that carries the simulated client IP (empty: none).
    #[serde(default = "forwarded_for")]
    pub ip_header: String,
    pub outcomes: Vec<OutcomeRule>,
}

fn forwarded_for() -> String {
    "X-Forwarded-For".into()
}

fn tpl(method: &str, path: &str, body: Option<&str>) -> RequestTemplate {
    RequestTemplate {
        method: method.into(),
        path: path.into(),
        body: body.map(str::to_string),
    }
}

fn rule(status: &str, field: Option<(&str, &str)>, outcome: &str) -> OutcomeRule {
    OutcomeRule {
        status: vec![status.into()],
        field: field.map(|(f, _)| f.to_string()),
        equals: field.map(|(_, v)| v.to_string()),
        outcome: outcome.into(),
    }
}

impl Default for Mapping {
    /// The reference shop's API.
    fn default() -> Self {
        Mapping {
            setup: Some(tpl(
                "PUT",
                "/api/items/{item_id}",
                Some(
                    r#"{"stock": {stock}, "name": "{name}", "price_cents": {price_cents}, "purchase_limit": {purchase_limit}}"#,
                ),
            )),
            view: tpl("GET", "/api/items/{item_id}", None),
            order: tpl(
                "POST",
                "/api/orders",
                Some(
                    r#"{"item_id": {item_id}, "user_id": "{user_id}", "qty": {qty}, "device_id": "{device_id}"}"#,
                ),
            ),
            pay: tpl("POST", "/api/orders/{order_id}/pay", None),
            cancel: tpl("POST", "/api/orders/{order_id}/cancel", None),
            order_id_field: "order_id".into(),
            ip_header: forwarded_for(),
            outcomes: vec![
                rule("201", None, "created"),
                rule("2xx", None, "ok"),
                rule("409", Some(("error", "sold_out")), "sold_out"),
                rule("409", Some(("error", "duplicate")), "duplicate"),
                rule("409", Some(("error", "invalid_state")), "rejected"),
                rule("429", None, "rate_limited"),
                rule("503", Some(("error", "busy")), "busy"),
                rule("404", None, "not_found"),
                rule("4xx", None, "invalid"),
                rule("5xx", None, "server_error"),
            ],
        }
    }
}

/// Parses an outcome name of a mapping rule.
pub fn parse_outcome(s: &str) -> Option<Answer> {
    Answer::ALL
        .into_iter()
        .find(|a| a.as_str() == s && !matches!(a, Answer::Timeout | Answer::ConnectError))
}

impl Mapping {
    /// Checks methods and outcome names; the error names the field.
    pub fn validate(&self) -> Result<(), String> {
        let actions = [
            ("view", &self.view),
            ("order", &self.order),
            ("pay", &self.pay),
            ("cancel", &self.cancel),
        ];
        for (name, t) in actions
            .iter()
            .copied()
            .chain(self.setup.as_ref().map(|s| ("setup", s)))
        {
            if parse_method(&t.method).is_none() {
                return Err(format!(
                    "field `target.{name}.method` must be one of GET, POST, PUT, PATCH, DELETE (got {:?})",
                    t.method
                ));
            }
            if !t.path.starts_with('/') {
                return Err(format!(
                    "field `target.{name}.path` must start with '/' (got {:?})",
                    t.path
                ));
            }
        }
        for (i, r) in self.outcomes.iter().enumerate() {
            if parse_outcome(&r.outcome).is_none() {
                let allowed: Vec<&str> = Answer::ALL
                    .iter()
                    .filter(|a| !matches!(a, Answer::Timeout | Answer::ConnectError))
                    .map(|a| a.as_str())
                    .collect();
                return Err(format!(
                    "field `target.outcomes[{i}].outcome` must be one of {} (got {:?})",
                    allowed.join(", "),
                    r.outcome
                ));
            }
            for s in &r.status {
                if status_matches(s, 0).is_none() {
                    return Err(format!(
                        "field `target.outcomes[{i}].status` holds {s:?}: use a code like \"409\" or a class like \"4xx\""
                    ));
                }
            }
            if r.field.is_some() != r.equals.is_some() {
                return Err(format!(
                    "field `target.outcomes[{i}]`: `field` and `equals` go together"
                ));
            }
        }
        Ok(())
    }
}

/// Whether `pattern` ("409" or "4xx") matches `code`; `None` if the pattern is malformed.
fn status_matches(pattern: &str, code: u16) -> Option<bool> {
    if let Some(class) = pattern.strip_suffix("xx") {
        let c: u16 = class.parse().ok().filter(|c| (1..=5).contains(c))?;
        return Some(code / 100 == c);
    }
    let p: u16 = pattern.parse().ok().filter(|p| (100..=599).contains(p))?;
    Some(p == code)
}

fn parse_method(m: &str) -> Option<GooseMethod> {
    Some(match m.to_ascii_uppercase().as_str() {
        "GET" => GooseMethod::Get,
        "POST" => GooseMethod::Post,
        "PUT" => GooseMethod::Put,
        "PATCH" => GooseMethod::Patch,
        "DELETE" => GooseMethod::Delete,
        _ => return None,
    })
}

/// What a buyer asks the shop to do.
#[derive(Debug, Clone)]
pub enum Action {
    View,
    Order,
    Pay(String),
    Cancel(String),
}

/// The sale being set up, for template values.
#[derive(Debug, Clone)]
pub struct Sale {
    pub item_id: i64,
    pub stock: i64,
    pub purchase_limit: i64,
    pub name: String,
    pub price_cents: i64,
}

/// A shop at a base URL with its mapping.
#[derive(Debug, Clone)]
pub struct Target {
    pub base_url: String,
    pub mapping: Mapping,
    pub sale: Sale,
}

/// A request ready to send.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub method: GooseMethod,
    pub path: String,
    pub body: Option<String>,
    pub headers: Vec<(String, String)>,
}

impl Prepared {
    /// Adds body and headers to a request builder.
    pub fn apply(&self, mut rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (k, v) in &self.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        if let Some(body) = &self.body {
            rb = rb
                .header("content-type", "application/json")
                .body(body.clone());
        }
        rb
    }

    /// The method for a plain reqwest client.
    pub fn reqwest_method(&self) -> reqwest::Method {
        match self.method {
            GooseMethod::Get => reqwest::Method::GET,
            GooseMethod::Put => reqwest::Method::PUT,
            GooseMethod::Patch => reqwest::Method::PATCH,
            GooseMethod::Delete => reqwest::Method::DELETE,
            _ => reqwest::Method::POST,
        }
    }
}

fn json_escape(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted[1..quoted.len() - 1].to_string()
}

fn field<'a>(v: &'a serde_json::Value, path: &str) -> Option<&'a serde_json::Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

impl Target {
    fn fill(&self, template: &str, b: Option<&BuyerPlan>, order_id: Option<&str>) -> String {
        let s = &self.sale;
        let mut out = template
            .replace("{item_id}", &s.item_id.to_string())
            .replace("{stock}", &s.stock.to_string())
            .replace("{purchase_limit}", &s.purchase_limit.to_string())
            .replace("{price_cents}", &s.price_cents.to_string())
            .replace("{name}", &json_escape(&s.name))
            .replace("{qty}", "1");
        if let Some(b) = b {
            out = out
                .replace("{user_id}", &json_escape(&b.user_id))
                .replace("{device_id}", &json_escape(&b.device_id));
        }
        if let Some(id) = order_id {
            out = out.replace("{order_id}", &json_escape(id));
        }
        out
    }

    fn template(&self, action: &Action) -> &RequestTemplate {
        match action {
            Action::View => &self.mapping.view,
            Action::Order => &self.mapping.order,
            Action::Pay(_) => &self.mapping.pay,
            Action::Cancel(_) => &self.mapping.cancel,
        }
    }

    /// The request for `action` by buyer `b`.
    pub fn prepare(&self, action: &Action, b: &BuyerPlan) -> Prepared {
        let order_id = match action {
            Action::Pay(id) | Action::Cancel(id) => Some(id.as_str()),
            _ => None,
        };
        let t = self.template(action);
        let mut headers = Vec::new();
        if !self.mapping.ip_header.is_empty() {
            headers.push((self.mapping.ip_header.clone(), b.ip.clone()));
        }
        Prepared {
            method: parse_method(&t.method).unwrap_or(GooseMethod::Get),
            path: self.fill(&t.path, Some(b), order_id),
            body: t
                .body
                .as_ref()
                .map(|body| self.fill(body, Some(b), order_id)),
            headers,
        }
    }

    /// The set-up request, if the mapping has one.
    pub fn setup_request(&self) -> Option<Prepared> {
        let t = self.mapping.setup.as_ref()?;
        Some(Prepared {
            method: parse_method(&t.method).unwrap_or(GooseMethod::Put),
            path: self.fill(&t.path, None, None),
            body: t.body.as_ref().map(|body| self.fill(body, None, None)),
            headers: Vec::new(),
        })
    }

    /// Classifies a status and body; returns the outcome and, for a created order, its id.
    pub fn classify(&self, kind: Kind, status: u16, body: &str) -> (Answer, Option<String>) {
        let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
        let answer = self
            .mapping
            .outcomes
            .iter()
            .find(|r| {
                r.status
                    .iter()
                    .any(|s| status_matches(s, status) == Some(true))
                    && match (&r.field, &r.equals) {
                        (Some(f), Some(want)) => {
                            json.as_ref()
                                .and_then(|j| field(j, f))
                                .map(|v| {
                                    v.as_str()
                                        .map(str::to_string)
                                        .unwrap_or_else(|| v.to_string())
                                })
                                .as_deref()
                                == Some(want.as_str())
                        }
                        _ => true,
                    }
            })
            .and_then(|r| parse_outcome(&r.outcome))
            .unwrap_or(if status >= 500 {
                Answer::ServerError
            } else {
                Answer::Invalid
            });
        let order_id = (kind == Kind::Order && answer == Answer::Created)
            .then(|| {
                json.as_ref()
                    .and_then(|j| field(j, &self.mapping.order_id_field))
            })
            .flatten()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string())
            });
        // A "created" answer without an order id is not an acknowledgement we can audit.
        if kind == Kind::Order && answer == Answer::Created && order_id.is_none() {
            return (Answer::Invalid, None);
        }
        (answer, order_id)
    }

    /// Reads a full response (the body too: latency is full response time) and classifies it.
    pub async fn read(&self, kind: Kind, resp: reqwest::Response) -> (Answer, Option<String>) {
        let status = resp.status().as_u16();
        match resp.text().await {
            Ok(body) => self.classify(kind, status, &body),
            Err(e) => (super::attack::transport_answer(&e), None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            base_url: "http://127.0.0.1:1".into(),
            mapping: Mapping::default(),
            sale: Sale {
                item_id: 7,
                stock: 10,
                purchase_limit: 1,
                name: "tea \"green\"".into(),
                price_cents: 5,
            },
        }
    }

    #[test]
    fn the_reference_mapping_classifies_the_shop_contract() {
        let t = target();
        assert_eq!(
            t.classify(
                Kind::Order,
                201,
                r#"{"order_id":"7-abc","status":"pending_payment"}"#
            ),
            (Answer::Created, Some("7-abc".into()))
        );
        assert_eq!(
            t.classify(Kind::Order, 409, r#"{"error":"sold_out"}"#).0,
            Answer::SoldOut
        );
        assert_eq!(
            t.classify(Kind::Order, 409, r#"{"error":"duplicate"}"#).0,
            Answer::Duplicate
        );
        assert_eq!(
            t.classify(Kind::Order, 503, r#"{"error":"busy"}"#).0,
            Answer::Busy
        );
        assert_eq!(
            t.classify(Kind::Order, 503, r#"{"error":"not_warmed"}"#).0,
            Answer::ServerError
        );
        assert_eq!(t.classify(Kind::Order, 429, "").0, Answer::RateLimited);
        assert_eq!(
            t.classify(Kind::Pay, 409, r#"{"error":"invalid_state"}"#).0,
            Answer::Rejected
        );
        assert_eq!(t.classify(Kind::Pay, 200, "{}").0, Answer::Ok);
        assert_eq!(
            t.classify(Kind::Order, 201, "not json").0,
            Answer::Invalid,
            "no id, no ack"
        );
    }

    #[test]
    fn templates_fill_in_escaped_values() {
        let t = target();
        let setup = t.setup_request().unwrap();
        assert_eq!(setup.path, "/api/items/7");
        let body: serde_json::Value = serde_json::from_str(setup.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["name"], "tea \"green\"");
        assert_eq!(body["stock"], 10);
    }

    #[test]
    fn a_bad_mapping_names_the_field() {
        let mut m = Mapping::default();
        m.outcomes[0].outcome = "won".into();
        assert!(m
            .validate()
            .unwrap_err()
            .contains("target.outcomes[0].outcome"));
        let mut m = Mapping::default();
        m.pay.method = "FETCH".into();
        assert!(m.validate().unwrap_err().contains("target.pay.method"));
    }
}
