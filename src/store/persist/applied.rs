//! The ids a batch applied above the item's low-water mark, kept as runs of consecutive ids in
//! `applied_runs` (migrations `0006_applied_runs.sql` on PostgreSQL, `0005` on MySQL), and read
//! back as ids by reconciliation.

use super::{as_columns, stream_id, PersistEvent};
use crate::store::dialect::{self, Statements};
use crate::store::{pg_array, Backend, StoreError, StoreTx};
use sqlx::Row;

/// Records the batch's stream ids above `mark` in `applied_runs`, as [`runs`].
pub(super) async fn record_applied(
    tx: &mut StoreTx,
    backend: Backend,
    item: i64,
    events: &[PersistEvent],
    mark: (u64, u64),
) -> Result<(), StoreError> {
    let above = runs(
        events
            .iter()
            .map(|e| stream_id(&e.stream_id))
            .filter(|id| *id > mark),
    );
    if above.is_empty() {
        return Ok(());
    }
    match backend {
        Backend::Postgres => {
            sqlx::query(dialect::PG_INSERT_APPLIED)
                .bind(item)
                .bind(pg_array::bigint(above.iter().map(|r| r.ms)))
                .bind(pg_array::bigint(above.iter().map(|r| r.from)))
                .bind(pg_array::bigint(above.iter().map(|r| r.to)))
                .execute(tx.conn())
                .await?;
        }
        Backend::Mysql => {
            for chunk in above.chunks(APPLIED_CHUNK) {
                let stmt = dialect::insert_applied(backend, chunk.len());
                let mut q = sqlx::query(sqlx::AssertSqlSafe(stmt));
                for r in chunk {
                    q = q.bind(item).bind(r.ms).bind(r.from).bind(r.to);
                }
                q.execute(tx.conn()).await?;
            }
        }
    }
    Ok(())
}

/// Stream ids `ms-from` to `ms-to`, every one of them applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    ms: i64,
    from: i64,
    to: i64,
}

/// `ids` as runs of consecutive sequence numbers within one millisecond, in stream order, each
/// id once: exactly the ids given, no more (two ids of different milliseconds never share a
/// run: the stream may hold others between them). At a sale's rate a millisecond holds many
/// entries, so a batch is a few runs rather than one row per id.
fn runs(ids: impl Iterator<Item = (u64, u64)>) -> Vec<Run> {
    let mut ids: Vec<(i64, i64)> = ids.map(as_columns).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut out: Vec<Run> = Vec::new();
    for (ms, seq) in ids {
        match out.last_mut() {
            Some(r) if r.ms == ms && r.to + 1 == seq => r.to = seq,
            _ => out.push(Run {
                ms,
                from: seq,
                to: seq,
            }),
        }
    }
    out
}

/// The applied ids above `mark`, in stream order, each once (read inside the caller's snapshot).
pub(crate) async fn applied_above(
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
    let mut ids = Vec::new();
    for r in &rows {
        let run = Run {
            ms: r.try_get(0)?,
            from: r.try_get(1)?,
            to: r.try_get(2)?,
        };
        // A run that straddles the mark: only its ids above it.
        let from = if run.ms == ms {
            run.from.max(seq.saturating_add(1))
        } else {
            run.from
        };
        ids.extend((from..=run.to).map(|s| (run.ms, s)));
    }
    // Runs recorded by different batches may overlap (a replay): each id once.
    ids.sort_unstable();
    ids.dedup();
    Ok(ids.into_iter().map(|(ms, s)| format!("{ms}-{s}")).collect())
}

/// Applied runs per multi-row statement (4 placeholders each).
const APPLIED_CHUNK: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ms: i64, from: i64, to: i64) -> Run {
        Run { ms, from, to }
    }

    #[test]
    fn runs_are_consecutive_ids_of_one_millisecond_each_once() {
        let ids = [
            (7, 2),
            (5, 0),
            (5, 1),
            (5, 1),
            (5, 3),
            (6, 0),
            (7, 0),
            (7, 1),
        ];
        assert_eq!(
            runs(ids.into_iter()),
            [run(5, 0, 1), run(5, 3, 3), run(6, 0, 0), run(7, 0, 2)]
        );
        assert!(runs(std::iter::empty()).is_empty());
        assert_eq!(
            runs([(9, u64::MAX)].into_iter()),
            [run(9, i64::MAX, i64::MAX)]
        );
    }
}
