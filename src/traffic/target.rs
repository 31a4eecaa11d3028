//! The shop under test at run time: each action becomes an HTTP request built from the
//! [`Mapping`]'s templates, and each answer (or transport failure) becomes an [`Answer`], with
//! the reason (which rule matched, or none).
//!
//! Every URL is the target's base URL plus a template's path (checked when the scenario was
//! read, its values percent-encoded), and is checked again to name the target's own host and
//! port before it is used. No client of the harness follows a redirect: a 3xx is an answer.
//!
//! A buyer's request is filled in from the buyer's plan and its [`Session`] (CSV columns,
//! extracted values, cookies); a request naming a value the buyer does not have is not sent.
//! Every answer's `Set-Cookie` headers and the values its request extracts come back in
//! [`Classified::learned`] for the buyer's session.

use super::mapping::{is_unauthorized, Body, ExtractFrom, Mapping, OutcomeRule, RequestTemplate};
use super::recorder::{Answer, Kind};
use super::schedule::BuyerPlan;
use super::session::{Buyers, Learned, Session};
use crate::secret::Values;
use crate::template::{self, Encoding, Name, Placeholder};
use reqwest::Url;
use std::borrow::Cow;
use std::sync::Arc;

/// What a buyer asks the shop to do. An order carries its attempt's idempotency key (sent
/// in the mapping's `idempotency_header`); pay, cancel and a pending order's poll carry the
/// order's id when it has one.
#[derive(Debug, Clone)]
pub enum Action {
    /// The buyer's login (`[target.login]`).
    Login,
    View,
    Order(Option<String>),
    Pay(Option<String>),
    Cancel(Option<String>),
    /// Asks for a pending order's decision (`[target.poll]`).
    Poll(Option<String>),
}

impl Action {
    /// The request kind this action is recorded under.
    pub fn kind(&self) -> Kind {
        match self {
            Action::Login => Kind::Login,
            Action::View => Kind::View,
            Action::Order(_) => Kind::Order,
            Action::Pay(_) => Kind::Pay,
            Action::Cancel(_) => Kind::Cancel,
            Action::Poll(_) => Kind::Poll,
        }
    }
}

/// The sale being set up, for template values.
#[derive(Debug, Clone)]
pub struct Sale {
    /// The item's id as templates take it (an integer's digits, or a string id as it is).
    pub item_id: String,
    pub stock: i64,
    pub purchase_limit: i64,
    pub name: String,
    pub price_cents: i64,
}

