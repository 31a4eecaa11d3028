//! HTTP handlers: parse and validate, call the inventory, map outcomes to status codes.

use super::error::{ApiError, ErrorCode};
use super::AppState;
use crate::inventory::Outcome;
use crate::model::{OrderStatus, Purchase, MAX_ID_LEN, MAX_ORDER_ID_LEN};
use crate::store::Transition;
use crate::telemetry::shop_metrics;
use crate::telemetry::Handles;
use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, Instant};

type ApiResult<T> = Result<T, ApiError>;

/// Body of `POST /api/orders`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OrderBody {
    item_id: i64,
    user_id: String,
    qty: i64,
    #[serde(default)]
    device_id: Option<String>,
}

/// The product page as served.
#[derive(Debug, Clone, Serialize)]
pub struct ItemView {
    id: i64,
    name: String,
    price_cents: i64,
    stock: i64,
    /// Where the stock figure came from: `database` (read now) or `cache` (see `stock_age_ms`).
    stock_source: &'static str,
    /// Age of the stock figure in milliseconds (0 when read now).
    stock_age_ms: u64,
}

/// The redis-lua product page cache: absorbs browse traffic; its stock figure is at most the
/// TTL old.
pub struct PageCache {
    ttl: Duration,
    pages: Mutex<HashMap<i64, (Instant, ItemView)>>,
}

impl PageCache {
    /// A cache whose entries live `ttl`.
    pub fn new(ttl: Duration) -> Self {
        PageCache {
            ttl,
            pages: Mutex::default(),
        }
    }

    fn get(&self, id: i64) -> Option<ItemView> {
        let pages = self.pages.lock().expect("page cache poisoned");
        let (at, view) = pages.get(&id)?;
        let age = at.elapsed();
        (age < self.ttl).then(|| ItemView {
            stock_source: "cache",
            stock_age_ms: age.as_millis() as u64,
            ..view.clone()
        })
    }

    fn put(&self, view: ItemView) {
        let mut pages = self.pages.lock().expect("page cache poisoned");
        pages.insert(view.id, (Instant::now(), view));
    }

    pub(super) fn forget(&self, id: i64) {
        self.pages.lock().expect("page cache poisoned").remove(&id);
    }
}

/// A JSON route's body: sent as `application/json` (or a `+json` type; any parameters), else
/// `415 unsupported_media_type` (a browser posts `text/plain` or a form across origins without
/// asking first: the shop answers those without touching stock), then parsed.
pub(super) fn parse_json<T: serde::de::DeserializeOwned>(
    headers: &HeaderMap,
    body: &Bytes,
) -> ApiResult<T> {
    json_media(headers, "the body")?;
    serde_json::from_slice(body).map_err(|e| ApiError::invalid(format!("malformed JSON body: {e}")))
}

/// Refuses a request whose `Content-Type` is not JSON (`application/json`, `application/*+json`):
/// a page of another origin can send text/plain or a form without asking the browser first,
/// never JSON. `what` names what must be JSON in the answer's detail.
pub(super) fn json_media(headers: &HeaderMap, what: &str) -> ApiResult<()> {
    let media = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    let json = media.as_deref().is_some_and(|m| {
        m == "application/json" || (m.starts_with("application/") && m.ends_with("+json"))
    });
    if json {
        return Ok(());
    }
    Err(
        ApiError::new(ErrorCode::UnsupportedMediaType).detail(format!(
            "{what} must be sent with content-type: application/json (got {})",
            media.as_deref().unwrap_or("none")
        )),
    )
}

pub(super) fn item_id(raw: &str) -> ApiResult<i64> {
    raw.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| ApiError::invalid(format!("item id {raw:?} must be a positive integer")))
}

pub(super) async fn healthz(State(st): State<AppState>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "status": "ok",
        "strategy": st.inventory.strategy(),
        "backend": st.inventory.store().backend(),
    }))
}

pub(super) async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound)
}

