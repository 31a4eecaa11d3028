//! Waiting for a request's intended send, to a fraction of a millisecond, on the runtime's own
//! event loop.
//!
//! tokio's timer ticks once a millisecond and rounds every deadline up to the next tick, and
//! its driver parks for whole milliseconds: a buyer woken by `sleep_until` goes out 0–2 ms
//! late before anything else delays it. [`Pace::Precise`] sleeps on tokio's timer until
//! [`COARSE`] before the deadline, then waits on the attack's [`Pacer`]: one `timerfd` in the
//! runtime's own reactor, armed for the earliest deadline waiting (plus [`GROUP`], so the
//! buyers due within it go out on one wake-up). When it fires, the worker that was parked in
//! `epoll_wait` wakes the pacer's task, which wakes every buyer whose deadline has come, on
//! that same worker: no thread of its own, no wake from another thread. A worker that wakes
//! for anything else (an answer, tokio's timer) lets the buyers already due go at once
//! ([`on_unpark`], the runtime's unpark hook), and moves the timerfd on to the next one: most
//! buyers then need no wake-up of their own, and go out sooner. (The pacer it
//! replaces was a thread of its own waking each buyer across threads: two thread wake-ups a
//! request, which doubled the generator's CPU per request.) A buyer never goes out before its
//! deadline. [`Pace::Timer`] is tokio's timer alone: what tests on a paused clock need (a
//! timerfd keeps real time).

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// How far before a deadline tokio's timer hands over to the pacer: above its tick and park
/// rounding.
pub const COARSE: Duration = Duration::from_millis(3);

/// How long after the earliest waiting deadline the pacer fires: every buyer due by then goes
/// out on the same wake-up. The most a buyer waits past its deadline on the pacer's account
/// (the kernel's timer slack, ~50 µs, comes on top).
pub const GROUP: Duration = Duration::from_micros(200);

/// How a journey waits for a request's intended send.
#[derive(Clone)]
pub enum Pace {
    /// tokio's timer, then the attack's pacer for the last [`COARSE`].
    Precise(Pacer),
    /// tokio's timer alone (a paused clock in tests).
    Timer,
}

impl Pace {
    /// [`Pace::Precise`] on a pacer started on the current runtime, or [`Pace::Timer`] when
    /// `OVERSELL_PACE=timer` (to measure what the pacer is worth:
    /// `docs/src/running/generator.md`) or, with a warning, when the OS gives no timerfd.
    pub fn from_env() -> Pace {
        match std::env::var("OVERSELL_PACE").as_deref() {
            Ok("timer") => Pace::Timer,
            _ => Pace::start(),
        }
    }

    /// [`Pace::Precise`] on a pacer started on the current runtime, or [`Pace::Timer`] (with
    /// a warning) when the OS gives no timerfd.
    pub fn start() -> Pace {
        match Pacer::start() {
            Ok(p) => Pace::Precise(p),
            Err(e) => {
                tracing::warn!(
                    "no timerfd for the pacer ({e}): buyers are paced on tokio's timer, \
                     0–2 ms late"
                );
                Pace::Timer
            }
        }
    }

    /// Returns at `deadline` (at once if it has passed), never before it. Boxed: a journey
    /// holds one of these at every wait, and its own future stays small (a buyer on its way is
    /// one small task).
    pub fn until(&self, deadline: Instant) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        let pacer = match self {
            Pace::Timer => return Box::pin(tokio::time::sleep_until(deadline)),
            Pace::Precise(p) => p.0.shared.clone(),
        };
        Box::pin(async move {
            if let Some(early) = deadline.checked_sub(COARSE) {
                if early > Instant::now() {
                    tokio::time::sleep_until(early).await;
                }
            }
            if Instant::now() >= deadline {
                return;
            }
            let (tx, rx) = oneshot::channel();
            pacer.push(deadline, tx);
            // The pacer's task sends before it drops a sender, and ends only with the attack:
            // an error here means the attack is over, and "now" is as good as any.
            let _ = rx.await;
        })
    }
}

/// The attack's pacer: the heap of waiting buyers and the timerfd that wakes them, driven by
/// one task on the attack's runtime (stopped when the last handle goes).
#[derive(Clone)]
pub struct Pacer(Arc<Running>);

/// The pacer's queue and its task. Dropped with the last handle: it aborts the task and lets
/// every buyer still waiting go (a wait that outlives its attack ends instead of hanging).
struct Running {
    shared: Arc<Shared>,
    task: tokio::task::AbortHandle,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
        let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.closed = true;
        q.heap.clear();
    }
}

