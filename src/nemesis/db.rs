//! `db-outage` and `db-lock`, on the run's own database only; the server is never restarted.
//!
//! - PostgreSQL outage: from an admin session on the `postgres` database (never the run's),
//!   `ALTER DATABASE <db> ALLOW_CONNECTIONS false` and `pg_terminate_backend` of every session
//!   of the run's database; undone with `ALLOW_CONNECTIONS true`.
//! - MariaDB outage: there is no per-database switch, so for the window every session whose
//!   current database is the run's is killed (`KILL CONNECTION`, from
//!   `information_schema.processlist`) every 50 ms: new connections get in, and are cut within
//!   50 ms. The admin session names no database, so it never kills itself.
//! - Lock: a session of the run's database holds `LOCK TABLE items IN ACCESS EXCLUSIVE MODE`
//!   in an open transaction (PostgreSQL) or `LOCK TABLES items WRITE` (MariaDB) for the
//!   window (its window starts once the lock is held); the lock dies with the session if the
//!   run is cut short.
//!
//! The admin session of an outage is opened before the fault's time, so the outage starts
//! on time; its window starts once connections are refused and sessions terminated.

use super::hold::Hold;
use crate::store::Backend;
use anyhow::Context;
use sqlx::{Connection, MySqlConnection, PgConnection, Row};
use std::time::Duration;

/// The database a URL names, and the same URL on `admin_db` (`None`: no database).
fn split(url: &str, admin_db: Option<&str>) -> anyhow::Result<(String, String)> {
    let (admin, db) = crate::store::on_database(url, admin_db.unwrap_or(""))
        .filter(|(_, db)| !db.is_empty())
        .context("the run's database URL names no database")?;
    Ok((db, admin))
}

/// A quoted PostgreSQL identifier.
fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The run's database refuses connections, its sessions are terminated; undone after the
/// window.
pub(super) async fn outage(url: &str, hold: &mut Hold) -> anyhow::Result<Option<String>> {
    match Backend::from_url(url)? {
        Backend::Postgres => pg_outage(url, hold).await,
        Backend::Mysql => mysql_outage(url, hold).await,
    }
}

/// PostgreSQL: the run's database stops allowing connections and its sessions are
/// terminated; allowed again after the window, even when the outage itself failed.
async fn pg_outage(url: &str, hold: &mut Hold) -> anyhow::Result<Option<String>> {
    let (db, admin) = split(url, Some("postgres"))?;
    let mut conn = PgConnection::connect(&admin)
        .await
        .context("the admin session (database postgres)")?;
    if !hold.start().await {
        let _ = conn.close().await;
        return Ok(None);
    }
    let result = async {
        set_connections(&mut conn, &db, false).await?;
        let n = terminate(&mut conn, &db).await?;
        hold.mark();
        hold.wait().await;
        anyhow::Ok(n)
    }
    .await;
    let undo = set_connections(&mut conn, &db, true).await;
    let _ = conn.close().await;
    let n = result?;
    undo.context("re-allowing connections")?;
    Ok(Some(format!(
        "connections refused, {n} sessions terminated; allowed again"
    )))
}

/// `ALTER DATABASE <db> ALLOW_CONNECTIONS true|false`.
async fn set_connections(conn: &mut PgConnection, db: &str, allowed: bool) -> anyhow::Result<()> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE {} ALLOW_CONNECTIONS {allowed}",
        ident(db)
    )))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// MariaDB: every session of the run's database killed every 50 ms for the window.
async fn mysql_outage(url: &str, hold: &mut Hold) -> anyhow::Result<Option<String>> {
    let (db, admin) = split(url, None)?;
    let mut conn = MySqlConnection::connect(&admin)
        .await
        .context("the admin session (no database)")?;
    if !hold.start().await {
        let _ = conn.close().await;
        return Ok(None);
    }
    let mut killed = 0u64;
    loop {
        killed += kill_sessions(&mut conn, &db, hold).await?;
        if !hold.tick(Duration::from_millis(50)).await {
            break;
        }
    }
    let _ = conn.close().await;
    Ok(Some(format!(
        "sessions of the database killed every 50 ms ({killed} in all)"
    )))
}

