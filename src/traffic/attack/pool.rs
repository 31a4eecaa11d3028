//! The senders: a fixed pool of goose users, lent to the buyers one request at a time.
//!
//! Buyers are plain tasks ([`super::journey`]). For each request a buyer borrows an idle
//! sender ([`Jobs::send`]), sends the request through that sender's goose user itself
//! (`user.request`, so goose's metrics see every request and stay a cross-check of ours),
//! records it and gives the sender back. Nothing passes between tasks on the way: a request
//! costs the wake-ups of goose's own loop (the buyer's timer, its connection's answer), where
//! handing it to a sender task and the answer back cost two more (docs/src/performance,
//! "5 Dec 2026"). Each goose user of the pool is started by goose as usual, puts itself in
//! the pool ([`run`]) and takes itself back once every buyer is done, which ends the goose
//! attack.
//!
//! The pool is started at its full size ([`crate::traffic::scenario::SENDERS`], a large cap) before the sale opens, so
//! nothing waits for a sender while one is free. A request that finds every sender held by an
//! unanswered request waits for one, first come first served: that *sender wait* is the shop's
//! time (its slow answers hold the senders), recorded apart from *send lag*, the generator's
//! own lateness (a free sender, late). The moment every sender was first held is kept
//! ([`Saturation`]), so the report can say when the cap was reached.

use super::super::mapping::Method;
use super::super::recorder::{Answer, Kind, Recorder, Sent};
use super::super::target::{Classified, Prepared, Read, Target};
use goose::client::GooseClientBuilder;
use goose::config::GooseConfiguration;
use goose::metrics::GooseMetrics;
use goose::prelude::*;
use reqwest::Url;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, TryAcquireError};
use tokio::time::Instant;

#[cfg(test)]
mod stand_in;
#[cfg(test)]
pub(super) use stand_in::{stand_ins, Handed, StandIns};

/// Goose users started per second: the whole pool is up within a few milliseconds.
pub const LAUNCH_RATE: f64 = 100_000.0;

/// One request a buyer wants sent.
pub(super) struct Job {
    pub(super) target: Arc<Target>,
    pub(super) kind: Kind,
    pub(super) prepared: Prepared,
    /// When the buyer meant to send it (its send lag is measured from here).
    pub(super) intended: Instant,
    /// When it began to wait for a sender, if every sender was then held by an unanswered
    /// request: its wait from there is sender wait (the shop's), not send lag.
    pub(super) waited_since: Option<Instant>,
    /// A retry of an earlier request (recorded apart from first attempts).
    pub(super) retry: bool,
}

/// A classified answer, when its request was sent and when the answer was complete.
type Answered = (Classified, Sent, Instant);

tokio::task_local! {
    /// Set in the task of a buyer the dispatcher spawned already due
    /// ([`super::journey::dispatch`]); its first request takes it ([`Arriving::held`]).
    pub(super) static ARRIVING: std::cell::RefCell<Option<Arriving>>;
}

/// A buyer spawned when already due, until its first request asks for a sender: counted
/// against the free senders ([`Saturation::full_for`]) so that a backlog is spawned no faster
/// than senders come free — its journeys are not yet waiting for one, and without the count
/// one pass of the dispatcher would spawn every held buyer at once.
pub(super) struct Arriving {
    /// When its first request began to wait for a sender, if it was held back while every
    /// sender was held (its arrival, or the moment the hold began if it was due before): its
    /// wait from there is sender wait, the shop's, as if it had asked for one then.
    pub(super) held: Option<Instant>,
    saturation: Arc<Saturation>,
}