impl Sale {
    /// The scenario's item.
    pub fn of(s: &super::Scenario) -> Self {
        Sale {
            item_id: s.item.id.to_string(),
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
    /// What the run knows per buyer: CSV columns, sessions after a login before the sale.
    pub buyers: Arc<Buyers>,
    /// The `{env:NAME}` values, read when the target was made.
    env: Arc<std::collections::BTreeMap<String, String>>,
    /// The secret values the mapping holds itself (`secrets::of_mapping`).
    secrets: Arc<Values>,
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

/// The answer for a status no rule classified: a view or a login reads 2xx as `ok` (an order,
/// pay or cancel: `unclassified`, the mapping needs a rule); 3xx is a redirect, 401/403
/// unauthorized, 404 (views and logins) not found, another 4xx invalid, 5xx a server error.
fn default_answer(kind: Kind, status: u16) -> Answer {
    let page = matches!(kind, Kind::View | Kind::Login);
    match status {
        200..=299 if page => Answer::Ok,
        200..=299 => Answer::Unclassified,
        300..=399 => Answer::Redirect,
        s if is_unauthorized(s) => Answer::Unauthorized,
        404 if page => Answer::NotFound,
        400..=499 => Answer::Invalid,
        _ => Answer::ServerError,
    }
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
    /// Rule i of the kind's rules matched ([`Mapping::rules_for`]: the request's own
    /// `outcomes`, or `target.outcomes`).
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
    /// The cookies the answer set and the values its request extracts, for the buyer's
    /// session.
    pub learned: Learned,
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
                learned: Learned::default(),
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
    /// A target with no per-buyer data (no CSV columns, no login before the sale).
    pub fn new(base_url: &str, mapping: Mapping, sale: Sale) -> Self {
        // Unset variables were refused when the plan was built (`Mapping::env_values`).
        let env = mapping.env_values().unwrap_or_default();
        let secrets = secrets::of_mapping(base_url, &mapping, &env);
        Target {
            base_url: base_url.to_string(),
            mapping,
            sale,
            buyers: Arc::default(),
            env: Arc::new(env),
            secrets: Arc::new(secrets),
        }
    }

    /// This target with what the run knows of its buyers.
    pub fn with_buyers(self, buyers: Arc<Buyers>) -> Self {
        Target { buyers, ..self }
    }

    /// Buyer `b`'s session as its journey starts; `None` when its login before the sale
    /// failed.
    pub fn session_for(&self, b: &BuyerPlan) -> Option<Session> {
        self.buyers.session(b.index)
    }

    fn value<'s>(
        &'s self,
        n: Name<'_>,
        b: Option<&'s BuyerPlan>,
        order_id: Option<&'s str>,
        session: Option<&'s Session>,
    ) -> Option<Cow<'s, str>> {
        let s = &self.sale;
        let p = match n {
            Name::Builtin(p) => p,
            Name::Named(name) => return session?.value(name).map(Cow::Borrowed),
            Name::Env(var) => return self.env.get(var).map(|v| Cow::Borrowed(v.as_str())),
        };
        Some(match p {
            Placeholder::ItemId => Cow::Borrowed(s.item_id.as_str()),
            Placeholder::Stock => s.stock.to_string().into(),
            Placeholder::PurchaseLimit => s.purchase_limit.to_string().into(),
            Placeholder::PriceCents => s.price_cents.to_string().into(),
            Placeholder::Name => Cow::Borrowed(s.name.as_str()),
            Placeholder::Qty => "1".into(),
            Placeholder::UserId => b?.user_id.as_cow(),
            Placeholder::DeviceId => b?.device_id.as_cow(),
            Placeholder::OrderId => Cow::Borrowed(order_id?),
        })
    }

    /// `t` filled in for buyer `b` (with its IP header, its session's values and cookies) or,
    /// without a buyer, for the sale; `None` when the request names a value it does not have.
    /// `[target] headers` whose values it lacks are left out.
    fn request(
        &self,
        t: &RequestTemplate,
        b: Option<&BuyerPlan>,
        order_id: Option<&str>,
        key: Option<&str>,
        session: Option<&Session>,
    ) -> Option<Prepared> {
        let secrets = std::cell::RefCell::new(Values::default());
        let fill = |text: &str, enc| {
            template::try_expand(text, enc, |n| {
                let v = self.value(n, b, order_id, session)?;
                if self.secret_placeholder(n) {
                    secrets.borrow_mut().add(&v);
                }
                Some(v)
            })
        };
        let path = fill(&t.path, Encoding::Path)?;
        let (body, content_type) = match &t.body {
            None => (None, None),
            Some(Body::Json(body)) => (Some(fill(body, Encoding::Json)?), Some(JSON)),
            Some(Body::Form(pairs)) => {
                let filled = pairs
                    .iter()
                    .map(|(k, v)| Some((k.as_str(), fill(v, Encoding::Raw)?)))
                    .collect::<Option<Vec<_>>>()?;
                (Some(template::form_encode(filled)), Some(FORM))
            }
        };
        let mut headers: Vec<(String, String)> = Vec::new();
        for (k, v) in &self.mapping.headers {
            let own = t.headers.iter().any(|(o, _)| o.eq_ignore_ascii_case(k));
            if let (false, Some(v)) = (own, fill(v, Encoding::Header)) {
                headers.push((k.clone(), v));
            }
        }
        for (k, v) in &t.headers {
            headers.push((k.clone(), fill(v, Encoding::Header)?));
        }
        let cookie = session.and_then(Session::cookie_header);
        if let Some(c) = cookie.filter(|_| {
            !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("cookie"))
        }) {
            headers.push(("Cookie".into(), c));
        }
        let mut secrets = secrets.into_inner();
        for (k, v) in &headers {
            if crate::secret::is_secret_name(k, &self.mapping.secret_fields) {
                secrets.add(v);
                secrets.extend(v.split("; ").filter_map(secrets::cookie_value));
                if let Some((_, credential)) = v.split_once(' ') {
                    secrets.add(credential);
                }
            }
        }
        if let Some(b) = b.filter(|_| !self.mapping.ip_header.is_empty()) {
            headers.push((self.mapping.ip_header.clone(), b.ip.to_string()));
        }
        if let Some(k) = key.filter(|_| !self.mapping.idempotency_header.is_empty()) {
            headers.push((self.mapping.idempotency_header.clone(), k.to_string()));
        }
        Some(Prepared {
            method: t.method,
            path,
            body,
            content_type,
            headers,
            secrets,
        })
    }

    /// The request for `action` by buyer `b` with its session; `None` when the mapping has no
    /// such request (the scenario never asks for one then), or it names a value the buyer
    /// lacks (an order id the order did not get, a value no answer gave).
    pub fn prepare(&self, action: &Action, b: &BuyerPlan, session: &Session) -> Option<Prepared> {
        let m = &self.mapping;
        let (t, order_id, key) = match action {
            Action::Login => (&m.login.as_ref()?.request, None, None),
            Action::View => (m.view.as_ref()?, None, None),
            Action::Order(key) => (&m.order, None, key.as_deref()),
            Action::Pay(id) => (m.pay.as_ref()?, id.as_deref(), None),
            Action::Cancel(id) => (m.cancel.as_ref()?, id.as_deref(), None),
            Action::Poll(id) => (&m.poll.as_ref()?.request, id.as_deref(), None),
        };
        if order_id.is_none() && t.needs_order_id() {
            return None;
        }
        self.request(t, Some(b), order_id, key, Some(session))
    }

