//! `--repeat N`: each strategy runs N times on a fresh sale; the report keeps every repeat and
//! each metric's median and min–max; `diff` reads the spreads.

use crate::helpers::*;
use oversell::testing::store::Backend;

#[tokio::test]
async fn compare_with_repeat_2_keeps_two_samples_per_strategy_and_diff_reads_the_spread() {
    // Arrange
    let db = fresh_db_url(Backend::Postgres);
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("reports");

    // Act
    let run = oversell_cli(
        &[
            "compare",
            "--strategies",
            "naive,for-update",
            "--scenario",
            "smoke",
            "--repeat",
            "2",
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

    // Assert: every repeat is in `runs`, in order, numbered.
    assert_eq!(run.code, 0, "{}", run.both());
    let report = only_report(&out);
    let runs = report["runs"].as_array().unwrap();
    let order: Vec<(String, u64)> = runs
        .iter()
        .map(|r| {
            (
                r["strategy"].as_str().unwrap().to_string(),
                r["repeat"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("naive", 1),
            ("naive", 2),
            ("for-update", 1),
            ("for-update", 2)
        ]
        .map(|(s, n)| (s.to_string(), n))
    );
    // A summary per strategy: every metric's median and min–max over its 2 samples.
    let repeats = report["repeats"].as_array().unwrap();
    assert_eq!(repeats.len(), 2, "{repeats:?}");
    for (summary, strategy) in repeats.iter().zip(["naive", "for-update"]) {
        assert!(summary["run"].as_str().unwrap().starts_with(strategy));
        assert_eq!(summary["repeats"], 2);
        let p99 = &summary["metrics"]["p99_ms"];
        let samples: Vec<f64> = p99["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(samples.len(), 2, "{p99}");
        let (min, max) = (samples[0].min(samples[1]), samples[0].max(samples[1]));
        assert_eq!(p99["min"].as_f64().unwrap(), min);
        assert_eq!(p99["max"].as_f64().unwrap(), max);
        let median = p99["median"].as_f64().unwrap();
        assert!((median - (min + max) / 2.0).abs() < 1e-9, "{p99}");
        let oversell = &summary["metrics"]["oversell"]["samples"];
        assert_eq!(oversell.as_array().unwrap().len(), 2, "{summary}");
    }
    // The table shows one row per strategy with its spread; each repeat keeps its own files.
    assert!(
        run.stdout.contains("naive ×2") && run.stdout.contains("for-update ×2"),
        "{}",
        run.both()
    );
    assert!(run.stdout.contains("median (min–max)"), "{}", run.both());
    let dir = only_report_dir(&out);
    for n in [1, 2] {
        assert!(dir
            .join(format!("latency-naive-postgres-r{n}.hlog"))
            .exists());
        assert!(dir
            .join(format!("timeline-for-update-postgres-r{n}.csv"))
            .exists());
        assert!(dir.join(format!("shop-naive-postgres-r{n}.log")).exists());
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("| naive ×2 |") && md.contains("### naive #2"),
        "{md}"
    );

    // Act: the report against itself, by spreads.
    let diff = oversell_cli(
        &[
            "diff",
            dir.to_str().unwrap(),
            dir.to_str().unwrap(),
            "--fail-on",
            "p99_ms,error_rate,oversell",
        ],
        &[],
    )
    .await;

    // Assert
    assert_eq!(diff.code, 0, "{}", diff.both());
    assert!(diff.stdout.contains("Repeated runs:"), "{}", diff.stdout);
    assert!(diff.stdout.contains("## naive/postgres"), "{}", diff.stdout);
    assert!(!diff.stdout.contains("**worse**"), "{}", diff.stdout);
}
