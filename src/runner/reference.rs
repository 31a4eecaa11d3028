//! A run against the reference shop: its child process (or K of them: [`super::shops`]), a
//! private Redis when a fault needs one, a managed read replica when the scenario wants one, the sale's set-up, the traffic with the run's faults,
//! the drain, and the oracle's read of the database and Redis.

use super::shop_process::ChildShop;
use super::shops;
use super::{control_client, faults, fire_traffic, send_setup, target_for, Cell, RunPlan, Slot};
use crate::inventory::redis_lua::conn::{is_cluster, with_cluster};
use crate::nemesis::{Owned, PrivateRedis, ShopControl};
use crate::probe::ProbeConfig;
use crate::report::{RunReport, Shop};
use crate::shop::routes::Route;
use crate::traffic::mapping::Mapping;
use crate::traffic::target::Targets;
use anyhow::Context;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

pub(super) async fn run_cell(
    plan: &RunPlan,
    cell: &Cell,
    shared_redis: &str,
    shop_exe: &Path,
    dir: &Path,
    slot: &Slot,
) -> anyhow::Result<RunReport> {
    // Named by host, pid and time: a later run removes it if this process is killed.
    let prefix = crate::services::leftovers::run_prefix();
    // A repeat (`--repeat`) keeps its own log: `shop-for-update-postgres-r2.log`.
    let repeat = plan
        .cell_of(slot.index - 1)
        .1
        .map(|r| format!("-r{r}"))
        .unwrap_or_default();
    let name = format!("{}-{}{repeat}", cell.strategy, cell.backend.as_str());
    let log = dir.join(format!("shop-{name}.log"));
    let shared_redis = &with_cluster(shared_redis, plan.scenario.shop.redis_cluster);
    if cell.strategy.uses_redis() {
        crate::inventory::redis_lua::keys::sweep_redis(shared_redis).await;
    }
    // A Redis fault gets a private Redis; the shared one is never touched. A cluster gets
    // none: its fault is `redis-failover` (the single-Redis kinds are skipped on it).
    let private = if cell.strategy.uses_redis()
        && !is_cluster(shared_redis)
        && plan
            .scenario
            .faults
            .iter()
            .any(|f| f.kind.needs_private_redis())
    {
        let r = PrivateRedis::start(
            &dir.join(format!("redis-{name}")),
            plan.scenario.nemesis.redis_persistence,
        )
        .await
        .context("starting the private Redis for the run's Redis faults")?;
        plan.say(&format!(
            "   private Redis {} (persistence {})",
            r.url(),
            r.persistence().as_str()
        ));
        Some(Arc::new(r))
    } else {
        None
    };
    let redis_url = private
        .as_ref()
        .map_or(shared_redis.to_string(), |r| r.url());
    let knobs = &plan.scenario.shop;
    let replica = super::replica::for_run(plan, cell, &name).await?;
    let replica_url = replica.as_ref().map(|r| r.url.as_str());
    let shop = Arc::new(
        ChildShop::start_with(
            shop_exe,
            cell,
            &redis_url,
            &prefix,
            knobs,
            replica_url,
            log.clone(),
        )
        .await?,
    );
    plan.say(&format!(
        "   shop {} (oversell {}, metrics {}/metrics, log {})",
        shop.base_url,
        shop.version,
        shop.base_url,
        log.display()
    ));
    if let Some(live) = &plan.live {
        live.shop(Some(&shop.base_url));
    }
    let owned = (!plan.scenario.faults.is_empty()).then(|| Owned {
        shop: Some(shop.clone() as Arc<dyn ShopControl>),
        database_url: cell.database_url.clone(),
        private_redis: private.clone(),
        redis_url: redis_url.clone(),
        // What the engine says the sale is in Redis: the faults act on exactly that.
        redis_prefixes: cell
            .strategy
            .redis_kind()
            .map(|kind| kind.prefixes(&prefix, plan.scenario.shop.buckets))
            .unwrap_or_default(),
        item: plan.scenario.item.number(),
        strategy: cell.strategy.to_string(),
        replica_url: replica.as_ref().map(|r| r.url.clone()),
    });
    let launch = shops::Launch {
        exe: shop_exe,
        cell,
        redis_url: &redis_url,
        prefix: &prefix,
        knobs,
        replica: replica_url,
    };
    let result = drive_reference(plan, &launch, &shop, &log, slot, owned).await;
    shop.stop().await;
    crate::inventory::redis_lua::keys::delete_prefix(&redis_url, &prefix).await;
    if let Some(r) = private {
        r.resume();
        r.stop();
    }
    if let Some(r) = replica {
        // Its clean stop blocks (a fast shutdown): off the runtime's threads.
        let _ = tokio::task::spawn_blocking(move || drop(r.replica)).await;
    }
    result
}

