//! The admin routes: sale set-up and reset (`PUT /api/items/{id}`), rewarm and reconcile, and
//! the [`Admin`] guard they share.
//!
//! With `--admin-token` set, an admin route needs `Authorization: Bearer <token>`; without it
//! the answer is `401 unauthorized` and nothing is read or changed. Without the flag (a shop
//! on loopback for local experiments) an admin route takes only a same-origin JSON request:
//! `Content-Type: application/json` (else `415`), and no `Origin` or `Sec-Fetch-Site` of another
//! origin (else `403 cross_origin`), so a page in the user's browser cannot reach it with a
//! text/plain or form post, which browsers send cross-origin without asking. `PUT` on an item
//! that already has orders is refused (`409 has_orders`) unless the caller asks for
//! `?reset=true`.

use super::error::{ApiError, ErrorCode};
use super::handlers::{item_id, parse_json};
use super::AppState;
use crate::inventory::{RewarmOutcome, SaleSetupResult};
use crate::model::SaleSetup;
use crate::telemetry::shop_metrics;
use axum::extract::{FromRequestParts, Path, RawQuery, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use axum::Json;

type ApiResult<T> = Result<T, ApiError>;

/// Proof that the caller presented the admin token (or that the shop has none).
pub(super) struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, st: &AppState) -> Result<Self, Response> {
        let Some(token) = st.admin_token.as_deref() else {
            return same_origin_json(&parts.headers)
                .map(|()| Admin)
                .map_err(|e| {
                    metrics::counter!(shop_metrics::ADMIN_REFUSED).increment(1);
                    e.into_response()
                });
        };
        let given = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match given {
            Some(g) if same_secret(g.as_bytes(), token.as_bytes()) => Ok(Admin),
            _ => {
                metrics::counter!(shop_metrics::ADMIN_REFUSED).increment(1);
                let err = ApiError::new(ErrorCode::Unauthorized).detail(
                    "this admin route needs `Authorization: Bearer <token>` with the shop's \
                     --admin-token",
                );
                Err(([(header::WWW_AUTHENTICATE, "Bearer")], err).into_response())
            }
        }
    }
}

/// A request only the shop's own origin (or a client that is not a browser) sends: JSON, and no
/// `Origin` or `Sec-Fetch-Site` naming another origin.
fn same_origin_json(headers: &header::HeaderMap) -> ApiResult<()> {
    let text = |name| headers.get(name).and_then(|v| v.to_str().ok());
    let site = text("sec-fetch-site").map(str::to_ascii_lowercase);
    if site
        .as_deref()
        .is_some_and(|s| s != "same-origin" && s != "none")
    {
        return Err(cross_origin(&format!(
            "Sec-Fetch-Site: {}",
            site.unwrap_or_default()
        )));
    }
    if let Some(origin) = text("origin") {
        let host = text("host").unwrap_or_default();
        let own = origin
            .split_once("://")
            .is_some_and(|(_, rest)| rest.eq_ignore_ascii_case(host));
        if !own {
            return Err(cross_origin("an Origin that is not the shop's"));
        }
    }
    super::handlers::json_media(headers, "an admin request without the admin token")
}

fn cross_origin(why: &str) -> ApiError {
    ApiError::new(ErrorCode::CrossOrigin).detail(format!(
        "an admin route without --admin-token answers only the shop's own origin ({why}); \
         send it with `Authorization: Bearer <token>` to a shop started with --admin-token, \
         or from a client that is not a browser"
    ))
}

/// Compares two secrets in time that depends on their length only.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `?reset=true|false` (the only query `PUT /api/items/{id}` takes).
fn reset_flag(query: Option<&str>) -> ApiResult<bool> {
    let mut reset = false;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        reset = match pair {
            "reset=true" | "reset=1" => true,
            "reset=false" | "reset=0" => false,
            other => {
                return Err(ApiError::invalid(format!(
                    "unknown query {other:?}: the only one is reset=true (delete the item's \
                     orders and start a fresh sale)"
                )))
            }
        };
    }
    Ok(reset)
}

/// `PUT /api/items/{id}[?reset=true]`: sets up a fresh sale.
pub(super) async fn put_item(
    _: Admin,
    State(st): State<AppState>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
    headers: axum::http::HeaderMap,
    super::body::TimedBody(body): super::body::TimedBody,
) -> ApiResult<Response> {
    let id = item_id(&id)?;
    let reset = reset_flag(query.as_deref())?;
    let setup: SaleSetup = parse_json(&headers, &body)?;
    setup.validate().map_err(ApiError::invalid)?;
    match st.inventory.setup_sale(id, &setup, reset).await? {
        SaleSetupResult::Ready(item) => {
            st.page_cache.forget(id);
            Ok(Json(item).into_response())
        }
        SaleSetupResult::HasOrders { orders } => {
            Err(ApiError::new(ErrorCode::HasOrders).detail(format!(
                "item {id} already has {orders} order(s); nothing changed. \
                 `PUT /api/items/{id}?reset=true` deletes them and starts a fresh sale; \
                 `POST /api/items/{id}/rewarm` (redis-lua) rebuilds Redis from them"
            )))
        }
    }
}

fn redis_only(st: &AppState, what: &str) -> ApiResult<()> {
    if st.inventory.strategy().reconciles() {
        Ok(())
    } else {
        Err(ApiError::new(ErrorCode::NotApplicable)
            .detail(format!("{what} exists only for redis-lua")))
    }
}

/// `POST /api/items/{id}/rewarm`: rebuilds a sale Redis lost from the database.
pub(super) async fn rewarm(
    _: Admin,
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let id = item_id(&id)?;
    redis_only(&st, "rewarm")?;
    match st.inventory.rewarm(id, "manual").await? {
        None => Err(ApiError::new(ErrorCode::UnknownItem)),
        Some(r) if r.outcome == RewarmOutcome::InFlight => Err(ApiError::new(ErrorCode::InFlight)
            .detail(format!(
                "the item's stream still holds entries after the database's mark {}: nothing \
                 was rebuilt; retry once the consumer has persisted them",
                r.mark
            ))),
        Some(r) => {
            st.page_cache.forget(id);
            Ok(Json(r))
        }
    }
}

/// `POST /api/items/{id}/reconcile`: one reconciliation pass now.
pub(super) async fn reconcile(
    _: Admin,
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let id = item_id(&id)?;
    redis_only(&st, "reconciliation")?;
    match crate::pipeline::reconcile::pass(&st.inventory, id, &st.pipeline.reconcile).await? {
        Some(p) => Ok(Json(p)),
        None => Err(ApiError::new(ErrorCode::UnknownItem)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_reset_query_is_taken() {
        assert!(!reset_flag(None).unwrap());
        assert!(reset_flag(Some("reset=true")).unwrap());
        assert!(!reset_flag(Some("reset=false")).unwrap());
        assert!(reset_flag(Some("force=1")).is_err());
    }

    #[test]
    fn secrets_compare_by_content_and_length() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }
}
