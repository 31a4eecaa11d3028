//! Shards on separate hosts: `attack --shard i/N` in N network namespaces of the test's own
//! (each its own address and temporary directory), against the reference shop (`oversell
//! serve`) on the address of another namespace (the machine's, across a bridge), their shard
//! folders copied out to one folder — `shard-<i>` beside `report`, the layout of the
//! Kubernetes Job's `/results` volume (deploy/k8s) — and `merge`d. The merged report is a
//! one-process `attack` of the same seed: the same counts, the same verdict from the clients'
//! evidence, and percentiles that are those of the shards' histograms added.

use crate::helpers::{drop_database, fresh_db_url, fresh_prefix, only_report, CliRun};
use crate::netns::{Host, Hosts};
use crate::shard::{serve_on, SCENARIO};
use oversell::report::summary::{decode_histogram, LatencySummary};
use oversell::testing::store::Backend;
use serde_json::Value;
use std::path::{Path, PathBuf};

const SHARDS: usize = 3;

/// Where shard `i`'s folder goes in the one results folder (deploy/k8s: `/results`).
pub(crate) fn shard_folder(results: &Path, i: usize) -> PathBuf {
    results.join(format!("shard-{i}"))
}

/// Where the merged report goes in the results folder, beside the shards'.
pub(crate) fn report_folder(results: &Path) -> PathBuf {
    results.join("report")
}

/// The verdict's figures, from the clients' evidence, that must not depend on how the
/// schedule was split. (Not among them: which buyers won, so who paid, how many people rather
/// than bots were turned away, and the units clients held paid: those follow the race; nor
/// `client_net_acks`, acknowledged units less the restocks the run saw: 16 in one process and
/// 15 merged in one run of this test, as what a run sees follows the timing.)
const VERDICT: &[&str] = &[
    "verified",
    "initial_stock",
    "sold",
    "oversell",
    "undersell",
    "nothing_sold",
    "acknowledged",
    "lost_acks",
    "phantom_orders",
    "indeterminate",
    "unauthorized",
    "refused_buyers",
    "duplicate_acks",
    "client_oversell",
    "client_peak_oversell",
    "client_duplicate_buyers",
];

