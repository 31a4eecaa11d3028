//! The seeded plan of every buyer: who arrives when, browses how much, whether it is a bot, and
//! what it does after ordering. Built entirely before the sale opens, from the scenario's seed,
//! so two runs send the same schedule and a slow shop can never change when buyers arrive.

use super::adversary::{Script, AT_TIMEOUT_SPREAD};
use super::scenario::{Arrival, Scenario};
pub use ident::Ident;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

pub mod ident;

/// What a buyer does with a created order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterOrder {
    Pay {
        think: Duration,
    },
    Cancel {
        think: Duration,
    },
    Abandon,
    /// An `[adversarial]` script. `think`: from the order's answer to the first follow-up
    /// (`at_timeout`: from the order's intended send to its pay, about the payment window).
    Script {
        script: Script,
        think: Duration,
    },
}

/// One person's plan: ~130 bytes, and nothing else for a seeded buyer who orders straight away
/// (its ids are spelled from numbers, [`Ident`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BuyerPlan {
    pub index: usize,
    pub user_id: Ident,
    pub device_id: Ident,
    /// Sent as `X-Forwarded-For`.
    pub ip: Ident,
    /// Intended time of the first request, from the moment the sale opens.
    pub arrival: Duration,
    /// Think time after each product-page view (empty: orders straight away).
    pub views: Box<[Duration]>,
    pub bot: bool,
    /// Gaps between a bot's submissions of the same order (empty for people).
    pub resubmits: Box<[Duration]>,
    pub after: AfterOrder,
    /// 1 for the opening rush, 2 for the second wave.
    pub wave: u8,
}

fn between(rng: &mut ChaCha8Rng, r: [u64; 2]) -> Duration {
    Duration::from_millis(if r[0] == r[1] {
        r[0]
    } else {
        rng.random_range(r[0]..=r[1])
    })
}

