//! The shop's accept loop, bounded for an open network: at most `max_connections` at once (the
//! next waits in the kernel's backlog until one closes), a request's headers must arrive within
//! `header_read_timeout` (hyper's own timer: a slowloris sending a header a byte at a time, and
//! a keep-alive connection idle between requests, are closed), and a connection on which no
//! byte moves either way for `idle_timeout` is closed (a body that stalls). HTTP/1.1, as
//! `axum::serve`; graceful shutdown the same way: the shutdown future stops the accepting, each
//! connection finishes its request, and the loop returns once every one has closed.

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::{Instant, Sleep};
use tower::Service;

/// The bounds of the shop's connections (`serve --max-connections`, `--header-read-timeout`,
/// `--idle-timeout`, `--body-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    /// How long a JSON route's body may take to arrive (read by the route: `shop/body.rs`).
    pub body_timeout: Duration,
}

impl Default for Limits {
    /// 4096 connections; headers within 10 s; a body within 10 s; 60 s without a byte.
    fn default() -> Self {
        Limits {
            max_connections: 4096,
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves, then waits for the
/// open connections to finish.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let mut make = router.into_make_service_with_connect_info::<SocketAddr>();
    // Dropping `signal_rx` tells every connection to finish; `close_tx` learns when all have.
    let (signal_tx, signal_rx) = watch::channel(());
    let (close_tx, close_rx) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!(error = %e, "accepting a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let svc = match make.call(remote).await {
            Ok(svc) => svc,
            Err(never) => match never {},
        };
        let svc = TowerToHyperService::new(tower::ServiceExt::map_request(
            svc,
            |req: Request<Incoming>| req.map(Body::new),
        ));
        let io = TokioIo::new(Idle::new(stream, limits.idle_timeout));
        let (signal_tx, close_rx) = (signal_tx.clone(), close_rx.clone());
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout);
            let mut conn = pin!(builder.serve_connection(io, svc).with_upgrades());
            let mut closing = pin!(signal_tx.closed());
            // Asked once: a finished future is never polled again.
            let mut asked = false;
            loop {
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(e) = result {
                            tracing::trace!(error = %e, "connection ended");
                        }
                        break;
                    }
                    () = &mut closing, if !asked => {
                        asked = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            drop((permit, close_rx));
        });
    }
    drop(listener);
    drop(signal_rx);
    drop(close_rx);
    close_tx.closed().await;
}

/// A connection closed when no byte has moved either way for its timeout.
struct Idle {
    io: TcpStream,
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl Idle {
    fn new(io: TcpStream, timeout: Duration) -> Self {
        Idle {
            io,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }

    /// A byte moved: the clock starts again.
    fn moved(&mut self) {
        let next = Instant::now() + self.timeout;
        self.deadline.as_mut().reset(next);
    }

    /// Pending IO: an error once the connection has been idle too long.
    fn expired<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no byte moved within the idle timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for Idle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    self.moved();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx),
        }
    }
}

impl AsyncWrite for Idle {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write(cx, data) {
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    self.moved();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write_vectored(cx, bufs) {
            Poll::Ready(r) => {
                if matches!(r, Ok(n) if n > 0) {
                    self.moved();
                }
                Poll::Ready(r)
            }
            Poll::Pending => self.expired(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