/// A timerfd as tokio's reactor takes it.
struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

struct Shared {
    queue: Mutex<Queue>,
    timer: AsyncFd<Fd>,
}

#[derive(Default)]
struct Queue {
    heap: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    /// When the timerfd fires next (`None`: disarmed).
    armed: Option<Instant>,
    /// The attack is over: nothing waits any more.
    closed: bool,
}

/// One waiting buyer: its deadline, the order it came in, and how to wake it.
struct Entry {
    at: Instant,
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

impl Pacer {
    /// A pacer whose task runs on the current runtime.
    pub fn start() -> std::io::Result<Pacer> {
        let fd = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        // SAFETY: `Fd` owns the timerfd (an `OwnedFd` inside nix's `TimerFd`), which stays
        // open and the same descriptor until the `AsyncFd` drops it.
        let timer =
            unsafe { AsyncFd::register_with_interest(Fd(fd), tokio::io::Interest::READABLE) }
                .map_err(std::io::Error::from)?;
        let shared = Arc::new(Shared {
            queue: Mutex::default(),
            timer,
        });
        let task = tokio::spawn(run(shared.clone())).abort_handle();
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&shared));
        drop(live);
        Ok(Pacer(Arc::new(Running { shared, task })))
    }
}

/// The pacers of this process, for [`on_unpark`].
static LIVE: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// The runtime's unpark hook (`cli::runtime`): a worker woke for something else (an answer,
/// tokio's timer), and every buyer already due goes out on that wake-up instead of waiting for
/// the timerfd's.
pub fn on_unpark() {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    for w in live.iter() {
        if let Some(s) = w.upgrade() {
            s.release_due();
        }
    }
}

impl Shared {
    /// Wakes the buyers already due, if any, and moves the timer to the next one (it would
    /// otherwise fire for nothing).
    fn release_due(&self) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if pop_due(&mut q, Instant::now()) {
            self.follow_head(&mut q);
        }
    }

    /// The timer set for the earliest buyer waiting (plus the group), unless it already is;
    /// disarmed when none waits.
    fn follow_head(&self, q: &mut Queue) {
        match q.heap.peek().map(|Reverse(e)| e.at) {
            Some(next) if q.armed != Some(next + GROUP) => self.arm(q, next + GROUP),
            Some(_) => {}
            None if q.armed.is_some() => {
                let _ = self.timer.get_ref().0.unset();
                q.armed = None;
            }
            None => {}
        }
    }

    /// Queues a buyer due at `at`; the timer is brought forward when it is the earliest.
    fn push(&self, at: Instant, wake: oneshot::Sender<()>) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        if q.closed {
            return;
        }
        q.seq += 1;
        let seq = q.seq;
        q.heap.push(Reverse(Entry { at, seq, wake }));
        let fire = at + GROUP;
        if q.armed.is_none_or(|armed| fire < armed) {
            self.arm(&mut q, fire);
        }
    }

    /// Sets the timerfd to fire at `at`.
    fn arm(&self, q: &mut Queue, at: Instant) {
        // A zero expiration would disarm it: at least a microsecond.
        let after = at
            .saturating_duration_since(Instant::now())
            .max(Duration::from_micros(1));
        let set = self.timer.get_ref().0.set(
            Expiration::OneShot(TimeSpec::from_duration(after)),
            TimerSetTimeFlags::empty(),
        );
        match set {
            Ok(()) => q.armed = Some(at),
            // Cannot happen on a valid timerfd; if it did, the buyers would wait for the next
            // push or fire. Said once per failure.
            Err(e) => tracing::warn!("the pacer could not set its timer: {e}"),
        }
    }

    /// Wakes every buyer whose deadline has come, and arms the timer for the next one.
    fn release(&self) {
        let now = Instant::now();
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        // The timer fired (one-shot: it is disarmed now), or a fallback poll stands in for it.
        q.armed = None;
        pop_due(&mut q, now);
        self.follow_head(&mut q);
    }
}

/// Wakes every buyer due by `now`; whether there was one.
fn pop_due(q: &mut Queue, now: Instant) -> bool {
    let mut any = false;
    while q.heap.peek().is_some_and(|Reverse(e)| e.at <= now) {
        if let Some(Reverse(e)) = q.heap.pop() {
            let _ = e.wake.send(());
            any = true;
        }
    }
    any
}

