//! What every fault kind shares: [`Hold`], a fault's time and window, and
//! [`ShopControl`], the runner's child shop as `shop-kill` drives it. The engine creates a hold
//! per fault; each kind (`db`, `redis`, `shop`) acts inside it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A future the shop control returns.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The runner's child shop, as `shop-kill` drives it.
pub trait ShopControl: Send + Sync {
    /// kill -9.
    fn kill(&self) -> BoxFuture<'_, anyhow::Result<()>>;
    /// Start it again on the same port; returns once it listens.
    fn restart(&self) -> BoxFuture<'_, anyhow::Result<()>>;
    /// Send SIGKILL now, from any thread (ctrl-c, before the process exits).
    fn kill_now(&self);
}

/// A fault's time and window. A fault prepares what it can (connections) first, then
/// [`Hold::start`] waits for its time and marks when it took effect; the window runs from
/// there, until its end or until the run stops it.
pub(super) struct Hold {
    due: Instant,
    duration: Duration,
    until: Option<Instant>,
    pub(super) began: Option<Instant>,
    stopped: watch::Receiver<bool>,
}

impl Hold {
    /// A fault due at `due`, lasting `duration` once it took effect, until `stopped`.
    pub(super) fn new(due: Instant, duration: Duration, stopped: watch::Receiver<bool>) -> Hold {
        Hold {
            due,
            duration,
            until: None,
            began: None,
            stopped,
        }
    }

    /// Waits for the fault's time; false if the run stopped first (then it is not applied).
    pub(super) async fn start(&mut self) -> bool {
        let due = self.due;
        tokio::select! {
            _ = tokio::time::sleep_until(due) => {}
            _ = self.stopped.wait_for(|s| *s) => return false,
        }
        self.mark();
        true
    }

    /// The fault took effect now: its window starts.
    pub(super) fn mark(&mut self) {
        let now = Instant::now();
        self.began = Some(now);
        self.until = Some(now + self.duration);
    }

    fn end(&self) -> Instant {
        self.until.unwrap_or_else(Instant::now)
    }

    /// Waits out the window.
    pub(super) async fn wait(&mut self) {
        let until = self.end();
        tokio::select! {
            _ = tokio::time::sleep_until(until) => {}
            _ = self.stopped.wait_for(|s| *s) => {}
        }
    }

    /// The window is over (its end passed, or the run stopped it).
    pub(super) fn over(&self) -> bool {
        self.until.is_some_and(|until| Instant::now() >= until) || *self.stopped.borrow()
    }

    /// Waits `step` or to the window's end, whichever is first; false once the window is over.
    pub(super) async fn tick(&mut self, step: Duration) -> bool {
        let until = self.end();
        let next = (Instant::now() + step).min(until);
        tokio::select! {
            _ = tokio::time::sleep_until(next) => {}
            _ = self.stopped.wait_for(|s| *s) => return false,
        }
        Instant::now() < until && !*self.stopped.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_window_is_over_at_its_end_or_when_the_run_stops_it() {
        let (stop, stopped) = watch::channel(false);
        let mut hold = Hold::new(
            Instant::now() + Duration::from_millis(100),
            Duration::from_millis(800),
            stopped,
        );
        assert!(!hold.over(), "not begun: not over");
        assert!(hold.start().await);
        tokio::time::advance(Duration::from_millis(799)).await;
        assert!(!hold.over());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(hold.over(), "over at its end");

        let (stop2, stopped) = watch::channel(false);
        let mut hold = Hold::new(Instant::now(), Duration::from_secs(60), stopped);
        assert!(hold.start().await);
        assert!(!hold.over());
        stop2.send(true).unwrap();
        assert!(hold.over(), "over once the run stops it");
        drop(stop);
    }
}
