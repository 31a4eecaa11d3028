//! The reference shop's metrics, each declared once: its name (a `const`, which every emitter
//! and reader uses: the shop's strategies, store and pipeline, the probe, the runner) and, in
//! [`METRICS`], its kind and `# HELP` text. Below every module that emits one, so none has to
//! reach up to the shop for a name.

use super::{described as m, Described, MetricKind::*};

/// `oversell_orders_total` (counter).
pub const ORDERS: &str = "oversell_orders_total";
/// `oversell_http_requests_total` (counter).
pub const HTTP_REQUESTS: &str = "oversell_http_requests_total";
/// `oversell_http_request_duration_seconds` (histogram).
pub const HTTP_REQUEST_DURATION: &str = "oversell_http_request_duration_seconds";
/// `oversell_not_replicated_total` (counter).
pub const NOT_REPLICATED: &str = "oversell_not_replicated_total";
/// `oversell_prededuct_total` (counter).
pub const PREDEDUCT: &str = "oversell_prededuct_total";
/// `oversell_restocks_total` (counter).
pub const RESTOCKS: &str = "oversell_restocks_total";
/// `oversell_restocked_units_total` (counter).
pub const RESTOCKED_UNITS: &str = "oversell_restocked_units_total";
/// `oversell_persisted_events_total` (counter).
pub const PERSISTED_EVENTS: &str = "oversell_persisted_events_total";
/// `oversell_persist_anomalies_total` (counter).
pub const PERSIST_ANOMALIES: &str = "oversell_persist_anomalies_total";
/// `oversell_stream_lag` (gauge).
pub const STREAM_LAG: &str = "oversell_stream_lag";
/// `oversell_stream_pending` (gauge).
pub const STREAM_PENDING: &str = "oversell_stream_pending";
/// `oversell_reconcile_residual` (gauge).
pub const RECONCILE_RESIDUAL: &str = "oversell_reconcile_residual";
/// `oversell_reconcile_passes_total` (counter).
pub const RECONCILE_PASSES: &str = "oversell_reconcile_passes_total";
/// `oversell_reconcile_corrections_total` (counter).
pub const RECONCILE_CORRECTIONS: &str = "oversell_reconcile_corrections_total";
/// `oversell_reconcile_alerts_total` (counter).
pub const RECONCILE_ALERTS: &str = "oversell_reconcile_alerts_total";
/// `oversell_idempotent_replays_total` (counter).
pub const IDEMPOTENT_REPLAYS: &str = "oversell_idempotent_replays_total";
/// `oversell_optimistic_conflicts_total` (counter).
pub const OPTIMISTIC_CONFLICTS: &str = "oversell_optimistic_conflicts_total";
/// `oversell_optimistic_exhausted_total` (counter).
pub const OPTIMISTIC_EXHAUSTED: &str = "oversell_optimistic_exhausted_total";
/// `oversell_batch_size` (histogram).
pub const BATCH_SIZE: &str = "oversell_batch_size";
/// `oversell_batch_failures_total` (counter).
pub const BATCH_FAILURES: &str = "oversell_batch_failures_total";
/// `oversell_consumer_up` (gauge).
pub const CONSUMER_UP: &str = "oversell_consumer_up";
/// `oversell_bucket_fallbacks_total` (counter).
pub const BUCKET_FALLBACKS: &str = "oversell_bucket_fallbacks_total";
/// `oversell_bucket_repairs_total` (counter).
pub const BUCKET_REPAIRS: &str = "oversell_bucket_repairs_total";
/// `oversell_redis_cluster_reconnects_total` (counter).
pub const REDIS_CLUSTER_RECONNECTS: &str = "oversell_redis_cluster_reconnects_total";
/// `oversell_redis_pipelines_total` (counter).
pub const REDIS_PIPELINES: &str = "oversell_redis_pipelines_total";
/// `oversell_redis_pipelined_commands_total` (counter).
pub const REDIS_PIPELINED_COMMANDS: &str = "oversell_redis_pipelined_commands_total";
/// `oversell_consumer_errors_total` (counter).
pub const CONSUMER_ERRORS: &str = "oversell_consumer_errors_total";
/// `oversell_claimed_entries_total` (counter).
pub const CLAIMED_ENTRIES: &str = "oversell_claimed_entries_total";
/// `oversell_dead_letters_total` (counter).
pub const DEAD_LETTERS: &str = "oversell_dead_letters_total";
/// `oversell_background_errors_total` (counter).
pub const BACKGROUND_ERRORS: &str = "oversell_background_errors_total";
/// `oversell_background_restarts_total` (counter).
pub const BACKGROUND_RESTARTS: &str = "oversell_background_restarts_total";
/// `oversell_rewarms_total` (counter).
pub const REWARMS: &str = "oversell_rewarms_total";
/// `oversell_admin_refused_total` (counter).
pub const ADMIN_REFUSED: &str = "oversell_admin_refused_total";
/// `oversell_db_pool_acquire_seconds` (histogram).
pub const DB_POOL_ACQUIRE: &str = "oversell_db_pool_acquire_seconds";
/// The histogram's running total: seconds every caller waited for a connection (a timed-out
/// wait included).
pub const DB_POOL_ACQUIRE_SUM: &str = "oversell_db_pool_acquire_seconds_sum";
/// `oversell_db_pool_in_use` (gauge).
pub const DB_POOL_IN_USE: &str = "oversell_db_pool_in_use";
/// `oversell_db_pool_waiting` (gauge).
pub const DB_POOL_WAITING: &str = "oversell_db_pool_waiting";
/// `oversell_defect_active` (gauge).
pub const DEFECT_ACTIVE: &str = "oversell_defect_active";
/// `oversell_db_pool_size` (gauge).
pub const DB_POOL_SIZE: &str = "oversell_db_pool_size";

