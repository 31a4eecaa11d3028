//! redis-lua's supporting machinery on real Redis and PostgreSQL: idempotent restock, expiry
//! through the delayed queue, cancels racing the stream consumer, reconciliation and alerts,
//! the gateway, warm-up and the page cache.

use crate::helpers::*;
use axum::routing::post;
use futures_util::future::join_all;
use oversell::testing::inventory::redis_lua::{keys, ItemKeys};
use oversell::testing::inventory::Strategy;
use oversell::testing::model::{OrderStatus, SaleSetup};
use oversell::testing::store::{Backend, PersistEvent, PersistKind};
use redis::AsyncCommands;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn key(app: &TestApp, item: i64, name: &str) -> String {
    format!("{{{}:{item}}}:{name}", app.redis_prefix)
}

pub(crate) async fn metrics(app: &TestApp) -> String {
    app.metrics_text().await
}

/// Sum of a Prometheus series (all label sets matching `filter`).
pub(crate) fn metric(text: &str, name: &str, filter: &str) -> f64 {
    oversell::testing::probe::scrape::sum(
        &oversell::testing::probe::scrape::parse(text),
        name,
        Some(filter),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_release_restocks_once_even_if_the_state_is_rewound() {
    let app = spawn_app(Strategy::RedisLua, Backend::Postgres).await;
    app.setup_sale(1, 3, 1).await;
    let (_, o) = app
        .order(json!({"item_id": 1, "user_id": "a", "qty": 1}))
        .await;
    let id = o["order_id"].as_str().unwrap().to_string();
    let redis = app.app_inventory.redis().unwrap();
    let first = redis.release(&id, OrderStatus::Cancelled).await.unwrap();
    assert!(matches!(
        first,
        oversell::testing::store::Transition::Applied { restocked: 1 }
    ));
    // A duplicated message arrives after something rewound the order state: the idempotency
    // key inside the script still refuses to restock twice.
    let mut conn = redis_conn().await;
    let raw: String = conn.hget(key(&app, 1, "orders"), &id).await.unwrap();
    let rewound = raw.replace("\"cancelled\"", "\"pending_payment\"");
    let _: () = conn
        .hset(key(&app, 1, "orders"), &id, rewound)
        .await
        .unwrap();
    redis.release(&id, OrderStatus::Cancelled).await.unwrap();
    redis.release(&id, OrderStatus::Expired).await.unwrap();
    let stock: i64 = conn.get(key(&app, 1, "stock")).await.unwrap();
    assert_eq!(stock, 3, "restocked exactly once");
    let audit = app.drained_audit(1).await;
    assert_eq!(audit["db_stock"], 3, "{audit}");
    app.teardown().await;
}

#[tokio::test]
async fn duplicate_and_out_of_order_stream_delivery_leave_the_same_state() {
    let app = spawn_app(Strategy::ForUpdate, Backend::Postgres).await;
    app.setup_sale(1, 10, 1).await;
    let store = app.app_inventory.store();
    let ev = |id: &str, sid: &str, kind| PersistEvent {
        stream_id: sid.into(),
        kind,
        order_id: id.into(),
        user_id: format!("user-{id}"),
        device_id: None,
        qty: 1,
        at_ms: 1,
        idempotency_key: Some(format!("key-{id}")),
    };
    // A cancel that overtook its order (a claimed batch), then the order itself.
    let batch = vec![
        ev("1-a", "1-0", PersistKind::Cancel),
        ev("1-a", "2-0", PersistKind::Order),
    ];
    store.apply_events(1, &batch, None).await.unwrap();
    // Normal order then pay, delivered twice (consumer died between commit and XACK).
    let batch2 = vec![
        ev("1-b", "3-0", PersistKind::Order),
        ev("1-b", "4-0", PersistKind::Pay),
    ];
    let first = store.apply_events(1, &batch2, None).await.unwrap();
    let replay = store.apply_events(1, &batch2, None).await.unwrap();
    assert_eq!(first.inserted, 1);
    assert_eq!(replay.inserted, 0, "{replay:?}");
    let item = store.item(1).await.unwrap().unwrap();
    assert_eq!(item.stock, 9, "only the paid order holds a unit");
    let a = store.order("1-a").await.unwrap().unwrap();
    assert_eq!(a.status, OrderStatus::Cancelled);
    assert_eq!(
        a.idempotency_key.as_deref(),
        Some("key-1-a"),
        "the late order event brings the key its cancel lacked"
    );
    let b = store.order("1-b").await.unwrap().unwrap();
    assert_eq!(b.status, OrderStatus::Paid);
    assert_eq!(b.idempotency_key.as_deref(), Some("key-1-b"));
    // No mark was proven: every applied id is recorded above the mark, none twice.
    let snap = store.reconcile_snapshot(1).await.unwrap().unwrap();
    assert_eq!(snap.mark, "0-0");
    assert_eq!(snap.applied_above, ["1-0", "2-0", "3-0", "4-0"]);
    // Once everything up to 4-0 is proven acknowledged, the mark covers it and the list empties.
    assert_eq!(store.advance_mark(1, "4-0").await.unwrap(), "4-0");
    let snap = store.reconcile_snapshot(1).await.unwrap().unwrap();
    assert_eq!((snap.mark.as_str(), snap.applied_above.len()), ("4-0", 0));
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpaid_order_expires_after_the_payment_timeout_and_is_restocked() {
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.redis.payment_timeout = Duration::from_millis(800);
    config.inventory.payment_timeout = Duration::from_millis(800);
    config.pipeline.expiry_every = Duration::from_millis(100);
    let app = spawn_with(config).await;
    app.setup_sale(1, 2, 1).await;
    let (_, unpaid) = app
        .order(json!({"item_id": 1, "user_id": "walks-away", "qty": 1}))
        .await;
    let (_, paid) = app
        .order(json!({"item_id": 1, "user_id": "pays", "qty": 1}))
        .await;
    assert_eq!(
        app.order_action(paid["order_id"].as_str().unwrap(), "pay")
            .await
            .0,
        200
    );
    let (s, _) = app
        .order(json!({"item_id": 1, "user_id": "late", "qty": 1}))
        .await;
    assert_eq!(s, 409, "sold out while the unpaid order holds its unit");
    let mut audit = Value::Null;
    for _ in 0..60 {
        audit = app.drained_audit(1).await;
        if audit["orders_by_status"]["expired"] == 1 && audit["db_stock"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(audit["orders_by_status"]["expired"], 1, "{audit}");
    assert_eq!(audit["orders_by_status"]["paid"], 1, "{audit}");
    assert_eq!(audit["redis_stock"], 1, "{audit}");
    assert_eq!(audit["db_stock"], 1, "{audit}");
    // The restocked unit can be bought again; paying the expired order is refused.
    let (s, _) = app
        .order(json!({"item_id": 1, "user_id": "late", "qty": 1}))
        .await;
    assert_eq!(s, 201);
    assert_eq!(
        app.order_action(unpaid["order_id"].as_str().unwrap(), "pay")
            .await
            .0,
        409
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_racing_the_stream_consumer_end_consistent() {
    let app = Arc::new(spawn_app(Strategy::RedisLua, Backend::Postgres).await);
    app.setup_sale(1, 100, 1).await;
    // Order and cancel back to back: most cancels reach Redis before the consumer has
    // persisted the order.
    let tasks = (0..60).map(|i| {
        let app = app.clone();
        tokio::spawn(async move {
            let (s, o) = app
                .order(json!({"item_id": 1, "user_id": format!("u{i}"), "qty": 1}))
                .await;
            assert_eq!(s, 201);
            let id = o["order_id"].as_str().unwrap().to_string();
            let (s, c) = app.order_action(&id, "cancel").await;
            assert_eq!(s, 200, "{c}");
            assert_eq!(c["restocked"], 1);
        })
    });
    for r in join_all(tasks).await {
        r.unwrap();
    }
    let audit = app.drained_audit(1).await;
    assert_eq!(audit["orders_by_status"]["cancelled"], 60, "{audit}");
    assert_eq!(audit["db_stock"], 100, "{audit}");
    assert_eq!(audit["redis_stock"], 100, "{audit}");
    Arc::into_inner(app).unwrap().teardown().await;
}

/// A webhook receiver on a free loopback port; returns its URL and what it received.
pub(crate) async fn webhook() -> (String, Arc<Mutex<Vec<Value>>>) {
    let got: Arc<Mutex<Vec<Value>>> = Arc::default();
    let sink = got.clone();
    let router = axum::Router::new().route(
        "/alert",
        post(move |body: axum::Json<Value>| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(body.0);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/alert", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (url, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconciliation_repairs_an_injected_residual_and_alerts_past_the_threshold() {
    let (hook, received) = webhook().await;
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.pipeline.reconcile.alert_threshold = 2;
    config.pipeline.reconcile.webhook = Some(hook);
    // Reads go to a "replica" URL (the same server here): the job never needs the primary.
    config.replica_database_url = Some(config.database_url.clone());
    let app = spawn_with(config).await;
    app.setup_sale(1, 10, 1).await;
    for u in ["a", "b", "c"] {
        assert_eq!(
            app.order(json!({"item_id": 1, "user_id": u, "qty": 1}))
                .await
                .0,
            201
        );
    }
    let mut conn = redis_conn().await;
    // A small drift (under the threshold): corrected, no alert.
    let _: i64 = conn.incr(key(&app, 1, "stock"), 1).await.unwrap();
    let pass: Value = app
        .client
        .post(format!("{}/api/items/1/reconcile", app.address))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pass["residual"], 1, "{pass}");
    assert_eq!(pass["corrected"], true);
    assert_eq!(pass["alerted"], false);
    assert_eq!(pass["source"], "replica");
    // A failover lost 5 units' worth of writes: corrected and a person is alerted.
    let _: i64 = conn.incr(key(&app, 1, "stock"), -5).await.unwrap();
    let pass: Value = app
        .client
        .post(format!("{}/api/items/1/reconcile", app.address))
        .header("content-type", "application/json")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(pass["residual"], -5, "{pass}");
    assert_eq!(pass["alerted"], true);
    let stock: i64 = conn.get(key(&app, 1, "stock")).await.unwrap();
    assert_eq!(
        stock, 7,
        "Redis is back to database stock minus nothing in flight"
    );
    let audit = app.drained_audit(1).await;
    assert_eq!(audit["db_stock"], 7);
    let hooks = received.lock().unwrap().clone();
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!(hooks[0]["pass"]["residual"], -5);
    let m = metrics(&app).await;
    assert!(
        metric(&m, "oversell_reconcile_alerts_total", "") >= 1.0,
        "{m}"
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_turns_away_duplicates_and_bursts_before_any_stock_moves() {
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.redis.gateway.ip_rate_per_s = 0.01;
    config.redis.gateway.ip_burst = 5.0;
    // The test client is the proxy in front: its X-Forwarded-For names the buyers.
    config.trusted_proxies =
        oversell::testing::shop::TrustedProxies::new(vec!["127.0.0.1/32".parse().unwrap()]);
    let app = Arc::new(spawn_with(config).await);
    app.setup_sale(1, 100, 1).await;
    // One user fires the same order 10 times at once: one gets it.
    let dup = (0..10).map(|_| {
        let app = app.clone();
        tokio::spawn(async move {
            let r = app
                .client
                .post(format!("{}/api/orders", app.address))
                .header("x-forwarded-for", "198.51.100.1")
                .json(&json!({"item_id": 1, "user_id": "bot", "qty": 1, "device_id": "dev-bot"}))
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        })
    });
    let statuses: Vec<u16> = join_all(dup)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        1,
        "{statuses:?}"
    );
    // 20 different accounts behind one address, in a burst: the per-IP bucket admits its size.
    let burst = (0..20).map(|i| {
        let app = app.clone();
        tokio::spawn(async move {
            let r = app
                .client
                .post(format!("{}/api/orders", app.address))
                .header("x-forwarded-for", "203.0.113.9")
                .json(&json!({"item_id": 1, "user_id": format!("acct-{i}"), "qty": 1}))
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        })
    });
    let statuses: Vec<u16> = join_all(burst)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 201).count(),
        5,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        15,
        "{statuses:?}"
    );
    let audit = app.drained_audit(1).await;
    assert_eq!(
        audit["redis_stock"], 94,
        "only admitted orders moved stock: {audit}"
    );
    assert_eq!(audit["db_stock"], 94, "{audit}");
    // Refused requests never reached the Lua script.
    assert_eq!(app.app_inventory.redis().unwrap().prededuct_calls(), 6);
    Arc::into_inner(app).unwrap().teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_for_an_item_never_warmed_is_refused_not_lazily_loaded() {
    let app = spawn_app(Strategy::RedisLua, Backend::Postgres).await;
    // The sale exists in the database only (set up behind the shop's back).
    let setup = SaleSetup {
        stock: 5,
        name: "x".into(),
        price_cents: 1,
        purchase_limit: 1,
    };
    app.app_inventory
        .store()
        .setup_sale(2, &setup)
        .await
        .unwrap();
    let (s, body) = app
        .order(json!({"item_id": 2, "user_id": "u", "qty": 1}))
        .await;
    assert_eq!(
        (s, body["error"].as_str()),
        (503, Some("not_warmed")),
        "{body}"
    );
    let mut conn = redis_conn().await;
    let stock: Option<i64> = conn.get(key(&app, 2, "stock")).await.unwrap();
    assert_eq!(stock, None, "nothing was loaded into Redis");
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_product_page_is_served_from_cache_and_says_how_fresh_it_is() {
    let app = spawn_app(Strategy::RedisLua, Backend::Postgres).await;
    app.setup_sale(1, 5, 1).await;
    let get = || async {
        app.client
            .get(format!("{}/api/items/1", app.address))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    };
    let first = get().await;
    assert_eq!(first["stock"], 5);
    assert_eq!(
        app.order(json!({"item_id": 1, "user_id": "u", "qty": 1}))
            .await
            .0,
        201
    );
    let cached = get().await;
    assert_eq!(cached["stock_source"], "cache");
    assert!(cached["stock_age_ms"].as_u64().unwrap() < 1000, "{cached}");
    let m = metrics(&app).await;
    for name in [
        "oversell_orders_total",
        "oversell_prededuct_total",
        "oversell_http_request_duration_seconds",
        "oversell_db_pool_in_use",
    ] {
        assert!(m.contains(name), "/metrics lacks {name}");
    }
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancels_expiries_and_a_second_wave_end_with_conservation_and_no_oversell() {
    let text = std::fs::read_to_string("scenarios/smoke.toml")
        .unwrap()
        .replace(
            "pay = 0.85\ncancel = 0.05\nabandon = 0.1",
            "pay = 0.4\ncancel = 0.3\nabandon = 0.3",
        )
        .replace("payment_timeout = \"15m\"", "payment_timeout = \"1s\"")
        .replace("at_s = 3.0", "at_s = 2.5")
        .replace("window_s = 1.0", "window_s = 2.0");
    let scenario = oversell::testing::traffic::Scenario::parse(&text).unwrap();
    let out = tempfile::tempdir().unwrap();
    let db = fresh_db_url(Backend::Postgres);
    let cells = vec![oversell::testing::runner::Cell {
        strategy: Strategy::RedisLua,
        backend: Backend::Postgres,
        database_url: db.clone(),
    }];
    let plan = oversell::testing::runner::RunPlan::reference(
        scenario,
        "smoke-with-expiries".into(),
        cells,
        redis_url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        out.path().to_path_buf(),
    );

    let (report, _) = oversell::testing::runner::execute(&plan).await.unwrap();
    drop_database(&db).await;
    let run = &report.runs[0];
    let f = &run.findings;
    assert_eq!(f.oversell, Some(0), "{}", f.verdict);
    assert_eq!(f.conservation_drift, Some(0), "{}", f.verdict);
    assert_eq!(f.redis_drift, Some(0), "{}", f.verdict);
    assert_eq!(f.lost_acks, Some(0));
    assert_eq!(f.duplicate_buyers, Some(0));
    assert!(
        f.orders_by_status["cancelled"] > 0,
        "{:?}",
        f.orders_by_status
    );
    assert!(
        f.orders_by_status["expired"] > 0,
        "{:?}",
        f.orders_by_status
    );
    assert!(
        f.acknowledged > 10,
        "restocked units were bought again: {} acks for 10 units",
        f.acknowledged
    );
    let m = run.measurements.as_ref().unwrap();
    assert!(
        m.acks().any(|a| a.at_ms >= 2500),
        "the second wave bought restocked units"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_redis_benchmark_runs_both_phases_and_every_call_deducts_one_unit() {
    // A measurement, not a timing assertion: both phases ran and their accounting holds.
    let r = oversell::testing::bench::redis::redis(&oversell::testing::bench::RedisBench {
        redis_url: redis_url(),
        seconds: 1,
        concurrency: 8,
    })
    .await
    .expect("bench runs (redis-benchmark comes with redis-tools)");
    assert!(r.ours_ops > 0 && r.baseline_ops > 0, "{r:?}");
    assert_eq!(r.deducted, (r.ours_ops + r.baseline_ops) as i64, "{r:?}");
    assert!(r.ratio > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_left_by_earlier_processes_are_pruned_once_idle_and_empty() {
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.pipeline.claim_idle = Duration::from_millis(300);
    config.pipeline.consumers = 1;
    let app = spawn_with(config).await;
    app.setup_sale(1, 5, 1).await;
    let mut conn = redis_conn().await;
    let events = key(&app, 1, "events");
    let _: i64 = redis::cmd("XGROUP")
        .arg("CREATECONSUMER")
        .arg(&events)
        .arg("persist")
        .arg("shop-of-yesterday")
        .query_async(&mut conn)
        .await
        .unwrap();
    let mut names: Vec<String> = Vec::new();
    for _ in 0..50 {
        let info: redis::streams::StreamInfoConsumersReply =
            conn.xinfo_consumers(&events, "persist").await.unwrap();
        names = info.consumers.into_iter().map(|c| c.name).collect();
        if !names.iter().any(|n| n == "shop-of-yesterday") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!names.iter().any(|n| n == "shop-of-yesterday"), "{names:?}");
    assert_eq!(names.len(), 1, "only the live consumer remains: {names:?}");
    // And it still persists orders.
    assert_eq!(
        app.order(json!({"item_id": 1, "user_id": "u", "qty": 1}))
            .await
            .0,
        201
    );
    assert_eq!(app.drained_audit(1).await["sold"], 1);
    app.teardown().await;
}

#[tokio::test]
async fn cleaning_a_prefix_deletes_all_its_keys_and_no_others() {
    let prefix = format!("t-{}", uuid::Uuid::now_v7().simple());
    let neighbour = format!("{prefix}-x");
    let mut conn = redis_conn().await;
    // More keys than one SCAN page, and a neighbour whose prefix starts the same way.
    let mut pipe = redis::pipe();
    for item in 0..2500 {
        pipe.set(ItemKeys::new(&prefix, item).stock, 1).ignore();
    }
    pipe.set(ItemKeys::new(&neighbour, 1).stock, 1).ignore();
    let _: () = pipe.query_async(&mut conn).await.unwrap();

    keys::delete_prefix(&redis_url(), &prefix).await;

    let left: i64 = redis::cmd("EXISTS")
        .arg(ItemKeys::new(&prefix, 0).stock)
        .arg(ItemKeys::new(&prefix, 2499).stock)
        .query_async(&mut conn)
        .await
        .unwrap();
    let kept: Option<i64> = conn.get(ItemKeys::new(&neighbour, 1).stock).await.unwrap();
    keys::delete_prefix(&redis_url(), &neighbour).await;
    assert_eq!(left, 0, "every key under the prefix is gone");
    assert_eq!(kept, Some(1), "a neighbouring prefix is left alone");
}
