//! The senders: a fixed pool of goose users, each looping over one shared queue of requests.
//!
//! Buyers are plain tasks ([`super::journey`]); each hands its requests to the pool as
//! [`Job`]s and waits for the answers. A sender takes the next job, sends it through goose
//! (`user.request`, so goose's metrics see every request and stay a cross-check of ours),
//! records it, and hands the answer back. The pool is started at its full size ([`SENDERS`], a
//! large cap) before the sale opens, so nothing waits for a sender while one is free. A request
//! queued while every sender is held by an unanswered request waits for one: that *sender wait*
//! is the shop's time (its slow answers hold the senders), recorded apart from *send lag*, the
//! generator's own lateness (a free sender, late). The moment every sender was first held is
//! kept ([`Saturation`]), so the report can say when the cap was reached. The goose attack ends
//! once every buyer is done (every [`Jobs`] handle dropped) and the queue is empty.

use super::super::mapping::Method;
use super::super::recorder::{Answer, Kind, Recorder};
use super::super::target::{Classified, Prepared, Read, Target};
use goose::client::GooseClientBuilder;
use goose::config::GooseConfiguration;
use goose::metrics::GooseMetrics;
use goose::prelude::*;
use reqwest::Url;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// Goose users (senders) in the pool, at most, unless `[client] senders` says otherwise: the
/// scenario's default ([`crate::traffic::scenario::SENDERS`]).
pub const SENDERS: usize = crate::traffic::scenario::SENDERS as usize;

/// Goose users started per second: the whole pool is up within a few milliseconds.
pub const LAUNCH_RATE: f64 = 100_000.0;

/// The senders' end of the queue.
pub(super) type Queue = super::queue::Rx<Job>;

/// One request a buyer wants sent, and where its answer goes.
pub(super) struct Job {
    pub(super) target: Arc<Target>,
    pub(super) kind: Kind,
    pub(super) prepared: Prepared,
    /// When the buyer meant to send it (its send lag is measured from here).
    pub(super) intended: Instant,
    /// When it was queued, if every sender was then held by an unanswered request: its wait
    /// for a sender from there is sender wait (the shop's), not send lag.
    pub(super) waited_since: Option<Instant>,
    /// The classified answer, when it was sent and when it was complete.
    pub(super) reply: oneshot::Sender<(Classified, Instant, Instant)>,
    /// A retry of an earlier request (recorded apart from first attempts).
    pub(super) retry: bool,
}

tokio::task_local! {
    /// Set in the task of a buyer the dispatcher spawned already due
    /// ([`super::journey::dispatch`]); its first request takes it ([`Arriving::held`]).
    pub(super) static ARRIVING: std::cell::RefCell<Option<Arriving>>;
}

/// A buyer spawned when already due, until its first request is queued: counted against the
/// free senders ([`Saturation::full_for`]) so that a backlog is spawned no faster than senders
/// come free — its journeys are not yet in the queue, and without the count one pass of the
/// dispatcher would spawn every held buyer at once.
pub(super) struct Arriving {
    /// When its first request began to wait for a sender, if it was held back while every
    /// sender was held (its arrival, or the moment the hold began if it was due before): its
    /// wait from there is sender wait, the shop's, as if it had been queued then.
    pub(super) held: Option<Instant>,
    saturation: Arc<Saturation>,
}

