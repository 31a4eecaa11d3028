//! The SQL oracle cannot write, cannot hang and leaves nothing behind (#43), on the real
//! PostgreSQL and MariaDB: the issue's `INTO OUTFILE` splice, a query that sleeps for an hour,
//! session locks, NUMERIC sums, and errors that name the query and its SQLSTATE.

use crate::helpers::*;
use oversell::testing::rehearsal::{OracleSource, Tally};
use oversell::testing::store::Backend;
use sqlx::migrate::MigrateDatabase;
use std::time::{Duration, Instant};

/// A fresh database on `backend`, created.
async fn fresh(backend: Backend) -> String {
    let url = fresh_db_url(backend);
    match backend {
        Backend::Postgres => sqlx::Postgres::create_database(&url).await.unwrap(),
        Backend::Mysql => sqlx::MySql::create_database(&url).await.unwrap(),
    }
    url
}

/// The oracle reading `sold` (and stock 5) on `url`, each query stopped after `timeout`.
fn oracle(url: &str, sold: &str, timeout: Duration) -> OracleSource {
    OracleSource::Sql {
        url: url.to_string(),
        sold_query: Some(sold.into()),
        stock_query: Some("SELECT 5".into()),
        orders: None,
        timeout,
    }
}

async fn read(url: &str, sold: &str, timeout: Duration) -> anyhow::Result<Option<Tally>> {
    oracle(url, sold, timeout).connect().await?.read().await
}

#[tokio::test]
async fn the_issues_outfile_splice_and_a_plain_outfile_write_no_file_on_mariadb() {
    let url = fresh(Backend::Mysql).await;
    let file = format!("/tmp/oversell-outfile-{}", uuid::Uuid::now_v7().simple());
    let attacks = [
        format!("SELECT 1), 0) AS SIGNED) INTO OUTFILE '{file}' #"),
        format!("SELECT 1 INTO OUTFILE '{file}'"),
        format!("SELECT 1 INTO /*!*/ DUMPFILE '{file}'"),
        format!("SELECT 1; SELECT 2 INTO OUTFILE '{file}'"),
    ];

    let mut errors = Vec::new();
    for q in &attacks {
        errors.push(read(&url, q, Duration::from_secs(30)).await);
    }

    drop_database(&url).await;
    let written = std::path::Path::new(&file).exists();
    let _ = std::fs::remove_file(&file);
    assert!(!written, "the oracle wrote {file}");
    for (q, e) in attacks.iter().zip(errors) {
        let e = e.expect_err(q).to_string();
        assert!(e.contains("--sold-query") && e.contains(q.as_str()), "{e}");
    }
}

#[tokio::test]
async fn a_query_that_sleeps_for_an_hour_is_stopped_by_the_server_on_both_backends() {
    for (backend, sleep) in [
        (
            Backend::Postgres,
            "SELECT count(*) FROM (SELECT pg_sleep(3600)) x",
        ),
        (
            Backend::Mysql,
            "SELECT count(*) FROM (SELECT SLEEP(3600)) x",
        ),
    ] {
        let url = fresh(backend).await;
        let started = Instant::now();

        let e = read(&url, sleep, Duration::from_secs(1))
            .await
            .expect_err(sleep)
            .to_string();

        let took = started.elapsed();
        // The server's session is gone with it: nothing of ours is still sleeping there.
        let still = sleeping(backend, &url, sleep).await;
        drop_database(&url).await;
        assert!(took < Duration::from_secs(20), "{backend:?}: {took:?}");
        assert!(
            e.contains(sleep) && (e.contains("timeout") || e.contains("max_statement_time")),
            "{backend:?}: {e}"
        );
        assert!(
            !e.contains("error returned from database"),
            "the server's message, no driver prefix: {e}"
        );
        assert_eq!(still, 0, "{backend:?}: the query still runs on the server");
    }
}

