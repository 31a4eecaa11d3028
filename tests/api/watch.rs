//! `[watch]`: a stand-in shop (in the test binary) whose order queue rises during the sale and
//! drains after it, watched through its Prometheus endpoint, a real Redis list and a real
//! PostgreSQL table; the gate's `watch.<name>.max` and `drained_within_s`; a dead source; bad
//! `[watch]` input; and the reference shop's own gauges.

use crate::helpers::*;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use oversell::testing::store::Backend;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the stand-in keeps its queue of accepted orders.
#[derive(Clone)]
enum Queue {
    /// In memory, exposed at `/metrics` as `shop_queue_ready{queue="orders"}`.
    Memory(Arc<AtomicI64>),
    /// A real Redis list.
    Redis {
        conn: redis::aio::MultiplexedConnection,
        key: String,
    },
    /// A real PostgreSQL table `queue`.
    Sql(sqlx::PgPool),
}

impl Queue {
    async fn push(&self) {
        match self {
            Queue::Memory(n) => {
                n.fetch_add(1, Ordering::SeqCst);
            }
            Queue::Redis { conn, key } => {
                let _: i64 = redis::cmd("RPUSH")
                    .arg(key)
                    .arg("order")
                    .query_async(&mut conn.clone())
                    .await
                    .unwrap();
            }
            Queue::Sql(pool) => {
                sqlx::query("INSERT INTO queue DEFAULT VALUES")
                    .execute(pool)
                    .await
                    .unwrap();
            }
        }
    }

    /// Takes one entry off the queue, if any.
    async fn pop(&self) {
        match self {
            Queue::Memory(n) => {
                let _ = n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                    (v > 0).then_some(v - 1)
                });
            }
            Queue::Redis { conn, key } => {
                let _: Option<String> = redis::cmd("LPOP")
                    .arg(key)
                    .query_async(&mut conn.clone())
                    .await
                    .unwrap();
            }
            Queue::Sql(pool) => {
                sqlx::query("DELETE FROM queue WHERE id = (SELECT min(id) FROM queue)")
                    .execute(pool)
                    .await
                    .unwrap();
            }
        }
    }
}

#[derive(Clone)]
struct QueueShop {
    stock: Arc<Mutex<i64>>,
    queue: Queue,
    requests: Arc<AtomicUsize>,
}

async fn purchase(State(s): State<QueueShop>) -> (StatusCode, Json<Value>) {
    let bought = {
        let mut stock = s.stock.lock().unwrap();
        let ok = *stock > 0;
        if ok {
            *stock -= 1;
        }
        ok
    };
    if !bought {
        return (StatusCode::CONFLICT, Json(json!({"detail": "sold out"})));
    }
    s.queue.push().await;
    (StatusCode::OK, Json(json!({"message": "purchased"})))
}

async fn stock(State(s): State<QueueShop>) -> Json<Value> {
    Json(json!({"current_stock": *s.stock.lock().unwrap()}))
}

async fn reset(State(s): State<QueueShop>, Query(q): Query<HashMap<String, i64>>) -> StatusCode {
    *s.stock.lock().unwrap() = q.get("amount").copied().unwrap_or(0);
    StatusCode::OK
}

/// The in-memory queue as a Prometheus page: the watched series and one it must not count.
async fn metrics(State(s): State<QueueShop>) -> String {
    let n = match &s.queue {
        Queue::Memory(n) => n.load(Ordering::SeqCst),
        _ => 0,
    };
    format!(
        "# TYPE shop_queue_ready gauge\nshop_queue_ready{{queue=\"orders\"}} {n}\n\
         shop_queue_ready{{queue=\"refunds\"}} 1000\n"
    )
}

/// The stand-in on 127.0.0.1:0, its queue drained at 20 entries a second: its base URL and
/// its state.
async fn spawn_queue_shop(queue: Queue) -> (String, QueueShop) {
    let state = QueueShop {
        stock: Arc::new(Mutex::new(0)),
        queue,
        requests: Arc::new(AtomicUsize::new(0)),
    };
    let worker = state.queue.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            worker.pop().await;
            worker.pop().await;
        }
    });
    let counted = state.requests.clone();
    let app = Router::new()
        .route("/purchase", post(purchase))
        .route("/stock", get(stock))
        .route("/stock/reset", post(reset))
        .route("/metrics", get(metrics))
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                counted.fetch_add(1, Ordering::SeqCst);
                next.run(req)
            },
        ))
        .with_state(state.clone());
    (serve_stand_in(app).await, state)
}

