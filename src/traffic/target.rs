//! The shop under test at run time: each action becomes an HTTP request built from the
//! [`Mapping`]'s templates, and each answer (or transport failure) becomes an [`Answer`], with
//! the reason (which rule matched, or none).
//!
//! Every URL is the target's base URL plus a template's path (checked when the scenario was
//! read, its values percent-encoded), and is checked again to name the target's own host and
//! port before it is used. No client of the harness follows a redirect: a 3xx is an answer.

use super::mapping::template::{self, Encoding, Placeholder};
use super::mapping::{Mapping, Method, OutcomeRule, RequestTemplate};
use super::recorder::{Answer, Kind};
use super::schedule::BuyerPlan;
use reqwest::Url;
use std::borrow::Cow;
use std::time::Duration;

/// What a buyer asks the shop to do. An order carries its attempt's idempotency key (sent
/// in the mapping's `idempotency_header`); pay, cancel and a pending order's poll carry the
/// order's id when it has one.
#[derive(Debug, Clone)]
pub enum Action {
    View,
    Order(Option<String>),
    Pay(Option<String>),
    Cancel(Option<String>),
    /// Asks for a pending order's decision (`[target.poll]`).
    Poll(Option<String>),
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

impl Sale {
    /// The scenario's item.
    pub fn of(s: &super::Scenario) -> Self {
        Sale {
            item_id: s.item.id,
            stock: s.item.stock,
            purchase_limit: s.item.purchase_limit,
            name: s.item.name.clone(),
            price_cents: s.item.price_cents,
        }
    }
}

/// A shop at a base URL with its mapping.
#[derive(Debug, Clone)]
pub struct Target {
    pub base_url: String,
    pub mapping: Mapping,
    pub sale: Sale,
}

/// The shops a plan is fired at: buyer i (its index in the seeded schedule) goes to shop
/// i mod K, so a seeded run sends every shop the same requests each time, and a shard
/// (`--shard`) sends each of its buyers where the single process would.
#[derive(Debug, Clone)]
pub struct Targets(std::sync::Arc<[std::sync::Arc<Target>]>);

impl Targets {
    /// One shop: every buyer goes to it.
    pub fn one(target: std::sync::Arc<Target>) -> Self {
        Targets(vec![target].into())
    }

    /// Several shops with one API (`None` when `targets` is empty).
    pub fn spread(targets: Vec<std::sync::Arc<Target>>) -> Option<Self> {
        (!targets.is_empty()).then(|| Targets(targets.into()))
    }

    /// The shop buyer `b` goes to.
    pub fn of(&self, b: &BuyerPlan) -> &std::sync::Arc<Target> {
        &self.0[b.index % self.0.len()]
    }

    /// The first shop (the one that sets the sale up, and whose mapping reads the answers).
    pub fn first(&self) -> &std::sync::Arc<Target> {
        &self.0[0]
    }

    /// How many shops.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never: there is always one shop.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
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

    /// `POST /api/orders`.
    pub fn line(&self) -> String {
        format!("{} {}", self.method.as_str(), self.path)
    }
}

/// A client for the harness's own requests: it follows no redirect (a 3xx is an answer, so
/// a redirect can never take a request to a host the loopback guard did not approve).
pub fn client(timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(256)
        .build()
}

/// The value at a dot path of a JSON answer, as text: a string as it is, anything else as JSON.
pub fn field(v: &serde_json::Value, path: &str) -> Option<String> {
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

/// Why an answer got its outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Why {
    /// `target.outcomes[i]` matched.
    Rule(usize),
    /// No rule matched; the harness's default for this status.
    NoRule,
}

/// A classified answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Classified {
    pub answer: Answer,
    /// A created order's id, when the mapping names a field and the answer has it.
    pub order_id: Option<String>,
    pub why: Why,
}

/// A full answer read and classified; `status` and `body` are kept for samples and `--probe`.
#[derive(Debug, Clone)]
pub struct Read {
    pub classified: Classified,
    /// `None`: no HTTP answer (timeout, connection error).
    pub status: Option<u16>,
    /// The body (a redirect: `Location: ...`).
    pub body: String,
}

