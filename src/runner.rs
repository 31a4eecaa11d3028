//! `oversell run` / `compare`: for each strategy (and backend), start the reference shop as a
//! child process on a free loopback port, set up the sale, fire the scenario, wait for the shop
//! to drain, run the oracle, stop the shop, and report.
//!
//! The shop is a child process, not a task in this process: the load generator's CPU and
//! memory figures (getrusage of this process) then measure the generator alone, the shop gets
//! its own runtime and cannot be slowed by the generator's tasks sharing its scheduler, and a
//! shop that crashes cannot take the measurements with it.

use crate::cli::ShopArgs;
use crate::inventory::Strategy;
use crate::oracle::{self, Evidence, Truth};
use crate::pipeline::reconcile::Pass;
use crate::probe::{self, ProbeConfig};
use crate::report::{self, summary, Drain, RunReport};
use crate::services::{redact_url, Service};
use crate::store::{Backend, PoolSettings, Store};
use crate::traffic::attack::{self, launch_lead};
use crate::traffic::recorder::Recorder;
use crate::traffic::schedule::{self, BuyerPlan};
use crate::traffic::target::{Mapping, Sale, Target};
use crate::traffic::Scenario;
use anyhow::{bail, Context};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// One strategy on one backend.
#[derive(Debug, Clone)]
pub struct Cell {
    pub strategy: Strategy,
    pub backend: Backend,
    pub database_url: String,
}

/// Everything a `run`/`compare` needs, decided before any work starts.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub scenario: Scenario,
    pub scenario_file: PathBuf,
    pub cells: Vec<Cell>,
    pub redis_url: String,
    /// The `oversell` binary that serves the shop (this one, or the test's).
    pub shop_exe: PathBuf,
    /// Reports go to `<out>/<UTC timestamp>-<scenario>/`.
    pub out: PathBuf,
    pub drain_limit: Duration,
    /// Print a progress line every second (stderr).
    pub progress: bool,
}

/// The shop flags a scenario asks for.
pub fn shop_args(s: &Scenario, prefix: &str) -> ShopArgs {
    let mut a = ShopArgs::defaults();
    a.redis_prefix = prefix.to_string();
    let o = &s.shop;
    macro_rules! set {
        ($($f:ident),*) => { $( if let Some(v) = o.$f { a.$f = v; } )* };
    }
    set!(
        pool_size,
        acquire_timeout_ms,
        lock_timeout_ms,
        naive_gap_ms,
        work_ms,
        optimistic_retries,
        optimistic_backoff_ms,
        payment_timeout_s,
        reconcile_interval_s,
        reconcile_alert_threshold,
        rate_limit,
        ip_rate_limit,
        ip_burst,
        ip_unit_cap,
        page_cache_ms
    );
    a
}

/// A reference shop running as a child process.
struct ChildShop {
    child: Child,
    base_url: String,
    // Held open: the shop's stdout must not hit a closed pipe.
    _stdout: BufReader<tokio::process::ChildStdout>,
}

impl ChildShop {
    async fn start(
        exe: &PathBuf,
        cell: &Cell,
        redis_url: &str,
        args: &ShopArgs,
        log: PathBuf,
    ) -> anyhow::Result<ChildShop> {
        let strategy = cell.strategy;
        let log_file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = Command::new(exe)
            .arg("serve")
            .args(["--strategy", strategy.as_str(), "--listen", "127.0.0.1:0"])
            .args([
                "--database-url",
                &cell.database_url,
                "--redis-url",
                redis_url,
            ])
            .args(args.to_args())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the shop ({})", exe.display()))?;
        let mut stdout = BufReader::new(child.stdout.take().context("shop stdout")?);
        let mut line = String::new();
        let read = tokio::time::timeout(Duration::from_secs(60), stdout.read_line(&mut line)).await;
        let base_url = line
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or_default()
            .to_string();
        if !matches!(read, Ok(Ok(n)) if n > 0) || !base_url.starts_with("http://") {
            let _ = child.kill().await;
            let status = child.wait().await.ok().and_then(|s| s.code());
            let why = std::fs::read_to_string(&log).unwrap_or_default();
            let last = why
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .unwrap_or("no error printed");
            if status == Some(3) {
                bail!("{}", last.trim_start_matches("error: "));
            }
            bail!("the {strategy} shop did not start (exit {status:?}): {last}");
        }
        Ok(ChildShop {
            child,
            base_url,
            _stdout: stdout,
        })
    }

