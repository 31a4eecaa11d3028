//! "Read-only" SQL that wrote and read files (#58), reproduced with the superuser credentials
//! the review used (the tests' PostgreSQL `postgres`, MariaDB `root`): a word list beaten by a
//! Unicode-escaped identifier (`U&"lo\005Fexport"`), `lo_export` inside `START TRANSACTION READ
//! ONLY`, `dblink_exec` inserting rows, `pg_cancel_backend` cancelling another session,
//! `pg_read_file` quoted into the WARN line and `last_error`. The user's SQL now runs as a role
//! the run creates, which the server itself keeps from all of that, and an error is its
//! SQLSTATE, never the server's message.

use super::{leaks, measured, seeded, stock_scenario, stock_shop, superuser_db};
use crate::helpers::drop_database;
use oversell::testing::guard::{scalar, Reader};
use sqlx::{Connection, Row};
use std::time::Duration;

/// A file path the database server could write (its own /tmp) that nothing else uses.
fn server_path(tag: &str) -> String {
    format!("/tmp/{}", seeded(tag))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unicode_escaped_lo_export_through_the_oracle_writes_no_file_and_says_so_by_sqlstate() {
    // Arrange: a large object to export, as the superuser.
    let db = superuser_db().await;
    let mut admin = sqlx::PgConnection::connect(&db).await.unwrap();
    let oid: i64 = sqlx::query_scalar("SELECT lo_from_bytea(0, 'exported')::bigint")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let (base, _shop) = stock_shop(axum::Router::new()).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let file = stock_scenario(tmp.path(), &[], "");
    let (escaped, plain) = (server_path("u-escape-"), server_path("plain-"));
    let queries = [
        format!(r#"SELECT U&"lo\005Fexport"({oid}, '{escaped}')"#),
        // No word list in the way: the server refuses it.
        format!(r#"SELECT "lo_export"({oid}, '{plain}')"#),
    ];

    for q in &queries {
        // Act
        let m = measured(
            "a Unicode-escaped lo_export as --sold-query",
            &[
                "attack",
                "--target",
                &base,
                "--scenario",
                &file,
                "--out",
                out.to_str().unwrap(),
                "--quiet",
                "--oracle-sql",
                &db,
                "--sold-query",
                q,
            ],
            &[],
        )
        .await;

        // Assert: refused by the server (insufficient privilege), said at start what the
        // credentials could do, and no file.
        assert_ne!(m.run.code, 0, "{}", m.run.both());
        assert!(m.run.stderr.contains("SQLSTATE 42501"), "{}", m.run.both());
        assert!(
            m.run.stderr.contains("can do more than read") && m.run.stderr.contains("superuser"),
            "says so at start: {}",
            m.run.both()
        );
    }
    for p in [&escaped, &plain] {
        assert!(!std::path::Path::new(p).exists(), "{p} was written");
    }
    let _ = admin.close().await;
    drop_database(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_role_cannot_write_files_signal_backends_or_use_dblink_even_in_one_statement() {
    // Arrange: the superuser's database with dblink, a table, a large object, a victim session.
    let db = superuser_db().await;
    let mut admin = sqlx::PgConnection::connect(&db).await.unwrap();
    sqlx::raw_sql("CREATE EXTENSION IF NOT EXISTS dblink; CREATE TABLE t (x int)")
        .execute(&mut admin)
        .await
        .unwrap();
    let oid: i64 = sqlx::query_scalar("SELECT lo_from_bytea(0, 'x')::bigint")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let mut victim = sqlx::PgConnection::connect(&db).await.unwrap();
    let victim_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut victim)
        .await
        .unwrap();
    let sleeping = tokio::spawn(async move {
        let r = sqlx::query("SELECT pg_sleep(20)")
            .execute(&mut victim)
            .await;
        (r.is_ok(), victim)
    });
    let name = db.rsplit('/').next().unwrap();
    let written = server_path("in-tx-");
    let reader = Reader::open(&db).await.unwrap();
    assert!(reader.restricted(), "a role of its own: {}", reader.runs_as);
    let attacks = [
        format!("SELECT lo_export({oid}, '{written}')"),
        format!("SELECT dblink_exec('dbname={name} user=postgres', 'INSERT INTO t VALUES (1)')"),
        format!("SELECT pg_cancel_backend({victim_pid})::int"),
        "SELECT length(pg_read_file('/etc/os-release'))".to_string(),
        // A role set with SET ROLE is left in the same statement; a login is not.
        "SELECT length(set_config('role', 'postgres', true)) + length(pg_read_file('/etc/hostname'))"
            .to_string(),
    ];

    for q in &attacks {
        // Act: inside START TRANSACTION READ ONLY, as the oracle runs it.
        let e = scalar::read(&reader, q, Duration::from_secs(5)).await;

        // Assert: refused by the server.
        let e = e.expect_err(q).to_string();
        assert!(e.contains("SQLSTATE"), "{q}: {e}");
    }
    assert!(
        !std::path::Path::new(&written).exists(),
        "{written} was written"
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM t")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(rows, 0, "dblink inserted nothing");
    assert!(
        !sleeping.is_finished(),
        "the victim's query was not cancelled"
    );
    let _: bool = sqlx::query_scalar("SELECT pg_cancel_backend($1)")
        .bind(victim_pid)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let (completed, victim) = sleeping.await.unwrap();
    assert!(!completed, "cancelled by the test itself, not earlier");
    let _ = victim.close().await;
    // The role goes with the last holder.
    let role = reader.runs_as.split(' ').next().unwrap().to_string();
    drop(reader);
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_roles WHERE rolname = $1")
        .bind(&role)
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(left, 0, "{role} was dropped");
    let _ = admin.close().await;
    drop_database(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_query_that_quotes_a_file_or_a_secret_leaves_only_its_sqlstate_in_the_report() {
    // Arrange: a file only the database server's user and root may read, holding a secret, and
    // a value the cast error would quote.
    let db = superuser_db().await;
    let secret = seeded("file-secret-");
    let cast = seeded("cast-secret-");
    let path = server_path("read-");
    std::fs::write(&path, &secret).unwrap();
    let mut admin = sqlx::PgConnection::connect(&db).await.unwrap();
    sqlx::query("CREATE TABLE s AS SELECT $1::text AS v")
        .bind(&cast)
        .execute(&mut admin)
        .await
        .unwrap();
    let _ = admin.close().await;
    let (base, _shop) = stock_shop(axum::Router::new()).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let watch = format!(
        "[watch.file]\nsql = \"SELECT pg_read_file('{path}')::int\"\ndatabase = \"{db}\"\n\
         [watch.cast]\nsql = \"SELECT v::int FROM s\"\ndatabase = \"{db}\"\n"
    );
    let file = stock_scenario(tmp.path(), &[], &watch);

    // Act
    let m = measured(
        "[watch] reading a file and casting a secret",
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            &file,
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await;

    // Assert: the run went on; each gauge's error is its SQLSTATE; neither secret anywhere.
    assert_eq!(m.run.code, 0, "{}", m.run.both());
    let report = crate::helpers::only_report(&out);
    let gauges = &report["runs"][0]["watch"];
    let errors = format!(
        "{} {}",
        gauges["file"]["last_error"], gauges["cast"]["last_error"]
    );
    assert!(errors.contains("SQLSTATE 42501"), "{gauges}");
    assert!(errors.contains("SQLSTATE 22P02"), "{gauges}");
    assert_eq!(
        leaks(tmp.path(), &m.run, &[&secret, &cast]),
        Vec::<String>::new()
    );
    let _ = std::fs::remove_file(&path);
    drop_database(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb_the_runs_user_has_no_file_privilege_and_kills_no_other_session() {
    // Arrange: root's database (root may do anything).
    use sqlx::migrate::MigrateDatabase;
    let db = crate::helpers::fresh_db_url(oversell::testing::store::Backend::Mysql);
    sqlx::MySql::create_database(&db).await.unwrap();
    let mut admin = sqlx::MySqlConnection::connect(&db).await.unwrap();
    let admin_id: u64 = sqlx::query_scalar("SELECT CONNECTION_ID()")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    let secret = seeded("my-secret-");
    let path = server_path("my-read-");
    std::fs::write(&path, &secret).unwrap();
    let reader = Reader::open(&db).await.unwrap();
    assert!(reader.restricted(), "a user of its own: {}", reader.runs_as);
    let outfile = server_path("outfile-");

    // Act: what root could do, as the run's user (past the word list: straight to the server).
    let mut c = sqlx::MySqlConnection::connect(reader.login_url())
        .await
        .unwrap();
    let write = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "SELECT 1 INTO OUTFILE '{outfile}'"
    )))
    .execute(&mut c)
    .await;
    let read: Option<Option<String>> = sqlx::query("SELECT LOAD_FILE(?)")
        .bind(&path)
        .fetch_one(&mut c)
        .await
        .ok()
        .map(|r| r.try_get::<Option<String>, _>(0).unwrap_or(None));
    let kill = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("KILL {admin_id}")))
        .execute(&mut c)
        .await;
    let _ = c.close().await;

    // Assert
    assert!(write.is_err(), "INTO OUTFILE refused");
    assert!(!std::path::Path::new(&outfile).exists());
    assert!(
        read.as_ref().is_none_or(|v| v.is_none()),
        "LOAD_FILE read nothing: {read:?}"
    );
    assert!(kill.is_err(), "KILL of root's session refused");
    let alive: i64 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(alive, 1);
    let _ = std::fs::remove_file(&path);
    // The user goes with the reader, even when the URL's database went first.
    let _ = admin.close().await;
    drop_database(&db).await;
    let user = reader.runs_as.split(' ').next().unwrap().to_string();
    drop(reader);
    let mut root = sqlx::MySqlConnection::connect(&crate::helpers::mysql_base())
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM mysql.user WHERE User = ?")
        .bind(&user)
        .fetch_one(&mut root)
        .await
        .unwrap();
    assert_eq!(left, 0, "{user} was dropped");
    let _ = root.close().await;
}
