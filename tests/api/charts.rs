//! The published charts' promises, on the smoke run's report with a second backend added: one
//! database-rate panel per counter (PostgreSQL transactions/s and MySQL Questions/s never share
//! an axis), a colour of its own for each run of a strategy on a second backend, and every run
//! named in full in the legend and on the bars.

use crate::reports::smoke_report;
use oversell::report::charts::{run_colour, tinted, write_all};
use oversell::report::Report;
use plotters::style::RGBColor;

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

/// The smoke report's runs, then the same runs again as if measured on MySQL.
fn on_two_backends(dir: &std::path::Path) -> Report {
    let text = std::fs::read_to_string(dir.join("report.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let runs = v["runs"].as_array().unwrap().clone();
    let mysql = runs.iter().cloned().map(|mut r| {
        r["backend"] = "mysql".into();
        if r["db_qps"].is_object() {
            r["db_qps"]["unit"] = "statements/s".into();
            r["db_qps"]["source"] =
                "MySQL SHOW GLOBAL STATUS Questions (server-wide), delta per second".into();
        }
        r
    });
    let all: Vec<serde_json::Value> = runs.iter().cloned().chain(mysql).collect();
    v["runs"] = all.into();
    serde_json::from_value(v).expect("the report with a second backend reads")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_backend_gets_its_own_colours_and_its_own_database_rate_panel() {
    let (report, dir) = smoke_report().await;
    let both = on_two_backends(dir);
    let out = tempfile::tempdir().unwrap();
    write_all(out.path(), &both).unwrap();
    let svg = |name: &str| std::fs::read_to_string(out.path().join(format!("{name}.svg"))).unwrap();

    let headline = svg("headline");
    assert!(
        headline.contains("Database peak: PostgreSQL transactions/s"),
        "{headline}"
    );
    assert!(
        headline.contains("Database peak: MySQL Questions/s"),
        "{headline}"
    );
    assert!(
        headline.contains("strong: postgres, pale: mysql"),
        "the legend says which shade is which backend"
    );

    // The percentile spectrum: one panel per backend, each strategy in its own solid colour
    // there (no pale or dashed twin to tell apart).
    let percentiles = svg("latency-percentiles");
    for backend in ["postgres", "mysql"] {
        assert!(
            percentiles.contains(&format!("\n{backend}\n</text>")),
            "a {backend} panel: {percentiles}"
        );
    }
    for run in &report.runs {
        let strategy = run.strategy_name();
        let base = run_colour(run);
        assert_ne!(tinted(base, 0), tinted(base, 1));
        assert!(
            percentiles.contains(&format!("stroke=\"{}\"", hex(base))),
            "{strategy} is drawn in {} on both panels",
            hex(base)
        );
        assert!(
            !percentiles.contains(&format!("stroke=\"{}\"", hex(tinted(base, 1)))),
            "no pale twin of {strategy}"
        );
        for backend in ["postgres", "mysql"] {
            for chart in [&headline, &percentiles] {
                assert!(chart.contains(&format!("{strategy}/{backend}")));
            }
        }
    }
}
