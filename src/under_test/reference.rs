//! A run against the reference shop: its child process (or K of them: [`shops`]), a
//! private Redis when a fault needs one, a managed read replica when the scenario wants one, the sale's set-up, the traffic with the run's faults,
//! the drain, and the oracle's read of the database and Redis.

mod faults;
mod gauges;
mod layout;
mod lock;
mod merge;
mod replica;
mod settle;
mod shop_process;
mod shops;

pub(crate) use shop_process::ChildShop;

use crate::inventory::Strategy;
use crate::nemesis::BoxFuture;
use crate::nemesis::{Owned, PrivateRedis, ShopControl};
use crate::probe::ProbeConfig;
use crate::report::{RunReport, Shop};
use crate::runner::merge::{MergePlan, Merged};
use crate::runner::subject::{Servers, ShopUnderTest, Subject};
use crate::runner::{control_client, fire_traffic, send_setup, target_for, Cell, RunPlan, Slot};
use crate::shard::file::{ShardFile, ShardShop};
use crate::shop::routes::Route;
use crate::store::redis_conn::{is_cluster, with_cluster};
use crate::traffic::mapping::Mapping;
use crate::traffic::target::Targets;
use crate::traffic::target::{Prepared, Target};
use crate::traffic::Scenario;
use anyhow::Context;
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The reference shop on one or more cells (strategy and backend), a child process started for
/// each in turn.
#[derive(Debug, Clone)]
struct ReferenceShop {
    cells: Vec<Cell>,
    redis_url: String,
    /// The `oversell` binary that serves the shop (this one, or the test's).
    shop_exe: PathBuf,
}

impl Subject {
    /// The reference shop on `cells`, served by this binary ([`crate::runner::shop_exe`]).
    pub fn reference(cells: Vec<Cell>, redis_url: String) -> anyhow::Result<Subject> {
        Ok(Subject::reference_served_by(
            cells,
            redis_url,
            crate::runner::shop_exe()?,
        ))
    }

    /// The reference shop on `cells`, served by `shop_exe`.
    pub fn reference_served_by(cells: Vec<Cell>, redis_url: String, shop_exe: PathBuf) -> Subject {
        Subject::new(ReferenceShop {
            cells,
            redis_url,
            shop_exe,
        })
    }
}

impl RunPlan {
    /// A plan against the reference shop (served by `shop_exe`) with the scenario's own
    /// seeded buyers.
    pub fn reference(
        scenario: Scenario,
        scenario_file: PathBuf,
        cells: Vec<Cell>,
        redis_url: String,
        shop_exe: PathBuf,
        out: PathBuf,
    ) -> Self {
        let subject = Subject::reference_served_by(cells, redis_url, shop_exe);
        RunPlan::new(scenario, scenario_file, subject, out)
    }
}

impl ShopUnderTest for ReferenceShop {
    fn shops(&self) -> usize {
        self.cells.len()
    }

    fn label(&self, i: usize) -> String {
        let c = &self.cells[i];
        format!("{}/{}", c.strategy, c.backend.as_str())
    }

    fn short_name(&self, i: usize) -> String {
        self.cells[i].strategy.as_str().to_string()
    }

    fn strategy(&self, i: usize) -> Option<Strategy> {
        Some(self.cells[i].strategy)
    }

    fn describe(&self) -> String {
        let strategies: Vec<&str> = self.cells.iter().map(|c| c.strategy.as_str()).collect();
        format!("the reference shop ({})", strategies.join(", "))
    }

    fn remote_host(&self) -> Option<String> {
        None
    }

    fn check(&self, s: &Scenario) -> Result<(), String> {
        s.item.reference_check().map_err(|e| e.to_string())
    }

