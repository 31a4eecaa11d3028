//! The reference shop: an HTTP service selling one hot item through the chosen strategy.
//!
//! [`Application::build`] binds (port 0 works) and starts the background pipeline;
//! [`Application::run_until_stopped`] serves until the shutdown future resolves. [`app`] builds
//! the router from state so tests can drive it without a socket. [`ShopKnobs`] (in `knobs`)
//! are its settings, turned into a [`ShopConfig`] by [`ShopKnobs::config`].
//!
//! - `handlers`: the public routes (product page, orders, audit, metrics).
//! - `admin`: set-up and reset, rewarm, reconcile, behind `--admin-token`.
//! - `client_ip`: the order's address, from `X-Forwarded-For` only behind `--trusted-proxy`.
//! - `rewarm`: the watch that rebuilds a redis-lua sale Redis lost.
//! - `routes`: the one route table the router is built from.
//! - `error`: the error body and [`error::ErrorCode`], the shop's machine codes.
//! - [`host`]: on loopback without an admin token, only loopback `Host` names are answered
//!   (DNS rebinding).
//! - [`listener`]: the accept loop: a connection cap, a header-read and an idle timeout;
//!   `body`: a JSON route's body read within the body timeout.
//! - [`serve_config`]: [`ServeConfig`], everything `serve` is told as one document (its flags
//!   build one; `serve --config` reads one whole, as a run's child shop gets it).
//! - [`ready`]: the readiness channel a child shop reports on: its address, version and
//!   workers, or why it stopped.
//! - [`workers`]: how many worker threads its runtime gets (`--worker-threads`).

mod admin;
mod body;
pub mod client_ip;
pub mod error;
mod handlers;
pub mod host;
pub mod knobs;
pub mod listener;
pub mod ready;
pub mod rewarm;
pub mod routes;
pub mod serve_config;
pub mod telemetry;
pub mod workers;

use crate::inventory::{Inventory, RedisSettings, Settings, Strategy};
use crate::pipeline::{self, PipelineSettings};
use crate::store::{PoolSettings, Store};
use crate::telemetry::shop_metrics;
use anyhow::Context;
use axum::Router;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use client_ip::TrustedProxies;
pub use knobs::{KnobError, ShopKnobs, MAX_SHOPS};
use rewarm::RewarmWatch;
pub use serve_config::ServeConfig;

/// Everything `oversell serve` needs.
#[derive(Debug, Clone)]
pub struct ShopConfig {
    pub listen: SocketAddr,
    pub strategy: Strategy,
    pub database_url: String,
    pub pool: PoolSettings,
    pub inventory: Settings,
    /// Required for `redis-lua`, unused by the others.
    pub redis: RedisSettings,
    pub pipeline: PipelineSettings,
    /// Replica for reconciliation reads (redis-lua).
    pub replica_database_url: Option<String>,
    /// How long the product page cache may serve a stock figure (redis-lua).
    pub page_cache_ttl: Duration,
    /// Peers whose `X-Forwarded-For` names the client (a proxy in front, or our traffic
    /// model); from anyone else the header is ignored.
    pub trusted_proxies: TrustedProxies,
    /// The admin routes need `Authorization: Bearer <this>` when set.
    pub admin_token: Option<String>,
    /// redis-lua: how often to check that Redis still holds the sales (`None`: only when a
    /// purchase finds one missing).
    pub rewarm_check: Option<Duration>,
    /// The connection cap and time-outs ([`listener::Limits`]).
    pub limits: listener::Limits,
}

/// Shared state of the handlers, behind one `Arc`: every request clones the state (the
/// `State` extractor, the order's task), and a clone of the fields was ~20 reference counts.
#[derive(Clone)]
pub struct AppState(Arc<SharedState>);

impl std::ops::Deref for AppState {
    type Target = SharedState;

    fn deref(&self) -> &SharedState {
        &self.0
    }
}

