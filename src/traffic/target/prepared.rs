//! A request ready to send ([`Prepared`]: method, path, body, headers and the secret values it
//! carries) and the harness's HTTP clients (no redirects followed; the senders' with a bound on
//! connects at once).

use super::super::mapping::Method;
use crate::secret::Values;
use std::time::Duration;

/// A request ready to send.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub method: Method,
    pub path: String,
    pub body: Option<String>,
    /// The body's content type (JSON or form), unless a header of the request names one.
    pub content_type: Option<&'static str>,
    pub headers: Vec<(String, String)>,
    /// The secret values the request carries (see `secrets`): masked in any sample of its
    /// answer.
    pub secrets: Values,
}

/// A JSON body's content type.
pub(super) const JSON: &str = "application/json";
/// A form body's content type.
pub(super) const FORM: &str = "application/x-www-form-urlencoded";

impl Prepared {
    /// Adds body and headers to a request builder.
    pub fn apply(&self, mut rb: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        for (k, v) in &self.headers {
            rb = rb.header(k.as_str(), v.as_str());
        }
        if let Some(body) = &self.body {
            let own = self
                .headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
            if let Some(ct) = self.content_type.filter(|_| !own) {
                rb = rb.header("content-type", ct);
            }
            rb = rb.body(body.clone());
        }
        rb
    }

    /// The value of header `name` (any case), if the request sends it.
    #[cfg(test)]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
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
}

/// New connections the senders open at once, at most ([`senders_client`]).
pub const CONNECTS_AT_ONCE: usize = 16;

/// The senders' client: [`crate::guard::http::client`]'s, opening at most [`CONNECTS_AT_ONCE`] connections at a
/// time. The senders meet the sale's opening with an empty pool, and every request that finds
/// no idle connection opens one: unlimited, a few late requests can tip the opening into a
/// storm (held senders opening connections to a shop busy accepting them, whose slower answers
/// hold more senders: 1,200 held within 190 ms, docs/lab/lab-log.md). Limited, a
/// request waiting for its connect takes the first connection handed back instead; at most
/// `senders` connects wait ([`super::connects`]), and up to `senders` idle connections are
/// kept (as many as can be busy at once: a connection the senders had to open is not closed
/// again for want of room).
pub fn senders_client(timeout: Duration, senders: usize) -> reqwest::Result<reqwest::Client> {
    crate::guard::http::builder(timeout)
        .connector_layer(super::connects::ConnectLimitLayer::new(
            CONNECTS_AT_ONCE,
            senders,
        ))
        .pool_max_idle_per_host(senders.max(1))
        .build()
}
