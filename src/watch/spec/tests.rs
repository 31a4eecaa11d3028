//! `[watch]` tables read from a scenario: the issue's interface, and every bad input named.

use crate::traffic::scenario::{Scenario, ScenarioProblem};
use crate::watch::Source;

const HEAD: &str = r#"
name = "w"
[item]
stock = 1
[buyers]
count = 1
arrival = "uniform"
window_s = 1
"#;

fn parse(watch: &str) -> Result<Scenario, ScenarioProblem> {
    Scenario::parse(&format!("{HEAD}{watch}"))
}

fn error(watch: &str) -> String {
    parse(watch).unwrap_err().to_string()
}

#[test]
fn the_issues_four_gauges_are_read_into_their_sources() {
    let s = parse(
        r#"
[watch.pool]
sql = "SELECT count(*) FROM pg_stat_activity WHERE datname = 'shop' AND state <> 'idle'"
database = "postgres://u:pw@127.0.0.1:5432/shop"
[watch.backlog]
prometheus = "http://127.0.0.1:15692/metrics/per-object"
metric = "rabbitmq_queue_messages_ready"
labels = { queue = "orders" }
[watch.stream]
redis = "redis://127.0.0.1:6379/5"
command = ["XLEN", "orders"]
[watch.inflight]
http = "http://127.0.0.1:8080/status"
field = "data.pending"
[thresholds]
watch.pool.max = 40
watch.backlog.drained_within_s = 30
"#,
    )
    .unwrap();
    let sources = s.watch.sources();
    assert_eq!(sources.len(), 4);
    let by = |n: &str| sources.iter().find(|(k, _)| k == n).unwrap().1.clone();
    assert!(matches!(
        by("pool"),
        Source::Sql {
            database: Some(_),
            ..
        }
    ));
    match by("backlog") {
        Source::Prometheus { metric, labels, .. } => {
            assert_eq!(metric, "rabbitmq_queue_messages_ready");
            assert_eq!(labels["queue"], "orders");
        }
        other => panic!("{other:?}"),
    }
    match by("stream") {
        Source::Redis { command, .. } => assert_eq!(command.line(), "XLEN orders"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(by("inflight"), Source::Http { field, .. } if field == "data.pending"));
    assert_eq!(s.thresholds.watch().len(), 2);
}

#[test]
fn an_unknown_key_is_named_with_the_fields_allowed() {
    let e = error("[watch.pool]\nsql = \"SELECT 1\"\ntimeout = 3\n");
    assert!(
        e.contains("unknown field `timeout`") && e.contains("`prometheus`"),
        "{e}"
    );
}

#[test]
fn a_gauge_takes_exactly_one_source_and_only_its_fields() {
    let e = error("[watch.pool]\nsql = \"SELECT 1\"\nredis = \"redis://127.0.0.1\"\ncommand = [\"LLEN\", \"q\"]\n");
    assert!(
        e.contains("field `watch.pool` must be exactly one source")
            && e.contains("sql and redis together"),
        "{e}"
    );
    let e = error("[watch.pool]\nmetric = \"x\"\n");
    assert!(e.contains("(got no source)"), "{e}");
    let e = error("[watch.pool]\nsql = \"SELECT 1\"\nfield = \"a.b\"\n");
    assert!(
        e.contains("field `watch.pool.field` must be absent: a sql gauge takes sql, database"),
        "{e}"
    );
}

#[test]
fn a_write_command_a_bad_query_and_a_bad_url_are_refused_with_what_is_allowed() {
    let e =
        error("[watch.q]\nredis = \"redis://127.0.0.1:6379\"\ncommand = [\"DEL\", \"orders\"]\n");
    assert!(
        e.contains("field `watch.q.command` must be a read command")
            && e.contains("[\"XLEN\", \"key\"]")
            && e.contains("DEL"),
        "{e}"
    );
    let e = error("[watch.q]\nsql = \"DELETE FROM orders\"\n");
    assert!(
        e.contains("field `watch.q.sql` must be one read-only SELECT"),
        "{e}"
    );
    let e = error("[watch.q]\nprometheus = \"ftp://127.0.0.1/m\"\nmetric = \"m\"\n");
    assert!(
        e.contains("field `watch.q.prometheus` must be a http:// or https:// URL"),
        "{e}"
    );
    let e = error("[watch.q]\nsql = \"SELECT 1\"\ndatabase = \"postgres://u:hunter2@/db\"\n");
    assert!(
        e.contains("watch.q.database") && !e.contains("hunter2"),
        "no password: {e}"
    );
    let e = error("[watch.q]\nprometheus = \"http://127.0.0.1/m\"\n");
    assert!(
        e.contains("field `watch.q.metric` must be a Prometheus metric name"),
        "{e}"
    );
    let e = error("[watch.q]\nhttp = \"http://127.0.0.1/s\"\nfield = \"a..b\"\n");
    assert!(
        e.contains("field `watch.q.field` must be the dot path"),
        "{e}"
    );
}

#[test]
fn gauge_names_and_watch_thresholds_must_fit() {
    let e = error("[watch.Pool]\nsql = \"SELECT 1\"\n");
    assert!(e.contains("field `watch.Pool` must be a gauge name"), "{e}");
    let e = error("[watch.pool]\nsql = \"SELECT 1\"\n[thresholds]\nwatch.queue.max = 3\n");
    assert!(
        e.contains("field `thresholds.watch.queue.max` must be a gauge of [watch]: pool"),
        "{e}"
    );
}

#[test]
fn the_stored_scenario_masks_every_source_password() {
    let s = parse(
        "[watch.a]\nsql = \"SELECT 1\"\ndatabase = \"postgres://u:pg-secret-1@127.0.0.1/db\"\n\
         [watch.b]\nredis = \"redis://:redis-secret-2@127.0.0.1:6379/0\"\ncommand = [\"LLEN\", \"q\"]\n\
         [watch.c]\nhttp = \"http://127.0.0.1/s?api_key=http-secret-3\"\nfield = \"n\"\n",
    )
    .unwrap();
    let json = serde_json::to_string(&crate::traffic::scenario::masked::scenario(&s)).unwrap();
    for secret in ["pg-secret-1", "redis-secret-2", "http-secret-3"] {
        assert!(!json.contains(secret), "{secret} in {json}");
    }
    let back: Scenario = serde_json::from_str(&json).unwrap();
    assert_eq!(back.watch.0.len(), 3, "reads back");
}
