//! The binary as a user meets it: the live metrics endpoint scraped while a run runs, `--json`
//! on stdout, bundled scenarios from any directory, `oversell scenarios`, shell completions,
//! and the shop's `/metrics` with its `# HELP` lines and content type.

use crate::helpers::*;
use oversell::testing::inventory::Strategy;
use oversell::testing::probe::scrape;
use oversell::testing::store::Backend;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// The sum of every sample of the metric `name`.
fn total(s: &scrape::Page, name: &str) -> f64 {
    scrape::sum(s, name, None)
}

/// The `oversell` binary run from `cwd`, with stdout and stderr piped.
fn oversell_in(cwd: &Path, args: &[&str]) -> tokio::process::Child {
    Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(args)
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("DATABASE_URL")
        .current_dir(cwd)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the oversell binary runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_endpoint_shows_arrivals_and_answers_growing_while_a_bundled_scenario_runs_from_another_directory(
) {
    // Arrange: a directory with no scenarios/ folder in it.
    let db = fresh_db_url(Backend::Postgres);
    let cwd = tempfile::tempdir().unwrap();
    let redis = redis_url();
    let args = [
        "run",
        "--strategy",
        "redis-lua",
        "--scenario",
        "smoke",
        "--metrics-listen",
        "127.0.0.1:0",
        "--json",
        "--out",
        "reports",
        "--database-url",
        &db,
        "--redis-url",
        &redis,
    ];

    // Act: start the run, read the live address it prints, scrape while it runs.
    let mut child = oversell_in(cwd.path(), &args);
    let mut stdout = child.stdout.take().unwrap();
    let stdout_task = tokio::spawn(async move {
        let mut s = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stdout, &mut s)
            .await
            .unwrap();
        s
    });
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    let url = loop {
        let line = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
            .await
            .expect("the live address is printed at start")
            .unwrap()
            .unwrap_or_else(|| panic!("stderr ended before the live address:\n{stderr}"));
        stderr.push_str(&line);
        stderr.push('\n');
        if let Some(rest) = line.strip_prefix("live metrics: ") {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    let stderr_task = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            stderr.push_str(&line);
            stderr.push('\n');
        }
        stderr
    });
    let http = reqwest::Client::new();
    let targets_url = url.replace("/metrics", "/targets");
    let mut seen: Vec<(f64, f64)> = Vec::new();
    let mut shop_targets = Vec::new();
    let mut first_page = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while tokio::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if let Ok(resp) = http.get(&url).send().await {
            let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
            let text = resp.text().await.unwrap();
            let s = scrape::parse(&text);
            seen.push((
                total(&s, "oversell_harness_arrivals_total"),
                total(&s, "oversell_harness_answers_total"),
            ));
            first_page.get_or_insert((content_type, text));
        }
        if let Ok(r) = http.get(&targets_url).send().await {
            if let Ok(Value::Array(t)) = r.json::<Value>().await {
                shop_targets.extend(t);
            }
        }
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    let status = child.wait().await.unwrap();
    let stdout = stdout_task.await.unwrap();
    let stderr = stderr_task.await.unwrap();
    drop_database(&db).await;

    // Assert: the endpoint spoke Prometheus, with HELP lines.
    assert!(status.success(), "{stderr}");
    let (content_type, page) = first_page.expect("the endpoint answered during the run");
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    assert!(
        page.contains("# HELP oversell_harness_arrivals_total ")
            && page.contains("# TYPE oversell_harness_arrivals_total counter"),
        "{page}"
    );
    // Arrivals and answers grew while the run was in progress.
    let mid_run: Vec<&(f64, f64)> = seen
        .iter()
        .filter(|(a, _)| *a > 0.0 && *a < 300.0)
        .collect();
    let growing_arrivals = seen.windows(2).filter(|w| w[1].0 > w[0].0).count();
    let growing_answers = seen.windows(2).filter(|w| w[1].1 > w[0].1).count();
    assert!(
        !mid_run.is_empty() && growing_arrivals >= 2 && growing_answers >= 2,
        "arrivals and answers grew during the run: {seen:?}"
    );
    assert_eq!(
        seen.last().map(|s| s.0),
        Some(300.0),
        "every buyer arrived: {seen:?}"
    );
    // Prometheus could find the child shop through /targets.
    assert!(
        shop_targets
            .iter()
            .any(|t| t["labels"]["run"] == "redis-lua/postgres"
                && t["targets"][0]
                    .as_str()
                    .is_some_and(|a| a.starts_with("127.0.0.1:"))),
        "{shop_targets:?}"
    );
    // The shop's own /metrics address was printed.
    // (The line is folded at 100 columns: read it with its continuation.)
    let flat = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.contains("/metrics, log "),
        "the shop's metrics address is printed: {stderr}"
    );
    // The bundled scenario was used, and said so.
    assert!(stderr.contains("scenario: smoke (bundled"), "{stderr}");
    // stdout is one JSON summary and nothing else.
    let summary: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}): {stdout:?}"));
    assert_eq!(summary["schema"], "oversell.summary/v1");
    assert_eq!(summary["runs"][0]["strategy"], "redis-lua");
    assert_eq!(summary["runs"][0]["metrics"]["oversell"], 0.0);
    assert!(summary["runs"][0]["metrics"]["p99_ms"].as_f64().unwrap() > 0.0);
    // The table went to stderr.
    assert!(stderr.contains("oversold units"), "{stderr}");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(summary["report"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!(report["scenario"]["file"], "bundled:smoke");
}

#[tokio::test]
async fn gate_json_carries_the_verdict_and_a_scenario_path_still_works() {
    // Arrange: a small scenario file of our own (a path wins over the bundled names).
    let db = fresh_db_url(Backend::Postgres);
    let tmp = tempfile::tempdir().unwrap();
    let mut spec: toml::Table = toml::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/ci.toml"))
            .unwrap(),
    )
    .unwrap();
    spec["name"] = "tiny-gate".into();
    spec["buyers"]["count"] = 60.into();
    let file = tmp.path().join("tiny.toml");
    std::fs::write(&file, toml::to_string(&spec).unwrap()).unwrap();
    let out = tmp.path().join("reports");

    // Act
    let run = oversell_cli(
        &[
            "gate",
            "--scenario",
            file.to_str().unwrap(),
            "--strategy",
            "redis-lua",
            "--database-url",
            &db,
            "--redis-url",
            &redis_url(),
            "--out",
            out.to_str().unwrap(),
            // A debug build on a shared test machine: the generator is not what this judges.
            "--json",
        ],
        &[],
    )
    .await;
    drop_database(&db).await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let v: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}): {}", run.both()));
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["gate"]["passed"], true);
    let checks = v["gate"]["checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["threshold"] == "oversell" && c["status"] == "passed"),
        "{checks:?}"
    );
    assert!(run.stderr.contains("oversell gate: PASS"), "{}", run.both());
    assert!(
        run.stderr
            .contains(&format!("scenario: file {}", file.display())),
        "{}",
        run.both()
    );
    assert_eq!(
        only_report(&out)["scenario"]["file"],
        file.to_str().unwrap()
    );
}