impl Drop for Arriving {
    fn drop(&mut self) {
        self.saturation.arriving.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The pool stopped (its goose attack ended or failed): nothing will be sent any more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PoolGone;

/// How busy the senders are: how many hold a request now, and when all first did.
#[derive(Debug)]
pub struct Saturation {
    /// Senders in the pool.
    senders: usize,
    /// Senders holding a request (lent, not yet given back).
    busy: AtomicUsize,
    /// Buyers spawned already due whose first request has not asked for a sender yet
    /// ([`Arriving`]).
    arriving: AtomicUsize,
    /// The first moment every sender held a request.
    first_full: std::sync::OnceLock<Instant>,
    /// Told each time a sender is given back (the dispatcher waits on it while it holds buyers
    /// back).
    room: Notify,
}

impl Saturation {
    fn new(senders: usize) -> Self {
        Saturation {
            senders,
            busy: AtomicUsize::new(0),
            arriving: AtomicUsize::new(0),
            first_full: std::sync::OnceLock::new(),
            room: Notify::new(),
        }
    }

    /// Whether a request asking for a sender now behind `waiting` others (and the requests of
    /// the buyers arriving) finds none free.
    fn full_for(&self, waiting: usize) -> bool {
        self.busy.load(Ordering::Acquire) + self.arriving.load(Ordering::Acquire) + waiting
            >= self.senders
    }

    /// A sender was lent.
    fn took(&self) {
        let busy = self.busy.fetch_add(1, Ordering::AcqRel) + 1;
        if busy >= self.senders {
            self.first_full.get_or_init(Instant::now);
        }
    }

    /// A sender was given back.
    fn freed(&self) {
        self.busy.fetch_sub(1, Ordering::AcqRel);
        self.room.notify_one();
    }

    /// The first moment every sender held a request (`None`: the cap was never reached).
    pub fn first_full(&self) -> Option<Instant> {
        self.first_full.get().copied()
    }
}

/// The buyers' handle on the pool. Once every clone is dropped (every buyer is done), the
/// senders take their goose users back and the goose attack ends.
#[derive(Clone)]
pub(super) struct Jobs {
    pool: Arc<Pool>,
    _open: Arc<Open>,
}

/// Closes the pool when the last [`Jobs`] goes.
struct Open(Arc<Pool>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.close();
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
    ) -> Result<Answered, PoolGone> {
        let pool = &self.pool;
        // A buyer's first request: it is no longer arriving (dropped here, before it counts
        // the free senders).
        let arriving = ARRIVING.try_with(|a| a.borrow_mut().take()).ok().flatten();
        let held = arriving.and_then(|a| a.held);
        // Behind others with every sender held: it waits for a sender.
        let waited_since = held.or_else(|| self.saturated().then(Instant::now));
        let job = Job {
            target: target.clone(),
            kind,
            prepared,
            intended,
            waited_since,
            retry,
        };
        let mut lent = pool.borrow().await?;
        lent.send(job).await
    }

    /// Whether no sender is left to take a request.
    pub fn is_closed(&self) -> bool {
        self.pool.gone.load(Ordering::Acquire)
    }

    /// Whether a request asking for a sender now would wait for one (every sender held, or
    /// held, asked for and about to be).
    pub(super) fn saturated(&self) -> bool {
        let waiting = self.pool.waiting.load(Ordering::Acquire);
        self.pool.saturation.full_for(waiting)
    }

    /// Until a sender is given back (at once if one was since the last wait).
    pub(super) async fn freed(&self) {
        self.pool.saturation.room.notified().await
    }

    /// A buyer spawned already due: counted as arriving until its first request asks for a
    /// sender or its task ends (`held`: see [`Arriving::held`]).
    pub(super) fn arriving(&self, held: Option<Instant>) -> Arriving {
        let saturation = self.pool.saturation.clone();
        saturation.arriving.fetch_add(1, Ordering::AcqRel);
        Arriving { held, saturation }
    }
}

/// The senders, idle ones first in line to be lent.
pub(super) struct Pool {
    /// One permit per idle sender: a request takes one before it takes a sender, so requests
    /// waiting for a sender are served in the order they asked.
    permits: Semaphore,
    /// The idle senders; the one given back last is lent first (its connection and its
    /// memory the likeliest still warm).
    idle: Mutex<Vec<Sender>>,
    /// Requests waiting for a sender.
    waiting: AtomicUsize,
    /// Every [`Jobs`] is dropped: the senders take their goose users back.
    closed: AtomicBool,
    /// The goose attack ended or failed: nothing is lent any more.
    gone: AtomicBool,
    /// Told when the pool closes, and each time a sender is given back after that.
    back: Notify,
    saturation: Arc<Saturation>,
    recorder: Arc<Recorder>,
    /// Test stand-ins' requests go here (dropped when the pool closes).
    #[cfg(test)]
    stand_ins: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Handed>>>,
}

/// One sender: what sends, and each shop's base URL, parsed once per sender (a run has one
/// shop, or a few).
struct Sender {
    via: Via,
    bases: Vec<(Arc<Target>, Option<Url>)>,
}

/// What sends a lent sender's request.
enum Via {
    /// A goose user its goose task lent the pool (its client, its metrics channel), and its
    /// index among goose's users.
    Goose(usize, Box<GooseUser>),
    /// A test's stand-in: the request is handed to the test ([`StandIns`]).
    #[cfg(test)]
    StandIn,
}

impl Pool {
    fn new(senders: usize, recorder: Arc<Recorder>) -> Pool {
        Pool {
            permits: Semaphore::new(0),
            idle: Mutex::new(Vec::with_capacity(senders)),
            waiting: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            back: Notify::new(),
            saturation: Arc::new(Saturation::new(senders)),
            recorder,
            #[cfg(test)]
            stand_ins: Mutex::new(None),
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Sender>> {
        // Every change under the lock is one push or one removal: a poisoned lock is used as
        // it is.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds an idle sender.
    fn put(&self, sender: Sender) {
        self.idle().push(sender);
        self.permits.add_permits(1);
    }

    /// The next idle sender, waiting for one (in turn) if none is.
    async fn borrow(&self) -> Result<Lent<'_>, PoolGone> {
        let permit = match self.permits.try_acquire() {
            Ok(p) => p,
            Err(TryAcquireError::Closed) => return Err(PoolGone),
            Err(TryAcquireError::NoPermits) => {
                let _waiting = Waiting::new(&self.waiting);
                self.permits.acquire().await.map_err(|_| PoolGone)?
            }
        };
        permit.forget();
        let sender = self.idle().pop().ok_or(PoolGone)?;
        self.saturation.took();
        Ok(Lent {
            pool: self,
            sender: Some(sender),
        })
    }

    /// A lent sender given back.
    fn give_back(&self, sender: Sender) {
        self.put(sender);
        self.saturation.freed();
        if self.closed.load(Ordering::Acquire) {
            self.back.notify_waiters();
        }
    }

    /// Every buyer is done: nothing more is lent, the senders take their goose users back.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.permits.close();
        #[cfg(test)]
        self.stand_ins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        self.back.notify_waiters();
    }

    /// The goose attack is over (ended or failed): requests waiting for a sender, and any
    /// asked for later, get [`PoolGone`].
    fn gone(&self) {
        self.gone.store(true, Ordering::Release);
        self.permits.close();
    }

    /// Goose user `index` once the pool has closed and it is idle again.
    async fn take_back(&self, index: usize) -> Option<Box<GooseUser>> {
        loop {
            // Registered before the look, so a give-back between the look and the wait is not
            // missed.
            let told = self.back.notified();
            tokio::pin!(told);
            told.as_mut().enable();
            if self.closed.load(Ordering::Acquire) {
                let mut idle = self.idle();
                let at = idle.iter().position(|s| match s.via {
                    Via::Goose(i, _) => i == index,
                    #[cfg(test)]
                    Via::StandIn => false,
                });
                if let Some(at) = at {
                    return match idle.swap_remove(at).via {
                        Via::Goose(_, u) => Some(u),
                        #[cfg(test)]
                        Via::StandIn => None,
                    };
                }
            }
            told.await;
        }
    }
}

/// Counts a request waiting for a sender, until it has one or gives up.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::AcqRel);
        Waiting(n)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A sender lent to one request; given back when dropped, answered or not.
struct Lent<'p> {
    pool: &'p Pool,
    sender: Option<Sender>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.sender.take() {
            self.pool.give_back(s);
        }
    }
}

