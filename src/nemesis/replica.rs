//! `replica-lag`: the run's managed PostgreSQL read replica stops replaying WAL for the window
//! (`SELECT pg_wal_replay_pause()`: it keeps receiving, it stops applying, so every read of it
//! is a snapshot from the moment of the pause), then `pg_wal_replay_resume()`; the fault ends
//! once the replica has replayed everything it received (up to 30 s), and its note says how
//! far behind it was and how long catching up took. Reconciliation reads that replica
//! (`--replica-database-url`): the oracle and the fault's recovery (reconciliation residual
//! back to its pre-fault value) judge what it did meanwhile.

use super::hold::Hold;
use anyhow::Context;
use sqlx::{Connection, PgConnection, Row};
use std::time::{Duration, Instant};

/// How long the replica gets to catch up after the resume.
const CATCH_UP_WITHIN: Duration = Duration::from_secs(30);

/// Replay paused for the window, resumed, caught up.
pub(super) async fn lag(replica_url: &str, hold: &mut Hold) -> anyhow::Result<Option<String>> {
    let mut conn = PgConnection::connect(replica_url)
        .await
        .context("connecting to the replica")?;
    if !hold.start().await {
        let _ = conn.close().await;
        return Ok(None);
    }
    let paused = sqlx::query("SELECT pg_wal_replay_pause()")
        .execute(&mut conn)
        .await
        .context("pausing the replica's replay");
    if let Err(e) = paused {
        let _ = conn.close().await;
        return Err(e);
    }
    hold.mark();
    hold.wait().await;
    let behind = lag_bytes(&mut conn).await.unwrap_or(0);
    let resumed = sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&mut conn)
        .await
        .context("resuming the replica's replay");
    let started = Instant::now();
    let caught_up = match resumed {
        Ok(_) => catch_up(&mut conn).await,
        Err(e) => Err(e),
    };
    let _ = conn.close().await;
    let caught_up = caught_up?;
    Ok(Some(format!(
        "replay paused, {behind} bytes of WAL behind at the resume; {}",
        if caught_up {
            format!("caught up in {} ms", started.elapsed().as_millis())
        } else {
            format!("not caught up within {} s", CATCH_UP_WITHIN.as_secs())
        }
    )))
}

/// WAL received but not replayed, bytes.
async fn lag_bytes(conn: &mut PgConnection) -> anyhow::Result<i64> {
    let row = sqlx::query(
        "SELECT COALESCE(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()), \
         0)::BIGINT",
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get(0)?)
}

/// Waits until the replica replayed what it received; false after [`CATCH_UP_WITHIN`].
async fn catch_up(conn: &mut PgConnection) -> anyhow::Result<bool> {
    let deadline = Instant::now() + CATCH_UP_WITHIN;
    while Instant::now() < deadline {
        if lag_bytes(conn).await? <= 0 {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(false)
}

/// Undo (idempotent): the replica replays again.
pub(super) async fn resume(replica_url: &str) -> anyhow::Result<()> {
    let mut conn = PgConnection::connect(replica_url).await?;
    sqlx::query("SELECT pg_wal_replay_resume()")
        .execute(&mut conn)
        .await?;
    let _ = conn.close().await;
    Ok(())
}