/// Offsets (seconds from the opening) of `n` arrivals with the given shape, sorted.
pub fn arrivals(
    rng: &mut ChaCha8Rng,
    n: usize,
    shape: Arrival,
    window: f64,
    burst: f64,
    burst_share: f64,
) -> Vec<f64> {
    let mut t: Vec<f64> = match shape {
        Arrival::Uniform => (0..n).map(|_| rng.random::<f64>() * window).collect(),
        // Density rising linearly: the inverse CDF of f(t) = 2t/W² is W·sqrt(u).
        Arrival::Ramp => (0..n)
            .map(|_| window * rng.random::<f64>().sqrt())
            .collect(),
        Arrival::Burst => {
            let in_burst = (n as f64 * burst_share).round() as usize;
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
    t
}

/// Every buyer of the scenario, ordered by arrival.
pub fn build(s: &Scenario) -> Vec<BuyerPlan> {
    let mut rng = ChaCha8Rng::seed_from_u64(s.buyers.seed);
    let b = &s.buyers;
    let mut times: Vec<(f64, u8)> = arrivals(
        &mut rng,
        b.count as usize,
        b.arrival,
        b.window_s,
        b.burst_s,
        b.burst_share,
    )
    .into_iter()
    .map(|t| (t, 1))
    .collect();
    if let Some(w) = &s.second_wave {
        times.extend(
            arrivals(
                &mut rng,
                w.count as usize,
                Arrival::Uniform,
                w.window_s,
                0.0,
                0.0,
            )
            .into_iter()
            .map(|t| (w.at_s + t, 2)),
        );
    }
    times.sort_by(|a, b| a.0.total_cmp(&b.0));
    let a = &s.after_order;
    // The scripts draw from a stream of their own: a scenario without `[adversarial]` keeps
    // the very plan it had before the section existed.
    let mut scripts = ChaCha8Rng::seed_from_u64(s.buyers.seed);
    scripts.set_stream(SCRIPT_STREAM);
    let window = s.payment_window(s.target.is_some());
    times
        .into_iter()
        .enumerate()
        .map(|(index, (at, wave))| {
            let bot = rng.random::<f64>() < s.bots.share;
            let views = if !bot && rng.random::<f64>() < s.browse.view_share {
                let n = rng.random_range(s.browse.views[0]..=s.browse.views[1]);
                (0..n)
                    .map(|_| between(&mut rng, s.browse.think_ms))
                    .collect()
            } else {
                Box::default()
            };
            let resubmits = if bot {
                (0..s.bots.resubmits)
                    .map(|_| between(&mut rng, s.bots.interval_ms))
                    .collect()
            } else {
                Box::default()
            };
            let roll = rng.random::<f64>();
            let think = between(&mut rng, a.think_ms);
            let after = if let Some(script) = script(&mut scripts, s) {
                let think = match script {
                    Script::AtTimeout => at_timeout(&mut scripts, window),
                    _ => think,
                };
                AfterOrder::Script { script, think }
            } else if roll < a.pay {
                AfterOrder::Pay { think }
            } else if roll < a.pay + a.cancel {
                AfterOrder::Cancel { think }
            } else {
                AfterOrder::Abandon
            };
            let pool = if bot {
                s.bots.ip_pool
            } else {
                s.client.ip_pool
            };
            let ip = Ident::ip(rng.random_range(0..pool), bot);
            BuyerPlan {
                index,
                user_id: Ident::user(index, bot),
                device_id: Ident::device(index, bot),
                ip,
                arrival: Duration::from_secs_f64(at),
                views,
                bot,
                resubmits,
                after,
                wave,
            }
        })
        .collect()
}

/// The random stream `[adversarial]` scripts are drawn from (the plan's own is stream 0).
const SCRIPT_STREAM: u64 = 0xad5e;

/// A buyer's script, or `None` (it follows `[after_order]`): one draw per buyer when the
/// scenario has `[adversarial]` shares, none otherwise.
fn script(rng: &mut ChaCha8Rng, s: &Scenario) -> Option<Script> {
    let shares = s.adversarial.shares();
    if s.adversarial.total() <= 0.0 {
        return None;
    }
    let roll = rng.random::<f64>();
    let mut edge = 0.0;
    for (script, share) in shares {
        edge += share;
        if roll < edge {
            return Some(script);
        }
    }
    None
}

/// An `at_timeout` buyer's wait from its order's intended send to its pay: the window, give or
/// take [`AT_TIMEOUT_SPREAD`].
fn at_timeout(rng: &mut ChaCha8Rng, window: Duration) -> Duration {
    let spread = AT_TIMEOUT_SPREAD.as_millis() as u64;
    let offset = rng.random_range(0..=2 * spread);
    (window + Duration::from_millis(offset)).saturating_sub(AT_TIMEOUT_SPREAD)
}

/// Arrivals per whole second of the schedule (for `--dry-run` and the plan summary).
pub fn per_second(plan: &[BuyerPlan]) -> Vec<u32> {
    let mut v: Vec<u32> = Vec::new();
    for b in plan {
        let s = b.arrival.as_secs() as usize;
        if v.len() <= s {
            v.resize(s + 1, 0);
        }
        v[s] += 1;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::scenario::Scenario;

    fn scenario(shape: &str) -> Scenario {
        Scenario::parse(&format!(
            r#"
name = "t"
[item]
stock = 10
[buyers]
count = 2000
seed = 7
arrival = "{shape}"
window_s = 10
burst_s = 2
burst_share = 0.75
[bots]
share = 0.1
resubmits = 3
[after_order]
pay = 0.5
cancel = 0.25
abandon = 0.25
"#
        ))
        .unwrap()
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule() {
        let a = build(&scenario("burst"));
        let b = build(&scenario("burst"));
        assert_eq!(a, b);
        let mut other = scenario("burst");
        other.buyers.seed = 8;
        assert_ne!(build(&other), a);
    }

    #[test]
    fn a_burst_puts_its_share_in_the_opening_seconds() {
        let plan = build(&scenario("burst"));
        let early = plan
            .iter()
            .filter(|b| b.arrival < Duration::from_secs(2))
            .count();
        assert_eq!(early, 1500, "75% of 2000 arrive within burst_s");
        assert!(plan.iter().all(|b| b.arrival < Duration::from_secs(10)));
        assert!(
            plan.windows(2).all(|w| w[0].arrival <= w[1].arrival),
            "sorted"
        );
    }

    #[test]
    fn uniform_arrivals_spread_evenly_over_the_window() {
        let per = per_second(&build(&scenario("uniform")));
        assert_eq!(per.len(), 10);
        for (s, n) in per.iter().enumerate() {
            assert!(
                (140..=260).contains(n),
                "second {s}: {n} arrivals, expected about 200"
            );
        }
    }

    #[test]
    fn a_ramp_rises_through_the_window() {
        let per = per_second(&build(&scenario("ramp")));
        // f(t) = 2t/W²: second k holds (2k+1)/100 of the buyers.
        assert!(per[0] < 60, "{per:?}");
        assert!(per[9] > 320, "{per:?}");
        assert!(per.windows(3).all(|w| w[0] < w[2]), "{per:?}");
    }

    #[test]
    fn bots_and_after_order_mix_follow_the_scenario() {
        let plan = build(&scenario("uniform"));
        let bots = plan.iter().filter(|b| b.bot).count();
        assert!((140..=260).contains(&bots), "{bots} bots of 2000 at 10%");
        assert!(plan
            .iter()
            .filter(|b| b.bot)
            .all(|b| b.resubmits.len() == 3 && b.views.is_empty()));
        let pays = plan
            .iter()
            .filter(|b| matches!(b.after, AfterOrder::Pay { .. }))
            .count();
        assert!((900..=1100).contains(&pays), "{pays}");
    }

    #[test]
    fn adversarial_shares_give_each_script_its_buyers_the_same_way_every_time() {
        let plain = build(&scenario("uniform"));
        let mut s = scenario("uniform");
        s.adversarial = crate::traffic::scenario::AdversarialSpec {
            cancel_after_pay: 0.1,
            cancel_twice: 0.1,
            pay_twice: 0.1,
            pay_after_cancel: 0.1,
            pay_and_cancel: 0.1,
            at_timeout: 0.1,
            resend_same_key: 0.1,
        };
        s.shop.payment_timeout = std::time::Duration::from_secs(3);
        let plan = build(&s);
        assert_eq!(plan, build(&s), "seeded");
        for script in Script::ALL {
            let n = plan
                .iter()
                .filter(|b| matches!(b.after, AfterOrder::Script { script: x, .. } if x == script))
                .count();
            assert!((140..=260).contains(&n), "{script:?}: {n} of 2000 at 10%");
        }
        let scripted = plan
            .iter()
            .filter(|b| matches!(b.after, AfterOrder::Script { .. }))
            .count();
        assert!(
            (1300..=1500).contains(&scripted),
            "{scripted}: 70% scripted"
        );
        for b in &plan {
            if let AfterOrder::Script {
                script: Script::AtTimeout,
                think,
            } = b.after
            {
                assert!(
                    (Duration::from_millis(2750)..=Duration::from_millis(3250)).contains(&think),
                    "at the 3 s window's end: {think:?}"
                );
            }
        }
        // Everything else about each buyer is the plan without [adversarial].
        for (a, b) in plain.iter().zip(&plan) {
            assert_eq!(
                (a.arrival, &a.views, a.bot, &a.ip),
                (b.arrival, &b.views, b.bot, &b.ip)
            );
            if !matches!(b.after, AfterOrder::Script { .. }) {
                assert_eq!(a.after, b.after);
            }
        }
    }
}
