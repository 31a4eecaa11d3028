//! The shop's Prometheus metrics: what each one means (the `# HELP` lines, declared with their
//! names in [`crate::telemetry::shop_metrics`]), and `GET /metrics` in the text exposition
//! format with its standard content type. The recorder is the
//! process's one ([`crate::telemetry::prometheus`]).

use super::AppState;
use axum::extract::State;
use axum::response::IntoResponse;
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Once;

use crate::telemetry::{describe, shop_metrics};

/// Every metric the shop exports: the one catalog, declared below the modules that emit them.
pub use crate::telemetry::shop_metrics::METRICS;

/// The process's recorder, with the shop's metrics described (once).
pub fn handle() -> &'static PrometheusHandle {
    static DESCRIBED: Once = Once::new();
    let handle = crate::telemetry::prometheus();
    DESCRIBED.call_once(|| describe(METRICS));
    handle
}

/// `GET /metrics`: the pool gauges read now, then everything the process recorded.
pub(super) async fn metrics(State(st): State<AppState>) -> impl IntoResponse {
    let store = st.inventory.store();
    let (pool, in_use) = (store.pool(), store.connections_in_use());
    metrics::gauge!(shop_metrics::DB_POOL_IN_USE).set(in_use as f64);
    // Waiting to get at the database: for a connection, or (for-update) for a turn in the
    // item's queue in front of its row lock, which is where a hot row's backlog waits.
    let waiting = store.connections_waiting() as usize + st.inventory.purchases_queued();
    metrics::gauge!(shop_metrics::DB_POOL_WAITING).set(waiting as f64);
    metrics::gauge!(shop_metrics::DB_POOL_SIZE).set(pool.size() as f64);
    crate::telemetry::exposition(handle())
}