/// `oversell args...` on `host`, in its own directory.
async fn on(host: &Host, args: &[&str]) -> CliRun {
    let out = host
        .command(env!("CARGO_BIN_EXE_oversell"))
        .args(args)
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("DATABASE_URL")
        .output()
        .await
        .expect("oversell runs on its host");
    CliRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Copies the folder `from` (files and subfolders) to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// The scenario, written on `host`: each host reads its own copy. Patient clients, as the
/// shop's pool and lock are (see `shop_flags`): a timeout is an indeterminate answer too.
fn scenario_on(host: &Host) -> String {
    let file = host.dir.path().join("shard-check.toml");
    std::fs::write(&file, format!("{SCENARIO}[client]\ntimeout = \"60s\"\n")).unwrap();
    file.to_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_shards_on_separate_hosts_merge_to_the_one_process_figures() {
    // SHARDS hosts for the shards, one more for the single process.
    let Some(net) = Hosts::make(SHARDS + 1) else {
        return;
    };
    let gateway = net.gateway.to_string();
    // The shards name each buyer in X-Forwarded-For: believed from the hosts' network only.
    // Patient with its pool and the row lock: on a machine the whole suite loads, a `busy`
    // answer (an indeterminate one, whose count follows the load, not the split) is not what
    // this checks.
    let shop_flags = [
        "--allow-open-admin",
        "--trusted-proxy",
        &net.subnet,
        "--acquire-timeout",
        "10s",
        "--lock-timeout",
        "10s",
    ];
    let (single_db, db) = (
        fresh_db_url(Backend::Postgres),
        fresh_db_url(Backend::Postgres),
    );
    let (single_prefix, prefix) = (fresh_prefix(), fresh_prefix());

    // One process on one host sends the whole schedule, at a shop of its own.
    let single_shop = serve_on(
        "for-update",
        &single_db,
        &single_prefix,
        &gateway,
        &shop_flags,
    )
    .await;
    assert!(single_shop.url.contains(&gateway), "{}", single_shop.url);
    let lone = &net.hosts[SHARDS];
    let single_out = lone.dir.path().join("out");
    let ran = on(
        lone,
        &[
            "attack",
            "--target",
            &single_shop.url,
            "--allow-remote",
            "--scenario",
            &scenario_on(lone),
            "--out",
            single_out.to_str().unwrap(),
            "--quiet",
        ],
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.both());
    drop(single_shop);

    // SHARDS processes, one per host, opening together at another shop.
    let shop = serve_on("for-update", &db, &prefix, &gateway, &shop_flags).await;
    let open_at = (chrono::Utc::now() + chrono::Duration::seconds(8))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let shards: Vec<CliRun> =
        futures_util::future::join_all(net.hosts[..SHARDS].iter().enumerate().map(|(i, host)| {
            let (url, open_at) = (shop.url.clone(), open_at.clone());
            async move {
                let spec = format!("{i}/{SHARDS}");
                let out = host.dir.path().join("out");
                on(
                    host,
                    &[
                        "attack",
                        "--target",
                        &url,
                        "--allow-remote",
                        "--scenario",
                        &scenario_on(host),
                        "--shard",
                        &spec,
                        "--open-at",
                        &open_at,
                        "--out",
                        out.to_str().unwrap(),
                        "--quiet",
                    ],
                )
                .await
            }
        }))
        .await;
    for s in &shards {
        assert_eq!(s.code, 0, "{}", s.both());
        assert!(s.stdout.contains("attack shard"), "{}", s.both());
    }

    // Copied out, as the Job's pods write to /results: shard-<i>, then the merge's report.
    let results = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for (i, host) in net.hosts[..SHARDS].iter().enumerate() {
        let to = shard_folder(results.path(), i);
        copy_dir(&host.dir.path().join("out"), &to);
        dirs.push(to.to_str().unwrap().to_string());
    }
    let report_dir = report_folder(results.path());
    let mut args: Vec<&str> = vec!["merge"];
    args.extend(dirs.iter().map(String::as_str));
    args.extend(["--out", report_dir.to_str().unwrap(), "--quiet"]);
    let merged = crate::helpers::oversell_cli(&args, &[]).await;
    assert_eq!(merged.code, 0, "{}", merged.both());

    // Each shard ran on its host and sent its part of the schedule; together, all of it.
    let files: Vec<Value> = dirs
        .iter()
        .map(|d| {
            serde_json::from_str(&std::fs::read_to_string(Path::new(d).join("shard.json")).unwrap())
                .unwrap()
        })
        .collect();
    let mut sent: Vec<u64> = Vec::new();
    for (i, f) in files.iter().enumerate() {
        assert_eq!(f["schema"], "oversell.shard/v1");
        assert_eq!(f["shard"]["index"], i, "{}", f["shard"]);
        assert!(
            f["target"]["url"].as_str().unwrap().contains(&gateway),
            "{}",
            f["target"]
        );
        sent.extend(
            f["clients"]["buyers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b["buyer"].as_u64().unwrap()),
        );
    }
    sent.sort();
    assert_eq!(
        sent,
        (0..200).collect::<Vec<_>>(),
        "the shards partition the schedule"
    );

    let one = only_report(&single_out);
    let many = only_report(&report_dir);
    let (one, many) = (&one["runs"][0], &many["runs"][0]);
    // The same counts.
    assert_eq!(one["buyers"], 200);
    assert_eq!(many["buyers"], one["buyers"]);
    assert_eq!(many["order_attempts"], one["order_attempts"]);
    for kind in ["order", "view"] {
        assert_eq!(
            many["requests"][kind]["total"], one["requests"][kind]["total"],
            "{kind} requests"
        );
    }
    assert_eq!(
        (one["order_errors"].as_u64(), many["order_errors"].as_u64()),
        (Some(0), Some(0)),
        "no order error on either side (else indeterminate answers follow the load): {} vs {}",
        one["requests"]["order"]["outcomes"],
        many["requests"]["order"]["outcomes"]
    );
    // The same verdict.
    assert_eq!(
        (&one["oracle"], &many["oracle"]),
        (&Value::from("none"), &Value::from("none"))
    );
    for f in VERDICT {
        assert_eq!(
            many[f], one[f],
            "{f}: merged {} vs one process {}",
            many[f], one[f]
        );
    }
    assert_eq!(many["acknowledged"], 20, "the stock, no more");
    assert_eq!(many["client_oversell"], 0);

    // The percentiles: those of the shards' order histograms added, nothing lost.
    let mut added = oversell::testing::traffic::recorder::new_histogram();
    for f in &files {
        for e in f["clients"]["histograms"].as_array().unwrap() {
            if e["kind"] == "order" {
                added
                    .add(decode_histogram(e["histogram"].as_str().unwrap()).unwrap())
                    .unwrap();
            }
        }
    }
    assert_eq!(
        added.len(),
        one["requests"]["order"]["total"].as_u64().unwrap()
    );
    let reported: LatencySummary =
        serde_json::from_value(many["requests"]["order"]["latency"].clone()).unwrap();
    assert_eq!(reported, LatencySummary::of(&added));
    let kept = decode_histogram(many["histograms"]["order"].as_str().unwrap()).unwrap();
    assert_eq!(
        kept, added,
        "the merged report's order histogram is the shards' sum"
    );

    drop(shop);
    drop(net);
    drop_database(&single_db).await;
    drop_database(&db).await;
    crate::helpers::delete_prefix(&single_prefix).await;
    crate::helpers::delete_prefix(&prefix).await;
}
