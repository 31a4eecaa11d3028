//! Adversarial scripts and retries against a stand-in for the senders that keeps the order
//! state machine (`pending_payment → paid | cancelled`), on tokio's paused clock.

use super::super::journey::{self, Ctx};
use super::super::pool;
use crate::traffic::adversary::{RetryPolicy, Script};
use crate::traffic::mapping::Mapping;
use crate::traffic::recorder::{Answer, Kind, Recorder};
use crate::traffic::schedule::{self, AfterOrder};
use crate::traffic::target::{Classified, Sale, Target, Targets, Why};
use crate::traffic::Scenario;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Answers like a correct shop, but the first try of every order key times out (nothing
/// bought); returns how many retries it was handed.
async fn correct_shop(mut stand_ins: pool::StandIns) -> usize {
    let mut keys: HashMap<String, Option<String>> = HashMap::new();
    let mut status: HashMap<String, &'static str> = HashMap::new();
    let mut retries = 0;
    while let Some(pool::Handed { job, reply }) = stand_ins.next().await {
        retries += usize::from(job.retry);
        let path = job.prepared.path.clone();
        let (answer, order_id) = match job.kind {
            Kind::Order => {
                let key = job
                    .prepared
                    .headers
                    .iter()
                    .find(|(h, _)| h == "Idempotency-Key")
                    .map(|(_, k)| k.clone())
                    .unwrap();
                match keys.get(&key).cloned() {
                    None => {
                        keys.insert(key, None);
                        (Answer::Timeout, None)
                    }
                    Some(Some(id)) => (Answer::Created, Some(id)),
                    Some(None) => {
                        let id = format!("1-{}", status.len());
                        keys.insert(key, Some(id.clone()));
                        status.insert(id.clone(), "pending");
                        (Answer::Created, Some(id))
                    }
                }
            }
            kind => {
                let id = path.split('/').nth(3).unwrap().to_string();
                let st = status.get_mut(&id).unwrap();
                match (kind, *st) {
                    (Kind::Pay, "cancelled") | (Kind::Cancel, "paid") => (Answer::Rejected, None),
                    (Kind::Pay, _) => {
                        *st = "paid";
                        (Answer::Ok, None)
                    }
                    _ => {
                        *st = "cancelled";
                        (Answer::Ok, None)
                    }
                }
            }
        };
        let c = Classified {
            answer,
            order_id,
            why: Why::Rule(0),
            learned: Default::default(),
        };
        let now = Instant::now();
        let _ = reply.send((c, now.into(), now + Duration::from_millis(2)));
    }
    retries
}

#[tokio::test(start_paused = true)]
async fn every_script_sends_its_steps_and_a_retry_keeps_the_key_and_is_recorded_apart() {
    // Arrange: 140 buyers, every one scripted (all seven scripts), every order's first try
    // timing out, one retry allowed.
    let s = Scenario::parse(
        "name = \"t\"\n[item]\nstock = 1000\n[buyers]\ncount = 140\narrival = \"uniform\"\n\
         window_s = 1\n[after_order]\nthink_ms = [10, 20]\n[adversarial]\n\
         cancel_after_pay = 0.15\ncancel_twice = 0.15\npay_twice = 0.15\npay_after_cancel = 0.15\n\
         pay_and_cancel = 0.15\nat_timeout = 0.1\nresend_same_key = 0.15\n\
         [client]\nretry = { on = [\"timeout\"], times = 1, backoff_ms = [30] }\n\
         [shop]\npayment_timeout = \"2s\"\n",
    )
    .unwrap();
    let plan = schedule::build(&s);
    assert!(plan
        .iter()
        .all(|b| matches!(b.after, AfterOrder::Script { .. })));
    let recorder = Arc::new(Recorder::new(Instant::now() + Duration::from_millis(50)));
    let (jobs, stand_ins, _) = pool::stand_ins(crate::traffic::scenario::SENDERS as usize);
    let ctx = Arc::new(Ctx {
        plan: plan.clone(),
        targets: Targets::one(Arc::new(Target::new(
            "http://127.0.0.1:1",
            Mapping::default(),
            Sale::of(&s),
        ))),
        recorder: recorder.clone(),
        jobs,
        retry: s.client.retry.as_ref().map(RetryPolicy::of),
        pace: super::super::pace::Pace::Timer,
    });
    let shop = tokio::spawn(correct_shop(stand_ins));

    // Act
    journey::dispatch(ctx).await;
    let retries = shop.await.unwrap();

    // Assert: one retry per buyer, plus each resend_same_key buyer's resend, handed to the
    // senders as retries (the senders record them apart: `Recorder::record_retry`).
    let m = recorder.finish();
    let resenders = plan
        .iter()
        .filter(|b| {
            matches!(
                b.after,
                AfterOrder::Script {
                    script: Script::ResendSameKey,
                    ..
                }
            )
        })
        .count();
    assert!(resenders > 5, "{resenders}");
    assert_eq!(retries, plan.len() + resenders);
    assert_eq!(
        m.acks().len(),
        plan.len(),
        "a replayed order is acknowledged once"
    );
    for b in plan.iter() {
        let key = recorder.attempt_key(b.index, 0);
        let tries: Vec<bool> = m
            .attempts()
            .filter(|a| a.key == key)
            .map(|a| a.retry)
            .collect();
        let expected = if matches!(
            b.after,
            AfterOrder::Script {
                script: Script::ResendSameKey,
                ..
            }
        ) {
            vec![false, true, true]
        } else {
            vec![false, true]
        };
        assert_eq!(
            tries, expected,
            "buyer {}: the same key, retries flagged",
            b.index
        );
    }
    assert_eq!(m.follow_ups.len(), plan.len(), "one follow-up per order");
    for f in &m.follow_ups {
        let seq: Vec<(Kind, Answer)> = f.steps.iter().map(|s| (s.kind, s.answer)).collect();
        use Answer::{Created, Ok, Rejected};
        use Kind::{Cancel, Order, Pay};
        match f.script {
            Script::CancelAfterPay => assert_eq!(seq, [(Pay, Ok), (Cancel, Rejected)]),
            Script::CancelTwice => assert_eq!(seq, [(Cancel, Ok), (Cancel, Ok)]),
            Script::PayTwice => assert_eq!(seq, [(Pay, Ok), (Pay, Ok)]),
            Script::PayAfterCancel => assert_eq!(seq, [(Cancel, Ok), (Pay, Rejected)]),
            Script::PayAndCancel => {
                assert_eq!(seq.len(), 2);
                assert_eq!(seq.iter().filter(|(_, a)| *a == Ok).count(), 1, "{seq:?}");
            }
            Script::AtTimeout => {
                assert_eq!(seq, [(Pay, Ok)]);
                // The order was sent at its arrival; the pay at the end of its 2 s window.
                let b = &plan.get(f.buyer);
                let paid = Duration::from_millis(f.steps[0].at_ms);
                assert!(paid >= b.arrival + Duration::from_millis(1700), "{paid:?}");
            }
            Script::ResendSameKey => {
                assert_eq!(seq, [(Order, Created), (Pay, Ok)]);
                assert_eq!(f.steps[0].order_id, f.order_id, "the same order");
            }
        }
        assert_eq!(crate::oracle::judge_follow_up(f, true), None, "{f:?}");
    }
    let cancelled = m.follow_ups.iter().filter(|f| {
        f.steps
            .iter()
            .any(|s| s.kind == Kind::Cancel && s.answer == Answer::Ok)
    });
    assert_eq!(
        m.cancels_ok,
        cancelled.count() as u64,
        "a second cancel answered ok restocks nothing"
    );
}
