//! A buyer's login on its arrival (`[target.login] when = "on_arrival"`): its first request,
//! sent through the pool under the kind `login` and tallied apart from the orders; what it
//! extracts and the cookies it sets go into the buyer's session.

use super::super::login;
use super::super::mapping::LoginWhen;
use super::super::recorder::Kind;
use super::super::schedule::BuyerPlan;
use super::super::session::Session;
use super::super::target::{Action, Target};
use super::context::Ctx;
use super::pool::PoolGone;
use std::sync::Arc;
use tokio::time::Instant;

/// Logs buyer `b` in if the mapping logs buyers in on arrival; `intended` moves on to the
/// login's answer. Returns whether the buyer goes on (no such login, or it succeeded).
pub(super) async fn on_arrival(
    ctx: &Ctx,
    target: &Arc<Target>,
    b: &BuyerPlan,
    session: &mut Session,
    intended: &mut Instant,
) -> Result<bool, PoolGone> {
    let on_arrival = target
        .mapping
        .login
        .as_ref()
        .is_some_and(|l| l.when == LoginWhen::OnArrival);
    if !on_arrival {
        return Ok(true);
    }
    let Some(p) = target.prepare(&Action::Login, b, session) else {
        let why = "not sent: it names a value this buyer does not have".to_string();
        ctx.recorder.login(Err(why), std::time::Duration::ZERO, "");
        return Ok(false);
    };
    // Boxed (as every send of a journey): a buyer on its way holds only a pointer to it.
    let (c, done) = Box::pin(ctx.jobs.send(target, Kind::Login, p, *intended)).await?;
    session.learn(&c.learned);
    let result = login::judge(&c);
    let ok = result.is_ok();
    let latency = done.saturating_duration_since(*intended);
    let sample = c.learned.sample.as_deref().unwrap_or_default();
    ctx.recorder.login(result, latency, sample);
    *intended = done;
    Ok(ok)
}