/// The pacer's task: each time the timerfd fires, the buyers due go out.
async fn run(shared: Arc<Shared>) {
    loop {
        match shared.timer.readable().await {
            Ok(mut ready) => {
                // Reads the expiry count (8 bytes) so the fd is quiet again; EAGAIN: a
                // re-arm raced the read, and the release below sorts it out either way.
                let _ = ready.try_io(|fd| {
                    let mut buf = [0u8; 8];
                    nix::unistd::read(&fd.get_ref().0, &mut buf).map_err(std::io::Error::from)
                });
            }
            Err(e) => {
                tracing::warn!("the pacer's timer failed ({e}); falling back to 1 ms polls");
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        shared.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn precise_waits_end_at_their_deadline_in_order_and_never_before() {
        let pace = Pace::start();
        assert!(matches!(pace, Pace::Precise(_)), "a timerfd on Linux");
        let start = Instant::now();
        let deadlines: Vec<Instant> = [7u64, 2, 5, 0, 11]
            .iter()
            .map(|ms| start + Duration::from_millis(*ms))
            .collect();
        let woke: Vec<_> = deadlines
            .iter()
            .map(|d| {
                let (d, pace) = (*d, pace.clone());
                tokio::spawn(async move {
                    pace.until(d).await;
                    Instant::now()
                })
            })
            .collect();
        for (d, w) in deadlines.iter().zip(woke) {
            let at = w.await.unwrap();
            assert!(at >= *d, "woken {:?} early", *d - at);
            // Late by the group, the kernel's slack and a test machine's scheduling; tokio's
            // timer alone rounds up to the next whole millisecond, parks for whole ones.
            assert!(
                at - *d < Duration::from_millis(50),
                "woken {:?} late",
                at - *d
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thousand_buyers_due_over_100_ms_each_go_out_at_or_after_their_deadline() {
        let pace = Pace::start();
        let start = Instant::now() + Duration::from_millis(5);
        let woke: Vec<_> = (0..1000u64)
            .map(|i| {
                let d = start + Duration::from_micros(i * 100);
                let pace = pace.clone();
                tokio::spawn(async move {
                    pace.until(d).await;
                    (d, Instant::now())
                })
            })
            .collect();
        let mut late = Vec::new();
        for w in woke {
            let (d, at) = w.await.unwrap();
            assert!(at >= d, "woken {:?} early", d - at);
            late.push(at - d);
        }
        late.sort();
        // The median buyer is within the group and the kernel's slack of its deadline on any
        // machine that runs the tests; the bound here only catches a pacer that waits for
        // tokio's millisecond ticks (a median of ~1 ms) or never fires.
        assert!(
            late[500] < Duration::from_millis(5),
            "median {:?}",
            late[500]
        );
    }

    #[tokio::test]
    async fn a_wake_up_for_something_else_lets_the_buyers_due_go_and_moves_the_timer_on() {
        let Pace::Precise(pacer) = Pace::start() else {
            panic!("a timerfd on Linux")
        };
        let shared = &pacer.0.shared;
        let now = Instant::now();
        let (due, mut due_rx) = oneshot::channel();
        let (later, mut later_rx) = oneshot::channel();
        let next = now + Duration::from_secs(30);
        shared.push(now + Duration::from_millis(1), due);
        shared.push(next, later);
        // Blocks this (current-thread) runtime: the pacer's task cannot run, and only the
        // hook can let the first buyer go.
        std::thread::sleep(Duration::from_millis(3));
        on_unpark();
        assert!(due_rx.try_recv().is_ok(), "the buyer due went out");
        assert!(later_rx.try_recv().is_err(), "the later one still waits");
        let q = shared.queue.lock().unwrap();
        assert_eq!(
            q.armed,
            Some(next + GROUP),
            "the timer moved to the next one"
        );
        drop(q);
        on_unpark();
        assert!(later_rx.try_recv().is_err(), "never before its deadline");
    }

    #[tokio::test]
    async fn a_wait_outlives_no_pacer_the_attack_dropped() {
        let pace = Pace::start();
        let d = Instant::now() + Duration::from_millis(2);
        let wait = pace.until(d);
        drop(pace);
        // The wait holds the queue, not the task: with the pacer gone its sender is dropped
        // at once, and the wait ends instead of hanging.
        tokio::time::timeout(Duration::from_secs(5), wait)
            .await
            .expect("ends");
    }
}
