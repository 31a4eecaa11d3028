//! `oversell attack --target`: a rehearsal against a shop with another API shape.
//!
//! The stub shop below speaks the API that `scenarios/rehearsal-example.toml` maps, and is
//! deliberately oversell-prone: it reads the stock, waits (a slow "risk check"), then writes,
//! on a real PostgreSQL table. The user's oracle (their SQL, or their endpoint) must find it.

use crate::helpers::*;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use oversell::testing::store::Backend;
use serde_json::{json, Value};
use sqlx::PgPool;
use std::time::Duration;

#[derive(Clone)]
struct Stub {
    db: PgPool,
}

/// The stub shop's router: read stock, sleep, write (the race), on `stub_stock`/`stub_purchases`.
fn stub_app(db: PgPool) -> Router {
    Router::new()
        .route("/v2/flash/{sku}/reset", post(reset))
        .route("/v2/products/{sku}", get(product))
        .route("/v2/checkout", post(checkout))
        .route("/v2/purchases/{id}/payment", post(pay))
        .route("/v2/purchases/{id}", delete(cancel))
        .route("/oracle", get(oracle))
        .with_state(Stub { db })
}

type Answer = (StatusCode, Json<Value>);

fn fail(e: sqlx::Error) -> Answer {
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        Json(json!({"code": "ERROR", "detail": e.to_string()})),
    )
}

async fn reset(State(s): State<Stub>, Path(sku): Path<i64>, Json(b): Json<Value>) -> Answer {
    let q = b["quantity"].as_i64().unwrap_or(0);
    let r = sqlx::query(
        "INSERT INTO stub_stock (sku, quantity) VALUES ($1, $2) \
         ON CONFLICT (sku) DO UPDATE SET quantity = EXCLUDED.quantity",
    )
    .bind(sku)
    .bind(q)
    .execute(&s.db)
    .await;
    match r {
        Ok(_) => (StatusCode::OK, Json(json!({"code": "OK"}))),
        Err(e) => fail(e),
    }
}

async fn product(State(s): State<Stub>, Path(sku): Path<i64>) -> Answer {
    match sqlx::query_scalar::<_, i64>("SELECT quantity FROM stub_stock WHERE sku = $1")
        .bind(sku)
        .fetch_optional(&s.db)
        .await
    {
        Ok(Some(q)) => (StatusCode::OK, Json(json!({"sku": sku, "left": q}))),
        Ok(None) => (StatusCode::NOT_FOUND, Json(json!({"code": "NO_SUCH_SKU"}))),
        Err(e) => fail(e),
    }
}

