//! The low-water mark of an item's stream (BRIEF §4): stream ids as the database keeps them,
//! raising the mark, and the ids applied above it.
//!
//! The low-water mark (`items.stream_applied`) is the highest stream id below which every entry
//! is applied. Batches of several consumers commit in any order, so a batch cannot just move the
//! mark to its own highest id. The caller passes a candidate proven from Redis (everything at or
//! below it has been acknowledged, and acknowledgement follows the commit); the transaction
//! raises the mark to it, forgets the applied ids the mark now covers, and records its own ids
//! above the mark in `applied_events`, all under the item's row lock.

use super::lane::Lane;
use super::persist::PersistEvent;
use super::StoreTx;
use super::{dialect::Statements, pg_array, Backend, StoreError};
use sqlx::Row;

/// Applied ids per multi-row statement (3 placeholders each).
const APPLIED_CHUNK: usize = 1000;

/// A stream entry id (`ms-seq`) as a pair that orders like the stream does.
pub fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

/// The `ms-seq` spelling of a stream id.
pub fn format_stream_id((ms, seq): (u64, u64)) -> String {
    format!("{ms}-{seq}")
}

/// The greatest stream id below `id` (`0-0` has none and stays `0-0`).
pub fn stream_id_before((ms, seq): (u64, u64)) -> (u64, u64) {
    match (ms, seq) {
        (0, 0) => (0, 0),
        (ms, 0) => (ms - 1, u64::MAX),
        (ms, seq) => (ms, seq - 1),
    }
}

/// A stream id as the database's two BIGINT columns. Sequence numbers past `i64::MAX` (only
/// the "just below" of an id whose sequence is 0) are clamped: no real entry has one.
pub(super) fn as_columns((ms, seq): (u64, u64)) -> (i64, i64) {
    (
        i64::try_from(ms).unwrap_or(i64::MAX),
        i64::try_from(seq).unwrap_or(i64::MAX),
    )
}

/// Records the ids of `events` above the low-water `mark` as applied (the mark is contiguous:
/// what lies above it is named one by one).
pub(super) async fn record_applied(
    tx: &mut StoreTx,
    backend: Backend,
    item: i64,
    events: &[PersistEvent],
    mark: (u64, u64),
) -> Result<(), StoreError> {
    let above: Vec<(i64, i64)> = events
        .iter()
        .map(|e| stream_id(&e.stream_id))
        .filter(|id| *id > mark)
        .map(as_columns)
        .collect();
    match backend {
        Backend::Postgres if !above.is_empty() => {
            sqlx::query(super::dialect::PG_INSERT_APPLIED)
                .bind(item)
                .bind(pg_array::bigint(above.iter().map(|id| id.0)))
                .bind(pg_array::bigint(above.iter().map(|id| id.1)))
                .execute(tx.conn())
                .await?;
        }
        Backend::Postgres => {}
        Backend::Mysql => {
            for chunk in above.chunks(APPLIED_CHUNK) {
                let stmt = super::dialect::insert_applied(backend, chunk.len());
                let mut q = sqlx::query(sqlx::AssertSqlSafe(stmt));
                for (ms, seq) in chunk {
                    q = q.bind(item).bind(*ms).bind(*seq);
                }
                q.execute(tx.conn()).await?;
            }
        }
    }
    Ok(())
}

/// What a batch does with the item's low-water mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marks<'a> {
    /// redis-lua's one stream per item: raise the mark to the candidate (if any) and record
    /// the ids applied above it.
    Tracked(Option<&'a str>),
    /// redis-buckets: one stream per bucket, whose ids do not order against each other, so
    /// the item's mark is left alone (the stream is trimmed below a candidate proven from
    /// Redis alone; see `pipeline::mark`).
    Untracked,
}

/// Raises the low-water mark to `candidate` on its own (nothing to apply). Returns the mark.
pub(super) async fn advance(
    lane: &Lane,
    sql: &'static Statements,
    backend: Backend,
    item: i64,
    candidate: &str,
) -> Result<String, StoreError> {
    let mut tx = StoreTx::open(lane, sql, backend).await?;
    let mark = raise_mark(&mut tx, sql, item, Some(candidate)).await?;
    tx.commit().await?;
    Ok(format_stream_id(mark))
}

/// Locks the item row, raises its mark to `candidate` when that is higher, and forgets the
/// applied ids the mark now covers. Returns the mark in force.
pub(super) async fn raise_mark(
    tx: &mut StoreTx,
    sql: &Statements,
    item: i64,
    candidate: Option<&str>,
) -> Result<(u64, u64), StoreError> {
    let current: Option<String> = sqlx::query_scalar(sql.lock_applied)
        .bind(item)
        .fetch_optional(tx.conn())
        .await?;
    let current = stream_id(current.as_deref().unwrap_or("0-0"));
    let Some(candidate) = candidate.map(stream_id).filter(|c| *c > current) else {
        return Ok(current);
    };
    sqlx::query(sql.set_applied)
        .bind(format_stream_id(candidate))
        .bind(item)
        .execute(tx.conn())
        .await?;
    let ((old_ms, old_seq), (ms, seq)) = (as_columns(current), as_columns(candidate));
    sqlx::query(sql.delete_applied_upto)
        .bind(item)
        .bind(old_ms)
        .bind(old_seq)
        .bind(ms)
        .bind(seq)
        .execute(tx.conn())
        .await?;
    Ok(candidate)
}

/// The applied ids above `mark`, in stream order (read inside the caller's snapshot).
pub(super) async fn applied_above(
    conn: &mut sqlx::AnyConnection,
    sql: &Statements,
    item: i64,
    mark: &str,
) -> Result<Vec<String>, StoreError> {
    let (ms, seq) = as_columns(stream_id(mark));
    let rows = sqlx::query(sql.applied_above)
        .bind(item)
        .bind(ms)
        .bind(ms)
        .bind(seq)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|r| {
            let ms: i64 = r.try_get(0)?;
            let seq: i64 = r.try_get(1)?;
            Ok(format!("{ms}-{seq}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_order_numerically_and_step_down() {
        assert!(stream_id("10-0") > stream_id("9-5"));
        assert!(stream_id("10-11") > stream_id("10-2"));
        assert_eq!(stream_id("0-0"), (0, 0));
        assert_eq!(stream_id_before((10, 3)), (10, 2));
        assert_eq!(stream_id_before((10, 0)), (9, u64::MAX));
        assert_eq!(stream_id_before((0, 0)), (0, 0));
        assert_eq!(format_stream_id((5, 1)), "5-1");
        assert_eq!(as_columns((9, u64::MAX)), (9, i64::MAX));
    }
}