pub(super) async fn get_item(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<ItemView>> {
    let id = item_id(&id)?;
    if let Some(view) = st.page_cache.get(id) {
        return Ok(Json(view));
    }
    let view = match st.inventory.engine().redis() {
        Some(redis) => {
            let item = st
                .inventory
                .item_meta(id)
                .await?
                .ok_or_else(|| ApiError::new(ErrorCode::UnknownItem))?;
            let stock = redis.stock(id).await?.unwrap_or(0);
            let view = ItemView {
                id,
                name: item.name,
                price_cents: item.price_cents,
                stock,
                stock_source: "cache",
                stock_age_ms: 0,
            };
            st.page_cache.put(view.clone());
            view
        }
        None => {
            let item = st
                .inventory
                .store()
                .item(id)
                .await
                .map_err(crate::inventory::InventoryError::from)?
                .ok_or_else(|| ApiError::new(ErrorCode::UnknownItem))?;
            ItemView {
                id,
                name: item.name,
                price_cents: item.price_cents,
                stock: item.stock,
                stock_source: "database",
                stock_age_ms: 0,
            }
        }
    };
    Ok(Json(view))
}

/// The header a client names its purchase attempt with (see `inventory::idempotency`).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Set on an answer that replays the order an `Idempotency-Key` bought before.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The request's `Idempotency-Key`, checked (absent: `None`).
fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let Some(raw) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    let text = raw
        .to_str()
        .map_err(|_| ApiError::invalid("Idempotency-Key must be printable ASCII"))?;
    let key = crate::inventory::idempotency::valid_key(text).map_err(ApiError::invalid)?;
    Ok(Some(key.to_string()))
}

/// A created order's answer: `201 {"order_id", "status": "pending_payment"}`; a replay is the
/// same answer again, marked `Idempotent-Replayed: true`.
fn created(order_id: &str, replayed: bool) -> Response {
    #[derive(Serialize)]
    struct Created<'a> {
        order_id: &'a str,
        status: OrderStatus,
    }
    let body = Created {
        order_id,
        status: OrderStatus::PendingPayment,
    };
    let mut resp = (StatusCode::CREATED, Json(body)).into_response();
    if replayed {
        resp.headers_mut().insert(
            IDEMPOTENT_REPLAYED,
            axum::http::HeaderValue::from_static("true"),
        );
    }
    resp
}

fn validate_order(body: OrderBody, ip: String, key: Option<String>) -> ApiResult<Purchase> {
    if body.item_id <= 0 {
        return Err(ApiError::invalid("item_id must be a positive integer"));
    }
    if body.qty <= 0 {
        return Err(ApiError::invalid("qty must be at least 1"));
    }
    // Ids go to VARCHAR(128) columns (MAX_ID_LEN bytes is at most that many characters), and
    // PostgreSQL cannot store a NUL at all: an id the database would refuse must be refused
    // here, before a 201, not dead-lettered after it. Control characters are refused with NUL.
    let storable = |id: &str| !id.chars().any(char::is_control);
    let user = body.user_id.trim();
    if user.is_empty() || user.len() > MAX_ID_LEN || !storable(user) {
        return Err(ApiError::invalid(format!(
            "user_id must be 1 to {MAX_ID_LEN} bytes of text without control characters"
        )));
    }
    let device = match body.device_id.as_deref().map(str::trim) {
        Some("") | None => None,
        Some(d) if d.len() > MAX_ID_LEN || !storable(d) => {
            return Err(ApiError::invalid(format!(
                "device_id must be at most {MAX_ID_LEN} bytes of text without control characters"
            )))
        }
        Some(d) => Some(d.to_string()),
    };
    Ok(Purchase {
        item_id: body.item_id,
        user_id: user.to_string(),
        device_id: device,
        qty: body.qty,
        client_ip: ip,
        idempotency_key: key,
    })
}

