//! The settled read of a redis-lua sale when Redis keeps moving (a sale longer than its payment
//! window goes on expiring orders after it ends): the oracle compares Redis with the database
//! only at a moment both describe. A sale merged while Redis stands still has both comparisons
//! made (and 0); the same sale merged while its restock set keeps changing under every read
//! has neither, says why, and is not failed for it (and when a busy machine lets one read
//! catch Redis still, the difference at that moment is reported and fails, as it should).

use crate::helpers::{delete_prefix, drop_database, fresh_db_url, oversell_cli, redis_url};
use crate::shard::{serve, SCENARIO};
use oversell::testing::inventory::redis_lua::ItemKeys;
use oversell::testing::store::Backend;
use redis::Commands;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// `merge --gate` of the one shard in `shard` at the shop on `db`/`prefix`, into `to`.
async fn merge(shard: &str, db: &str, prefix: &str, to: &str) -> (i32, Value, String) {
    let args = [
        "merge",
        shard,
        "--database-url",
        db,
        "--redis-prefix",
        prefix,
        "--out",
        to,
        "--quiet",
        "--gate",
        "--threshold",
        "send_lag_p99_ms=10000",
    ];
    let run = oversell_cli(&args, &[]).await;
    let findings = crate::helpers::only_report(std::path::Path::new(to))["runs"][0].clone();
    (run.code, findings, run.both())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_and_the_database_are_compared_only_at_a_moment_both_describe() {
    // Arrange: one shard's sale at a redis-lua shop.
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("shard-check.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let out = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let db = fresh_db_url(Backend::Postgres);
    let prefix = format!("oversell-settle-{}", uuid::Uuid::now_v7().simple());
    let shop = serve("redis-lua", &db, &prefix).await;
    let open_at = (chrono::Utc::now() + chrono::Duration::seconds(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let shard = oversell_cli(
        &[
            "run",
            "--strategy",
            "redis-lua",
            "--scenario",
            scenario.to_str().unwrap(),
            "--shard",
            "0/1",
            "--open-at",
            &open_at,
            "--shop-url",
            &shop.url,
            "--out",
            &out("shard"),
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(shard.code, 0, "{}", shard.both());

    // Act: merged while Redis stands still, then while the restock set changes all along.
    let (still_code, still, still_out) = merge(&out("shard"), &db, &prefix, &out("still")).await;
    let moving = Arc::new(AtomicBool::new(true));
    // A thread of its own, without pauses: Redis changes many times within each read, whatever
    // the runtime's tasks are doing.
    let mover = {
        let (moving, restocked) = (moving.clone(), ItemKeys::new(&prefix, 1).restocked);
        let mut conn = redis::Client::open(redis_url())
            .unwrap()
            .get_connection()
            .unwrap();
        std::thread::spawn(move || {
            let mut n = 0u64;
            while moving.load(Ordering::Relaxed) {
                n += 1;
                let _: () = conn.sadd(&restocked, format!("moving-{n}")).unwrap();
            }
        })
    };
    let (moved_code, moved, moved_out) = merge(&out("shard"), &db, &prefix, &out("moved")).await;
    moving.store(false, Ordering::Relaxed);
    mover.join().unwrap();

    // Assert
    assert_eq!(still_code, 0, "{still_out}");
    assert_eq!(still["redis_drift"], 0, "{still}");
    assert_eq!(still["restock_mismatch"], 0, "{still}");
    assert!(still["oracle_warning"].is_null(), "{still}");
    let warning = moved["oracle_warning"].as_str().unwrap_or_default();
    if warning.contains("Redis changed during each of the 20 reads") {
        // Redis moved under every read: nothing of it compared, said, not failed.
        assert!(warning.contains("not verified"), "{moved}");
        assert_eq!(moved_code, 0, "not a FAIL of the shop: {moved_out}");
        assert!(moved["redis_drift"].is_null(), "{moved}");
        assert!(moved["restock_mismatch"].is_null(), "{moved}");
    } else {
        // One read caught Redis still (a busy machine can hold the mover off for a whole read):
        // then the restocks it added are a real difference at that moment, and reported.
        assert!(
            moved["restock_mismatch"].as_i64().is_some_and(|m| m != 0),
            "{moved}"
        );
        assert_eq!(moved_code, 1, "{moved_out}");
    }
    assert_eq!(
        moved["sold"], still["sold"],
        "the rows are judged as before"
    );
    assert_eq!(moved["oversell"], 0);
    drop(shop);
    drop_database(&db).await;
    delete_prefix(&prefix).await;
}
