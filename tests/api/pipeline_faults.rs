//! redis-lua's persistence under faults, on real Redis and PostgreSQL: connections killed
//! mid-sale, an order the database refuses, an id it could not store, a dead consumer under
//! steady traffic. [`Parts`] (the shop without its background pipeline) is shared with
//! `stream_bounds`.

use crate::helpers::*;
use crate::redis_lua::{metric, metrics, webhook};
use oversell::testing::inventory::redis_lua::stream::{read_dead_letters, DeadLetter};
use oversell::testing::inventory::redis_lua::{client_name, RedisLua};
use oversell::testing::inventory::{Inventory, Outcome, Strategy};
use oversell::testing::model::{Purchase, SaleSetup};
use oversell::testing::oracle::{self, DeadLetterSeen, Evidence, OracleView, Reading, Truth};
use oversell::testing::pipeline;
use oversell::testing::pipeline::consumer::Consumer;
use oversell::testing::shop::ShopConfig;
use oversell::testing::store::{Backend, PersistKind, Store};
use oversell::testing::traffic::recorder::{Ack, Measurements};
use redis::AsyncCommands;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A connection of the test's own, without a response timeout (one reply below is 100 000
/// entries long).
pub(crate) async fn redis_conn() -> redis::aio::MultiplexedConnection {
    let cfg = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    redis::Client::open(redis_url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .unwrap()
}

/// The shop's store, Redis side and inventory without its background pipeline: the test
/// drives consumers itself.
pub(crate) struct Parts {
    pub config: ShopConfig,
    pub store: Store,
    pub redis: RedisLua,
    pub inventory: Inventory,
}

impl Parts {
    pub async fn new() -> Parts {
        let config = test_config(Strategy::RedisLua, Backend::Postgres);
        let store = Store::connect(&config.database_url, &config.pool)
            .await
            .unwrap();
        let inventory = Inventory::connect(
            Strategy::RedisLua,
            store.clone(),
            &config.redis,
            config.inventory.clone(),
        )
        .await
        .unwrap();
        let redis = inventory.redis().unwrap().clone();
        Parts {
            config,
            store,
            redis,
            inventory,
        }
    }

    pub async fn sale(&self, stock: i64) {
        let setup = SaleSetup {
            stock,
            name: "test item".into(),
            price_cents: 100,
            purchase_limit: 1,
        };
        self.inventory.setup_sale(1, &setup, true).await.unwrap();
    }

    pub async fn buy(&self, user: &str) -> String {
        let p = Purchase {
            item_id: 1,
            user_id: user.into(),
            device_id: None,
            qty: 1,
            client_ip: "127.0.0.1".into(),
            idempotency_key: None,
        };
        match self.inventory.purchase(&p).await.unwrap() {
            Outcome::Reserved { order_id } => order_id,
            other => panic!("{user} was not sold a unit: {other:?}"),
        }
    }

    pub fn consumer(&self, name: &str) -> Consumer {
        Consumer::new(
            self.redis.clone(),
            self.store.clone(),
            1,
            self.config.pipeline.clone(),
            name.into(),
        )
    }

    pub async fn teardown(self) {
        self.store.close().await;
        drop_database(&self.config.database_url).await;
        delete_prefix(&self.config.redis.prefix).await;
    }
}

/// CLIENT KILLs every connection named for this shop's prefix (and only those); returns how
/// many it killed.
async fn kill_shop_connections(prefix: &str) -> usize {
    let mut conn = redis_conn().await;
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(&mut conn)
        .await
        .unwrap();
    let ours = client_name(prefix, "");
    let ids: Vec<String> = list
        .lines()
        .filter_map(|line| {
            let field = |k: &str| {
                line.split(' ')
                    .find_map(|f| f.strip_prefix(k).map(str::to_string))
            };
            let name = field("name=")?;
            name.starts_with(&ours).then(|| field("id=")).flatten()
        })
        .collect();
    for id in &ids {
        let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("ID")
            .arg(id)
            .query_async(&mut conn)
            .await;
    }
    ids.len()
}

/// Orders every user in `users`; returns the ids answered 201 (others are tolerated: a
/// request racing a killed connection may fail, and then it was not acknowledged).
async fn order_all(app: &TestApp, users: impl Iterator<Item = String>) -> Vec<String> {
    let mut acked = Vec::new();
    for u in users {
        let (s, body) = app
            .order(json!({"item_id": 1, "user_id": u, "qty": 1}))
            .await;
        if s == 201 {
            acked.push(body["order_id"].as_str().unwrap().to_string());
        }
    }
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_acknowledged_order_is_persisted_after_the_shops_redis_connections_are_killed() {
    let app = spawn_app(Strategy::RedisLua, Backend::Postgres).await;
    app.setup_sale(1, 1000, 1).await;
    let mut acked = order_all(&app, (0..20).map(|i| format!("before-{i}"))).await;
    assert_eq!(acked.len(), 20);
    app.drained_audit(1).await;

    // What a Redis restart, a failover or a proxy timeout does to the shop's connections.
    let killed = kill_shop_connections(&app.redis_prefix).await;
    assert!(
        killed >= 2,
        "the shop's and the consumer's connections: {killed}"
    );
    acked.extend(order_all(&app, (0..40).map(|i| format!("after-{i}"))).await);
    assert!(acked.len() >= 50, "purchases reconnect: {}", acked.len());

    let store = app.app_inventory.store();
    let deadline = Instant::now() + Duration::from_secs(10);
    let missing = loop {
        let in_db: std::collections::HashSet<String> = store
            .orders_for_item(1)
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.id)
            .collect();
        let missing: Vec<&String> = acked.iter().filter(|id| !in_db.contains(*id)).collect();
        if missing.is_empty() || Instant::now() > deadline {
            break missing.len();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(missing, 0, "every 201 is in the database within 10 s");
    // (The recorder is process-wide and every test sells item 1: only the counter's
    // existence is this shop's to check, not the gauge's value.)
    let m = metrics(&app).await;
    assert!(
        metric(&m, "oversell_consumer_errors_total", "") >= 1.0,
        "the lost connection was counted: {m}"
    );
    app.teardown().await;
}

fn clients(acks: &[(&str, &str)]) -> Measurements {
    let acks: Vec<Ack> = acks
        .iter()
        .enumerate()
        .map(|(i, (id, user))| Ack {
            key: None,
            order_id: Some((*id).into()),
            buyer: i,
            user_id: user.to_string(),
            device_id: String::new(),
            bot: false,
            at_ms: 0,
            sent_ms: 0,
            cancel_sent_ms: None,
            paid_ms: None,
        })
        .collect();
    let mut m = Measurements::default();
    m.set_records(&[], &acks);
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_the_database_refuses_is_dead_lettered_and_the_queue_moves_on() {
    refused_order_is_dead_lettered(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_mysql_refuses_is_dead_lettered_and_the_queue_moves_on() {
    refused_order_is_dead_lettered(Backend::Mysql).await;
}

async fn refused_order_is_dead_lettered(backend: Backend) {
    let (hook, alerts) = webhook().await;
    let mut config = test_config(Strategy::RedisLua, backend);
    config.pipeline.dead_letter_after = 2;
    config.pipeline.reconcile.webhook = Some(hook);
    let app = spawn_with(config).await;
    // The database refuses one buyer (Redis, which answers the client, does not know).
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&app.database_url).await.unwrap();
    sqlx::query("ALTER TABLE orders ADD CONSTRAINT no_mallory CHECK (user_id <> 'mallory')")
        .execute(&pool)
        .await
        .unwrap();
    app.setup_sale(1, 10, 1).await;

    // Hold the item's row lock while the orders come in, so the consumer's first batch holds
    // them all (and Mallory's pay) whatever the machine's speed.
    let mut held = pool.begin().await.unwrap();
    sqlx::query("SELECT stock FROM items WHERE id = 1 FOR UPDATE")
        .execute(&mut *held)
        .await
        .unwrap();
    let mut ids = Vec::new();
    for u in ["u1", "mallory", "u2"] {
        let (s, o) = app
            .order(json!({"item_id": 1, "user_id": u, "qty": 1}))
            .await;
        assert_eq!(s, 201, "Redis said yes to {u}");
        ids.push((o["order_id"].as_str().unwrap().to_string(), u));
    }
    let bad = ids[1].0.clone();
    // Mallory pays before the consumer gives up: the pay event follows a doomed order.
    let (s, _) = app.order_action(&bad, "pay").await;
    assert_eq!(s, 200);
    held.commit().await.unwrap();
    pool.close().await;
    let later = order_all(&app, ["u3", "u4"].map(String::from).into_iter()).await;
    assert_eq!(later.len(), 2);

    let audit = app.drained_audit(1).await;
    let store = app.app_inventory.store();
    for (id, u) in ids.iter().filter(|(_, u)| *u != "mallory") {
        assert!(store.order(id).await.unwrap().is_some(), "{u} persisted");
    }
    for id in &later {
        assert!(
            store.order(id).await.unwrap().is_some(),
            "later orders persisted"
        );
    }
    assert!(store.order(&bad).await.unwrap().is_none());
    // Mallory's unit went back: 10 - 4 sold in the database, and Redis agrees.
    assert_eq!(audit["db_stock"], 6, "{audit}");
    assert_eq!(audit["redis_stock"], 6, "{audit}");
    assert_eq!(audit["dead_letters"], 2, "the order and its pay: {audit}");

    let mut conn = redis_conn().await;
    let keys = app.app_inventory.redis().unwrap().keys(1);
    let letters: Vec<DeadLetter> = read_dead_letters(&mut conn, &keys.dead_letters, 100)
        .await
        .unwrap();
    assert_eq!(letters.len(), 2, "{letters:?}");
    let order = &letters[0];
    assert_eq!(
        (
            order.kind.map_or("", PersistKind::as_str),
            order.order_id.as_str()
        ),
        ("order", bad.as_str())
    );
    assert!(order.reason.contains("no_mallory"), "{order:?}");
    assert_eq!(order.attempts, 2);
    assert_eq!((order.was.as_str(), order.released), ("paid", 1));
    // Its pay either reached the database first (refused for the same reason) or found its
    // order dead-lettered already; either way it is set aside, not retried forever.
    assert_eq!(
        (
            letters[1].kind.map_or("", PersistKind::as_str),
            letters[1].order_id.as_str()
        ),
        ("pay", bad.as_str())
    );
    assert!(
        letters[1].reason.contains("no_mallory")
            || letters[1].reason.contains("dead-lettered order"),
        "{:?}",
        letters[1]
    );

    // Pay and cancel of it answer sensibly; nothing is restocked twice.
    assert_eq!(app.order_action(&bad, "pay").await.0, 409);
    let (s, c) = app.order_action(&bad, "cancel").await;
    assert_eq!((s, c["restocked"].clone()), (200, json!(0)), "{c}");
    assert_eq!(app.drained_audit(1).await["redis_stock"], 6);

    // Alerted through the existing paths.
    let m = metrics(&app).await;
    assert!(metric(&m, "oversell_dead_letters_total", "") >= 2.0, "{m}");
    for _ in 0..50 {
        if alerts.lock().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let got = alerts.lock().unwrap().clone();
    assert!(
        got.iter()
            .any(|a| a["alert"] == "dead_letter" && a["order_id"] == json!(bad)),
        "{got:?}"
    );

    // Reconciliation does not count the dead letters as in flight.
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
    assert_eq!(pass["residual"], 0, "{pass}");

    // The oracle reports the dead letter, and the acknowledged order it lost.
    let (item, orders) = store.snapshot(1).await.unwrap().unwrap();
    let mut acks: Vec<(&str, &str)> = ids.iter().map(|(id, u)| (id.as_str(), *u)).collect();
    acks.extend(later.iter().map(|id| (id.as_str(), "later")));
    let c = clients(&acks);
    let restocked: i64 = conn.scard(&keys.restocked).await.unwrap();
    let f = oracle::audit(&Evidence {
        initial_stock: 10,
        purchase_limit: 1,
        truth: Truth::Orders {
            db_stock: item.stock,
            orders,
        },
        oracle: OracleView {
            source: "test".into(),
            ..OracleView::default()
        },
        reading: Reading {
            order_id_field: Some("order_id".into()),
            max_unclassified: 0.01,
            keys_sent: true,
        },
        redis_stock: app.app_inventory.redis().unwrap().stock(1).await.unwrap(),
        reconcile_residual: Some(0),
        stock_seen: None,
        redis_restocked_orders: Some(restocked),
        dead_letters: Some(
            letters
                .iter()
                .map(|l| DeadLetterSeen {
                    order_id: l.order_id.clone(),
                    kind: l.kind,
                    was: l.was.clone(),
                })
                .collect(),
        ),
        payment_window_ms: Some(900_000),
        audited_ms: None,
        opened_ms: None,
        stock_samples: Vec::new(),
        restocks: None,
        clients: &c,
        users: None,
    });
    assert_eq!(f.lost_acks, Some(1), "{f:?}");
    assert_eq!(f.lost_acks_dead_lettered, Some(1));
    assert_eq!(f.dead_letters, Some(2));
    assert_eq!(f.restock_mismatch, Some(0));
    assert_eq!(
        (f.conservation_drift, f.redis_drift, f.oversell),
        (Some(0), Some(0), Some(0))
    );
    assert!(f.verdict.contains("1 dead-lettered"), "{}", f.verdict);
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_the_database_cannot_store_is_refused_at_the_edge() {
    let app = spawn_app(Strategy::RedisLua, Backend::Postgres).await;
    app.setup_sale(1, 5, 1).await;
    for body in [
        json!({"item_id": 1, "user_id": "nul\u{0}byte", "qty": 1}),
        json!({"item_id": 1, "user_id": "u", "device_id": "tab\tbed", "qty": 1}),
        json!({"item_id": 1, "user_id": "é".repeat(65), "qty": 1}),
    ] {
        let (s, e) = app.order(body.clone()).await;
        assert_eq!(
            (s, e["error"].clone()),
            (400, json!("invalid_request")),
            "{body}"
        );
    }
    let audit = app.drained_audit(1).await;
    assert_eq!(
        (audit["redis_stock"].clone(), audit["sold"].clone()),
        (json!(5), json!(0))
    );
    app.teardown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_consumers_entries_are_claimed_while_orders_keep_arriving() {
    let mut parts = Parts::new().await;
    parts.config.pipeline.claim_idle = Duration::from_millis(600);
    parts.sale(100_000).await;
    // A consumer takes five orders and dies before persisting them.
    let dead_orders: Vec<String> = {
        let mut v = Vec::new();
        for i in 0..5 {
            v.push(parts.buy(&format!("early-{i}")).await);
        }
        v
    };
    let mut dead = parts.consumer("crashed-shop");
    assert_eq!(dead.read(">").await.unwrap().len(), 5);
    drop(dead);

    let (stop, rx) = tokio::sync::watch::channel(false);
    let background =
        pipeline::spawn(parts.inventory.clone(), parts.config.pipeline.clone(), rx).await;
    // Steady traffic: a new order every 20 ms, so the live consumer never reads an empty batch.
    let traffic_until = Instant::now() + Duration::from_secs(6);
    let mut n = 0;
    let mut claimed_at = None;
    while Instant::now() < traffic_until {
        parts.buy(&format!("steady-{n}")).await;
        n += 1;
        if n % 10 == 0 && claimed_at.is_none() {
            let mut all = true;
            for id in &dead_orders {
                all &= parts.store.order(id).await.unwrap().is_some();
            }
            if all {
                claimed_at = Some(Instant::now());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(true);
    let mut background = background;
    while background.join_next().await.is_some() {}
    assert!(
        claimed_at.is_some(),
        "the dead consumer's five orders were persisted while {n} orders kept arriving"
    );
    parts.teardown().await;
}
