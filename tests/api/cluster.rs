//! The reference shop on a real Redis Cluster (three masters, one replica each, started per
//! test by [`TestCluster`]): a sale's keys share one slot and several items spread over the
//! masters; the start-up durability check asks every master; the smoke scenario stays exact;
//! a master failover mid-sale (graceful `CLUSTER FAILOVER`, and `TAKEOVER` under
//! `wait-replica`) is ridden through with the oracle's figures asserted.

use crate::cluster_harness::TestCluster;
use crate::helpers::*;
use oversell::report::RunReport;
use oversell::testing::inventory::redis_lua::keys::{delete_prefix, ItemKeys};
use oversell::testing::inventory::{Durability, InventoryError, RedisLua, RedisSettings, Strategy};
use oversell::testing::model::Item;
use oversell::testing::nemesis::cluster::master_and_replica;
use oversell::testing::runner::{self, RunPlan};
use oversell::testing::store::redis_conn::RedisConn;
use oversell::testing::store::Backend;
use oversell::testing::traffic::Scenario;
use std::collections::BTreeSet;
use std::time::Duration;

fn settings(url: &str, prefix: &str, durability: Durability) -> RedisSettings {
    let mut s = oversell::testing::shop::ShopKnobs::default()
        .config(
            Strategy::RedisLua,
            "127.0.0.1:0".parse().unwrap(),
            "postgres://unused",
            url,
            prefix,
        )
        .redis;
    s.durability = durability;
    s
}

