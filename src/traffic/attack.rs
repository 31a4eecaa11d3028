//! Firing the plan with goose: one goose user is one person.
//!
//! Goose is a closed model (a user's next request waits for the previous answer), so the open
//! model is ours: every user launches shortly before its buyer's arrival time from the seeded
//! plan and sleeps until it. A slow shop delays that buyer's later requests, never anyone's
//! arrival. Goose creates every user of an attack up front (~11 KB each), so the plan is fired
//! in chunks of [`CHUNK`] buyers, each its own goose attack launched just in time for its
//! first arrival: only the buyers about to arrive (and those still shopping) hold a goose user,
//! and the sale opens after the first chunk is up, not after every buyer is. Goose is
//! configured from our typed plan and never parses the process arguments; its own metrics
//! (time to first byte from the actual send) are kept as a cross-check only.

use super::mapping::Method;
use super::recorder::{Ack, Answer, BuyerResult, Kind, Recorder, Told};
use super::schedule::{AfterOrder, BuyerPlan};
use super::target::{self, Action, Classified, Prepared, Read, Target, Targets};
use anyhow::Context as _;
use goose::client::GooseClientBuilder;
use goose::config::GooseConfiguration;
use goose::metrics::GooseMetrics;
use goose::prelude::*;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Goose's own view of one request name (time to first byte, from the actual send).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GooseCrossCheck {
    pub name: String,
    pub count: usize,
    pub mean_ms: f64,
    pub max_ms: f64,
    pub success: usize,
    pub fail: usize,
}

/// How the generator itself fared.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GeneratorStats {
    /// CPU seconds (user + system) the generator process used during the attack.
    pub cpu_seconds: f64,
    /// CPU seconds per wall second: 1.0 = one core busy.
    pub cores_used: f64,
    /// Peak resident memory of the generator process so far, MiB (getrusage ru_maxrss).
    pub peak_rss_mib: f64,
    /// Wall time from launch to the last buyer finishing, seconds.
    pub wall_seconds: f64,
    /// Goose users launched (one per buyer).
    pub users: usize,
    /// Milliseconds between launch and the sale opening (all users are up before it opens).
    pub lead_ms: u64,
}

struct Ctx {
    plan: Arc<Vec<BuyerPlan>>,
    /// The plan index of this chunk's first buyer (goose numbers each attack's users from 0).
    offset: usize,
    /// Buyer i goes to shop i mod K.
    targets: Targets,
    recorder: Arc<Recorder>,
    /// The harness's client (no redirects): every goose user sends on it, and bots' extra
    /// submissions, which go out concurrently with their first, too.
    client: reqwest::Client,
}

/// Buyers per goose attack (the plan is fired in chunks, each launched just in time).
pub const CHUNK: usize = 5_000;

/// Goose users launched per second within a chunk.
const LAUNCH_RATE: f64 = 20_000.0;

/// Slack between a user's launch and its buyer's arrival.
const MARGIN: Duration = Duration::from_millis(500);

/// When each chunk of `plan` must start launching, in seconds from the sale opening (negative:
/// before it): early enough that its `i`-th user, launched `i / LAUNCH_RATE` after the start,
/// is up [`MARGIN`] before its buyer arrives.
fn chunk_starts(plan: &[BuyerPlan]) -> Vec<f64> {
    plan.chunks(CHUNK)
        .map(|chunk| {
            chunk
                .iter()
                .enumerate()
                .map(|(i, b)| b.arrival.as_secs_f64() - i as f64 / LAUNCH_RATE)
                .fold(f64::INFINITY, f64::min)
                - MARGIN.as_secs_f64()
        })
        .collect()
}

/// How long before the sale opens the first users must be launched: the earliest chunk start
/// (the first chunk's launch, at most [`CHUNK`] users, plus the margin).
pub fn launch_lead(plan: &[BuyerPlan]) -> Duration {
    let earliest = chunk_starts(plan).into_iter().fold(0.0, f64::min);
    Duration::from_secs_f64(-earliest)
}

