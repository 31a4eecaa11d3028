//! Buyers with sessions (#23): stand-in shops that need a login, in process (axum), each on
//! its own loopback port per test.
//!
//! - A JWT shop: `POST /api/login {email, password}` → `{"data": {"token": ...}}`;
//!   `POST /api/buy` needs `Authorization: Bearer <token>` whose user is the body's `user_id`
//!   (401 without a token it issued); atomic stock; `GET /api/stock` is its oracle.
//! - A cookie shop: `POST /login` (a form) sets `Set-Cookie: sid=...` and answers an
//!   `X-CSRF-Token` header; `GET /item` and `POST /buy` need the cookie and `X-User-Id` naming
//!   the cookie's user, and `POST /buy` that session's CSRF token.

mod cookie;
mod jwt;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
pub(super) struct Shop {
    pub(super) stock: i64,
    pub(super) sold: i64,
    /// email → (password, user id): the shop's accounts.
    pub(super) accounts: HashMap<String, (String, String)>,
    /// token or sid → user id.
    pub(super) sessions: HashMap<String, String>,
    /// sid → the CSRF token its login answered with (the cookie shop).
    pub(super) csrf: HashMap<String, String>,
    pub(super) logins: u64,
    /// Orders whose credentials named another user than the order's.
    pub(super) wrong_user: u64,
    /// Orders refused for missing or unknown credentials.
    pub(super) refused: u64,
    /// Orders bought, per user.
    pub(super) bought: HashMap<String, u64>,
}

pub(super) type Shared = Arc<Mutex<Shop>>;

pub(super) fn reply(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

pub(super) async fn reset(State(s): State<Shared>, Json(b): Json<Value>) -> Response {
    let mut s = s.lock().unwrap();
    s.stock = b["stock"].as_i64().unwrap_or(0);
    s.sold = 0;
    reply(StatusCode::OK, json!({"ok": true}))
}

pub(super) async fn stock(State(s): State<Shared>) -> Response {
    let s = s.lock().unwrap();
    reply(StatusCode::OK, json!({"sold": s.sold, "stock": s.stock}))
}

/// Takes one unit for `user` (its credentials already checked), atomically.
pub(super) fn buy(s: &mut Shop, user: &str) -> Response {
    if s.stock <= 0 {
        return reply(StatusCode::CONFLICT, json!({"error": "sold_out"}));
    }
    s.stock -= 1;
    s.sold += 1;
    *s.bought.entry(user.to_string()).or_default() += 1;
    reply(
        StatusCode::CREATED,
        json!({"order_id": format!("o-{}", s.sold)}),
    )
}

pub(super) async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// The sale every scenario here runs: 60 buyers for 20 units, nobody pays or cancels.
pub(super) const SALE: &str = r#"
name = "sessions"
[item]
id = 1
stock = 20
[buyers]
count = 60
seed = 7
arrival = "burst"
window_s = 1.0
burst_s = 0.3
burst_share = 0.8
[browse]
view_share = 0.0
[after_order]
pay = 0
cancel = 0
abandon = 1
[client]
timeout_ms = 5000
"#;
