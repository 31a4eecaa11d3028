//! A generator that is really late is caught every time: one starved of CPU (stopped by the
//! OS for most of every 200 ms, as a machine whose other processes outrank it would) and one
//! asked for more arrivals than it can send. The rule itself, both sides, is unit-tested in
//! `report::lateness`. A stand-in shop in the test binary (one counter), the bundled
//! `rehearsal-stock-only` scenario's mapping.

use crate::helpers::*;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

async fn purchase(State(stock): State<Arc<AtomicI64>>) -> (StatusCode, Json<Value>) {
    if stock.fetch_sub(1, Ordering::SeqCst) > 0 {
        (StatusCode::OK, Json(json!({"message": "purchased"})))
    } else {
        stock.fetch_add(1, Ordering::SeqCst);
        (StatusCode::CONFLICT, Json(json!({"detail": "sold out"})))
    }
}

async fn level(State(stock): State<Arc<AtomicI64>>) -> Json<Value> {
    Json(json!({"current_stock": stock.load(Ordering::SeqCst)}))
}

async fn reset(
    State(stock): State<Arc<AtomicI64>>,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, i64>>,
) -> StatusCode {
    stock.store(q.get("amount").copied().unwrap_or(0), Ordering::SeqCst);
    StatusCode::OK
}

/// The counter shop on 127.0.0.1:0.
async fn spawn_counter() -> String {
    let app = Router::new()
        .route("/purchase", post(purchase))
        .route("/stock", get(level))
        .route("/stock/reset", post(reset))
        .with_state(Arc::new(AtomicI64::new(0)));
    serve_stand_in(app).await
}

/// `rehearsal-stock-only` with `buyers` arriving within `window`, in a file of its own.
fn scenario(dir: &std::path::Path, buyers: u32, window: &str) -> String {
    let text = std::fs::read_to_string("scenarios/rehearsal-stock-only.toml")
        .unwrap()
        .replace("count = 300", &format!("count = {buyers}"))
        .replace(
            "window_s = 3.0\nburst_s = 0.5",
            &format!("window_s = {window}\nburst_s = 0.1"),
        );
    let file = dir.join("scenario.toml");
    std::fs::write(&file, text).unwrap();
    file.to_str().unwrap().to_string()
}

/// `oversell gate` against `base`, its process stopped by SIGSTOP for `stopped` of every
/// `cycle` while it runs (zero: left alone).
async fn gate_starved(
    base: &str,
    scenario: &str,
    out: &std::path::Path,
    stopped: Duration,
) -> CliRun {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["gate", "--target", base, "--scenario", scenario, "--quiet"])
        .args(["--out", out.to_str().unwrap()])
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("DATABASE_URL")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the oversell binary runs");
    let pid = nix::unistd::Pid::from_raw(child.id().expect("running") as i32);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let freezer = {
        let done = done.clone();
        tokio::spawn(async move {
            let cycle = Duration::from_millis(200);
            while !stopped.is_zero() && !done.load(Ordering::SeqCst) {
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP);
                tokio::time::sleep(stopped).await;
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
                tokio::time::sleep(cycle - stopped).await;
            }
        })
    };
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("the run ends")
        .unwrap();
    done.store(true, Ordering::SeqCst);
    freezer.await.unwrap();
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
    CliRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[tokio::test]
async fn a_generator_starved_of_cpu_is_flagged_and_its_latency_is_not_blamed_on_the_shop() {
    // Arrange: 300 buyers over 3 s at a shop that answers in microseconds.
    let base = spawn_counter().await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), 300, "3.0");

    // Act: the generator is stopped 150 ms of every 200 ms.
    let run = gate_starved(&base, &file, tmp.path(), Duration::from_millis(150)).await;

    // Assert
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["generator_bound"], true, "{}\n{r}", run.both());
    let why = r["generator_lateness"]["bound"].as_str().unwrap();
    assert!(why.contains("materially inflates the latency"), "{why}");
    // Stopped 150 ms of every 200: a request waits ~56 ms on average for the process to run.
    let lat = &r["generator_lateness"]["figures"];
    let mean = lat
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["figure"] == "mean")
        .unwrap();
    assert!(
        mean["with_lag_ms"].as_f64().unwrap() > mean["without_lag_ms"].as_f64().unwrap() + 10.0,
        "{mean}"
    );
    assert_eq!(r["oversell"], 0, "the shop is still judged: {r}");
    // The generator took its place: raised where the OS allows it (root here under CI).
    let place = &only_report(tmp.path())["machine"]["placement"];
    let nice = place["generator_nice"].as_i64().unwrap();
    if nix::unistd::geteuid().is_root() {
        let from = place["raised_from"]
            .as_i64()
            .unwrap_or_else(|| panic!("root may raise: {place}"));
        assert_eq!(
            nice,
            from - oversell::placement::GENERATOR_RAISE as i64,
            "{place}"
        );
    }
    assert_eq!(
        place["children_nice"].as_i64().unwrap(),
        (nice + oversell::placement::CHILD_NICE as i64).min(19),
        "{place}"
    );
}

#[tokio::test]
async fn arrivals_beyond_what_the_generator_can_send_fail_the_gate_as_generator_bound() {
    // Arrange: 30,000 buyers within 0.2 s: far past what one debug-build process sends.
    let base = spawn_counter().await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), 30_000, "0.2");

    // Act
    let run = gate_starved(&base, &file, tmp.path(), Duration::ZERO).await;

    // Assert: the arrivals went out seconds late (the senders all held): flagged, said on the
    // terminal and marked in the table, and the gate fails for it, not for the shop.
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["generator_bound"], true, "{}\n{r}", run.both());
    let why = r["generator_lateness"]["bound"].as_str().unwrap();
    assert!(why.contains("after their intended send"), "{why}");
    assert!(
        r["generator_lateness"]["late_sends"].as_u64().unwrap() > 300,
        "{}",
        r["generator_lateness"]
    );
    assert_eq!(run.code, 1, "{}", run.both());
    let row = run.check_row("late_sends").unwrap_or_default();
    assert!(
        row.trim_end().ends_with("FAIL (generator-bound)"),
        "{}",
        run.both()
    );
    assert!(
        run.flat_stdout().contains("GENERATOR-BOUND"),
        "{}",
        run.both()
    );
    assert!(run.stdout.contains("† generator-bound"), "{}", run.both());
    assert_eq!(r["oversell"], 0, "{r}");
}
