//! Firing the plan: plain tasks for the buyers, a fixed pool of goose users to send.
//!
//! Goose is a closed model (a user's next request waits for the previous answer), so the open
//! model is ours: every buyer of the seeded plan is a plain task ([`journey`]) spawned shortly
//! before its arrival, which sleeps until it, so a slow shop delays that buyer's later requests,
//! never anyone's arrival, and a buyer not yet due costs only its plan. Buyers send
//! each request themselves on a goose user they borrow from a pool ([`SENDERS`] at most,
//! started at full size, one goose attack for the whole run: [`pool`]), so every request goes
//! through goose (its own metrics — time to first byte from the actual send — are kept as a
//! cross-check only). Set-up is starting
//! the pool, a few milliseconds; goose is configured from our typed plan and never parses the
//! process arguments.

mod context;
mod journey;
mod login;
mod pace;
mod poll;
mod pool;
mod script;

use super::adversary::RetryPolicy;
use super::recorder::Recorder;
use super::scenario::ClientSpec;
use super::schedule::Schedule;
use super::target::{self, Targets};
use anyhow::Context as _;
use goose::metrics::GooseMetrics;
pub use pace::on_unpark as pace_on_unpark;
pub use pool::LAUNCH_RATE;
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
    /// Goose users launched: the senders every request went through (at most the cap).
    pub users: usize,
    /// Buyers fired (one plain task each, spawned shortly before its arrival).
    #[serde(default)]
    pub buyers: usize,
    /// Milliseconds between launch and the sale opening (the senders start meanwhile).
    pub lead_ms: u64,
    /// Seconds after the sale opened when every sender first held an unanswered request (the
    /// cap was reached: later requests could wait for a sender); `None`: never.
    #[serde(default)]
    pub senders_full_at_s: Option<f64>,
}

impl GeneratorStats {
    /// A generator that fired nothing.
    pub fn idle() -> Self {
        GeneratorStats {
            cpu_seconds: 0.0,
            cores_used: 0.0,
            peak_rss_mib: 0.0,
            wall_seconds: 0.0,
            users: 0,
            buyers: 0,
            lead_ms: 0,
            senders_full_at_s: None,
        }
    }
}

/// Slack between launching the goose attack and the sale opening: goose's own set-up (its
/// configuration, the users' structures, its metrics task) before the first sender starts.
const MARGIN: Duration = Duration::from_millis(200);

/// How the clients send: their timeout and the most senders the pool may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sending {
    /// A request not answered within this is a timeout.
    pub timeout: Duration,
    /// The pool's cap ([`SENDERS`] unless the scenario's `[client] senders` sets one).
    pub max_senders: usize,
}

impl Sending {
    /// The scenario's `[client]` table.
    pub fn of(c: &super::scenario::ClientSpec) -> Self {
        Sending {
            timeout: Duration::from_millis(c.timeout_ms),
            max_senders: c.senders as usize,
        }
    }

    /// Senders for a plan of `buyers`: one per buyer, at most the cap.
    pub fn senders_for(&self, buyers: usize) -> usize {
        buyers.min(self.max_senders).max(1)
    }

    /// How long before the sale opens the generator must be launched: goose's set-up and the
    /// start of the senders for a plan of `buyers`, whatever its size.
    pub fn launch_lead(&self, buyers: usize) -> Duration {
        if buyers == 0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(self.senders_for(buyers) as f64 / LAUNCH_RATE) + MARGIN
    }
}

/// Runs every buyer of `plan` against its shop of `targets` as `spec` (`[client]`) says (its
/// timeout, its senders' cap and its retries); returns when the last one is done.
/// `recorder.opened()` is the schedule's zero: place it at least [`Sending::launch_lead`] from
/// now.
pub async fn fire(
    plan: Schedule,
    targets: Targets,
    recorder: Arc<Recorder>,
    spec: &ClientSpec,
) -> anyhow::Result<(Vec<GooseCrossCheck>, GeneratorStats)> {
    let sending = Sending::of(spec);
    let timeout = sending.timeout;
    let buyers = plan.len();
    anyhow::ensure!(buyers > 0, "the plan has no buyers");
    let started = Instant::now();
    let senders = sending.senders_for(buyers);
    let client = target::senders_client(timeout, senders)?;
    let cpu_before = cpu_seconds();
    let opened = recorder.opened();
    recorder.reserve(buyers);
    let host = targets.first().base_url.clone();
    raise_open_files(senders);
    let (jobs, pool, saturation) = pool::new(senders, recorder.clone());
    let ctx = Arc::new(journey::Ctx {
        plan,
        targets,
        recorder: recorder.clone(),
        jobs,
        retry: spec.retry.as_ref().map(RetryPolicy::of),
        pace: pace::Pace::from_env(),
    });
    let dispatcher = tokio::spawn(journey::dispatch(ctx));
    let metrics = match pool::run(pool, client, host, timeout).await {
        Ok(m) => m,
        Err(e) => {
            // No sender is left: stop spawning buyers. Every request waiting for a sender, and
            // any asked for later, has its answer (`PoolGone`).
            dispatcher.abort();
            return Err(e.context("the goose senders failed"));
        }
    };
    dispatcher
        .await
        .context("the buyers' dispatcher panicked")?;
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu_before;
    let stats = GeneratorStats {
        cpu_seconds: cpu,
        cores_used: if wall > 0.0 { cpu / wall } else { 0.0 },
        peak_rss_mib: peak_rss_mib(),
        wall_seconds: wall,
        users: senders,
        buyers,
        lead_ms: opened.saturating_duration_since(started).as_millis() as u64,
        senders_full_at_s: saturation
            .first_full()
            .map(|t| t.saturating_duration_since(opened).as_secs_f64()),
    };
    Ok((cross_check(&metrics), stats))
}

/// Goose's metrics by request name.
fn cross_check(metrics: &GooseMetrics) -> Vec<GooseCrossCheck> {
    let mut v: Vec<GooseCrossCheck> = metrics
        .requests
        .iter()
        .map(|(name, agg)| {
            let t = &agg.raw_data;
            GooseCrossCheck {
                name: name.clone(),
                count: t.counter,
                mean_ms: if t.counter > 0 {
                    t.total_time_us as f64 / t.counter as f64 / 1000.0
                } else {
                    0.0
                },
                max_ms: t.maximum_time_us as f64 / 1000.0,
                success: agg.success_count,
                fail: agg.fail_count,
            }
        })
        .collect();
    v.sort_by(|a, b| a.name.cmp(&b.name));
    v
}

/// Raises this process's soft open-files limit towards its hard limit, so every sender can hold
/// a connection of its own (a soft limit of 1024 is common); a limit that cannot be raised is
/// left as it is, with a log line.
fn raise_open_files(senders: usize) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    // Connections to the shop, plus the probes', the oracle's and the process's own files.
    let want = senders as u64 * 2 + 256;
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    if soft >= want {
        return;
    }
    let new = want.min(hard);
    if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, new, hard) {
        tracing::warn!(soft, hard, "could not raise the open-files limit: {e}");
    } else if new < want {
        tracing::warn!(
            soft = new,
            "the open-files limit (hard {hard}) is below what {senders} senders may need ({want}): raise it with `ulimit -n`"
        );
    }
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
mod tests;