fn item(id: i64) -> Item {
    Item {
        id,
        name: format!("item {id}"),
        price_cents: 100,
        initial_stock: 5,
        stock: 5,
        version: 0,
        purchase_limit: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sales_keys_share_one_slot_and_items_spread_over_the_masters() {
    let cluster = TestCluster::start().await;
    let url = cluster.url();
    let prefix = format!("t-{}", uuid::Uuid::now_v7().simple());
    let mut conn = RedisConn::open(&url).await.unwrap();
    assert!(conn.is_cluster());

    let mut slot_of = Vec::new();
    for id in 1..=12 {
        let keys = ItemKeys::new(&prefix, id);
        let mut slots = BTreeSet::new();
        for key in keys.all() {
            let slot: u16 = redis::cmd("CLUSTER")
                .arg("KEYSLOT")
                .arg(key)
                .query_async(&mut conn)
                .await
                .unwrap();
            slots.insert(slot);
        }
        assert_eq!(slots.len(), 1, "item {id}'s keys span slots {slots:?}");
        slot_of.push((id, *slots.first().unwrap()));
    }

    // Warmed through the shop's own connection, each item lands on its slot's master.
    let shop = RedisLua::connect(&settings(&url, &prefix, Durability::None))
        .await
        .unwrap();
    let nodes = cluster.nodes().await;
    let mut masters = BTreeSet::new();
    for &(id, slot) in &slot_of {
        shop.warm(&item(id)).await.unwrap();
        let (master, replica) = master_and_replica(&nodes, slot).unwrap();
        masters.insert(master.addr.clone());
        let on_master = cluster
            .query(
                TestCluster::port_of(&master.addr),
                &format!("EXISTS {}", ItemKeys::new(&prefix, id).stock),
            )
            .await
            .unwrap();
        assert_eq!(
            on_master, "1",
            "item {id} is on its slot's master {}",
            master.addr
        );
        // Any other master answers MOVED for it.
        let other = nodes
            .iter()
            .find(|n| n.master && n.addr != master.addr)
            .unwrap();
        let moved = cluster
            .query(
                TestCluster::port_of(&other.addr),
                &format!("GET {}", ItemKeys::new(&prefix, id).stock),
            )
            .await
            .unwrap_err();
        assert!(
            moved.to_string().to_lowercase().contains("moved"),
            "{moved}"
        );
        assert_ne!(master.addr, replica.addr);
        assert_eq!(shop.stock(id).await.unwrap(), Some(5));
    }
    assert!(
        masters.len() > 1,
        "12 items all landed on one master: {masters:?}"
    );
    assert!(cluster.keys_on_masters().await > 0);

    // The clean-up walks every master.
    delete_prefix(&url, &prefix).await;
    assert_eq!(
        cluster.keys_on_masters().await,
        0,
        "keys left after delete_prefix"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_durability_check_asks_every_master() {
    let cluster = TestCluster::start().await;
    let url = cluster.url();
    let prefix = format!("t-{}", uuid::Uuid::now_v7().simple());

    // Every master has a connected replica: wait-replica is verified.
    RedisLua::connect(&settings(&url, &prefix, Durability::WaitReplica))
        .await
        .expect("wait-replica is verified on a cluster with a replica per master");

    // No master has an AOF: aof-always is refused, naming a master.
    let e = RedisLua::connect(&settings(&url, &prefix, Durability::AofAlways))
        .await
        .err()
        .expect("aof-always refused without an AOF");
    assert!(matches!(e, InventoryError::Durability(_)), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("appendonly yes") && text.contains("master 127.0.0.1:"),
        "{text}"
    );

    // One master turned to AOF is not enough: another is named.
    let nodes = cluster.nodes().await;
    let first = nodes.iter().find(|n| n.master).unwrap();
    cluster
        .query(
            TestCluster::port_of(&first.addr),
            "CONFIG SET appendonly yes",
        )
        .await
        .unwrap();
    let text = RedisLua::connect(&settings(&url, &prefix, Durability::AofEverysec))
        .await
        .err()
        .expect("aof-everysec refused while two masters have no AOF")
        .to_string();
    assert!(!text.contains(&format!("master {})", first.addr)), "{text}");
}

/// The smoke scenario with `extra` appended (faults, `[shop]` knobs go in `shop`).
fn smoke(shop: &str, extra: &str) -> Scenario {
    let text = std::fs::read_to_string("scenarios/smoke.toml")
        .unwrap()
        .replace("[shop]\n", &format!("[shop]\n{shop}\n"));
    Scenario::parse(&format!("{text}\n{extra}")).unwrap()
}

/// One redis-lua run of `s` on the cluster, on a fresh PostgreSQL database.
async fn run_on(cluster: &TestCluster, s: Scenario) -> RunReport {
    let tmp = tempfile::tempdir().unwrap();
    let db = fresh_db_url(Backend::Postgres);
    let mut plan = RunPlan::reference(
        s,
        tmp.path().join("cluster.toml"),
        cells(&[Strategy::RedisLua], Backend::Postgres, &db),
        cluster.url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        tmp.path().join("reports"),
    );
    plan.drain_limit = Duration::from_secs(30);
    let ran = runner::execute(&plan).await;
    drop_database(&db).await;
    let (mut report, _) = ran.expect("the run completes");
    let redis = report
        .metadata
        .servers
        .iter()
        .find(|s| s.service == "Redis")
        .expect("the Redis version is recorded");
    assert!(!redis.version.starts_with("unknown"), "{redis:?}");
    report.runs.remove(0)
}

/// Oversell, lost acknowledged orders, phantoms and conservation, as the oracle has them.
fn exact(run: &RunReport) {
    let f = &run.findings;
    assert_eq!(f.oversell, Some(0), "{}", f.verdict);
    assert_eq!(f.lost_acks, Some(0), "{}", f.verdict);
    assert_eq!(f.phantom_orders, Some(0), "{}", f.verdict);
    assert_eq!(f.duplicate_acks, Some(0), "{}", f.verdict);
    assert_eq!(f.conservation_drift, Some(0), "{}", f.verdict);
    assert_eq!(f.duplicate_buyers, Some(0), "{}", f.verdict);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smoke_sale_is_exact_on_a_cluster() {
    let cluster = TestCluster::start().await;

    let run = run_on(&cluster, smoke("", "")).await;

    exact(&run);
    assert_eq!(
        run.findings.redis_drift,
        Some(0),
        "{}",
        run.findings.verdict
    );
    assert_eq!(run.findings.sold, Some(10), "{}", run.findings.verdict);
    assert_eq!(
        cluster.keys_on_masters().await,
        0,
        "the run's keys are cleaned up"
    );

    // `gate --redis-cluster` with one node's plain URL: the same sale, judged for CI.
    let db = fresh_db_url(Backend::Postgres);
    let seed = format!("redis://127.0.0.1:{}", cluster.ports[0]);
    let tmp = tempfile::tempdir().unwrap();
    let gate = oversell_cli(
        &[
            "gate",
            "--scenario",
            "smoke",
            "--redis-cluster",
            "--redis-url",
            &seed,
            "--database-url",
            &db,
            "--out",
            tmp.path().to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    drop_database(&db).await;
    assert_eq!(gate.code, 0, "{}", gate.both());
    assert_eq!(cluster.keys_on_masters().await, 0, "{}", gate.both());
}

/// The slot's master before and after a failover fault, and its window's note.
async fn failover_run(cluster: &TestCluster, durability: &str, kind: &str) -> RunReport {
    let s = smoke(
        &format!("redis_durability = \"{durability}\"\nredis_cluster = true"),
        &format!("[[faults]]\nkind = \"{kind}\"\nat_s = 0.15\n"),
    );
    let before = cluster.nodes().await;
    let run = run_on(cluster, s).await;
    let f = &run.findings;
    eprintln!(
        "{kind} under {durability}: acknowledged {}, lost_acks {:?}, oversell {:?}, \
         indeterminate {}, sold {:?}; {}",
        f.acknowledged, f.lost_acks, f.oversell, f.indeterminate, f.sold, f.verdict
    );
    let w: Vec<_> = run
        .faults
        .iter()
        .filter(|f| f.kind.as_str() == kind)
        .collect();
    assert_eq!(w.len(), 1, "{:?}", run.faults);
    let basis = w[0].basis_text();
    assert!(basis.contains("took slot"), "{basis}");
    assert!(w[0].began_ms >= 150 && w[0].began_ms < 650, "{:?}", w[0]);
    // The replica named in the note is a master now, the old master its replica.
    let after = cluster.nodes().await;
    let new_master = basis
        .split("replica ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    assert!(
        before.iter().any(|n| n.addr == new_master && !n.master),
        "{new_master} was a replica"
    );
    assert!(
        after.iter().any(|n| n.addr == new_master && n.master),
        "{new_master} is a master: {after:?}"
    );
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_master_failover_mid_sale_loses_nothing_acknowledged() {
    let cluster = TestCluster::start().await;

    let run = failover_run(&cluster, "none", "redis-failover").await;

    // CLUSTER FAILOVER waits for the replica to catch up: with no durability at all, every
    // 201 survives it and nothing is sold twice.
    exact(&run);
    assert!(
        run.findings.sold.unwrap_or(0) > 0,
        "{}",
        run.findings.verdict
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_under_wait_replica_loses_nothing_acknowledged() {
    let cluster = TestCluster::start().await;

    let run = failover_run(&cluster, "wait-replica", "redis-takeover").await;

    // TAKEOVER does not wait for the replica; wait-replica's 201 came only after it had the
    // write, so what was acknowledged survives and what was not is released (503).
    exact(&run);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_redis_faults_are_skipped_on_a_cluster_and_failover_off_one() {
    let cluster = TestCluster::start().await;
    let s = smoke("", "[[faults]]\nkind = \"redis-restart\"\nat_s = 0.5\n");
    let run = run_on(&cluster, s).await;
    let basis = run.faults[0].basis_text();
    assert!(basis.contains("is a cluster"), "{basis}");
    exact(&run);

    // On one Redis, the cluster kinds say why they did nothing.
    let tmp = tempfile::tempdir().unwrap();
    let db = fresh_db_url(Backend::Postgres);
    let plan = RunPlan::reference(
        smoke("", "[[faults]]\nkind = \"redis-failover\"\nat_s = 0.5\n"),
        tmp.path().join("single.toml"),
        cells(&[Strategy::RedisLua], Backend::Postgres, &db),
        redis_url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        tmp.path().join("reports"),
    );
    let ran = runner::execute(&plan).await;
    drop_database(&db).await;
    let run = ran.unwrap().0.runs.remove(0);
    let basis = run.faults[0].basis_text();
    assert!(basis.contains("not a cluster"), "{basis}");
}
