//! The reference shop's side of a sale once it settled, for the oracle: the database rows read
//! between two identical Redis states (redis-lua), the dead letters, the final
//! reconciliation. Shared by a run and by `merge` (which reads the shop the shards fired at).

use super::shop_process::{self, RedisState};
use crate::inventory::RedisKind;
use crate::oracle::{Ask, Check, DeadLetterSeen, OracleView, Truth};
use crate::pipeline::reconcile::Pass;
use crate::probe::Series;
use crate::runner::{Cell, ServerSide};
use crate::services::redact_url;
use crate::store::{PoolSettings, Store};
use anyhow::Context;
use std::time::Duration;

/// Reads the server side of `cell`'s sale of `item` at `base_url` (Redis at `redis.0` under
/// key prefix `redis.1`, for redis-lua); `reconcile` is the final pass already made. The order
/// rows are checked against the clients' records (`ask`; its dead letters and restocks are
/// Redis's, read here) as the database streams them: the truth is what they showed.
#[allow(clippy::too_many_arguments)]
pub(super) async fn reference(
    http: &reqwest::Client,
    base_url: &str,
    item: i64,
    cell: &Cell,
    redis: (&str, &str),
    reconcile: Option<Pass>,
    series: &[Series],
    ask: Ask<'_>,
) -> anyhow::Result<ServerSide> {
    let redis_kind = cell.strategy.redis_kind();
    let store = Store::connect(&cell.database_url, &PoolSettings::harness(10))
        .await
        .context("connecting the oracle to the shop's database")?;
    let shop = Settling {
        http,
        base_url,
        item,
        redis: redis_kind.map(|kind| (redis.0, redis.1, kind)),
    };
    // The shop keeps expiring unpaid orders after the drain. For redis-lua an expiry touches
    // Redis first and the database later, so read the database between two identical Redis
    // states, with the queue drained: then both sides describe the same moment.
    // The rows are read once the queue is drained (a cheap question to the shop, asked every
    // 100 ms for up to SETTLE_WAIT), not again and again while it persists: at 1,000,000
    // orders one read of the rows takes seconds. A read that Redis moved under (an expiry
    // between the two sides) is made again, up to SETTLE_ATTEMPTS times; a queue that never
    // drained gets one read, its rows judged as they are and Redis not compared with them.
    let deadline = tokio::time::Instant::now() + SETTLE_WAIT;
    let mut attempt = 0;
    // `oracle_s` counts from the settle (the queue drained, or the wait for it given up).
    let mut settled_at: Option<std::time::Instant> = None;
    let (truth, after, settled, apart) = loop {
        attempt += 1;
        let drained = shop.wait_drained_until(deadline).await;
        let settled = *settled_at.get_or_insert_with(std::time::Instant::now);
        let (truth, after, same_moment) = shop.read_once(&store, ask).await?;
        if same_moment || !drained || attempt >= SETTLE_ATTEMPTS {
            break (truth, after, settled, apart(attempt, drained, same_moment));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let restocks = store
        .restock_anomalies(item)
        .await
        .context("reading the restock ledger")?;
    store.close().await;
    // Apart, restock_mismatch is not verified: its Redis half was not compared. An anomaly the
    // ledger shows on its own (an order restocked twice) is still a fact, and still reported.
    let restocks = (apart.is_none() || restocks.extra_restocks > 0).then_some(restocks);
    // The database strategies have no queue: nothing of theirs is ever dead-lettered.
    let dead = seen(after.dead_letters.unwrap_or_default());
    let mut oracle = view(&cell.database_url);
    // Redis moved under every read, or the queue was still persisting at the last (a sale
    // longer than its payment window keeps expiring orders after it ends): the rows and Redis
    // describe different moments, so a difference between them is not a finding. Said, and
    // not compared.
    let (truth, redis_stock) = match (truth, apart) {
        (Truth::Checked { db_stock, rows }, Some(why)) => {
            oracle.warning = Some(why);
            let rows = Box::new(rows.without_redis_comparison());
            (Truth::Checked { db_stock, rows }, None)
        }
        (truth, _) => (truth, after.stock),
    };
    Ok(ServerSide {
        truth,
        oracle,
        redis_stock,
        redis_restocked_orders: after.restocked,
        dead_letters: Some(dead),
        stock_seen: crate::probe::extremes(series, crate::metric::SeriesName::DbStock.name()),
        reconcile,
        stock_samples: Vec::new(),
        restocks,
        read_s: settled.elapsed().as_secs_f64(),
    })
}

/// Why the last read's rows and Redis describe different moments, if they do (`attempt`: its
/// number; `drained`: the queue drained before it; `same_moment`: drained, and Redis the same
/// before and after it): then Redis is not compared with the rows.
fn apart(attempt: u32, drained: bool, same_moment: bool) -> Option<String> {
    const NOT_COMPARED: &str = "Redis's stock and restock set were not compared with the \
                                database (redis_drift and restock_mismatch not verified)";
    if same_moment {
        None
    } else if !drained {
        Some(format!(
            "the shop's queue had not drained within {}s when the order rows were read (read \
             {attempt}; releases or expiries still flowing, or persistence behind): the database \
             lags Redis by what is in flight, so {NOT_COMPARED}",
            SETTLE_WAIT.as_secs()
        ))
    } else {
        Some(format!(
            "Redis changed during each of the {attempt} reads of the order rows (releases or \
             expiries still flowing after the sale): {NOT_COMPARED}"
        ))
    }
}

/// How many reads of the rows the settled read makes for one that Redis did not move under,
/// before it takes the last as it is.
const SETTLE_ATTEMPTS: u32 = 20;

/// How long after the drain wait the settled read still waits for the queue to drain before
/// it reads the rows anyway (the twenty reads it once made, 200 ms apart, took about as long
/// at 1,000,000 orders).
const SETTLE_WAIT: Duration = Duration::from_secs(60);

/// The reference shop being read: where it serves, its item, and its Redis (URL, key prefix,
/// kind) when its strategy keeps stock there.
struct Settling<'a> {
    http: &'a reqwest::Client,
    base_url: &'a str,
    item: i64,
    redis: Option<(&'a str, &'a str, RedisKind)>,
}

impl Settling<'_> {
    /// Redis's state of the sale (the default without Redis).
    async fn redis_state(&self) -> anyhow::Result<RedisState> {
        match self.redis {
            Some((url, prefix, kind)) => {
                shop_process::redis_state(url, prefix, self.item, kind).await
            }
            None => Ok(Default::default()),
        }
    }

    /// Whether the shop's queue is drained (always, without Redis).
    async fn drained(&self) -> bool {
        self.wait_drained_until(tokio::time::Instant::now()).await
    }

    /// Waits until the queue is drained or `deadline` passed ([`shop_process::wait_drained`]);
    /// whether it drained (always, without Redis).
    async fn wait_drained_until(&self, deadline: tokio::time::Instant) -> bool {
        let limit = deadline.saturating_duration_since(tokio::time::Instant::now());
        self.redis.is_none()
            || shop_process::wait_drained(self.http, self.base_url, self.item, limit)
                .await
                .drained
    }

    /// One read of the database, its rows checked against `ask`, between two readings of
    /// Redis: the truth, Redis after it, and whether both sides describe the same moment (the
    /// queue drained and Redis unchanged across the read).
    async fn read_once(
        &self,
        store: &Store,
        ask: Ask<'_>,
    ) -> anyhow::Result<(Truth, RedisState, bool)> {
        let started = std::time::Instant::now();
        let before = self.redis_state().await?;
        let drained = self.drained().await;
        let asked = std::time::Instant::now();
        let dead_before = seen(before.dead_letters.clone().unwrap_or_default());
        let mut check = Check::new(
            Ask {
                dead_letters: Some(&dead_before),
                redis_restocked_orders: before.restocked,
                ..ask
            },
            crate::oracle::Rows {
                timestamps: true,
                our_statuses: true,
            },
        );
        let indexed = std::time::Instant::now();
        let snapshot = store.snapshot_into(self.item, &mut check).await?;
        let streamed = std::time::Instant::now();
        let truth = match snapshot {
            Some(item) => Truth::Checked {
                db_stock: item.stock,
                rows: Box::new(check.finish()),
            },
            None => Truth::Unverified,
        };
        let finished = std::time::Instant::now();
        let after = self.redis_state().await?;
        let same_moment = drained && before == after;
        tracing::debug!(
            redis_and_drain_s = (asked - started).as_secs_f64(),
            index_s = (indexed - asked).as_secs_f64(),
            rows_s = (streamed - indexed).as_secs_f64(),
            finish_s = (finished - streamed).as_secs_f64(),
            redis_after_s = finished.elapsed().as_secs_f64(),
            drained,
            same_moment,
            "oracle: one read of the order rows, checked as they streamed"
        );
        Ok((truth, after, same_moment))
    }
}