    /// SIGTERM, then up to 10 s for a graceful stop, then SIGKILL.
    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            // SAFETY: sending a signal to our own child's pid.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// Runs every cell of the plan and writes the report; returns it and its folder.
pub async fn execute(plan: &RunPlan) -> anyhow::Result<(report::Report, PathBuf)> {
    let s = &plan.scenario;
    let buyers = Arc::new(schedule::build(s));
    let dir = report::new_dir(&plan.out, &s.name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut runs = Vec::new();
    for cell in &plan.cells {
        if plan.progress {
            eprintln!(
                "== {} on {} ({} buyers, {} units)",
                cell.strategy,
                cell.backend.as_str(),
                buyers.len(),
                s.item.stock
            );
        }
        let run = run_cell(plan, cell, buyers.clone(), &dir).await?;
        if plan.progress {
            eprintln!("   {}", run.findings.verdict);
        }
        runs.push(run);
    }
    let report = report::Report {
        schema: report::SCHEMA.into(),
        generated_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        scenario: report::ScenarioSummary {
            name: s.name.clone(),
            file: plan.scenario_file.display().to_string(),
            description: s.description.clone(),
            buyers: s.total_buyers(),
            initial_stock: s.item.stock,
            purchase_limit: s.item.purchase_limit,
            spec: s.clone(),
        },
        machine: report::Machine::this(),
        sources: report::sources(),
        runs,
    };
    report::write(&dir, &report)?;
    Ok((report, dir))
}

async fn run_cell(
    plan: &RunPlan,
    cell: &Cell,
    buyers: Arc<Vec<BuyerPlan>>,
    dir: &std::path::Path,
) -> anyhow::Result<RunReport> {
    let s = &plan.scenario;
    let prefix = format!("oversell-run-{}", uuid::Uuid::now_v7().simple());
    let args = shop_args(s, &prefix);
    let log = dir.join(format!(
        "shop-{}-{}.log",
        cell.strategy,
        cell.backend.as_str()
    ));
    let shop = ChildShop::start(&plan.shop_exe, cell, &plan.redis_url, &args, log).await?;
    let result = drive(plan, cell, &shop.base_url, &prefix, buyers).await;
    shop.stop().await;
    delete_redis_prefix(&plan.redis_url, &prefix).await;
    result
}

async fn drive(
    plan: &RunPlan,
    cell: &Cell,
    base_url: &str,
    prefix: &str,
    buyers: Arc<Vec<BuyerPlan>>,
) -> anyhow::Result<RunReport> {
    let s = &plan.scenario;
    let target = Arc::new(Target {
        base_url: base_url.to_string(),
        mapping: Mapping::default(),
        sale: Sale {
            item_id: s.item.id,
            stock: s.item.stock,
            purchase_limit: s.item.purchase_limit,
            name: s.item.name.clone(),
            price_cents: s.item.price_cents,
        },
    });
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    setup_sale(&http, &target).await?;
    let is_redis = cell.strategy == Strategy::RedisLua;
    let recorder = Arc::new(Recorder::new(Instant::now() + launch_lead(buyers.len())));
    let probes = probe::start(ProbeConfig {
        database_url: Some(cell.database_url.clone()),
        item_id: s.item.id,
        redis: Some((plan.redis_url.clone(), prefix.to_string())).filter(|_| is_redis),
        shop_metrics_url: Some(format!("{base_url}/metrics")),
        opened: recorder.opened(),
    })
    .await;
    let ticker = plan
        .progress
        .then(|| spawn_progress(cell, recorder.clone(), buyers.len()));
    let fired = attack::fire(
        buyers.clone(),
        target.clone(),
        recorder.clone(),
        Duration::from_millis(s.client.timeout_ms),
    )
    .await;
    if let Some(t) = ticker {
        t.abort();
    }
    let (goose, generator) = match fired {
        Ok(v) => v,
        Err(e) => {
            probes.stop().await;
            return Err(e.context("firing the traffic"));
        }
    };
    let drain = wait_drained(&http, base_url, s.item.id, plan.drain_limit).await;
    let reconcile = if is_redis {
        final_reconcile(&http, base_url, s.item.id).await
    } else {
        None
    };
    let series = probes.stop().await;
    let measurements = recorder.finish();
    let store = Store::connect(&cell.database_url, &PoolSettings::default())
        .await
        .context("connecting the oracle to the shop's database")?;
    let truth = match store.item(s.item.id).await? {
        Some(item) => Truth::Orders {
            db_stock: item.stock,
            orders: store.orders_for_item(s.item.id).await?,
        },
        None => Truth::Unverified,
    };
    store.close().await;
    let redis_stock = if is_redis {
        redis_stock(&plan.redis_url, prefix, s.item.id).await?
    } else {
        None
    };
    let findings = oracle::audit(&Evidence {
        initial_stock: s.item.stock,
        purchase_limit: s.item.purchase_limit,
        truth,
        truth_source: format!(
            "items and orders tables of {}",
            redact_url(&cell.database_url)
        ),
        redis_stock,
        reconcile_residual: reconcile.as_ref().map(|p| p.residual),
        clients: &measurements,
    });
    Ok(summary::build(summary::RunInputs {
        strategy: cell.strategy.to_string(),
        backend: cell.backend.as_str().to_string(),
        target: "reference shop".into(),
        scenario: s.name.clone(),
        buyers: s.total_buyers(),
        initial_stock: s.item.stock,
        findings,
        measurements,
        series,
        generator,
        drain,
        reconcile,
        goose,
    }))
}

async fn setup_sale(http: &reqwest::Client, target: &Target) -> anyhow::Result<()> {
    let Some(req) = target.setup_request() else {
        return Ok(());
    };
    let url = format!("{}{}", target.base_url.trim_end_matches('/'), req.path);
    let resp = req
        .apply(http.request(req.reqwest_method(), &url))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!(Service::Shop.unreachable(&url, &e)))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        bail!("setting up the sale at {url} failed: {status} {body}");
    }
    Ok(())
}

