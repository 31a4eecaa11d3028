//! The store's own hand-out of connections: kept between operations instead of going back
//! through sqlx's pool, which pings every connection it gets back (sqlx 0.9's
//! `PoolConnection` drop: a spawned task and one more round trip, and a backend wake-up, per
//! order; see docs/lab/lab-log.md).
//!
//! A [`Lane`] holds up to `cap` of the pool's connections: all but a reserve of one in eight,
//! at least one, so code that takes the pool directly (the run lock, `Store::pool`'s readers)
//! always finds a connection there; every statement of the store itself runs on the lane. A
//! [`Held`] connection goes back to the lane only when its last use ran to its end
//! ([`Held::finished`]): its statement answered, no transaction left open. Any other way
//! out — a future dropped mid-statement, a transaction dropped open (its rollback queued by
//! sqlx's transaction manager), an I/O error — hands it to sqlx's pool as before, whose ping
//! flushes the queued rollback or closes what broke. When the lane's
//! `cap` are all out, a caller takes whichever comes first: one of them back, or a connection
//! from the pool (that one returns to the pool). So nothing here waits where sqlx would not.
//!
//! What the pool no longer sees: a connection resting in the lane counts as in use to sqlx
//! ([`Lane::resting`] corrects the shop's gauge), and is not aged out by a pool lifetime
//! (the store sets none).

use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Connections kept for the store's operations.
#[derive(Clone)]
pub(super) struct Lane {
    inner: Arc<Inner>,
}

struct Inner {
    pool: AnyPool,
    /// Resting connections, the one used last on top (its server session is the warmest).
    /// `None` once the store closed: nothing rests any more.
    resting: Mutex<Option<Vec<PoolConnection<Any>>>>,
    /// One per connection out of the lane or resting in it.
    permits: Arc<Semaphore>,
    /// Callers waiting because every connection of the lane was out (the shop's
    /// `oversell_db_pool_waiting`).
    waiting: AtomicUsize,
}

/// Counts a caller as waiting for as long as it lives (a cancelled wait included).
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn start(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::Relaxed);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection from the [`Lane`] (or, when the lane's were all out, from the pool).
pub(super) struct Held {
    conn: Option<PoolConnection<Any>>,
    /// The lane's permit: `None` for one taken from the pool, which goes back there.
    home: Option<(Arc<Inner>, OwnedSemaphorePermit)>,
    clean: bool,
    /// Closed rather than handed back when not finished ([`Held::in_raw_transaction`]).
    close_unfinished: bool,
}

impl Lane {
    /// A lane over `pool`, whose size is `max_connections`.
    pub(super) fn new(pool: AnyPool, max_connections: u32) -> Lane {
        let max = max_connections as usize;
        let cap = max.saturating_sub((max / 8).max(1));
        Lane {
            inner: Arc::new(Inner {
                pool,
                resting: Mutex::new(Some(Vec::with_capacity(cap))),
                permits: Arc::new(Semaphore::new(cap)),
                waiting: AtomicUsize::new(0),
            }),
        }
    }

    /// A connection: one resting in the lane, a new one for the lane from the pool, or, with
    /// all of the lane's out, whichever comes first of one of them back and one from the pool.
    pub(super) async fn hold(&self) -> Result<Held, sqlx::Error> {
        let permit = match Arc::clone(&self.inner.permits).try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let _waiting = Waiting::start(&self.inner.waiting);
                tokio::select! {
                    biased;
                    p = Arc::clone(&self.inner.permits).acquire_owned() => match p {
                        Ok(p) => p,
                        // Closed: the store is closing; the pool answers for itself.
                        Err(_) => return Ok(Held::from_pool(self.inner.pool.acquire().await?)),
                    },
                    c = self.inner.pool.acquire() => return Ok(Held::from_pool(c?)),
                }
            }
        };
        let rested = self
            .inner
            .resting
            .lock()
            .expect("lane lock")
            .as_mut()
            .and_then(Vec::pop);
        let conn = match rested {
            Some(c) => c,
            None => self.inner.pool.acquire().await?,
        };
        Ok(Held {
            conn: Some(conn),
            home: Some((Arc::clone(&self.inner), permit)),
            clean: false,
            close_unfinished: false,
        })
    }

    /// How many callers wait now because every connection of the lane was out.
    pub(super) fn waiting(&self) -> u32 {
        self.inner.waiting.load(Ordering::Relaxed) as u32
    }

    /// How many connections rest in the lane now (in use to sqlx's pool, idle to us).
    pub(super) fn resting(&self) -> usize {
        self.inner
            .resting
            .lock()
            .expect("lane lock")
            .as_ref()
            .map_or(0, Vec::len)
    }

    /// Gives every resting connection back to the pool and keeps none from now on (before
    /// the pool closes: it waits for every connection it lent).
    pub(super) fn close(&self) {
        self.inner.permits.close();
        let rested = self.inner.resting.lock().expect("lane lock").take();
        drop(rested);
    }
}

impl Held {
    fn from_pool(conn: PoolConnection<Any>) -> Held {
        Held {
            conn: Some(conn),
            home: None,
            clean: false,
            close_unfinished: false,
        }
    }

    /// The caller opens a transaction with its own statements (a snapshot's `BEGIN ...
    /// REPEATABLE READ`), which sqlx does not know of and so cannot roll back: if this use does
    /// not run to its end (a cancelled read), the connection is closed, never handed on with
    /// that snapshot still open.
    pub(super) fn in_raw_transaction(&mut self) {
        self.close_unfinished = true;
    }

    /// The connection, for one use; [`Held::finished`] after it.
    pub(super) fn conn(&mut self) -> &mut AnyConnection {
        self.clean = false;
        self.conn.as_mut().expect("held until dropped")
    }

    /// The last use ran to its end with `result`: the connection may rest in the lane unless
    /// the result says it broke (then sqlx's pool tests it on the way back).
    pub(super) fn finished<T>(&mut self, result: &Result<T, sqlx::Error>) {
        self.clean = match result {
            Ok(_) => true,
            // The server answered: the exchange ran to its end (unless it said the session is
            // being terminated).
            Err(e @ sqlx::Error::Database(_)) => !super::dead_connection(e),
            Err(_) => false,
        };
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if !self.clean && self.close_unfinished {
            conn.close_on_drop();
        }
        let Some((inner, permit)) = self.home.take() else {
            return;
        };
        if self.clean && !inner.pool.is_closed() {
            let mut resting = inner.resting.lock().expect("lane lock");
            if let Some(resting) = resting.as_mut() {
                resting.push(conn);
                drop(permit);
                return;
            }
        }
        // Back to the pool (its ping flushes a queued rollback, or closes a broken one).
        drop(conn);
        drop(permit);
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // A resting connection goes back to the pool like any other (a spawned task): outside
        // a runtime there is none to spawn on, so it is detached and closed with its socket.
        let rested = self
            .resting
            .get_mut()
            .ok()
            .and_then(Option::take)
            .unwrap_or_default();
        if tokio::runtime::Handle::try_current().is_err() {
            for c in rested {
                drop(c.detach());
            }
        }
    }
}