    fn lock(&self) -> BoxFuture<'_, anyhow::Result<Vec<crate::runner::Held>>> {
        Box::pin(lock::lock_databases(&self.cells))
    }

    fn servers(&self) -> Servers {
        Servers {
            databases: self.cells.iter().map(|c| c.database_url.clone()).collect(),
            redis: self
                .cells
                .iter()
                .any(|c| c.strategy.uses_redis())
                .then(|| self.redis_url.clone()),
        }
    }

    fn watch_database(&self) -> Option<String> {
        self.cells.first().map(|c| c.database_url.clone())
    }

    fn allow_remote(&self) -> bool {
        false
    }

    fn sources(&self) -> BTreeMap<String, String> {
        crate::report::sources(
            "the final database rows (and Redis stock for redis-lua) after the queue drained, \
             compared with the clients' records",
        )
    }

    fn payment_window(&self, s: &Scenario) -> Option<Duration> {
        // The shop is started with the scenario's `[shop] payment_timeout`.
        Some(s.shop.payment_timeout)
    }

    fn levers(&self, s: &Scenario) -> crate::runner::Levers {
        // Its knobs are the scenario's `[shop]`, its every request is mapped, it counts its
        // retries, and the oracle reads its rows and its Redis itself.
        crate::runner::Levers {
            knobs: true,
            pay: true,
            cancel: true,
            payment_window: s.mapping().payment_window,
            limit_in_setup: true,
            buyer_in_order: true,
            answers_not_found: true,
            counts_retries: true,
            audited_whole: true,
        }
    }

    fn run<'a>(
        &'a self,
        plan: &'a RunPlan,
        i: usize,
        dir: &'a Path,
        slot: &'a Slot,
    ) -> BoxFuture<'a, anyhow::Result<RunReport>> {
        Box::pin(run_cell(
            plan,
            &self.cells[i],
            &self.redis_url,
            &self.shop_exe,
            dir,
            slot,
        ))
    }

    fn shard_mapping(&self, s: &Scenario) -> anyhow::Result<Mapping> {
        s.item.reference_check()?;
        Ok(Mapping::default())
    }

    fn shard_setup(&self, target: &Target, admin_token: Option<&str>) -> Vec<(String, Prepared)> {
        shop_process::reset_request(target, admin_token)
            .map(|r| ("target.setup".to_string(), r))
            .into_iter()
            .collect()
    }

    fn item_url(&self, base_url: &str, item: i64) -> Option<String> {
        Some(Route::Item.url_with(base_url, item))
    }

    fn record(&self, base_url: &str, file: &mut ShardFile) {
        let cell = &self.cells[0];
        file.shop = Some(ShardShop {
            url: base_url.to_string(),
            strategy: cell.strategy,
            backend: cell.backend,
        });
    }

    fn merge<'a>(
        &'a self,
        merged: Merged<'a>,
    ) -> BoxFuture<'a, anyhow::Result<(crate::report::Report, PathBuf)>> {
        let subject = Subject::new(self.clone());
        Box::pin(merge::merge(merged, &self.cells[0], subject))
    }
}

/// The reference shop a shard file says its shard fired at (`run`/`gate --shard`), on the
/// database `merge` was given for its backend, and the URL it recorded; `None`: the shards
/// fired at another kind of shop.
pub(super) fn recorded(
    file: &ShardFile,
    plan: &MergePlan,
) -> anyhow::Result<Option<(Subject, String)>> {
    let Some(shop) = &file.shop else {
        return Ok(None);
    };
    let database_url = plan
        .databases
        .iter()
        .find(|(b, _)| *b == shop.backend)
        .map(|(_, u)| u.clone())
        .with_context(|| format!("no database URL for {}", shop.backend.as_str()))?;
    let cell = Cell {
        strategy: shop.strategy,
        backend: shop.backend,
        database_url,
    };
    let subject = Subject::reference(vec![cell], plan.redis_url.clone())?;
    Ok(Some((subject, shop.url.clone())))
}

