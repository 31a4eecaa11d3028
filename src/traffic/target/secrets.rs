//! A target's secrets ([`crate::secret`]): which placeholders carry one, the values the
//! mapping itself holds, and the samples of answers with every secret masked.
//!
//! The secret values an answer may echo are the mapping's own (the `{env:NAME}` values, the
//! literal value of each header not known to be harmless, the login body's literal values,
//! computed once per target), the values its request carried (every extracted value, secret
//! CSV columns, environment values, cookies, secret-named headers: [`Prepared::secrets`]),
//! and the values and cookies the answer itself gave.

use super::{Prepared, Target};
use crate::secret::{self, Values};
use crate::template::{self, Name};
use crate::traffic::mapping::{Body, Mapping};
use crate::traffic::recorder::SAMPLE_BYTES;
use crate::traffic::session::Learned;
use std::collections::BTreeMap;

/// Headers whose literal values say nothing secret (everything else written literally in a
/// header is taken for a credential).
const HARMLESS_HEADERS: [&str; 8] = [
    "accept",
    "accept-encoding",
    "accept-language",
    "cache-control",
    "content-type",
    "origin",
    "user-agent",
    "x-requested-with",
];

/// The secret values a target holds itself: the password of its base URL, or its user when it
/// has no password (and the Basic credential the HTTP client makes of them), the environment's values, each literal header
/// value of the mapping (but [`HARMLESS_HEADERS`]') and the login body's literal values.
pub(super) fn of_mapping(base_url: &str, m: &Mapping, env: &BTreeMap<String, String>) -> Values {
    let mut v = Values::default();
    if let Some(url) = reqwest::Url::parse(base_url)
        .ok()
        .filter(|u| u.password().is_some() || !u.username().is_empty())
    {
        use base64::Engine;
        let password = url.password().unwrap_or_default();
        match password {
            // A user alone may be a token (`https://TOKEN@host`).
            "" => v.add(url.username()),
            p => v.add(p),
        }
        let basic = format!("{}:{password}", url.username());
        v.add(&base64::engine::general_purpose::STANDARD.encode(basic));
    }
    v.extend(env.values().map(String::as_str));
    let literal = |text: &str| template::used(text).is_empty();
    let templates = m
        .setup
        .iter()
        .chain(m.login.as_ref().map(|l| &l.request))
        .chain(m.view.as_ref())
        .chain(Some(&m.order))
        .chain(m.pay.as_ref())
        .chain(m.cancel.as_ref())
        .chain(m.poll.as_ref().map(|p| &p.request));
    let headers = m
        .headers
        .iter()
        .chain(templates.flat_map(|t| t.headers.iter()));
    for (name, value) in headers {
        let harmless = HARMLESS_HEADERS
            .iter()
            .any(|h| h.eq_ignore_ascii_case(name));
        if !harmless && literal(value) {
            v.add(value);
            if let Some((_, credential)) = value.split_once(' ') {
                v.add(credential);
            }
        }
    }
    match m.login.as_ref().and_then(|l| l.request.body.as_ref()) {
        Some(Body::Form(pairs)) => {
            v.extend(pairs.iter().map(|(_, x)| x.as_str()).filter(|x| literal(x)))
        }
        Some(Body::Json(b)) => v.extend(
            secret::json_string_values(b)
                .into_iter()
                .filter(|x| literal(x)),
        ),
        None => {}
    }
    v
}

impl Target {
    /// Whether the value of placeholder `n` is a secret: an environment variable's, an
    /// extracted value, or a CSV column with a secret name (or in `secret_fields`).
    pub(super) fn secret_placeholder(&self, n: Name<'_>) -> bool {
        match n {
            Name::Env(_) => true,
            Name::Builtin(_) => false,
            Name::Named(x) => {
                let extracted = crate::traffic::recorder::Kind::ALL.iter().any(|k| {
                    self.mapping
                        .request(*k)
                        .is_some_and(|t| t.extract.iter().any(|e| e.name == x))
                });
                extracted || secret::is_secret_name(x, &self.mapping.secret_fields)
            }
        }
    }

    /// Every secret value the answer to `p` may echo: the mapping's own, the request's, and
    /// the values and cookies the answer gave (`learned`).
    pub fn secret_values(&self, p: &Prepared, learned: &Learned) -> Values {
        let mut v = (*self.secrets).clone();
        v.merge(&p.secrets);
        v.extend(learned.extracted.iter().map(|(_, x)| x.as_str()));
        v.extend(learned.set_cookies.iter().filter_map(|c| cookie_value(c)));
        v
    }

    /// `p`'s request line as the terminal or a report may show it (`POST /orders?sig=***`):
    /// every secret the request carries masked by value, and every secret-named query value
    /// (and `secret_fields`') by name.
    pub fn line(&self, p: &Prepared) -> String {
        format!("{} {}", p.method.as_str(), self.masked(&p.path, p))
    }

    /// `p`'s full URL on the target, masked as [`Target::line`] masks its path.
    pub fn shown_url(&self, p: &Prepared) -> String {
        let full = format!("{}{}", self.base_url.trim_end_matches('/'), p.path);
        self.masked(&full, p)
    }

    /// `text` (a path or URL of `p`) with its secrets masked by value and by name.
    fn masked(&self, text: &str, p: &Prepared) -> String {
        let mut v = (*self.secrets).clone();
        v.merge(&p.secrets);
        secret::url_with(&v.mask(text), &self.mapping.secret_fields)
    }

    /// The sample of an answer to `p` a report, a shard file or the terminal may show: cut to
    /// [`SAMPLE_BYTES`], every secret masked by value and by field name.
    pub fn sample(&self, body: &str, p: &Prepared, learned: &Learned) -> String {
        secret::sample(
            body,
            &self.secret_values(p, learned),
            &self.mapping.secret_fields,
            SAMPLE_BYTES,
        )
    }

    /// [`Target::sample`] cut to `max` bytes (`--probe`'s shorter lines).
    pub fn sample_cut(&self, body: &str, p: &Prepared, learned: &Learned, max: usize) -> String {
        secret::cut(&self.sample(body, p, learned), max)
    }
}

/// The value of a `Set-Cookie` or `Cookie` pair (`name=value; Path=/` → `value`).
pub(super) fn cookie_value(c: &str) -> Option<&str> {
    c.split(';').next()?.split_once('=').map(|(_, v)| v.trim())
}
