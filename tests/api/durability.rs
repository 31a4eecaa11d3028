//! `--redis-durability` against private `redis-server` children on free loopback ports (never
//! the shared Redis's settings): the start-up check accepts a Redis configured as the mode
//! claims and refuses one that is not; `wait-replica` answers 201 only for what a replica has.

use crate::helpers::*;
use oversell::testing::inventory::{Durability, Strategy};
use oversell::testing::store::Backend;
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A `redis-server` of this test's own, killed when dropped (also when the test fails).
struct PrivateRedis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl PrivateRedis {
    async fn start(args: &[&str]) -> PrivateRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--dir", dir.path().to_str().unwrap()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed");
        let server = PrivateRedis {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..100 {
            if server.query::<String>(&["PING"]).await.is_ok() {
                return server;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("private redis-server on port {port} did not start");
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    async fn query<T: redis::FromRedisValue>(&self, args: &[&str]) -> redis::RedisResult<T> {
        let client = redis::Client::open(self.url())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd(args[0])
            .arg(&args[1..])
            .query_async(&mut conn)
            .await
    }

    /// Waits (bounded) until `INFO replication` shows `line`.
    async fn wait_for_info(&self, line: &str) {
        for _ in 0..200 {
            let info: String = self
                .query(&["INFO", "replication"])
                .await
                .unwrap_or_default();
            if info.lines().any(|l| l.trim() == line) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis on port {} never showed {line}", self.port);
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config_for(redis: &PrivateRedis, mode: Durability) -> oversell::testing::shop::ShopConfig {
    let mut config = test_config(Strategy::RedisLua, Backend::Postgres);
    config.redis.url = redis.url();
    config.redis.durability = mode;
    config
}

/// `oversell serve` against `redis` in `mode`: the exit code and stderr of a shop that stops.
async fn serve_refused(redis: &PrivateRedis, mode: &str) -> CliRun {
    let db = fresh_db_url(Backend::Postgres);
    let run = tokio::time::timeout(
        Duration::from_secs(60),
        oversell_cli(
            &[
                "serve",
                "--strategy",
                "redis-lua",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                &db,
                "--redis-url",
                &redis.url(),
                "--redis-durability",
                mode,
            ],
            &[],
        ),
    )
    .await
    .expect("a misconfigured shop stops by itself");
    drop_database(&db).await;
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shop_starts_only_on_a_redis_configured_as_its_durability_mode_claims() {
    let always = PrivateRedis::start(&["--appendonly", "yes", "--appendfsync", "always"]).await;
    let memory = PrivateRedis::start(&["--appendonly", "no"]).await;
    let managed = PrivateRedis::start(&["--rename-command", "CONFIG", ""]).await;

    // Accepted: the mode's settings, or stronger ones; and a Redis that will not say.
    for (redis, mode) in [
        (&always, Durability::AofAlways),
        (&always, Durability::AofEverysec),
        (&memory, Durability::None),
        (&managed, Durability::AofAlways),
    ] {
        let app = spawn_with(config_for(redis, mode)).await;
        app.teardown().await;
    }

    // Refused, exit 2, naming the setting and how to fix it.
    let run = serve_refused(&memory, "aof-everysec").await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("appendonly no") && run.stderr.contains("--appendonly yes"),
        "{}",
        run.both()
    );
    let run = serve_refused(&always, "wait-replica").await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("connected_slaves:0") && run.stderr.contains("--replicaof"),
        "{}",
        run.both()
    );
    let everysec = PrivateRedis::start(&["--appendonly", "yes", "--appendfsync", "everysec"]).await;
    let run = serve_refused(&everysec, "aof-always").await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("appendfsync everysec"),
        "{}",
        run.both()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_replica_acknowledges_only_what_a_replica_holds_and_releases_the_rest() {
    let primary = PrivateRedis::start(&[]).await;
    let port = primary.port.to_string();
    let replica = PrivateRedis::start(&["--replicaof", "127.0.0.1", &port]).await;
    primary.wait_for_info("connected_slaves:1").await;
    replica.wait_for_info("master_link_status:up").await;
    let mut config = config_for(&primary, Durability::WaitReplica);
    config.redis.replica_wait = Duration::from_millis(200);
    let app = spawn_with(config).await;
    app.setup_sale(1, 5, 1).await;

    // With the replica up: 201, and the replica already holds the order.
    let (s, body) = app
        .order(json!({"item_id": 1, "user_id": "u1", "qty": 1}))
        .await;
    assert_eq!(s, 201, "{body}");
    let orders_key = format!("{{{}:1}}:orders", app.redis_prefix);
    let on_replica: i64 = replica.query(&["HLEN", &orders_key]).await.unwrap();
    assert_eq!(on_replica, 1, "acknowledged before the replica had it");
    // A pay is answered once the replica holds it too.
    let paid = body["order_id"].as_str().unwrap().to_string();
    let (s, body) = app.order_action(&paid, "pay").await;
    assert_eq!((s, &body["status"]), (200, &json!("paid")), "{body}");
    let stored: String = replica.query(&["HGET", &orders_key, &paid]).await.unwrap();
    assert!(
        stored.contains(r#""s":"paid""#),
        "paid before the replica had it: {stored}"
    );
    let (s, body) = app
        .order(json!({"item_id": 1, "user_id": "u3", "qty": 1}))
        .await;
    assert_eq!(s, 201, "{body}");
    let pending = body["order_id"].as_str().unwrap().to_string();

    // Without it: 503, nothing acknowledged, the unit back in stock.
    drop(replica);
    primary.wait_for_info("connected_slaves:0").await;
    let (s, body) = app
        .order(json!({"item_id": 1, "user_id": "u2", "qty": 1}))
        .await;
    assert_eq!(
        (s, body["error"].as_str()),
        (503, Some("not_replicated")),
        "{body}"
    );
    assert!(body["detail"].as_str().unwrap().contains("released"));
    // A cancel (and a pay) no replica confirmed is not acknowledged either: it happened on the
    // primary, and the client is told to retry, as often as it likes.
    for _ in 0..2 {
        let (s, body) = app.order_action(&pending, "cancel").await;
        assert_eq!(
            (s, body["error"].as_str()),
            (503, Some("not_replicated")),
            "{body}"
        );
        assert!(
            body["detail"].as_str().unwrap().contains("cancel"),
            "{body}"
        );
    }
    let (s, body) = app.order_action(&paid, "pay").await;
    assert_eq!(
        (s, body["error"].as_str()),
        (503, Some("not_replicated")),
        "{body}"
    );
    let audit = app.drained_audit(1).await;
    assert_eq!(
        (&audit["redis_stock"], &audit["db_stock"], &audit["sold"]),
        (&json!(4), &json!(4), &json!(1)),
        "{audit}"
    );
    assert_eq!(audit["orders_by_status"]["cancelled"], 2, "{audit}");
    // u2 holds nothing (its retry is not a duplicate); u1 still holds its unit.
    let (s, body) = app
        .order(json!({"item_id": 1, "user_id": "u2", "qty": 1}))
        .await;
    assert_eq!((s, body["error"].as_str()), (503, Some("not_replicated")));
    let (s, _) = app
        .order(json!({"item_id": 1, "user_id": "u1", "qty": 1}))
        .await;
    assert_eq!(s, 409);
    app.teardown().await;
}
