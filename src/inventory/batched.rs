//! `batched`: app-level group commit on the database alone.
//!
//! Each item has a queue (a tokio mpsc channel and one task, created on the item's first
//! purchase). The task takes the first waiting purchase, collects more for at most
//! `--batch-window` or until `--batch-max`, and applies them all in ONE transaction:
//!
//! 1. `SELECT ... FOR UPDATE` on the item: its stock and purchase limit, under the row lock;
//! 2. one read of the orders that bear on the batch: its buyers' (their holdings, for the
//!    limit) and those bought with its `Idempotency-Key`s (replays);
//! 3. [`decide`], in arrival order: a key that already bought an order (in the database or
//!    earlier in this batch) gets that order back; a buyer over the limit is a duplicate; a
//!    purchase the remaining stock cannot cover is sold out (when stock runs short the batch
//!    splits: the first purchases that fit are granted, the rest refused); the others are
//!    granted;
//! 4. one conditional update for the granted total (`stock = stock - :total WHERE stock >=
//!    :total`), one multi-row order insert, commit;
//!
//! then answers each buyer through its oneshot. The hot row is locked once per batch instead
//! of once per buyer, so one lock hold serves up to `--batch-max` buyers: the technique large
//! shops use on a hot row when they cannot put Redis in front.
//!
//! A batch whose transaction fails (the database down, a lock wait timed out, a refused row)
//! moves nothing (it rolls back) and answers every waiter `busy: batch_failed` (503; a retry
//! with the same key is safe). The task warns, counts `oversell_batch_failures_total`, backs
//! off and takes the next batch: it never dies on a database error. A purchase waits for its
//! answer in the shop's in-flight count, so shutdown, which waits for that count to reach
//! zero, drains every queue.

use super::idempotency::replay_of;
use super::{Outcome, Settings};
use crate::model::{Order, Purchase};
use crate::store::{Store, StoreError};
use crate::telemetry::shop_metrics;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// Purchases a queue holds before `purchase` waits for room.
const QUEUE_CAPACITY: usize = 8192;

/// One purchase waiting for its batch.
struct Job {
    purchase: Purchase,
    reply: oneshot::Sender<Outcome>,
}

/// The per-item queues of one shop.
#[derive(Clone)]
pub struct Batcher {
    store: Store,
    window: Duration,
    max: usize,
    queues: Arc<Mutex<HashMap<i64, mpsc::Sender<Job>>>>,
}

impl Batcher {
    pub(super) fn new(store: Store, settings: &Settings) -> Self {
        Batcher {
            store,
            window: settings.batch_window,
            max: settings.batch_max.max(1),
            queues: Arc::default(),
        }
    }

    /// Queues a purchase on its item's batch and waits for the answer.
    pub(super) async fn purchase(&self, p: &Purchase) -> Outcome {
        let (reply, answer) = oneshot::channel();
        let mut job = Job {
            purchase: p.clone(),
            reply,
        };
        // A queue whose task is gone (it cannot end while its sender lives, but a panic
        // would) is replaced once.
        for _ in 0..2 {
            let queue = self.queue(p.item_id);
            match queue.send(job).await {
                Ok(()) => {
                    return answer.await.unwrap_or(Outcome::Busy("batch_failed"));
                }
                Err(mpsc::error::SendError(back)) => {
                    job = back;
                    let mut queues = self.queues.lock().expect("batch queues poisoned");
                    if queues
                        .get(&p.item_id)
                        .is_some_and(|q| q.same_channel(&queue))
                    {
                        queues.remove(&p.item_id);
                    }
                }
            }
        }
        Outcome::Busy("batch_failed")
    }

    fn queue(&self, item: i64) -> mpsc::Sender<Job> {
        let mut queues = self.queues.lock().expect("batch queues poisoned");
        queues
            .entry(item)
            .or_insert_with(|| {
                let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
                tokio::spawn(run(self.store.clone(), item, rx, self.window, self.max));
                tx
            })
            .clone()
    }
}

/// The task of one item's queue: batch, apply, answer, until every sender is gone.
async fn run(store: Store, item: i64, mut rx: mpsc::Receiver<Job>, window: Duration, max: usize) {
    let mut backoff = Duration::ZERO;
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        let deadline = Instant::now() + window;
        while jobs.len() < max {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(mpsc::error::TryRecvError::Disconnected) => break,
                Err(mpsc::error::TryRecvError::Empty) => {
                    match tokio::time::timeout_at(deadline, rx.recv()).await {
                        Ok(Some(job)) => jobs.push(job),
                        Ok(None) | Err(_) => break,
                    }
                }
            }
        }
        let purchases: Vec<&Purchase> = jobs.iter().map(|j| &j.purchase).collect();
        metrics::histogram!(shop_metrics::BATCH_SIZE).record(jobs.len() as f64);
        let answers = match apply(&store, item, &purchases).await {
            Ok(answers) => {
                backoff = Duration::ZERO;
                answers
            }
            Err(e) => {
                metrics::counter!(shop_metrics::BATCH_FAILURES).increment(1);
                tracing::warn!(
                    item, batch = jobs.len(), error = %e,
                    "a batch failed: nothing moved, every buyer in it answered busy"
                );
                backoff = (backoff * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
                vec![Outcome::Busy("batch_failed"); jobs.len()]
            }
        };
        for (job, answer) in jobs.into_iter().zip(answers) {
            // A buyer that stopped waiting cannot be told; its order stands (its key finds it).
            let _ = job.reply.send(answer);
        }
        if !backoff.is_zero() {
            tokio::time::sleep(backoff).await;
        }
    }
}

