//! How a buyer's request reaches a sender: handed straight to the sender that went idle last,
//! or queued when none is idle.
//!
//! An idle sender leaves a one-shot mailbox on a stack and sleeps on it; a buyer's request
//! pops the top mailbox and wakes that sender alone — one wake-up per request, where a shared
//! queue with the senders taking turns on it woke the next sender in line as well. The stack
//! keeps the same few senders busy at a low rate (the most recently idle one, its state still
//! in the cache) and the others asleep, so a pool sized for the peak costs nothing at the
//! trough: the pool sizes itself from the rate and the service time. A request that finds no
//! idle sender waits in a queue, first in first out, taken by the next sender that is done.
//! The buyers' end ([`Jobs`](super::pool::Jobs)) and the senders' end ([`Queue`]) close as a
//! channel's do: once every buyer's handle is dropped and the queue is empty the senders stop;
//! once every sender's handle is dropped a request is refused and the queued ones are dropped
//! (their buyers see [`PoolGone`](super::pool::PoolGone)).

use super::pool::{Job, PoolGone};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// The requests waiting and the senders idle.
#[derive(Default)]
struct State {
    /// Requests no sender was idle for, oldest first.
    waiting: VecDeque<Job>,
    /// Idle senders' mailboxes, the most recently idle last.
    idle: Vec<oneshot::Sender<Job>>,
    /// Requests handed to an idle sender that has not taken them out of its mailbox yet:
    /// counted with the queued ones (a request is waiting until a sender holds it).
    handed: usize,
    /// Every buyer's handle is dropped: no request will come any more.
    closed: bool,
    /// Every sender's handle is dropped: no request will be taken any more.
    gone: bool,
}

#[derive(Default)]
struct Hub(Mutex<State>);

impl Hub {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding it leaves the lists as they were: go on with them.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Closes the buyers' end when the last buyer's handle drops.
struct BuyersEnd(Arc<Hub>);

impl Drop for BuyersEnd {
    fn drop(&mut self) {
        let idle = {
            let mut st = self.0.lock();
            st.closed = true;
            std::mem::take(&mut st.idle)
        };
        // Every idle sender wakes (its mailbox dropped), finds the queue empty and stops.
        drop(idle);
    }
}

/// Closes the senders' end when the last sender's handle drops.
struct SendersEnd(Arc<Hub>);

impl SendersEnd {
    /// No request will be taken any more: refuse new ones, drop the queued ones.
    fn abandon(&self) {
        let waiting = {
            let mut st = self.0.lock();
            st.gone = true;
            st.idle.clear();
            std::mem::take(&mut st.waiting)
        };
        drop(waiting);
    }
}

impl Drop for SendersEnd {
    fn drop(&mut self) {
        self.abandon();
    }
}

/// The buyers' end: hands a request over.
#[derive(Clone)]
pub(super) struct Give(Arc<BuyersEnd>);

/// The senders' end: takes the next request.
#[derive(Clone)]
pub(super) struct Queue(Arc<SendersEnd>);

/// A new hand-off: the buyers' end and the senders' end.
pub(super) fn new() -> (Give, Queue) {
    let hub = Arc::new(Hub::default());
    (
        Give(Arc::new(BuyersEnd(hub.clone()))),
        Queue(Arc::new(SendersEnd(hub))),
    )
}

impl Give {
    /// Hands `job` to the most recently idle sender or, if none is, queues it; `mark` is
    /// called first with the number of requests queued ahead of it. With no sender left the
    /// job is dropped (its buyer sees no answer).
    pub(super) fn give(
        &self,
        mut job: Job,
        mark: impl FnOnce(&mut Job, usize),
    ) -> Result<(), PoolGone> {
        let mut st = (self.0).0.lock();
        if st.gone {
            return Err(PoolGone);
        }
        mark(&mut job, st.waiting.len() + st.handed);
        while let Some(mailbox) = st.idle.pop() {
            match mailbox.send(job) {
                Ok(()) => {
                    st.handed += 1;
                    return Ok(());
                }
                // That sender stopped waiting (its task ended): the next one.
                Err(back) => job = back,
            }
        }
        st.waiting.push_back(job);
        Ok(())
    }

    /// Requests waiting for a sender now (queued, or handed over and not taken yet).
    pub(super) fn queued(&self) -> usize {
        let st = (self.0).0.lock();
        st.waiting.len() + st.handed
    }

    /// Whether no sender is left to take a request.
    pub(super) fn is_gone(&self) -> bool {
        (self.0).0.lock().gone
    }
}

impl Queue {
    /// No sender will take a request any more (the pool failed), whoever still holds this end:
    /// the queued requests are dropped (their buyers see the pool gone), new ones refused.
    pub(super) fn abandon(&self) {
        self.0.abandon();
    }

    /// The next request: the oldest queued one, or the next handed to this sender once it is
    /// idle; `None` once every buyer's handle is dropped and nothing is queued.
    pub(super) async fn next(&self) -> Option<Job> {
        loop {
            let mailbox = {
                let mut st = (self.0).0.lock();
                if let Some(job) = st.waiting.pop_front() {
                    return Some(job);
                }
                if st.closed {
                    return None;
                }
                let (tx, rx) = oneshot::channel();
                st.idle.push(tx);
                rx
            };
            match mailbox.await {
                Ok(job) => {
                    (self.0).0.lock().handed -= 1;
                    return Some(job);
                }
                // Closed meanwhile: look again (a request queued just before is still taken).
                Err(_) => continue,
            }
        }
    }
}
