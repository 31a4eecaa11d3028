//! What an adversarial buyer (`[adversarial]`) sends after its order: the follow-up steps of
//! its script, each answer recorded with the order (`Recorder::follow_up`) for the oracle to
//! judge (`oracle::answers`), and what the client was told (`Recorder::told`) as the steps
//! were answered.

use super::super::adversary::Script;
use super::super::recorder::{Answer, AnswerClass, FollowUp, Key, Kind, Step, Told};
use super::super::schedule::{AfterOrder, BuyerPlan};
use super::super::session::Session;
use super::super::target::{Action, Target};
use super::context::{with_retries, Created, Ctx};
use super::pool::PoolGone;
use std::sync::Arc;
use tokio::time::Instant;

/// Runs buyer `b`'s script on its created orders (`resend_same_key` first resends its first
/// attempt, whose answer was `first`, and may add the order that resend created), each request
/// filled in from the buyer's `session`. `ordered`: the first attempt's intended send; `done`:
/// its answer.
#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    session: &mut Session,
    created: &mut Vec<Created>,
    first: Option<Answer>,
    ordered: Instant,
    done: Instant,
) -> Result<(), PoolGone> {
    let AfterOrder::Script { script, think } = b.after else {
        return Ok(());
    };
    let rec = &ctx.recorder;
    let mut resent = None;
    let lost_answer = first.filter(|a| AnswerClass::of(*a) != AnswerClass::Refused);
    if script == Script::ResendSameKey && lost_answer.is_some() {
        resent = resend(ctx, target, b, session, created, done).await?;
    }
    // The buyer goes on once the resend is answered: its steps are due after that.
    let done = resent.as_ref().map_or(done, |(_, at)| *at);
    let mut resent = resent.map(|(step, _)| step);
    // When the buyer is free again: each order's steps come after the previous one's answers.
    let mut free = done;
    for (id, at, k, ack) in created.clone() {
        let mut steps: Vec<Step> = Vec::new();
        let mut answer = Answer::Created;
        if k == 0 {
            if let Some(step) = resent.take() {
                answer = first.unwrap_or(Answer::Created);
                steps.push(step);
            }
        }
        let from = match script {
            Script::AtTimeout => ordered,
            _ => at.max(done),
        };
        let order = Order { id: &id, ack };
        let due = (from + think).max(free);
        free = follow(ctx, target, b, session, script, order, due, &mut steps).await?;
        rec.follow_up(FollowUp {
            script,
            buyer: b.index,
            key: rec.attempt_key(b.index, k),
            order_id: id,
            ordered: answer,
            steps,
        });
    }
    if let (Some(step), Some(ordered)) = (resent, lost_answer) {
        // The first answer was lost (indeterminate) and the resend created nothing either.
        rec.follow_up(FollowUp {
            script,
            buyer: b.index,
            key: rec.attempt_key(b.index, 0),
            order_id: None,
            ordered,
            steps: vec![step],
        });
    }
    Ok(())
}

/// Sends the first order attempt (attempt 0) again with its key right after its answer
/// (`done`), as a client that lost that answer; an order it created that the buyer was not
/// told yet (another id under the key) is acknowledged and added to `created`.
async fn resend(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    session: &mut Session,
    created: &mut Vec<Created>,
    done: Instant,
) -> Result<Option<(Step, Instant)>, PoolGone> {
    let rec = &ctx.recorder;
    let order = Action::Order(Some(rec.attempt_key(b.index, 0)));
    let Some(prepared) = target.prepare(&order, b, session) else {
        return Ok(None);
    };
    let t = with_retries(ctx, target, Kind::Order, prepared, b, done, Some(0), true).await?;
    session.learn(&t.c.learned);
    let (c, at) = (t.c, t.done);
    let key = Key::Attempt {
        buyer: b.index,
        n: 0,
    };
    rec.retrying(key);
    let attempt = rec.attempt(key, b.index, c.answer, c.order_id.as_deref(), at);
    if c.answer == Answer::Created {
        let known = created.iter().any(|(id, _, k, _)| {
            *k == 0 && (id.is_none() || c.order_id.is_none() || *id == c.order_id)
        });
        if !known {
            let index = rec.ack(attempt, &b.user_id, &b.device_id, b.bot, done);
            created.push((c.order_id.clone(), at, 0, index));
        }
    }
    let step = Step::answered(rec, Kind::Order, c.answer, c.order_id, at);
    Ok(Some((step, at)))
}

