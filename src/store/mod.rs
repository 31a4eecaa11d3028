//! Database access for PostgreSQL and MySQL/MariaDB behind one type.
//!
//! The strategies compose the primitives here (read, lock, compare-and-swap, insert); every
//! statement, and all that differs between backends, lives in [`dialect`], so no strategy
//! spells SQL twice.
//!
//! - `backend`: [`Backend`], read from a URL's scheme.
//! - `error`: [`StoreError`] and which failures are contention ([`is_busy`]).
//! - `orders`: orders and their state machine ([`Transition`]).
//! - `rows`: rows to items and orders, orders to bind parameters.
//! - `tx`: [`StoreTx`], the locking strategies' transaction.
//! - `lane`: the connections the store keeps between operations (no release ping).
//! - `persist`: redis-lua's stream events applied in batches, and the low-water mark.
//! - `pg_array`: PostgreSQL array literals, a batch's column in one parameter.
//! - [`autopipe`]: the commands in flight together on one Redis connection sent as one
//!   pipeline (the shop's pre-deducts).
//! - [`redis_conn`]: the one Redis connection type, for a single Redis and a Redis Cluster,
//!   used by the shop's Redis strategies and by the harness's probes and faults alike.

pub mod autopipe;
mod backend;
pub mod dialect;
mod error;
mod lane;
mod orders;
mod persist;
mod pg_array;
pub mod redis_conn;
mod rows;
mod tx;

use crate::telemetry::shop_metrics;
pub use backend::{on_database, Backend};
use error::dead_connection;
pub use error::StoreError;
pub use orders::{RestockAnomalies, Transition};
pub use persist::{
    format_stream_id, stream_id, stream_id_before, ApplyStats, PersistEvent, PersistKind,
};
pub use tx::StoreTx;

/// Where [`Store::snapshot_into`] hands the order rows, one at a time.
pub trait OrderSink {
    /// One order row (first pass).
    fn order(&mut self, o: &Order);
    /// Whether the rows must be read once more ([`OrderSink::order_again`]).
    fn second_pass(&mut self) -> bool {
        false
    }
    /// One order row of the second pass.
    fn order_again(&mut self, _o: &Order) {}
}

use crate::model::{now_ms, Item, Order, SaleSetup};
use crate::services::redact_url;
use dialect::Statements;
use rows::{item_from_row, order_from_row};
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::MigrateDatabase;
use sqlx::{Any, AnyPool, Executor, Row};
use std::time::Duration;

/// Runs `$op`, a query future on `$conn`, on a connection held from `$store`'s lane, which it
/// rests in again when the exchange ran to its end (see `lane`); evaluates to the query's
/// result, its error passed up with `?`.
macro_rules! on_lane {
    ($store:expr, |$conn:ident| $op:expr) => {{
        let mut held = $store.lane.hold().await?;
        let $conn = held.conn();
        let done = $op.await;
        held.finished(&done);
        done?
    }};
}
pub(super) use on_lane;

/// A set-up without reset found this many orders of the item, and changed nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HasOrders(pub i64);

/// Pool sizing and lock waits.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// How long a statement may wait for a row lock before it gives up (busy).
    pub lock_timeout: Duration,
}

impl PoolSettings {
    /// The harness's own connections (the oracle's reads, the run lock, a replica's schema):
    /// up to `max_connections`, each waited for as long as a busy machine needs to open one
    /// (30 s). A shop's pool is sized and timed by its knobs instead: a shop must answer
    /// "busy" fast, while a harness that gave up on a slow connect would fail a run that
    /// went well.
    pub fn harness(max_connections: u32) -> Self {
        PoolSettings {
            max_connections,
            acquire_timeout: Duration::from_secs(30),
            lock_timeout: Duration::from_secs(30),
        }
    }
}

/// A connection pool plus the statement table of its backend.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    lane: lane::Lane,
    sql: &'static Statements,
    backend: Backend,
    url: String,
    /// How long a statement waits for a row lock ([`PoolSettings::lock_timeout`]).
    lock_timeout: Duration,
}