/// The run once shop 1 is up: the set-up through it, the other shops (`--shops`), the
/// traffic, the drain of every shop, and the oracle's reads through shop 1.
async fn drive_reference(
    plan: &RunPlan,
    launch: &shops::Launch<'_>,
    shop: &ChildShop,
    log: &Path,
    slot: &Slot,
    faults: Option<Owned>,
) -> anyhow::Result<RunReport> {
    let (cell, redis_url, prefix) = (launch.cell, launch.redis_url, launch.prefix);
    let s = &plan.scenario;
    let base_url = shop.base_url.as_str();
    let target = Arc::new(target_for(s, base_url, Mapping::default()));
    let http = control_client()?;
    if let Some(req) = shop.setup_request(&target) {
        send_setup(&http, &target, "target.setup", &req).await?;
    }
    // The other shops start on the set-up sale (dropped on an error: killed).
    let count = s.shop.shops.max(1);
    let rest = shops::start_rest(launch, log, count).await?;
    if !rest.is_empty() {
        plan.say(&format!(
            "   {count} shops: {} (buyer i -> shop i mod {count})",
            std::iter::once(base_url)
                .chain(rest.iter().map(|r| r.base_url.as_str()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let all: Vec<&ChildShop> = std::iter::once(shop).chain(rest.iter()).collect();
    let targets = Targets::spread(
        all.iter()
            .map(|c| Arc::new(target_for(s, &c.base_url, Mapping::default())))
            .collect(),
    )
    .unwrap_or_else(|| Targets::one(target));
    // The final reconciliation (and the spread's Redis reads) are redis-lua's.
    let is_redis = cell.strategy.reconciles();
    let fired = fire_traffic(
        plan,
        targets,
        ProbeConfig {
            database_url: Some(cell.database_url.clone()),
            foreign_database: false,
            item_id: s.item.number(),
            redis: cell
                .strategy
                .redis_kind()
                .map(|kind| (redis_url.to_string(), prefix.to_string(), kind)),
            shop_metrics_urls: all
                .iter()
                .map(|c| Route::Metrics.url(&c.base_url))
                .collect(),
            opened: Instant::now(),
        },
        slot,
        faults,
    )
    .await?;
    // Every fault ends (each is bounded) before the drain is waited for.
    let mut fired = fired;
    let applied = match fired.engine.take() {
        Some(e) => e.finish().await,
        None => Vec::new(),
    };
    if let Some(end) = faults::last_end(&applied) {
        let opened = fired.traffic.recorder.opened();
        let watch = opened + Duration::from_millis(end) + faults::WATCH_AFTER;
        tokio::time::sleep_until(watch).await;
    }
    let urls: Vec<String> = all.iter().map(|c| c.base_url.clone()).collect();
    let drain = shops::wait_all_drained(&http, &urls, s.item.number(), plan.drain_limit).await;
    let rush = super::gauges::rush_at_s(plan);
    let mut watched = fired.watch.stop(rush).await;
    let reconcile = if is_redis {
        shop.final_reconcile(&http, s.item.number()).await
    } else {
        None
    };
    let series = fired.probes.stop().await;
    for (name, gauge) in crate::watch::shop::gauges(&series, rush) {
        watched.entry(name).or_insert(gauge);
    }
    // The clients' records, taken now: the rows are checked against them as they stream.
    let measurements = fired.traffic.recorder.finish();
    let server = super::settle::reference(
        &http,
        base_url,
        s.item.number(),
        cell,
        (redis_url, prefix),
        reconcile,
        &series,
        super::ask(plan, &measurements, &fired.traffic.reading),
    )
    .await?;
    let spread = if rest.is_empty() {
        None
    } else {
        let redis = is_redis.then_some((redis_url, prefix, s.item.number()));
        Some(shops::spread(&http, &all, &plan.buyers, redis).await)
    };
    for other in &rest {
        other.stop().await;
    }
    let shop = Shop::Reference {
        strategy: cell.strategy,
        backend: cell.backend,
    };
    let mut run = super::finish_measured(
        plan,
        shop,
        fired.traffic,
        measurements,
        series,
        drain,
        server,
    );
    run.faults = faults::windows(&applied, &run);
    run.shops = spread;
    run.defect = s.shop.defect;
    run.watch = watched;
    Ok(run)
}