/// The stock-only rehearsal scenario with `extra` appended (its `[watch]`, `[thresholds]`).
fn scenario(dir: &std::path::Path, extra: &str) -> String {
    let text = std::fs::read_to_string("scenarios/rehearsal-stock-only.toml").unwrap();
    let file = dir.join("watch.toml");
    std::fs::write(&file, format!("{text}\n{extra}")).unwrap();
    file.to_str().unwrap().to_string()
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Checks the figures of a gauge that rose and drained.
fn assert_rose_and_drained(g: &Value) {
    let peak = g["peak"].as_f64().unwrap_or_default();
    let peak_at = g["peak_at_s"].as_f64().unwrap();
    let drained_at = g["drained_at_s"].as_f64();
    assert!(peak >= 5.0, "the queue rose during the sale: {g}");
    assert!(g["baseline"].as_f64() == Some(0.0), "{g}");
    assert!(
        drained_at.is_some_and(|d| d > peak_at),
        "it drained after its peak: {g}"
    );
    let series = g["series"].as_array().unwrap();
    assert!(series.len() >= 4, "about one sample a second: {g}");
    assert!(
        series.first().unwrap()[0].as_f64().unwrap() <= 0.0,
        "the first sample is taken before the sale opens: {g}"
    );
}

#[tokio::test]
async fn a_prometheus_gauge_that_rises_and_falls_is_reported_charted_and_a_dead_source_is_not_fatal(
) {
    // Arrange
    let (base, _shop) = spawn_queue_shop(Queue::Memory(Arc::default())).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(
        tmp.path(),
        &format!(
            "[watch.queue]\nprometheus = \"{base}/metrics\"\nmetric = \"shop_queue_ready\"\n\
             labels = {{ queue = \"orders\" }}\n\
             [watch.dead]\nprometheus = \"http://127.0.0.1:{}/metrics\"\nmetric = \"x\"\n",
            closed_port()
        ),
    );

    // Act
    let run = against("attack", &base, &file, tmp.path(), &[]).await;

    // Assert
    assert_eq!(
        run.code,
        0,
        "a dead source never fails the run: {}",
        run.both()
    );
    let report = only_report(tmp.path());
    let watch = &report["runs"][0]["watch"];
    assert_rose_and_drained(&watch["queue"]);
    assert!(
        watch["queue"]["peak"].as_f64().unwrap() <= 50.0,
        "the refunds series is not summed in: {watch}"
    );
    let dead = &watch["dead"];
    assert_eq!(dead["samples"], 0, "{dead}");
    assert!(dead["failed"].as_u64().unwrap() >= 1, "{dead}");
    assert!(
        dead["peak"].is_null() && dead["drained_at_s"].is_null(),
        "{dead}"
    );
    assert!(
        dead["last_error"].as_str().unwrap().contains("connect"),
        "{dead}"
    );
    assert!(
        run.stderr.contains("watch.dead: cannot read"),
        "logged: {}",
        run.both()
    );
    let dir = only_report_dir(tmp.path());
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        md.contains("watch.queue: peak") && md.contains("after the rush began"),
        "{md}"
    );
    assert!(md.contains("back to its baseline 0 at"), "{md}");
    assert!(
        md.contains("watch.dead: no sample of it could be read"),
        "{md}"
    );
    let csv_file = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("timeline-") && n.ends_with(".csv")
        })
        .unwrap();
    let csv = std::fs::read_to_string(csv_file.path()).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with("watch.dead,watch.queue"), "{header}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let caption = html
        .lines()
        .find(|l| l.contains("<figcaption><b>Timeline"))
        .unwrap_or_default();
    assert!(
        caption.contains("watch.queue: Prometheus"),
        "names its source: {caption}"
    );
    assert!(
        html.contains("Order latency p99 per second"),
        "the timeline charts the latency beside the gauge"
    );
}