impl Store {
    /// Connects, creating the database if it is missing and running the migrations.
    pub async fn connect(url: &str, settings: &PoolSettings) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = Backend::from_url(url)?;
        let unreachable = |error| StoreError::Unreachable {
            service: backend.service(),
            url: url.to_string(),
            error,
        };
        let exists = Any::database_exists(url).await.map_err(unreachable)?;
        if !exists {
            // Two processes may race to create it; losing that race is fine.
            if let Err(e) = Any::create_database(url).await {
                if !Any::database_exists(url).await.unwrap_or(false) {
                    return Err(unreachable(e));
                }
            }
        }
        let store = Store::open(url, backend, settings).await?;
        dialect::migrator(backend)
            .run(&store.pool)
            .await
            .map_err(|source| StoreError::Migrate {
                url: redact_url(url),
                source,
            })?;
        Ok(store)
    }

    /// Opens a pool on a read-only copy of a database (a hot-standby replica): no creation,
    /// no migration (a standby refuses both); the primary's store made the schema, and the
    /// database must exist on it (a replica replays it from the primary).
    pub async fn connect_read_only(
        url: &str,
        settings: &PoolSettings,
    ) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        Store::open(url, Backend::from_url(url)?, settings).await
    }

    /// The pool on an existing database, each session set up for the backend.
    async fn open(
        url: &str,
        backend: Backend,
        settings: &PoolSettings,
    ) -> Result<Store, StoreError> {
        let lock_timeout = settings.lock_timeout;
        let pool = AnyPoolOptions::new()
            .max_connections(settings.max_connections.max(1))
            .acquire_timeout(settings.acquire_timeout)
            // No ping before each acquire: it was a round trip (and a backend wake-up) per
            // order, 11 % of the for-update shop's CPU (docs/lab/lab-log.md).
            // Nor on release, for the connections the store keeps (`lane`): one that broke
            // while in use goes back to the pool, which pings and closes it; one that died
            // idle (a terminated session) is found by the next `BEGIN`, which
            // [`Store::begin`] retries on another connection.
            .test_before_acquire(false)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    for stmt in dialect::session_setup(backend, lock_timeout) {
                        conn.execute(sqlx::AssertSqlSafe(stmt)).await?;
                    }
                    Ok(())
                })
            })
            .connect(url)
            .await
            .map_err(|error| StoreError::Unreachable {
                service: backend.service(),
                url: url.to_string(),
                error,
            })?;
        Ok(Store {
            lane: lane::Lane::new(pool.clone(), settings.max_connections.max(1)),
            pool,
            sql: Statements::for_backend(backend),
            backend,
            url: url.to_string(),
            lock_timeout,
        })
    }

    /// How long its statements wait for a row lock before giving up (`busy`): also the
    /// longest a for-update purchase waits for its turn in the shop's queue for the lock.
    pub fn lock_timeout(&self) -> Duration {
        self.lock_timeout
    }

    /// The backend this store talks to.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL it was opened with (may carry a password: redact before printing).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The underlying pool (probes read its size and idle count).
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Connections in use now: lent by the pool and not resting in the store's lane.
    pub fn connections_in_use(&self) -> u32 {
        let idle = self.pool.num_idle() + self.lane.resting();
        self.pool.size().saturating_sub(idle as u32)
    }

    /// Requests waiting for a connection now: every connection of the store's lane was out
    /// when they asked.
    pub fn connections_waiting(&self) -> u32 {
        self.lane.waiting()
    }

    /// Takes this database's run lock and holds it for as long as the returned connection
    /// lives: one `run`/`compare` at a time per database, since each resets the sale. `None`
    /// when another run holds it (see [`Statements::run_lock`]).
    pub async fn try_run_lock(
        &self,
    ) -> Result<Option<sqlx::pool::PoolConnection<Any>>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let got: Option<i64> = sqlx::query_scalar(self.sql.run_lock)
            .fetch_one(&mut *conn)
            .await?;
        Ok((got == Some(1)).then_some(conn))
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.lane.close();
        self.pool.close().await;
    }

    /// Sets up a fresh sale: the item with its stock, and none of its old orders.
    pub async fn setup_sale(&self, id: i64, setup: &SaleSetup) -> Result<Item, StoreError> {
        let done = self.setup(id, setup, true).await?;
        Ok(done.expect("a reset set-up is never refused"))
    }

    /// Sets up a fresh sale unless the item already has orders: then nothing changes and the
    /// answer is how many ([`HasOrders`]). The check and the set-up hold the item's row lock,
    /// so no order is persisted between them.
    pub async fn setup_new_sale(
        &self,
        id: i64,
        setup: &SaleSetup,
    ) -> Result<Result<Item, HasOrders>, StoreError> {
        self.setup(id, setup, false).await
    }

    async fn setup(
        &self,
        id: i64,
        setup: &SaleSetup,
        reset: bool,
    ) -> Result<Result<Item, HasOrders>, StoreError> {
        let mut tx = self.open_tx().await?;
        if !reset {
            sqlx::query(self.sql.lock_item)
                .bind(id)
                .fetch_optional(tx.conn())
                .await?;
            let orders: i64 = sqlx::query_scalar(self.sql.count_orders)
                .bind(id)
                .fetch_one(tx.conn())
                .await?;
            if orders > 0 {
                tx.rollback().await?;
                return Ok(Err(HasOrders(orders)));
            }
        }
        sqlx::query(self.sql.delete_orders)
            .bind(id)
            .execute(tx.conn())
            .await?;
        sqlx::query(self.sql.delete_restocks)
            .bind(id)
            .execute(tx.conn())
            .await?;
        sqlx::query(self.sql.delete_applied)
            .bind(id)
            .execute(tx.conn())
            .await?;
        sqlx::query(self.sql.delete_item)
            .bind(id)
            .execute(tx.conn())
            .await?;
        sqlx::query(self.sql.insert_item)
            .bind(id)
            .bind(&setup.name)
            .bind(setup.price_cents)
            .bind(setup.stock)
            .bind(setup.stock)
            .bind(setup.purchase_limit)
            .bind(now_ms())
            .execute(tx.conn())
            .await?;
        tx.commit().await?;
        Ok(Ok(Item {
            id,
            name: setup.name.clone(),
            price_cents: setup.price_cents,
            initial_stock: setup.stock,
            stock: setup.stock,
            version: 0,
            purchase_limit: setup.purchase_limit,
        }))
    }

    /// Reads an item with a fresh statement (no transaction, so no stale snapshot).
    pub async fn item(&self, id: i64) -> Result<Option<Item>, StoreError> {
        let row = on_lane!(self, |c| sqlx::query(self.sql.read_item)
            .bind(id)
            .fetch_optional(c));
        row.map(|r| item_from_row(&r)).transpose()
    }

    /// Ids of every item the database knows.
    pub async fn item_ids(&self) -> Result<Vec<i64>, StoreError> {
        let rows = on_lane!(self, |c| sqlx::query(self.sql.list_items).fetch_all(c));
        Ok(rows
            .iter()
            .map(|r| r.try_get::<i64, _>(0))
            .collect::<Result<_, _>>()?)
    }

    /// Units a user holds (pending or paid) of an item, read outside any transaction.
    pub async fn held_by_user(&self, item: i64, user: &str) -> Result<i64, StoreError> {
        Ok(on_lane!(self, |c| sqlx::query_scalar(
            self.sql.held_by_user
        )
        .bind(item)
        .bind(user)
        .fetch_one(c)))
    }

    /// `stock = stock - qty` with no condition at all: the incident's write.
    pub async fn deduct_unchecked(&self, item: i64, qty: i64) -> Result<(), StoreError> {
        on_lane!(self, |c| sqlx::query(self.sql.deduct)
            .bind(qty)
            .bind(item)
            .execute(c));
        Ok(())
    }

    /// A transaction for the store's own use (no pool metric).
    pub(super) async fn open_tx(&self) -> Result<StoreTx, sqlx::Error> {
        StoreTx::open(&self.lane, self.sql, self.backend).await
    }

    /// Starts a transaction on a connection held from the store's lane (`StoreTx::open`).
    pub async fn begin(&self) -> Result<StoreTx, StoreError> {
        let start = std::time::Instant::now();
        let tx = self.open_tx().await;
        // Waiting for a pooled connection (plus BEGIN): where a burst queues for `for-update`.
        metrics::histogram!(shop_metrics::DB_POOL_ACQUIRE).record(start.elapsed().as_secs_f64());
        Ok(tx?)
    }

    /// The item and all its orders from one consistent snapshot (a REPEATABLE READ
    /// transaction), so a concurrent commit cannot land between the two reads.
    pub async fn snapshot(&self, item: i64) -> Result<Option<(Item, Vec<Order>)>, StoreError> {
        /// Every row kept, in the order the database gave them.
        struct Kept(Vec<Order>);
        impl OrderSink for Kept {
            fn order(&mut self, o: &Order) {
                self.0.push(o.clone());
            }
        }
        let mut kept = Kept(Vec::new());
        let item = self.snapshot_into(item, &mut kept).await?;
        Ok(item.map(|i| (i, kept.0)))
    }

    /// The item, with all its orders handed to `sink` one at a time as the database streams
    /// them, from one consistent snapshot (a REPEATABLE READ transaction): never every row in
    /// memory at once. When the sink asks for a second pass ([`OrderSink::second_pass`]), the
    /// same snapshot is read again. `None`: no such item.
    pub async fn snapshot_into(
        &self,
        item: i64,
        sink: &mut (dyn OrderSink + Send),
    ) -> Result<Option<Item>, StoreError> {
        let mut held = self.lane.hold().await?;
        held.in_raw_transaction();
        let conn = held.conn();
        for stmt in self.sql.snapshot_begin {
            conn.execute(*stmt).await?;
        }
        let read = async {
            let row = sqlx::query(self.sql.read_item)
                .bind(item)
                .fetch_optional(&mut *conn)
                .await?;
            let Some(row) = row else {
                return Ok::<_, StoreError>(None);
            };
            self.stream_orders(&mut *conn, item, &mut |o| sink.order(o))
                .await?;
            if sink.second_pass() {
                self.stream_orders(&mut *conn, item, &mut |o| sink.order_again(o))
                    .await?;
            }
            Ok(Some(item_from_row(&row)?))
        }
        .await;
        let end = conn.execute(self.sql.snapshot_end).await;
        held.finished(&end);
        end?;
        read
    }

    /// Every order of `item` on `conn`, each handed to `each` as it arrives.
    async fn stream_orders(
        &self,
        conn: &mut sqlx::AnyConnection,
        item: i64,
        each: &mut (dyn FnMut(&Order) + Send),
    ) -> Result<(), StoreError> {
        use futures_util::TryStreamExt;
        let mut rows = sqlx::query(self.sql.orders_for_item)
            .bind(item)
            .fetch(&mut *conn);
        while let Some(row) = rows.try_next().await? {
            each(&order_from_row(&row)?);
        }
        Ok(())
    }

    /// Applies a batch of redis-lua stream events in one transaction, first raising the
    /// low-water mark to `low_water` (a candidate proven from Redis); see [`persist`].
    pub async fn apply_events(
        &self,
        item: i64,
        events: &[PersistEvent],
        low_water: Option<&str>,
    ) -> Result<ApplyStats, StoreError> {
        let (marks, deduct) = (persist::Marks::Tracked(low_water), persist::Deduct::IfStock);
        self.apply(item, events, marks, deduct)
            .await
            .map(|stats| stats.unwrap_or_default())
    }

    /// [`Store::apply_events`] with every order's units taken inside the batch, which commits
    /// only if the stock ends at zero or above: `None` (nothing written) when it would not, as
    /// when a release earlier in the stream is still in another consumer's batch.
    pub async fn apply_events_if_stock_holds(
        &self,
        item: i64,
        events: &[PersistEvent],
        low_water: Option<&str>,
    ) -> Result<Option<ApplyStats>, StoreError> {
        let (marks, deduct) = (persist::Marks::Tracked(low_water), persist::Deduct::InBatch);
        self.apply(item, events, marks, deduct).await
    }

    /// One batch through [`persist::apply`] on this store's pool.
    async fn apply(
        &self,
        item: i64,
        events: &[PersistEvent],
        marks: persist::Marks<'_>,
        deduct: persist::Deduct,
    ) -> Result<Option<ApplyStats>, StoreError> {
        persist::apply(
            &self.lane,
            self.sql,
            self.backend,
            item,
            events,
            marks,
            deduct,
        )
        .await
    }

    /// Applies a batch of one redis-buckets bucket's stream events in one transaction (under
    /// the item's row lock, exactly as [`Store::apply_events`]), leaving the item's low-water
    /// mark alone: bucket streams' ids do not order against each other.
    pub async fn apply_bucket_events(
        &self,
        item: i64,
        events: &[PersistEvent],
    ) -> Result<ApplyStats, StoreError> {
        let (marks, deduct) = (persist::Marks::Untracked, persist::Deduct::IfStock);
        self.apply(item, events, marks, deduct)
            .await
            .map(|stats| stats.unwrap_or_default())
    }

    /// [`Store::apply_bucket_events`] with every order's units taken inside the batch, which
    /// commits only if the stock ends at zero or above: `None` (nothing written) when it would
    /// not. A bucket's order may reach the database before the cancel or expiry, on another
    /// bucket's stream, that gave back the unit it bought (units move between buckets): its
    /// batch then waits for that release (see `pipeline::batch`) instead of keeping the order
    /// undeducted, which the release's restock would then turn into a unit too many.
    pub async fn apply_bucket_events_if_stock_holds(
        &self,
        item: i64,
        events: &[PersistEvent],
    ) -> Result<Option<ApplyStats>, StoreError> {
        let (marks, deduct) = (persist::Marks::Untracked, persist::Deduct::InBatch);
        self.apply(item, events, marks, deduct).await
    }

    /// Raises the low-water mark to `candidate` (if higher); returns the mark in force.
    pub async fn advance_mark(&self, item: i64, candidate: &str) -> Result<String, StoreError> {
        persist::advance(&self.lane, self.sql, self.backend, item, candidate).await
    }

    /// Stock, low-water mark and the ids applied above it, from one consistent snapshot (a
    /// REPEATABLE READ transaction), for reconciliation. `None` when the item does not exist.
    pub async fn reconcile_snapshot(
        &self,
        item: i64,
    ) -> Result<Option<ReconcileSnapshot>, StoreError> {
        let mut held = self.lane.hold().await?;
        held.in_raw_transaction();
        let conn = held.conn();
        for stmt in self.sql.snapshot_begin {
            conn.execute(*stmt).await?;
        }
        let read = async {
            let Some(row) = sqlx::query(self.sql.reconcile_snapshot)
                .bind(item)
                .fetch_optional(&mut *conn)
                .await?
            else {
                return Ok::<_, StoreError>(None);
            };
            let (db_stock, mark): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
            let applied_above = persist::applied_above(&mut *conn, self.sql, item, &mark).await?;
            Ok(Some(ReconcileSnapshot {
                db_stock,
                mark,
                applied_above,
            }))
        }
        .await;
        let end = conn.execute(self.sql.snapshot_end).await;
        held.finished(&end);
        end?;
        read
    }

    /// Records one reconciliation pass.
    pub async fn record_reconciliation(
        &self,
        item: i64,
        redis_stock: i64,
        expected: i64,
        corrected: bool,
    ) -> Result<(), StoreError> {
        on_lane!(self, |c| sqlx::query(self.sql.insert_reconciliation)
            .bind(item)
            .bind(now_ms())
            .bind(redis_stock)
            .bind(expected)
            .bind(redis_stock - expected)
            .bind(i64::from(corrected))
            .execute(c));
        Ok(())
    }
}

/// What reconciliation reads from the database, all from one snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconcileSnapshot {
    pub db_stock: i64,
    /// The low-water mark: every stream entry at or below it is applied.
    pub mark: String,
    /// Stream ids applied above the mark (batches that committed out of stream order).
    pub applied_above: Vec<String>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .field("url", &redact_url(&self.url))
            .finish()
    }
}
