//! One shard of a sale (`run --shard i/N`) against a reference shop that is already serving
//! (`oversell serve`, reached at `--shop-url`): shard 0 sets the sale up before the opening,
//! the others wait until the shop answers for the item; every shard opens at the shared
//! `--open-at` instant, fires its part of the schedule, and writes its raw results
//! ([`ShardFile`]) for `oversell merge`. No oracle runs here: it runs once, in `merge`.
//!
//! `attack --shard i/N` fires at the user's own shop the same way (a foreign [`Subject`]):
//! shard 0 sends the mapping's set-up request (if it has one); the others have no item route
//! they can rely on and go by the clock alone.

use super::{control_client, send_setup, target_for, Subject};
use crate::shard::file::{Clients, ShardFile, SCHEMA};
use crate::shard::{scenario_hash, ShardSpec};
use crate::traffic::attack::{self, GeneratorStats};
use crate::traffic::recorder::{Kind, Recorder};
use crate::traffic::schedule::Schedule;
use crate::traffic::target::Target;
use crate::traffic::Scenario;
use anyhow::{bail, Context};
use chrono::{DateTime, Utc};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Shard 0 must finish the set-up this long before the opening, or it refuses to reset a sale
/// the other shards may already be buying from.
pub const SETUP_MARGIN: Duration = Duration::from_secs(1);

/// How long after the opening the other shards keep waiting for the shop to answer.
pub const SHOP_WAIT_AFTER_OPENING: Duration = Duration::from_secs(30);

/// Everything one shard needs, decided before any request.
#[derive(Debug, Clone)]
pub struct ShardRun {
    pub scenario: Scenario,
    pub scenario_file: PathBuf,
    pub shard: ShardSpec,
    pub open_at: DateTime<Utc>,
    pub shop_url: String,
    /// The shop's `--admin-token` (shard 0's set-up needs it when the shop has one).
    pub admin_token: Option<String>,
    /// The shop the shard fires at (and `merge` will judge it against).
    pub subject: Subject,
    /// This shard's buyers (each keeps its schedule index).
    pub buyers: Schedule,
    /// Buyers in the whole schedule.
    pub buyers_total: usize,
    /// The shard's folder: `shard.json` and `latency-order.hlog` go there.
    pub out: PathBuf,
    pub progress: bool,
}

impl ShardRun {
    fn say(&self, line: &str) {
        if self.progress {
            crate::telemetry::stderr_line(line);
        }
    }
}

/// The time from now until `at` (zero once it passed).
fn until(at: DateTime<Utc>) -> Duration {
    (at - Utc::now()).to_std().unwrap_or(Duration::ZERO)
}

/// Fires one shard and writes its folder; returns what it wrote.
pub async fn fire_shard(run: &ShardRun) -> anyhow::Result<ShardFile> {
    let s = &run.scenario;
    let base_url = run.shop_url.trim_end_matches('/').to_string();
    let mapping = run.subject.shard_mapping(s)?;
    let target = Arc::new(target_for(s, &base_url, mapping));
    let http = control_client()?;
    let opening = run
        .open_at
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    ready_for_opening(run, &http, (&target, &base_url), &opening).await?;
    let sending = attack::Sending::of(&s.client);
    let lead = sending.launch_lead(run.buyers.len());
    tokio::time::sleep(until(run.open_at).saturating_sub(lead)).await;
    let recorder = Arc::new(Recorder::new(Instant::now() + until(run.open_at)));
    run.say(&format!(
        "   shard {}: {} of {} buyers, opening {opening}",
        run.shard,
        run.buyers.len(),
        run.buyers_total
    ));
    let (goose, generator) = if run.buyers.is_empty() {
        (Vec::new(), GeneratorStats::idle())
    } else {
        attack::fire(
            run.buyers.clone(),
            crate::traffic::target::Targets::one(target),
            recorder.clone(),
            &s.client,
        )
        .await
        .context("firing the traffic")?
    };
    let mut m = recorder.finish();
    let file = shard_file(run, &base_url, opening, (goose, generator), &mut m);
    file.write(&run.out, &m)?;
    run.say(&format!(
        "   shard {}: {} requests, raw results in {}",
        run.shard,
        m.total_requests(),
        run.out.display()
    ));
    Ok(file)
}

