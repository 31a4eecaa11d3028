//! What every buyer's task shares, and how a buyer sends: the plan, the shops, the recorder,
//! the senders' pool and `[client] retry`'s policy ([`Ctx`]); a request sent and resent as the
//! policy says ([`with_retries`]); an order acknowledged to its client ([`ack`]). The journey
//! ([`super::journey`]), the login ([`super::login`]), the polls ([`super::poll`]) and the
//! scripts ([`super::script`]) are built on these.

use super::super::adversary::RetryPolicy;
use super::super::recorder::{Key, Kind, Recorder, Sent};
use super::super::schedule::{BuyerPlan, Schedule};
use super::super::target::{Classified, Prepared, Target, Targets};
use super::pool::{Jobs, PoolGone};
use std::sync::Arc;
use tokio::time::Instant;

/// What every journey shares.
pub(super) struct Ctx {
    pub plan: Schedule,
    /// Buyer i goes to shop i mod K.
    pub targets: Targets,
    pub recorder: Arc<Recorder>,
    pub jobs: Jobs,
    /// `[client] retry` (`None`: nothing is retried).
    pub retry: Option<RetryPolicy>,
    /// How a request waits for its intended send.
    pub pace: super::pace::Pace,
}

/// The last try of a request [`with_retries`] sent: its answer, its intended and actual send,
/// when the answer came, and whether it was a retry.
pub(super) struct Tried {
    pub c: Classified,
    pub intended: Instant,
    pub sent: Sent,
    pub done: Instant,
    pub retried: bool,
}

/// Sends `prepared` and, as `[client] retry` says, sends the same request again (an order with
/// its attempt's `Idempotency-Key`, attempt `key` of buyer `b`) after each failure it names;
/// returns the last try. An order's failed tries are recorded as attempts here (the last is the caller's to
/// record); `resend`: the first send already repeats an earlier request (`resend_same_key`).
#[allow(clippy::too_many_arguments)]
pub(super) async fn with_retries(
    ctx: &Ctx,
    target: &Arc<Target>,
    kind: Kind,
    prepared: Prepared,
    b: &BuyerPlan,
    intended: Instant,
    key: Option<usize>,
    resend: bool,
) -> Result<Tried, PoolGone> {
    let rec = &ctx.recorder;
    let mut intended = intended;
    let mut n = 0u32;
    // Without a retry policy the request goes out once: no copy of it is kept.
    let mut kept = Some(prepared);
    loop {
        let retried = n > 0 || resend;
        let this = match (&ctx.retry, kept.take()) {
            (Some(_), Some(p)) => {
                kept = Some(p.clone());
                p
            }
            (None, Some(p)) => p,
            (_, None) => unreachable!("a request is resent only under a retry policy"),
        };
        let (c, sent, done) = ctx
            .jobs
            .send_as(target, kind, this, intended, retried)
            .await?;
        n += 1;
        let Some(wait) = ctx.retry.as_ref().and_then(|p| p.wait(c.answer, n)) else {
            return Ok(Tried {
                c,
                intended,
                sent,
                done,
                retried,
            });
        };
        if let Some(n_key) = key {
            let key = Key::Attempt {
                buyer: b.index,
                n: n_key,
            };
            if resend && n == 1 {
                rec.retrying(key);
            }
            rec.attempt(key, b.index, c.answer, c.order_id.as_deref(), done);
            rec.retrying(key);
        }
        intended = done + wait;
        ctx.pace.until(intended).await;
    }
}

/// An order a buyer was told was created: its id, when the answer came, its attempt's number
/// (its key: [`Recorder::attempt_key`]), and its acknowledgement's index in the recorder.
pub(super) type Created = (Option<String>, Instant, usize, usize);

/// Records buyer `b`'s attempt `n` answered `c` at `at` and, if it created an order, tells
/// the client so (`sent`: when the attempt was meant to go out); returns the
/// acknowledgement's index then.
pub(super) fn attempted(
    rec: &Recorder,
    b: &BuyerPlan,
    n: usize,
    c: &Classified,
    at: Instant,
    sent: Instant,
) -> Option<usize> {
    let key = Key::Attempt { buyer: b.index, n };
    let attempt = rec.attempt(key, b.index, c.answer, c.order_id.as_deref(), at);
    (c.answer == super::super::recorder::Answer::Created)
        .then(|| rec.ack(attempt, &b.user_id, &b.device_id, b.bot, sent))
}
