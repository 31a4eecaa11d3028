//! The queue between the buyers and the senders: many buyers push, many senders pop, and a
//! request pushed while a sender is idle wakes exactly that one sender.
//!
//! A sender that finds the queue empty waits on one [`Notify`] (an intrusive list: joining and
//! leaving it is O(1)); a push wakes the sender that went idle last ([`Notify::notify_last`]:
//! its task is the likeliest still in the caches). One wake-up a request, where the queue it
//! replaces (flume, with the senders taking turns on a mutex so that only one sat in flume's
//! list of waiting receivers, which each receive scans whole) cost two: the sender that took
//! the request, and the next sender's turn handed over as the first let go of it: ~14 % of the
//! generator's CPU a request. Senders woken one a request take a burst at once, so it holds up
//! only with their connects limited ([`crate::traffic::target::senders_client`]): without the
//! limit a few late requests at the opening tipped it into a connection storm
//! (docs/src/performance/overview.md, "4 Dec 2026, morning").
//!
//! It closes like a channel: once every [`Tx`] is dropped, receivers take what is left and then
//! see [`Closed`]; once every [`Rx`] is dropped, a push is refused and whatever was still queued
//! is dropped (its buyers' answers will never come, and they learn it at once).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// Every pushing end is dropped and the queue is empty: nothing more will come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Closed;

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Idle receivers wait here; a push wakes one.
    ready: Notify,
}

struct State<T> {
    items: VecDeque<T>,
    /// Every [`Tx`] is dropped.
    closed: bool,
    /// Every [`Rx`] is dropped.
    gone: bool,
}

impl<T> Shared<T> {
    fn state(&self) -> MutexGuard<'_, State<T>> {
        // A panic while the lock was held cannot leave the queue half-changed (every change
        // under it is one push, pop or flag), so a poisoned lock is used as it is.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pushing end; clones share the queue, which closes when the last is dropped.
pub(super) struct Tx<T>(Arc<TxEnd<T>>);

struct TxEnd<T>(Arc<Shared<T>>);

/// The popping end; clones share the queue, which refuses pushes once the last is dropped.
pub(super) struct Rx<T>(Arc<RxEnd<T>>);

struct RxEnd<T>(Arc<Shared<T>>);

impl<T> Clone for Tx<T> {
    fn clone(&self) -> Self {
        Tx(self.0.clone())
    }
}

impl<T> Clone for Rx<T> {
    fn clone(&self) -> Self {
        Rx(self.0.clone())
    }
}

/// A new, empty queue.
pub(super) fn unbounded<T>() -> (Tx<T>, Rx<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            items: VecDeque::new(),
            closed: false,
            gone: false,
        }),
        ready: Notify::new(),
    });
    (
        Tx(Arc::new(TxEnd(shared.clone()))),
        Rx(Arc::new(RxEnd(shared))),
    )
}

impl<T> Tx<T> {
    /// Queues `item` and wakes an idle receiver; `Err(item)` once every receiver is gone.
    pub(super) fn send(&self, item: T) -> Result<(), T> {
        let shared = &(self.0).0;
        {
            let mut s = shared.state();
            if s.gone {
                return Err(item);
            }
            s.items.push_back(item);
        }
        shared.ready.notify_last();
        Ok(())
    }

    /// Items queued and not yet taken.
    pub(super) fn len(&self) -> usize {
        (self.0).0.state().items.len()
    }

    /// Whether every receiver is gone.
    pub(super) fn is_disconnected(&self) -> bool {
        (self.0).0.state().gone
    }
}

impl<T> Rx<T> {
    /// The next item, waiting for one if the queue is empty; [`Closed`] once every [`Tx`] is
    /// dropped and nothing is left.
    pub(super) async fn recv_async(&self) -> Result<T, Closed> {
        let shared = &(self.0).0;
        loop {
            // Registered before the queue is looked at, so a push between the look and the
            // wait is not missed.
            let notified = shared.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = shared.state();
                if let Some(item) = s.items.pop_front() {
                    let more = !s.items.is_empty();
                    drop(s);
                    if more {
                        // This receiver may have taken the wake-up meant for another item's
                        // receiver: pass one on so a queued item never waits for a push.
                        shared.ready.notify_last();
                    }
                    return Ok(item);
                }
                if s.closed {
                    return Err(Closed);
                }
            }
            notified.await;
        }
    }
}

impl<T> Drop for TxEnd<T> {
    fn drop(&mut self) {
        self.0.state().closed = true;
        self.0.ready.notify_waiters();
    }
}

impl<T> Drop for RxEnd<T> {
    fn drop(&mut self) {
        // Dropped outside the lock: an item's own drop may wake its buyer.
        let left = {
            let mut s = self.0.state();
            s.gone = true;
            std::mem::take(&mut s.items)
        };
        drop(left);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn items_come_out_in_order_then_closed_once_every_sender_is_dropped() {
        // Arrange
        let (tx, rx) = unbounded();
        let tx2 = tx.clone();
        tx.send(1).unwrap();
        tx2.send(2).unwrap();

        // Act
        drop(tx);
        let first = rx.recv_async().await;
        drop(tx2);
        let second = rx.recv_async().await;
        let then = rx.recv_async().await;

        // Assert
        assert_eq!((first, second, then), (Ok(1), Ok(2), Err(Closed)));
    }

    #[tokio::test]
    async fn a_waiting_receiver_is_woken_by_a_push_and_by_the_close() {
        // Arrange: two receivers waiting on an empty queue.
        let (tx, rx) = unbounded::<u32>();
        let waiting = |rx: Rx<u32>| tokio::spawn(async move { rx.recv_async().await });
        let (a, b) = (waiting(rx.clone()), waiting(rx.clone()));
        tokio::time::sleep(Duration::from_millis(20)).await;

        // Act: one push, then the close.
        tx.send(7).unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(tx);
        let got = [a.await.unwrap(), b.await.unwrap()];

        // Assert: one took the item, the other saw the close.
        assert!(
            got.contains(&Ok(7)) && got.contains(&Err(Closed)),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn every_item_pushed_at_once_reaches_one_of_the_idle_receivers() {
        // Arrange: 8 idle receivers, each taking items until the close.
        let (tx, rx) = unbounded::<u32>();
        let receivers: Vec<_> = (0..8)
            .map(|_| {
                let rx = rx.clone();
                tokio::spawn(async move {
                    let mut got = Vec::new();
                    while let Ok(i) = rx.recv_async().await {
                        got.push(i);
                        tokio::task::yield_now().await;
                    }
                    got
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20)).await;

        // Act
        for i in 0..1000 {
            tx.send(i).unwrap();
        }
        drop(tx);
        let mut all = Vec::new();
        for r in receivers {
            all.extend(r.await.unwrap());
        }

        // Assert
        all.sort_unstable();
        assert_eq!(all, (0..1000).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn once_every_receiver_is_gone_a_push_is_refused_and_the_queued_items_dropped() {
        // Arrange: a queued item whose drop is seen.
        let (tx, rx) = unbounded();
        let (told, dropped) = tokio::sync::oneshot::channel::<()>();
        tx.send(told).unwrap();

        // Act
        drop(rx);

        // Assert
        assert!(tx.is_disconnected());
        assert!(dropped.await.is_err(), "the queued item was dropped");
        let (again, _) = tokio::sync::oneshot::channel::<()>();
        assert!(tx.send(again).is_err());
        assert_eq!(tx.len(), 0);
    }
}
