//! What a report says beyond the figures: its metadata (build, command, servers, start), the
//! per-request tables and findings in the HTML as in the Markdown, and a run that failed after
//! others finished.

use crate::helpers::{cells, drop_database, fresh_db_url};
use crate::reports::{read, smoke_report};
use oversell::report::{self, details};
use oversell::testing::inventory::Strategy;
use oversell::testing::runner::{self, RunPlan};
use oversell::testing::store::Backend;
use oversell::testing::traffic::Scenario;
use std::path::Path;
use std::time::Duration;

/// How the HTML writes text (the report's own escaper).
fn esc(s: &str) -> String {
    oversell::report::markup::escape(s)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_carries_its_metadata_in_json_markdown_and_html() {
    let (report, dir) = smoke_report().await;
    let m = &report.metadata;
    assert_eq!(m.git_commit, runner::GIT_COMMIT);
    assert!(!m.git_commit.is_empty());
    assert!(!m.command_line.is_empty(), "the command line is recorded");
    assert!(
        chrono::DateTime::parse_from_rfc3339(&m.started_at).is_ok(),
        "{}",
        m.started_at
    );
    let version = |service: &str| {
        m.servers
            .iter()
            .find(|s| s.service == service)
            .unwrap_or_else(|| panic!("{service} is listed: {:?}", m.servers))
            .version
            .clone()
    };
    let pg = version("PostgreSQL");
    assert!(
        pg.starts_with(|c: char| c.is_ascii_digit()),
        "PostgreSQL said SHOW server_version: {pg}"
    );
    let redis = version("Redis");
    assert!(
        redis.starts_with(|c: char| c.is_ascii_digit()),
        "Redis said INFO server: {redis}"
    );
    assert!(report.machine.cores >= 1);
    let json: serde_json::Value =
        serde_json::from_slice(&read(dir, "report.json")).expect("report.json parses");
    assert_eq!(json["metadata"]["git_commit"], m.git_commit.as_str());
    assert_eq!(json["metadata"]["servers"][0]["version"], pg.as_str());
    let md = String::from_utf8(read(dir, "report.md")).unwrap();
    let html = String::from_utf8(read(dir, "report.html")).unwrap();
    for text in [&md, &html] {
        assert!(text.contains("Metadata"));
        assert!(text.contains(&m.git_commit));
        assert!(text.contains(&esc(&pg)) || text.contains(&pg));
        assert!(text.contains(&esc(&m.started_at)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_html_has_the_per_request_tables_and_findings_the_markdown_has() {
    let (report, dir) = smoke_report().await;
    let md = String::from_utf8(read(dir, "report.md")).unwrap();
    let html = String::from_utf8(read(dir, "report.html")).unwrap();
    for h in details::REQUEST_HEADER {
        assert!(html.contains(&format!("<th>{}</th>", esc(h))), "{h}");
    }
    for run in &report.runs {
        let rows = details::requests(run);
        assert!(!rows.is_empty(), "{} has requests", run.label(false));
        for row in rows {
            let md_row = format!("| {} |", row.join(" | "));
            assert!(md.contains(&md_row), "report.md has {md_row}");
            for cell in &row {
                assert!(
                    html.contains(&format!(">{}</td>", esc(cell))),
                    "report.html has {cell}"
                );
            }
        }
        for fact in details::facts(run) {
            assert!(md.contains(&format!("- {fact}")), "report.md says {fact}");
            assert!(
                html.contains(&format!("<li>{}</li>", fact.html())),
                "report.html says {fact}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_fails_keeps_the_report_of_the_run_before_it() {
    // Arrange: naive needs no Redis and finishes; redis-lua then finds no Redis at its URL.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut scenario = Scenario::load(&root.join("scenarios/smoke.toml")).unwrap();
    scenario.buyers.count = 60;
    scenario.second_wave = None;
    let db = fresh_db_url(Backend::Postgres);
    let out = tempfile::tempdir().unwrap();
    let dead_redis = "redis://127.0.0.1:1".to_string();
    let mut plan = RunPlan::reference(
        scenario,
        "scenarios/smoke.toml".into(),
        cells(
            &[Strategy::Naive, Strategy::RedisLua],
            Backend::Postgres,
            &db,
        ),
        dead_redis,
        env!("CARGO_BIN_EXE_oversell").into(),
        out.path().to_path_buf(),
    );
    plan.drain_limit = Duration::from_secs(30);

    // Act
    let err = runner::execute(&plan)
        .await
        .expect_err("the second run cannot start");
    drop_database(&db).await;

    // Assert: the error says which run failed and where the report is; still exit 3.
    let msg = format!("{err:#}");
    assert!(msg.contains("run 2/2 redis-lua/postgres"), "{msg}");
    assert_eq!(oversell::cli::exit_code_for(&err), 3, "{msg}");
    let dirs: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "one report folder: {dirs:?}");
    assert!(msg.contains(&dirs[0].display().to_string()), "{msg}");
    let r = report::read(&dirs[0]).expect("the report of the finished run is readable");
    assert_eq!(r.runs.len(), 1);
    assert_eq!(r.runs[0].strategy_name(), "naive");
    assert_eq!(r.failed.len(), 1);
    assert_eq!(r.failed[0].run, "redis-lua/postgres");
    assert!(
        r.failed[0].error.contains("127.0.0.1:1"),
        "{}",
        r.failed[0].error
    );
    for file in ["report.md", "report.html", "latency-naive-postgres.hlog"] {
        assert!(dirs[0].join(file).exists(), "{file} was written");
    }
    let md = std::fs::read_to_string(dirs[0].join("report.md")).unwrap();
    assert!(
        md.contains("did not finish") && md.contains("redis-lua/postgres"),
        "{md}"
    );
}
