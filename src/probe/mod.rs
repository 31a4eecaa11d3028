//! Server-side truth sampled every second while a run is in progress: database QPS from the
//! server's own counters, Redis ops/s from `INFO stats`, remaining stock, and the shop's
//! `/metrics`. Each series says where its numbers came from.
//!
//! Every sample is also published as it is taken: as a gauge of the live metrics
//! ([`crate::live::probe_gauges`]) and in [`Latest`], which progress lines read.

mod db;
pub mod scrape;

pub use crate::metric::SeriesName;

use crate::live;
use crate::store::redis_conn::RedisConn;
use crate::telemetry::shop_metrics;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A time series sampled once a second.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Series {
    pub name: String,
    pub unit: String,
    /// Where the numbers come from (counter, query, metric).
    pub source: String,
    /// `(seconds since the sale opened, value)`.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    fn new(name: &str, unit: &str, source: impl Into<String>) -> Self {
        Series {
            name: name.into(),
            unit: unit.into(),
            source: source.into(),
            points: Vec::new(),
        }
    }

    /// Largest value.
    pub fn peak(&self) -> f64 {
        self.points.iter().map(|p| p.1).fold(0.0, f64::max)
    }

    /// Mean over the samples taken while the sale was running (`t` in `0..=until`).
    pub fn mean_until(&self, until: f64) -> f64 {
        let pts: Vec<f64> = self
            .points
            .iter()
            .filter(|p| p.0 >= 0.0 && p.0 <= until + 1.0)
            .map(|p| p.1)
            .collect();
        if pts.is_empty() {
            0.0
        } else {
            pts.iter().sum::<f64>() / pts.len() as f64
        }
    }
}

/// Lowest and highest value of a named series, if it has points.
pub fn extremes(series: &[Series], name: &str) -> Option<(i64, i64)> {
    let s = series
        .iter()
        .find(|x| x.name == name && !x.points.is_empty())?;
    let vals = s.points.iter().map(|p| p.1 as i64);
    Some((vals.clone().min()?, vals.max()?))
}

/// What to sample.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// The shop's database (its name selects the counters).
    pub database_url: Option<String>,
    /// The shop under test lets the probe create what it reads on that database (the
    /// `pg_stat_statements` view, when the server preloads it): the reference shop's, which
    /// the run owns. Off (someone else's database, through `--oracle-sql`): only its server
    /// counters are read and nothing is created on it.
    pub may_create_on_database: bool,
    /// How to read the item's stock and units sold from that database, as the shop under
    /// test keeps them (the reference shop's statement; none for a foreign shop).
    pub db_stock: Option<StockStatement>,
    /// The shop's Redis and how its stock is kept there (the reference shop's Redis
    /// strategies; none otherwise).
    pub redis: Option<RedisStock>,
    /// Every reference shop's `/metrics` URL (none for a foreign shop). With several shops
    /// (`--shops K`) each is scraped and the pages merged ([`merge_pages`]).
    pub shop_metrics_urls: Vec<String>,
    pub opened: Instant,
}

/// A statement reading `(stock, sold)` of one item from the shop's database.
#[derive(Debug, Clone)]
pub struct StockStatement {
    /// The statement, with one parameter: the item.
    pub sql: &'static str,
    pub item: i64,
    /// What its stock and sold figures are, for the series' `source`.
    pub stock_source: &'static str,
    pub sold_source: &'static str,
}

/// The item's stock in the shop's Redis: the server to read, and how.
#[derive(Clone)]
pub struct RedisStock {
    pub url: String,
    pub read: std::sync::Arc<dyn ReadStock>,
}

impl std::fmt::Debug for RedisStock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStock")
            .field("url", &crate::services::redact_url(&self.url))
            .field("source", &self.read.source())
            .finish()
    }
}

/// How a shop under test keeps an item's stock in Redis: implemented by the shop's side that
/// knows its key layout, so the probe knows none.
pub trait ReadStock: Send + Sync {
    /// The stock now (`None`: a read failed, or the sale is not warm) and how many commands
    /// the read sent (taken off the server's ops/s, which counts them).
    fn read<'a>(&'a self, conn: &'a mut RedisConn) -> BoxFuture<'a, (Option<i64>, u64)>;
    /// What the figure is, for the series' `source`.
    fn source(&self) -> &'static str;
}

/// Running samplers.
pub struct Probes {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Vec<Series>>,
    latest: Latest,
}

