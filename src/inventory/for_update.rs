//! `for-update` and `for-update-queued`: one transaction that takes the item's row lock, and
//! holds it for as few statements as its guarantees allow.
//!
//! `SELECT ... FOR UPDATE` serialises every buyer on the hot row: the check and the write see
//! the same stock, so it cannot oversell. The cost is the queue, and the two designs differ in
//! where it forms:
//! - `for-update`, the post-mortem's first version and what teams ship: every buyer goes
//!   straight to the database, holds a pooled connection and an open transaction while it
//!   waits for the lock (PostgreSQL wakes every waiter queued on the row at each commit), and
//!   a rush drains the pool: the buyers who find no connection within `--acquire-timeout` get
//!   `busy: pool_exhausted`, the post-mortem's "something went wrong" page.
//! - `for-update-queued`, its application-side improvement (AliSQL's inventory hint queues
//!   hot-row updates inside the database; this is the same idea in the shop): a purchase first
//!   takes its turn in the item's queue ([`RowQueues`], `--row-lock-waiters`, 4): at most that
//!   many of this shop's purchases of one item are in a transaction at once, the others wait in
//!   arrival order without a connection, for at most `--lock-timeout` (then `busy:
//!   lock_timeout`, as a wait on the lock ends; a turn that comes just in time then waits at
//!   most that long on the lock). With the queue in the shop PostgreSQL spends about a third
//!   less CPU per order and the slowest answers come sooner (docs/lab/lab-log.md,
//!   "A queue in front of the row lock"). Which buyer gets a unit is still decided under the
//!   lock.
//!
//! Every statement run under the lock is paid by every buyer queued behind it, so the
//! transaction is ordered to keep the lock short:
//!
//! 1. `INSERT` the pending order, before the lock. Nobody else sees it until the commit, and
//!    every refusal rolls it back; the orders table has no foreign key to `items`, so the insert
//!    takes no lock on the item's row.
//! 2. `SELECT ... FOR UPDATE`: the lock, and the stock under it.
//! 3. One `UPDATE` deducts the stock only if the buyer's live orders, this new one included,
//!    stay within the limit: the limit check and the write are a single statement under the
//!    lock ([`crate::store::StoreTx::deduct_within_limit`]). When a release (cancel or
//!    expiry) committed since the order's insert — the lock statement reads the item's
//!    `released_at_ms` — the order is also stamped with the time the lock was granted (in
//!    the same statement on PostgreSQL; one primary-key `UPDATE` more on MySQL, whose
//!    multi-table form deadlocked), so the order rows' own times replay the sale in the order
//!    it happened (the oracle's peak oversell): a cancel committed while this buyer queued
//!    comes before this order, not after. Without releases nothing more is written.
//! 4. `COMMIT` releases the lock.
//!
//! So the lock is held for lock, update, commit: the statements of the bare hot-row benchmark
//! (`oversell bench shop --strategy for-update`).
//!
//! The guarantees are unchanged:
//! - stock: the stock check and the deduct run under the row lock, as before;
//! - the purchase limit stays exact: the limit check runs after the lock was granted, so it
//!   reads every order committed by the lock's previous holders (a buyer's orders are only
//!   ever committed by a transaction that held the lock, and it commits before releasing it).
//!   A concurrent purchase by the same buyer that has inserted its order but still waits for
//!   the lock is not counted; when its turn comes it counts this one;
//! - a sold-out answer still says `duplicate` when the buyer already holds the limit (read
//!   under the lock, as before: that is what a keyed retry after the stock ran out needs to
//!   get its order back, see [`super::idempotency`]).

//!
//! With a [`Defect`] built in (a testing aid), two branches marked `DEFECT` take the mistakes
//! teams make with this design: `get-then-decr` forgets the `FOR UPDATE` (the stock is read
//! unlocked, checked in the shop and decremented by the update after it); `limit-race`
//! counts the buyer's orders before the transaction and deducts without the limit condition.

use super::{CountGuard, Defect, InventoryError, Outcome, Settings};
use crate::model::{now_ms, Order, Purchase};
use crate::store::Store;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{Semaphore, SemaphorePermit};

/// How many queues a shop keeps: an item's queue is its id's stripe (`id mod STRIPES`), so the
/// memory is fixed whatever item ids buyers send, and items with ids within 1,024 of each
/// other never share one.
const STRIPES: usize = 1024;

/// The per-item queues in front of the row lock (see the module's documentation): each lets
/// `waiters` purchases at a time begin their transaction, the others wait in arrival order
/// (tokio's semaphore is fair). The default has none (`for-update`): every purchase waits in
/// the database.
#[derive(Clone, Default)]
pub struct RowQueues(Option<Arc<Queues>>);

struct Queues {
    stripes: Box<[Semaphore]>,
    /// Purchases waiting for their turn now, in every queue.
    waiting: AtomicUsize,
}