#[tokio::test]
async fn a_failed_command_with_json_says_so_on_stdout() {
    let run = oversell_cli(
        &[
            "run",
            "--strategy",
            "naive",
            "--scenario",
            "no-such-sale",
            "--json",
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.both());
    let v: Value = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is JSON ({e}): {}", run.both()));
    assert_eq!(v["exit_code"], 2);
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("no-such-sale") && error.contains("flash-100"),
        "the error names the argument and the bundled scenarios: {error}"
    );
}

#[tokio::test]
async fn oversell_scenarios_lists_every_bundled_scenario_with_its_description() {
    let run = oversell_cli(&["scenarios"], &[]).await;
    assert_eq!(run.code, 0, "{}", run.both());
    let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let lines: Vec<&str> = run.stdout.lines().collect();
    for b in oversell::testing::scenarios::BUNDLED {
        let s = b.load().unwrap();
        let at = lines
            .iter()
            .position(|l| l.split_whitespace().next() == Some(b.name))
            .unwrap_or_else(|| panic!("{} is listed: {}", b.name, run.stdout));
        // A long description continues on the indented rows under its scenario (100 columns).
        let rows: Vec<&str> = std::iter::once(lines[at])
            .chain(
                lines[at + 1..]
                    .iter()
                    .copied()
                    .take_while(|l| l.starts_with(' ')),
            )
            .collect();
        let listed = flat(&rows.join(" "));
        assert!(listed.contains(&flat(&s.description)), "{listed}");
    }
}

#[test]
fn every_file_of_the_scenarios_folder_is_bundled() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "toml").then(|| p.file_stem().unwrap().to_string_lossy().into())
        })
        .collect();
    files.sort();
    let mut bundled: Vec<String> = oversell::testing::scenarios::BUNDLED
        .iter()
        .map(|b| b.name.to_string())
        .collect();
    bundled.sort();
    assert_eq!(files, bundled);
    for b in oversell::testing::scenarios::BUNDLED {
        assert_eq!(
            std::fs::read_to_string(root.join(format!("{}.toml", b.name))).unwrap(),
            b.text
        );
    }
}

#[tokio::test]
async fn completions_are_generated_for_bash_zsh_and_fish() {
    for shell in ["bash", "zsh", "fish"] {
        let run = oversell_cli(&["completions", shell], &[]).await;
        assert_eq!(run.code, 0, "{}", run.both());
        for word in ["oversell", "compare", "metrics-listen", "json", "redis-lua"] {
            assert!(run.stdout.contains(word), "{shell} completes {word}");
        }
    }
    let bad = oversell_cli(&["completions", "cmd.exe"], &[]).await;
    assert_eq!(bad.code, 2, "{}", bad.both());
}

#[tokio::test]
async fn the_shops_metrics_have_help_lines_and_the_prometheus_content_type() {
    // Arrange
    let app = spawn_app(Strategy::Naive, Backend::Postgres).await;
    app.setup_sale(1, 5, 1).await;
    let (status, _) = app
        .order(serde_json::json!({"item_id": 1, "user_id": "u-1", "qty": 1, "device_id": "d-1"}))
        .await;
    assert_eq!(status, 201);

    // Act
    let resp = app
        .client
        .get(format!("{}/metrics", app.address))
        .send()
        .await
        .unwrap();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    let text = resp.text().await.unwrap();
    app.teardown().await;

    // Assert
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    for name in [
        "oversell_orders_total",
        "oversell_http_requests_total",
        "oversell_db_pool_in_use",
    ] {
        assert!(
            text.contains(&format!("# HELP {name} ")),
            "{name} has a HELP line:\n{text}"
        );
    }
}
