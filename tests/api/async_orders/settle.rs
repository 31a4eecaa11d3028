//! Settling against the asynchronous stand-in: a paused writer waited for until the backlog
//! (an endpoint, or a query on the shop's database) reads 0; a deadline too short; no backlog
//! signal.

use super::rows::ORDERS;
use super::scenario;
use super::shop::{spawn_shop, Shape};
use crate::helpers::*;
use std::sync::atomic::Ordering;
use std::time::Duration;

fn with_backlog(s: String) -> String {
    format!(
        "{s}\n[target.settle]\nsettle_s = 1\nbacklog = {{ method = \"GET\", path = \"/backlog\", field = \"queue.depth\" }}\n"
    )
}

#[tokio::test]
async fn a_run_waits_for_a_paused_writer_until_the_backlog_reads_zero() {
    // Arrange: the writer holds every row for 8 s after the set-up, so the oracle's reading
    // does not move while rows are queued: only the backlog says the shop is not done.
    let (base, db, shop) = spawn_shop(Shape {
        writer_paused: Duration::from_secs(8),
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), with_backlog);

    // Act
    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &["--oracle-sql", &db, "--orders-query", ORDERS],
    )
    .await;

    // Assert: every confirmed order is found, because the run waited for the writer.
    assert_eq!(run.code, 0, "{}", run.both());
    assert_eq!(shop.backlog.load(Ordering::SeqCst), 0);
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["lost_acks"], 0, "{r}");
    assert_eq!(r["sold"], 12, "{r}");
    let settle = &r["drain"]["settle"];
    assert_eq!(settle["state"], "settled", "{settle}");
    assert_eq!(settle["backlog_last"], 0, "{settle}");
    assert_eq!(settle["window_ms"], 1000, "{settle}");
    let md = std::fs::read_to_string(only_report_dir(tmp.path()).join("report.md")).unwrap();
    assert!(
        md.contains("settled after") && md.contains("and the backlog at 0"),
        "{md}"
    );
}

#[tokio::test]
async fn a_backlog_that_never_empties_before_the_deadline_is_not_settled_and_fails() {
    let (base, db, _shop) = spawn_shop(Shape {
        writer_paused: Duration::from_secs(120),
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), with_backlog);

    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--orders-query",
            ORDERS,
            "--drain-timeout-s",
            "1",
        ],
    )
    .await;

    assert_eq!(run.code, 1, "{}", run.both());
    assert!(
        run.stdout
            .lines()
            .any(|l| l.contains("not_settled") && l.trim_end().ends_with("FAIL")),
        "{}",
        run.both()
    );
    let r = &only_report(tmp.path())["runs"][0];
    let settle = &r["drain"]["settle"];
    assert_eq!(settle["state"], "not_settled", "{settle}");
    assert!(settle["backlog_last"].as_i64().unwrap() > 0, "{settle}");
    let md = std::fs::read_to_string(only_report_dir(tmp.path()).join("report.md")).unwrap();
    assert!(md.contains("NOT settled within 1000 ms"), "{md}");
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains("the shop had not settled within 1000 ms (its backlog last read"),
        "the verdict says its state never settled: {r}"
    );
}

#[tokio::test]
async fn without_a_backlog_signal_the_report_says_missing_orders_may_be_late() {
    // The writer is paused and nothing says so: the rows stop moving, the run settles, and the
    // confirmed orders are missing. The report must not pretend they are surely lost.
    let (base, db, shop) = spawn_shop(Shape {
        writer_paused: Duration::from_secs(60),
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| s);

    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--orders-query",
            ORDERS,
            "--settle-s",
            "1",
        ],
    )
    .await;

    assert_eq!(run.code, 1, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["lost_acks"], 12, "{r}");
    assert!(
        shop.backlog.load(Ordering::SeqCst) > 0,
        "still queued in the shop"
    );
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains("orders missing after settling may be late rather than lost"),
        "{r}"
    );
}

#[tokio::test]
async fn a_backlog_query_on_the_shops_database_holds_the_verdict_until_the_outbox_is_empty() {
    let (base, db, _shop) = spawn_shop(Shape {
        writer_paused: Duration::from_secs(8),
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| s);

    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--oracle-sql",
            &db,
            "--orders-query",
            ORDERS,
            "--backlog-query",
            "SELECT count(*) FROM shop_outbox",
            "--settle-s",
            "1",
        ],
    )
    .await;

    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["lost_acks"], 0, "{r}");
    let settle = &r["drain"]["settle"];
    assert_eq!(settle["state"], "settled", "{settle}");
    assert_eq!(settle["backlog_last"], 0, "{settle}");
    assert!(
        settle["backlog"]
            .as_str()
            .unwrap()
            .contains("--backlog-query"),
        "{settle}"
    );
}
