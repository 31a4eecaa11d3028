//! `oversell capacity` and `oversell sweep` on the reference shop: a deliberately slow
//! for-update (`work`) found near the rate its work implies, naive stopped at its first
//! oversell, a generator-bound probe read as "at least", a target without a set-up refused,
//! and `sweep --vary pool-size=2,8` writing one run per value and its charts.

use crate::helpers::*;
use oversell::testing::store::Backend;
use serde_json::Value;
use std::path::Path;

/// for-update holds the item's row for `work` per order: one row, one order at a time, so
/// at most 1000 / 50 = 20 orders/s. Every buyer orders once and walks away (no follow-ups);
/// one unit per buyer, so no one is turned away and every order does the work.
const SLOW: &str = r#"
name = "slow-for-update"
[item]
stock = 100
[buyers]
count = 100
seed = 7
arrival = "uniform"
window_s = 10.0
[after_order]
pay = 0.0
cancel = 0.0
abandon = 1.0
[shop]
work = "50ms"
pool_size = 4
acquire_timeout = "20s"
lock_timeout = "20s"
[thresholds]
p99_ms = 400
"#;

/// The rate `SLOW`'s `work` implies: 1000 ms / 50 ms per order, one order per buyer.
const SLOW_IMPLIED_RPS: f64 = 20.0;

