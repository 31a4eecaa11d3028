//! The buyers: one plain task per person, spawned shortly before its arrival.
//!
//! The dispatcher walks the plan in arrival order and spawns each buyer's journey [`AHEAD`] of
//! its arrival with its [`BuyerPlan`] drawn then, so a buyer not yet due costs only its
//! arrival in the [`super::super::schedule::Schedule`]. A journey sleeps until
//! its arrival and then visits the shop (a login on arrival, views, the order, a bot's extra
//! submissions, pay or cancel after thinking), sending every request on a sender it borrows
//! from the pool ([`super::pool`]) and waiting for its answer: each buyer is a closed loop, the arrivals are
//! an open model, so a slow shop delays that buyer's later requests, never anyone's arrival.
//! Every request is filled in from the buyer's session (its CSV values, what earlier answers
//! taught it, its cookies). An order answered `pending` is polled until the shop decides it
//! ([`super::poll`]). An `[adversarial]` buyer follows its script instead of pay or cancel
//! ([`super::script`]); every request is retried as `[client] retry` says ([`super::context::with_retries`]:
//! the same request, an order with its attempt's key), the retries recorded apart from first
//! attempts.

use super::super::recorder::{Answer, BuyerResult, Kind, Recorder, Told};
use super::super::schedule::{AfterOrder, BuyerPlan};
use super::super::session::Session;
use super::super::target::{Action, Classified, Target};
pub(super) use super::context::Ctx;
use super::context::{attempted, with_retries, Created};
use super::pool::PoolGone;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long before its arrival a buyer's journey is spawned.
pub const AHEAD: Duration = Duration::from_millis(100);

/// The dispatcher's shortest sleep while it keeps ahead of the arrivals (it spawns every buyer
/// due within [`AHEAD`] at once), and its longest while it holds buyers back.
const TICK: Duration = Duration::from_millis(10);

/// Spawns every buyer's journey [`AHEAD`] of its arrival; returns once the last is spawned
/// (or the pool is gone). The journeys hold the shared context: the pool closes when the last
/// one finishes.
///
/// While every sender is held (the shop is slower than the arrivals), buyers are held back,
/// due or not: each waits as its place in the schedule, not as a task waiting for a sender,
/// so a backlog of a hundred thousand buyers costs no memory. A held buyer is spawned as soon
/// as a sender could take its request, which then counts its wait from its arrival (or from
/// the moment the hold began, if it was due before) as sender wait, the shop's
/// ([`super::pool::Arriving`]), exactly as if it had asked for one then. The hold is checked
/// whenever a sender is given back, and every [`TICK`]. A buyer spawned already due
/// counts against the free senders until its first request asks for one, so a backlog comes out
/// of the hold no faster than senders come free.
pub(super) async fn dispatch(ctx: Arc<Ctx>) {
    let plan = ctx.plan.clone();
    let at = |k: usize| plan.arrival(k);
    let opened = ctx.recorder.opened();
    let mut next = 0;
    // When buyers began to be held back, while they are.
    let mut holding: Option<Instant> = None;
    while next < plan.len() {
        if ctx.jobs.is_closed() {
            return;
        }
        let now = Instant::now();
        let horizon = now + AHEAD;
        let mut held_back = false;
        while next < plan.len() && opened + at(next) <= horizon {
            let arrival = opened + at(next);
            let due = arrival <= now;
            // Not only a due buyer: one spawned ahead asks for a sender at its arrival, so
            // spawning ahead behind a backlog would line every arrival up after all.
            if ctx.jobs.saturated() {
                holding.get_or_insert(now);
                held_back = true;
                break;
            }
            let held = holding.filter(|_| due).map(|since| since.max(arrival));
            let arriving = due.then(|| ctx.jobs.arriving(held));
            let journey = journey(ctx.clone(), plan.get(next));
            tokio::spawn(super::pool::ARRIVING.scope(std::cell::RefCell::new(arriving), journey));
            next += 1;
        }
        if !held_back {
            holding = None;
        }
        if held_back {
            // Back as soon as a sender comes free (or a tick, whichever is first).
            tokio::select! {
                _ = tokio::time::sleep(TICK) => {}
                _ = ctx.jobs.freed() => {}
            }
        } else if next < plan.len() {
            let arrival = opened + at(next);
            let due = arrival.checked_sub(AHEAD).unwrap_or(opened);
            tokio::time::sleep_until(due.max(Instant::now() + TICK)).await;
        }
    }
}

