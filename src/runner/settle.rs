//! The reference shop's side of a sale once it settled, for the oracle: the database rows read
//! between two identical Redis states (redis-lua), the dead letters, the final
//! reconciliation. Shared by a run and by `merge` (which reads the shop the shards fired at).

use super::{shop_process, Cell, ServerSide};
use crate::oracle::{Ask, Check, DeadLetterSeen, OracleView, Truth};
use crate::pipeline::reconcile::Pass;
use crate::probe::Series;
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
    let started = std::time::Instant::now();
    let (redis_url, prefix) = redis;
    let redis_kind = cell.strategy.redis_kind();
    let is_redis = redis_kind.is_some();
    let store = Store::connect(&cell.database_url, &PoolSettings::harness(10))
        .await
        .context("connecting the oracle to the shop's database")?;
    // The shop keeps expiring unpaid orders after the drain. For redis-lua an expiry touches
    // Redis first and the database later, so read the database between two identical Redis
    // states, with the queue drained: then both sides describe the same moment.
    let mut attempt = 0;
    let (truth, redis_stock, restocked, dead_letters) = loop {
        attempt += 1;
        let before = match redis_kind {
            Some(kind) => shop_process::redis_state(redis_url, prefix, item, kind).await?,
            None => Default::default(),
        };
        let drained = !is_redis
            || shop_process::wait_drained(http, base_url, item, Duration::ZERO)
                .await
                .drained;
        let dead_before = seen(before.dead_letters.clone().unwrap_or_default());
        let mut check = Check::new(
            Ask {
                dead_letters: Some(&dead_before),
                redis_restocked_orders: before.restocked,
                ..ask
            },
            crate::oracle::Rows::Reference,
        );
        let truth = match store.snapshot_into(item, &mut check).await? {
            Some(item) => Truth::Checked {
                db_stock: item.stock,
                rows: Box::new(check.finish()),
            },
            None => Truth::Unverified,
        };
        let after = match redis_kind {
            Some(kind) => shop_process::redis_state(redis_url, prefix, item, kind).await?,
            None => Default::default(),
        };
        if (drained && before == after) || attempt >= 20 {
            // The database strategies have no queue: nothing of theirs is ever dead-lettered.
            let dead = seen(after.dead_letters.unwrap_or_default());
            break (truth, after.stock, after.restocked, Some(dead));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    store.close().await;
    let server = ServerSide {
        truth,
        oracle: OracleView {
            source: format!(
                "items and orders tables of {}",
                redact_url(&cell.database_url)
            ),
            sees: "every order row (status, user, device, times) and the item's stock; for \
                   redis-lua also Redis stock and the restock set, after a final reconciliation"
                .into(),
            blind_to: "nothing the definitions need: every acknowledged order is looked up by id"
                .into(),
            warning: None,
        },
        redis_stock,
        redis_restocked_orders: restocked,
        dead_letters,
        stock_seen: crate::probe::extremes(series, crate::metric::SeriesName::DbStock.name()),
        reconcile,
        stock_samples: Vec::new(),
        read_s: started.elapsed().as_secs_f64(),
    };
    Ok(server)
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
