//! Running a scenario and writing its report, for `run`, `compare`, `gate` and `attack`.
//!
//! A run fires at a [`Subject`]: either the reference shop, started as a child process on a free
//! loopback port for every strategy (and backend) in turn ([`shop_process`]), or a foreign shop
//! at a URL, mapped by the scenario's `[target]` table and audited by the user's own oracle
//! ([`foreign`]). Both share the traffic phase here: set up the sale, start the probes, fire the
//! seeded plan, then hand back the clients' records for the oracle.
//!
//! - `shop_process`: the reference shop's child process, drain wait, final reconciliation.
//! - `foreign`: someone else's shop: oracle read before any load, settle wait, totals oracle.

mod foreign;
mod shop_process;

use crate::inventory::Strategy;
use crate::oracle::{self, Evidence, Truth};
use crate::pipeline::reconcile::Pass;
use crate::probe::{self, ProbeConfig, Probes, Series};
use crate::rehearsal::Foreign;
use crate::report::{self, summary, Drain, RunReport, Shop};
use crate::services::{redact_url, Service};
use crate::store::{Backend, PoolSettings, Store};
use crate::traffic::attack::{self, launch_lead, GeneratorStats, GooseCrossCheck};
use crate::traffic::mapping::Mapping;
use crate::traffic::recorder::Recorder;
use crate::traffic::schedule::BuyerPlan;
use crate::traffic::target::{Prepared, Sale, Target};
use crate::traffic::Scenario;
use anyhow::Context;
use shop_process::ChildShop;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// One strategy on one backend.
#[derive(Debug, Clone)]
pub struct Cell {
    pub strategy: Strategy,
    pub backend: Backend,
    pub database_url: String,
}

/// What a run fires at.
#[derive(Debug, Clone)]
pub enum Subject {
    /// The reference shop, started as a child process for every cell in turn.
    Reference {
        cells: Vec<Cell>,
        redis_url: String,
        /// The `oversell` binary that serves the shop (this one, or the test's).
        shop_exe: PathBuf,
    },
    /// Someone else's shop at a URL (`attack --target`, `gate --target`).
    Foreign(Box<Foreign>),
}

impl RunPlan {
    /// A plan against the reference shop with the scenario's own seeded buyers.
    pub fn reference(
        scenario: Scenario,
        scenario_file: PathBuf,
        cells: Vec<Cell>,
        redis_url: String,
        shop_exe: PathBuf,
        out: PathBuf,
    ) -> Self {
        RunPlan {
            buyers: Arc::new(crate::traffic::schedule::build(&scenario)),
            scenario,
            scenario_file,
            subject: Subject::Reference {
                cells,
                redis_url,
                shop_exe,
            },
            out,
            drain_limit: Duration::from_secs(60),
            progress: false,
        }
    }
}

/// Why a run could not start or finish (exit 2: nothing was judged).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "another oversell run is using {url} right now (each run resets the sale, so one at a \
         time per database): wait for it, or give this run its own --database-url"
    )]
    DatabaseBusy { url: String },
    #[error("setting up the sale at {url} failed: {status} {body}")]
    SaleSetup {
        url: String,
        status: reqwest::StatusCode,
        body: String,
    },
}

/// Holds each database's run lock (see [`Store::try_run_lock`]) until dropped.
pub struct RunLock {
    store: Store,
    conn: Option<sqlx::pool::PoolConnection<sqlx::Any>>,
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Closing the lock's connection (not returning it to a pool) releases the lock.
        if let Some(conn) = self.conn.take() {
            drop(conn.detach());
        }
        let store = self.store.clone();
        tokio::spawn(async move { store.close().await });
    }
}

