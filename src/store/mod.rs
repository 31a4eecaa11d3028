//! Database access for PostgreSQL and MySQL/MariaDB behind one type.
//!
//! The strategies compose the primitives here (read, lock, compare-and-swap, insert); the SQL
//! that differs between backends lives in [`dialect`], so no strategy spells SQL twice.

pub mod dialect;
mod persist;
mod tx;

pub use persist::{stream_id, ApplyStats, PersistEvent, PersistKind};
pub use tx::StoreTx;

use crate::model::{now_ms, Item, Order, OrderStatus, SaleSetup};
use crate::services::{redact_url, Service};
use dialect::Statements;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::migrate::MigrateDatabase;
use sqlx::{Any, AnyPool, Executor, Row, Transaction};
use std::time::Duration;

/// Which database server the shop runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Postgres,
    Mysql,
}

impl Backend {
    /// The backend a URL's scheme names.
    pub fn from_url(url: &str) -> Result<Self, StoreError> {
        let scheme = url.split("://").next().unwrap_or_default();
        match scheme {
            "postgres" | "postgresql" => Ok(Backend::Postgres),
            "mysql" | "mariadb" => Ok(Backend::Mysql),
            _ => Err(StoreError::BadUrl(format!(
                "database URL {} must start with postgres:// or mysql://",
                redact_url(url)
            ))),
        }
    }

    /// Lower-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Mysql => "mysql",
        }
    }

    /// The default URL for this backend.
    pub fn default_url(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres://postgres:postgres@127.0.0.1:5432/oversell",
            Backend::Mysql => "mysql://root@127.0.0.1:3306/oversell",
        }
    }

    fn service(self) -> Service {
        match self {
            Backend::Postgres => Service::Postgres,
            Backend::Mysql => Service::Mysql,
        }
    }
}

/// Failures of the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    BadUrl(String),
    #[error("{}", describe_connect_failure(*.service, .url, .error))]
    Unreachable {
        service: Service,
        url: String,
        /// Not a `source`: the message above already says it, once.
        error: sqlx::Error,
    },
    #[error("migrating {url}: {source}")]
    Migrate {
        url: String,
        source: sqlx::migrate::MigrateError,
    },
    #[error(transparent)]
    Sql(#[from] sqlx::Error),
}

/// A refused login is not a server that is down: say so instead of "start it".
fn describe_connect_failure(service: Service, url: &str, e: &sqlx::Error) -> String {
    let login_refused = e.as_database_error().is_some_and(|db| {
        db.code().as_deref().is_some_and(|c| c.starts_with("28"))
            || db
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|m| matches!(m.number(), 1044 | 1045))
    });
    if login_refused {
        format!(
            "{} at {} refused the login: {e}; check the user and password in the URL",
            service.name(),
            redact_url(url)
        )
    } else {
        service.unreachable(url, e)
    }
}

impl StoreError {
    /// True when the failure is contention rather than a fault: pool exhausted, lock wait timed
    /// out, deadlock victim. The shop answers these with `503 busy`.
    pub fn is_busy(&self) -> bool {
        matches!(self, StoreError::Sql(e) if is_busy(e))
    }
}

/// See [`StoreError::is_busy`].
pub fn is_busy(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => {
            // PostgreSQL: lock_not_available, deadlock_detected, query_canceled
            // (lock_timeout / statement_timeout). MySQL: ER_LOCK_WAIT_TIMEOUT 1205,
            // ER_LOCK_DEADLOCK 1213 (SQLSTATE 40001).
            if matches!(
                db.code().as_deref(),
                Some("55P03" | "40P01" | "57014" | "40001")
            ) {
                return true;
            }
            db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|m| matches!(m.number(), 1205 | 1213))
        }
        _ => false,
    }
}

/// Pool sizing and lock waits.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    pub max_connections: u32,
    pub acquire_timeout: Duration,
    /// How long a statement may wait for a row lock before it gives up (busy).
    pub lock_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_connections: 10,
            acquire_timeout: Duration::from_millis(500),
            lock_timeout: Duration::from_millis(1000),
        }
    }
}

