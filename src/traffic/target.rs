//! The shop under test at run time: each action becomes an HTTP request built from the
//! [`Mapping`]'s templates, and each answer (or transport failure) becomes an [`Answer`].

use super::mapping::{Mapping, Method, OutcomeRule, RequestTemplate};
use super::recorder::{Answer, Kind};
use super::schedule::BuyerPlan;
use goose::prelude::GooseMethod;

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
    pub method: Method,
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
            Method::Get => reqwest::Method::GET,
            Method::Post => reqwest::Method::POST,
            Method::Put => reqwest::Method::PUT,
            Method::Patch => reqwest::Method::PATCH,
            Method::Delete => reqwest::Method::DELETE,
        }
    }

    /// The method for a goose request.
    pub fn goose_method(&self) -> GooseMethod {
        match self.method {
            Method::Get => GooseMethod::Get,
            Method::Post => GooseMethod::Post,
            Method::Put => GooseMethod::Put,
            Method::Patch => GooseMethod::Patch,
            Method::Delete => GooseMethod::Delete,
        }
    }
}

fn json_escape(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted[1..quoted.len() - 1].to_string()
}

/// The value at a dot path of a JSON answer, as text: a string as it is, anything else as JSON.
fn field(v: &serde_json::Value, path: &str) -> Option<String> {
    let v = path.split('.').try_fold(v, |v, k| v.get(k))?;
    Some(
        v.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| v.to_string()),
    )
}

/// Whether `rule` applies to an answer with this status and (parsed, if JSON) body.
fn applies(rule: &OutcomeRule, status: u16, json: Option<&serde_json::Value>) -> bool {
    rule.status.iter().any(|p| p.matches(status))
        && rule.field.as_ref().is_none_or(|f| {
            json.and_then(|j| field(j, &f.path)).as_deref() == Some(f.equals.as_str())
        })
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

    /// `t` filled in for buyer `b` (with its IP header) or, without a buyer, for the sale.
    fn request(
        &self,
        t: &RequestTemplate,
        b: Option<&BuyerPlan>,
        order_id: Option<&str>,
    ) -> Prepared {
        let headers = b
            .filter(|_| !self.mapping.ip_header.is_empty())
            .map(|b| (self.mapping.ip_header.clone(), b.ip.clone()))
            .into_iter()
            .collect();
        Prepared {
            method: t.method,
            path: self.fill(&t.path, b, order_id),
            body: t.body.as_ref().map(|body| self.fill(body, b, order_id)),
            headers,
        }
    }

    /// The request for `action` by buyer `b`.
    pub fn prepare(&self, action: &Action, b: &BuyerPlan) -> Prepared {
        let m = &self.mapping;
        let (t, order_id) = match action {
            Action::View => (&m.view, None),
            Action::Order => (&m.order, None),
            Action::Pay(id) => (&m.pay, Some(id.as_str())),
            Action::Cancel(id) => (&m.cancel, Some(id.as_str())),
        };
        self.request(t, Some(b), order_id)
    }

    /// The set-up request, if the mapping has one.
    pub fn setup_request(&self) -> Option<Prepared> {
        let t = self.mapping.setup.as_ref()?;
        Some(self.request(t, None, None))
    }

    /// Classifies a status and body; returns the outcome and, for a created order, its id.
    pub fn classify(&self, kind: Kind, status: u16, body: &str) -> (Answer, Option<String>) {
        let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
        let answer = self
            .mapping
            .outcomes
            .iter()
            .find(|r| applies(r, status, json.as_ref()))
            .map(|r| r.outcome.answer())
            .unwrap_or(if status >= 500 {
                Answer::ServerError
            } else {
                Answer::Invalid
            });
        if kind != Kind::Order || answer != Answer::Created {
            return (answer, None);
        }
        // A "created" answer without an order id is not an acknowledgement we can audit.
        match json.and_then(|j| field(&j, &self.mapping.order_id_field)) {
            Some(id) => (answer, Some(id)),
            None => (Answer::Invalid, None),
        }
    }

    /// Reads a full response (the body too: latency is full response time) and classifies it.
    pub async fn read(&self, kind: Kind, resp: reqwest::Response) -> (Answer, Option<String>) {
        let status = resp.status().as_u16();
        match resp.text().await {
            Ok(body) => self.classify(kind, status, &body),
            Err(e) => (transport_answer(&e), None),
        }
    }
}

/// A request that got no HTTP answer.
pub fn transport_answer(e: &reqwest::Error) -> Answer {
    if e.is_timeout() {
        Answer::Timeout
    } else if e.is_connect() || e.is_request() {
        Answer::ConnectError
    } else {
        Answer::ServerError
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
}