/// Locks every database the cells use; refuses to start if another run holds one.
async fn lock_databases(cells: &[Cell]) -> anyhow::Result<Vec<RunLock>> {
    let mut urls: Vec<&str> = cells.iter().map(|c| c.database_url.as_str()).collect();
    urls.sort_unstable();
    urls.dedup();
    let mut locks = Vec::new();
    for url in urls {
        let store = Store::connect(
            url,
            &PoolSettings {
                max_connections: 1,
                ..PoolSettings::default()
            },
        )
        .await?;
        match store.try_run_lock().await? {
            Some(conn) => locks.push(RunLock {
                store,
                conn: Some(conn),
            }),
            None => {
                store.close().await;
                return Err(RunError::DatabaseBusy {
                    url: redact_url(url),
                }
                .into());
            }
        }
    }
    Ok(locks)
}

/// Everything a run needs, decided before any work starts.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub scenario: Scenario,
    pub scenario_file: PathBuf,
    pub subject: Subject,
    /// The buyers to fire: `schedule::build(&scenario)`, possibly renamed from a CSV.
    pub buyers: Arc<Vec<BuyerPlan>>,
    /// Reports go to `<out>/<UTC timestamp>-<scenario>/`.
    pub out: PathBuf,
    /// Longest wait for the shop to drain (reference) or the oracle to settle (foreign).
    pub drain_limit: Duration,
    /// Print a progress line every second (stderr).
    pub progress: bool,
}

/// Runs every cell (or the foreign target) of the plan and writes the report; returns it and
/// its folder.
pub async fn execute(plan: &RunPlan) -> anyhow::Result<(report::Report, PathBuf)> {
    let s = &plan.scenario;
    let _locks = match &plan.subject {
        Subject::Reference { cells, .. } => lock_databases(cells).await?,
        Subject::Foreign(_) => Vec::new(),
    };
    let dir = report::new_dir(&plan.out, &s.name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut runs = Vec::new();
    match &plan.subject {
        Subject::Reference {
            cells,
            redis_url,
            shop_exe,
        } => {
            for cell in cells {
                let label = format!("{}/{}", cell.strategy, cell.backend.as_str());
                announce(plan, &label);
                let run = run_cell(plan, cell, redis_url, shop_exe, &dir).await?;
                runs.push(run);
            }
        }
        Subject::Foreign(f) => {
            announce(plan, &f.label());
            runs.push(foreign::run(plan, f).await?);
        }
    }
    let report = report::Report {
        schema: report::SCHEMA.into(),
        generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        scenario: report::ScenarioSummary {
            name: s.name.clone(),
            file: plan.scenario_file.display().to_string(),
            description: s.description.clone(),
            buyers: plan.buyers.len() as u32,
            spec: s.clone(),
        },
        machine: report::Machine::this(),
        sources: report::sources(),
        runs,
    };
    report::write(&dir, &report)?;
    Ok((report, dir))
}

fn announce(plan: &RunPlan, label: &str) {
    if plan.progress {
        eprintln!(
            "== {label} ({} buyers, {} units)",
            plan.buyers.len(),
            plan.scenario.item.stock
        );
    }
}

/// The shop at `base_url` as the traffic model sees it, selling the scenario's item.
fn target_for(s: &Scenario, base_url: &str, mapping: Mapping) -> Target {
    Target {
        base_url: base_url.to_string(),
        mapping,
        sale: Sale {
            item_id: s.item.id,
            stock: s.item.stock,
            purchase_limit: s.item.purchase_limit,
            name: s.item.name.clone(),
            price_cents: s.item.price_cents,
        },
    }
}

/// A client for set-up and drain requests (not the load itself).
fn control_client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?)
}

/// What the traffic phase produced; the probes are still sampling.
struct Fired {
    traffic: Traffic,
    probes: Probes,
}

/// The clients' side of a run: their records, goose's cross-check, the generator's cost.
struct Traffic {
    goose: Vec<GooseCrossCheck>,
    generator: GeneratorStats,
    recorder: Arc<Recorder>,
}