impl Read {
    fn failed(answer: Answer) -> Self {
        Read {
            classified: Classified {
                answer,
                order_id: None,
                why: Why::NoRule,
            },
            status: None,
            body: String::new(),
        }
    }

    /// A request that got no HTTP answer.
    pub fn transport(e: &reqwest::Error) -> Self {
        Read::failed(transport_answer(e))
    }

    /// A request that could not be sent at all (recorded as a connection error).
    pub fn transport_failed() -> Self {
        Read::failed(Answer::ConnectError)
    }
}

impl Target {
    fn value(
        &self,
        p: Placeholder,
        b: Option<&BuyerPlan>,
        order_id: Option<&str>,
    ) -> Option<Cow<'_, str>> {
        let s = &self.sale;
        Some(match p {
            Placeholder::ItemId => s.item_id.to_string().into(),
            Placeholder::Stock => s.stock.to_string().into(),
            Placeholder::PurchaseLimit => s.purchase_limit.to_string().into(),
            Placeholder::PriceCents => s.price_cents.to_string().into(),
            Placeholder::Name => Cow::Owned(s.name.clone()),
            Placeholder::Qty => "1".into(),
            Placeholder::UserId => Cow::Owned(b?.user_id.clone()),
            Placeholder::DeviceId => Cow::Owned(b?.device_id.clone()),
            Placeholder::OrderId => Cow::Owned(order_id?.to_string()),
        })
    }

    /// `t` filled in for buyer `b` (with its IP header) or, without a buyer, for the sale.
    fn request(
        &self,
        t: &RequestTemplate,
        b: Option<&BuyerPlan>,
        order_id: Option<&str>,
        key: Option<&str>,
    ) -> Prepared {
        let ip = b
            .filter(|_| !self.mapping.ip_header.is_empty())
            .map(|b| (self.mapping.ip_header.clone(), b.ip.clone()));
        let key = key
            .filter(|_| !self.mapping.idempotency_header.is_empty())
            .map(|k| (self.mapping.idempotency_header.clone(), k.to_string()));
        let headers = ip.into_iter().chain(key).collect();
        let fill = |text: &str, enc| template::expand(text, enc, |p| self.value(p, b, order_id));
        Prepared {
            method: t.method,
            path: fill(&t.path, Encoding::Path),
            body: t.body.as_deref().map(|body| fill(body, Encoding::Json)),
            headers,
        }
    }

    /// The request for `action` by buyer `b`; `None` when the mapping has no such request
    /// (the scenario never asks for one then), or it needs an order id the order lacked.
    pub fn prepare(&self, action: &Action, b: &BuyerPlan) -> Option<Prepared> {
        let m = &self.mapping;
        let (t, order_id, key) = match action {
            Action::View => (m.view.as_ref()?, None, None),
            Action::Order(key) => (&m.order, None, key.as_deref()),
            Action::Pay(id) => (m.pay.as_ref()?, id.as_deref(), None),
            Action::Cancel(id) => (m.cancel.as_ref()?, id.as_deref(), None),
            Action::Poll(id) => (&m.poll.as_ref()?.request, id.as_deref(), None),
        };
        if order_id.is_none() && t.needs_order_id() {
            return None;
        }
        Some(self.request(t, Some(b), order_id, key))
    }

    /// The set-up request, if the mapping has one.
    pub fn setup_request(&self) -> Option<Prepared> {
        let t = self.mapping.setup.as_ref()?;
        Some(self.request(t, None, None, None))
    }

    /// The request that reads the shop's backlog (`[target.settle] backlog`), if any.
    pub fn backlog_request(&self) -> Option<Prepared> {
        let b = self.mapping.settle.as_ref()?.backlog.as_ref()?;
        Some(self.request(&b.request, None, None, None))
    }

    /// The full URL of a prepared request: the base URL plus its path, refused unless it names
    /// the base URL's own scheme, host and port.
    pub fn url(&self, p: &Prepared) -> Result<Url, String> {
        let text = format!("{}{}", self.base_url.trim_end_matches('/'), p.path);
        let url = Url::parse(&text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
        let base = Url::parse(&self.base_url).map_err(|e| e.to_string())?;
        let same = url.scheme() == base.scheme()
            && url.host_str() == base.host_str()
            && url.port_or_known_default() == base.port_or_known_default();
        if same {
            Ok(url)
        } else {
            Err(format!("{text:?} leaves the target {}", self.base_url))
        }
    }

    /// [`Target::url`] on the base URL parsed once (a sender keeps it): the base with the
    /// prepared path (and query) in place of its own, so the scheme, host and port are the
    /// target's by construction, and no host is parsed per request.
    pub fn url_on(base: &Url, p: &Prepared) -> Url {
        let mut url = base.clone();
        let (rest, fragment) = match p.path.split_once('#') {
            Some((rest, f)) => (rest, Some(f)),
            None => (p.path.as_str(), None),
        };
        let (path, query) = match rest.split_once('?') {
            Some((path, q)) => (path, Some(q)),
            None => (rest, None),
        };
        let prefix = base.path().trim_end_matches('/');
        if prefix.is_empty() {
            url.set_path(path);
        } else {
            url.set_path(&format!("{prefix}{path}"));
        }
        url.set_query(query);
        url.set_fragment(fragment);
        url
    }

    /// Classifies a status and body: the first rule that matches (a poll's: the rules of
    /// `target.poll.outcomes`), else `unclassified` (2xx), `redirect` (3xx), `unauthorized`
    /// (401, 403), `invalid` (other 4xx) or `server_error` (5xx). A `created` or `pending`
    /// order (and a poll's `created` decision) carries its id when the mapping names the field
    /// and the answer has it.
    pub fn classify(&self, kind: Kind, status: u16, body: &str) -> Classified {
        let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
        let rules = match (kind, &self.mapping.poll) {
            (Kind::Poll, Some(p)) => p.outcomes.as_slice(),
            (Kind::Poll, None) => &[],
            _ => self.mapping.outcomes.as_slice(),
        };
        let matched = rules.iter().position(|r| applies(r, status, json.as_ref()));
        let (answer, why) = match matched {
            Some(i) => (rules[i].outcome.answer(), Why::Rule(i)),
            None => (
                match status {
                    401 | 403 => Answer::Unauthorized,
                    200..=299 => Answer::Unclassified,
                    300..=399 => Answer::Redirect,
                    400..=499 => Answer::Invalid,
                    _ => Answer::ServerError,
                },
                Why::NoRule,
            ),
        };
        let carries_id = matches!(
            (kind, answer),
            (Kind::Order, Answer::Created | Answer::Pending) | (Kind::Poll, Answer::Created)
        );
        let order_id = carries_id
            .then(|| {
                let path = self.mapping.order_id_field.as_ref()?;
                field(json.as_ref()?, path)
            })
            .flatten();
        Classified {
            answer,
            order_id,
            why,
        }
    }

    /// Reads a full response (the body too: latency is full response time) and classifies it.
    pub async fn read(&self, kind: Kind, resp: reqwest::Response) -> Read {
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get(reqwest::header::LOCATION)
            .map(|l| format!("Location: {}", String::from_utf8_lossy(l.as_bytes())));
        match resp.text().await {
            Ok(body) => Read {
                classified: self.classify(kind, status, &body),
                status: Some(status),
                body: location.unwrap_or(body),
            },
            Err(e) => Read::transport(&e),
        }
    }

    /// Sends `p` on `client` (a harness client: no redirects) and reads the answer.
    pub async fn send(&self, client: &reqwest::Client, kind: Kind, p: &Prepared) -> Read {
        let url = match self.url(p) {
            Ok(u) => u,
            Err(_) => return Read::transport_failed(),
        };
        match p
            .apply(client.request(p.reqwest_method(), url))
            .send()
            .await
        {
            Ok(resp) => self.read(kind, resp).await,
            Err(e) => Read::transport(&e),
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
        let c = t.classify(
            Kind::Order,
            201,
            r#"{"order_id":"7-abc","status":"pending_payment"}"#,
        );
        assert_eq!(
            (c.answer, c.order_id, c.why),
            (Answer::Created, Some("7-abc".into()), Why::Rule(0))
        );
        let answer = |kind, status, body| t.classify(kind, status, body).answer;
        assert_eq!(
            answer(Kind::Order, 409, r#"{"error":"sold_out"}"#),
            Answer::SoldOut
        );
        assert_eq!(
            answer(Kind::Order, 409, r#"{"error":"duplicate"}"#),
            Answer::Duplicate
        );
        assert_eq!(
            answer(Kind::Order, 503, r#"{"error":"busy"}"#),
            Answer::Busy
        );
        assert_eq!(
            answer(Kind::Order, 503, r#"{"error":"not_warmed"}"#),
            Answer::ServerError
        );
        assert_eq!(answer(Kind::Order, 429, ""), Answer::RateLimited);
        assert_eq!(
            answer(Kind::Pay, 409, r#"{"error":"invalid_state"}"#),
            Answer::Rejected
        );
        assert_eq!(answer(Kind::Pay, 200, "{}"), Answer::Ok);
        let c = t.classify(Kind::Order, 201, "not json");
        assert_eq!(
            (c.answer, c.order_id),
            (Answer::Created, None),
            "an acknowledgement without its id is still an acknowledgement"
        );
    }

    #[test]
    fn answers_no_rule_classifies_are_never_invalid() {
        let mut t = target();
        t.mapping
            .outcomes
            .retain(|r| r.outcome.answer() == Answer::SoldOut);
        let answer = |status| t.classify(Kind::Order, status, "{}");
        assert_eq!(answer(200).answer, Answer::Unclassified);
        assert_eq!(answer(200).why, Why::NoRule);
        assert_eq!(answer(307).answer, Answer::Redirect);
        assert_eq!(answer(418).answer, Answer::Invalid);
        assert_eq!(answer(502).answer, Answer::ServerError);
    }

    #[test]
    fn templates_fill_in_escaped_values_and_urls_stay_on_the_target() {
        let t = target();
        let setup = t.setup_request().unwrap();
        assert_eq!(setup.path, "/api/items/7");
        let body: serde_json::Value = serde_json::from_str(setup.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["name"], "tea \"green\"");
        assert_eq!(body["stock"], 10);
        let b = BuyerPlan {
            index: 0,
            user_id: "u/{order_id}".into(),
            device_id: "d".into(),
            ip: "10.0.0.1".into(),
            arrival: Duration::ZERO,
            views: vec![],
            bot: false,
            resubmits: vec![],
            after: crate::traffic::schedule::AfterOrder::Abandon,
            wave: 1,
        };
        let pay = t
            .prepare(&Action::Pay(Some("//evil.example/x".into())), &b)
            .unwrap();
        assert_eq!(pay.path, "/api/orders/%2F%2Fevil.example%2Fx/pay");
        assert_eq!(
            t.url(&pay).unwrap().as_str(),
            "http://127.0.0.1:1/api/orders/%2F%2Fevil.example%2Fx/pay"
        );
        assert!(t.prepare(&Action::Pay(None), &b).is_none(), "no id, no pay");
        for (base, path) in [
            (
                "http://127.0.0.1:1",
                "/api/orders/%2F%2Fevil.example%2Fx/pay",
            ),
            ("http://127.0.0.1:1/", "/api/orders?x=1&y=%3F#top"),
            ("http://127.0.0.1:1/shop/", "/api/./a/../orders"),
            ("http://localhost:8080/shop", "//evil.example/x"),
        ] {
            let mut at = t.clone();
            at.base_url = base.into();
            let p = Prepared {
                path: path.into(),
                ..pay.clone()
            };
            let parsed = Url::parse(base).unwrap();
            assert_eq!(
                Target::url_on(&parsed, &p),
                at.url(&p).unwrap(),
                "{base} {path}"
            );
        }
        let order = t.prepare(&Action::Order(Some("k-1".into())), &b).unwrap();
        let body: serde_json::Value = serde_json::from_str(order.body.as_deref().unwrap()).unwrap();
        assert_eq!(body["user_id"], "u/{order_id}", "never expanded again");
        assert!(order
            .headers
            .contains(&("Idempotency-Key".into(), "k-1".into())));
        let mut quiet = target();
        quiet.mapping.idempotency_header.clear();
        let order = quiet
            .prepare(&Action::Order(Some("k-1".into())), &b)
            .unwrap();
        assert!(
            order.headers.iter().all(|(h, _)| h != "Idempotency-Key"),
            "an empty header name sends none"
        );
    }
}
