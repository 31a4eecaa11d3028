//! Waiting for a request's intended send, to tens of microseconds.
//!
//! tokio's timer ticks once a millisecond and rounds every deadline up to the next tick, and
//! its driver parks for whole milliseconds: a buyer woken by `sleep_until` goes out 0–2 ms
//! late before anything else delays it, which was most of the generator's own send lag on a
//! quiet machine. [`Pace::Precise`] sleeps on tokio's timer until [`COARSE`] before the
//! deadline, then hands the last stretch to one pacer thread that waits on a condition
//! variable with the deadline as its timeout (the kernel's timer slack, ~50 µs) and wakes the
//! task. [`Pace::Timer`] is tokio's timer alone: what tests on a paused clock need (the pacer
//! keeps real time).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How far before a deadline tokio's timer hands over to the pacer thread: above its tick and
/// park rounding.
pub const COARSE: Duration = Duration::from_millis(3);

/// How a journey waits for a request's intended send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// tokio's timer, then the pacer thread for the last [`COARSE`].
    Precise,
    /// tokio's timer alone (a paused clock in tests).
    Timer,
}

impl Pace {
    /// [`Pace::Precise`], or [`Pace::Timer`] when `OVERSELL_PACE=timer` (to measure what the
    /// pacer is worth: `docs/src/running/generator.md`).
    pub fn from_env() -> Pace {
        match std::env::var("OVERSELL_PACE").as_deref() {
            Ok("timer") => Pace::Timer,
            _ => Pace::Precise,
        }
    }

    /// Returns at `deadline` (at once if it has passed). Boxed: a journey holds one of these
    /// at every wait, and its own future stays small (a buyer on its way is one small task).
    pub fn until(self, deadline: Instant) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(async move {
            if self == Pace::Timer {
                return tokio::time::sleep_until(deadline).await;
            }
            if let Some(early) = deadline.checked_sub(COARSE) {
                if early > Instant::now() {
                    tokio::time::sleep_until(early).await;
                }
            }
            if Instant::now() >= deadline {
                return;
            }
            let (tx, rx) = oneshot::channel();
            pacer().push(deadline.into_std(), tx);
            // The pacer never drops a sender unsent: an error here cannot happen, and would
            // only mean "now".
            let _ = rx.await;
        })
    }
}

/// One waiting task: its deadline, the order it came in, and how to wake it.
struct Entry {
    at: std::time::Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The waiting tasks, earliest first, and the thread that wakes them.
struct Pacer {
    queue: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    changed: Condvar,
}

/// The process's one pacer, its thread started on first use.
fn pacer() -> &'static Pacer {
    static PACER: OnceLock<&'static Pacer> = OnceLock::new();
    PACER.get_or_init(|| {
        let p: &'static Pacer = Box::leak(Box::new(Pacer {
            queue: Mutex::new((BinaryHeap::new(), 0)),
            changed: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("oversell-pacer".into())
            .spawn(move || p.run())
            .expect("the pacer thread starts");
        p
    })
}

impl Pacer {
    fn push(&self, at: std::time::Instant, wake: oneshot::Sender<()>) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.1 += 1;
        let seq = q.1;
        let earliest = q.0.peek().is_none_or(|Reverse(e)| at < e.at);
        q.0.push(Reverse(Entry { at, seq, wake }));
        drop(q);
        if earliest {
            self.changed.notify_one();
        }
    }

    /// Wakes every task whose deadline has come, and sleeps until the next one.
    fn run(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let next = q.0.peek().map(|Reverse(e)| e.at);
            match next {
                None => q = self.changed.wait(q).unwrap_or_else(|e| e.into_inner()),
                Some(at) => {
                    let now = std::time::Instant::now();
                    if at <= now {
                        while q.0.peek().is_some_and(|Reverse(e)| e.at <= now) {
                            if let Some(Reverse(e)) = q.0.pop() {
                                let _ = e.wake.send(());
                            }
                        }
                    } else {
                        q = self
                            .changed
                            .wait_timeout(q, at - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn precise_waits_end_at_their_deadline_in_order_and_never_before() {
        let start = Instant::now();
        let deadlines: Vec<Instant> = [7u64, 2, 5, 0, 11]
            .iter()
            .map(|ms| start + Duration::from_millis(*ms))
            .collect();
        let woke: Vec<_> = deadlines
            .iter()
            .map(|d| {
                let d = *d;
                tokio::spawn(async move {
                    Pace::Precise.until(d).await;
                    Instant::now()
                })
            })
            .collect();
        for (d, w) in deadlines.iter().zip(woke) {
            let at = w.await.unwrap();
            assert!(at >= *d, "woken {:?} early", *d - at);
        }
    }
}
