//! The cookie session shop: a login on arrival sets a session cookie and answers a CSRF
//! header; views and orders need both.

use super::{buy, reply, reset, serve, stock, Shared, Shop, SALE};
use crate::helpers::*;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Form, Router};
use serde_json::json;
use std::collections::HashMap;

fn session_user(s: &Shop, headers: &HeaderMap) -> Option<(String, String)> {
    let cookies = headers.get("cookie")?.to_str().ok()?;
    let sid = cookies
        .split(';')
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == "sid")?
        .1;
    let user = s.sessions.get(sid)?.clone();
    let claimed = headers.get("x-user-id")?.to_str().ok()?;
    (claimed == user).then_some((sid.to_string(), user))
}

async fn cookie_login(State(s): State<Shared>, Form(f): Form<HashMap<String, String>>) -> Response {
    let mut s = s.lock().unwrap();
    let Some(user) = f
        .get("user")
        .filter(|u| f.get("pw") == Some(&format!("pw-{u}")))
    else {
        return reply(
            StatusCode::UNAUTHORIZED,
            json!({"error": "bad credentials"}),
        );
    };
    let sid = uuid::Uuid::now_v7().simple().to_string();
    s.sessions.insert(sid.clone(), user.clone());
    let csrf = uuid::Uuid::now_v7().simple().to_string();
    s.csrf.insert(sid.clone(), csrf.clone());
    s.logins += 1;
    let mut r = reply(StatusCode::OK, json!({"ok": true}));
    let h = r.headers_mut();
    h.insert("x-csrf-token", csrf.parse().unwrap());
    h.append(
        "set-cookie",
        format!("sid={sid}; Path=/; HttpOnly").parse().unwrap(),
    );
    h.append("set-cookie", "seen=1; Max-Age=0".parse().unwrap());
    r
}

async fn cookie_item(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let s = s.lock().unwrap();
    match session_user(&s, &headers) {
        Some(_) => reply(StatusCode::CREATED, json!({"left": s.stock})),
        None => reply(StatusCode::UNAUTHORIZED, json!({"error": "log in"})),
    }
}

async fn cookie_buy(State(s): State<Shared>, headers: HeaderMap) -> Response {
    let mut s = s.lock().unwrap();
    if headers
        .get("cookie")
        .is_some_and(|c| c.to_str().unwrap_or("").contains("seen="))
    {
        s.wrong_user += 1;
    }
    let csrf = headers.get("x-csrf-token").and_then(|v| v.to_str().ok());
    match session_user(&s, &headers) {
        Some((sid, user)) if s.csrf.get(&sid).map(String::as_str) == csrf => buy(&mut s, &user),
        _ => {
            s.refused += 1;
            reply(StatusCode::UNAUTHORIZED, json!({"error": "log in"}))
        }
    }
}

#[tokio::test]
async fn buyers_who_log_in_on_arrival_keep_their_session_cookie_and_the_gate_passes() {
    // Arrange
    let shop = Shared::default();
    let app = Router::new()
        .route("/reset", post(reset))
        .route("/login", post(cookie_login))
        .route("/item", get(cookie_item))
        .route("/buy", post(cookie_buy))
        .route("/stock", get(stock))
        .with_state(shop.clone());
    let base = serve(app).await;
    let tmp = tempfile::tempdir().unwrap();
    let text = format!(
        r#"{}
[target]
ip_header = ""
headers = {{ "X-User-Id" = "{{user_id}}" }}
setup = [
  {{ method = "POST", path = "/reset", body = '{{"stock": 0}}' }},
  {{ method = "POST", path = "/reset", body = '{{"stock": {{stock}}}}' }},
]
login = {{ method = "POST", path = "/login", form = {{ user = "{{user_id}}", pw = "pw-{{user_id}}" }}, when = "on_arrival", extract = {{ csrf = "header:X-CSRF-Token" }} }}
view = {{ method = "GET", path = "/item" }}
order = {{ method = "POST", path = "/buy", headers = {{ "X-CSRF-Token" = "{{csrf}}" }} }}
outcomes = [
  {{ status = ["201"], outcome = "created" }},
  {{ status = ["409"], outcome = "sold_out" }},
]
[target.oracle]
url = "/stock"
"#,
        SALE.replace("view_share = 0.0", "view_share = 1.0")
    );
    let scenario = tmp.path().join("cookies.toml");
    std::fs::write(&scenario, text).unwrap();

    // Act
    let out = tmp.path().join("out");
    let run = against("gate", &base, scenario.to_str().unwrap(), &out, &[]).await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(&out)["runs"][0];
    assert_eq!(r["login"]["when"], "on_arrival");
    assert_eq!(r["login"]["ok"], 60, "{}", r["login"]);
    assert_eq!(r["requests"]["login"]["outcomes"]["ok"], 60);
    let views = &r["requests"]["view"]["outcomes"];
    assert!(
        views.get("created").is_none() && views["ok"].as_u64().unwrap() >= 60,
        "a view's 201 is ok, never created: {views}"
    );
    assert_eq!(r["requests"]["order"]["outcomes"]["created"], 20);
    assert_eq!(r["order_attempts"], 60);
    let s = shop.lock().unwrap();
    assert_eq!((s.logins, s.refused), (60, 0));
    assert_eq!(
        s.wrong_user, 0,
        "a cookie deleted by Max-Age=0 is never sent"
    );
    assert_eq!(s.sold, 20);
}
