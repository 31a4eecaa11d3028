//! Asynchronous orders: an order the shop answered `pending` ("accepted, not decided", e.g. a
//! 202 with a ticket) is followed by its buyer until the shop decides it.
//!
//! The buyer sends `[target.poll]`'s request (its `{order_id}`: the id the pending answer
//! carried) every `interval` after the previous poll's answer, until a poll rule decides the
//! order: any outcome but `pending`, an error (`busy`, `server_error`, `unauthorized`, ...) or
//! an answer no rule reads, which say nothing about the order. Past `max_wait` after the
//! pending answer, the order is `undecided`: indeterminate, like a timeout. The order
//! attempt's answer and latency (from its intended send) are the decision's; polls are
//! recorded under their own kind, never among the orders; the recorder keeps the time from
//! acceptance to decision.

use super::super::recorder::{Answer, Kind, Sent};
use super::super::schedule::BuyerPlan;
use super::super::session::Session;
use super::super::target::{Action, Classified, Target, Why};
use super::context::Ctx;
use super::pool::PoolGone;
use std::sync::Arc;
use tokio::time::Instant;

/// Whether a poll's answer decides the order.
fn decides(c: &Classified) -> bool {
    matches!(c.why, Why::Rule(_))
        && c.answer != Answer::Pending
        && !c.answer.is_error()
        && !c.answer.is_unclassified()
}

/// When the order attempt was sent and when it was answered `pending`.
pub(super) struct Accepted {
    /// The attempt's intended send (its latency runs from here).
    pub intended: Instant,
    /// Its actual send (its service time runs from here).
    pub sent: Sent,
    /// The pending answer.
    pub at: Instant,
    /// The pending answer came to a retry (`[client] retry`): the decision is recorded with
    /// the retries, apart from first attempts.
    pub retry: bool,
}

/// Polls the order `pending` stands for until the shop decides it (or `max_wait` passes);
/// records the attempt's decision as its order answer; returns it and when it came.
pub(super) async fn decide(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    session: &mut Session,
    pending: Classified,
    accepted: Accepted,
) -> Result<(Classified, Instant), PoolGone> {
    let rec = &ctx.recorder;
    let ticket = pending.order_id;
    let mut decided = None;
    if let Some(poll) = target.mapping.poll.as_ref() {
        if ticket.is_none() && poll.request.needs_order_id() {
            rec.pending_without_id();
        }
        let deadline = accepted.at + poll.max_wait;
        let mut next = accepted.at + poll.interval;
        // No id for a poll that needs one: nothing to ask; the order stays undecided.
        while let Some(prepared) = target.prepare(&Action::Poll(ticket.clone()), b, session) {
            if next > deadline {
                break;
            }
            tokio::time::sleep_until(next).await;
            let (c, done) = ctx.jobs.send(target, Kind::Poll, prepared, next).await?;
            session.learn(&c.learned);
            if decides(&c) {
                decided = Some((c, done));
                break;
            }
            next = done + poll.interval;
        }
    }
    let (c, done) = match decided {
        Some((c, done)) => {
            rec.decision(accepted.at, Some(done));
            let order_id = match c.answer {
                Answer::Created => c.order_id.or(ticket),
                _ => None,
            };
            (Classified { order_id, ..c }, done)
        }
        None => {
            let done = Instant::now();
            rec.decision(accepted.at, None);
            let c = Classified {
                answer: Answer::Undecided,
                order_id: None,
                why: Why::NoRule,
                learned: Default::default(),
            };
            (c, done)
        }
    };
    if accepted.retry {
        rec.record_retry(Kind::Order, c.answer, accepted.intended, done);
    } else {
        rec.record(
            Kind::Order,
            c.answer,
            accepted.intended,
            accepted.sent,
            done,
        );
    }
    Ok((c, done))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_are_read_by_their_own_rules_and_pending_orders_carry_their_ticket() {
        use crate::traffic::mapping::{Mapping, RawMapping, RawPoll, RawRule};
        use crate::traffic::target::Sale;
        let mut raw = RawMapping::from(Mapping::default());
        raw.outcomes.insert(
            0,
            RawRule {
                status: vec!["202".into()],
                field: None,
                equals: None,
                outcome: "pending".into(),
            },
        );
        raw.poll = Some(RawPoll {
            method: "GET".into(),
            path: "/tickets/{order_id}".into(),
            body: None,
            headers: Default::default(),
            interval_ms: Some(100),
            interval: None,
            max_wait_ms: Some(1000),
            max_wait: None,
            outcomes: vec![RawRule {
                status: vec!["200".into()],
                field: Some("state".into()),
                equals: Some("done".into()),
                outcome: "created".into(),
            }],
        });
        let t = Target::new(
            "http://127.0.0.1:1",
            Mapping::try_from(raw).unwrap(),
            Sale {
                item_id: "1".into(),
                stock: 1,
                purchase_limit: 1,
                name: "item".into(),
                price_cents: 0,
            },
        );
        let c = t.classify(Kind::Order, 202, r#"{"order_id": "t-1"}"#);
        assert_eq!(
            (c.answer, c.order_id.as_deref()),
            (Answer::Pending, Some("t-1"))
        );
        let c = t.classify(Kind::Poll, 200, r#"{"state": "done"}"#);
        assert_eq!((c.answer, c.why.clone()), (Answer::Created, Why::Rule(0)));
        assert!(decides(&c));
        let c = t.classify(Kind::Poll, 200, r#"{"state": "queued"}"#);
        assert_eq!(
            (c.answer, c.why.clone()),
            (Answer::Unclassified, Why::NoRule)
        );
        assert!(!decides(&c), "an answer no poll rule reads says nothing");
        assert_eq!(
            t.classify(Kind::Order, 401, "").answer,
            Answer::Unauthorized,
            "a class rule (4xx) never hides a 401"
        );
        assert_eq!(t.classify(Kind::Poll, 403, "").answer, Answer::Unauthorized);
    }
}