async fn checkout(State(s): State<Stub>, Json(b): Json<Value>) -> Answer {
    let sku = b["sku"].as_i64().unwrap_or(0);
    let account = b["account"].as_str().unwrap_or_default().to_string();
    let device = b["device"].as_str().unwrap_or_default().to_string();
    // Read...
    let left: i64 = match sqlx::query_scalar("SELECT quantity FROM stub_stock WHERE sku = $1")
        .bind(sku)
        .fetch_optional(&s.db)
        .await
    {
        Ok(Some(q)) => q,
        Ok(None) => return (StatusCode::NOT_FOUND, Json(json!({"code": "NO_SUCH_SKU"}))),
        Err(e) => return fail(e),
    };
    // ...check...
    if left < 1 {
        return (StatusCode::GONE, Json(json!({"code": "SOLD_OUT"})));
    }
    // ...a slow risk check: the race window (50 ms, as the stand-in shop's: with 10 ms a busy
    // machine sometimes spread the burst's last buyers too thin to race, and nothing oversold)...
    tokio::time::sleep(Duration::from_millis(50)).await;
    // ...and write, trusting the stale read.
    let r = async {
        sqlx::query("UPDATE stub_stock SET quantity = quantity - 1 WHERE sku = $1")
            .bind(sku)
            .execute(&s.db)
            .await?;
        sqlx::query_scalar::<_, i64>(
            "INSERT INTO stub_purchases (sku, account, device) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(sku)
        .bind(&account)
        .bind(&device)
        .fetch_one(&s.db)
        .await
    }
    .await;
    match r {
        Ok(id) => (
            StatusCode::OK,
            Json(json!({"code": "CREATED", "data": {"purchaseId": format!("p-{id}")}})),
        ),
        Err(e) => fail(e),
    }
}

fn purchase_id(id: &str) -> i64 {
    id.trim_start_matches("p-").parse().unwrap_or(-1)
}

async fn pay(State(s): State<Stub>, Path(id): Path<String>) -> Answer {
    match sqlx::query("UPDATE stub_purchases SET status = 'paid' WHERE id = $1 AND status = 'new'")
        .bind(purchase_id(&id))
        .execute(&s.db)
        .await
    {
        Ok(r) if r.rows_affected() == 1 => (StatusCode::OK, Json(json!({"code": "PAID"}))),
        Ok(_) => (StatusCode::CONFLICT, Json(json!({"code": "STATE"}))),
        Err(e) => fail(e),
    }
}

async fn cancel(State(s): State<Stub>, Path(id): Path<String>) -> Answer {
    let r = sqlx::query_scalar::<_, i64>(
        "UPDATE stub_purchases SET status = 'cancelled' WHERE id = $1 AND status <> 'cancelled' RETURNING sku",
    )
    .bind(purchase_id(&id))
    .fetch_optional(&s.db)
    .await;
    match r {
        Ok(Some(sku)) => {
            let back = sqlx::query("UPDATE stub_stock SET quantity = quantity + 1 WHERE sku = $1")
                .bind(sku)
                .execute(&s.db)
                .await;
            match back {
                Ok(_) => (StatusCode::OK, Json(json!({"code": "CANCELLED"}))),
                Err(e) => fail(e),
            }
        }
        Ok(None) => (StatusCode::CONFLICT, Json(json!({"code": "STATE"}))),
        Err(e) => fail(e),
    }
}

/// The shop owner's own audit endpoint, for `--oracle-http`.
async fn oracle(State(s): State<Stub>) -> Answer {
    let sold: Result<i64, _> =
        sqlx::query_scalar("SELECT count(*) FROM stub_purchases WHERE status <> 'cancelled'")
            .fetch_one(&s.db)
            .await;
    let stock: Result<Option<i64>, _> =
        sqlx::query_scalar("SELECT quantity FROM stub_stock WHERE sku = 1")
            .fetch_optional(&s.db)
            .await;
    match (sold, stock) {
        (Ok(sold), Ok(stock)) => (StatusCode::OK, Json(json!({"sold": sold, "stock": stock}))),
        (Err(e), _) | (_, Err(e)) => fail(e),
    }
}

/// The stub on 127.0.0.1:0 with a fresh database; returns its URL and the database URL.
async fn spawn_stub() -> (String, String, PgPool) {
    use sqlx::migrate::MigrateDatabase;
    let url = fresh_db_url(Backend::Postgres);
    sqlx::Postgres::create_database(&url)
        .await
        .expect("create the stub's database");
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(20)
        .connect(&url)
        .await
        .unwrap();
    for ddl in [
        "CREATE TABLE stub_stock (sku BIGINT PRIMARY KEY, quantity BIGINT NOT NULL)",
        "CREATE TABLE stub_purchases (id BIGSERIAL PRIMARY KEY, sku BIGINT NOT NULL, \
         account TEXT NOT NULL, device TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'new')",
    ] {
        sqlx::query(ddl).execute(&db).await.unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = stub_app(db.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, url, db)
}

const EXAMPLE: &str = "scenarios/rehearsal-example.toml";
const SOLD: &str = "SELECT count(*) FROM stub_purchases WHERE sku = 1 AND status <> 'cancelled'";
const STOCK: &str = "SELECT quantity FROM stub_stock WHERE sku = 1";

/// `attack` on the stub with its SQL oracle ([`SOLD`], [`STOCK`]).
async fn sql_rehearsal(base: &str, db_url: &str, out: &std::path::Path) -> CliRun {
    let oracle = [
        "--oracle-sql",
        db_url,
        "--sold-query",
        SOLD,
        "--stock-query",
        STOCK,
    ];
    against("attack", base, EXAMPLE, out, &oracle).await
}

#[tokio::test]
async fn the_sql_oracle_finds_the_stub_shops_oversell_through_the_custom_mapping() {
    // Arrange
    let (base, db_url, db) = spawn_stub().await;
    let tmp = tempfile::tempdir().unwrap();

    // Act
    let run = sql_rehearsal(&base, &db_url, tmp.path()).await;

    // Assert: the report's oversell is exactly what the stub's own tables say.
    assert_eq!(run.code, 0, "{}", run.both());
    let sold: i64 = sqlx::query_scalar(SOLD).fetch_one(&db).await.unwrap();
    let stock: i64 = sqlx::query_scalar(STOCK).fetch_one(&db).await.unwrap();
    db.close().await;
    drop_database(&db_url).await;
    assert!(
        sold > 20,
        "the stub oversells under the burst: sold {sold} of 20"
    );
    let report = only_report(tmp.path());
    let r = &report["runs"][0];
    assert_eq!(r["verified"], true, "{r}");
    assert_eq!(r["sold"], sold, "{r}");
    assert_eq!(r["oversell"], sold - 20, "{r}");
    assert_eq!(r["db_stock"], stock);
    assert_eq!(r["negative_stock"], true);
    assert_eq!(r["conservation_drift"], 0);
    assert!(
        r["requests"]["order"]["outcomes"]["created"]
            .as_u64()
            .unwrap()
            > 20,
        "{r}"
    );
    assert!(
        r["requests"]["order"]["outcomes"]["sold_out"]
            .as_u64()
            .unwrap()
            > 0,
        "{r}"
    );
    assert!(run.stdout.contains("oversold"), "{}", run.both());
}

#[tokio::test]
async fn the_http_oracle_and_csv_buyers_drive_a_rehearsal_and_the_gate_fails_on_its_oversell() {
    // Arrange: 300 accounts from a CSV file.
    let (base, db_url, db) = spawn_stub().await;
    let tmp = tempfile::tempdir().unwrap();
    let csv = tmp.path().join("buyers.csv");
    let mut text = String::from("user_id,device_id,ip\n");
    for i in 0..300 {
        text.push_str(&format!(
            "member-{i:04},phone-{i:04},198.51.100.{}\n",
            i % 250 + 1
        ));
    }
    std::fs::write(&csv, text).unwrap();
    let junit = tmp.path().join("gate.xml");

    // Act
    let run = oversell_cli(
        &[
            "gate",
            "--target",
            &base,
            "--scenario",
            "scenarios/rehearsal-example.toml",
            "--oracle-http",
            &format!("{base}/oracle"),
            "--buyers-csv",
            csv.to_str().unwrap(),
            "--threshold",
            "error_rate=1",
            "--threshold",
            "lost_acks=0",
            "--out",
            tmp.path().join("reports").to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;

    // Assert
    let accounts: Vec<String> = sqlx::query_scalar("SELECT DISTINCT account FROM stub_purchases")
        .fetch_all(&db)
        .await
        .unwrap();
    db.close().await;
    drop_database(&db_url).await;
    assert_eq!(run.code, 1, "{}", run.both());
    assert!(!accounts.is_empty());
    assert!(
        accounts.iter().all(|a| a.starts_with("member-")),
        "buyers come from the CSV: {accounts:?}"
    );
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("well-formed JUnit");
    let failure = |ty: &str, message: &str| {
        doc.descendants().any(|n| {
            n.has_tag_name("failure")
                && n.attribute("type") == Some(ty)
                && n.attribute("message")
                    .is_some_and(|m| m.starts_with(message))
        })
    };
    assert!(failure("threshold_breached", "oversell breached"), "{xml}");
    assert!(
        failure(
            "not_verified",
            "lost_acks not verified (limit 0): the oracle reports totals only"
        ),
        "totals cannot show lost acks, and an explicit limit on them is not a pass: {xml}"
    );
    let duplicate_buyers = doc
        .descendants()
        .find(|n| {
            n.has_tag_name("testcase") && n.attribute("name") == Some("duplicate_buyers <= 0")
        })
        .unwrap_or_else(|| panic!("every limit is listed, duplicate_buyers too: {xml}"));
    assert!(
        !duplicate_buyers
            .children()
            .any(|n| n.attribute("type") == Some("not_verified")),
        "without order rows duplicate_buyers is measured by the clients' records: {xml}"
    );
    assert!(
        doc.descendants().any(|n| n.has_tag_name("skipped")
            && n.attribute("message")
                .is_some_and(|m| m.contains("not required"))),
        "a default limit this oracle cannot measure is listed as not required: {xml}"
    );
}

#[tokio::test]
async fn without_an_oracle_the_clients_evidence_still_fails_the_gate_on_the_stubs_oversell() {
    let (base, db_url, db) = spawn_stub().await;
    let tmp = tempfile::tempdir().unwrap();

    let run = oversell_cli(
        &[
            "gate",
            "--target",
            &base,
            "--scenario",
            "scenarios/rehearsal-example.toml",
            "--threshold",
            "error_rate=1",
            "--out",
            tmp.path().to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    let allowed = oversell_cli(
        &[
            "gate",
            "--target",
            &base,
            "--scenario",
            "scenarios/rehearsal-example.toml",
            "--threshold",
            "error_rate=1",
            "--allow-unverified",
            "--out",
            tmp.path().join("allowed").to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    db.close().await;
    drop_database(&db_url).await;

    assert_eq!(
        allowed.code,
        1,
        "--allow-unverified never passes a run whose clients were told of more units than it had: {}",
        allowed.both()
    );
    assert!(
        allowed
            .stdout
            .lines()
            .any(|l| l.contains(" oversell ") && l.trim_end().ends_with("FAIL")),
        "oversell is breached, measured by the clients' evidence: {}",
        allowed.both()
    );
    assert_eq!(run.code, 1, "{}", run.both());
    assert!(
        run.stdout
            .contains("oversell not verified by a server-side oracle"),
        "the report says so plainly: {}",
        run.both()
    );
    assert!(
        run.stdout.contains("FAIL (not verified)")
            && run
                .flat_stdout()
                .contains("pass --oracle-sql or --oracle-http"),
        "{}",
        run.both()
    );
    let report = only_report(tmp.path());
    let r = &report["runs"][0];
    assert_eq!(r["oversell"], Value::Null);
    assert_eq!(r["verified"], false);
    assert!(r["client_oversell"].as_i64().unwrap() > 0, "{r}");
}

/// Relations, functions and extensions in the database (anything a probe could create).
async fn objects(db: &PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM pg_class) + (SELECT count(*) FROM pg_proc) \
         + (SELECT count(*) FROM pg_extension)",
    )
    .fetch_one(db)
    .await
    .unwrap()
}

#[tokio::test]
async fn the_sql_oracle_counts_from_before_the_sale_and_the_probes_leave_the_database_alone() {
    // Arrange: an earlier sale left 7 purchases of the same sku, and the shop's database happens
    // to have an `items` table like the reference shop's.
    let (base, db_url, db) = spawn_stub().await;
    for sql in [
        "INSERT INTO stub_purchases (sku, account, device, status) \
         SELECT 1, 'earlier-' || g, 'd', 'paid' FROM generate_series(1, 7) g",
        "CREATE TABLE items (id BIGINT PRIMARY KEY, stock BIGINT NOT NULL)",
        "INSERT INTO items VALUES (1, 999)",
    ] {
        sqlx::query(sql).execute(&db).await.unwrap();
    }
    let objects_before = objects(&db).await;
    let tmp = tempfile::tempdir().unwrap();

    // Act
    let run = sql_rehearsal(&base, &db_url, tmp.path()).await;

    // Assert
    let all: i64 = sqlx::query_scalar(SOLD).fetch_one(&db).await.unwrap();
    let objects_after = objects(&db).await;
    db.close().await;
    drop_database(&db_url).await;
    assert_eq!(run.code, 0, "{}", run.both());
    let r = &only_report(tmp.path())["runs"][0];
    assert_eq!(r["sold"], all - 7, "this run's sales only: {r}");
    assert_eq!(r["conservation_drift"], 0, "{r}");
    assert!(
        r["oracle_warning"]
            .as_str()
            .unwrap()
            .contains("counted 7 sold before the sale began"),
        "{r}"
    );
    // The stock series is the user's --stock-query, sampled through the oracle: never the
    // reference shop's items table (999 here).
    let stock = r["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "db_stock")
        .expect("--stock-query is sampled during the sale");
    assert!(
        stock["source"]
            .as_str()
            .unwrap()
            .contains("through its oracle"),
        "the reference shop's items table is not read on a foreign database: {stock}"
    );
    assert!(
        stock["points"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p[1].as_f64() != Some(999.0)),
        "{stock}"
    );
    assert_eq!(objects_after, objects_before, "nothing was created");
}

#[tokio::test]
async fn a_sql_oracle_query_that_would_write_is_refused_before_the_shop_is_touched() {
    let (base, db_url, db) = spawn_stub().await;
    sqlx::query("CREATE SEQUENCE oracle_side_effect")
        .execute(&db)
        .await
        .unwrap();
    let tmp = tempfile::tempdir().unwrap();

    let side_effect = "SELECT nextval('oracle_side_effect')";
    let run = against(
        "attack",
        &base,
        EXAMPLE,
        tmp.path(),
        &["--oracle-sql", &db_url, "--sold-query", side_effect],
    )
    .await;

    let advanced: bool = sqlx::query_scalar("SELECT is_called FROM oracle_side_effect")
        .fetch_one(&db)
        .await
        .unwrap();
    let set_up: i64 = sqlx::query_scalar("SELECT count(*) FROM stub_stock")
        .fetch_one(&db)
        .await
        .unwrap();
    db.close().await;
    drop_database(&db_url).await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("--sold-query") && run.stderr.contains("read-only transaction"),
        "{}",
        run.both()
    );
    assert!(!advanced, "the query ran read-only: nothing was written");
    assert_eq!(
        set_up, 0,
        "the sale was never set up: the shop got no request"
    );
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
}

#[tokio::test]
async fn the_sql_oracle_reads_mysql_in_a_read_only_transaction() {
    use oversell::testing::rehearsal::{OracleSource, Tally};
    use sqlx::migrate::MigrateDatabase;
    // Arrange: a table of 3 sales, and a function that would write one more.
    let url = fresh_db_url(Backend::Mysql);
    sqlx::MySql::create_database(&url).await.unwrap();
    let db = sqlx::MySqlPool::connect(&url).await.unwrap();
    for sql in [
        "CREATE TABLE sales (qty INT NOT NULL)",
        "INSERT INTO sales VALUES (1), (1), (1)",
        "CREATE FUNCTION sneak() RETURNS INT MODIFIES SQL DATA \
         BEGIN INSERT INTO sales VALUES (1); RETURN 1; END",
    ] {
        sqlx::raw_sql(sql).execute(&db).await.unwrap();
    }
    let oracle = |sold: &str| OracleSource::Sql {
        url: url.clone(),
        sold_query: Some(sold.into()),
        stock_query: Some("SELECT 17".into()),
        orders: None,
        timeout: std::time::Duration::from_secs(30),
    };

    // Act
    let read = oracle("SELECT sum(qty) FROM sales")
        .connect()
        .await
        .unwrap();
    let reading = read.read().await.unwrap();
    let write = oracle("SELECT sneak()").connect().await.unwrap();
    let refused = write.read().await;

    // Assert
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM sales")
        .fetch_one(&db)
        .await
        .unwrap();
    db.close().await;
    drop_database(&url).await;
    assert_eq!(
        reading,
        Some(Tally {
            sold: Some(3),
            stock: Some(17)
        })
    );
    let e = refused.unwrap_err().to_string();
    // Refused by the server (read-only transaction, or no EXECUTE for the run's read-only
    // user), named by its SQLSTATE and error number, never by the server's message.
    assert!(
        e.contains("--sold-query") && e.contains("the server refused it: SQLSTATE"),
        "{e}"
    );
    assert_eq!(rows, 3, "nothing was written");
}