#[tokio::test]
async fn a_redis_list_filled_and_drained_during_the_sale_is_watched_with_llen() {
    // Arrange
    let prefix = fresh_prefix();
    let key = format!("{prefix}:orders");
    let queue = Queue::Redis {
        conn: redis_conn().await,
        key: key.clone(),
    };
    let (base, _shop) = spawn_queue_shop(queue).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(
        tmp.path(),
        &format!(
            "[watch.list]\nredis = \"{}\"\ncommand = [\"LLEN\", \"{key}\"]\n",
            redis_url()
        ),
    );

    // Act
    let run = against("attack", &base, &file, tmp.path(), &[]).await;
    delete_prefix(&prefix).await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let g = &only_report(tmp.path())["runs"][0]["watch"]["list"];
    assert_rose_and_drained(g);
    assert_eq!(g["failed"], 0, "{g}");
    assert!(
        g["source"]
            .as_str()
            .unwrap()
            .contains(&format!("`LLEN {key}`")),
        "{g}"
    );
}

#[tokio::test]
async fn a_sql_gauge_counts_a_queue_table_on_postgresql() {
    // Arrange
    use sqlx::migrate::MigrateDatabase;
    let db = fresh_db_url(Backend::Postgres);
    sqlx::Postgres::create_database(&db).await.unwrap();
    let pool = sqlx::PgPool::connect(&db).await.unwrap();
    sqlx::query("CREATE TABLE queue (id bigserial PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    let (base, _shop) = spawn_queue_shop(Queue::Sql(pool.clone())).await;
    let tmp = tempfile::tempdir().unwrap();
    let file = scenario(
        tmp.path(),
        &format!("[watch.table]\nsql = \"SELECT count(*) FROM queue\"\ndatabase = \"{db}\"\n"),
    );

    // Act
    let run = against("attack", &base, &file, tmp.path(), &[]).await;
    pool.close().await;
    drop_database(&db).await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    let g = &only_report(tmp.path())["runs"][0]["watch"]["table"];
    assert_rose_and_drained(g);
    assert!(
        g["source"]
            .as_str()
            .unwrap()
            .starts_with("SQL on postgres://"),
        "{g}"
    );
}

#[tokio::test]
async fn the_gate_passes_and_fails_on_watched_gauges_and_an_unread_one_is_not_verified() {
    // Arrange: one queue watched under two names, and a source nothing answers.
    let (base, _shop) = spawn_queue_shop(Queue::Memory(Arc::default())).await;
    let tmp = tempfile::tempdir().unwrap();
    let source = format!(
        "prometheus = \"{base}/metrics\"\nmetric = \"shop_queue_ready\"\nlabels = {{ queue = \"orders\" }}\n"
    );
    let file = scenario(
        tmp.path(),
        &format!(
            "[watch.queue]\n{source}[watch.tight]\n{source}\
             [watch.dead]\nhttp = \"http://127.0.0.1:{}/status\"\nfield = \"pending\"\n\
             [thresholds]\nwatch.queue.max = 1000\nwatch.queue.drained_within_s = 60\n",
            closed_port()
        ),
    );

    // Act
    let run = against(
        "gate",
        &base,
        &file,
        tmp.path(),
        &[
            "--threshold",
            "watch.tight.max=1",
            "--threshold",
            "watch.dead.max=5",
            "--wide",
        ],
    )
    .await;

    // Assert
    assert_eq!(run.code, 1, "{}", run.both());
    let row = |name: &str| {
        run.check_row(name)
            .unwrap_or_else(|| panic!("{name}: {}", run.both()))
    };
    assert!(
        row("watch.queue.max").contains("pass"),
        "{}",
        row("watch.queue.max")
    );
    assert!(
        row("watch.queue.drained_within_s").contains("pass"),
        "{}",
        row("watch.queue.drained_within_s")
    );
    assert!(
        row("watch.tight.max").contains("FAIL"),
        "{}",
        row("watch.tight.max")
    );
    let dead = row("watch.dead.max");
    assert!(dead.contains("not verified"), "never PASS or FAIL: {dead}");
    assert!(
        run.flat_stdout()
            .contains("watch.dead.max: not verified: no sample of it could be read"),
        "{}",
        run.both()
    );
    let gate_md = std::fs::read_to_string(only_report_dir(tmp.path()).join("gate.md")).unwrap();
    assert!(gate_md.contains("| watch.tight.max | 1 |"), "{gate_md}");
}

#[tokio::test]
async fn bad_watch_input_is_a_scenario_error_naming_the_file_the_field_and_what_is_allowed() {
    let (base, shop) = spawn_queue_shop(Queue::Memory(Arc::default())).await;
    let cases = [
        (
            "[watch.q]\nsql = \"SELECT 1\"\nevery = \"2s\"\n",
            vec!["unknown field `every`", "`sql`", "`prometheus`"],
        ),
        (
            "[watch.q]\nsql = \"SELECT 1\"\nhttp = \"http://127.0.0.1/s\"\nfield = \"n\"\n",
            vec!["field `watch.q` must be exactly one source", "sql and http together"],
        ),
        (
            "[watch.q]\nredis = \"redis://127.0.0.1:6379\"\ncommand = [\"FLUSHALL\"]\n",
            vec!["field `watch.q.command` must be a read command", "[\"LLEN\", \"key\"]", "FLUSHALL"],
        ),
        (
            "[watch.q]\nprometheus = \"http://10.9.8.7:15692/metrics\"\nmetric = \"m\"\n",
            vec!["field `watch.q.prometheus` must be a loopback address", "--allow-remote", "10.9.8.7"],
        ),
        (
            "[watch.q]\nsql = \"SELECT 1\"\ndatabase = \"postgres://u:pw-secret-9@192.0.2.1/shop\"\n",
            vec!["field `watch.q.database` must be a loopback address", "postgres://u:***@192.0.2.1"],
        ),
    ];
    for (watch, wanted) in cases {
        let tmp = tempfile::tempdir().unwrap();
        let file = scenario(tmp.path(), watch);

        let run = against("attack", &base, &file, tmp.path(), &[]).await;

        assert_eq!(run.code, 2, "{watch}: {}", run.both());
        assert!(run.stderr.contains(&file), "names the file: {}", run.both());
        for w in wanted {
            assert!(
                run.stderr.contains(w),
                "{watch}: wants {w:?} in {}",
                run.both()
            );
        }
        assert!(!run.both().contains("pw-secret-9"), "{}", run.both());
    }
    assert_eq!(
        shop.requests.load(Ordering::SeqCst),
        0,
        "nothing was sent to the shop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_shops_pool_and_stream_backlog_appear_in_the_same_watch_view() {
    // Arrange
    use oversell::testing::inventory::Strategy;
    use oversell::testing::runner::{self, RunPlan};
    let db = fresh_db_url(Backend::Postgres);
    let tmp = tempfile::tempdir().unwrap();
    let file = std::path::PathBuf::from("scenarios/smoke.toml");
    let plan = RunPlan::reference(
        oversell::testing::traffic::Scenario::load(&file).unwrap(),
        file,
        cells(&[Strategy::RedisLua], Backend::Postgres, &db),
        redis_url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        tmp.path().to_path_buf(),
    );

    // Act
    let (report, _dir) = runner::execute(&plan).await.unwrap();
    drop_database(&db).await;

    // Assert
    let watch = &report.runs[0].watch;
    for name in [
        "shop_pool_in_use",
        "shop_pool_waiting",
        "shop_stream_backlog",
    ] {
        let g = watch
            .get(name)
            .unwrap_or_else(|| panic!("{name} in {watch:?}"));
        assert!(g.samples >= 2, "{name}: {g:?}");
        assert!(
            g.source.contains("the reference shop's /metrics"),
            "{name}: {g:?}"
        );
    }
    let backlog = &watch["shop_stream_backlog"];
    assert!(
        backlog.drained_at_s.is_some(),
        "the stream drained before the run ended: {backlog:?}"
    );
}
