//! Asynchronous shops: orders answered "accepted" (202 with a ticket) and decided later by a
//! background task, found by polling (`outcome = "pending"`, `[target.poll]`); the oracle read
//! once the shop has settled; a run that tested nothing.
//!
//! The stand-in decides each order 0.5–2 s after accepting it, on an atomic stock counter, and
//! hands the row to a writer task that inserts it into a real PostgreSQL table (its own
//! database per test). Variants lose decided orders (the poll says "confirmed", the row is
//! never written), pause the writer (the backlog endpoint counts the rows waiting), or refuse
//! every order with 401. `rows`: the order-rows oracle (`--orders-query`); `settle`: settling
//! and the backlog signal; `shop`: the stand-in.

mod rows;
mod settle;
mod shop;

use crate::helpers::*;
use shop::{spawn_shop, Shape};
use std::sync::atomic::Ordering;

/// 40 buyers for 12 units; every order is accepted with a ticket and decided later.
const SCENARIO: &str = r#"
name = "async-shop"
description = "An asynchronous shop: 202 with a ticket, decided later."

[item]
id = 1
stock = 12

[buyers]
count = 40
seed = 5
arrival = "burst"
window_s = 1.0
burst_s = 0.3
burst_share = 0.8

[after_order]
pay = 0
cancel = 0
abandon = 1

[client]
timeout_ms = 5000

[target]
ip_header = ""
order_id_field = "ticket"
setup = { method = "POST", path = "/sale", body = '{"stock": {stock}}' }
order = { method = "POST", path = "/orders", body = '{"user": "{user_id}"}' }
outcomes = [
  { status = ["202"], outcome = "pending" },
  { status = ["4xx"], outcome = "invalid" },
  { status = ["5xx"], outcome = "server_error" },
]

[target.poll]
method = "GET"
path = "/orders/{order_id}"
interval_ms = 200
outcomes = [
  { status = ["200"], field = "state", equals = "queued", outcome = "pending" },
  { status = ["200"], field = "state", equals = "confirmed", outcome = "created" },
  { status = ["200"], field = "state", equals = "sold_out", outcome = "sold_out" },
]
"#;

/// The scenario, edited, in a file under `dir`.
fn scenario(dir: &std::path::Path, edit: impl Fn(String) -> String) -> String {
    let file = dir.join("async.toml");
    std::fs::write(&file, edit(SCENARIO.to_string())).unwrap();
    file.to_str().unwrap().to_string()
}

const SOLD: &str = "SELECT count(*) FROM shop_orders WHERE status = 'confirmed'";

#[tokio::test]
async fn an_asynchronous_shop_is_judged_on_its_decisions_found_by_polling() {
    // Arrange
    let (base, db, shop) = spawn_shop(Shape::HONEST).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| s);

    // Act
    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &["--oracle-sql", &db, "--sold-query", SOLD],
    )
    .await;

    // Assert: every order was accepted, then decided; the verdict is on the decisions.
    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["sold"], 12, "{r}");
    assert_eq!(r["acknowledged"], 12, "{r}");
    assert_eq!(shop.stock.load(Ordering::SeqCst), 0);
    let d = &r["decision"];
    assert_eq!(d["pending"], 40, "{d}");
    assert_eq!(d["decided"], 40, "{d}");
    assert_eq!(d["undecided"], 0, "{d}");
    assert!(
        d["latency"]["p50_ms"].as_f64().unwrap() >= 500.0,
        "the shop decides 0.5 s after accepting at the earliest: {d}"
    );
    let orders = &r["requests"]["order"]["outcomes"];
    assert_eq!(orders["created"], 12, "{orders}");
    assert_eq!(orders["sold_out"], 28, "{orders}");
    assert!(
        orders.get("pending").is_none(),
        "never an order's answer: {orders}"
    );
    assert!(
        r["requests"]["poll"]["total"].as_u64().unwrap() >= 40,
        "polls are their own kind: {r}"
    );
    assert!(
        r["requests"]["order"]["latency"]["p50_ms"]
            .as_f64()
            .unwrap()
            >= 500.0,
        "an order's latency runs to its decision"
    );
    let md = std::fs::read_to_string(only_report_dir(tmp.path()).join("report.md")).unwrap();
    assert!(
        md.contains("40 answered pending, 40 decided, 0 undecided"),
        "{md}"
    );
}

