//! The harness's own HTTP client: it follows no redirect (a 3xx is an answer, so a redirect can
//! never take a request to a host the loopback guard did not approve).

use std::time::Duration;

/// A client for the harness's own requests ([`builder`]'s, built).
pub fn client(timeout: Duration) -> reqwest::Result<reqwest::Client> {
    builder(timeout).build()
}

/// The harness's client, to be built: no redirect followed, `timeout` on every request.
pub fn builder(timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(256)
}
