//! The buyers: one plain task per person, spawned shortly before its arrival.
//!
//! The dispatcher walks the plan in arrival order and spawns each buyer's journey [`AHEAD`] of
//! its arrival, so a buyer not yet due costs only its [`BuyerPlan`]. A journey sleeps until
//! its arrival and then visits the shop (views, the order, a bot's extra submissions, pay or
//! cancel after thinking), handing every request to the senders' pool ([`super::pool`]) and
//! waiting for its answer: each buyer is a closed loop, the arrivals are an open model, so a
//! slow shop delays that buyer's later requests, never anyone's arrival.

use super::super::recorder::{Ack, Answer, BuyerResult, Kind, Recorder, Told};
use super::super::schedule::{AfterOrder, BuyerPlan};
use super::super::session::Session;
use super::super::target::{Action, Classified, Target, Targets};
use super::pool::{Jobs, PoolGone};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long before its arrival a buyer's journey is spawned.
pub const AHEAD: Duration = Duration::from_millis(100);

/// The dispatcher wakes at most this often (it spawns every buyer due within [`AHEAD`] at once).
const TICK: Duration = Duration::from_millis(10);

/// What every journey shares.
pub(super) struct Ctx {
    pub plan: Arc<Vec<BuyerPlan>>,
    /// Buyer i goes to shop i mod K.
    pub targets: Targets,
    pub recorder: Arc<Recorder>,
    pub jobs: Jobs,
}

/// The plan's positions in arrival order: `None` when the plan already is in that order (a
/// seeded schedule, or a shard's part of one), else the sorted positions.
pub(super) fn arrival_order(plan: &[BuyerPlan]) -> Option<Vec<u32>> {
    if plan.is_sorted_by_key(|b| b.arrival) {
        return None;
    }
    let mut order: Vec<u32> = (0..plan.len() as u32).collect();
    order.sort_by_key(|&i| plan[i as usize].arrival);
    Some(order)
}

/// Spawns every buyer's journey [`AHEAD`] of its arrival; returns once the last is spawned
/// (or the pool is gone). The journeys hold the shared context: the queue closes when the last
/// one finishes.
pub(super) async fn dispatch(ctx: Arc<Ctx>) {
    let plan = ctx.plan.clone();
    let order = arrival_order(&plan);
    let at = |k: usize| order.as_ref().map_or(k, |o| o[k] as usize);
    let opened = ctx.recorder.opened();
    let mut next = 0;
    while next < plan.len() {
        if ctx.jobs.is_closed() {
            return;
        }
        let horizon = Instant::now() + AHEAD;
        while next < plan.len() && opened + plan[at(next)].arrival <= horizon {
            tokio::spawn(journey(ctx.clone(), at(next)));
            next += 1;
        }
        if next < plan.len() {
            let arrival = opened + plan[at(next)].arrival;
            let due = arrival.checked_sub(AHEAD).unwrap_or(opened);
            tokio::time::sleep_until(due.max(Instant::now() + TICK)).await;
        }
    }
}

/// Sends one request of buyer `b` through the pool, filled in from its session (which
/// learns the answer's cookies and extracted values); `None` when the mapping has no such
/// request (the answer is then "now", at `intended`).
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
    let (c, done) = ctx.jobs.send(target, kind, prepared, intended).await?;
    session.learn(&c.learned);
    Ok((Some(c), done))
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

/// Sends an order attempt of buyer `b`, filled in from its session (which learns the
/// answer); an answer `pending` is followed until the shop decides it
/// ([`super::poll::decide`]), whose answer is then the attempt's.
async fn send_order(
    ctx: &Ctx,
    target: &Arc<Target>,
    order: &Action,
    b: &BuyerPlan,
    session: &mut Session,
    intended: Instant,
) -> Result<(Option<Classified>, Instant), PoolGone> {
    let Some(prepared) = target.prepare(order, b, session) else {
        return Ok((None, intended));
    };
    let (c, sent, done) = ctx
        .jobs
        .send_timed(target, Kind::Order, prepared, intended)
        .await?;
    session.learn(&c.learned);
    if c.answer != Answer::Pending {
        return Ok((Some(c), done));
    }
    let accepted = super::poll::Accepted {
        intended,
        sent,
        at: done,
    };
    // Boxed: a journey's future stays small while most orders are never pending.
    let (c, done) = Box::pin(super::poll::decide(ctx, target, b, session, c, accepted)).await?;
    Ok((Some(c), done))
}