/// Runs every buyer of `plan` against its shop of `targets`; returns when the last one is done.
/// `recorder.opened()` is the schedule's zero: place it at least [`launch_lead`] from now.
pub async fn fire(
    plan: Arc<Vec<BuyerPlan>>,
    targets: Targets,
    recorder: Arc<Recorder>,
    timeout: Duration,
) -> anyhow::Result<(Vec<GooseCrossCheck>, GeneratorStats)> {
    let users = plan.len();
    anyhow::ensure!(users > 0, "the plan has no buyers");
    let started = Instant::now();
    let client = target::client(timeout)?;
    let cpu_before = cpu_seconds();
    let opened = recorder.opened();
    let mut attacks = Vec::new();
    for (k, start) in chunk_starts(&plan).into_iter().enumerate() {
        let offset = k * CHUNK;
        let size = CHUNK.min(users - offset);
        let ctx = Arc::new(Ctx {
            plan: plan.clone(),
            offset,
            targets: targets.clone(),
            recorder: recorder.clone(),
            client: client.clone(),
        });
        let at = if start >= 0.0 {
            opened + Duration::from_secs_f64(start)
        } else {
            opened
                .checked_sub(Duration::from_secs_f64(-start))
                .unwrap_or(started)
        };
        attacks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            attack(ctx, size, timeout).await
        }));
    }
    let mut totals: std::collections::BTreeMap<String, (GooseCrossCheck, u64)> = Default::default();
    for a in attacks {
        let metrics = a.await.context("a goose attack panicked")??;
        for (name, agg) in &metrics.requests {
            let t = &agg.raw_data;
            let (c, total_us) = totals.entry(name.clone()).or_insert_with(|| {
                (
                    GooseCrossCheck {
                        name: name.clone(),
                        count: 0,
                        mean_ms: 0.0,
                        max_ms: 0.0,
                        success: 0,
                        fail: 0,
                    },
                    0,
                )
            });
            c.count += t.counter;
            c.success += agg.success_count;
            c.fail += agg.fail_count;
            c.max_ms = c.max_ms.max(t.maximum_time_us as f64 / 1000.0);
            *total_us += t.total_time_us;
        }
    }
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let cross: Vec<GooseCrossCheck> = totals
        .into_values()
        .map(|(mut c, total_us)| {
            if c.count > 0 {
                c.mean_ms = total_us as f64 / c.count as f64 / 1000.0;
            }
            c
        })
        .collect();
    let stats = GeneratorStats {
        cpu_seconds: cpu,
        cores_used: if wall > 0.0 { cpu / wall } else { 0.0 },
        peak_rss_mib: peak_rss_mib(),
        wall_seconds: wall,
        users,
        lead_ms: opened.saturating_duration_since(started).as_millis() as u64,
    };
    Ok((cross, stats))
}

/// One goose attack: the `users` buyers of `ctx`'s chunk, launched at [`LAUNCH_RATE`].
async fn attack(ctx: Arc<Ctx>, users: usize, timeout: Duration) -> anyhow::Result<GooseMetrics> {
    let journey_ctx = ctx.clone();
    let journey: TransactionFunction = Arc::new(move |user| {
        let ctx = journey_ctx.clone();
        Box::pin(async move { journey(user, ctx).await })
    });
    let mut config = GooseConfiguration::default();
    // Goose names requests by this host; each request's own URL is its buyer's shop.
    config.host = Some(ctx.targets.first().base_url.clone());
    config.users = Some(users);
    config.increase_rate = Some(LAUNCH_RATE.to_string());
    config.iterations = Some(1);
    config.no_telnet = true;
    config.no_print_metrics = true;
    config.no_error_summary = true;
    config.quiet = 1;
    let metrics = GooseAttack::initialize_with_config(config)?
        .set_client_builder_without_cookies(
            GooseClientBuilder::new().without_cookies().timeout(timeout),
        )?
        .register_scenario(
            scenario!("buyer").register_transaction(Transaction::new(journey).set_name("journey")),
        )
        .execute()
        .await?;
    Ok(metrics)
}