/// Outcome of moving an order through its state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition {
    /// The move happened; `restocked` units went back to stock.
    Applied { restocked: i64 },
    /// The order was already in this state; nothing changed.
    AlreadyIn(OrderStatus),
    /// No such order.
    NotFound,
}

/// A connection pool plus the statement table of its backend.
#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    sql: &'static Statements,
    backend: Backend,
    url: String,
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
        let lock_ms = settings.lock_timeout.as_millis().max(1);
        let pool = AnyPoolOptions::new()
            .max_connections(settings.max_connections.max(1))
            .acquire_timeout(settings.acquire_timeout)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    let init: Vec<String> = match backend {
                        Backend::Postgres => vec![format!("SET lock_timeout = '{lock_ms}ms'")],
                        // READ COMMITTED: every statement sees the latest committed row, so
                        // an optimistic retry can never re-read a stale REPEATABLE READ snapshot.
                        Backend::Mysql => vec![
                            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".into(),
                            format!(
                                "SET SESSION innodb_lock_wait_timeout = {}",
                                lock_ms.div_ceil(1000)
                            ),
                        ],
                    };
                    for stmt in init {
                        conn.execute(sqlx::AssertSqlSafe(stmt)).await?;
                    }
                    Ok(())
                })
            })
            .connect(url)
            .await
            .map_err(unreachable)?;
        let migrator = match backend {
            Backend::Postgres => sqlx::migrate!("./migrations/postgres"),
            Backend::Mysql => sqlx::migrate!("./migrations/mysql"),
        };
        migrator
            .run(&pool)
            .await
            .map_err(|source| StoreError::Migrate {
                url: redact_url(url),
                source,
            })?;
        Ok(Store {
            pool,
            sql: Statements::for_backend(backend),
            backend,
            url: url.to_string(),
        })
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

    /// Takes this database's run lock and holds it for as long as the returned connection
    /// lives: one `run`/`compare` at a time per database, since each resets the sale. `None`
    /// when another run holds it. PostgreSQL advisory locks are per database; MySQL's GET_LOCK
    /// is server-wide, so its name carries the database's.
    pub async fn try_run_lock(
        &self,
    ) -> Result<Option<sqlx::pool::PoolConnection<Any>>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let sql = match self.backend {
            Backend::Postgres => "SELECT CASE WHEN pg_try_advisory_lock(4242001) THEN 1 ELSE 0 END",
            Backend::Mysql => "SELECT GET_LOCK(CONCAT('oversell-run:', DATABASE()), 0)",
        };
        let got: Option<i64> = sqlx::query_scalar(sql).fetch_one(&mut *conn).await?;
        Ok((got == Some(1)).then_some(conn))
    }

    /// Closes every connection.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// Sets up a fresh sale: the item with its stock, and none of its old orders.
    pub async fn setup_sale(&self, id: i64, setup: &SaleSetup) -> Result<Item, StoreError> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(self.sql.delete_orders)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(self.sql.delete_item)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query(self.sql.insert_item)
            .bind(id)
            .bind(&setup.name)
            .bind(setup.price_cents)
            .bind(setup.stock)
            .bind(setup.stock)
            .bind(setup.purchase_limit)
            .bind(now_ms())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Item {
            id,
            name: setup.name.clone(),
            price_cents: setup.price_cents,
            initial_stock: setup.stock,
            stock: setup.stock,
            version: 0,
            purchase_limit: setup.purchase_limit,
        })
    }

    /// Reads an item with a fresh statement (no transaction, so no stale snapshot).
    pub async fn item(&self, id: i64) -> Result<Option<Item>, StoreError> {
        let row = sqlx::query(self.sql.read_item)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| item_from_row(&r)).transpose()
    }

    /// Ids of every item the database knows.
    pub async fn item_ids(&self) -> Result<Vec<i64>, StoreError> {
        let rows = sqlx::query(self.sql.list_items)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|r| r.try_get::<i64, _>(0))
            .collect::<Result<_, _>>()?)
    }

    /// Units a user holds (pending or paid) of an item, read outside any transaction.
    pub async fn held_by_user(&self, item: i64, user: &str) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(self.sql.held_by_user)
            .bind(item)
            .bind(user)
            .fetch_one(&self.pool)
            .await?)
    }

    /// `stock = stock - qty` with no condition at all: the incident's write.
    pub async fn deduct_unchecked(&self, item: i64, qty: i64) -> Result<(), StoreError> {
        sqlx::query(self.sql.deduct)
            .bind(qty)
            .bind(item)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Inserts an order on its own (autocommit).
    pub async fn insert_order(&self, order: &Order) -> Result<(), StoreError> {
        bind_order(sqlx::query(self.sql.insert_order), order)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Starts a transaction.
    pub async fn begin(&self) -> Result<StoreTx, StoreError> {
        let start = std::time::Instant::now();
        let tx = self.pool.begin().await;
        // Waiting for a pooled connection (plus BEGIN): where a burst queues for `for-update`.
        metrics::histogram!("oversell_db_pool_acquire_seconds")
            .record(start.elapsed().as_secs_f64());
        Ok(StoreTx {
            tx: tx?,
            sql: self.sql,
        })
    }

    /// One order by id.
    pub async fn order(&self, id: &str) -> Result<Option<Order>, StoreError> {
        let row = sqlx::query(self.sql.get_order)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|r| order_from_row(&r)).transpose()
    }

    /// Every order of an item.
    pub async fn orders_for_item(&self, item: i64) -> Result<Vec<Order>, StoreError> {
        let rows = sqlx::query(self.sql.orders_for_item)
            .bind(item)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(order_from_row).collect()
    }

    /// The item and all its orders from one consistent snapshot (a REPEATABLE READ
    /// transaction), so a concurrent commit cannot land between the two reads.
    pub async fn snapshot(&self, item: i64) -> Result<Option<(Item, Vec<Order>)>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let (begin, end): (&[&str], &str) = match self.backend {
            Backend::Postgres => (&["BEGIN ISOLATION LEVEL REPEATABLE READ"], "COMMIT"),
            Backend::Mysql => (
                &[
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
                    "START TRANSACTION WITH CONSISTENT SNAPSHOT",
                ],
                "COMMIT",
            ),
        };
        for stmt in begin {
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
            let rows = sqlx::query(self.sql.orders_for_item)
                .bind(item)
                .fetch_all(&mut *conn)
                .await?;
            let orders = rows
                .iter()
                .map(order_from_row)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some((item_from_row(&row)?, orders)))
        }
        .await;
        conn.execute(end).await?;
        read
    }

    /// Pending orders of an item created before `before_ms` (payment timed out).
    pub async fn overdue_orders(
        &self,
        item: i64,
        before_ms: i64,
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(self.sql.overdue_orders)
            .bind(item)
            .bind(before_ms)
            .fetch_all(&self.pool)
            .await?)
    }

    /// `pending_payment → paid`.
    pub async fn pay(&self, id: &str) -> Result<Transition, StoreError> {
        let mut tx = self.pool.begin().await?;
        let moved = set_status_if(
            &mut tx,
            self.sql,
            id,
            OrderStatus::PendingPayment,
            OrderStatus::Paid,
        )
        .await?;
        let out = if moved {
            Transition::Applied { restocked: 0 }
        } else {
            current_state(&mut tx, self.sql, id).await?
        };
        tx.commit().await?;
        Ok(out)
    }

    /// `pending_payment → cancelled | expired`, putting the units back exactly once: the
    /// conditional status update is the guard, and the restock commits with it or not at all.
    pub async fn release(&self, id: &str, to: OrderStatus) -> Result<Transition, StoreError> {
        let mut tx = self.pool.begin().await?;
        let Some(order) = fetch_order(&mut tx, self.sql, id).await? else {
            return Ok(Transition::NotFound);
        };
        let moved = set_status_if(&mut tx, self.sql, id, OrderStatus::PendingPayment, to).await?;
        let out = if moved {
            sqlx::query(self.sql.restock)
                .bind(order.qty)
                .bind(order.item_id)
                .execute(&mut *tx)
                .await?;
            Transition::Applied {
                restocked: order.qty,
            }
        } else {
            current_state(&mut tx, self.sql, id).await?
        };
        tx.commit().await?;
        Ok(out)
    }

    /// Applies a batch of redis-lua stream events in one transaction; see [`persist`].
    pub async fn apply_events(
        &self,
        item: i64,
        events: &[PersistEvent],
        last_id: &str,
    ) -> Result<ApplyStats, StoreError> {
        persist::apply(&self.pool, self.sql, item, events, last_id).await
    }

    /// `(stock, last applied stream id)` read in one statement, for reconciliation.
    pub async fn reconcile_snapshot(&self, item: i64) -> Result<Option<(i64, String)>, StoreError> {
        let row = sqlx::query(self.sql.reconcile_snapshot)
            .bind(item)
            .fetch_optional(&self.pool)
            .await?;
        Ok(match row {
            Some(r) => Some((r.try_get(0)?, r.try_get(1)?)),
            None => None,
        })
    }

    /// Records one reconciliation pass.
    pub async fn record_reconciliation(
        &self,
        item: i64,
        redis_stock: i64,
        expected: i64,
        corrected: bool,
    ) -> Result<(), StoreError> {
        sqlx::query(self.sql.insert_reconciliation)
            .bind(item)
            .bind(now_ms())
            .bind(redis_stock)
            .bind(expected)
            .bind(redis_stock - expected)
            .bind(i64::from(corrected))
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .field("url", &redact_url(&self.url))
            .finish()
    }
}

