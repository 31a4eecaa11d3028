//! Buyers with sessions (#23): stand-in shops that need a login, in process (axum), each on
//! its own loopback port per test.
//!
//! - A JWT shop: `POST /api/login {email, password}` → `{"data": {"token": ...}}`;
//!   `POST /api/buy` needs `Authorization: Bearer <token>` whose user is the body's `user_id`
//!   (401 without a token it issued); atomic stock; `GET /api/stock` is its oracle.
//! - A cookie shop: `POST /login` (a form) sets `Set-Cookie: sid=...` and answers an
//!   `X-CSRF-Token` header; `GET /item` and `POST /buy` need the cookie and `X-User-Id` naming
//!   the cookie's user, and `POST /buy` that session's CSRF token.

use crate::helpers::*;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What a session shop holds: stock, sessions (token or sid → user id), and what it saw.
#[derive(Default)]
struct Shop {
    stock: i64,
    sold: i64,
    /// email → (password, user id): the shop's accounts.
    accounts: HashMap<String, (String, String)>,
    /// token or sid → user id.
    sessions: HashMap<String, String>,
    /// sid → the CSRF token its login answered with (the cookie shop).
    csrf: HashMap<String, String>,
    logins: u64,
    /// Orders whose credentials named another user than the order's.
    wrong_user: u64,
    /// Orders refused for missing or unknown credentials.
    refused: u64,
    /// Orders bought, per user.
    bought: HashMap<String, u64>,
}

type Shared = Arc<Mutex<Shop>>;

