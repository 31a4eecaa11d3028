//! Automatic pipelining: the commands in flight at the same moment on one Redis connection go
//! out in one write and come back in one read.
//!
//! Every purchase of `redis-lua` is one `EVALSHA` on the shop's one multiplexed connection. The
//! connection's driver task is woken by each command and, on a busy runtime, runs before the
//! next handler has queued its own: one `write` a command, and one `read` for its reply, so
//! the loopback's price is paid twice per order. [`AutoPipe`] puts one task in front of the
//! connection: it sends what is queued as one pipeline and, while that pipeline is out, lets
//! the next commands gather. A command that finds nothing in flight goes out at once (no
//! timer, no wait for company), so a quiet shop answers as fast as before; a rush gives the
//! batches their size. A pipeline Redis has not answered within [`STALL`] stops holding the
//! next one back (a paused Redis costs each command its own response timeout, no more). Redis runs a pipeline's commands one after the other, each atomic as
//! it was, so nothing a script guarantees changes.
//!
//! Errors stay the caller's: a server error in the batch (a `NOSCRIPT`, say) answers only its
//! own command; a connection error answers every command of the batch. Redis Cluster
//! connections are not put behind it (a batch would span slots): the caller keeps its own
//! connection for those.

use super::redis_conn::RedisConn;
use crate::telemetry::shop_metrics;
use redis::aio::ConnectionLike;
use redis::{Cmd, ErrorKind, Pipeline, RedisError, RedisResult, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// The most commands one write carries.
pub const MAX_BATCH: usize = 256;

/// How long a pipeline may hold up the next before the next goes out beside it.
pub const STALL: std::time::Duration = std::time::Duration::from_millis(100);

/// One command and where its answer goes.
struct Job {
    cmd: Cmd,
    reply: oneshot::Sender<RedisResult<Value>>,
}

/// The queue in front of one connection (cheap to clone: every clone feeds the same task).
#[derive(Clone)]
pub struct AutoPipe {
    jobs: mpsc::UnboundedSender<Job>,
    /// The connection itself, for a command the queue cannot take (its task gone with the
    /// runtime that started it).
    direct: RedisConn,
    counts: Arc<Counts>,
}

/// What the queue sent so far (also exported as metrics).
#[derive(Default)]
struct Counts {
    pipelines: AtomicU64,
    commands: AtomicU64,
}

impl AutoPipe {
    /// A queue in front of `conn`, its task on the current runtime. Ends with the last clone.
    pub fn start(conn: RedisConn) -> AutoPipe {
        let (jobs, rx) = mpsc::unbounded_channel();
        let counts = Arc::new(Counts::default());
        tokio::spawn(run(conn.clone(), rx, counts.clone()));
        AutoPipe {
            jobs,
            direct: conn,
            counts,
        }
    }

    /// (pipelines sent, commands they carried) so far.
    pub fn sent(&self) -> (u64, u64) {
        (
            self.counts.pipelines.load(Ordering::Relaxed),
            self.counts.commands.load(Ordering::Relaxed),
        )
    }

    /// Runs `cmd` in the next pipeline and returns its own answer.
    pub async fn query(&self, cmd: Cmd) -> RedisResult<Value> {
        let (reply, answer) = oneshot::channel();
        if let Err(mpsc::error::SendError(job)) = self.jobs.send(Job { cmd, reply }) {
            // The task ended (its runtime stopped): the command goes on its own.
            return job.cmd.query_async(&mut self.direct.clone()).await;
        }
        answer.await.unwrap_or_else(|_| {
            Err(RedisError::from((
                ErrorKind::Io,
                "the Redis pipeline's task stopped before it answered",
            )))
        })
    }
}

/// The queue's task: takes every command waiting (up to [`MAX_BATCH`]), sends them as one
/// pipeline, hands each its answer, and again. A pipeline Redis has not answered within
/// [`STALL`] is left to finish on its own task and the next one goes out, so a stalled Redis
/// holds each command up for its own response timeout, not for the one ahead of it as well.
async fn run(conn: RedisConn, mut rx: mpsc::UnboundedReceiver<Job>, counts: Arc<Counts>) {
    let pipelines = metrics::counter!(shop_metrics::REDIS_PIPELINES);
    let commands = metrics::counter!(shop_metrics::REDIS_PIPELINED_COMMANDS);
    while let Some(first) = rx.recv().await {
        let mut pipe = Pipeline::with_capacity(MAX_BATCH);
        let mut replies = Vec::with_capacity(MAX_BATCH);
        pipe.add_command(first.cmd);
        replies.push(first.reply);
        while replies.len() < MAX_BATCH {
            let Ok(job) = rx.try_recv() else { break };
            pipe.add_command(job.cmd);
            replies.push(job.reply);
        }
        let n = replies.len() as u64;
        pipelines.increment(1);
        commands.increment(n);
        counts.pipelines.fetch_add(1, Ordering::Relaxed);
        counts.commands.fetch_add(n, Ordering::Relaxed);
        let mut send = Box::pin(send(conn.clone(), pipe, replies));
        tokio::select! {
            () = &mut send => {}
            () = tokio::time::sleep(STALL) => {
                tokio::spawn(send);
            }
        }
    }
}

/// Sends `pipe` and hands each of `replies` its own answer.
async fn send(
    mut conn: RedisConn,
    pipe: Pipeline,
    replies: Vec<oneshot::Sender<RedisResult<Value>>>,
) {
    let n = replies.len();
    match conn.req_packed_commands(&pipe, 0, n).await {
        Ok(values) if values.len() == n => {
            for (reply, value) in replies.into_iter().zip(values) {
                let _ = reply.send(match value {
                    Value::ServerError(e) => Err(RedisError::from(e)),
                    v => Ok(v),
                });
            }
        }
        Ok(values) => {
            let got = values.len();
            for reply in replies {
                let _ = reply.send(Err(RedisError::from((
                    ErrorKind::Client,
                    "a Redis pipeline answered the wrong number of commands",
                    format!("{got} answers for {n} commands"),
                ))));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}