impl Lent<'_> {
    /// Sends `job` and records it; returns its classified answer, when it was sent and when
    /// it was complete.
    async fn send(&mut self, job: Job) -> Result<Answered, PoolGone> {
        let Sender { via, bases } = self.sender.as_mut().ok_or(PoolGone)?;
        match via {
            Via::Goose(_, user) => {
                let base = match bases.iter().find(|(t, _)| Arc::ptr_eq(t, &job.target)) {
                    Some((_, base)) => base.as_ref(),
                    None => {
                        let base = Url::parse(&job.target.base_url).ok();
                        bases.push((job.target.clone(), base));
                        bases.last().and_then(|(_, b)| b.as_ref())
                    }
                };
                let url = base.map(|base| Target::url_on(base, &job.prepared));
                Ok(send_one(user, &self.pool.recorder, &job, url).await)
            }
            #[cfg(test)]
            Via::StandIn => self.pool.hand_to_stand_ins(job).await,
        }
    }
}

/// A new pool of `senders` (empty until [`run`] starts them), the buyers' handle on it, and how
/// busy its senders are.
pub(super) fn new(senders: usize, recorder: Arc<Recorder>) -> (Jobs, Arc<Pool>, Arc<Saturation>) {
    let pool = Arc::new(Pool::new(senders, recorder));
    let jobs = Jobs {
        pool: pool.clone(),
        _open: Arc::new(Open(pool.clone())),
    };
    let saturation = pool.saturation.clone();
    (jobs, pool, saturation)
}