/// Sends one request of buyer `b` through the pool (retried as `[client] retry` says), filled
/// in from its session (which learns the answer's cookies and extracted values); `None` when
/// the mapping has no such request (the answer is then "now", at `intended`).
async fn send(
    ctx: &Ctx,
    target: &Arc<Target>,
    kind: Kind,
    action: &Action,
    b: &BuyerPlan,
    session: &mut Session,
    intended: Instant,
) -> Result<(Option<Classified>, Instant), PoolGone> {
    let Some(prepared) = target.prepare(action, b, session) else {
        return Ok((None, intended));
    };
    // Boxed (as every send here): a buyer on its way holds only a pointer to its request.
    let t = Box::pin(with_retries(
        ctx, target, kind, prepared, b, intended, None, false,
    ))
    .await?;
    session.learn(&t.c.learned);
    Ok((Some(t.c), t.done))
}

/// A buyer who leaves without ordering (its login failed: it would only be refused).
fn leaves(rec: &Recorder, b: &BuyerPlan) {
    let result = BuyerResult {
        bot: b.bot,
        attempted: false,
        got_order: false,
    };
    rec.finished(b.index, result);
}

/// Sends order attempt `n` of buyer `b` with its key (retried as `[client] retry` says),
/// filled in from its session (which learns the answer); an answer `pending` is followed
/// until the shop decides it ([`super::poll::decide`]), whose answer is then the attempt's.
async fn send_order(
    ctx: &Ctx,
    target: &Arc<Target>,
    n: usize,
    b: &BuyerPlan,
    session: &mut Session,
    intended: Instant,
) -> Result<(Option<Classified>, Instant), PoolGone> {
    let order = Action::Order(Some(ctx.recorder.attempt_key(b.index, n)));
    let Some(prepared) = target.prepare(&order, b, session) else {
        return Ok((None, intended));
    };
    let sent = with_retries(
        ctx,
        target,
        Kind::Order,
        prepared,
        b,
        intended,
        Some(n),
        false,
    );
    let t = Box::pin(sent).await?;
    session.learn(&t.c.learned);
    if t.c.answer != Answer::Pending {
        return Ok((Some(t.c), t.done));
    }
    let accepted = super::poll::Accepted {
        intended: t.intended,
        sent: t.sent,
        at: t.done,
        retry: t.retried,
    };
    // Boxed: a journey's future stays small while most orders are never pending.
    let (c, done) = Box::pin(super::poll::decide(ctx, target, b, session, t.c, accepted)).await?;
    Ok((Some(c), done))
}

/// One person's visit: arrive, browse, order (bots: again and again), then pay, cancel or leave.
/// Ends early only if the pool is gone (the run failed).
async fn journey(ctx: Arc<Ctx>, b: BuyerPlan) -> Result<(), PoolGone> {
    let b = &b;
    let target = ctx.targets.of(b);
    let rec = &ctx.recorder;
    let mut intended = rec.opened() + b.arrival;
    ctx.pace.until(intended).await;
    rec.arrived();
    let Some(mut session) = target.session_for(b) else {
        leaves(rec, b);
        return Ok(());
    };
    if !super::login::on_arrival(&ctx, target, b, &mut session, &mut intended).await? {
        leaves(rec, b);
        return Ok(());
    }
    for think in &b.views {
        let view = Action::View;
        let (_, done) = send(&ctx, target, Kind::View, &view, b, &mut session, intended).await?;
        intended = done + *think;
        ctx.pace.until(intended).await;
    }
    let answered = submit(&ctx, target, b, &mut session, intended).await?;
    // The buyer goes on once it has every answer it waited for (a bot's last submission may
    // be answered after its first): its next request is due after that, plus its think time.
    let done = answered.iter().map(|a| a.1).max().unwrap_or(intended);
    let mut created: Vec<Created> = Vec::new();
    // The first submission's answer (a bot's extra ones follow it).
    let first_class = answered
        .first()
        .and_then(|(c, ..)| c.as_ref().map(|c| c.answer));
    for (c, at, n, sent) in answered {
        let Some(c) = c else { continue };
        if let Some(ack) = attempted(rec, b, n, &c, at, sent) {
            created.push((c.order_id, at, n, ack));
        }
    }
    if let AfterOrder::Script { .. } = b.after {
        // Boxed: a buyer on its way holds only its plan until it gets this far.
        let scripted = super::script::run(
            &ctx,
            target,
            b,
            &mut session,
            &mut created,
            first_class,
            intended,
            done,
        );
        Box::pin(scripted).await?;
    } else {
        after_order(&ctx, target, b, &mut session, &created, done).await?;
    }
    rec.finished(
        b.index,
        BuyerResult {
            bot: b.bot,
            attempted: true,
            got_order: !created.is_empty(),
        },
    );
    Ok(())
}

