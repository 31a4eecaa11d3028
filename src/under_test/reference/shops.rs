//! Several reference shops in one run (`--shops K`, the scenario's `[shop] shops`): K child
//! processes on the one database, Redis and key prefix, each on its own port, each running its
//! own persistence consumer in the item's one consumer group (its name carries the process id).
//!
//! Shop 1 starts first and sets the sale up; the others start once it has (so they find the
//! warmed sale, or the item's row, at their own start and run its background tasks from the
//! first moment). Buyer i goes to shop i mod K ([`Targets`]). The drain waits for every shop
//! (each counts only its own purchases in flight); the final reconciliation and the oracle's
//! reads go through shop 1, since the state they read is shared. Expiry sweeps run in every
//! shop: a release moves an order out of `pending_payment` at most once (a conditional update
//! in the database, the restock set in Redis), so K sweepers expire each order once.

use super::shop_process::{self, ChildShop};
use crate::inventory::redis_lua::{ItemKeys, GROUP};
use crate::probe::scrape::{self, scrape};
use crate::report::shops::{ShopShare, ShopSpread, SOURCE};
use crate::report::Drain;
use crate::runner::Cell;
use crate::shop::routes::Route;
use crate::shop::ShopKnobs;
use crate::telemetry::shop_metrics;
use crate::traffic::schedule::Schedule;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What starting another shop of the run needs.
pub(super) struct Launch<'a> {
    pub exe: &'a Path,
    pub cell: &'a Cell,
    pub redis_url: &'a str,
    pub prefix: &'a str,
    pub knobs: &'a ShopKnobs,
    /// The run's read replica, for reconciliation snapshots.
    pub replica: Option<&'a str>,
}

/// The log of shop `k` (1-based) of a run whose first shop logs to `first`:
/// `shop-redis-lua-postgres.log`, then `shop-redis-lua-postgres-shop2.log`, ...
pub(super) fn log_of(first: &Path, k: u32) -> PathBuf {
    if k <= 1 {
        return first.to_path_buf();
    }
    let stem = first
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "shop".into());
    first.with_file_name(format!("{stem}-shop{k}.log"))
}

/// Starts shops 2 to `count`, one after the other (each reads the set-up sale at its start).
pub(super) async fn start_rest(
    launch: &Launch<'_>,
    first_log: &Path,
    count: u32,
) -> anyhow::Result<Vec<ChildShop>> {
    let mut rest = Vec::new();
    for k in 2..=count {
        let shop = ChildShop::start_with(
            launch.exe,
            launch.cell,
            launch.redis_url,
            launch.prefix,
            launch.knobs,
            launch.replica,
            log_of(first_log, k),
        )
        .await
        .map_err(|e| e.context(format!("starting shop {k} of {count}")))?;
        rest.push(shop);
    }
    Ok(rest)
}

/// Waits for every shop's queue to drain (each polled on its own, all within one `limit`).
pub(super) async fn wait_all_drained(
    http: &reqwest::Client,
    urls: &[String],
    item: i64,
    limit: Duration,
) -> Drain {
    let mut waits = tokio::task::JoinSet::new();
    for url in urls {
        let (http, url) = (http.clone(), url.clone());
        waits.spawn(async move { shop_process::wait_drained(&http, &url, item, limit).await });
    }
    let mut all = Drain {
        drained: true,
        waited_ms: 0,
        limit_ms: limit.as_millis() as u64,
        settle: None,
    };
    while let Some(d) = waits.join_next().await {
        let d = d.unwrap_or(Drain {
            drained: false,
            waited_ms: all.limit_ms,
            limit_ms: all.limit_ms,
            settle: None,
        });
        all.drained &= d.drained;
        all.waited_ms = all.waited_ms.max(d.waited_ms);
    }
    all
}

