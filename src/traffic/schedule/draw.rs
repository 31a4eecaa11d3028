//! The seeded draws a schedule is made of: the arrivals, drawn at once and sorted (the only
//! part a schedule holds), and each buyer's own choices (bot or person, views, resubmits, what
//! it does after ordering, its address), drawn from that buyer's own random stream whenever
//! the buyer is asked for, so the same seed always gives the same buyer, in any order, on any
//! shard.

use super::super::adversary::{Script, AT_TIMEOUT_SPREAD};
use super::super::scenario::{AfterOrderSpec, Arrival, BotsSpec, BrowseSpec, BuyersSpec, Scenario};
use super::{AfterOrder, BuyerPlan, Ident};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

/// Buyer `i` draws its choices from stream `BUYER_STREAMS + i` (the arrivals come from
/// stream 0).
const BUYER_STREAMS: u64 = 1 << 32;

fn between(rng: &mut ChaCha8Rng, r: [u64; 2]) -> Duration {
    Duration::from_millis(if r[0] == r[1] {
        r[0]
    } else {
        rng.random_range(r[0]..=r[1])
    })
}

/// Offsets from the opening of `b.count` arrivals with `b`'s shape starting `at` seconds after
/// it, sorted.
fn arrivals(rng: &mut ChaCha8Rng, b: &BuyersSpec, at: f64) -> Vec<Duration> {
    let n = b.count as usize;
    let (window, burst) = (b.window_s, b.burst_s);
    let mut t: Vec<f64> = match b.arrival {
        Arrival::Trace => {
            let at = Duration::from_secs_f64(at);
            return trace(rng, n, &b.trace, window).map(|t| at + t).collect();
        }
        Arrival::Uniform => (0..n).map(|_| rng.random::<f64>() * window).collect(),
        // Density rising linearly: the inverse CDF of f(t) = 2t/W² is W·sqrt(u).
        Arrival::Ramp => (0..n)
            .map(|_| window * rng.random::<f64>().sqrt())
            .collect(),
        Arrival::Burst => {
            let in_burst = (n as f64 * b.burst_share).round() as usize;
            (0..n)
                .map(|i| {
                    if i < in_burst {
                        rng.random::<f64>() * burst
                    } else {
                        burst + rng.random::<f64>() * (window - burst)
                    }
                })
                .collect()
        }
    };
    t.sort_by(|a, b| a.total_cmp(b));
    // The offset added in seconds, as the shapes always added it.
    t.into_iter()
        .map(|t| Duration::from_secs_f64(at + t))
        .collect()
}

/// `arrival = "trace"`: the window cut into `counts.len()` equal intervals (bounds rounded to
/// the nanosecond), interval `k` given its share of `n` ([`apportion`]: exactly `counts[k]`
/// when they add up to `n`), each arrival at a seeded instant within its interval; sorted.
fn trace(
    rng: &mut ChaCha8Rng,
    n: usize,
    counts: &[u32],
    window: f64,
) -> impl Iterator<Item = Duration> {
    let window_ns = Duration::from_secs_f64(window).as_nanos();
    let k_total = counts.len().max(1) as u128;
    let bound = |k: usize| (k as u128 * window_ns / k_total) as u64;
    let mut out = Vec::with_capacity(n);
    for (k, m) in apportion(n as u64, counts).into_iter().enumerate() {
        let (start, end) = (bound(k), bound(k + 1));
        for _ in 0..m {
            let offset = if end > start {
                rng.random_range(0..end - start)
            } else {
                0
            };
            out.push(Duration::from_nanos(start + offset));
        }
    }
    out.sort_unstable();
    out.into_iter()
}

/// `n` shared out over `weights` in proportion, by rounding the running total (so the shares
/// add up to `n`, and equal the weights when they add up to `n`).
pub fn apportion(n: u64, weights: &[u32]) -> Vec<u64> {
    let total: u128 = weights.iter().map(|w| u128::from(*w)).sum();
    if total == 0 {
        return vec![0; weights.len()];
    }
    let upto = |cum: u128| ((u128::from(n) * cum * 2 + total) / (2 * total)) as u64;
    let mut cum = 0u128;
    weights
        .iter()
        .map(|w| {
            let before = upto(cum);
            cum += u128::from(*w);
            upto(cum) - before
        })
        .collect()
}

/// Every arrival of the scenario (both waves), sorted, packed as [`pack`] says.
pub(super) fn packed_arrivals(s: &Scenario) -> Vec<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(s.buyers.seed);
    let first = arrivals(&mut rng, &s.buyers, 0.0);
    let mut times: Vec<u64> = first.into_iter().map(|t| pack(t, 1)).collect();
    if let Some(w) = &s.second_wave {
        let wave = BuyersSpec {
            count: w.count,
            seed: s.buyers.seed,
            arrival: Arrival::Uniform,
            window_s: w.window_s,
            window: None,
            burst_s: 0.0,
            burst: None,
            burst_share: 0.0,
            trace: Vec::new(),
        };
        let second = arrivals(&mut rng, &wave, w.at_s);
        times.extend(second.into_iter().map(|t| pack(t, 2)));
        // By time; a tie keeps the first wave first, as a stable sort of the two did.
        times.sort_unstable();
    }
    times
}