/// The latest sample of every series, shared with whoever watches the run.
#[derive(Debug, Clone, Default)]
pub struct Latest(Arc<Mutex<BTreeMap<&'static str, f64>>>);

impl Latest {
    /// The latest value of the series `name`, if it was sampled.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    }

    /// Sets the latest value of the series `name`.
    #[cfg(test)]
    pub fn set(&self, name: &'static str, value: f64) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name, value);
    }

    /// Publishes the samples taken at `t`.
    fn publish(&self, t: f64, series: &BTreeMap<&'static str, Series>) {
        let mut latest = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for (name, s) in series {
            let Some(&(_, v)) = s.points.last().filter(|p| p.0 == t) else {
                continue;
            };
            latest.insert(name, v);
            live::probe_sample(name, &s.unit, v);
        }
    }
}

/// Starts sampling every second.
pub async fn start(config: ProbeConfig) -> Probes {
    let (stop, mut rx) = watch::channel(false);
    let latest = Latest::default();
    let published = latest.clone();
    let task = tokio::spawn(async move {
        let mut db = match &config.database_url {
            Some(url) => {
                db::DbProbe::connect(url, config.db_stock.clone(), config.may_create_on_database)
                    .await
            }
            None => None,
        };
        let mut redis = match &config.redis {
            Some(stock) => RedisProbe::connect(stock).await,
            None => None,
        };
        let http = crate::guard::http::client(Duration::from_millis(800)).ok();
        let mut series: BTreeMap<&'static str, Series> = BTreeMap::new();
        let mut last_metrics: Option<BTreeMap<String, f64>> = None;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // One last reading when told to stop: the run's end is then on every series (a
        // backlog that drained, a residual back at 0), not up to a second before it.
        let mut last = false;
        while !last {
            tokio::select! {
                _ = rx.changed() => last = true,
                _ = tick.tick() => {}
            }
            let t = Instant::now().duration_since(config.opened).as_secs_f64()
                - config
                    .opened
                    .saturating_duration_since(Instant::now())
                    .as_secs_f64();
            if let Some(db) = db.as_mut() {
                db.sample(t, &mut series).await;
            }
            if let Some(r) = redis.as_mut() {
                r.sample(t, &mut series).await;
            }
            if let (false, Some(http)) = (config.shop_metrics_urls.is_empty(), &http) {
                let pages = futures_util::future::join_all(
                    config
                        .shop_metrics_urls
                        .iter()
                        .map(|url| scrape::scrape(http, url)),
                )
                .await;
                if let Some(now) = merge_pages(pages) {
                    shop_series(t, &now, last_metrics.as_ref(), &mut series);
                    last_metrics = Some(now);
                }
            }
            published.publish(t, &series);
        }
        series.into_values().collect()
    });
    Probes { stop, task, latest }
}

impl Probes {
    /// The latest samples, updated every second until [`Probes::stop`].
    pub fn latest(&self) -> Latest {
        self.latest.clone()
    }

    /// Takes one last sample, stops, and returns the series.
    pub async fn stop(self) -> Vec<Series> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

/// Adds a sample of `name`, in its usual unit.
fn push(
    series: &mut BTreeMap<&'static str, Series>,
    name: SeriesName,
    source: &str,
    t: f64,
    v: f64,
) {
    push_in(series, name, name.unit(), source, t, v)
}

/// Adds a sample of `name`, in `unit`.
fn push_in(
    series: &mut BTreeMap<&'static str, Series>,
    name: SeriesName,
    unit: &str,
    source: &str,
    t: f64,
    v: f64,
) {
    series
        .entry(name.name())
        .or_insert_with(|| Series::new(name.name(), unit, source))
        .points
        .push((t, v));
}

struct RedisProbe {
    conn: RedisConn,
    stock: std::sync::Arc<dyn ReadStock>,
    /// Commands the last stock read sent (taken off the next ops/s figure).
    own: u64,
    last: Option<(Instant, u64)>,
}

impl RedisProbe {
    async fn connect(stock: &RedisStock) -> Option<Self> {
        Some(RedisProbe {
            conn: RedisConn::open(&stock.url).await.ok()?,
            stock: stock.read.clone(),
            own: 0,
            last: None,
        })
    }

    async fn sample(&mut self, t: f64, series: &mut BTreeMap<&'static str, Series>) {
        let mut info = redis::cmd("INFO");
        info.arg("stats");
        // A cluster: the sum over its masters (each answers for itself).
        if let Ok(nodes) = self.conn.on_each_master(&info).await {
            let total = nodes
                .into_iter()
                .map(|(_, info)| {
                    let info: String = redis::from_redis_value(info.ok()?).ok()?;
                    info.lines()
                        .find_map(|l| l.strip_prefix("total_commands_processed:"))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                })
                .sum::<Option<u64>>();
            if let Some(total) = total {
                let now = Instant::now();
                if let Some((at, prev)) = self.last {
                    let secs = now.duration_since(at).as_secs_f64().max(1e-3);
                    // Minus our own commands per sample (INFO and the stock reads).
                    let own = 1 + self.own;
                    let ops = (total.saturating_sub(prev).saturating_sub(own)) as f64 / secs;
                    push(
                        series,
                        SeriesName::RedisOps,
                        "Redis INFO stats total_commands_processed (server-wide; a cluster: summed over its masters), delta per second",
                        t,
                        ops,
                    );
                }
                self.last = Some((now, total));
            }
        }
        let (stock, sent) = self.stock.read(&mut self.conn).await;
        self.own = sent;
        if let Some(s) = stock {
            push(
                series,
                SeriesName::RedisStock,
                self.stock.source(),
                t,
                s as f64,
            );
        }
    }
}

/// Gauges every shop reads from the state they share (the item's stream and consumer group,
/// the last reconciliation pass): merged by the value farthest from zero, not summed.
const SHARED_GAUGES: [&str; 3] = [
    shop_metrics::STREAM_LAG,
    shop_metrics::STREAM_PENDING,
    shop_metrics::RECONCILE_RESIDUAL,
];

/// The shops' scraped pages as one: counters and per-shop gauges (pool in use) summed, the
/// [`SHARED_GAUGES`] taken from the shop whose value is farthest from zero. A shop that did
/// not answer this second (killed by a fault, restarting) is left out; `None` when none did.
fn merge_pages(pages: Vec<Option<BTreeMap<String, f64>>>) -> Option<BTreeMap<String, f64>> {
    let mut merged: Option<BTreeMap<String, f64>> = None;
    for page in pages.into_iter().flatten() {
        let Some(m) = merged.as_mut() else {
            merged = Some(page);
            continue;
        };
        for (k, v) in page {
            let shared = SHARED_GAUGES.contains(&scrape::name_of(&k));
            let slot = m.entry(k).or_insert(if shared { v } else { 0.0 });
            if !shared {
                *slot += v;
            } else if v.abs() > slot.abs() {
                *slot = v;
            }
        }
    }
    merged
}

fn shop_series(
    t: f64,
    now: &BTreeMap<String, f64>,
    prev: Option<&BTreeMap<String, f64>>,
    series: &mut BTreeMap<&'static str, Series>,
) {
    const SRC: &str = "shop /metrics";
    let delta = |name: &str, label: Option<&str>| {
        prev.map(|p| (scrape::sum(now, name, label) - scrape::sum(p, name, label)).max(0.0))
    };
    let source = |s: SeriesName| format!("{SRC} {}", s.shop_metric().unwrap_or_default());
    let prededuct = SeriesName::PredeductAttempts
        .shop_metric()
        .unwrap_or_default();
    if let (Some(ok), Some(all)) = (
        delta(prededuct, Some("result=\"success\"")),
        delta(prededuct, None),
    ) {
        if all > 0.0 {
            let s = SeriesName::PredeductSuccessRate;
            push(series, s, &source(s), t, ok / all);
        }
        let s = SeriesName::PredeductAttempts;
        push(series, s, &source(s), t, all);
    }
    let s = SeriesName::Restocks;
    if let Some(r) = delta(s.shop_metric().unwrap_or_default(), None) {
        push(series, s, &source(s), t, r);
    }
    // Only a shop that counts them gets the series (conflicts: optimistic).
    for s in [SeriesName::CasRetries, SeriesName::PoolWait] {
        let metric = s.shop_metric().unwrap_or_default();
        if let Some(r) = delta(metric, None).filter(|_| scrape::has(now, metric)) {
            push(series, s, &source(s), t, r);
        }
    }
    for s in [
        SeriesName::ReconcileResidual,
        SeriesName::StreamLag,
        SeriesName::StreamPending,
        SeriesName::PoolInUse,
        SeriesName::PoolWaiting,
    ] {
        let metric = s.shop_metric().unwrap_or_default();
        if scrape::has(now, metric) {
            push(series, s, &source(s), t, scrape::sum(now, metric, None));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(lines: &[(&str, f64)]) -> Option<BTreeMap<String, f64>> {
        Some(lines.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    #[test]
    fn several_shops_pages_sum_their_counters_and_keep_one_value_of_shared_gauges() {
        let merged = merge_pages(vec![
            page(&[
                ("oversell_prededuct_total{result=\"success\"}", 10.0),
                ("oversell_db_pool_in_use", 3.0),
                ("oversell_stream_lag{item=\"1\"}", 40.0),
                ("oversell_reconcile_residual{item=\"1\"}", 0.0),
            ]),
            None,
            page(&[
                ("oversell_prededuct_total{result=\"success\"}", 5.0),
                ("oversell_prededuct_total{result=\"sold_out\"}", 7.0),
                ("oversell_db_pool_in_use", 2.0),
                ("oversell_stream_lag{item=\"1\"}", 38.0),
                ("oversell_reconcile_residual{item=\"1\"}", -2.0),
            ]),
        ])
        .unwrap();
        assert_eq!(scrape::sum(&merged, "oversell_prededuct_total", None), 22.0);
        assert_eq!(scrape::sum(&merged, "oversell_db_pool_in_use", None), 5.0);
        assert_eq!(scrape::sum(&merged, "oversell_stream_lag", None), 40.0);
        assert_eq!(
            scrape::sum(&merged, "oversell_reconcile_residual", None),
            -2.0
        );
        assert!(merge_pages(vec![None, None]).is_none());
    }
}