/// Every metric the shop exports, with its kind and `# HELP` text (a name emitted anywhere in
/// the shop must be listed here; `tests/api/deploy.rs` reads the sources to hold that).
pub const METRICS: &[Described] = &[
    m(ORDERS, Counter, "Order requests the shop answered, by strategy and outcome (created, replayed, key_reused, sold_out, duplicate, rate_limited, busy, ...)."),
    m(HTTP_REQUESTS, Counter, "HTTP requests the shop answered, by route, method and status code."),
    m(HTTP_REQUEST_DURATION, Histogram, "Time the shop took to answer an HTTP request (from reading it to the response), by route and method, in seconds."),
    m(NOT_REPLICATED, Counter, "redis-lua under --redis-durability wait-replica: pays and cancels no replica confirmed in time (answered 503 not_replicated), by move."),
    m(PREDEDUCT, Counter, "redis-lua: calls of the atomic pre-deduct script, by result (success, sold_out, duplicate, not_warmed)."),
    m(RESTOCKS, Counter, "redis-lua: orders whose units went back to Redis (exactly once each), by reason (cancelled, expired)."),
    m(RESTOCKED_UNITS, Counter, "redis-lua: units given back to Redis stock by restocks."),
    m(PERSISTED_EVENTS, Counter, "redis-lua: stream events the consumer applied to the database."),
    m(PERSIST_ANOMALIES, Counter, "redis-lua: stream events the database did not take as written (already applied, or not enough stock); see the shop log."),
    m(STREAM_LAG, Gauge, "redis-lua: stream entries of an item not yet delivered to the persistence consumers."),
    m(STREAM_PENDING, Gauge, "redis-lua: stream entries delivered to a consumer but not yet acknowledged (applied) by it."),
    m(RECONCILE_RESIDUAL, Gauge, "redis-lua: Redis stock minus the stock reconciliation expected, at its last pass (0 when consistent)."),
    m(RECONCILE_PASSES, Counter, "redis-lua: reconciliation passes."),
    m(RECONCILE_CORRECTIONS, Counter, "redis-lua: reconciliation passes that corrected Redis stock."),
    m(RECONCILE_ALERTS, Counter, "redis-lua: reconciliation residuals past the alert threshold."),
    m(IDEMPOTENT_REPLAYS, Counter, "Order requests answered with the order their Idempotency-Key bought before (a retry: nothing moved)."),
    m(OPTIMISTIC_CONFLICTS, Counter, "optimistic: compare-and-swap updates that lost to a concurrent one and were retried."),
    m(OPTIMISTIC_EXHAUSTED, Counter, "optimistic: orders that ran out of retries (answered 503 busy)."),
    m(BATCH_SIZE, Histogram, "batched: purchases applied in one transaction (one batch of an item's queue)."),
    m(BATCH_FAILURES, Counter, "batched: batches whose transaction failed (nothing moved; every buyer in it answered 503 busy: batch_failed)."),
    m(CONSUMER_UP, Gauge, "redis-lua: 1 while an item's persistence consumer is connected and reading, 0 while it reconnects."),
    m(BUCKET_FALLBACKS, Counter, "redis-buckets: purchases answered after the home bucket ran dry and units were brought over from another bucket."),
    m(BUCKET_REPAIRS, Counter, "redis-buckets: transfers between buckets left half-done (lent, never received) that the repair loop completed."),
    m(REDIS_CLUSTER_RECONNECTS, Counter, "redis-lua on Redis Cluster: times the cluster connection was replaced after a timeout or a broken connection (a failover the client did not ride through by itself)."),
    m(REDIS_PIPELINES, Counter, "redis-lua: pipelines the shop sent on its Redis connection (each one write carrying the pre-deducts in flight together)."),
    m(REDIS_PIPELINED_COMMANDS, Counter, "redis-lua: pre-deducts sent in those pipelines (over oversell_redis_pipelines_total: the mean batch)."),
    m(CONSUMER_ERRORS, Counter, "redis-lua: persistence consumer failures, by kind (connect, read, claim, ack, redis, db_unavailable, db_refused)."),
    m(CLAIMED_ENTRIES, Counter, "redis-lua: stream entries claimed from consumers idle past the claim time (a dead shop's pending work)."),
    m(DEAD_LETTERS, Counter, "redis-lua: stream entries the database refused repeatedly, moved to the item's dead-letter stream (units released), by entry kind."),
    m(BACKGROUND_ERRORS, Counter, "Failures of the shop's background loops (expiry sweep, reconciliation, ...), by task; each is logged at warn and retried."),
    m(BACKGROUND_RESTARTS, Counter, "Background tasks that ended unexpectedly and were started again, by task."),
    m(REWARMS, Counter, "redis-lua: sales rebuilt in Redis from the database after Redis lost them, by trigger (manual, check, purchase)."),
    m(ADMIN_REFUSED, Counter, "Admin requests (sale set-up, rewarm, reconcile) refused for a missing or wrong --admin-token."),
    m(DB_POOL_ACQUIRE, Histogram, "Time waited for a database connection from the shop's pool, in seconds."),
    m(DB_POOL_IN_USE, Gauge, "Database connections of the shop's pool in use (read when /metrics is scraped)."),
    m(DB_POOL_WAITING, Gauge, "Requests waiting to get at the database: for a connection because every connection of the shop's own lane is out, or (for-update) for their turn in the item's queue in front of its row lock, --row-lock-waiters (read when /metrics is scraped)."),
    m(DEFECT_ACTIVE, Gauge, "1 while the shop runs with a known defect built in (serve --defect NAME: a testing aid, never a shop to trust), labelled by the defect."),
    m(DB_POOL_SIZE, Gauge, "Database connections the shop's pool holds open (read when /metrics is scraped)."),
];