/// Polls the shop's audit until its queue is drained, up to `limit`.
async fn wait_drained(http: &reqwest::Client, base: &str, item: i64, limit: Duration) -> Drain {
    let start = Instant::now();
    let url = format!("{base}/api/items/{item}/audit");
    loop {
        let drained = match http.get(&url).send().await {
            Ok(r) => r
                .json::<serde_json::Value>()
                .await
                .ok()
                .and_then(|v| v["queue_drained"].as_bool())
                .unwrap_or(false),
            Err(_) => false,
        };
        let waited = start.elapsed();
        if drained || waited >= limit {
            return Drain {
                drained,
                waited_ms: waited.as_millis() as u64,
                limit_ms: limit.as_millis() as u64,
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn final_reconcile(http: &reqwest::Client, base: &str, item: i64) -> Option<Pass> {
    #[derive(serde::Deserialize)]
    struct Wire {
        item_id: i64,
        db_stock: i64,
        redis_stock: i64,
        expected_redis_stock: i64,
        residual: i64,
        corrected: bool,
        alerted: bool,
    }
    let w: Wire = http
        .post(format!("{base}/api/items/{item}/reconcile"))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    Some(Pass {
        item_id: w.item_id,
        db_stock: w.db_stock,
        redis_stock: w.redis_stock,
        expected_redis_stock: w.expected_redis_stock,
        residual: w.residual,
        corrected: w.corrected,
        alerted: w.alerted,
        source: "primary".into(),
    })
}

async fn redis_stock(url: &str, prefix: &str, item: i64) -> anyhow::Result<Option<i64>> {
    let client = redis::Client::open(url)?;
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .map_err(|e| anyhow::anyhow!(Service::Redis.unreachable(url, &e)))?;
    Ok(redis::cmd("GET")
        .arg(format!("{{{prefix}:{item}}}:stock"))
        .query_async(&mut conn)
        .await?)
}

async fn delete_redis_prefix(url: &str, prefix: &str) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return;
    };
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{{{prefix}:*"))
        .query_async(&mut conn)
        .await
        .unwrap_or_default();
    if !keys.is_empty() {
        let _: redis::RedisResult<()> = redis::cmd("DEL").arg(keys).query_async(&mut conn).await;
    }
}

fn spawn_progress(cell: &Cell, rec: Arc<Recorder>, total: usize) -> tokio::task::JoinHandle<()> {
    let label = format!("{}/{}", cell.strategy, cell.backend.as_str());
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