impl Drop for Arriving {
    fn drop(&mut self) {
        self.saturation
            .arriving
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The pool stopped (its goose attack ended or failed): nothing will be sent any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PoolGone;

/// Where buyers hand their requests. The pool's senders stop once every clone is dropped and
/// the queue is empty.
#[derive(Clone)]
pub(super) struct Jobs {
    tx: super::queue::Tx<Job>,
    saturation: Arc<Saturation>,
}

/// How busy the senders are: how many hold a request now, and when all first did.
#[derive(Debug)]
pub struct Saturation {
    /// Senders in the pool.
    senders: usize,
    /// Senders holding a request (taken, not yet answered).
    busy: std::sync::atomic::AtomicUsize,
    /// Buyers spawned already due whose first request is not queued yet ([`Arriving`]).
    arriving: std::sync::atomic::AtomicUsize,
    /// The first moment every sender held a request.
    first_full: std::sync::OnceLock<Instant>,
    /// Told each time a sender hands its answer back (the dispatcher waits on it while it
    /// holds buyers back).
    room: tokio::sync::Notify,
}

impl Saturation {
    fn new(senders: usize) -> Self {
        Saturation {
            senders,
            busy: std::sync::atomic::AtomicUsize::new(0),
            arriving: std::sync::atomic::AtomicUsize::new(0),
            first_full: std::sync::OnceLock::new(),
            room: tokio::sync::Notify::new(),
        }
    }

    /// Whether a request queued now behind `queued` others (and the requests of the buyers
    /// arriving) finds no free sender.
    fn full_for(&self, queued: usize) -> bool {
        use std::sync::atomic::Ordering::Acquire;
        self.busy.load(Acquire) + self.arriving.load(Acquire) + queued >= self.senders
    }

    /// A sender took a request.
    pub(super) fn took(&self) {
        let busy = self.busy.fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1;
        if busy >= self.senders {
            self.first_full.get_or_init(Instant::now);
        }
    }

    /// A sender handed its answer back.
    pub(super) fn freed(&self) {
        self.busy.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        self.room.notify_one();
    }

    /// The first moment every sender held a request (`None`: the cap was never reached).
    pub fn first_full(&self) -> Option<Instant> {
        self.first_full.get().copied()
    }
}

impl Jobs {
    /// Has `prepared` sent to `target` by the next free sender; returns its classified answer
    /// and when it was complete. Recording (send lag, service time, latency) is the sender's.
    pub async fn send(
        &self,
        target: &Arc<Target>,
        kind: Kind,
        prepared: Prepared,
        intended: Instant,
    ) -> Result<(Classified, Instant), PoolGone> {
        let (c, _, done) = self
            .send_as(target, kind, prepared, intended, false)
            .await?;
        Ok((c, done))
    }

    /// Sends `prepared` as a first attempt or, with `retry`, as a retry of an earlier request;
    /// returns its classified answer, when it was sent and when it was complete.
    pub(super) async fn send_as(
        &self,
        target: &Arc<Target>,
        kind: Kind,
        prepared: Prepared,
        intended: Instant,
        retry: bool,
    ) -> Result<(Classified, Instant, Instant), PoolGone> {
        let (reply, answer) = oneshot::channel();
        // A buyer's first request: it is no longer arriving (dropped here, before it counts
        // the free senders).
        let arriving = ARRIVING.try_with(|a| a.borrow_mut().take()).ok().flatten();
        let held = arriving.and_then(|a| a.held);
        // Queued behind others with every sender held: it waits for a sender.
        let waited_since =
            held.or_else(|| self.saturation.full_for(self.tx.len()).then(Instant::now));
        let job = Job {
            target: target.clone(),
            kind,
            prepared,
            intended,
            waited_since,
            reply,
            retry,
        };
        self.tx.send(job).map_err(|_| PoolGone)?;
        answer.await.map_err(|_| PoolGone)
    }

    /// Whether no sender is left to take a job.
    pub fn is_closed(&self) -> bool {
        self.tx.is_disconnected()
    }

    /// Whether a request handed over now would wait for a sender (every sender held, or
    /// held, queued for and about to be).
    pub(super) fn saturated(&self) -> bool {
        self.saturation.full_for(self.tx.len())
    }

    /// Until a sender hands an answer back (at once if one did since the last wait).
    pub(super) async fn freed(&self) {
        self.saturation.room.notified().await
    }

    /// A buyer spawned already due: counted as arriving until its first request is queued
    /// or its task ends (`held`: see [`Arriving::held`]).
    pub(super) fn arriving(&self, held: Option<Instant>) -> Arriving {
        self.saturation
            .arriving
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Arriving {
            held,
            saturation: self.saturation.clone(),
        }
    }
}

/// A new, empty queue for `senders` senders: the buyers' end, the senders' end, and how busy
/// the senders are.
pub(super) fn queue(senders: usize) -> (Jobs, Queue, Arc<Saturation>) {
    let (tx, rx) = super::queue::unbounded();
    let saturation = Arc::new(Saturation::new(senders));
    let jobs = Jobs {
        tx,
        saturation: saturation.clone(),
    };
    (jobs, rx, saturation)
}

/// What every sender shares.
struct Ctx {
    /// Idle senders wait on it together; a request queued wakes one ([`super::queue`]).
    queue: Queue,
    saturation: Arc<Saturation>,
    recorder: Arc<Recorder>,
    /// The harness's client (no redirects): every sender sends on it.
    client: reqwest::Client,
}

/// Runs `senders` goose users over `queue` until it is closed and empty; returns goose's
/// metrics. `host` only names goose's requests: each job's URL is its own target's.
pub(super) async fn run(
    queue: Queue,
    saturation: Arc<Saturation>,
    recorder: Arc<Recorder>,
    client: reqwest::Client,
    host: String,
    timeout: Duration,
) -> anyhow::Result<GooseMetrics> {
    let senders = saturation.senders;
    let ctx = Arc::new(Ctx {
        queue,
        saturation,
        recorder,
        client,
    });
    let sender: TransactionFunction = Arc::new(move |user| {
        let ctx = ctx.clone();
        Box::pin(async move { send_all(user, ctx).await })
    });
    let mut config = GooseConfiguration::default();
    config.host = Some(host);
    config.users = Some(senders);
    config.increase_rate = Some(LAUNCH_RATE.to_string());
    config.iterations = Some(1);
    config.no_telnet = true;
    config.no_print_metrics = true;
    config.no_error_summary = true;
    config.quiet = 1;
    let metrics = GooseAttack::initialize_with_config(config)?
        .set_client_builder_without_cookies(
            GooseClientBuilder::new().without_cookies().timeout(timeout),
        )?
        .register_scenario(
            scenario!("sender").register_transaction(Transaction::new(sender).set_name("send")),
        )
        .execute()
        .await?;
    Ok(metrics)
}

/// One sender: takes jobs until the queue is closed and empty.
async fn send_all(user: &mut GooseUser, ctx: Arc<Ctx>) -> TransactionResult {
    // Goose's client builder cannot turn redirects off: every sender sends on the harness's
    // own shared client instead (one connection pool, no redirects followed).
    user.client = ctx.client.clone();
    // Each shop's base URL, parsed once per sender (a run has one shop, or a few).
    let mut bases: Vec<(Arc<Target>, Option<Url>)> = Vec::new();
    loop {
        let Ok(job) = ctx.queue.recv_async().await else {
            break;
        };
        let base = match bases.iter().find(|(t, _)| Arc::ptr_eq(t, &job.target)) {
            Some((_, base)) => base.as_ref(),
            None => {
                let base = Url::parse(&job.target.base_url).ok();
                bases.push((job.target.clone(), base));
                bases.last().and_then(|(_, b)| b.as_ref())
            }
        };
        let url = base.map(|base| Target::url_on(base, &job.prepared));
        ctx.saturation.took();
        let answer = send_one(user, &ctx.recorder, &job, url).await;
        ctx.saturation.freed();
        // The buyer may be gone (the run was abandoned): nobody waits for the answer then.
        let _ = job.reply.send(answer);
    }
    Ok(())
}

/// Sends one job to `url` through goose and records it (no URL: the target's base URL is
/// not one, a connection error; a pending order: recorded at its decision); returns the
/// classified answer, when it was sent and when it was complete.
async fn send_one(
    user: &mut GooseUser,
    rec: &Recorder,
    job: &Job,
    url: Option<Url>,
) -> (Classified, Instant, Instant) {
    let (p, kind) = (&job.prepared, job.kind);
    let sent = rec.sending(kind, job.intended, job.waited_since);
    let read = match url {
        None => Read::transport_failed(),
        Some(url) => {
            let rb = p.apply(user.client.request(p.reqwest_method(), url));
            let req = GooseRequest::builder()
                .method(goose_method(p))
                .path(p.path.as_str())
                .name(kind.as_str())
                .set_request_builder(rb)
                .build();
            match user.request(req).await {
                Ok(g) => match g.response {
                    Ok(resp) => job.target.read(kind, resp).await,
                    Err(e) => Read::transport(&e),
                },
                Err(e) => match *e {
                    TransactionError::Reqwest(e) => Read::transport(&e),
                    _ => Read::transport_failed(),
                },
            }
        }
    };
    let done = Instant::now();
    let answer = read.classified.answer;
    if job.retry {
        rec.record_retry(kind, answer, job.intended, done);
    } else if !(kind == Kind::Order && answer == Answer::Pending) {
        rec.record(kind, answer, job.intended, sent, done);
    }
    if let (true, Some(status)) = (answer.is_unclassified(), read.status) {
        rec.unclassified(kind, status, &read.body);
    }
    (read.classified, sent, done)
}

/// The method for a goose request.
fn goose_method(p: &Prepared) -> GooseMethod {
    match p.method {
        Method::Get => GooseMethod::Get,
        Method::Post => GooseMethod::Post,
        Method::Put => GooseMethod::Put,
        Method::Patch => GooseMethod::Patch,
        Method::Delete => GooseMethod::Delete,
    }
}