/// What the reference shop's oracle reads and can see.
fn view(database_url: &str) -> OracleView {
    OracleView {
        source: format!("items and orders tables of {}", redact_url(database_url)),
        sees: "every order row (status, user, device, times) and the item's stock; for \
               redis-lua also Redis stock and the restock set, after a final reconciliation"
            .into(),
        blind_to: "nothing the definitions need: every acknowledged order is looked up by id"
            .into(),
        warning: None,
    }
}

/// Redis's dead letters as the oracle reads them.
fn seen(dead: Vec<crate::inventory::redis_lua::stream::DeadLetter>) -> Vec<DeadLetterSeen> {
    dead.into_iter()
        .map(|l| DeadLetterSeen {
            order_id: l.order_id,
            kind: l.kind,
            was: l.was,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_is_compared_only_with_rows_read_at_one_moment() {
        assert_eq!(apart(1, true, true), None);
        let moved = apart(20, true, false).unwrap();
        assert!(
            moved.contains("Redis changed during each of the 20 reads"),
            "{moved}"
        );
        // The queue still persisting at the last read (expiries flowing after a long sale):
        // the database lags Redis by what is in flight, not a finding either.
        let flowing = apart(14, false, false).unwrap();
        assert!(
            flowing.contains("queue had not drained within 60s"),
            "{flowing}"
        );
        for why in [moved, flowing] {
            assert!(
                why.contains("redis_drift and restock_mismatch not verified"),
                "{why}"
            );
        }
    }
}
