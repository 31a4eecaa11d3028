//! The shop's edge: admin routes behind `--admin-token`, `X-Forwarded-For` believed only from
//! `--trusted-proxy` peers, and metric labels a client cannot invent.

use crate::helpers::*;
use oversell::testing::inventory::Strategy;
use oversell::testing::store::Backend;
use serde_json::{json, Value};

const TOKEN: &str = "s3cret-admin-token";

async fn send(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut rb = app.client.request(method, format!("{}{path}", app.address));
    if let Some(t) = token {
        rb = rb.bearer_auth(t);
    }
    if let Some(b) = body {
        rb = rb.json(&b);
    }
    let r = rb.send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

fn sale(stock: i64) -> Option<Value> {
    Some(json!({"stock": stock, "name": "tea", "purchase_limit": 1}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_refuse_callers_without_the_token_and_change_nothing() {
    use reqwest::Method;
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.admin_token = Some(TOKEN.into());
    let app = spawn_with(config).await;

    // Set-up: refused without the token or with a wrong one; nothing was created.
    for token in [None, Some("wrong"), Some("")] {
        let (s, body) = send(&app, Method::PUT, "/api/items/1", token, sale(5)).await;
        assert_eq!(
            (s, body["error"].as_str()),
            (401, Some("unauthorized")),
            "{token:?}"
        );
    }
    let (s, _) = send(&app, Method::GET, "/api/items/1", None, None).await;
    assert_eq!(s, 404, "no sale was set up");
    let (s, body) = send(&app, Method::PUT, "/api/items/1", Some(TOKEN), sale(5)).await;
    assert_eq!(s, 200, "{body}");

    // Buyers need no token.
    let (s, body) = app
        .order(json!({"item_id": 1, "user_id": "u", "qty": 1}))
        .await;
    assert_eq!(s, 201, "{body}");
    let audit = app.drained_audit(1).await;

    // Reset, rewarm and reconcile: 401 without it, and the sale is as it was.
    let put = Method::PUT;
    for (method, path) in [
        (put.clone(), "/api/items/1?reset=true"),
        (Method::POST, "/api/items/1/rewarm"),
        (Method::POST, "/api/items/1/reconcile"),
    ] {
        let body = (method == put).then(|| sale(50)).flatten();
        let (s, resp) = send(&app, method.clone(), path, None, body).await;
        assert_eq!(s, 401, "{method} {path}: {resp}");
    }
    assert_eq!(app.drained_audit(1).await, audit, "nothing changed");

    // With the token they work.
    let (s, _) = send(&app, Method::POST, "/api/items/1/rewarm", Some(TOKEN), None).await;
    assert_eq!(s, 200);
    let (s, pass) = send(
        &app,
        Method::POST,
        "/api/items/1/reconcile",
        Some(TOKEN),
        None,
    )
    .await;
    assert_eq!((s, &pass["residual"]), (200, &json!(0)));
    let r = app
        .client
        .put(format!("{}/api/items/1?reset=true", app.address))
        .json(&sale(50))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    app.teardown().await;
}

/// Ten accounts behind one real peer (127.0.0.1), each naming another address.
async fn forged_burst(app: &TestApp) -> Vec<u16> {
    let mut statuses = Vec::new();
    for i in 0..10 {
        let r = app
            .client
            .post(format!("{}/api/orders", app.address))
            .header("x-forwarded-for", format!("198.51.100.{i}"))
            .json(&json!({"item_id": 1, "user_id": format!("acct-{i}"), "qty": 1}))
            .send()
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
    }
    statuses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_x_forwarded_for_from_an_untrusted_peer_does_not_get_past_the_per_ip_limits() {
    // The per-IP bucket: 3 admissions, then (almost) nothing.
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.redis.gateway.ip_rate_per_s = 0.001;
    config.redis.gateway.ip_burst = 3.0;
    let app = spawn_with(config).await;
    app.setup_sale(1, 100, 1).await;

    let statuses = forged_burst(&app).await;

    let count = |code| statuses.iter().filter(|s| **s == code).count();
    assert_eq!((count(201), count(429)), (3, 7), "{statuses:?}");
    assert_eq!(app.drained_audit(1).await["db_stock"], 97);
    app.teardown().await;

    // The per-IP unit cap: 2 units for everyone behind the peer.
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.redis.gateway.ip_unit_cap = 2;
    let app = spawn_with(config).await;
    app.setup_sale(1, 100, 1).await;

    let statuses = forged_burst(&app).await;

    let count = |code| statuses.iter().filter(|s| **s == code).count();
    assert_eq!((count(201), count(409)), (2, 8), "{statuses:?}");
    assert_eq!(app.drained_audit(1).await["db_stock"], 98);
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invented_http_methods_share_one_metric_label() {
    let app = spawn_app(Strategy::Naive, Backend::Postgres).await;
    for m in ["BREWCOFFEE", "PROPFIND"] {
        let method = reqwest::Method::from_bytes(m.as_bytes()).unwrap();
        let _ = send(&app, method, "/healthz", None, None).await;
    }
    let _ = send(&app, reqwest::Method::GET, "/healthz", None, None).await;

    let metrics = app.metrics_text().await;

    let requests: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("oversell_http_requests_total{"))
        .collect();
    assert!(
        requests.iter().any(|l| l.contains("method=\"other\"")),
        "{requests:?}"
    );
    assert!(
        requests.iter().any(|l| l.contains("method=\"GET\"")),
        "{requests:?}"
    );
    assert!(
        !metrics.contains("BREWCOFFEE") && !metrics.contains("PROPFIND"),
        "{requests:?}"
    );
    app.teardown().await;
}