/// naive with a 300 ms race window and three buyers per unit: any two buyers within 300 ms of
/// each other near the last units both buy.
const RACY: &str = r#"
name = "racy-naive"
[item]
stock = 10
[buyers]
count = 30
seed = 3
arrival = "uniform"
window_s = 3.0
[after_order]
pay = 0.0
cancel = 0.0
abandon = 1.0
[shop]
naive_gap = "300ms"
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// `oversell capacity` with `extra` flags on a fresh database, `--json` on stdout; the run and
/// the summary (the report.json with its folder).
async fn capacity(scenario: &str, out: &Path, extra: &[&str]) -> (CliRun, Option<Value>) {
    let db = fresh_db_url(Backend::Postgres);
    let redis = redis_url();
    let mut args = vec![
        "capacity",
        "--scenario",
        scenario,
        "--database-url",
        &db,
        "--redis-url",
        &redis,
        "--out",
        out.to_str().unwrap(),
        "--json",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let run = oversell_cli(&args, &[]).await;
    drop_database(&db).await;
    let json = serde_json::from_str(run.stdout.trim()).ok();
    (run, json)
}

#[tokio::test]
async fn capacity_finds_a_slow_for_update_near_the_rate_its_work_implies() {
    // Arrange
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write(tmp.path(), "slow.toml", SLOW);

    // Act: doubling from 5/s, bisected to 25 %; the send-lag bound is loose, so a busy
    // machine's generator does not make the answer "at least".
    let (run, json) = capacity(
        &scenario,
        &tmp.path().join("reports"),
        &[
            "--strategies",
            "for-update",
            "--probe-seconds",
            "3",
            "--start-rate",
            "5",
            "--precision",
            "25",
            "--max-send-lag-ms",
            "250",
            "--budget",
            "5m",
        ],
    )
    .await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let report = json.expect("--json prints the report");
    assert_eq!(report["schema"], "oversell.capacity/v1");
    let o = &report["outcomes"][0];
    assert_eq!(o["strategy"], "for-update", "{o}");
    assert_eq!(o["answer"]["kind"], "bracket", "{o}");
    let lo = o["bracket"][0].as_f64().unwrap();
    let hi = o["bracket"][1].as_f64().unwrap();
    assert_eq!(o["capacity_rps"].as_f64(), Some(lo));
    assert!(
        (hi - lo) / lo <= 0.25,
        "the bracket {lo}..{hi} is within the precision"
    );
    assert!(
        lo >= SLOW_IMPLIED_RPS * 0.4 && hi <= SLOW_IMPLIED_RPS * 1.5,
        "{lo}..{hi} buyers/s brackets the {SLOW_IMPLIED_RPS}/s that 50 ms of locked work per order allows"
    );
    // Every probe is a real run with its own report, judged on its own figures.
    let probes = o["probes"].as_array().unwrap();
    assert_eq!(o["probes_used"].as_u64(), Some(probes.len() as u64));
    let dir = Path::new(report["report_dir"].as_str().unwrap());
    for p in probes {
        let folder = dir.join(p["report"].as_str().unwrap());
        assert!(folder.join("report.json").exists(), "{p}");
        let p99 = p["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["metric"] == "p99_ms")
            .expect("the scenario's p99 limit is checked on every probe");
        assert_eq!(p99["source"], "order latency, oversell HdrHistogram");
        assert_eq!(p99["measured"], p["p99_ms"], "{p}");
    }
    assert!(probes
        .iter()
        .any(|p| p["rate_rps"].as_f64() == Some(hi) && p["judged"] == "broke"));
    for chart in ["capacity-p99", "capacity-error-rate", "capacity-sold-out"] {
        assert!(dir.join(format!("{chart}.svg")).exists(), "{chart}");
        assert!(dir.join(format!("{chart}.png")).exists(), "{chart}");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<svg") && html.contains("for-update/postgres"));
    assert!(std::fs::read_to_string(dir.join("report.md"))
        .unwrap()
        .contains("| for-update/postgres |"));
}

#[tokio::test]
async fn naive_stops_at_the_first_rate_where_it_oversells_and_says_so() {
    // Arrange
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write(tmp.path(), "racy.toml", RACY);

    // Act
    let (run, json) = capacity(
        &scenario,
        &tmp.path().join("reports"),
        &[
            "--strategies",
            "naive",
            "--probe-seconds",
            "3",
            "--start-rate",
            "10",
            "--budget",
            "2m",
        ],
    )
    .await;

    // Assert: one probe, the search over, the rate where correctness broke first.
    assert_eq!(run.code, 0, "{}", run.both());
    let o = &json.expect("--json prints the report")["outcomes"][0];
    assert_eq!(o["answer"]["kind"], "incorrect", "{o}");
    assert_eq!(o["correctness_broke_at_rps"].as_f64(), Some(10.0));
    assert_eq!(o["capacity_rps"], Value::Null);
    assert_eq!(o["probes_used"], 1, "the search ends at the first oversell");
    assert!(
        o["answer"]["metric"].as_str().unwrap().contains("oversell"),
        "{o}"
    );
    assert!(
        run.stderr.contains("CORRECTNESS BROKE at 10.0/s"),
        "the table says so: {}",
        run.both()
    );
    assert!(run.stderr.contains("INCORRECT at 10.0/s"), "{}", run.both());
}

#[tokio::test]
async fn a_probe_that_breaks_while_the_generator_is_the_limit_yields_at_least() {
    // Arrange: a send-lag bound no generator meets, so every probe is generator-bound; the
    // probes that hold still count, the one that breaks is not held against the shop.
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write(tmp.path(), "slow.toml", SLOW);

    // Act
    let (run, json) = capacity(
        &scenario,
        &tmp.path().join("reports"),
        &[
            "--strategies",
            "for-update",
            "--probe-seconds",
            "3",
            "--start-rate",
            "5",
            "--precision",
            "60",
            "--max-send-lag-ms",
            "0.001",
            "--budget",
            "5m",
        ],
    )
    .await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let o = &json.expect("--json prints the report")["outcomes"][0];
    assert_eq!(o["answer"]["kind"], "at_least", "{o}");
    assert_eq!(o["answer"]["why"]["limit"], "generator", "{o}");
    assert!(o["capacity_rps"].as_f64().unwrap() >= 5.0, "{o}");
    let probes = o["probes"].as_array().unwrap();
    assert!(
        probes.iter().any(|p| p["judged"] == "generator_limit"),
        "{o}"
    );
    assert!(
        run.stderr.contains("at least") && run.stderr.contains("generator limit"),
        "{}",
        run.both()
    );
}

#[tokio::test]
async fn a_target_without_a_set_up_is_refused_before_anything_is_sent() {
    // Arrange: a listener that would see any connection.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write(
        tmp.path(),
        "no-setup.toml",
        r#"
name = "no-setup"
[item]
stock = 10
[buyers]
count = 20
arrival = "uniform"
window_s = 1.0
[after_order]
pay = 0.0
abandon = 1.0
[target]
order = { method = "POST", path = "/orders", body = '{"item": {item_id}}' }
outcomes = [{ status = ["201"], outcome = "created" }, { status = ["409"], outcome = "sold_out" }]
"#,
    );

    // Act
    let run = against(
        "capacity",
        &base,
        &scenario,
        &tmp.path().join("reports"),
        &["--budget", "1m"],
    )
    .await;

    // Assert
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("set-up") && run.stderr.contains("[target]"),
        "{}",
        run.both()
    );
    assert!(
        listener.accept().is_err(),
        "nothing connected to the target"
    );
    assert!(
        !tmp.path().join("reports").exists(),
        "no report was started"
    );
}

#[tokio::test]
async fn bad_capacity_and_sweep_input_names_the_flag_and_the_allowed_values() {
    let cases: [(&[&str], &[&str]); 5] = [
        (
            &["capacity", "--slo", "p99=200"],
            &["--slo", "threshold `p99` is a duration", "p99=200ms"],
        ),
        (
            &["capacity", "--strategies", "naive", "--budget", "10s"],
            &["--budget 10s is too small", "at least 15s"],
        ),
        (
            &["capacity", "--precision", "0"],
            &["--precision", "above 0"],
        ),
        (
            &[
                "sweep",
                "--strategy",
                "for-update",
                "--vary",
                "batch-max=1,2",
            ],
            &["--vary batch-max", "does not have", "batched", "pool-size"],
        ),
        (
            &[
                "sweep",
                "--strategy",
                "for-update",
                "--vary",
                "pool-size=0,8",
            ],
            &["--vary pool-size=0", "between 1 and 1000"],
        ),
    ];
    for (args, needles) in cases {
        let run = oversell_cli(args, &[]).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.both());
        for n in needles {
            assert!(
                run.stderr.contains(n),
                "{args:?} lacks {n:?}: {}",
                run.both()
            );
        }
    }
}

