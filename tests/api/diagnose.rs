//! `oversell diagnose` on real services: the reference strategies diagnosed as the post-mortem
//! does (naive's race with its proof, for-update's drained pool, optimistic's retry storm,
//! redis-lua passing the whole battery within its budget); outside stand-in shops (`oversell
//! serve --defect NAME`, the reference API mapped by `rehearsal-reference`)
//! each diagnosed as its class with its remedy while the correct one passes; a mapping without
//! pay or cancel gets not_testable rows that say what to map; the plan shown by `--dry-run`.

use crate::helpers::*;
use oversell::testing::store::Backend;
use serde_json::Value;
use std::path::Path;

/// The diagnosis.json of the only diagnosis under `out`.
fn diagnosis(out: &Path) -> Value {
    let dir = std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.join("diagnosis.json").exists())
        .unwrap_or_else(|| panic!("a diagnosis under {}", out.display()));
    for f in ["diagnosis.md", "diagnosis.html"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    serde_json::from_str(&std::fs::read_to_string(dir.join("diagnosis.json")).unwrap()).unwrap()
}

/// The row of `class`.
fn row<'a>(d: &'a Value, class: &str) -> &'a Value {
    d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["class"] == class)
        .unwrap_or_else(|| panic!("a row for {class}: {d:#}"))
}

