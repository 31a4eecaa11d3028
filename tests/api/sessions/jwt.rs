//! The JWT login shop: a login before the sale, tokens per buyer, unauthorized without them,
//! failed logins, placeholders checked, the probe, set-up lists.

use super::{buy, reply, reset, serve, stock, Shared, SALE};
use crate::helpers::*;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

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
    let run = against("gate", &base, &scenario, &out, &["--buyers-csv", &buyers]).await;

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
async fn a_dry_run_counts_the_logins_it_would_send() {
    let accounts = accounts(0);
    let (base, shop) = spawn_jwt(&accounts).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = jwt_scenario(tmp.path(), JWT_LOGIN);
    let buyers = csv(tmp.path(), &accounts);

    let run = against(
        "attack",
        &base,
        &scenario,
        tmp.path(),
        &["--dry-run", "--buyers-csv", &buyers],
    )
    .await;

    assert_eq!(run.code, 0, "{}", run.both());
    assert!(
        run.stdout
            .contains("plus 60 logins (target.login) before the sale opens, 8 at a time"),
        "{}",
        run.both()
    );
    assert_eq!(shop.lock().unwrap().logins, 0, "a dry run sends nothing");
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
    let run = against("gate", &base, &scenario, &out, &["--buyers-csv", &buyers]).await;

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

#[tokio::test]
async fn a_bad_login_table_is_refused_with_the_file_and_the_field() {
    let (base, shop) = spawn_jwt(&accounts(0)).await;
    let tmp = tempfile::tempdir().unwrap();
    let scenario = jwt_scenario(tmp.path(), &format!("{JWT_LOGIN}when = \"at_noon\"\n"));

    let run = against("attack", &base, &scenario, tmp.path(), &["--dry-run"]).await;

    assert_eq!(run.code, 2, "{}", run.both());
    for part in [
        "jwt.toml",
        "target.login.when",
        "before_sale, on_arrival",
        "\"at_noon\"",
    ] {
        assert!(run.stderr.contains(part), "{part}: {}", run.both());
    }
    assert_eq!(shop.lock().unwrap().logins, 0);
}