#[tokio::test]
async fn dry_run_prints_the_probe_plan_and_sends_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");
    let run = oversell_cli(
        &[
            "capacity",
            "--strategies",
            "for-update,redis-lua",
            "--probe-seconds",
            "5",
            "--budget",
            "2m",
            "--dry-run",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    // flash-100's own rate, 3000 buyers over 60 s, doubled: 50, 100, 200 ...
    for line in ["50.0 ", "100 ", "200 ", "worst case: at most"] {
        assert!(run.stdout.contains(line), "{line:?}: {}", run.both());
    }
    assert!(!out.exists(), "a dry run writes nothing");
}

#[tokio::test]
async fn sweep_over_pool_size_writes_one_run_per_value_and_a_chart() {
    // Arrange
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write(
        tmp.path(),
        "small.toml",
        &SLOW
            .replace("count = 100", "count = 20")
            .replace("window_s = 10.0", "window_s = 2.0")
            .replace("work = \"50ms\"", "work = \"5ms\""),
    );
    let db = fresh_db_url(Backend::Postgres);
    let out = tmp.path().join("reports");

    // Act
    let run = oversell_cli(
        &[
            "sweep",
            "--scenario",
            &scenario,
            "--strategy",
            "for-update",
            "--vary",
            "pool-size=2,8",
            "--database-url",
            &db,
            "--redis-url",
            &redis_url(),
            "--out",
            out.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    drop_database(&db).await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let dir = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("sweep.json").exists())
        .expect("a sweep folder");
    let sweep: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(sweep["schema"], "oversell.sweep/v1");
    assert_eq!(sweep["knob"], "pool-size");
    let points = sweep["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for (p, size) in points.iter().zip([2, 8]) {
        assert_eq!(p["value"], size.to_string());
        let report = oversell::report::read(Path::new(p["report"].as_str().unwrap())).unwrap();
        assert_eq!(report.runs.len(), 1, "one run per value");
        assert_eq!(
            report.scenario.spec.shop.pool_size, size,
            "the run had the value"
        );
        assert!(p["metrics"]["p99_ms"].as_f64().is_some(), "{p}");
    }
    assert!(dir.join("sweep-p99_ms.svg").exists());
    assert!(dir.join("sweep-p99_ms.png").exists());
    assert!(std::fs::read_to_string(dir.join("report.html"))
        .unwrap()
        .contains("<svg"));
    assert!(run.stdout.contains("pool-size"), "{}", run.both());
}

#[tokio::test]
async fn gate_requires_a_capacity_by_holding_the_objective_at_that_rate() {
    // Arrange: the slow for-update over 2 s: 20 buyers/s is about all its locked work allows.
    let tmp = tempfile::tempdir().unwrap();
    let scenario = write(
        tmp.path(),
        "slow.toml",
        &SLOW
            .replace("count = 100", "count = 10")
            .replace("window_s = 10.0", "window_s = 2.0"),
    );
    let gate = |rate: &'static str, out: std::path::PathBuf| {
        let scenario = scenario.clone();
        async move {
            let db = fresh_db_url(Backend::Postgres);
            let threshold = format!("capacity_rps={rate}");
            let run = oversell_cli(
                &[
                    "gate",
                    "--scenario",
                    &scenario,
                    "--strategy",
                    "for-update",
                    "--threshold",
                    &threshold,
                    "--max-send-lag-ms",
                    "250",
                    "--database-url",
                    &db,
                    "--redis-url",
                    &redis_url(),
                    "--out",
                    out.to_str().unwrap(),
                    "--json",
                    "--quiet",
                ],
                &[],
            )
            .await;
            drop_database(&db).await;
            let summary: Value = serde_json::from_str(run.stdout.trim()).expect("--json");
            (run, summary)
        }
    };

    // Act
    let (low, low_json) = gate("4", tmp.path().join("low")).await;
    let (high, high_json) = gate("80", tmp.path().join("high")).await;

    // Assert: at 4/s the objective holds; at 80/s (four times what 50 ms per order allows)
    // p99 breaks, and so does the capacity required.
    let check = |j: &Value| {
        j["gate"]["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["threshold"] == "capacity_rps")
            .cloned()
            .expect("the capacity check")
    };
    assert_eq!(low.code, 0, "{}", low.both());
    assert_eq!(check(&low_json)["status"], "passed");
    assert_eq!(check(&low_json)["measured"].as_f64(), Some(4.0));
    assert_eq!(low_json["runs"][0]["metrics"]["capacity_rps"], Value::Null);
    let report = oversell::report::read(Path::new(low_json["report"].as_str().unwrap())).unwrap();
    assert_eq!(
        report.scenario.spec.buyers.count, 8,
        "the scenario ran at 4 buyers/s over 2 s"
    );
    assert_eq!(high.code, 1, "{}", high.both());
    assert_eq!(check(&high_json)["status"], "breached", "{high_json}");
    assert!(high.stderr.contains(">= 80.0 buyers/s"), "{}", high.both());
}