/// Runs the pool's goose users until every buyer is done; returns goose's metrics. `host` only
/// names goose's requests: each request's URL is its own target's.
pub(super) async fn run(
    pool: Arc<Pool>,
    client: reqwest::Client,
    host: String,
    timeout: Duration,
) -> anyhow::Result<GooseMetrics> {
    let senders = pool.saturation.senders;
    let lending = pool.clone();
    let sender: TransactionFunction = Arc::new(move |user| {
        let (pool, client) = (lending.clone(), client.clone());
        Box::pin(async move { lend(user, pool, client).await })
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
    let _diverted = crate::traffic::goose_output::divert();
    let attack = async {
        GooseAttack::initialize_with_config(config)?
            .set_client_builder_without_cookies(
                GooseClientBuilder::new().without_cookies().timeout(timeout),
            )?
            .register_scenario(
                scenario!("sender").register_transaction(Transaction::new(sender).set_name("send")),
            )
            .execute()
            .await
    };
    let metrics = attack.await;
    pool.gone();
    Ok(metrics?)
}

/// One sender's goose task: lends its goose user to the pool and takes it back once every
/// buyer is done. While it is lent, the task holds a stand-in of it, which goose never sees
/// (goose looks at its user only between transactions).
async fn lend(user: &mut GooseUser, pool: Arc<Pool>, client: reqwest::Client) -> TransactionResult {
    // Goose's client builder cannot turn redirects off: every sender sends on the harness's
    // own shared client instead (one connection pool, no redirects followed).
    user.client = client.clone();
    let index = user.weighted_users_index;
    let stand_in = match GooseUser::new(
        0,
        Arc::from("lent"),
        user.base_url.clone(),
        &user.config,
        user.load_test_hash,
        Some(client),
    ) {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!("a goose user could not be lent to the buyers: {e}");
            return Ok(());
        }
    };
    let lent = std::mem::replace(user, stand_in);
    pool.put(Sender {
        via: Via::Goose(index, Box::new(lent)),
        bases: Vec::new(),
    });
    if let Some(back) = pool.take_back(index).await {
        *user = *back;
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
) -> (Classified, Sent, Instant) {
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
                    Ok(resp) => job.target.read(kind, &job.prepared, resp).await,
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
        let sample = job
            .target
            .sample(&read.body, &job.prepared, &read.classified.learned);
        rec.unclassified(kind, status, &sample);
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