/// Every row's class and status.
fn statuses(d: &Value) -> Vec<(String, String)> {
    d["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["class"].as_str().unwrap().to_string(),
                r["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `oversell diagnose` of the reference `strategy` on a fresh database with `extra` flags.
async fn reference(strategy: &str, out: &Path, extra: &[&str]) -> (CliRun, Value) {
    let db = fresh_db_url(Backend::Postgres);
    let redis = redis_url();
    let mut args = vec![
        "diagnose",
        "--strategy",
        strategy,
        "--database-url",
        &db,
        "--redis-url",
        &redis,
        "--out",
        out.to_str().unwrap(),
        "--drain-timeout",
        "30s",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    let run = oversell_cli(&args, &[]).await;
    drop_database(&db).await;
    let d = diagnosis(out);
    (run, d)
}

/// `class` is found with a remedy that links the book, and its report exists.
fn assert_found(d: &Value, class: &str, out: &Path) {
    let r = row(d, class);
    assert_eq!(r["status"], "found", "{class}: {r:#}");
    assert!(r["remedy"].as_str().unwrap().len() > 20, "{r:#}");
    assert!(
        r["link"]
            .as_str()
            .unwrap()
            .starts_with("docs/src/gate/diagnose.md#"),
        "{r:#}"
    );
    let report = r["report"].as_str().unwrap();
    let dir = std::fs::read_dir(out)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| p.join("diagnosis.json").exists())
        .unwrap();
    assert!(dir.join(report).exists(), "{report}");
}

#[tokio::test]
async fn naive_is_diagnosed_with_the_oversell_race_and_its_proof() {
    // Arrange
    let tmp = tempfile::tempdir().unwrap();

    // Act
    let (run, d) = reference(
        "naive",
        tmp.path(),
        &["--budget", "1m", "--experiments", "rush"],
    )
    .await;

    // Assert
    assert_eq!(run.code, 1, "{}", run.both());
    assert_found(&d, "oversell_race", tmp.path());
    let r = row(&d, "oversell_race");
    assert!(
        r["proof"]["claim"].as_str().is_some_and(|c| !c.is_empty()),
        "the race carries its proof: {r:#}"
    );
    let peak = r["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "units oversold at the peak")
        .unwrap_or_else(|| panic!("{r:#}"));
    assert!(peak["value"].as_f64().unwrap() >= 1.0, "{peak}");
    assert!(run.stdout.contains("oversell_race") && run.stdout.contains("proof:"));
    assert!(run.stdout.contains("remedy:"), "{}", run.both());
    // Asked for the rush alone: the rest says it was not asked for, never "not found".
    let adv = row(&d, "duplicate_on_retry");
    assert_eq!(adv["status"], "not_testable", "{adv:#}");
    assert!(adv["detail"].as_str().unwrap().contains("--experiments"));
}

#[tokio::test]
async fn a_plain_row_lock_drains_the_pool_at_the_rush() {
    let tmp = tempfile::tempdir().unwrap();

    let (run, d) = reference(
        "for-update",
        tmp.path(),
        &["--budget", "1m", "--experiments", "rush"],
    )
    .await;

    assert_eq!(run.code, 1, "{}", run.both());
    assert_found(&d, "pool_exhaustion", tmp.path());
    let r = row(&d, "pool_exhaustion");
    let names: Vec<&str> = r["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"error rate when the pool drained") && names.contains(&"shop_pool_wait_s"),
        "{r:#}"
    );
    assert_eq!(row(&d, "oversell_race")["status"], "not_found", "{d:#}");
    assert_eq!(row(&d, "retry_storm")["status"], "not_found", "{d:#}");
}

#[tokio::test]
async fn optimistic_storms_with_retries_at_the_rush() {
    let tmp = tempfile::tempdir().unwrap();

    let (run, d) = reference(
        "optimistic",
        tmp.path(),
        &["--budget", "1m", "--experiments", "rush"],
    )
    .await;

    assert_eq!(run.code, 1, "{}", run.both());
    assert_found(&d, "retry_storm", tmp.path());
    let r = row(&d, "retry_storm");
    let p99 = r["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "p99 under the retry storm");
    assert!(p99.is_some(), "{r:#}");
    assert_eq!(row(&d, "oversell_race")["status"], "not_found", "{d:#}");
}

#[tokio::test]
async fn redis_lua_passes_the_whole_battery_within_five_minutes() {
    let tmp = tempfile::tempdir().unwrap();

    let (run, d) = reference("redis-lua", tmp.path(), &["--budget", "5m"]).await;

    assert_eq!(run.code, 0, "{}\n{d:#}", run.both());
    assert_eq!(d["found"], serde_json::json!([]), "{d:#}");
    for (class, status) in statuses(&d) {
        assert_ne!(status, "found", "{class}");
    }
    // The whole battery ran, within the budget the plan was made for.
    let plan: Vec<&str> = d["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["experiment"].as_str().unwrap())
        .collect();
    assert_eq!(
        plan,
        [
            "rush",
            "adversarial",
            "cancel-after-pay",
            "restock",
            "capacity"
        ],
        "{d:#}"
    );
    assert_eq!(d["budget_s"], 300.0);
    assert!(d["elapsed_s"].as_f64().unwrap() <= 300.0, "{d:#}");
    assert_eq!(d["within_budget"], true);
    let planned: f64 = d["plan"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["planned_s"].as_f64().unwrap())
        .sum();
    assert!(planned <= 300.0 + 1e-6, "{planned}");
    assert!(d["capacity"]["answer"].as_str().is_some(), "{d:#}");
    assert!(d["time"]["order_p99_ms"].as_f64().is_some(), "{d:#}");
    assert!(run.stdout.contains("where the time goes"), "{}", run.both());
    assert!(run.stdout.contains("PASS"), "{}", run.both());
}

/// A running `oversell serve` and its URL; killed when dropped.
struct StandIn {
    _child: tokio::process::Child,
    url: String,
    prefix: String,
}

/// A reference shop served as an outside shop (`serve` conditional, a short payment window,
/// the naive gap its defects race in), with `defect` built in (or none). A shop with a defect
/// warns on stdout before its address.
async fn stand_in(defect: Option<&str>, db: &str) -> StandIn {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let prefix = fresh_prefix();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"));
    cmd.args([
        "serve",
        "--strategy",
        "conditional",
        "--listen",
        "127.0.0.1:0",
    ])
    .args(["--database-url", db, "--redis-url", &redis_url()])
    .args(["--redis-prefix", &prefix, "--trusted-proxy", "127.0.0.1"])
    .args(["--payment-timeout", "1s", "--naive-gap", "10ms"])
    // The defects are the subject here, not capacity: on a slow or busy machine its buyers wait
    // for a connection instead of being answered busy after the default 500 ms (which the
    // diagnosis would rightly call a drained pool).
    .args(["--acquire-timeout", "3s"]);
    if let Some(d) = defect {
        cmd.args(["--defect", d]);
    }
    let mut child = cmd
        .env_remove("OVERSELL_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("oversell serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.split_whitespace().find(|w| w.starts_with("http://")) {
                return url.to_string();
            }
        }
        panic!("the shop ended before printing its address")
    })
    .await
    .expect("the shop prints its address");
    // Keep reading its stdout, so the shop never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    StandIn {
        _child: child,
        url,
        prefix,
    }
}

/// `oversell diagnose --target` of a stand-in with `defect` and the experiments `only`.
async fn diagnose_stand_in(defect: Option<&str>, only: &str, out: &Path) -> (CliRun, Value) {
    let db = fresh_db_url(Backend::Postgres);
    let shop = stand_in(defect, &db).await;
    let run = against(
        "diagnose",
        &shop.url,
        "rehearsal-reference",
        out,
        &[
            "--payment-window",
            "1s",
            "--budget",
            "3m",
            "--experiments",
            only,
            "--drain-timeout",
            "30s",
        ],
    )
    .await;
    let prefix = shop.prefix.clone();
    drop(shop);
    drop_database(&db).await;
    delete_prefix(&prefix).await;
    (run, diagnosis(out))
}

/// The stand-in with `defect` is diagnosed as `class` and nothing else.
async fn defect_is(defect: &str, only: &str, class: &str) {
    let tmp = tempfile::tempdir().unwrap();

    let (run, d) = diagnose_stand_in(Some(defect), only, tmp.path()).await;

    assert_eq!(run.code, 1, "{}\n{d:#}", run.both());
    assert_found(&d, class, tmp.path());
    assert_eq!(d["found"], serde_json::json!([class]), "{d:#}");
    assert!(
        run.stdout.contains(&format!("{class}:")) && run.stdout.contains("remedy:"),
        "{}",
        run.both()
    );
}

#[tokio::test]
async fn a_stand_in_that_reads_then_decrements_is_an_oversell_race() {
    defect_is("get-then-decr", "rush", "oversell_race").await;
}

#[tokio::test]
async fn a_stand_in_that_counts_the_limit_apart_is_a_limit_race() {
    defect_is("limit-race", "adversarial", "limit_race").await;
}

#[tokio::test]
async fn a_stand_in_that_ignores_the_key_buys_twice_on_retry() {
    defect_is("key-reuse", "adversarial", "duplicate_on_retry").await;
}

#[tokio::test]
async fn a_stand_in_that_restocks_a_paid_order_fails_cancel_after_pay() {
    defect_is(
        "cancel-paid-restocks",
        "cancel-after-pay",
        "cancel_after_pay",
    )
    .await;
}

#[tokio::test]
async fn a_stand_in_that_restocks_twice_is_not_idempotent() {
    defect_is("double-restock", "restock", "restock_not_idempotent").await;
}

#[tokio::test]
async fn the_correct_stand_in_passes_every_experiment() {
    let tmp = tempfile::tempdir().unwrap();

    let (run, d) = diagnose_stand_in(
        None,
        "rush,adversarial,cancel-after-pay,restock",
        tmp.path(),
    )
    .await;

    assert_eq!(run.code, 0, "{}\n{d:#}", run.both());
    assert_eq!(d["found"], serde_json::json!([]), "{d:#}");
    for class in [
        "oversell_race",
        "limit_race",
        "duplicate_on_retry",
        "cancel_after_pay",
        "restock_not_idempotent",
    ] {
        assert_eq!(row(&d, class)["status"], "not_found", "{class}: {d:#}");
        assert!(
            row(&d, class)["detail"]
                .as_str()
                .unwrap()
                .starts_with("tried "),
            "not_found says what was tried: {d:#}"
        );
    }
}

#[tokio::test]
async fn a_mapping_without_pay_or_cancel_says_what_to_map_never_not_found() {
    // Arrange: the stock-only stand-in's racy twin is not needed: a safe shop shows the rows.
    let app = stock_only_app();
    let base = serve_stand_in(app).await;
    let tmp = tempfile::tempdir().unwrap();

    // Act
    let run = against(
        "diagnose",
        &base,
        "scenarios/rehearsal-stock-only.toml",
        tmp.path(),
        &[
            "--budget",
            "1m",
            "--experiments",
            "rush,adversarial,cancel-after-pay,restock",
        ],
    )
    .await;

    // Assert
    let d = diagnosis(tmp.path());
    for class in [
        "cancel_after_pay",
        "restock_not_idempotent",
        "duplicate_on_retry",
        "limit_race",
        "bots_take_units",
    ] {
        let r = row(&d, class);
        assert_eq!(r["status"], "not_testable", "{class}: {d:#}");
        let detail = r["detail"].as_str().unwrap();
        assert!(
            detail.contains("map") && detail.contains("[target]"),
            "{class}: {detail}"
        );
    }
    assert_eq!(d["found"], serde_json::json!([]), "{d:#}");
    let skipped: Vec<&str> = d["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["experiment"].as_str().unwrap())
        .collect();
    assert!(
        skipped.contains(&"cancel-after-pay") && skipped.contains(&"restock"),
        "{d:#}"
    );
    // Three classes tested (the race, the oracle's count, the answers' errors): too few to
    // call the shop sound.
    assert_eq!(d["tested"], 3, "{d:#}");
    assert_eq!(run.code, 3, "{}", run.both());
    assert!(run.stdout.contains("NOT ENOUGH TESTED"), "{}", run.both());
}

/// A stock counter behind one locked step: `POST /purchase`, `GET /stock`, `POST
/// /stock/reset?amount=N` (what `rehearsal-stock-only` maps: no ids, no pay, no cancel).
fn stock_only_app() -> axum::Router {
    use axum::extract::{Query, State};
    use axum::http::StatusCode;
    use axum::routing::{get, post};
    use axum::Json;
    use serde_json::json;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    type Stock = Arc<Mutex<i64>>;
    async fn purchase(State(s): State<Stock>) -> (StatusCode, Json<Value>) {
        let mut stock = s.lock().unwrap();
        if *stock <= 0 {
            return (StatusCode::CONFLICT, Json(json!({"detail": "sold out"})));
        }
        *stock -= 1;
        (StatusCode::OK, Json(json!({"message": "purchased"})))
    }
    async fn stock(State(s): State<Stock>) -> Json<Value> {
        Json(json!({"current_stock": *s.lock().unwrap()}))
    }
    async fn reset(State(s): State<Stock>, Query(q): Query<HashMap<String, i64>>) -> StatusCode {
        match q.get("amount") {
            Some(n) => {
                *s.lock().unwrap() = *n;
                StatusCode::OK
            }
            None => StatusCode::UNPROCESSABLE_ENTITY,
        }
    }
    axum::Router::new()
        .route("/purchase", post(purchase))
        .route("/stock", get(stock))
        .route("/stock/reset", post(reset))
        .with_state(Arc::new(Mutex::new(0)))
}

#[tokio::test]
async fn the_dry_run_shows_the_battery_and_sends_nothing() {
    let tmp = tempfile::tempdir().unwrap();

    let run = oversell_cli(
        &[
            "diagnose",
            "--strategy",
            "naive",
            "--budget",
            "5m",
            "--dry-run",
            "--out",
            tmp.path().to_str().unwrap(),
        ],
        &[],
    )
    .await;

    assert_eq!(run.code, 0, "{}", run.both());
    for experiment in [
        "rush",
        "adversarial",
        "cancel-after-pay",
        "restock",
        "capacity",
    ] {
        assert!(
            run.stdout.contains(experiment),
            "{experiment}: {}",
            run.both()
        );
    }
    assert!(run.stdout.contains("nothing sent"), "{}", run.both());
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "nothing written"
    );
    let too_small = oversell_cli(
        &[
            "diagnose",
            "--strategy",
            "naive",
            "--budget",
            "5s",
            "--dry-run",
        ],
        &[],
    )
    .await;
    assert_eq!(too_small.code, 2, "{}", too_small.both());
    assert!(
        too_small.stderr.contains("cannot hold the rush"),
        "{}",
        too_small.both()
    );
    for (args, says) in [
        (
            &["diagnose", "--experiments", "rush,soak", "--dry-run"][..],
            "rush, adversarial, cancel-after-pay, restock, capacity",
        ),
        (
            &[
                "diagnose",
                "--target",
                "http://127.0.0.1:9",
                "--scenario",
                "smoke",
                "--dry-run",
            ][..],
            "no [target] table",
        ),
        (
            &[
                "diagnose",
                "--target",
                "http://10.1.2.3:9",
                "--scenario",
                "rehearsal-reference",
                "--dry-run",
            ][..],
            "--allow-remote",
        ),
    ] {
        let bad = oversell_cli(args, &[]).await;
        assert_eq!(bad.code, 2, "{args:?}: {}", bad.both());
        assert!(bad.stderr.contains(says), "{args:?}: {}", bad.both());
    }
}

/// A combined access log of a sale: 60 buyers order over three seconds, the first 20 get a
/// unit (201), the rest are told sold out (409); each winner pays.
fn sale_log(dir: &Path) -> std::path::PathBuf {
    let mut text = String::new();
    for i in 0..60u32 {
        let ms = i * 50;
        let time = format!("06/Dec/2026:01:05:{:02} +0000", 28 + ms / 1000);
        let status = if i < 20 { 201 } else { 409 };
        text.push_str(&format!(
            "10.0.0.{} - u-{i} [{time}] \"POST /api/orders HTTP/1.1\" {status} 64 \"-\" \"app\"\n",
            i % 250 + 1
        ));
        if i < 20 {
            text.push_str(&format!(
                "10.0.0.{} - u-{i} [{time}] \"POST /api/orders/o-{i}/pay HTTP/1.1\" 200 16 \"-\" \"app\"\n",
                i % 250 + 1
            ));
        }
    }
    let log = dir.join("sale.log");
    std::fs::write(&log, text).unwrap();
    log
}

#[tokio::test]
async fn an_access_log_is_fitted_first_and_its_rush_planned() {
    let tmp = tempfile::tempdir().unwrap();
    let log = sale_log(tmp.path());
    let out = tmp.path().join("out");

    let run = oversell_cli(
        &[
            "diagnose",
            "--strategy",
            "redis-lua",
            "--access-log",
            log.to_str().unwrap(),
            "--budget",
            "5m",
            "--dry-run",
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await;

    assert_eq!(run.code, 0, "{}", run.both());
    let rush = run
        .stdout
        .lines()
        .find(|l| l.starts_with("rush"))
        .unwrap_or_else(|| panic!("{}", run.both()));
    let words: Vec<&str> = rush.split_whitespace().collect();
    assert_eq!(
        &words[1..3],
        ["60", "20"],
        "the fitted buyers and stock: {rush}"
    );
    assert!(!out.exists(), "a dry run writes nothing into --out");
}