/// What [`AppState`] shares.
pub struct SharedState {
    pub inventory: Inventory,
    pub pipeline: PipelineSettings,
    pub page_cache: Arc<handlers::PageCache>,
    pub trusted_proxies: Arc<TrustedProxies>,
    pub admin_token: Option<Arc<str>>,
    pub rewarm: RewarmWatch,
    /// Only loopback `Host` names are answered ([`host`]: on loopback without a token).
    pub loopback_hosts_only: bool,
    /// How long a JSON route's body may take to arrive ([`listener::Limits::body_timeout`]).
    pub body_timeout: Duration,
}

/// The router: the route table ([`routes::Route`]), the 404 fallback and the metrics layer.
pub fn app(state: AppState) -> Router {
    let guard = state.loopback_hosts_only;
    let router = routes::router()
        .fallback(handlers::not_found)
        .layer(axum::middleware::from_fn(routes::observe))
        .with_state(state);
    if guard {
        router.layer(axum::middleware::from_fn(host::loopback_only))
    } else {
        router
    }
}

/// A bound, ready shop.
pub struct Application {
    listener: TcpListener,
    limits: listener::Limits,
    state: AppState,
    shutdown_tx: watch::Sender<bool>,
    background: tokio::task::JoinSet<()>,
}

impl Application {
    /// Connects to the database (and Redis for a strategy that decides there), migrates, binds,
    /// and starts the background pipeline.
    pub async fn build(config: ShopConfig) -> anyhow::Result<Application> {
        if let Some(defect) = config.inventory.defect {
            defect.check(config.strategy)?;
        }
        let store = Store::connect(&config.database_url, &config.pool).await?;
        let inventory = Inventory::connect(
            config.strategy,
            store,
            &config.redis,
            config.inventory.clone(),
        )
        .await?;
        let mut pipeline = config.pipeline.clone();
        if let Some(url) = &config.replica_database_url {
            let replica = Store::connect_read_only(url, &ShopKnobs::default().pool())
                .await
                .context("connecting to the reconciliation replica")?;
            pipeline.reconcile.replica = Some(replica);
        }
        let listener = TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let mut background =
            pipeline::spawn(inventory.clone(), pipeline.clone(), shutdown_rx.clone()).await;
        let rewarm = RewarmWatch::default();
        if inventory.redis().is_some() {
            background.spawn(rewarm.clone().run(
                inventory.clone(),
                config.rewarm_check,
                shutdown_rx,
            ));
        }
        telemetry::handle();
        if let Some(defect) = config.inventory.defect {
            tracing::warn!(%defect, strategy = %config.strategy, "{}", defect.warning(config.strategy));
            metrics::gauge!(shop_metrics::DEFECT_ACTIVE, "defect" => defect.as_str()).set(1.0);
        }
        Ok(Application {
            listener,
            limits: config.limits,
            state: AppState(Arc::new(SharedState {
                inventory,
                pipeline,
                page_cache: Arc::new(handlers::PageCache::new(config.page_cache_ttl)),
                trusted_proxies: Arc::new(config.trusted_proxies),
                loopback_hosts_only: host::needed(config.listen, config.admin_token.is_some()),
                body_timeout: config.limits.body_timeout,
                admin_token: config.admin_token.map(Arc::from),
                rewarm,
            })),
            shutdown_tx,
            background,
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The inventory (tests reach the store and Redis through it).
    pub fn inventory(&self) -> &Inventory {
        &self.state.inventory
    }

    /// Serves until `shutdown` resolves, then drains in-flight requests and stops the pipeline.
    pub async fn run_until_stopped(
        mut self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let router = app(self.state.clone());
        listener::serve(self.listener, router, self.limits, shutdown).await;
        // Purchases whose clients left still run (and `batched` ones wait in their queues):
        // let them finish before the pipeline and the pool stop.
        if !self.state.inventory.drain(Duration::from_secs(30)).await {
            tracing::warn!(
                in_flight = self.state.inventory.purchases_in_flight(),
                "purchases still running after 30 s at shutdown"
            );
        }
        let _ = self.shutdown_tx.send(true);
        while self.background.join_next().await.is_some() {}
        self.state.inventory.store().close().await;
        Ok(())
    }
}

/// Resolves on ctrl-c or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}