/// A Redis fault gets a private Redis (started in `dir`); the shared one is never touched. A
/// cluster gets none: its fault is `redis-failover` (the single-Redis kinds are skipped on it).
async fn private_redis(
    plan: &RunPlan,
    cell: &Cell,
    shared_redis: &str,
    dir: &Path,
) -> anyhow::Result<Option<Arc<PrivateRedis>>> {
    let s = &plan.scenario;
    let wanted = cell.strategy.uses_redis()
        && !is_cluster(shared_redis)
        && s.faults.iter().any(|f| f.kind.needs_private_redis());
    if !wanted {
        return Ok(None);
    }
    let r = PrivateRedis::start(dir, s.nemesis.redis_persistence)
        .await
        .context("starting the private Redis for the run's Redis faults")?;
    plan.say(&format!(
        "   private Redis {} (persistence {})",
        r.url(),
        r.persistence().as_str()
    ));
    Ok(Some(Arc::new(r)))
}

async fn run_cell(
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
    let private =
        private_redis(plan, cell, shared_redis, &dir.join(format!("redis-{name}"))).await?;
    let redis_url = private
        .as_ref()
        .map_or(shared_redis.to_string(), |r| r.url());
    let knobs = &plan.scenario.shop;
    let replica = replica::for_run(plan, cell, &name).await?;
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
    let url = &shop.base_url;
    let (version, workers, log_path) = (&shop.version, shop.workers, log.display());
    plan.say(&format!(
        "   shop {url} (oversell {version}, runtime workers: {workers}, metrics {url}/metrics, \
         log {log_path})"
    ));
    if let Some(live) = &plan.live {
        live.shop(Some(&shop.base_url));
    }
    let launch = shops::Launch {
        exe: shop_exe,
        cell,
        redis_url: &redis_url,
        prefix: &prefix,
        knobs,
        replica: replica_url,
    };
    let owned = owned(plan, &launch, &shop, &private);
    let result = drive_reference(plan, &launch, &shop, &log, slot, owned).await;
    shop.stop().await;
    crate::inventory::redis_lua::keys::delete_prefix(&redis_url, &prefix).await;
    stop_helpers(private, replica).await;
    result
}

/// What the run's faults may act on (`None`: the scenario has none): the child shop, its
/// database, the private Redis, and the sale in Redis as the strategy's engine lays it out.
fn owned(
    plan: &RunPlan,
    launch: &shops::Launch<'_>,
    shop: &Arc<ChildShop>,
    private: &Option<Arc<PrivateRedis>>,
) -> Option<Owned> {
    let cell = launch.cell;
    (!plan.scenario.faults.is_empty()).then(|| Owned {
        shop: Some(shop.clone() as Arc<dyn ShopControl>),
        database_url: cell.database_url.clone(),
        private_redis: private.clone(),
        redis_url: launch.redis_url.to_string(),
        redis_sale: cell.strategy.redis_kind().map(|kind| {
            layout::sale(
                launch.prefix,
                plan.scenario.item.number(),
                kind,
                plan.scenario.shop.buckets,
            )
        }),
        strategy: cell.strategy.to_string(),
        replica_url: launch.replica.map(str::to_string),
    })
}

