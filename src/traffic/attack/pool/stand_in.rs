//! Test stand-ins for the goose senders: the pool lends them as it lends goose users, and each
//! request one of them is lent for is handed to the test, which answers it (on tokio's paused
//! clock, with no HTTP).

use super::{new, Answered, Job, Jobs, Pool, PoolGone, Saturation, Sender, Via};
use crate::traffic::recorder::Recorder;
use std::sync::Arc;
use tokio::time::Instant;

/// A request handed to a test's stand-in senders, and where its answer goes.
pub(in crate::traffic::attack) struct Handed {
    pub(in crate::traffic::attack) job: Job,
    pub(in crate::traffic::attack) reply: tokio::sync::oneshot::Sender<Answered>,
}

/// A test's stand-ins for the goose senders: the pool lends them as it lends goose users, and
/// each request one of them is lent for comes out here, to be answered.
pub(in crate::traffic::attack) struct StandIns(tokio::sync::mpsc::UnboundedReceiver<Handed>);

impl StandIns {
    /// The next request a stand-in was lent for; `None` once the pool has closed and every
    /// request was taken.
    pub(in crate::traffic::attack) async fn next(&mut self) -> Option<Handed> {
        self.0.recv().await
    }
}

impl Pool {
    pub(super) async fn hand_to_stand_ins(&self, job: Job) -> Result<Answered, PoolGone> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let to = self
            .stand_ins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or(PoolGone)?;
        to.send(Handed { job, reply }).map_err(|_| PoolGone)?;
        answer.await.map_err(|_| PoolGone)
    }
}

/// A pool of `senders` test stand-ins, lent as goose users are: the buyers' handle, the
/// requests they are lent for, and how busy they are.
pub(in crate::traffic::attack) fn stand_ins(senders: usize) -> (Jobs, StandIns, Arc<Saturation>) {
    let recorder = Arc::new(Recorder::new(Instant::now()));
    let (jobs, pool, saturation) = new(senders, recorder);
    let (to, from) = tokio::sync::mpsc::unbounded_channel();
    *pool.stand_ins.lock().unwrap() = Some(to);
    for _ in 0..senders {
        pool.put(Sender {
            via: Via::StandIn,
            bases: Vec::new(),
        });
    }
    (jobs, StandIns(from), saturation)
}

impl Jobs {
    /// Ends the pool as a failed goose attack does ([`Pool::gone`]).
    pub(in crate::traffic::attack) fn end(&self) {
        self.pool.gone();
    }
}