/// How many sessions of the server still run `query`.
async fn sleeping(backend: Backend, url: &str, query: &str) -> i64 {
    let ask = match backend {
        Backend::Postgres => {
            "SELECT count(*) FROM pg_stat_activity WHERE query = $1 AND state = 'active'"
        }
        Backend::Mysql => "SELECT count(*) FROM information_schema.processlist WHERE info = ?",
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: i64 = match backend {
            Backend::Postgres => {
                let db = sqlx::PgPool::connect(url).await.unwrap();
                let n = sqlx::query_scalar(ask).bind(query).fetch_one(&db).await;
                db.close().await;
                n.unwrap()
            }
            Backend::Mysql => {
                let db = sqlx::MySqlPool::connect(url).await.unwrap();
                let n = sqlx::query_scalar(ask).bind(query).fetch_one(&db).await;
                db.close().await;
                n.unwrap()
            }
        };
        if n == 0 || Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn session_locks_taken_by_a_query_are_released_after_it_on_both_backends() {
    let key = 4_300_000 + (std::process::id() as i64 % 100_000);
    for backend in [Backend::Postgres, Backend::Mysql] {
        let url = fresh(backend).await;
        let (lock, free) = match backend {
            Backend::Postgres => (
                format!("SELECT count(*) FROM (SELECT pg_advisory_lock({key})) x"),
                format!("SELECT pg_try_advisory_lock({key})::int::int8"),
            ),
            Backend::Mysql => (
                format!("SELECT GET_LOCK('oversell-{key}', 0)"),
                format!("SELECT IS_FREE_LOCK('oversell-{key}')"),
            ),
        };

        let reading = read(&url, &lock, Duration::from_secs(30)).await.unwrap();
        // The oracle is still connected (its pool too): the lock must be free all the same.
        let held = oracle(&url, &lock, Duration::from_secs(30))
            .connect()
            .await
            .unwrap();
        held.read().await.unwrap();
        let free_now: i64 = match backend {
            Backend::Postgres => {
                let db = sqlx::PgPool::connect(&url).await.unwrap();
                let n = sqlx::query_scalar(sqlx::AssertSqlSafe(free.clone()))
                    .fetch_one(&db)
                    .await
                    .unwrap();
                db.close().await;
                n
            }
            Backend::Mysql => {
                let db = sqlx::MySqlPool::connect(&url).await.unwrap();
                let n = sqlx::query_scalar(sqlx::AssertSqlSafe(free.clone()))
                    .fetch_one(&db)
                    .await
                    .unwrap();
                db.close().await;
                n
            }
        };
        drop(held);
        drop_database(&url).await;
        assert_eq!(reading.unwrap().sold, Some(1), "{backend:?}");
        assert_eq!(
            free_now, 1,
            "{backend:?}: the oracle's lock outlived its query"
        );
    }
}

#[tokio::test]
async fn sums_are_read_whole_and_a_bad_query_names_itself_and_its_sqlstate() {
    let url = fresh(Backend::Postgres).await;
    let db = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::raw_sql("CREATE TABLE sales (qty BIGINT NOT NULL); INSERT INTO sales VALUES (2), (3)")
        .execute(&db)
        .await
        .unwrap();
    db.close().await;

    let sum = read(&url, "SELECT sum(qty) FROM sales", Duration::from_secs(30)).await;
    let none = read(
        &url,
        "SELECT qty FROM sales WHERE qty > 9",
        Duration::from_secs(30),
    )
    .await;
    let half = read(&url, "SELECT 2.5", Duration::from_secs(30)).await;
    let bad = read(&url, "SELECT nope FROM sales", Duration::from_secs(30)).await;

    drop_database(&url).await;
    assert_eq!(sum.unwrap().unwrap().sold, Some(5), "a NUMERIC sum");
    assert_eq!(none.unwrap().unwrap().sold, Some(0), "no row: nothing sold");
    let half = half.unwrap_err().to_string();
    assert!(half.contains("whole number"), "{half}");
    let bad = bad.unwrap_err().to_string();
    // By its SQLSTATE and kind: the server's message may quote what a query read (#58).
    assert!(
        bad.contains("`SELECT nope FROM sales`")
            && bad.contains("SQLSTATE 42703 (undefined column)")
            && !bad.contains("error returned from database"),
        "{bad}"
    );
}