/// One person's visit: arrive, browse, order (bots: again and again), then pay, cancel or leave.
/// Ends early only if the pool is gone (the run failed).
async fn journey(ctx: Arc<Ctx>, i: usize) -> Result<(), PoolGone> {
    let b = &ctx.plan[i];
    let target = ctx.targets.of(b);
    let rec = &ctx.recorder;
    let mut intended = rec.opened() + b.arrival;
    tokio::time::sleep_until(intended).await;
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
        tokio::time::sleep_until(intended).await;
    }
    // A bot fires its extra submissions on its own schedule, whatever the first one's fate.
    let mut extra = Vec::new();
    let mut at = intended;
    // Every submission is an attempt of its own, named by its own idempotency key.
    for (n, gap) in b.resubmits.iter().enumerate() {
        at += *gap;
        let ctx = ctx.clone();
        let key = rec.attempt_key(b.index, n + 1);
        let mut session = session.clone();
        extra.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let b = &ctx.plan[i];
            let order = Action::Order(Some(key.clone()));
            let t = ctx.targets.of(b);
            let (c, done) = send_order(&ctx, t, &order, b, &mut session, at).await?;
            Ok::<_, PoolGone>((c, done, key, at))
        }));
    }
    let key = rec.attempt_key(b.index, 0);
    let order = Action::Order(Some(key.clone()));
    let (first, done) = send_order(&ctx, target, &order, b, &mut session, intended).await?;
    let mut answered = vec![(first, done, key, intended)];
    for task in extra {
        if let Ok(answer) = task.await {
            answered.push(answer?);
        }
    }
    let mut created: Vec<(Option<String>, Instant, String, Instant)> = Vec::new();
    for (c, at, key, sent) in answered {
        let Some(c) = c else { continue };
        rec.attempt(&key, b.index, c.answer, c.order_id.as_deref(), at);
        if c.answer == Answer::Created {
            created.push((c.order_id, at, key, sent));
        }
    }
    let mut acked = Vec::with_capacity(created.len());
    for (id, at, key, sent) in &created {
        let ack = Ack {
            key: Some(key.clone()),
            order_id: id.clone(),
            buyer: b.index,
            user_id: b.user_id.clone(),
            device_id: b.device_id.clone(),
            bot: b.bot,
            at_ms: 0,
            sent_ms: rec.ms(*sent),
            cancel_sent_ms: None,
            paid_ms: None,
        };
        acked.push(rec.ack(ack, *at));
    }
    let (kind, think) = match b.after {
        AfterOrder::Pay { think } => (Some(Kind::Pay), think),
        AfterOrder::Cancel { think } => (Some(Kind::Cancel), think),
        AfterOrder::Abandon => (None, Duration::ZERO),
    };
    if let Some(kind) = kind {
        for ((id, at, _, _), &ack) in created.iter().zip(&acked) {
            let act = if kind == Kind::Pay {
                Action::Pay(id.clone())
            } else {
                Action::Cancel(id.clone())
            };
            // An order whose answer lacked the id a pay/cancel path needs is left to expire.
            let Some(prepared) = target.prepare(&act, b, &session) else {
                continue;
            };
            let intended = (*at).max(done) + think;
            tokio::time::sleep_until(intended).await;
            let (answer, answered) = ctx.jobs.send(target, kind, prepared, intended).await?;
            session.learn(&answer.learned);
            if answer.answer == Answer::Ok {
                let told = if kind == Kind::Pay {
                    Told::Paid
                } else {
                    Told::Cancelled
                };
                rec.told(id.as_deref(), told);
                rec.followed_up(ack, told, intended, answered);
            }
        }
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

/// The size of a journey's future: what a buyer on its way holds (besides tokio's task header).
#[cfg(test)]
pub(super) fn future_size(ctx: Arc<Ctx>) -> usize {
    std::mem::size_of_val(&journey(ctx, 0))
}