/// One person's visit: arrive, browse, order (bots: again and again), then pay, cancel or leave.
async fn journey(user: &mut GooseUser, ctx: Arc<Ctx>) -> TransactionResult {
    let Some(b) = ctx.plan.get(ctx.offset + user.weighted_users_index) else {
        return Ok(());
    };
    let target = ctx.targets.of(b).clone();
    // Goose's client builder cannot turn redirects off: every user sends on the harness's
    // own shared client instead (one connection pool, no redirects followed).
    user.client = ctx.client.clone();
    let rec = &ctx.recorder;
    let mut intended = rec.opened() + b.arrival;
    tokio::time::sleep_until(intended).await;
    rec.arrived();
    for think in &b.views {
        let (_, done) = send(user, &ctx, &target, Kind::View, &Action::View, b, intended).await;
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
        let b = b.clone();
        let key = rec.attempt_key(b.index, n + 1);
        let target = target.clone();
        extra.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            let (c, done) = send_direct(&ctx, &target, &b, at, key.clone()).await;
            (c, done, key)
        }));
    }
    let key = rec.attempt_key(b.index, 0);
    let order = Action::Order(Some(key.clone()));
    let (first, done) = send(user, &ctx, &target, Kind::Order, &order, b, intended).await;
    let mut answered = vec![(first, done, key)];
    for task in extra {
        if let Ok(answer) = task.await {
            answered.push(answer);
        }
    }
    let mut created: Vec<(Option<String>, Instant, String)> = Vec::new();
    for (c, at, key) in answered {
        let Some(c) = c else { continue };
        rec.attempt(&key, b.index, c.answer, c.order_id.as_deref(), at);
        if c.answer == Answer::Created {
            created.push((c.order_id, at, key));
        }
    }
    for (id, at, key) in &created {
        let ack = Ack {
            key: Some(key.clone()),
            order_id: id.clone(),
            buyer: b.index,
            user_id: b.user_id.clone(),
            device_id: b.device_id.clone(),
            bot: b.bot,
            at_ms: 0,
        };
        rec.ack(ack, *at);
    }
    let (kind, think) = match b.after {
        AfterOrder::Pay { think } => (Some(Kind::Pay), think),
        AfterOrder::Cancel { think } => (Some(Kind::Cancel), think),
        AfterOrder::Abandon => (None, Duration::ZERO),
    };
    if let Some(kind) = kind {
        for (id, at, _) in &created {
            let act = if kind == Kind::Pay {
                Action::Pay(id.clone())
            } else {
                Action::Cancel(id.clone())
            };
            // An order whose answer lacked the id a pay/cancel path needs is left to expire.
            if target.prepare(&act, b).is_none() {
                continue;
            }
            let intended = (*at).max(done) + think;
            tokio::time::sleep_until(intended).await;
            let (answer, _) = send(user, &ctx, &target, kind, &act, b, intended).await;
            if answer.is_some_and(|c| c.answer == Answer::Ok) {
                let told = if kind == Kind::Pay {
                    Told::Paid
                } else {
                    Told::Cancelled
                };
                rec.told(id.as_deref(), told);
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

/// Records a read answer: its latency, and a sample when no rule classified it.
fn record(ctx: &Ctx, kind: Kind, read: &Read, intended: Instant, sent: Instant, done: Instant) {
    let answer = read.classified.answer;
    ctx.recorder.record(kind, answer, intended, sent, done);
    if let (true, Some(status)) = (answer.is_unclassified(), read.status) {
        ctx.recorder.unclassified(kind, status, &read.body);
    }
}

/// Sends one request to `target` through goose (so goose's metrics see it) and records it in
/// ours; `None` when the mapping has no such request.
#[allow(clippy::too_many_arguments)]
async fn send(
    user: &mut GooseUser,
    ctx: &Ctx,
    target: &Target,
    kind: Kind,
    action: &Action,
    b: &BuyerPlan,
    intended: Instant,
) -> (Option<Classified>, Instant) {
    let Some(prepared) = target.prepare(action, b) else {
        return (None, intended);
    };
    let sent = ctx.recorder.sending(kind, intended);
    let read = match target.url(&prepared) {
        Err(_) => Read::transport_failed(),
        Ok(url) => {
            let rb = prepared.apply(user.client.request(prepared.reqwest_method(), url));
            let req = GooseRequest::builder()
                .method(goose_method(&prepared))
                .path(prepared.path.as_str())
                .name(kind.as_str())
                .set_request_builder(rb)
                .build();
            match user.request(req).await {
                Ok(g) => match g.response {
                    Ok(resp) => target.read(kind, resp).await,
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
    record(ctx, kind, &read, intended, sent, done);
    (Some(read.classified), done)
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

/// A bot's extra submission, sent on our own client (concurrent with its goose request).
async fn send_direct(
    ctx: &Ctx,
    target: &Target,
    b: &BuyerPlan,
    intended: Instant,
    key: String,
) -> (Option<Classified>, Instant) {
    let Some(prepared) = target.prepare(&Action::Order(Some(key)), b) else {
        return (None, intended);
    };
    let sent = ctx.recorder.sending(Kind::Order, intended);
    let read = target.send(&ctx.client, Kind::Order, &prepared).await;
    let done = Instant::now();
    record(ctx, Kind::Order, &read, intended, sent, done);
    (Some(read.classified), done)
}

/// User + system CPU seconds of this process (getrusage).
pub fn cpu_seconds() -> f64 {
    let Some(usage) = rusage() else { return 0.0 };
    let tv = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    tv(usage.user_time()) + tv(usage.system_time())
}

/// Peak resident set size of this process, MiB.
pub fn peak_rss_mib() -> f64 {
    rusage().map_or(0.0, |u| u.max_rss() as f64 / 1024.0)
}

fn rusage() -> Option<nix::sys::resource::Usage> {
    use nix::sys::resource::{getrusage, UsageWho};
    // RUSAGE_SELF on our own process cannot fail; 0 figures if it ever did.
    getrusage(UsageWho::RUSAGE_SELF).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{schedule, Scenario};

    fn plan(count: u32, arrival: &str, window_s: u32) -> Vec<BuyerPlan> {
        schedule::build(
            &Scenario::parse(&format!(
                "name = \"t\"\n[item]\nstock = 10\n[buyers]\ncount = {count}\narrival = \"{arrival}\"\nwindow_s = {window_s}\nburst_s = 1\nburst_share = 0.9\n"
            ))
            .unwrap(),
        )
    }

    /// Every user is up `MARGIN` before its buyer arrives.
    fn every_user_is_launched_in_time(p: &[BuyerPlan]) {
        for (k, start) in chunk_starts(p).into_iter().enumerate() {
            for (i, b) in p[k * CHUNK..].iter().take(CHUNK).enumerate() {
                let launched = start + i as f64 / LAUNCH_RATE;
                assert!(
                    launched + MARGIN.as_secs_f64() <= b.arrival.as_secs_f64() + 1e-9,
                    "buyer {} launched at {launched} s, arrives at {:?}",
                    b.index,
                    b.arrival
                );
            }
        }
    }

    #[test]
    fn a_hundred_thousand_buyers_open_the_sale_within_a_second() {
        // 10,000 arrivals/s: the sale waits only for the first chunk, not for every buyer.
        let p = plan(100_000, "uniform", 10);
        let lead = launch_lead(&p);
        assert!(lead < Duration::from_secs(1), "{lead:?}");
        every_user_is_launched_in_time(&p);
        let starts = chunk_starts(&p);
        assert_eq!(starts.len(), 20);
        assert!(
            starts[19] > 8.0,
            "the last chunk launches near its arrivals, not before the sale: {starts:?}"
        );
    }

    #[test]
    fn a_burst_faster_than_the_launch_rate_starts_its_chunks_earlier() {
        // 90 % of 60,000 buyers in the first second: 54,000/s, faster than goose launches.
        let p = plan(60_000, "burst", 10);
        every_user_is_launched_in_time(&p);
        assert!(launch_lead(&p) > MARGIN);
    }
}