/// The server side of a run once it settled, for the oracle.
struct ServerSide {
    truth: Truth,
    /// Where `truth` came from.
    truth_source: String,
    /// redis-lua: Redis stock and the orders Redis restocked.
    redis_stock: Option<i64>,
    redis_restocked_orders: Option<i64>,
    /// Lowest and highest database stock the probe saw.
    stock_seen: Option<(i64, i64)>,
    /// redis-lua: the final reconciliation pass.
    reconcile: Option<Pass>,
}

/// The one way a run ends, for the reference shop and a foreign one alike: the oracle audits
/// the server side against the clients' records, and the run's report section is built.
fn finish(
    plan: &RunPlan,
    shop: Shop,
    traffic: Traffic,
    series: Vec<Series>,
    drain: Drain,
    server: ServerSide,
) -> RunReport {
    let s = &plan.scenario;
    let measurements = traffic.recorder.finish();
    let findings = oracle::audit(&Evidence {
        initial_stock: s.item.stock,
        purchase_limit: s.item.purchase_limit,
        truth: server.truth,
        truth_source: server.truth_source,
        redis_stock: server.redis_stock,
        reconcile_residual: server.reconcile.as_ref().map(|p| p.residual),
        stock_seen: server.stock_seen,
        redis_restocked_orders: server.redis_restocked_orders,
        clients: &measurements,
    });
    if plan.progress {
        eprintln!("   {}", findings.verdict);
    }
    summary::build(summary::RunInputs {
        shop,
        scenario: s.name.clone(),
        buyers: plan.buyers.len() as u32,
        findings,
        measurements,
        series,
        generator: traffic.generator,
        drain,
        reconcile: server.reconcile,
        goose: traffic.goose,
    })
}

/// Starts the probes (`probe.opened` is replaced by the sale's opening), fires the plan, and
/// returns once the last buyer is done.
async fn fire_traffic(
    plan: &RunPlan,
    target: Arc<Target>,
    probe: ProbeConfig,
    label: &str,
) -> anyhow::Result<Fired> {
    let buyers = plan.buyers.clone();
    let recorder = Arc::new(Recorder::new(Instant::now() + launch_lead(buyers.len())));
    let probes = probe::start(ProbeConfig {
        opened: recorder.opened(),
        ..probe
    })
    .await;
    let ticker = plan
        .progress
        .then(|| spawn_progress(label.to_string(), recorder.clone(), buyers.len()));
    let fired = attack::fire(
        buyers,
        target,
        recorder.clone(),
        Duration::from_millis(plan.scenario.client.timeout_ms),
    )
    .await;
    if let Some(t) = ticker {
        t.abort();
    }
    match fired {
        Ok((goose, generator)) => Ok(Fired {
            traffic: Traffic {
                goose,
                generator,
                recorder,
            },
            probes,
        }),
        Err(e) => {
            probes.stop().await;
            Err(e.context("firing the traffic"))
        }
    }
}

async fn run_cell(
    plan: &RunPlan,
    cell: &Cell,
    redis_url: &str,
    shop_exe: &PathBuf,
    dir: &Path,
) -> anyhow::Result<RunReport> {
    let prefix = format!("oversell-run-{}", uuid::Uuid::now_v7().simple());
    let log = dir.join(format!(
        "shop-{}-{}.log",
        cell.strategy,
        cell.backend.as_str()
    ));
    let knobs = &plan.scenario.shop;
    let shop = ChildShop::start(shop_exe, cell, redis_url, &prefix, knobs, log).await?;
    let result = drive_reference(plan, cell, redis_url, &shop, &prefix).await;
    shop.stop().await;
    crate::inventory::redis_lua::keys::delete_prefix(redis_url, &prefix).await;
    result
}