/// Before the opening: shard 0 sets the sale up (refusing when the opening is too close to
/// reset it safely); the others wait until the shop answers for the item, where it has an
/// item route to rely on.
async fn ready_for_opening(
    run: &ShardRun,
    http: &reqwest::Client,
    (target, base_url): (&Target, &str),
    opening: &str,
) -> anyhow::Result<()> {
    let s = &run.scenario;
    if !run.shard.sets_up() {
        if let Some(url) = run.subject.item_url(base_url, s.item.number()) {
            wait_for_item(http, &url, (base_url, s.item.number()), run.open_at).await?;
        }
        return Ok(());
    }
    if until(run.open_at) < SETUP_MARGIN {
        bail!(
            "shard {} sets the sale up, and the opening ({opening}) is less than {} s away: \
             too late to reset the sale safely; give a later --open-at",
            run.shard,
            SETUP_MARGIN.as_secs()
        );
    }
    let setup = run.subject.shard_setup(target, run.admin_token.as_deref());
    for (field, req) in &setup {
        send_setup(http, target, field, req).await?;
    }
    if until(run.open_at) == Duration::ZERO {
        bail!("the sale's set-up finished after the opening ({opening}): give a later --open-at");
    }
    run.say(&format!(
        "   shard {}: sale of item {} set up at {} ({} units), opening {opening}",
        run.shard,
        s.item.id,
        crate::secret::url(base_url),
        s.item.stock
    ));
    Ok(())
}

/// The shard's raw results as `merge` reads them: the sale's facts, what the shard sent and
/// what its clients were told (their records moved out of `m` into the file).
fn shard_file(
    run: &ShardRun,
    base_url: &str,
    opening: String,
    (goose, generator): (Vec<attack::GooseCrossCheck>, GeneratorStats),
    m: &mut crate::traffic::recorder::Measurements,
) -> ShardFile {
    let s = &run.scenario;
    let mut file = ShardFile {
        schema: SCHEMA.into(),
        shard: run.shard,
        scenario_hash: scenario_hash(s),
        seed: s.buyers.seed,
        // Its secrets masked (the hash above is of the scenario as read).
        scenario: crate::traffic::scenario::masked::scenario(s),
        scenario_file: run.scenario_file.display().to_string(),
        open_at: opening,
        shop: None,
        target: None,
        buyers_total: run.buyers_total,
        buyers: run.buyers.len(),
        generator,
        goose,
        counts: Kind::ALL
            .into_iter()
            .map(|k| (k, m.counts(k)))
            .filter(|(_, c)| !c.is_empty())
            .collect(),
        clients: Clients::taken_from(m),
    };
    run.subject.record(base_url, &mut file);
    file
}

/// Polls `GET url` (the shop's item) until the shop at `base_url` answers 200 for `item`, up
/// to [`SHOP_WAIT_AFTER_OPENING`] after the opening.
async fn wait_for_item(
    http: &reqwest::Client,
    url: &str,
    (base_url, item): (&str, i64),
    open_at: DateTime<Utc>,
) -> anyhow::Result<()> {
    let deadline = open_at + chrono::Duration::from_std(SHOP_WAIT_AFTER_OPENING)?;
    loop {
        let last = match http.get(url).send().await {
            Ok(r) if r.status().is_success() => return Ok(()),
            Ok(r) => format!("answered {}", r.status()),
            Err(e) => format!("{}", e.without_url()),
        };
        if Utc::now() >= deadline {
            return Err(crate::services::Unreachable::relayed(format!(
                "the shop at {} did not answer for item {item} ({}) within {} s after the \
                 opening: {last} (is `oversell serve` up, and did shard 0 set the sale up?)",
                crate::secret::url(base_url),
                crate::secret::url(url),
                SHOP_WAIT_AFTER_OPENING.as_secs()
            ))
            .into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
