//! The command line's promises, through the real binary: `--json` prints one JSON document on
//! every path (a usage error, a dry run), inputs that would be ignored or silently switched
//! are refused with exit 2 naming the flag, and a listen address may be a host name.

use crate::helpers::{drop_database, fresh_db_url, oversell_cli, CliRun};
use oversell::testing::store::Backend;
use serde_json::Value;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Stdout is exactly one JSON document (one line); returns it.
fn one_json_document(run: &CliRun) -> Value {
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "one line on stdout: {}", run.both());
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {}", run.both()))
}

#[tokio::test]
async fn a_usage_error_with_json_prints_schema_error_and_exit_code() {
    let run = oversell_cli(&["run", "--strategy", "bogus", "--json"], &[]).await;
    assert_eq!(run.code, 2, "{}", run.both());
    let v = one_json_document(&run);
    assert_eq!(v["schema"], oversell::cli::SUMMARY_SCHEMA, "{v}");
    assert_eq!(v["exit_code"], 2, "{v}");
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("bogus") && error.contains("--strategy"),
        "{error}"
    );
    assert!(
        run.stderr.contains("bogus"),
        "clap's message stays on stderr: {}",
        run.both()
    );

    // An unknown flag too, and without --json nothing is printed on stdout.
    let run = oversell_cli(&["compare", "--json", "--no-such-flag"], &[]).await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(one_json_document(&run)["error"]
        .as_str()
        .unwrap()
        .contains("--no-such-flag"));
    let plain = oversell_cli(&["compare", "--no-such-flag"], &[]).await;
    assert_eq!(
        (plain.code, plain.stdout.as_str()),
        (2, ""),
        "{}",
        plain.both()
    );
}