async fn drive_reference(
    plan: &RunPlan,
    cell: &Cell,
    redis_url: &str,
    shop: &ChildShop,
    prefix: &str,
) -> anyhow::Result<RunReport> {
    let s = &plan.scenario;
    let base_url = shop.base_url.as_str();
    let target = Arc::new(target_for(s, base_url, Mapping::default()));
    let http = control_client()?;
    if let Some(req) = shop.setup_request(&target) {
        send_setup(&http, &target, &req).await?;
    }
    let is_redis = cell.strategy == Strategy::RedisLua;
    let label = format!("{}/{}", cell.strategy, cell.backend.as_str());
    let fired = fire_traffic(
        plan,
        target,
        ProbeConfig {
            database_url: Some(cell.database_url.clone()),
            item_id: s.item.id,
            redis: Some((redis_url.to_string(), prefix.to_string())).filter(|_| is_redis),
            shop_metrics_url: Some(format!("{base_url}/metrics")),
            opened: Instant::now(),
        },
        &label,
    )
    .await?;
    let drain = shop_process::wait_drained(&http, base_url, s.item.id, plan.drain_limit).await;
    let reconcile = if is_redis {
        shop.final_reconcile(&http, s.item.id).await
    } else {
        None
    };
    let series = fired.probes.stop().await;
    let store = Store::connect(&cell.database_url, &PoolSettings::default())
        .await
        .context("connecting the oracle to the shop's database")?;
    // The shop keeps expiring unpaid orders after the drain. For redis-lua an expiry touches
    // Redis first and the database later, so read the database between two identical Redis
    // states, with the queue drained: then both sides describe the same moment.
    let mut attempt = 0;
    let (truth, redis_stock, restocked) = loop {
        attempt += 1;
        let before = if is_redis {
            shop_process::redis_state(redis_url, prefix, s.item.id).await?
        } else {
            Default::default()
        };
        let drained = !is_redis
            || shop_process::wait_drained(&http, base_url, s.item.id, Duration::ZERO)
                .await
                .drained;
        let truth = match store.snapshot(s.item.id).await? {
            Some((item, orders)) => Truth::Orders {
                db_stock: item.stock,
                orders,
            },
            None => Truth::Unverified,
        };
        let after = if is_redis {
            shop_process::redis_state(redis_url, prefix, s.item.id).await?
        } else {
            Default::default()
        };
        if (drained && before == after) || attempt >= 20 {
            break (truth, after.stock, after.restocked);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    store.close().await;
    let server = ServerSide {
        truth,
        truth_source: format!(
            "items and orders tables of {}",
            redact_url(&cell.database_url)
        ),
        redis_stock,
        redis_restocked_orders: restocked,
        stock_seen: crate::probe::extremes(&series, "db_stock"),
        reconcile,
    };
    let shop = Shop::Reference {
        strategy: cell.strategy,
        backend: cell.backend,
    };
    Ok(finish(plan, shop, fired.traffic, series, drain, server))
}

/// Sends the mapping's set-up request, if it has one.
async fn setup_sale(http: &reqwest::Client, target: &Target) -> anyhow::Result<()> {
    let Some(req) = target.setup_request() else {
        return Ok(());
    };
    send_setup(http, target, &req).await
}

/// Sends one set-up request; an answer other than 2xx is [`RunError::SaleSetup`].
async fn send_setup(http: &reqwest::Client, target: &Target, req: &Prepared) -> anyhow::Result<()> {
    let url = format!("{}{}", target.base_url.trim_end_matches('/'), req.path);
    let resp = req
        .apply(http.request(req.reqwest_method(), &url))
        .send()
        .await
        .map_err(|e| Service::Shop.unreachable_error(&url, &e))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        return Err(RunError::SaleSetup { url, status, body }.into());
    }
    Ok(())
}

fn spawn_progress(label: String, rec: Arc<Recorder>, total: usize) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let p = rec.progress();
            let t = Instant::now()
                .saturating_duration_since(rec.opened())
                .as_secs_f64();
            eprintln!(
                "   [{label}] {t:5.1}s arrived {}/{total} done {} | orders {} created {} errors {}",
                p.arrived, p.finished, p.orders, p.created, p.errors
            );
        }
    })
}