pub(super) async fn create_order(
    State(st): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    super::body::TimedBody(body): super::body::TimedBody,
) -> ApiResult<Response> {
    let ip = st
        .trusted_proxies
        .client_ip(&headers, peer.map(|Extension(ConnectInfo(a))| a));
    let key = idempotency_key(&headers)?;
    let purchase = validate_order(parse_json(&headers, &body)?, ip, key)?;
    // A purchase runs to its end even when its client leaves (a timeout, a broken
    // connection): the request's future is dropped then, and half a purchase could leak units
    // or leave the buyer not knowing what it has. The answer the client missed is what the
    // oracle calls indeterminate; its Idempotency-Key finds the order it committed.
    let qty = purchase.qty;
    let task = st.clone();
    let outcome = tokio::spawn(async move { task.inventory.purchase(&purchase).await })
        .await
        .map_err(|e| ApiError::internal(&e))??;
    let strategy = st.inventory.strategy().as_str();
    let (label, resp) = match outcome {
        Outcome::Reserved { order_id } => ("created", created(&order_id, false)),
        Outcome::Replayed { order_id } => ("replayed", created(&order_id, true)),
        Outcome::KeyReused => (
            "key_reused",
            ApiError::new(ErrorCode::IdempotencyKeyReused)
                .detail("this Idempotency-Key bought an order for another buyer or quantity")
                .into_response(),
        ),
        Outcome::SoldOut => ("sold_out", ApiError::new(ErrorCode::SoldOut).into_response()),
        Outcome::Duplicate => (
            "duplicate",
            ApiError::new(ErrorCode::Duplicate)
                .detail("this buyer already holds the purchase limit or has an order in flight")
                .into_response(),
        ),
        Outcome::RateLimited => (
            "rate_limited",
            ApiError::new(ErrorCode::RateLimited).into_response(),
        ),
        Outcome::UnknownItem => (
            "unknown_item",
            ApiError::new(ErrorCode::UnknownItem).into_response(),
        ),
        Outcome::NotWarmed => {
            // Redis may have lost a sale this shop knew: have the watch look now.
            st.rewarm.nudge();
            (
                "not_warmed",
                ApiError::new(ErrorCode::NotWarmed)
                    .detail("Redis does not hold this sale: if it lost it, the shop is rebuilding it from the database (retry shortly); a sale never set up needs PUT /api/items/{id}")
                    .into_response(),
            )
        }
        Outcome::NotReplicated { waited_ms, released } => (
            "not_replicated",
            ApiError::new(ErrorCode::NotReplicated)
                .detail(format!(
                    "no Redis replica confirmed the order within {waited_ms} ms (--redis-durability wait-replica); nothing was acknowledged{}",
                    if released { " and the unit was released: retry" } else { "; the reservation expires unpaid" }
                ))
                .into_response(),
        ),
        Outcome::Busy(why) => (
            "busy",
            ApiError::new(ErrorCode::Busy).detail(why).into_response(),
        ),
        Outcome::OverLimit { limit } => (
            "invalid_request",
            ApiError::invalid(format!("qty {qty} exceeds the purchase limit {limit}")).into_response(),
        ),
    };
    static ORDERS: LazyLock<Handles<(&'static str, &'static str), metrics::Counter>> =
        LazyLock::new(Handles::new);
    ORDERS
        .get((strategy, label), |(strategy, label)| {
            metrics::counter!(shop_metrics::ORDERS, "strategy" => strategy, "outcome" => label)
        })
        .increment(1);
    Ok(resp)
}

fn order_id(raw: &str) -> ApiResult<&str> {
    if raw.is_empty() || raw.len() > MAX_ORDER_ID_LEN {
        return Err(ApiError::invalid(format!(
            "order id must be 1 to {MAX_ORDER_ID_LEN} characters"
        )));
    }
    Ok(raw)
}

fn transition_response(
    order_id: &str,
    t: Transition,
    target: OrderStatus,
) -> ApiResult<Json<serde_json::Value>> {
    match t {
        Transition::Applied { restocked } => Ok(Json(serde_json::json!({
            "order_id": order_id, "status": target, "restocked": restocked,
        }))),
        Transition::AlreadyIn(s)
            if s == target || (target != OrderStatus::Paid && !s.holds_stock()) =>
        {
            Ok(Json(
                serde_json::json!({ "order_id": order_id, "status": s, "restocked": 0 }),
            ))
        }
        Transition::AlreadyIn(s) => Err(ApiError::new(ErrorCode::InvalidState).detail(format!(
            "order is {s}; only pending_payment orders can become {target}"
        ))),
        Transition::NotFound => Err(ApiError::new(ErrorCode::UnknownOrder)),
    }
}

pub(super) async fn pay(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<serde_json::Value>> {
    let id = order_id(&id)?;
    let t = st.inventory.pay(id).await?;
    transition_response(id, t, OrderStatus::Paid)
}

pub(super) async fn cancel(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<serde_json::Value>> {
    let id = order_id(&id)?;
    let t = st.inventory.release(id, OrderStatus::Cancelled).await?;
    transition_response(id, t, OrderStatus::Cancelled)
}

/// `GET /api/items/{id}/drained`: whether the sale has settled, without reading its orders.
pub(super) async fn drained(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let id = item_id(&id)?;
    if st.inventory.item_meta(id).await?.is_none() {
        return Err(ApiError::new(ErrorCode::UnknownItem));
    }
    let queue_drained = st.inventory.drained(id).await?;
    Ok(Json(
        serde_json::json!({ "item_id": id, "queue_drained": queue_drained }),
    ))
}

pub(super) async fn audit(
    State(st): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let id = item_id(&id)?;
    match st.inventory.audit(id).await? {
        Some(a) => Ok(Json(a)),
        None => Err(ApiError::new(ErrorCode::UnknownItem)),
    }
}
