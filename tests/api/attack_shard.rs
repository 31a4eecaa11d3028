//! `attack --shard i/N`: three attack processes against one local target (a recording shop on
//! the reference API, in process) send, together, exactly the buyers one `attack` process
//! sends (the same idempotency keys, user ids and addresses, each at its scheduled time), and
//! `oversell merge` combines their folders into one report judged by the clients' evidence.

use crate::helpers::*;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{post, put};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// 150 buyers over 2 s for 15 units; some view first, a few bots re-submit.
const SCENARIO: &str = r#"
name = "attack-shards"
[item]
id = 1
stock = 15
[buyers]
count = 150
seed = 21
arrival = "uniform"
window_s = 2.0
[browse]
view_share = 0.3
views = [1, 1]
think_ms = [10, 50]
[bots]
share = 0.05
resubmits = 2
interval_ms = [5, 20]
[after_order]
pay = 0.8
abandon = 0.2
think_ms = [20, 100]
"#;

/// One order request as the target received it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Received {
    key: String,
    user: String,
    ip: String,
}

#[derive(Clone, Default)]
struct Recording {
    stock: Arc<Mutex<i64>>,
    /// Every order request, with when it arrived.
    orders: Arc<Mutex<Vec<(Received, Instant)>>>,
    setups: Arc<Mutex<u32>>,
}

async fn setup(State(r): State<Recording>, Json(b): Json<Value>) -> Json<Value> {
    *r.stock.lock().unwrap() = b["stock"].as_i64().unwrap_or(0);
    *r.setups.lock().unwrap() += 1;
    Json(json!({"ok": true}))
}

async fn view(Path(id): Path<i64>, State(r): State<Recording>) -> Json<Value> {
    Json(json!({"id": id, "stock": *r.stock.lock().unwrap()}))
}

async fn order(
    State(r): State<Recording>,
    headers: HeaderMap,
    Json(b): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let header = |h: &str| {
        headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    let got = Received {
        key: header("idempotency-key"),
        user: b["user_id"].as_str().unwrap_or_default().to_string(),
        ip: header("x-forwarded-for"),
    };
    let id = format!("o-{}", got.key);
    r.orders.lock().unwrap().push((got, Instant::now()));
    let mut stock = r.stock.lock().unwrap();
    if *stock <= 0 {
        return (StatusCode::CONFLICT, Json(json!({"error": "sold_out"})));
    }
    *stock -= 1;
    (
        StatusCode::CREATED,
        Json(json!({"order_id": id, "status": "pending_payment"})),
    )
}

async fn paid() -> Json<Value> {
    Json(json!({"status": "paid"}))
}

async fn spawn_recording() -> (String, Recording) {
    let state = Recording::default();
    let app = Router::new()
        .route("/api/items/{id}", put(setup).get(view))
        .route("/api/orders", post(order))
        .route("/api/orders/{id}/pay", post(paid))
        .route("/api/orders/{id}/cancel", post(paid))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, state)
}

/// `buyer-attempt` of an idempotency key `ovs-<run>-<buyer>-<attempt>` (the run part is each
/// process's own, so that two runs never share a key).
fn attempt(key: &str) -> String {
    let mut parts = key.rsplitn(3, '-');
    let (n, buyer) = (parts.next().unwrap(), parts.next().unwrap());
    format!("{buyer}-{n}")
}

/// Each order request's arrival, in ms after the earliest one, by its buyer and attempt.
fn arrivals(orders: &[(Received, Instant)]) -> BTreeMap<String, (Received, u128)> {
    let first = orders.iter().map(|(_, t)| *t).min().expect("some orders");
    orders
        .iter()
        .map(|(r, t)| {
            let who = Received {
                key: attempt(&r.key),
                ..r.clone()
            };
            (who.key.clone(), (who, (*t - first).as_millis()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_attack_shards_send_exactly_the_buyers_of_one_attack_and_merge() {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("attack-shards.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let scenario = scenario.to_str().unwrap().to_string();
    let out = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();

    // One process sends the whole schedule.
    let (single_url, single) = spawn_recording().await;
    let ran = oversell_cli(
        &[
            "attack",
            "--target",
            &single_url,
            "--scenario",
            &scenario,
            "--out",
            &out("single"),
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.both());
    let single_report = only_report(std::path::Path::new(&out("single")));

    // Three shards, opening together, at a target of their own.
    let (sharded_url, sharded) = spawn_recording().await;
    let open_at = (chrono::Utc::now() + chrono::Duration::seconds(4))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut shards = Vec::new();
    for i in 0..3 {
        let (url, scenario, dir, open_at) = (
            sharded_url.clone(),
            scenario.clone(),
            out(&format!("shard{i}")),
            open_at.clone(),
        );
        shards.push(tokio::spawn(async move {
            let shard = format!("{i}/3");
            oversell_cli(
                &[
                    "attack",
                    "--target",
                    &url,
                    "--scenario",
                    &scenario,
                    "--shard",
                    &shard,
                    "--open-at",
                    &open_at,
                    "--out",
                    &dir,
                    "--quiet",
                ],
                &[],
            )
            .await
        }));
    }
    for s in shards {
        let ran = s.await.unwrap();
        assert_eq!(ran.code, 0, "{}", ran.both());
        assert!(ran.stdout.contains("attack shard"), "{}", ran.both());
    }
    assert_eq!(*sharded.setups.lock().unwrap(), 1, "shard 0 alone set up");

    let one = arrivals(&single.orders.lock().unwrap());
    let three = arrivals(&sharded.orders.lock().unwrap());
    assert_eq!(
        one.keys().collect::<Vec<_>>(),
        three.keys().collect::<Vec<_>>(),
        "the same order attempts (buyer and attempt of each idempotency key)"
    );
    for (key, (who, at)) in &one {
        let (who3, at3) = &three[key];
        assert_eq!(who, who3, "{key}: the same buyer (user id, address)");
        // Arrivals follow the one seeded schedule (loose: the machine is shared).
        assert!(
            at.abs_diff(*at3) < 400,
            "{key}: {at} ms in one process, {at3} ms across three shards"
        );
    }

    // merge: one report, as if one process had sent everything.
    let merged_out = out("merged");
    let mut args = vec!["merge"];
    let dirs: Vec<String> = (0..3).map(|i| out(&format!("shard{i}"))).collect();
    args.extend(dirs.iter().map(String::as_str));
    args.extend(["--out", &merged_out, "--quiet"]);
    let ran = oversell_cli(&args, &[]).await;
    assert_eq!(ran.code, 0, "{}", ran.both());
    let merged = only_report(std::path::Path::new(&merged_out));
    let (m, s) = (&merged["runs"][0], &single_report["runs"][0]);
    assert_eq!(m["buyers"], 150);
    assert_eq!(
        m["requests"]["order"]["total"],
        s["requests"]["order"]["total"]
    );
    assert_eq!(
        m["requests"]["order"]["total"].as_u64().unwrap(),
        one.len() as u64
    );
    assert_eq!(m["acknowledged"], 15, "{}", m["verdict"]);
    assert_eq!(m["client_oversell"], s["client_oversell"]);
    assert_eq!(
        (&m["shop"], &m["oracle"]),
        (&json!("foreign"), &json!("none")),
        "{m}"
    );
    assert!(
        merged["sources"]["shards"]
            .as_str()
            .unwrap()
            .contains("clients' evidence"),
        "{}",
        merged["sources"]
    );
}
