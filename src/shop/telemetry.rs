//! The shop's Prometheus metrics: what each one means (the `# HELP` lines), and `GET /metrics`
//! in the text exposition format with its standard content type. The recorder is the
//! process's one ([`crate::telemetry::prometheus`]).

use super::AppState;
use axum::extract::State;
use axum::response::IntoResponse;
use metrics_exporter_prometheus::PrometheusHandle;
use std::sync::Once;

use crate::telemetry::{describe, described as m, Described, MetricKind::*};

/// Every metric the shop exports (a name emitted anywhere in the shop must be listed here; a
/// test reads the sources to hold that).
pub const METRICS: &[Described] = &[
    m("oversell_orders_total", Counter, "Order requests the shop answered, by strategy and outcome (created, replayed, key_reused, sold_out, duplicate, rate_limited, busy, ...)."),
    m("oversell_http_requests_total", Counter, "HTTP requests the shop answered, by route, method and status code."),
    m("oversell_http_request_duration_seconds", Histogram, "Time the shop took to answer an HTTP request (from reading it to the response), by route and method, in seconds."),
    m("oversell_not_replicated_total", Counter, "redis-lua under --redis-durability wait-replica: pays and cancels no replica confirmed in time (answered 503 not_replicated), by move."),
    m("oversell_prededuct_total", Counter, "redis-lua: calls of the atomic pre-deduct script, by result (success, sold_out, duplicate, not_warmed)."),
    m("oversell_restocks_total", Counter, "redis-lua: orders whose units went back to Redis (exactly once each), by reason (cancelled, expired)."),
    m("oversell_restocked_units_total", Counter, "redis-lua: units given back to Redis stock by restocks."),
    m("oversell_persisted_events_total", Counter, "redis-lua: stream events the consumer applied to the database."),
    m("oversell_persist_anomalies_total", Counter, "redis-lua: stream events the database did not take as written (already applied, or not enough stock); see the shop log."),
    m("oversell_stream_lag", Gauge, "redis-lua: stream entries of an item not yet delivered to the persistence consumers."),
    m("oversell_stream_pending", Gauge, "redis-lua: stream entries delivered to a consumer but not yet acknowledged (applied) by it."),
    m("oversell_reconcile_residual", Gauge, "redis-lua: Redis stock minus the stock reconciliation expected, at its last pass (0 when consistent)."),
    m("oversell_reconcile_passes_total", Counter, "redis-lua: reconciliation passes."),
    m("oversell_reconcile_corrections_total", Counter, "redis-lua: reconciliation passes that corrected Redis stock."),
    m("oversell_reconcile_alerts_total", Counter, "redis-lua: reconciliation residuals past the alert threshold."),
    m("oversell_idempotent_replays_total", Counter, "Order requests answered with the order their Idempotency-Key bought before (a retry: nothing moved)."),
    m("oversell_optimistic_conflicts_total", Counter, "optimistic: compare-and-swap updates that lost to a concurrent one and were retried."),
    m("oversell_optimistic_exhausted_total", Counter, "optimistic: orders that ran out of retries (answered 503 busy)."),
    m("oversell_batch_size", Histogram, "batched: purchases applied in one transaction (one batch of an item's queue)."),
    m("oversell_batch_failures_total", Counter, "batched: batches whose transaction failed (nothing moved; every buyer in it answered 503 busy: batch_failed)."),
    m("oversell_consumer_up", Gauge, "redis-lua: 1 while an item's persistence consumer is connected and reading, 0 while it reconnects."),
    m("oversell_bucket_fallbacks_total", Counter, "redis-buckets: purchases answered after the home bucket ran dry and units were brought over from another bucket."),
    m("oversell_bucket_repairs_total", Counter, "redis-buckets: transfers between buckets left half-done (lent, never received) that the repair loop completed."),
    m("oversell_redis_cluster_reconnects_total", Counter, "redis-lua on Redis Cluster: times the cluster connection was replaced after a timeout or a broken connection (a failover the client did not ride through by itself)."),
    m("oversell_consumer_errors_total", Counter, "redis-lua: persistence consumer failures, by kind (connect, read, claim, ack, redis, db_unavailable, db_refused)."),
    m("oversell_claimed_entries_total", Counter, "redis-lua: stream entries claimed from consumers idle past the claim time (a dead shop's pending work)."),
    m("oversell_dead_letters_total", Counter, "redis-lua: stream entries the database refused repeatedly, moved to the item's dead-letter stream (units released), by entry kind."),
    m("oversell_background_errors_total", Counter, "Failures of the shop's background loops (expiry sweep, reconciliation, ...), by task; each is logged at warn and retried."),
    m("oversell_background_restarts_total", Counter, "Background tasks that ended unexpectedly and were started again, by task."),
    m("oversell_rewarms_total", Counter, "redis-lua: sales rebuilt in Redis from the database after Redis lost them, by trigger (manual, check, purchase)."),
    m("oversell_admin_refused_total", Counter, "Admin requests (sale set-up, rewarm, reconcile) refused for a missing or wrong --admin-token."),
    m("oversell_db_pool_acquire_seconds", Histogram, "Time waited for a database connection from the shop's pool, in seconds."),
    m("oversell_db_pool_in_use", Gauge, "Database connections of the shop's pool in use (read when /metrics is scraped)."),
    m("oversell_db_pool_waiting", Gauge, "Requests waiting for a database connection because every connection of the shop's own lane is out (read when /metrics is scraped)."),
    m("oversell_defect_active", Gauge, "1 while the shop runs with a known defect built in (serve --defect NAME: a testing aid, never a shop to trust), labelled by the defect."),
    m("oversell_db_pool_size", Gauge, "Database connections the shop's pool holds open (read when /metrics is scraped)."),
];

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
    metrics::gauge!("oversell_db_pool_in_use").set(in_use as f64);
    metrics::gauge!("oversell_db_pool_waiting").set(store.connections_waiting() as f64);
    metrics::gauge!("oversell_db_pool_size").set(pool.size() as f64);
    crate::telemetry::exposition(handle())
}