impl RowQueues {
    /// Queues that let `waiters` purchases of an item wait on its row lock at once (0: none,
    /// every purchase goes straight to the database's lock).
    pub fn new(waiters: u32) -> RowQueues {
        RowQueues((waiters > 0).then(|| {
            Arc::new(Queues {
                stripes: (0..STRIPES)
                    .map(|_| Semaphore::new(waiters as usize))
                    .collect(),
                waiting: AtomicUsize::new(0),
            })
        }))
    }

    /// Purchases waiting for their turn now (`oversell_db_pool_waiting` counts them: they wait
    /// to get at the database).
    pub fn waiting(&self) -> usize {
        self.0
            .as_ref()
            .map_or(0, |q| q.waiting.load(Ordering::SeqCst))
    }

    /// Waits for `item`'s turn, at most `limit`. `Ok(None)` without queues; `Err(())` when
    /// the wait ran out.
    async fn turn(
        &self,
        item: i64,
        limit: std::time::Duration,
    ) -> Result<Option<SemaphorePermit<'_>>, ()> {
        let Some(queues) = &self.0 else {
            return Ok(None);
        };
        let queue = &queues.stripes[item.rem_euclid(STRIPES as i64) as usize];
        let _counted = CountGuard::new(&queues.waiting);
        match tokio::time::timeout(limit, queue.acquire()).await {
            // A semaphore that is never closed only fails by being closed: no queue then.
            Ok(permit) => Ok(permit.ok()),
            Err(_) => Err(()),
        }
    }
}

pub(super) async fn purchase(
    store: &Store,
    settings: &Settings,
    queues: &RowQueues,
    p: &Purchase,
) -> Result<Outcome, InventoryError> {
    if settings.defect == Some(Defect::LimitRace) {
        return limit_race(store, settings, p).await;
    }
    let get_then_decr = settings.defect == Some(Defect::GetThenDecr);
    // The item's turn, taken before the transaction begins and held until it has ended (the
    // end of this function): the next in the queue goes on once this purchase's lock is
    // released.
    let _turn = if get_then_decr {
        None
    } else {
        match queues.turn(p.item_id, store.lock_timeout()).await {
            Ok(turn) => turn,
            Err(()) => return Ok(Outcome::Busy("lock_timeout")),
        }
    };
    let mut tx = store.begin().await?;
    let order = Order::pending(p);
    tx.insert_order(&order).await?;
    let locked = if get_then_decr {
        // DEFECT get-then-decr: `FOR UPDATE` forgotten: a plain read of the stock, checked
        // below, then decremented by an update that trusts it.
        tx.read_item(p.item_id).await?.map(|item| (item, 0))
    } else {
        tx.lock_for_purchase(p.item_id).await?
    };
    let Some((item, released_at_ms)) = locked else {
        tx.rollback().await?;
        return Ok(Outcome::UnknownItem);
    };
    if get_then_decr && item.stock >= p.qty {
        // The defect's read, kept on its order: the proof of its oversell shows it.
        tx.note_stock_read(&order.id, item.stock).await?;
    }
    if item.stock < p.qty {
        // Our own pending order is counted too: take it back out.
        let held = tx.held_by_user(p.item_id, &p.user_id).await? - p.qty;
        tx.rollback().await?;
        return Ok(if held + p.qty > item.purchase_limit {
            Outcome::Duplicate
        } else {
            Outcome::SoldOut
        });
    }
    // Its units are held from now, the lock granted, not from the insert before it. When a
    // release committed since that insert, the order is stamped with this time, so the
    // release comes first in the orders' own times (otherwise the insert's time stands, and
    // no second write is paid).
    let stamp = (released_at_ms >= order.created_at_ms).then(now_ms);
    if !settings.work.is_zero() {
        tokio::time::sleep(settings.work).await;
    }
    if !tx
        .deduct_within_limit(&order, stamp, item.purchase_limit)
        .await?
    {
        tx.rollback().await?;
        return Ok(Outcome::Duplicate);
    }
    tx.commit().await?;
    Ok(Outcome::Reserved { order_id: order.id })
}

/// DEFECT limit-race: the buyer's holdings counted before the transaction, a moment of
/// business logic, then the row lock, the stock check (still exact) and a deduct with no
/// limit condition: the same buyer's concurrent orders all pass the count.
async fn limit_race(
    store: &Store,
    settings: &Settings,
    p: &Purchase,
) -> Result<Outcome, InventoryError> {
    let Some(item) = store.item(p.item_id).await? else {
        return Ok(Outcome::UnknownItem);
    };
    if store.held_by_user(p.item_id, &p.user_id).await? + p.qty > item.purchase_limit {
        return Ok(Outcome::Duplicate);
    }
    tokio::time::sleep(settings.naive_gap).await;
    let mut tx = store.begin().await?;
    let Some(item) = tx.lock_item(p.item_id).await? else {
        tx.rollback().await?;
        return Ok(Outcome::UnknownItem);
    };
    if item.stock < p.qty {
        tx.rollback().await?;
        return Ok(Outcome::SoldOut);
    }
    tx.deduct(p.item_id, p.qty).await?;
    let order = Order::pending(p);
    tx.insert_order(&order).await?;
    tx.commit().await?;
    Ok(Outcome::Reserved { order_id: order.id })
}
