//! The DNS-rebinding guard of a shop on loopback without an admin token: its admin routes are
//! open to anything that reaches the port, and a web page whose name resolves to 127.0.0.1
//! reaches it from the user's browser. Such a shop answers only requests that name it by a
//! loopback name (`Host: localhost`, `127.x.x.x`, `[::1]`, any port); any other `Host` gets
//! `421 unknown_host`. A request with no `Host` (HTTP/1.0, a test's router) is no browser's.

use super::error::{ApiError, ErrorCode};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Whether a shop listening at `listen` needs the guard: on loopback, without an admin token.
pub fn needed(listen: std::net::SocketAddr, admin_token: bool) -> bool {
    listen.ip().is_loopback() && !admin_token
}

/// Whether `host` (a `Host` header's value, with or without a port) is a loopback name.
pub fn is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name.ends_with(".localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The middleware: a request naming another host is refused before any route runs.
pub(super) async fn loopback_only(req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(axum::http::header::HOST)
        .map(|h| h.to_str().unwrap_or("?").to_string());
    match host {
        Some(h) if !is_loopback(&h) => ApiError::new(ErrorCode::UnknownHost)
            .detail(format!(
                "this shop listens on loopback without --admin-token and answers only to a \
                 loopback name (got Host: {h}); set --admin-token to serve other names"
            ))
            .into_response(),
        _ => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_are_told_from_the_others() {
        for h in [
            "localhost",
            "localhost:8080",
            "127.0.0.1:9",
            "127.1.2.3",
            "[::1]:80",
            "a.localhost",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:8080",
            "10.0.0.1:80",
            "[2001:db8::1]:80",
            "localhost.evil.example",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
