//! The shop's one route table: every path pattern it serves, with its methods and handlers.
//! The router is built from it ([`router`]), the HTTP metrics' `route` label is read from it,
//! and the harness asks it which routes are the buyers'.

use super::{admin, handlers, telemetry, AppState};
use crate::telemetry::shop_metrics;
use crate::telemetry::Handles;
use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post, MethodRouter};
use axum::Router;
use std::sync::LazyLock;
use std::time::Instant;

/// A route of the reference shop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Healthz,
    Metrics,
    /// The product page (`GET`) and the sale's set-up (`PUT`, admin).
    Item,
    Audit,
    /// Whether the sale has settled: no purchase running, and (redis-lua) every stream entry
    /// in the database. What the harness polls while it waits for the drain: cheap, unlike
    /// the audit, which reads every order row.
    Drained,
    Reconcile,
    Rewarm,
    Orders,
    Pay,
    Cancel,
}

impl Route {
    /// Every route, in the order the router adds them.
    pub const ALL: [Route; 10] = [
        Route::Healthz,
        Route::Metrics,
        Route::Item,
        Route::Audit,
        Route::Drained,
        Route::Reconcile,
        Route::Rewarm,
        Route::Orders,
        Route::Pay,
        Route::Cancel,
    ];

    /// Its path pattern, as axum matches it and the `route` label spells it.
    pub const fn path(self) -> &'static str {
        match self {
            Route::Healthz => "/healthz",
            Route::Metrics => "/metrics",
            Route::Item => "/api/items/{id}",
            Route::Audit => "/api/items/{id}/audit",
            Route::Drained => "/api/items/{id}/drained",
            Route::Reconcile => "/api/items/{id}/reconcile",
            Route::Rewarm => "/api/items/{id}/rewarm",
            Route::Orders => "/api/orders",
            Route::Pay => "/api/orders/{id}/pay",
            Route::Cancel => "/api/orders/{id}/cancel",
        }
    }

    /// Its path with the `{id}` segment named `placeholder` (a mapping's `{item_id}`).
    pub fn path_with(self, placeholder: &str) -> String {
        self.path().replace("{id}", placeholder)
    }

    /// Its URL on the shop at `base_url` (the pattern as it is: for a route without `{id}`).
    pub fn url(self, base_url: &str) -> String {
        format!("{base_url}{}", self.path())
    }

    /// Its URL on the shop at `base_url` for item or order `id`.
    pub fn url_with(self, base_url: &str, id: impl std::fmt::Display) -> String {
        format!("{base_url}{}", self.path_with(&id.to_string()))
    }

    /// The route whose pattern is `path`.
    pub fn of_path(path: &str) -> Option<Route> {
        Route::ALL.into_iter().find(|r| r.path() == path)
    }

    /// Whether a request of `method` on it is a buyer's: the product page, orders, payments
    /// and cancellations; not the harness's set-up, audit, reconciliation or metrics.
    pub fn is_buyers(self, method: &str) -> bool {
        match self {
            Route::Item => method == "GET",
            Route::Orders | Route::Pay | Route::Cancel => true,
            Route::Healthz
            | Route::Metrics
            | Route::Audit
            | Route::Drained
            | Route::Reconcile
            | Route::Rewarm => false,
        }
    }

    /// Its handlers.
    fn handlers(self) -> MethodRouter<AppState> {
        match self {
            Route::Healthz => get(handlers::healthz),
            Route::Metrics => get(telemetry::metrics),
            Route::Item => get(handlers::get_item).put(admin::put_item),
            Route::Audit => get(handlers::audit),
            Route::Drained => get(handlers::drained),
            Route::Reconcile => post(admin::reconcile),
            Route::Rewarm => post(admin::rewarm),
            Route::Orders => post(handlers::create_order),
            Route::Pay => post(handlers::pay),
            Route::Cancel => post(handlers::cancel),
        }
    }
}

/// Every route of the table, with its handlers.
pub(super) fn router() -> Router<AppState> {
    Route::ALL.into_iter().fold(Router::new(), |r, route| {
        r.route(route.path(), route.handlers())
    })
}

/// The method as a metric label: the known ones, else `other` (a label per invented method
/// would let any client grow the metrics without bound).
fn method_label(m: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}

/// The `route` label of a request: its route pattern, `unmatched` for none; `Err` for a
/// pattern missing from the route table (labelled all the same, but not cached).
fn route_label(matched: Option<&str>) -> Result<&'static str, String> {
    let Some(path) = matched else {
        return Ok("unmatched");
    };
    Route::of_path(path)
        .map(Route::path)
        .ok_or_else(|| path.to_string())
}

type HttpHandles = (metrics::Histogram, metrics::Counter);

/// The two HTTP metrics of one route, method and status.
fn http_metrics(route: String, method: &'static str, status: u16) -> HttpHandles {
    (
        metrics::histogram!(shop_metrics::HTTP_REQUEST_DURATION, "route" => route.clone(), "method" => method),
        metrics::counter!(shop_metrics::HTTP_REQUESTS, "route" => route, "method" => method, "status" => status.to_string()),
    )
}

/// Records every request's latency and status (Prometheus).
pub(super) async fn observe(req: Request, next: Next) -> Response {
    static HANDLES: LazyLock<Handles<(&'static str, &'static str, u16), HttpHandles>> =
        LazyLock::new(Handles::new);
    let route = route_label(
        req.extensions()
            .get::<MatchedPath>()
            .map(MatchedPath::as_str),
    );
    let method = method_label(req.method());
    let start = Instant::now();
    let resp = next.run(req).await;
    let elapsed = start.elapsed().as_secs_f64();
    let status = resp.status().as_u16();
    let (duration, requests) = match route {
        Ok(route) => HANDLES.get((route, method, status), |(r, m, s)| {
            http_metrics(r.to_string(), m, s)
        }),
        Err(route) => http_metrics(route, method, status),
    };
    duration.record(elapsed);
    requests.increment(1);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_holds_every_route_once_and_finds_each_by_its_path() {
        for (i, r) in Route::ALL.into_iter().enumerate() {
            assert_eq!(r as usize, i, "{r:?} in enum order");
            assert_eq!(Route::of_path(r.path()), Some(r));
        }
        assert_eq!(
            Route::Cancel as usize,
            Route::ALL.len() - 1,
            "none left out"
        );
        assert_eq!(Route::of_path("/api/other"), None);
        assert_eq!(Route::Item.path_with("{item_id}"), "/api/items/{item_id}");
        assert_eq!(
            Route::Pay.url_with("http://h:1", 7),
            "http://h:1/api/orders/7/pay"
        );
        assert_eq!(Route::Metrics.url("http://h:1"), "http://h:1/metrics");
        assert!(Route::Item.is_buyers("GET") && !Route::Item.is_buyers("PUT"));
        assert!(Route::Pay.is_buyers("POST") && !Route::Audit.is_buyers("GET"));
    }

    #[test]
    fn a_route_label_is_the_pattern_or_unmatched() {
        assert_eq!(route_label(Some("/api/orders")), Ok("/api/orders"));
        assert_eq!(route_label(Some("/healthz")), Ok("/healthz"));
        assert_eq!(route_label(None), Ok("unmatched"));
        assert_eq!(
            route_label(Some("/api/other")),
            Err("/api/other".to_string())
        );
    }
}