/// Reads each shop's counters (and, for redis-lua, the item's consumer group): the report's
/// [`ShopSpread`].
pub(super) async fn spread(
    http: &reqwest::Client,
    shops: &[&ChildShop],
    buyers: &Schedule,
    redis: Option<(&str, &str, i64)>,
) -> ShopSpread {
    let k = shops.len();
    let group = match redis {
        Some((url, prefix, item)) => group_consumers(url, &ItemKeys::new(prefix, item).events)
            .await
            .ok(),
        None => None,
    };
    let mut out = Vec::new();
    for (i, shop) in shops.iter().enumerate() {
        let metrics = scrape(http, &Route::Metrics.url(&shop.base_url)).await;
        let pid = shop.pid().await;
        let consumer = match (&group, pid) {
            (Some(names), Some(pid)) => {
                let mine = format!("shop-{pid}-");
                names.iter().find(|n| n.starts_with(&mine)).cloned()
            }
            _ => None,
        };
        out.push(ShopShare {
            shop: i as u32 + 1,
            url: shop.base_url.clone(),
            buyers: buyers.indexes().filter(|b| b % k == i).count() as u64,
            requests_answered: metrics.as_ref().map(buyer_requests),
            persisted_events: redis
                .and(metrics.as_ref())
                .map(|m| scrape::sum(m, shop_metrics::PERSISTED_EVENTS, None) as u64),
            consumer,
        });
    }
    ShopSpread {
        count: k as u32,
        rule: format!("buyer i -> shop i mod {k}"),
        source: SOURCE.into(),
        shops: out,
        group_consumers: group.map(|g| g.len() as u64),
    }
}

/// The names of the consumers in `stream`'s group.
async fn group_consumers(url: &str, stream: &str) -> anyhow::Result<Vec<String>> {
    let client = redis::Client::open(url)?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let info: redis::streams::StreamInfoConsumersReply = redis::cmd("XINFO")
        .arg("CONSUMERS")
        .arg(stream)
        .arg(GROUP)
        .query_async(&mut conn)
        .await?;
    Ok(info.consumers.into_iter().map(|c| c.name).collect())
}

/// Requests on the buyers' routes ([`Route::is_buyers`]: the product page, orders, payments
/// and cancellations; not the harness's set-up, audit, reconciliation or metrics).
fn buyer_requests(m: &BTreeMap<String, f64>) -> u64 {
    m.iter()
        .filter(|(k, _)| scrape::name_of(k) == shop_metrics::HTTP_REQUESTS)
        .filter(|(k, _)| {
            let route = scrape::label(k, "route").and_then(Route::of_path);
            let method = scrape::label(k, "method").unwrap_or("");
            route.is_some_and(|r| r.is_buyers(method))
        })
        .map(|(_, v)| *v as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_buyers_routes_count_as_answered_requests() {
        let page = [
            (
                r#"oversell_http_requests_total{route="/api/orders",method="POST",status="201"}"#,
                7.0,
            ),
            (
                r#"oversell_http_requests_total{route="/api/orders/{id}/pay",method="POST",status="200"}"#,
                3.0,
            ),
            (
                r#"oversell_http_requests_total{route="/api/items/{id}",method="GET",status="200"}"#,
                2.0,
            ),
            (
                r#"oversell_http_requests_total{route="/api/items/{id}",method="PUT",status="200"}"#,
                1.0,
            ),
            (
                r#"oversell_http_requests_total{route="/api/items/{id}/audit",method="GET",status="200"}"#,
                40.0,
            ),
            (r#"oversell_persisted_events_total"#, 9.0),
        ];
        let m: BTreeMap<String, f64> = page.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        assert_eq!(buyer_requests(&m), 12);
        assert_eq!(
            scrape::sum(&m, "oversell_persisted_events_total", None),
            9.0
        );
    }

    #[test]
    fn the_first_shop_keeps_the_usual_log_name() {
        let first = Path::new("/r/shop-redis-lua-postgres-r2.log");
        assert_eq!(log_of(first, 1), first);
        assert_eq!(
            log_of(first, 3),
            Path::new("/r/shop-redis-lua-postgres-r2-shop3.log")
        );
    }
}