/// Kills every other session whose current database is `db`; how many were killed. A round
/// that runs past the window's end (a slow server) kills nothing after it: a fault due then
/// (a lock's own session) is not cut by an outage that is over.
async fn kill_sessions(conn: &mut MySqlConnection, db: &str, hold: &Hold) -> anyhow::Result<u64> {
    let ids: Vec<u64> = sqlx::query(
        "SELECT id FROM information_schema.processlist \
         WHERE db = ? AND id <> CONNECTION_ID()",
    )
    .bind(db)
    .fetch_all(&mut *conn)
    .await?
    .iter()
    .filter_map(|r| {
        r.try_get::<u64, _>(0)
            .ok()
            .or_else(|| r.try_get::<i64, _>(0).ok().map(|v| v as u64))
    })
    .collect();
    let mut killed = 0;
    for id in ids {
        if hold.over() {
            break;
        }
        if sqlx::query(sqlx::AssertSqlSafe(format!("KILL CONNECTION {id}")))
            .execute(&mut *conn)
            .await
            .is_ok()
        {
            killed += 1;
        }
    }
    Ok(killed)
}

/// Terminates every other session of `db`; how many.
async fn terminate(conn: &mut PgConnection, db: &str) -> anyhow::Result<i64> {
    let n: i64 = sqlx::query(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = $1 AND pid <> pg_backend_pid()",
    )
    .bind(db)
    .fetch_one(&mut *conn)
    .await?
    .try_get(0)?;
    Ok(n)
}

/// Undoes an outage (idempotent): PostgreSQL allows connections to the run's database again;
/// MariaDB has nothing to undo once the kill loop stopped.
pub(super) async fn allow_connections(url: &str) -> anyhow::Result<()> {
    if Backend::from_url(url)? != Backend::Postgres {
        return Ok(());
    }
    let (db, admin) = split(url, Some("postgres"))?;
    let mut conn = PgConnection::connect(&admin).await?;
    set_connections(&mut conn, &db, true).await?;
    let _ = conn.close().await;
    Ok(())
}

/// The items table locked for the window.
pub(super) async fn lock(url: &str, hold: &mut Hold) -> anyhow::Result<Option<String>> {
    match Backend::from_url(url)? {
        Backend::Postgres => {
            // Connected at its time, not before: another fault (an outage) may cut sessions
            // of this database until then.
            if !hold.start().await {
                return Ok(None);
            }
            let mut conn = PgConnection::connect(url).await?;
            let mut tx = conn.begin().await?;
            sqlx::query("SET LOCAL lock_timeout = '10s'")
                .execute(&mut *tx)
                .await?;
            sqlx::query("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
                .execute(&mut *tx)
                .await
                .context("taking the lock")?;
            hold.mark();
            hold.wait().await;
            tx.rollback().await?;
            let _ = conn.close().await;
            Ok(Some("LOCK TABLE items IN ACCESS EXCLUSIVE MODE".into()))
        }
        Backend::Mysql => {
            if !hold.start().await {
                return Ok(None);
            }
            let mut conn = MySqlConnection::connect(url).await?;
            sqlx::query("SET SESSION lock_wait_timeout = 10")
                .execute(&mut conn)
                .await?;
            sqlx::query("LOCK TABLES items WRITE")
                .execute(&mut conn)
                .await
                .context("taking the lock")?;
            hold.mark();
            hold.wait().await;
            sqlx::query("UNLOCK TABLES").execute(&mut conn).await?;
            let _ = conn.close().await;
            Ok(Some("LOCK TABLES items WRITE".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_session_is_on_another_database() {
        let (db, admin) = split(
            "postgres://postgres:postgres@127.0.0.1:5432/run_1?sslmode=disable",
            Some("postgres"),
        )
        .unwrap();
        assert_eq!(db, "run_1");
        assert_eq!(
            admin,
            "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"
        );
        let (_, admin) = split("mysql://root@127.0.0.1:3306/run_1", None).unwrap();
        assert_eq!(admin, "mysql://root@127.0.0.1:3306");
        assert_eq!(ident("a\"b"), "\"a\"\"b\"");
    }
}