/// One order submission's answer (`None`: not sent), when it was answered, its number (0:
/// the first) and when it was due.
type Submitted = (Option<Classified>, Instant, usize, Instant);

/// The buyer's order submissions: the first at `intended`, a bot's extra ones on its own
/// schedule whatever the first one's fate; every answer, the first first.
async fn submit(
    ctx: &Arc<Ctx>,
    target: &Arc<Target>,
    b: &BuyerPlan,
    session: &mut Session,
    intended: Instant,
) -> Result<Vec<Submitted>, PoolGone> {
    let mut extra = Vec::new();
    let mut at = intended;
    // Every submission is an attempt of its own, named by its own idempotency key.
    for (n, gap) in b.resubmits.iter().enumerate() {
        at += *gap;
        let ctx = ctx.clone();
        let mut session = session.clone();
        let b = b.clone();
        extra.push(tokio::spawn(async move {
            ctx.pace.until(at).await;
            let t = ctx.targets.of(&b);
            let (c, done) = send_order(&ctx, t, n + 1, &b, &mut session, at).await?;
            Ok::<_, PoolGone>((c, done, n + 1, at))
        }));
    }
    let (first, done) = send_order(ctx, target, 0, b, session, intended).await?;
    let mut answered = vec![(first, done, 0, intended)];
    for task in extra {
        if let Ok(answer) = task.await {
            answered.push(answer?);
        }
    }
    Ok(answered)
}

/// `[after_order]`: pays or cancels each created order after thinking, or leaves it.
async fn after_order(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    session: &mut Session,
    created: &[Created],
    done: Instant,
) -> Result<(), PoolGone> {
    let rec = &ctx.recorder;
    let (kind, think) = match b.after {
        AfterOrder::Pay { think } => (Kind::Pay, think),
        AfterOrder::Cancel { think } => (Kind::Cancel, think),
        AfterOrder::Abandon | AfterOrder::Script { .. } => return Ok(()),
    };
    // When the buyer is free again: each order's request comes after the previous answer.
    let mut free = done;
    for (id, at, _, ack) in created {
        let act = if kind == Kind::Pay {
            Action::Pay(id.clone())
        } else {
            Action::Cancel(id.clone())
        };
        // An order whose answer lacked the id a pay/cancel path needs is left to expire.
        let Some(prepared) = target.prepare(&act, b, session) else {
            continue;
        };
        let intended = ((*at).max(done) + think).max(free);
        ctx.pace.until(intended).await;
        let sent = with_retries(ctx, target, kind, prepared, b, intended, None, false);
        let t = Box::pin(sent).await?;
        free = t.done;
        session.learn(&t.c.learned);
        if t.c.answer == Answer::Ok {
            let told = if kind == Kind::Pay {
                Told::Paid
            } else {
                Told::Cancelled
            };
            rec.followed_up(*ack, told, intended, t.done);
        }
    }
    Ok(())
}

/// The size of a journey's future: what a buyer on its way holds (besides tokio's task header).
#[cfg(test)]
pub(super) fn future_size(ctx: Arc<Ctx>) -> usize {
    let b = ctx.plan.get(0);
    std::mem::size_of_val(&journey(ctx, b))
}