#[test]
fn pending_without_a_poll_step_is_refused_when_the_scenario_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| {
        s[..s.find("[target.poll]").unwrap()].to_string()
    });
    let e = oversell::testing::traffic::Scenario::load(std::path::Path::new(&file))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("target.outcomes[0].outcome") && e.contains("target.poll"),
        "{e}"
    );
}

#[tokio::test]
async fn a_shop_that_refuses_every_order_tested_nothing_and_fails_even_unverified() {
    let (base, _db, _shop) = spawn_shop(Shape {
        unauthorized: true,
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    // The shop's own rules do not read 401: the harness's default does (`unauthorized`).
    let file = scenario(tmp.path(), |s| s.replace("\"4xx\"", "\"400\""));

    let run = against("gate", &base, &file, tmp.path(), &["--allow-unverified"]).await;

    assert_eq!(run.code, 1, "{}", run.both());
    for failed in ["nothing_sold", "undersell"] {
        assert!(
            run.stdout
                .lines()
                .any(|l| l.contains(failed) && l.trim_end().ends_with("FAIL")),
            "{failed}: {}",
            run.both()
        );
    }
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(
        r["requests"]["order"]["outcomes"]["unauthorized"], 40,
        "{r}"
    );
    assert_eq!(r["nothing_sold"], true, "{r}");
    assert_eq!(
        r["drain"]["settle"]["state"], "unknown",
        "no oracle, no backlog: nothing could tell: {r}"
    );
    assert_eq!(r["undersell"], 12, "12 units left, 40 people refused: {r}");
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains("the shop accepted no order: this run tested nothing"),
        "{r}"
    );
}
#[tokio::test]
async fn an_order_never_decided_within_max_wait_is_undecided_and_indeterminate() {
    let (base, _db, _shop) = spawn_shop(Shape {
        never_decides: true,
        ..Shape::HONEST
    })
    .await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| {
        s.replace("interval_ms = 200", "interval_ms = 200\nmax_wait_ms = 700")
    });

    let run = against("attack", &base, &file, tmp.path(), &[]).await;

    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    let d = &r["decision"];
    assert_eq!(
        (d["pending"].as_u64(), d["undecided"].as_u64()),
        (Some(40), Some(40)),
        "{d}"
    );
    assert_eq!(r["requests"]["order"]["outcomes"]["undecided"], 40, "{r}");
    assert_eq!(r["indeterminate"], 40, "{r}");
    assert_eq!(r["acknowledged"], 0, "{r}");
    assert_eq!(r["nothing_sold"], true, "nothing was acknowledged: {r}");
}

#[tokio::test]
async fn pending_answers_without_the_id_the_poll_needs_are_undecided_and_said_so() {
    let (base, _db, shop) = spawn_shop(Shape::HONEST).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(tmp.path(), |s| {
        s.replace(
            "order_id_field = \"ticket\"",
            "order_id_field = \"data.ticket\"",
        )
        .replace("interval_ms = 200", "interval_ms = 200\nmax_wait_ms = 300")
    });

    let run = against("attack", &base, &file, tmp.path(), &[]).await;

    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["decision"]["without_id"], 40, "{r}");
    assert_eq!(r["decision"]["undecided"], 40, "{r}");
    assert!(
        r["requests"].get("poll").is_none(),
        "nothing to poll with, nothing polled: {r}"
    );
    assert_eq!(shop.tickets.load(Ordering::SeqCst), 40);
    let md = std::fs::read_to_string(only_report_dir(tmp.path()).join("report.md")).unwrap();
    assert!(
        md.contains("40 of them carried no order id to poll with"),
        "{md}"
    );
}

#[test]
fn the_worked_mapping_of_the_docs_reads_as_a_scenario() {
    let doc = std::fs::read_to_string("docs/src/rehearsal/async.md").unwrap();
    let start = doc.find("```toml\n").unwrap() + "```toml\n".len();
    let mapping = &doc[start..start + doc[start..].find("```").unwrap()];
    let head = &SCENARIO[..SCENARIO.find("[after_order]").unwrap()];
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("doc.toml");
    std::fs::write(&file, format!("{head}{mapping}")).unwrap();

    let s = oversell::testing::traffic::Scenario::load(&file).unwrap();

    let m = s.mapping();
    let poll = m.poll.expect("[target.poll]");
    assert_eq!(poll.interval, std::time::Duration::from_millis(200));
    let settle = m.settle.expect("[target.settle]");
    assert_eq!(settle.settle_s, Some(1.0));
    assert_eq!(
        settle.backlog.unwrap().endpoint().unwrap().field,
        "queue.depth"
    );
}