fn reply(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

async fn reset(State(s): State<Shared>, Json(b): Json<Value>) -> Response {
    let mut s = s.lock().unwrap();
    s.stock = b["stock"].as_i64().unwrap_or(0);
    s.sold = 0;
    reply(StatusCode::OK, json!({"ok": true}))
}

async fn stock(State(s): State<Shared>) -> Response {
    let s = s.lock().unwrap();
    reply(StatusCode::OK, json!({"sold": s.sold, "stock": s.stock}))
}

/// Takes one unit for `user` (its credentials already checked), atomically.
fn buy(s: &mut Shop, user: &str) -> Response {
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

async fn jwt_login(State(s): State<Shared>, Json(b): Json<Value>) -> Response {
    let mut s = s.lock().unwrap();
    let (email, password) = (b["email"].as_str(), b["password"].as_str());
    let account = email.and_then(|e| s.accounts.get(e)).cloned();
    match account {
        Some((pw, user)) if Some(pw.as_str()) == password => {
            let token = uuid::Uuid::now_v7().simple().to_string();
            s.sessions.insert(token.clone(), user);
            s.logins += 1;
            reply(StatusCode::OK, json!({"data": {"token": token}}))
        }
        _ => reply(
            StatusCode::UNAUTHORIZED,
            json!({"error": "bad credentials"}),
        ),
    }
}

async fn jwt_buy(State(s): State<Shared>, headers: HeaderMap, Json(b): Json<Value>) -> Response {
    let mut s = s.lock().unwrap();
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let Some(user) = token.and_then(|t| s.sessions.get(t)).cloned() else {
        s.refused += 1;
        return reply(StatusCode::UNAUTHORIZED, json!({"error": "unauthorized"}));
    };
    if b["user_id"].as_str() != Some(user.as_str()) {
        s.wrong_user += 1;
        return reply(StatusCode::FORBIDDEN, json!({"error": "not your token"}));
    }
    buy(&mut s, &user)
}

/// The JWT shop with `accounts` (email, password, user id).
async fn spawn_jwt(accounts: &[(String, String, String)]) -> (String, Shared) {
    let shop = Shared::default();
    for (email, pw, user) in accounts {
        let mut s = shop.lock().unwrap();
        s.accounts.insert(email.clone(), (pw.clone(), user.clone()));
    }
    let app = Router::new()
        .route("/api/reset", post(reset))
        .route("/api/login", post(jwt_login))
        .route("/api/buy", post(jwt_buy))
        .route("/api/stock", get(stock))
        .route(
            "/api/frozen",
            get(|| async { Json(json!({"sold": 0, "stock": 20})) }),
        )
        .with_state(shop.clone());
    (serve(app).await, shop)
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// The sale every scenario here runs: 60 buyers for 20 units, nobody pays or cancels.
const SALE: &str = r#"
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

/// The JWT shop's mapping, with `login` (the `[target.login]` table, or none) added.
fn jwt_scenario(dir: &std::path::Path, login: &str) -> String {
    let text = format!(
        r#"{SALE}
[target]
ip_header = ""
headers = {{ Authorization = "Bearer {{token}}" }}
setup = {{ method = "POST", path = "/api/reset", body = '{{"stock": {{stock}}}}' }}
order = {{ method = "POST", path = "/api/buy", body = '{{"user_id": "{{user_id}}"}}' }}
order_id_field = "order_id"
outcomes = [
  {{ status = ["201"], outcome = "created" }},
  {{ status = ["409"], field = "error", equals = "sold_out", outcome = "sold_out" }},
  {{ status = ["4xx"], outcome = "invalid" }},
  {{ status = ["5xx"], outcome = "server_error" }},
]
[target.oracle]
url = "/api/stock"
{login}
"#
    );
    let file = dir.join("jwt.toml");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

const JWT_LOGIN: &str = r#"[target.login]
method = "POST"
path = "/api/login"
body = '{"email": "{email}", "password": "{password}"}'
extract = { token = "data.token" }
concurrency = 8
"#;

/// 60 accounts: user ids 1000.., their emails and passwords; `wrong` of them with a password
/// the shop does not know.
fn accounts(wrong: usize) -> Vec<(String, String, String)> {
    (0..60)
        .map(|i| {
            let user = format!("{}", 1000 + i);
            let pw = if i < wrong {
                "nope".to_string()
            } else {
                format!("pw-{i}")
            };
            (format!("u{i}@shop.test"), pw, user)
        })
        .collect()
}

/// The buyers' CSV (extra columns email and password) for `accounts`.
fn csv(dir: &std::path::Path, accounts: &[(String, String, String)]) -> String {
    let mut text = String::from("user_id,email,device_id,ip,password\n");
    for (i, (email, pw, user)) in accounts.iter().enumerate() {
        text.push_str(&format!("{user},{email},dev-{i},10.0.0.{},{pw}\n", i + 1));
    }
    let file = dir.join("buyers.csv");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

#[tokio::test]
async fn buyers_who_log_in_before_the_sale_order_with_their_own_token_and_the_gate_passes() {
    // Arrange
    let accounts = accounts(0);
    let (base, shop) = spawn_jwt(&accounts).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = jwt_scenario(tmp.path(), JWT_LOGIN);
    let buyers = csv(tmp.path(), &accounts);

    // Act
    let out = tmp.path().join("out");
    let run = against(
        "gate",
        &base,
        &scenario,
        &out,
        &["--buyers-csv", &buyers, "--max-send-lag-ms", "10000"],
    )
    .await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(&out)["runs"][0];
    let login = &r["login"];
    assert_eq!(
        (
            &login["when"],
            &login["sent"],
            &login["ok"],
            &login["failed"]
        ),
        (&json!("before_sale"), &json!(60), &json!(60), &json!(0)),
        "{login}"
    );
    assert!(login["seconds"].as_f64().unwrap() > 0.0, "{login}");
    assert!(
        r["requests"].get("login").is_none(),
        "logins before the sale stay out of the sale's figures: {}",
        r["requests"]
    );
    let orders = &r["requests"]["order"]["outcomes"];
    assert_eq!(orders["created"], 20, "{orders}");
    assert_eq!(orders["sold_out"], 40, "{orders}");
    assert_eq!(r["error_rate"], 0.0);
    let s = shop.lock().unwrap();
    assert_eq!(s.logins, 60);
    assert_eq!(s.wrong_user, 0, "every order carried its own buyer's token");
    assert_eq!(s.refused, 0);
    assert_eq!(s.bought.values().sum::<u64>(), 20);
    assert!(
        s.bought.keys().all(|u| u.parse::<u32>().is_ok()),
        "the CSV's ids"
    );
}

#[tokio::test]
async fn without_the_login_step_every_order_is_unauthorized_and_said_to_be() {
    // Arrange: the same shop, no [target.login]: the header carries a token the shop never
    // issued.
    let accounts = accounts(0);
    let (base, shop) = spawn_jwt(&accounts).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = jwt_scenario(tmp.path(), "");
    let text = std::fs::read_to_string(&scenario).unwrap();
    std::fs::write(&scenario, text.replace("{token}", "not-a-token")).unwrap();
    let buyers = csv(tmp.path(), &accounts);

    // Act
    let out = tmp.path().join("out");
    let run = against("attack", &base, &scenario, &out, &["--buyers-csv", &buyers]).await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(&out)["runs"][0];
    let orders = &r["requests"]["order"]["outcomes"];
    assert_eq!(orders["unauthorized"], 60, "{orders}");
    assert_eq!(r["error_rate"], 1.0, "unauthorized is an error");
    assert_eq!(r["sold"], 0);
    let notes = r["client_notes"].to_string();
    assert!(
        notes.contains("60 order attempts were answered 401/403 (unauthorized)")
            && notes.contains("set target.login / headers"),
        "{notes}"
    );
    assert_eq!(shop.lock().unwrap().refused, 60);
}

#[tokio::test]
async fn a_placeholder_nobody_provides_is_refused_before_anything_is_sent() {
    // Arrange: {token} is named, but no login extracts it and the CSV has no such column.
    let (base, shop) = spawn_jwt(&accounts(0)).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = jwt_scenario(tmp.path(), "");

    // Act
    let run = against("attack", &base, &scenario, tmp.path(), &["--dry-run"]).await;

    // Assert
    assert_eq!(run.code, 2, "{}", run.both());
    for part in ["target.headers.Authorization", "{token}", "{user_id}"] {
        assert!(run.stderr.contains(part), "{part}: {}", run.both());
    }
    assert_eq!(shop.lock().unwrap().logins, 0);
}

#[tokio::test]
async fn most_logins_failing_fails_the_run_and_the_report_shows_why_with_a_body() {
    // Arrange: the extract path does not exist in the shop's answer.
    let accounts = accounts(0);
    let (base, shop) = spawn_jwt(&accounts).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = jwt_scenario(tmp.path(), &JWT_LOGIN.replace("data.token", "data.jwt"));
    let buyers = csv(tmp.path(), &accounts);

    // Act
    let out = tmp.path().join("out");
    let run = against(
        "gate",
        &base,
        &scenario,
        &out,
        &["--buyers-csv", &buyers, "--max-send-lag-ms", "10000"],
    )
    .await;

    // Assert
    assert_eq!(run.code, 1, "{}", run.both());
    assert!(run.both().contains("login_failures"), "{}", run.both());
    let r = &only_report(&out)["runs"][0];
    let f = &r["login"]["failures"][0];
    assert_eq!(f["count"], 60, "{f}");
    assert!(
        f["reason"]
            .as_str()
            .unwrap()
            .contains("target.login.extract.token: `data.jwt` is not in the answer"),
        "{f}"
    );
    assert!(f["sample"].as_str().unwrap().contains("token"), "{f}");
    assert_eq!(
        r["order_attempts"], 0,
        "a buyer whose login failed does not order"
    );
    assert_eq!(shop.lock().unwrap().refused, 0);
    let md = std::fs::read_to_string(only_report_dir(&out).join("report.md")).unwrap();
    assert!(
        md.contains("LOGIN FAILED") && md.contains("login (before_sale): 60 sent, 0 ok, 60 failed"),
        "{md}"
    );

    // The probe names the step and shows the body too.
    let probe = against(
        "attack",
        &base,
        &scenario,
        tmp.path(),
        &["--probe", "--buyers-csv", &buyers],
    )
    .await;
    assert_eq!(probe.code, 1, "{}", probe.both());
    assert!(
        probe.stdout.contains(
            "LOGIN FAILED: target.login.extract.token: `data.jwt` is not in the answer; the body: {\"data\":{\"token\""
        ),
        "{}",
        probe.both()
    );
}

#[tokio::test]
async fn the_probe_logs_the_csvs_first_buyer_in_and_says_it_bought_a_real_unit() {
    // Arrange
    let accounts = accounts(0);
    let (base, shop) = spawn_jwt(&accounts).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = jwt_scenario(tmp.path(), JWT_LOGIN);
    let buyers = csv(tmp.path(), &accounts);

    // Act
    let run = against(
        "attack",
        &base,
        &scenario,
        tmp.path(),
        &["--probe", "--buyers-csv", &buyers],
    )
    .await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    for line in [
        "as buyer \"1000\"",
        "login   POST /api/login → 200",
        "extracted {token} = ",
        "before the order: ",
        "sold 0, stock 20",
        "(sold +1, stock -1 since before the order)",
        "NOTE: this probe bought a real unit of item 1",
    ] {
        assert!(run.stdout.contains(line), "{line:?}: {}", run.both());
    }
    {
        let s = shop.lock().unwrap();
        assert_eq!(
            s.bought.get("1000"),
            Some(&1),
            "the CSV's first buyer bought"
        );
        assert_eq!(s.wrong_user, 0);
    }

    // An oracle that does not move is warned about.
    let text = std::fs::read_to_string(&scenario).unwrap();
    std::fs::write(&scenario, text.replace("/api/stock", "/api/frozen")).unwrap();
    let frozen = against(
        "attack",
        &base,
        &scenario,
        tmp.path(),
        &["--probe", "--buyers-csv", &buyers],
    )
    .await;
    assert!(
        frozen
            .stdout
            .contains("WARNING: the oracle's reading did not move"),
        "{}",
        frozen.both()
    );
}

// The cookie shop.

/// The (sid, user) of a request's session cookie, when its `X-User-Id` names that user.
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
    let run = against(
        "gate",
        &base,
        scenario.to_str().unwrap(),
        &out,
        &["--max-send-lag-ms", "10000"],
    )
    .await;

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

#[tokio::test]
async fn a_setup_list_is_sent_in_order_and_a_failing_step_is_named() {
    // Arrange: the second set-up request goes to a path the shop does not have.
    let accounts = accounts(0);
    let (base, shop) = spawn_jwt(&accounts).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = jwt_scenario(tmp.path(), JWT_LOGIN);
    let text = std::fs::read_to_string(&scenario).unwrap().replace(
        "setup = { method = \"POST\", path = \"/api/reset\", body = '{\"stock\": {stock}}' }",
        "setup = [\n  { method = \"POST\", path = \"/api/reset\", body = '{\"stock\": {stock}}' },\n  \
         { method = \"POST\", path = \"/api/nope\" },\n]",
    );
    std::fs::write(&scenario, text).unwrap();
    let buyers = csv(tmp.path(), &accounts);

    // Act
    let run = against(
        "attack",
        &base,
        &scenario,
        tmp.path(),
        &["--buyers-csv", &buyers],
    )
    .await;

    // Assert
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr
            .contains("target.setup[1]: setting up the sale at")
            && run.stderr.contains("/api/nope"),
        "{}",
        run.both()
    );
    let s = shop.lock().unwrap();
    assert_eq!(s.stock, 20, "the first step was sent");
    assert_eq!(s.logins, 0, "nothing after a failed set-up");
}