/// The pay and cancel requests of `script`, in order.
fn plan(script: Script) -> &'static [Kind] {
    match script {
        Script::CancelAfterPay => &[Kind::Pay, Kind::Cancel],
        Script::CancelTwice => &[Kind::Cancel, Kind::Cancel],
        Script::PayTwice => &[Kind::Pay, Kind::Pay],
        Script::PayAfterCancel => &[Kind::Cancel, Kind::Pay],
        // Sent at once (see `follow`).
        Script::PayAndCancel => &[Kind::Pay, Kind::Cancel],
        Script::AtTimeout | Script::ResendSameKey => &[Kind::Pay],
    }
}

/// The order a script's steps go to: its id and its acknowledgement's index.
#[derive(Clone, Copy)]
struct Order<'a> {
    id: &'a Option<String>,
    ack: usize,
}

/// Sends the script's steps for `order` from `when` (each next step right after the previous
/// answer; `pay_and_cancel`'s two at once), appending each answered step; returns when the
/// last answer came (`when` if nothing could be sent).
#[allow(clippy::too_many_arguments)]
async fn follow(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    session: &Session,
    script: Script,
    order: Order<'_>,
    when: Instant,
    steps: &mut Vec<Step>,
) -> Result<Instant, PoolGone> {
    ctx.pace.until(when).await;
    if script == Script::PayAndCancel {
        let (pay, cancel) = tokio::join!(
            step(ctx, target, b, session, Kind::Pay, order, when),
            step(ctx, target, b, session, Kind::Cancel, order, when)
        );
        let (pay, cancel) = (pay?, cancel?);
        let last = [&pay, &cancel]
            .into_iter()
            .flatten()
            .map(|(_, at)| *at)
            .max()
            .unwrap_or(when);
        steps.extend(pay.map(|(s, _)| s));
        steps.extend(cancel.map(|(s, _)| s));
        return Ok(last);
    }
    let mut intended = when;
    for kind in plan(script) {
        // An order whose answer lacked the id a pay/cancel path needs is left to expire.
        let Some((s, done)) = step(ctx, target, b, session, *kind, order, intended).await? else {
            return Ok(intended);
        };
        steps.push(s);
        intended = done;
    }
    Ok(intended)
}

/// One pay or cancel of `order` (retried as `[client] retry` says); a client told `ok` is
/// told its order is paid or cancelled. `None`: the request cannot be made (no id).
async fn step(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    session: &Session,
    kind: Kind,
    order: Order<'_>,
    intended: Instant,
) -> Result<Option<(Step, Instant)>, PoolGone> {
    let id = order.id;
    let (action, told) = match kind {
        Kind::Pay => (Action::Pay(id.clone()), Told::Paid),
        _ => (Action::Cancel(id.clone()), Told::Cancelled),
    };
    let Some(prepared) = target.prepare(&action, b, session) else {
        return Ok(None);
    };
    let rec = &ctx.recorder;
    let t = with_retries(ctx, target, kind, prepared, b, intended, None, false).await?;
    let (c, done) = (t.c, t.done);
    if c.answer == Answer::Ok {
        rec.followed_up(order.ack, told, intended, done);
    }
    Ok(Some((
        Step::answered(rec, kind, c.answer, None, done),
        done,
    )))
}

#[cfg(test)]
mod tests;