/// An arrival `at` after the opening in wave 1 or 2: its nanoseconds shifted left once, the
/// low bit set for the second wave (8 bytes a buyer, ordered by time).
fn pack(at: Duration, wave: u8) -> u64 {
    let nanos = u64::try_from(at.as_nanos())
        .unwrap_or(u64::MAX >> 1)
        .min(u64::MAX >> 1);
    nanos << 1 | u64::from(wave == 2)
}

/// The arrival and the wave [`pack`] packed.
pub(super) fn unpack(p: u64) -> (Duration, u8) {
    (Duration::from_nanos(p >> 1), if p & 1 == 1 { 2 } else { 1 })
}

/// What a buyer's choices are drawn from: the seed and the scenario's sections that shape
/// a buyer.
#[derive(Debug)]
pub(super) struct Draw {
    seed: u64,
    bots: BotsSpec,
    browse: BrowseSpec,
    after: AfterOrderSpec,
    /// `[adversarial]`'s shares, `None` when they add up to nothing.
    scripts: Option<[(Script, f64); 7]>,
    /// The payment window `at_timeout` buyers wait for.
    window: Duration,
    /// People's addresses come from this many IPs.
    people_ips: u32,
}

impl Draw {
    pub(super) fn of(s: &Scenario) -> Draw {
        Draw {
            seed: s.buyers.seed,
            bots: s.bots.clone(),
            browse: s.browse.clone(),
            after: s.after_order.clone(),
            scripts: (s.adversarial.total() > 0.0).then(|| s.adversarial.shares()),
            window: s.payment_window(),
            people_ips: s.client.ip_pool,
        }
    }

    /// Buyer `index`, arriving at `arrival` in `wave`, with its seeded ids.
    pub(super) fn buyer(&self, index: usize, arrival: Duration, wave: u8) -> BuyerPlan {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(BUYER_STREAMS.wrapping_add(index as u64));
        let bot = rng.random::<f64>() < self.bots.share;
        let views = if !bot && rng.random::<f64>() < self.browse.view_share {
            let n = rng.random_range(self.browse.views[0]..=self.browse.views[1]);
            (0..n)
                .map(|_| between(&mut rng, self.browse.think_ms))
                .collect()
        } else {
            Box::default()
        };
        let resubmits = if bot {
            (0..self.bots.resubmits)
                .map(|_| between(&mut rng, self.bots.interval_ms))
                .collect()
        } else {
            Box::default()
        };
        let roll = rng.random::<f64>();
        let think = between(&mut rng, self.after.think_ms);
        let pool = if bot {
            self.bots.ip_pool
        } else {
            self.people_ips
        };
        let ip = Ident::ip(rng.random_range(0..pool.max(1)), bot);
        // The script is drawn last: a scenario without `[adversarial]` keeps every other
        // choice it had before the section existed.
        let after = if let Some(script) = self.script(&mut rng) {
            let think = match script {
                Script::AtTimeout => at_timeout(&mut rng, self.window),
                _ => think,
            };
            AfterOrder::Script { script, think }
        } else if roll < self.after.pay {
            AfterOrder::Pay { think }
        } else if roll < self.after.pay + self.after.cancel {
            AfterOrder::Cancel { think }
        } else {
            AfterOrder::Abandon
        };
        BuyerPlan {
            index,
            user_id: Ident::user(index, bot),
            device_id: Ident::device(index, bot),
            ip,
            arrival,
            views,
            bot,
            resubmits,
            after,
            wave,
        }
    }

    /// A buyer's script, or `None` (it follows `[after_order]`): one draw when the scenario
    /// has `[adversarial]` shares, none otherwise.
    fn script(&self, rng: &mut ChaCha8Rng) -> Option<Script> {
        let shares = self.scripts.as_ref()?;
        let roll = rng.random::<f64>();
        let mut edge = 0.0;
        for (script, share) in shares {
            edge += share;
            if roll < edge {
                return Some(*script);
            }
        }
        None
    }
}

/// An `at_timeout` buyer's wait from its order's intended send to its pay: the window, give or
/// take [`AT_TIMEOUT_SPREAD`].
fn at_timeout(rng: &mut ChaCha8Rng, window: Duration) -> Duration {
    let spread = AT_TIMEOUT_SPREAD.as_millis() as u64;
    let offset = rng.random_range(0..=2 * spread);
    (window + Duration::from_millis(offset)).saturating_sub(AT_TIMEOUT_SPREAD)
}