#[tokio::test]
async fn a_dry_run_with_json_prints_the_plan_as_one_document() {
    let run = oversell_cli(&["gate", "-S", "smoke", "--dry-run", "--json"], &[]).await;
    assert_eq!(run.code, 0, "{}", run.both());
    let v = one_json_document(&run);
    assert_eq!(v["schema"], oversell::cli::SUMMARY_SCHEMA, "{v}");
    assert_eq!(v["dry_run"], true, "{v}");
    let buyers = v["plan"]["buyers"].as_u64().unwrap();
    assert!(buyers > 0, "{v}");
    let arrivals: u64 = v["plan"]["arrivals_per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(arrivals, buyers, "every buyer arrives in some second: {v}");
    assert!(
        run.stderr.contains("buyers"),
        "the plan's text goes to stderr: {}",
        run.both()
    );
}

#[tokio::test]
async fn merge_refuses_metrics_listen_it_would_ignore() {
    let dir = tempfile::tempdir().unwrap();
    let shard = dir.path().to_str().unwrap();
    let run = oversell_cli(&["merge", shard, "--metrics-listen", ":0", "--json"], &[]).await;
    assert_eq!(run.code, 2, "{}", run.both());
    let v = one_json_document(&run);
    assert!(
        v["error"].as_str().unwrap().contains("--metrics-listen"),
        "{v}"
    );
}

#[tokio::test]
async fn run_refuses_a_database_url_of_another_backend_than_asked() {
    let run = oversell_cli(
        &[
            "run",
            "--strategy",
            "naive",
            "--backend",
            "mysql",
            "--database-url",
            "postgres://postgres:secret@127.0.0.1:5432/oversell",
            "--scenario",
            "smoke",
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("--backend mysql") && run.stderr.contains("--database-url"),
        "{}",
        run.both()
    );
    assert!(!run.stderr.contains("secret"), "{}", run.both());
    assert!(
        !run.stderr.contains("run 1/1"),
        "nothing was run: {}",
        run.both()
    );
}

#[tokio::test]
async fn serve_refuses_a_public_address_without_an_admin_token() {
    let run = oversell_cli(
        &["serve", "--strategy", "naive", "--listen", "0.0.0.0:0"],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("--admin-token") && run.stderr.contains("--allow-open-admin"),
        "{}",
        run.both()
    );
    assert!(!run.stdout.contains("listening"), "{}", run.both());
}

#[tokio::test]
async fn serve_listens_on_a_host_name() {
    let db = fresh_db_url(Backend::Postgres);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["serve", "-s", "conditional", "--listen", "localhost:0"])
        .args(["--database-url", &db])
        .env_remove("OVERSELL_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("oversell serve starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(60), stdout.read_line(&mut line))
        .await
        .expect("the shop prints its address")
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{line}");
    let health = reqwest::get(format!("{url}/healthz")).await.unwrap();
    assert!(health.status().is_success(), "{}", health.status());
    child.kill().await.unwrap();
    let _ = child.wait().await;
    drop_database(&db).await;
}

#[tokio::test]
async fn bench_shop_json_reports_an_error_as_one_document() {
    let run = oversell_cli(
        &[
            "bench",
            "shop",
            "-s",
            "naive",
            "--duration",
            "1500ms",
            "--json",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.both());
    let v = one_json_document(&run);
    assert_eq!(v["exit_code"], 2, "{v}");
    assert!(v["error"].as_str().unwrap().contains("--duration"), "{v}");
}

#[tokio::test]
async fn serve_refuses_a_short_admin_token_on_a_public_address() {
    // A shop that took the token would serve until killed: it must exit at once.
    let run = tokio::time::timeout(
        Duration::from_secs(60),
        oversell_cli(
            &["serve", "--strategy", "naive", "--listen", "0.0.0.0:0"],
            &[("OVERSELL_ADMIN_TOKEN", "change-me")],
        ),
    )
    .await
    .expect("serve refuses at once instead of listening");
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("--admin-token is 9 characters") && run.stderr.contains("16"),
        "{}",
        run.both()
    );
    assert!(!run.stderr.contains("change-me"), "the token is not echoed");
    assert!(!run.stdout.contains("listening"), "{}", run.both());
}

#[tokio::test]
async fn run_and_compare_dry_runs_print_each_run_and_send_nothing() {
    let run = oversell_cli(
        &[
            "run",
            "--strategy",
            "naive",
            "--scenario",
            "smoke",
            "--dry-run",
            "--services",
            "external",
            "--database-url",
            "postgres://nobody@127.0.0.1:1/none",
        ],
        &[],
    )
    .await;
    assert_eq!(
        run.code,
        0,
        "nothing is reached, so nothing fails: {}",
        run.both()
    );
    assert!(
        run.stdout.contains("dry run: nothing is sent. 1 run(s)"),
        "{}",
        run.both()
    );
    assert!(
        run.stdout.contains("run 1/1: naive/postgres"),
        "{}",
        run.both()
    );
    assert!(
        run.stdout.contains("arrivals"),
        "the schedule is shown: {}",
        run.both()
    );

    let run = oversell_cli(
        &[
            "compare",
            "--strategy",
            "naive,redis-lua",
            "--backend",
            "postgres,mysql",
            "--scenario",
            "smoke",
            "--repeat",
            "2",
            "--fault",
            "db-outage@1:500ms",
            "--dry-run",
            "--json",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    let v = one_json_document(&run);
    assert_eq!(v["dry_run"], true, "{v}");
    let runs: Vec<&str> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(runs.len(), 8, "2 strategies × 2 backends × 2 repeats: {v}");
    assert!(runs.contains(&"redis-lua/mysql #2"), "{runs:?}");

    assert!(
        run.stderr.contains("faults in each run: db-outage@1:500ms"),
        "{}",
        run.both()
    );

    // With several backends --database-url serves the one it names, as --help says (it was
    // refused as "another backend than asked").
    let run = oversell_cli(
        &[
            "compare",
            "--backend",
            "postgres,mysql",
            "--database-url",
            "postgres://nobody@127.0.0.1:1/none",
            "--dry-run",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(run.stdout.contains("naive/mysql"), "{}", run.both());
    let widest = run.stdout.lines().map(|l| l.chars().count()).max();
    assert!(
        widest <= Some(100),
        "the plan fits 100 columns: {}",
        run.stdout
    );
}

#[tokio::test]
async fn capacity_against_a_foreign_target_caps_its_rate_and_says_so() {
    let run = oversell_cli(
        &[
            "capacity",
            "--target",
            "http://127.0.0.1:9",
            "--scenario",
            "scenarios/rehearsal-stock-only.toml",
            "--dry-run",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    // rehearsal-stock-only: 300 buyers over 3 s, 100/s; capped at 4× that.
    assert!(
        run.stderr.contains("rates capped at 400 buyers/s"),
        "the cap is printed: {}",
        run.both()
    );
    let worst = run
        .stdout
        .lines()
        .find(|l| l.starts_with("worst case: at most "))
        .unwrap_or_else(|| panic!("{}", run.both()));
    let n: u64 = worst["worst case: at most ".len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(n < 200_000, "the worst case is capped: {worst}");
    assert!(
        run.flat_stdout().contains("none above 400 buyers/s"),
        "{}",
        run.both()
    );
    // --max-rate lifts the cap, and nothing is printed about one.
    let run = oversell_cli(
        &[
            "capacity",
            "--target",
            "http://127.0.0.1:9",
            "--scenario",
            "scenarios/rehearsal-stock-only.toml",
            "--max-rate",
            "800",
            "--dry-run",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(!run.stderr.contains("capped"), "{}", run.both());
}

#[tokio::test]
async fn attack_without_a_scenario_fires_the_small_smoke_rush_and_says_so() {
    let run = oversell_cli(
        &[
            "attack",
            "--target",
            "http://127.0.0.1:9",
            "--dry-run",
            "--json",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(
        run.stderr
            .contains("no --scenario: using the small bundled `smoke` rush"),
        "{}",
        run.both()
    );
    let v = one_json_document(&run);
    let smoke = oversell::testing::scenarios::resolve(std::path::Path::new("smoke"))
        .unwrap()
        .0;
    assert_eq!(
        v["plan"]["buyers"].as_u64(),
        Some(smoke.total_buyers() as u64),
        "{v}"
    );
}

#[tokio::test]
async fn the_scenario_list_fits_100_columns() {
    let run = oversell_cli(&["scenarios"], &[]).await;
    assert_eq!(run.code, 0, "{}", run.both());
    let widest = run.stdout.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 100, "{widest} columns:\n{}", run.stdout);
    for b in oversell::testing::scenarios::BUNDLED {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(b.name)),
            "{}",
            b.name
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goose_prints_nothing_on_the_terminal_its_lines_go_to_the_runs_goose_log() {
    let db = fresh_db_url(Backend::Postgres);
    let out = tempfile::tempdir().unwrap();
    let run = oversell_cli(
        &[
            "run",
            "--strategy",
            "conditional",
            "--scenario",
            "smoke",
            "--database-url",
            &db,
            "--redis-url",
            &crate::helpers::redis_url(),
            "--out",
            out.path().to_str().unwrap(),
        ],
        &[],
    )
    .await;
    drop_database(&db).await;
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(
        !run.stdout.contains("users launched") && !run.stderr.contains("users launched"),
        "goose's line stays off the terminal: {}",
        run.both()
    );
    assert!(
        run.stdout.contains("conditional: sold 10 of 10"),
        "{}",
        run.both()
    );
    let dir = crate::helpers::only_report_dir(out.path());
    let log = std::fs::read_to_string(dir.join("goose.log")).unwrap_or_default();
    assert!(log.contains("users launched"), "goose.log: {log:?}");
    // Every progress line fits 100 columns, a longer one folded under its run.
    for line in run.stderr.lines() {
        assert!(line.chars().count() <= 100, "{line}");
    }
}
