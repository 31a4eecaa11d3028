//! What an adversarial buyer (`[adversarial]`) sends after its order: the follow-up steps of
//! its script, each answer recorded with the order (`Recorder::follow_up`) for the oracle to
//! judge (`oracle::answers`), and what the client was told (`Recorder::told`) as the steps
//! were answered.

use super::super::adversary::Script;
use super::super::recorder::{Answer, AnswerClass, FollowUp, Kind, Step, Told};
use super::super::schedule::{AfterOrder, BuyerPlan};
use super::super::target::{Action, Target};
use super::journey::{ack, with_retries, Created, Ctx};
use super::pool::PoolGone;
use std::sync::Arc;
use tokio::time::Instant;

/// Runs buyer `b`'s script on its created orders (`resend_same_key` first resends its first
/// attempt, whose answer was `first`, and may add the order that resend created).
/// `ordered`: the first attempt's intended send; `done`: its answer.
pub(super) async fn run(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    created: &mut Vec<Created>,
    first: Option<Answer>,
    ordered: Instant,
    done: Instant,
) -> Result<(), PoolGone> {
    let AfterOrder::Script { script, think } = b.after else {
        return Ok(());
    };
    let rec = &ctx.recorder;
    let key = rec.attempt_key(b.index, 0);
    let mut resent = None;
    let lost_answer = first.filter(|a| AnswerClass::of(*a) != AnswerClass::Refused);
    if script == Script::ResendSameKey && lost_answer.is_some() {
        resent = resend(ctx, target, b, &key, created, done).await?;
    }
    for (id, at, k) in created.clone() {
        let mut steps: Vec<Step> = Vec::new();
        let mut answer = Answer::Created;
        if k == key {
            if let Some(step) = resent.take() {
                answer = first.unwrap_or(Answer::Created);
                steps.push(step);
            }
        }
        let from = match script {
            Script::AtTimeout => ordered,
            _ => at.max(done),
        };
        follow(ctx, target, b, script, &id, from + think, &mut steps).await?;
        rec.follow_up(FollowUp {
            script,
            buyer: b.index,
            key: k,
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
            key,
            order_id: None,
            ordered,
            steps: vec![step],
        });
    }
    Ok(())
}

/// Sends the first order attempt again with its key right after its answer (`done`), as a
/// client that lost that answer; an order it created that the buyer was not told yet (another
/// id under the key) is acknowledged and added to `created`.
async fn resend(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    key: &str,
    created: &mut Vec<Created>,
    done: Instant,
) -> Result<Option<Step>, PoolGone> {
    let rec = &ctx.recorder;
    let Some(prepared) = target.prepare(&Action::Order(Some(key.to_string())), b) else {
        return Ok(None);
    };
    let (c, at) =
        with_retries(ctx, target, Kind::Order, prepared, b, done, Some(key), true).await?;
    rec.retrying(key);
    rec.attempt(key, b.index, c.answer, c.order_id.as_deref(), at);
    if c.answer == Answer::Created {
        let known = created.iter().any(|(id, _, k)| {
            k == key && (id.is_none() || c.order_id.is_none() || *id == c.order_id)
        });
        if !known {
            ack(rec, b, key, c.order_id.clone(), at);
            created.push((c.order_id.clone(), at, key.to_string()));
        }
    }
    Ok(Some(Step::answered(
        rec,
        Kind::Order,
        c.answer,
        c.order_id,
        at,
    )))
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

/// Sends the script's steps for order `id` from `when` (each next step right after the
/// previous answer; `pay_and_cancel`'s two at once), appending each answered step.
#[allow(clippy::too_many_arguments)]
async fn follow(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    script: Script,
    id: &Option<String>,
    when: Instant,
    steps: &mut Vec<Step>,
) -> Result<(), PoolGone> {
    tokio::time::sleep_until(when).await;
    if script == Script::PayAndCancel {
        let (pay, cancel) = tokio::join!(
            step(ctx, target, b, Kind::Pay, id, when),
            step(ctx, target, b, Kind::Cancel, id, when)
        );
        steps.extend(pay?.map(|(s, _)| s));
        steps.extend(cancel?.map(|(s, _)| s));
        return Ok(());
    }
    let mut intended = when;
    for kind in plan(script) {
        // An order whose answer lacked the id a pay/cancel path needs is left to expire.
        let Some((s, done)) = step(ctx, target, b, *kind, id, intended).await? else {
            return Ok(());
        };
        steps.push(s);
        intended = done;
    }
    Ok(())
}

/// One pay or cancel of order `id` (retried as `[client] retry` says); a client told `ok`
/// is told its order is paid or cancelled. `None`: the request cannot be made (no id).
async fn step(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    kind: Kind,
    id: &Option<String>,
    intended: Instant,
) -> Result<Option<(Step, Instant)>, PoolGone> {
    let (action, told) = match kind {
        Kind::Pay => (Action::Pay(id.clone()), Told::Paid),
        _ => (Action::Cancel(id.clone()), Told::Cancelled),
    };
    let Some(prepared) = target.prepare(&action, b) else {
        return Ok(None);
    };
    let rec = &ctx.recorder;
    let (c, done) = with_retries(ctx, target, kind, prepared, b, intended, None, false).await?;
    if c.answer == Answer::Ok {
        rec.told(id.as_deref(), told);
    }
    Ok(Some((
        Step::answered(rec, kind, c.answer, None, done),
        done,
    )))
}

#[cfg(test)]
mod tests;
