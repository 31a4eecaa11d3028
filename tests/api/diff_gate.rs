//! `diff --fail-on` as a CI gate: runs on one side only are never a silent PASS. A candidate
//! that adds an overselling run fails on its own figures; a candidate that lost a run fails
//! with a message saying so, and no PASS line comes before it.

use crate::helpers::oversell_cli;
use crate::reports::smoke_report;
use serde_json::Value;
use std::path::Path;

/// The smoke report's JSON with `edit` applied to its runs, written as `name` in `dir`; its
/// path.
async fn doctored(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<Value>)) -> String {
    let (_, report) = smoke_report().await;
    let text = std::fs::read_to_string(report.join("report.json")).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    edit(v["runs"].as_array_mut().unwrap());
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    path.to_str().unwrap().to_string()
}

fn without_naive(runs: &mut Vec<Value>) {
    runs.retain(|r| r["strategy"] != "naive");
}

fn naive_oversold(units: i64) -> impl FnOnce(&mut Vec<Value>) {
    move |runs| {
        for r in runs.iter_mut().filter(|r| r["strategy"] == "naive") {
            r["oversell"] = units.into();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_fails_a_candidate_that_adds_an_overselling_run() {
    let tmp = tempfile::tempdir().unwrap();
    let base = doctored(tmp.path(), "baseline.json", without_naive).await;
    let cand = doctored(tmp.path(), "candidate.json", naive_oversold(8)).await;

    let gated = oversell_cli(&["diff", &base, &cand, "--fail-on", "oversell"], &[]).await;
    assert_eq!(gated.code, 1, "{}", gated.both());
    assert!(
        gated.stdout.contains(
            "**FAIL** on --fail-on oversell: naive/postgres `oversell` (only in the candidate: \
             8 against the default limit <= 0)"
        ),
        "{}",
        gated.stdout
    );
    assert!(!gated.stdout.contains("PASS"), "{}", gated.stdout);
    assert!(
        gated
            .stdout
            .contains("Runs only in the candidate (no baseline"),
        "{}",
        gated.stdout
    );

    // The same run with no oversell holds the limit: no false alarm.
    let clean = doctored(tmp.path(), "clean.json", naive_oversold(0)).await;
    let ok = oversell_cli(&["diff", &base, &clean, "--fail-on", "oversell"], &[]).await;
    assert_eq!(ok.code, 0, "{}", ok.both());
    assert!(
        ok.stdout.contains("**PASS** on --fail-on oversell."),
        "{}",
        ok.stdout
    );

    // A metric with no default limit cannot be held to one: said, not failed.
    let p99 = oversell_cli(&["diff", &base, &cand, "--fail-on", "p99_ms"], &[]).await;
    assert_eq!(p99.code, 0, "{}", p99.both());
    assert!(
        p99.stdout
            .contains("`p99_ms` not judged (no baseline run, no default limit)"),
        "{}",
        p99.stdout
    );

    // Without --fail-on nothing is gated: the run is listed, exit 0.
    let plain = oversell_cli(&["diff", &base, &cand], &[]).await;
    assert_eq!(plain.code, 0, "{}", plain.both());
    assert!(
        plain
            .stdout
            .contains("Runs only in the candidate (not compared): naive/postgres."),
        "{}",
        plain.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_fails_a_candidate_that_lost_a_run_without_printing_pass_first() {
    let tmp = tempfile::tempdir().unwrap();
    let base = doctored(tmp.path(), "baseline.json", naive_oversold(0)).await;
    let cand = doctored(tmp.path(), "candidate.json", without_naive).await;

    let gated = oversell_cli(&["diff", &base, &cand, "--fail-on", "oversell"], &[]).await;
    assert_eq!(gated.code, 1, "{}", gated.both());
    assert!(!gated.both().contains("PASS"), "{}", gated.both());
    assert!(
        gated.stdout.contains(
            "**FAIL** on --fail-on oversell: naive/postgres (only in the baseline: the \
             candidate has no such run)."
        ),
        "{}",
        gated.stdout
    );

    let plain = oversell_cli(&["diff", &base, &cand], &[]).await;
    assert_eq!(plain.code, 0, "{}", plain.both());
    assert!(
        plain
            .stdout
            .contains("Runs only in the baseline (not compared): naive/postgres."),
        "{}",
        plain.stdout
    );
}