pub(super) type AnyQuery<'q> = sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>;

pub(super) fn bind_order<'q>(q: AnyQuery<'q>, o: &'q Order) -> AnyQuery<'q> {
    q.bind(&o.id)
        .bind(o.item_id)
        .bind(&o.user_id)
        .bind(o.device_id.as_deref())
        .bind(o.qty)
        .bind(o.status.as_str())
        .bind(o.created_at_ms)
        .bind(o.updated_at_ms)
}

pub(super) fn item_from_row(r: &AnyRow) -> Result<Item, StoreError> {
    Ok(Item {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        price_cents: r.try_get(2)?,
        initial_stock: r.try_get(3)?,
        stock: r.try_get(4)?,
        version: r.try_get(5)?,
        purchase_limit: r.try_get(6)?,
    })
}

fn order_from_row(r: &AnyRow) -> Result<Order, StoreError> {
    let status: String = r.try_get(5)?;
    Ok(Order {
        id: r.try_get(0)?,
        item_id: r.try_get(1)?,
        user_id: r.try_get(2)?,
        device_id: r.try_get(3)?,
        qty: r.try_get(4)?,
        status: OrderStatus::parse(&status).ok_or_else(|| {
            sqlx::Error::Decode(format!("unknown order status {status:?}").into())
        })?,
        created_at_ms: r.try_get(6)?,
        updated_at_ms: r.try_get(7)?,
    })
}

async fn fetch_order(
    tx: &mut Transaction<'static, Any>,
    sql: &Statements,
    id: &str,
) -> Result<Option<Order>, StoreError> {
    let row = sqlx::query(sql.get_order)
        .bind(id)
        .fetch_optional(&mut **tx)
        .await?;
    row.map(|r| order_from_row(&r)).transpose()
}

async fn set_status_if(
    tx: &mut Transaction<'static, Any>,
    sql: &Statements,
    id: &str,
    from: OrderStatus,
    to: OrderStatus,
) -> Result<bool, StoreError> {
    let done = sqlx::query(sql.set_status_if)
        .bind(to.as_str())
        .bind(now_ms())
        .bind(id)
        .bind(from.as_str())
        .execute(&mut **tx)
        .await?;
    Ok(done.rows_affected() == 1)
}

async fn current_state(
    tx: &mut Transaction<'static, Any>,
    sql: &Statements,
    id: &str,
) -> Result<Transition, StoreError> {
    Ok(match fetch_order(tx, sql, id).await? {
        Some(o) => Transition::AlreadyIn(o.status),
        None => Transition::NotFound,
    })
}