/// Stops what a run started beside its shop: the private Redis (resumed first, if a fault
/// left it paused) and the managed read replica.
async fn stop_helpers(private: Option<Arc<PrivateRedis>>, replica: Option<replica::RunReplica>) {
    if let Some(r) = private {
        r.resume();
        r.stop();
    }
    if let Some(r) = replica {
        // Its clean stop blocks (a fast shutdown): off the runtime's threads.
        let _ = tokio::task::spawn_blocking(move || drop(r.replica)).await;
    }
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
    let rest = start_others(plan, launch, log, base_url).await?;
    let all: Vec<&ChildShop> = std::iter::once(shop).chain(rest.iter()).collect();
    let targets = Targets::spread(
        all.iter()
            .map(|c| Arc::new(target_for(s, &c.base_url, Mapping::default())))
            .collect(),
    )
    .unwrap_or_else(|| Targets::one(target));
    // The final reconciliation (and the spread's Redis reads) are redis-lua's.
    let is_redis = cell.strategy.reconciles();
    let probes = probes(launch, s, &all);
    let mut fired = fire_traffic(plan, targets, probes, slot, faults).await?;
    let applied = faults_over(&mut fired).await;
    let urls: Vec<String> = all.iter().map(|c| c.base_url.clone()).collect();
    let drain = shops::wait_all_drained(&http, &urls, s.item.number(), plan.drain_limit).await;
    let rush = crate::runner::gauges::rush_at_s(plan);
    let mut watched = fired.watch.stop(rush).await;
    let reconcile = if is_redis {
        shop.final_reconcile(&http, s.item.number()).await
    } else {
        None
    };
    let series = fired.probes.stop().await;
    for (name, gauge) in gauges::gauges(&series, rush) {
        watched.entry(name).or_insert(gauge);
    }
    // The clients' records, taken now: the rows are checked against them as they stream.
    let measurements = fired.traffic.recorder.finish();
    let spread = if rest.is_empty() {
        None
    } else {
        let redis = is_redis.then_some((redis_url, prefix, s.item.number()));
        Some(shops::spread(&http, &all, &plan.buyers, redis).await)
    };
    // A shop with no queue keeps nothing the oracle must ask it for: it is stopped before the
    // rows are read, so its expiry sweeper cannot release an order the audit saw holding
    // (a one-second payment window ends within the read). The rows the report proves its
    // findings on are then the rows the run leaves. A queue's shop answers "drained" to the
    // settle, which reads between two identical Redis states instead.
    if cell.strategy.redis_kind().is_none() {
        for one in &all {
            one.stop().await;
        }
    }
    let server = settle::reference(
        &http,
        base_url,
        s.item.number(),
        cell,
        (redis_url, prefix),
        reconcile,
        &series,
        crate::runner::ask(plan, &measurements, &fired.traffic.reading),
    )
    .await?;
    for other in &rest {
        other.stop().await;
    }
    let shop = Shop::strategy_on(cell.strategy, cell.backend);
    let mut run = crate::runner::finish_measured(
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

/// Shops 2 to K (`--shops K`) started on the set-up sale, and said; none without `--shops`.
async fn start_others(
    plan: &RunPlan,
    launch: &shops::Launch<'_>,
    log: &Path,
    first: &str,
) -> anyhow::Result<Vec<ChildShop>> {
    let count = plan.scenario.shop.shops.max(1);
    let rest = shops::start_rest(launch, log, count).await?;
    if !rest.is_empty() {
        let urls: Vec<&str> = std::iter::once(first)
            .chain(rest.iter().map(|r| r.base_url.as_str()))
            .collect();
        plan.say(&format!(
            "   {count} shops: {} (buyer i -> shop i mod {count})",
            urls.join(", ")
        ));
    }
    Ok(rest)
}

/// What the probes read of the reference shop: its database, its Redis (for the strategies
/// that keep stock there), and every shop's `/metrics`.
fn probes(launch: &shops::Launch<'_>, s: &Scenario, all: &[&ChildShop]) -> ProbeConfig {
    let cell = launch.cell;
    ProbeConfig {
        database_url: Some(cell.database_url.clone()),
        may_create_on_database: true,
        db_stock: Some(layout::statement(cell.backend, s.item.number())),
        redis: cell
            .strategy
            .redis_kind()
            .map(|kind| layout::redis(launch.redis_url, launch.prefix, s.item.number(), kind)),
        shop_metrics_urls: all
            .iter()
            .map(|c| Route::Metrics.url(&c.base_url))
            .collect(),
        opened: Instant::now(),
    }
}

/// Every fault ended (each is bounded), and the shop watched for `WATCH_AFTER` past the last,
/// before the drain is waited for; returns what was applied.
async fn faults_over(fired: &mut crate::runner::Fired) -> Vec<crate::nemesis::Applied> {
    let applied = match fired.engine.take() {
        Some(e) => e.finish().await,
        None => Vec::new(),
    };
    if let Some(end) = faults::last_end(&applied) {
        let opened = fired.traffic.recorder.opened();
        let watch = opened + Duration::from_millis(end) + faults::WATCH_AFTER;
        tokio::time::sleep_until(watch).await;
    }
    applied
}
