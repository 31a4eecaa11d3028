//! The senders' connects, limited: at most [`super::CONNECTS_AT_ONCE`] open at once, the rest
//! waiting for a turn, and never more waiting than there are senders.
//!
//! The pool of reqwest's client (hyper-util's) races a request's connect against the next
//! connection handed back; when the connection wins, the connect, if it had begun (here: was
//! waiting for its turn), is spawned to finish in the background and add its connection to the
//! pool. Under a steady rush those spawned connects queued behind the limit faster than it let
//! them through: 372,298 of them waiting at the end of a 1,000,000-buyer shard, ~700 bytes
//! each (heaptrack, docs/lab/lab-log.md). A request waits for at most one connect,
//! and at most `senders` requests are in flight, so of more than `senders` waiting connects at
//! least the surplus is such background work: past that bound a connect goes ahead without
//! waiting for a turn (it is not refused: it may be a request's), so the queue, and what it
//! holds, stays bounded by the senders.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::Semaphore;

/// The layer on reqwest's connector.
#[derive(Clone)]
pub struct ConnectLimitLayer {
    shared: Arc<Shared>,
}

struct Shared {
    turns: Arc<Semaphore>,
    waiting: AtomicUsize,
    max_waiting: usize,
}

impl ConnectLimitLayer {
    /// At most `at_once` connects at a time, at most `max_waiting` waiting for a turn.
    pub fn new(at_once: usize, max_waiting: usize) -> Self {
        ConnectLimitLayer {
            shared: Arc::new(Shared {
                turns: Arc::new(Semaphore::new(at_once.max(1))),
                waiting: AtomicUsize::new(0),
                max_waiting: max_waiting.max(1),
            }),
        }
    }

    /// Connects waiting for a turn now.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.shared.waiting.load(Ordering::Relaxed)
    }
}

impl<S> tower::Layer<S> for ConnectLimitLayer {
    type Service = ConnectLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ConnectLimit {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The connector, its connects taking turns.
#[derive(Clone)]
pub struct ConnectLimit<S> {
    inner: S,
    shared: Arc<Shared>,
}

/// Counts a waiting connect while it waits (dropped with the future, too).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<S, R> tower::Service<R> for ConnectLimit<S>
where
    S: tower::Service<R> + Clone + Send + 'static,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = futures_util::future::BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        // The clone that was made ready serves this call; the fresh one waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        Box::pin(async move {
            let permit = if shared.waiting.fetch_add(1, Ordering::Relaxed) < shared.max_waiting {
                let _waiting = Waiting(&shared.waiting);
                shared.turns.clone().acquire_owned().await.ok()
            } else {
                shared.waiting.fetch_sub(1, Ordering::Relaxed);
                None
            };
            let result = inner.call(req).await;
            drop(permit);
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::time::Duration;
    use tower::{Layer, Service, ServiceExt};

    /// A "connect" that takes 50 ms and counts how many run at once.
    #[derive(Clone)]
    struct Slow(Arc<(AtomicUsize, AtomicUsize)>);

    impl Service<()> for Slow {
        type Response = ();
        type Error = Infallible;
        type Future = futures_util::future::BoxFuture<'static, Result<(), Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: ()) -> Self::Future {
            let c = self.0.clone();
            Box::pin(async move {
                let now = c.0.fetch_add(1, Ordering::SeqCst) + 1;
                c.1.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
                c.0.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
        }
    }

    /// Ten connects started at once.
    fn ten_at_once(
        svc: &ConnectLimit<Slow>,
    ) -> Vec<tokio::task::JoinHandle<Result<(), Infallible>>> {
        (0..10)
            .map(|_| {
                let svc = svc.clone();
                tokio::spawn(async move { svc.oneshot(()).await })
            })
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn connects_take_turns_and_the_queue_never_passes_its_bound() {
        let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let layer = ConnectLimitLayer::new(2, 4);
        let svc = layer.layer(Slow(counts.clone()));
        // Ten connects at once: two run, four wait their turn, four go ahead without one.
        let calls = ten_at_once(&svc);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(layer.waiting() <= 4, "{} waiting", layer.waiting());
        for c in calls {
            c.await.unwrap().unwrap();
        }
        assert_eq!(layer.waiting(), 0);
        let most = counts.1.load(Ordering::SeqCst);
        assert_eq!(most, 2 + 4, "two with a turn, four past the bound");
    }

    #[tokio::test(start_paused = true)]
    async fn within_the_bound_every_connect_waits_for_its_turn() {
        let counts = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
        let layer = ConnectLimitLayer::new(2, 100);
        let svc = layer.layer(Slow(counts.clone()));
        let calls = ten_at_once(&svc);
        for c in calls {
            c.await.unwrap().unwrap();
        }
        assert_eq!(counts.1.load(Ordering::SeqCst), 2);
    }
}
