//! What every buyer's task shares, and how a buyer sends: the plan, the shops, the recorder,
//! the senders' pool and `[client] retry`'s policy ([`Ctx`]); a request sent and resent as the
//! policy says ([`with_retries`]); an order acknowledged to its client ([`ack`]). The journey
//! ([`super::journey`]), the login ([`super::login`]), the polls ([`super::poll`]) and the
//! scripts ([`super::script`]) are built on these.

use super::super::adversary::RetryPolicy;
use super::super::recorder::{Ack, Kind, Recorder};
use super::super::schedule::BuyerPlan;
use super::super::target::{Classified, Prepared, Target, Targets};
use super::pool::{Jobs, PoolGone};
use std::sync::Arc;
use tokio::time::Instant;

/// What every journey shares.
pub(super) struct Ctx {
    pub plan: Arc<Vec<BuyerPlan>>,
    /// Buyer i goes to shop i mod K.
    pub targets: Targets,
    pub recorder: Arc<Recorder>,
    pub jobs: Jobs,
    /// `[client] retry` (`None`: nothing is retried).
    pub retry: Option<RetryPolicy>,
}

/// The last try of a request [`with_retries`] sent: its answer, its intended and actual send,
/// when the answer came, and whether it was a retry.
pub(super) struct Tried {
    pub c: Classified,
    pub intended: Instant,
    pub sent: Instant,
    pub done: Instant,
    pub retried: bool,
}

/// Sends `prepared` and, as `[client] retry` says, sends the same request again (an order with
/// its attempt's `Idempotency-Key`, `key`) after each failure it names; returns the last
/// try. An order's failed tries are recorded as attempts here (the last is the caller's to
/// record); `resend`: the first send already repeats an earlier request (`resend_same_key`).
#[allow(clippy::too_many_arguments)]
pub(super) async fn with_retries(
    ctx: &Ctx,
    target: &Arc<Target>,
    kind: Kind,
    prepared: Prepared,
    b: &BuyerPlan,
    intended: Instant,
    key: Option<&str>,
    resend: bool,
) -> Result<Tried, PoolGone> {
    let rec = &ctx.recorder;
    let mut intended = intended;
    let mut n = 0u32;
    loop {
        let retried = n > 0 || resend;
        let (c, sent, done) = ctx
            .jobs
            .send_as(target, kind, prepared.clone(), intended, retried)
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
        if let Some(key) = key {
            if resend && n == 1 {
                rec.retrying(key);
            }
            rec.attempt(key, b.index, c.answer, c.order_id.as_deref(), done);
            rec.retrying(key);
        }
        intended = done + wait;
        tokio::time::sleep_until(intended).await;
    }
}

/// An order a buyer was told was created: its id, when the answer came, its attempt's key,
/// and its acknowledgement's index in the recorder.
pub(super) type Created = (Option<String>, Instant, String, usize);

/// Tells the client an order exists (`key`: its attempt's idempotency key; `sent`: when the
/// attempt was meant to go out); returns the acknowledgement's index.
pub(super) fn ack(
    rec: &Recorder,
    b: &BuyerPlan,
    key: &str,
    order_id: Option<String>,
    at: Instant,
    sent: Instant,
) -> usize {
    let ack = Ack {
        key: Some(key.to_string()),
        order_id,
        buyer: b.index,
        user_id: b.user_id.clone(),
        device_id: b.device_id.clone(),
        bot: b.bot,
        at_ms: 0,
        sent_ms: rec.ms(sent),
        cancel_sent_ms: None,
        paid_ms: None,
    };
    rec.ack(ack, at)
}