    /// The set-up requests, in order, each with its field name (`target.setup`,
    /// `target.setup[1]`, ...).
    pub fn setup_requests(&self) -> Vec<(String, Prepared)> {
        let many = self.mapping.setup.len() > 1;
        self.mapping
            .setup
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let field = if many {
                    format!("target.setup[{i}]")
                } else {
                    "target.setup".to_string()
                };
                Some((field, self.request(t, None, None, None, None)?))
            })
            .collect()
    }

    /// The first set-up request, if the mapping has one.
    pub fn setup_request(&self) -> Option<Prepared> {
        self.setup_requests().into_iter().next().map(|(_, p)| p)
    }

    /// The request that reads the shop's backlog (`[target.settle] backlog`), if any.
    pub fn backlog_request(&self) -> Option<Prepared> {
        let b = self.mapping.settle.as_ref()?.backlog.as_ref()?.endpoint()?;
        self.request(&b.request, None, None, None, None)
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

    /// Classifies a status and body: the first of the kind's rules that matches
    /// ([`Mapping::rules_for`]: a poll's are `target.poll.outcomes`), else the harness's
    /// default for the status (`unclassified` for an order's or a poll's 2xx, `ok` for a
    /// view's; see `default_answer`). A `created` or `pending` order (and a poll's `created`
    /// decision) carries its id when the mapping names the field and the answer has it.
    #[cfg(test)]
    pub fn classify(&self, kind: Kind, status: u16, body: &str) -> Classified {
        self.classify_with(kind, status, body, None)
    }

    /// [`Target::classify`], also extracting the request's `extract` values (from a 2xx
    /// answer's body, or the headers `answered` kept) and keeping its cookies.
    fn classify_with(
        &self,
        kind: Kind,
        status: u16,
        body: &str,
        answered: Option<Answered>,
    ) -> Classified {
        let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
        let (rules, _) = self.mapping.rules_for(kind);
        let (answer, why) = match rules.iter().position(|r| applies(r, status, json.as_ref())) {
            Some(i) => (rules[i].outcome.answer(), Why::Rule(i)),
            None => (default_answer(kind, status), Why::NoRule),
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
        let mut learned = Learned::default();
        let extract = self
            .mapping
            .request(kind)
            .map_or(&[][..], |t| &t.extract[..]);
        if (200..300).contains(&status) {
            for e in extract {
                let got = match &e.from {
                    ExtractFrom::Json(path) => json.as_ref().and_then(|j| field(j, path)),
                    ExtractFrom::Header(h) => answered.as_ref().and_then(|a| {
                        a.headers
                            .iter()
                            .find(|(n, _)| n.eq_ignore_ascii_case(h))
                            .map(|(_, v)| v.clone())
                    }),
                };
                match got {
                    Some(v) => learned.extracted.push((e.name.clone(), v)),
                    None if learned.missing.is_none() => {
                        learned.missing = Some((e.name.clone(), e.from.to_string()))
                    }
                    None => {}
                }
            }
        }
        if let Some(a) = answered {
            learned.set_cookies = a.set_cookies;
        }
        Classified {
            answer,
            order_id,
            why,
            learned,
        }
    }

    /// Reads a full response to `p` (the body too: latency is full response time; kept up to
    /// [`crate::guard::body::MAX_BODY_BYTES`]) and classifies it; a login's answer keeps a sample, its
    /// secrets masked.
    pub async fn read(&self, kind: Kind, p: &Prepared, resp: reqwest::Response) -> Read {
        let status = resp.status().as_u16();
        let hs = resp.headers();
        let text =
            |v: &reqwest::header::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
        let location = hs
            .get(reqwest::header::LOCATION)
            .map(|l| format!("Location: {}", text(l)));
        let extract = self
            .mapping
            .request(kind)
            .map_or(&[][..], |t| &t.extract[..]);
        let answered = Answered {
            set_cookies: hs
                .get_all(reqwest::header::SET_COOKIE)
                .iter()
                .map(text)
                .collect(),
            headers: extract
                .iter()
                .filter_map(|e| match &e.from {
                    ExtractFrom::Header(h) => Some((h.clone(), text(hs.get(h.as_str())?))),
                    ExtractFrom::Json(_) => None,
                })
                .collect(),
        };
        match crate::guard::body::read_capped(resp).await {
            Ok(body) => {
                let mut classified = self.classify_with(kind, status, &body, Some(answered));
                if kind == Kind::Login {
                    classified.learned.sample = Some(self.sample(&body, p, &classified.learned));
                }
                Read {
                    classified,
                    status: Some(status),
                    body: location.unwrap_or(body),
                }
            }
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
            Ok(resp) => self.read(kind, p, resp).await,
            Err(e) => Read::transport(&e),
        }
    }
}

/// What an answer's headers hold for the buyer's session, kept before its body is read: its
/// `Set-Cookie` values and the headers its request extracts (none, usually: no allocation).
struct Answered {
    set_cookies: Vec<String>,
    headers: Vec<(String, String)>,
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

mod connects;
mod prepared;
mod secrets;
pub use prepared::{senders_client, Prepared};
use prepared::{FORM, JSON};
#[cfg(test)]
mod tests;