/// One transaction for a whole batch (see the module's notes). Answers in `batch` order.
async fn apply(store: &Store, item: i64, batch: &[&Purchase]) -> Result<Vec<Outcome>, StoreError> {
    let mut tx = store.begin().await?;
    let Some(locked) = tx.lock_item(item).await? else {
        tx.rollback().await?;
        return Ok(vec![Outcome::UnknownItem; batch.len()]);
    };
    let users: Vec<&str> = unique(batch.iter().map(|p| p.user_id.as_str()));
    let keys: Vec<&str> = unique(batch.iter().filter_map(|p| p.idempotency_key.as_deref()));
    let existing = tx.batch_orders(item, &users, &keys).await?;
    let decisions = decide(batch, locked.stock, locked.purchase_limit, &existing);
    let granted: Vec<&Order> = decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Grant(order) => Some(order),
            Decision::Answer(_) => None,
        })
        .collect();
    let total: i64 = granted.iter().map(|o| o.qty).sum();
    if total == 0 {
        tx.rollback().await?;
    } else {
        // Under the row lock the stock read above still holds, so this cannot miss; the
        // condition stays as the guard that no batch ever takes more than there is.
        if !tx.conditional_deduct(item, total).await? {
            return Err(StoreError::Sql(sqlx::Error::Protocol(format!(
                "item {item}: the stock changed under its row lock"
            ))));
        }
        tx.insert_orders(&granted).await?;
        tx.commit().await?;
    }
    Ok(decisions
        .into_iter()
        .map(|d| match d {
            Decision::Grant(order) => Outcome::Reserved { order_id: order.id },
            Decision::Answer(outcome) => outcome,
        })
        .collect())
}

fn unique<'a>(values: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    values.filter(|v| seen.insert(*v)).collect()
}

/// What a batch does with one purchase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Units granted: this order is inserted.
    Grant(Order),
    /// Nothing moves for this purchase; this is its answer.
    Answer(Outcome),
}

/// Decides a batch in arrival order, as the purchases would be decided one by one under the
/// row lock (`for-update`'s order of checks): `stock` and `limit` are the item's, read under
/// the lock; `existing` holds the orders of the batch's buyers and of its keys.
///
/// - A key that bought an order (in `existing` or earlier in the batch) is answered with that
///   order (or `key reused` for another buyer or quantity). A key whose order was cancelled or
///   expired gets it back only where a new attempt would have been granted, else that
///   attempt's refusal: never a second order.
/// - A buyer whose live units plus this purchase exceed `limit` is a duplicate.
/// - A purchase the remaining stock cannot cover is sold out; a smaller one after it may
///   still fit.
pub(crate) fn decide(
    batch: &[&Purchase],
    stock: i64,
    limit: i64,
    existing: &[Order],
) -> Vec<Decision> {
    let mut held: HashMap<&str, i64> = HashMap::new();
    // Key → (order id, buyer, quantity) of the live order it bought, in the database or
    // granted earlier in this batch.
    let mut bought: HashMap<String, (String, String, i64)> = HashMap::new();
    let mut lapsed: HashMap<&str, &Order> = HashMap::new();
    for o in existing {
        if o.status.holds_stock() {
            *held.entry(o.user_id.as_str()).or_default() += o.qty;
        }
        if let Some(key) = o.idempotency_key.as_deref() {
            if o.status.holds_stock() {
                bought.insert(key.to_string(), (o.id.clone(), o.user_id.clone(), o.qty));
            } else {
                lapsed.insert(key, o);
            }
        }
    }
    let mut remaining = stock;
    let mut decisions = Vec::with_capacity(batch.len());
    for p in batch {
        let key = p.idempotency_key.as_deref();
        if let Some((id, user, qty)) = key.and_then(|k| bought.get(k)) {
            decisions.push(Decision::Answer(replay_of(id, user, *qty, p)));
            continue;
        }
        let user_held = held.get(p.user_id.as_str()).copied().unwrap_or(0);
        let refusal = if user_held + p.qty > limit {
            Some(Outcome::Duplicate)
        } else if p.qty > remaining {
            Some(Outcome::SoldOut)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            decisions.push(Decision::Answer(refusal));
            continue;
        }
        if let Some(old) = key.and_then(|k| lapsed.get(k)) {
            decisions.push(Decision::Answer(replay_of(
                &old.id,
                &old.user_id,
                old.qty,
                p,
            )));
            continue;
        }
        remaining -= p.qty;
        *held.entry(p.user_id.as_str()).or_default() += p.qty;
        let order = Order::pending(p);
        if let Some(key) = key {
            bought.insert(
                key.to_string(),
                (order.id.clone(), p.user_id.clone(), p.qty),
            );
        }
        decisions.push(Decision::Grant(order));
    }
    decisions
}

#[cfg(test)]
mod tests;
