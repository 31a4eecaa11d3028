//! `oversell bench shop` and `bench generator` end to end on a tiny duration: both rates and
//! their ratio come out, and every CPU-per-operation figure with its source (never how fast:
//! speed is for the benchmark itself, see docs/src/performance/overview.md), and a missing tool is a clear
//! error naming its Debian package.

use crate::helpers::*;
use serde_json::Value;

async fn bench_shop(strategy: &str, database_url: &str, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let json_arg = json.display().to_string();
    let redis = redis_url();
    let mut args = vec![
        "bench",
        "shop",
        "--strategy",
        strategy,
        "--seconds",
        "2",
        "--connections",
        "16",
        "--database-url",
        database_url,
        "--redis-url",
        &redis,
        "--json",
        &json_arg,
    ];
    args.extend_from_slice(extra);
    let run = oversell_cli(&args, &[]).await;
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(
        run.stdout.contains("ratio shop / ceiling"),
        "{}",
        run.both()
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let sat = &v["saturation"];
    assert!(sat["created"].as_u64().unwrap() > 0, "{v}");
    assert!(sat["orders_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["ceiling"]["per_s"].as_f64().unwrap() > 0.0, "{v}");
    // The ratio is the two rates' quotient, whatever they are.
    let expect = sat["orders_per_s"].as_f64().unwrap() / v["ceiling"]["per_s"].as_f64().unwrap();
    assert!((v["ratio"].as_f64().unwrap() - expect).abs() < 0.001, "{v}");
    // CPU per order of the shop and the client, and per operation of the ceiling's client,
    // each with how it was read (their values are the benchmark's business).
    let cpu = &v["cpu"];
    cpu_figure(&cpu["saturation"]["shop"], "order", "/proc/", &v);
    cpu_figure(
        &cpu["saturation"]["client"],
        "request",
        "RUSAGE_CHILDREN",
        &v,
    );
    cpu_figure(&cpu["ceiling"]["client"], "", "RUSAGE_CHILDREN", &v);
    assert!(cpu["ceiling"]["shop"].is_null(), "the shop is stopped: {v}");
    assert!(cpu["shop_over_ceiling_client"].as_f64().is_some(), "{v}");
    assert!(
        run.stdout.contains("CPU per op, saturation"),
        "{}",
        run.both()
    );
    v
}

/// One CPU figure: its unit, its source, and µs per operation = CPU ms × 1000 / operations.
fn cpu_figure(c: &Value, unit: &str, source: &str, v: &Value) {
    assert!(c.is_object(), "no CPU figure: {v}");
    assert!(c["unit"].as_str().unwrap().contains(unit), "{c}");
    assert!(c["source"].as_str().unwrap().contains(source), "{c}");
    let (ms, ops) = (c["cpu_ms"].as_f64().unwrap(), c["ops"].as_u64().unwrap());
    assert!(ops > 0, "{c}");
    // Both are rounded to a tenth (of a ms, of a µs): the product is exact to their errors.
    let us = c["us_per_op"].as_f64().unwrap();
    let slack = 0.05 + 0.05 * ops as f64 / 1000.0;
    assert!((us * ops as f64 / 1000.0 - ms).abs() <= slack, "{c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_shop_redis_lua_measures_both_rates_persistence_and_a_fixed_rate() {
    let v = bench_shop(
        "redis-lua",
        &format!("{}/postgres", pg_base()),
        &["--rate", "50%"],
    )
    .await;
    assert_eq!(v["ceiling"]["tool"], "redis-benchmark", "{v}");
    // Redis per order and per ceiling call, the database per persisted order.
    cpu_figure(&v["cpu"]["saturation"]["redis"], "order", "INFO cpu", &v);
    cpu_figure(&v["cpu"]["ceiling"]["redis"], "call", "INFO cpu", &v);
    cpu_figure(
        &v["cpu"]["saturation"]["database"],
        "persisted order",
        "cutime",
        &v,
    );
    assert!(v["cpu"]["shop_over_redis"].as_f64().is_some(), "{v}");
    let p = &v["saturation_persistence"];
    assert!(p["purchases_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(p["drained"], true, "{v}");
    let f = &v["fixed_rate"];
    let target = f["target_per_s"].as_f64().unwrap();
    let sat = v["saturation"]["orders_per_s"].as_f64().unwrap();
    assert!((target - (sat * 0.5).round()).abs() <= 1.0, "{v}");
    assert!(f["sent"].as_u64().unwrap() > 0, "{v}");
    assert!(f["p99_ms"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["fixed_rate_persistence"].is_object(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_shop_redis_buckets_watches_every_bucket_stream() {
    let v = bench_shop(
        "redis-buckets",
        &format!("{}/postgres", pg_base()),
        &["--buckets", "3"],
    )
    .await;
    assert_eq!(v["ceiling"]["tool"], "redis-benchmark", "{v}");
    let p = &v["saturation_persistence"];
    // Persistence is watched over the three bucket streams, and they all drained.
    assert_eq!(p["drained"], true, "{v}");
    assert!(p["purchases_per_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(p["applied_per_s"].as_f64().unwrap() > 0.0, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_shop_for_update_on_postgres_is_measured_against_pgbench() {
    // A pool of 16: the ceiling now runs pgbench three times, each with as many clients, on
    // a server the other tests share (max_connections 100).
    let pg = format!("{}/postgres", pg_base());
    let v = bench_shop("for-update", &pg, &["--pool-size", "16"]).await;
    assert_eq!(v["ceiling"]["tool"], "pgbench", "{v}");
    assert_eq!(v["pool_size"], 16, "{v}");
    // The whole server (reaped backends included) and the bench database's own backends,
    // per order and per pgbench transaction; no Redis for a SQL strategy.
    let cpu = &v["cpu"];
    cpu_figure(&cpu["saturation"]["database"], "order", "cutime", &v);
    cpu_figure(
        &cpu["saturation"]["database_backends"],
        "order",
        "pg_stat_activity",
        &v,
    );
    cpu_figure(&cpu["ceiling"]["database"], "transaction", "cutime", &v);
    cpu_figure(
        &cpu["ceiling"]["database_backends"],
        "transaction",
        "pg_stat_activity",
        &v,
    );
    assert!(cpu["saturation"]["redis"].is_null(), "{v}");
    assert_eq!(
        cpu["ceiling"]["client"]["ops"].as_u64(),
        v["ceiling"]["operations"].as_u64(),
        "{v}"
    );
    assert_eq!(v["backend"], "postgres", "{v}");
    // The ceiling runs the shop's own statements, the order row included; the bare hot row is
    // the second ceiling, measured on its own; pgbench's connection set-up is measured by a
    // `-t 1` run and taken out of the second client figure.
    let c = &v["ceiling"];
    assert!(
        c["label"].as_str().unwrap().contains("shop's statements"),
        "{v}"
    );
    assert!(
        c["script"].as_str().unwrap().contains("INSERT INTO orders"),
        "{v}"
    );
    assert!(c["script"].as_str().unwrap().contains("FOR UPDATE"), "{v}");
    let bare = &v["ceiling_bare"];
    assert!(
        bare["ceiling"]["label"].as_str().unwrap().contains("bare"),
        "{v}"
    );
    assert!(
        !bare["ceiling"]["script"]
            .as_str()
            .unwrap()
            .contains("orders"),
        "{v}"
    );
    assert!(bare["ceiling"]["per_s"].as_f64().unwrap() > 0.0, "{v}");
    cpu_figure(&bare["cpu"]["client"], "transaction", "RUSAGE_CHILDREN", &v);
    cpu_figure(
        &cpu["ceiling_client_setup"],
        "transaction",
        "RUSAGE_CHILDREN",
        &v,
    );
    // `-t 1`: one transaction per client, as many clients as the shop's pool.
    let clients = v["pool_size"].as_u64().unwrap();
    assert_eq!(
        cpu["ceiling_client_setup"]["ops"].as_u64(),
        Some(clients),
        "{v}"
    );
    cpu_figure(&cpu["ceiling_client_steady"], "transaction", "-t 1", &v);
    assert_eq!(
        cpu["ceiling_client_steady"]["ops"].as_u64().unwrap(),
        c["operations"].as_u64().unwrap() - clients,
        "{v}"
    );
    assert!(
        cpu["shop_over_ceiling_client_steady"].as_f64().is_some(),
        "{v}"
    );
    assert!(v["fixed_rate"].is_null(), "{v}");
    assert!(v["saturation_persistence"].is_null(), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_shop_for_update_on_mysql_is_measured_against_mysqlslap() {
    let v = bench_shop("for-update", &format!("{}/mysql", mysql_base()), &[]).await;
    assert_eq!(v["ceiling"]["tool"], "mysqlslap", "{v}");
    assert!(v["cpu"]["saturation"]["database_backends"].is_null(), "{v}");
    assert_eq!(v["backend"], "mysql", "{v}");
}

/// `bench generator` at a tiny scale: the three clients on one endpoint, each with its CPU per
/// request and where it came from, ours with its send lag, and the ratios between them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_generator_compares_ours_goose_and_wrk_on_one_endpoint() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gen.json");
    let json_arg = json.display().to_string();
    let run = oversell_cli(
        &[
            "bench",
            "generator",
            "--seconds",
            "1",
            "--rate",
            "200",
            "--connections",
            "4",
            "--json",
            &json_arg,
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(run.stdout.contains("ours / goose"), "{}", run.both());
    for line in run.stdout.lines() {
        assert!(line.chars().count() <= 100, "{line:?}\n{}", run.stdout);
    }
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for (client, source) in [
        ("ours", "RUSAGE_SELF"),
        ("goose", "RUSAGE_SELF"),
        ("goose_paced", "RUSAGE_SELF"),
        ("wrk", "RUSAGE_CHILDREN"),
    ] {
        let c = &v[client];
        assert!(c["requests"].as_u64().unwrap() > 0, "{client}: {v}");
        cpu_figure(&c["cpu"], "request", source, &v);
        assert!(c["peak_rss_mib"].as_f64().unwrap() > 0.0, "{client}: {v}");
        assert!(!c["rss_source"].as_str().unwrap().is_empty(), "{v}");
    }
    // Our plan: 200 buyers over 1 s, each one order; the closed loops have no send lag.
    assert_eq!(v["ours"]["requests"], 200, "{v}");
    // Ours: the attack's peak, and the peak once the records are handed to the oracle.
    let spelled = v["ours"]["peak_rss_with_spelled_records_mib"]
        .as_f64()
        .unwrap();
    assert!(
        spelled >= v["ours"]["peak_rss_mib"].as_f64().unwrap(),
        "{v}"
    );
    assert!(
        v["goose"]["peak_rss_with_spelled_records_mib"].is_null(),
        "{v}"
    );
    // What the spelling out itself took: never above the process's peak.
    let adds = v["ours"]["spelling_out_mib"].as_f64().unwrap();
    assert!((0.0..=spelled).contains(&adds), "{v}");
    assert!(v["goose"]["spelling_out_mib"].is_null(), "{v}");
    assert!(
        run.stdout.contains("with them handed to the oracle")
            && run.stdout.contains("the handing over"),
        "{}",
        run.stdout
    );
    assert!(v["ours"]["send_lag_p99_ms"].as_f64().is_some(), "{v}");
    assert!(v["goose"]["send_lag_p99_ms"].is_null(), "{v}");
    assert!(v["wrk"]["send_lag_p99_ms"].is_null(), "{v}");
    // goose paced: held to our rate by goose's throttle (200/s for 1 s, with slack for the
    // throttle's first tokens and the run's rounding), far under the flat-out loop's.
    let paced = v["goose_paced"]["requests"].as_u64().unwrap();
    assert!(paced <= 400, "{v}");
    assert!(paced < v["goose"]["requests"].as_u64().unwrap(), "{v}");
    assert!(
        run.stdout
            .contains("paced: goose's bare loop held to 200/s"),
        "{}",
        run.stdout
    );
    let per = |c: &str| v[c]["cpu"]["us_per_op"].as_f64().unwrap();
    for (field, floor) in [
        ("ours_over_goose", "goose"),
        ("ours_over_goose_paced", "goose_paced"),
    ] {
        let expect = (per("ours") / per(floor) * 1000.0).round() / 1000.0;
        assert!(
            (v[field].as_f64().unwrap() - expect).abs() < 0.002,
            "{field}: {v}"
        );
    }
    // The saturation search: from our rate up (doubling) or down (halving), then bisected;
    // the highest rate that held is below the lowest that failed, every probe agrees with the
    // bracket, and none held late.
    let sat = &v["saturation"];
    let probes = sat["probes"].as_array().expect("the probes");
    assert_eq!(probes[0]["rate"], 200, "{sat}");
    let (holds, fails) = (sat["holds"].as_u64(), sat["fails_at"].as_u64());
    for p in probes {
        let rate = p["rate"].as_u64().unwrap();
        let lag = p["send_lag_p99_ms"].as_f64();
        let held = p["held"].as_bool().unwrap();
        assert!(p["requests_per_s"].as_f64().unwrap() > 0.0, "{p}");
        assert!(!held || lag.is_some_and(|l| l <= 1.0), "{p}");
        if held {
            assert!(holds.is_some_and(|h| rate <= h), "{sat}");
        } else {
            assert!(fails.is_some_and(|f| rate >= f), "{sat}");
        }
    }
    if let (Some(h), Some(f)) = (holds, fails) {
        assert!(h < f, "{sat}");
    }
    assert!(
        run.stdout.contains("generator saturation on this machine:"),
        "{}",
        run.stdout
    );
}

#[tokio::test]
async fn bench_generator_refuses_a_zero_rate() {
    let run = oversell_cli(&["bench", "generator", "--rate", "0"], &[]).await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("--rate") && run.stderr.contains("must be at least 1 (got 0)"),
        "{}",
        run.both()
    );
}

#[tokio::test]
async fn bench_shop_without_wrk_names_the_package() {
    let empty = tempfile::tempdir().unwrap();
    let path = empty.path().display().to_string();
    let run = oversell_cli(
        &[
            "bench",
            "shop",
            "--strategy",
            "for-update",
            "--seconds",
            "1",
        ],
        &[("PATH", &path)],
    )
    .await;
    assert_ne!(run.code, 0, "{}", run.both());
    assert!(
        run.stderr.contains("wrk is not installed") && run.stderr.contains("apt-get install wrk"),
        "{}",
        run.both()
    );
}

/// On a Redis Cluster the shop runs through the cluster client, and the ceiling runs on the
/// master that owns the sale's slot (one Redis core), not on whichever node the URL names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_shop_on_a_cluster_measures_the_ceiling_on_the_slots_master() {
    let cluster = crate::cluster_harness::TestCluster::start().await;
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let (url, json_arg) = (cluster.url(), json.display().to_string());
    let db = format!("{}/postgres", pg_base());
    let run = oversell_cli(
        &[
            "bench",
            "shop",
            "--strategy",
            "redis-buckets",
            "--buckets",
            "2",
            "--seconds",
            "2",
            "--connections",
            "8",
            "--database-url",
            &db,
            "--redis-url",
            &url,
            "--json",
            &json_arg,
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(v["saturation"]["created"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["saturation_persistence"]["drained"], true, "{v}");
    let command = v["ceiling"]["command"].as_str().unwrap();
    let words: Vec<&str> = command.split_whitespace().collect();
    let after = |flag: &str| words[words.iter().position(|w| *w == flag).unwrap() + 1];
    let port: u16 = after("-p").parse().unwrap();
    // EVALSHA <sha> <numkeys> <stock key> ...
    let stock_key = words[words.iter().position(|w| *w == "EVALSHA").unwrap() + 3];
    let slot: u16 = cluster
        .query(port, &format!("CLUSTER KEYSLOT {stock_key}"))
        .await
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("CLUSTER KEYSLOT {stock_key}: {e}"));
    let owner = cluster
        .nodes()
        .await
        .into_iter()
        .find(|n| n.master && n.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot)))
        .expect("a master owns every slot");
    assert_eq!(
        crate::cluster_harness::TestCluster::port_of(&owner.addr),
        port,
        "the ceiling ran on 127.0.0.1:{port}, but slot {slot} of {stock_key} is {}'s: {command}",
        owner.addr
    );
}
