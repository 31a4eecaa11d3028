//! The battery: which experiments a diagnosis runs, chosen by what the shop's mapping can drive
//! and planned within the budget up front; what it skips, and why.
//!
//! Every experiment is the user's scenario (its arrivals, its stock, its `[target]`, `[watch]`
//! and `[shop]`) with the buyers' behaviour changed so that each failure class has one place
//! where it alone can show:
//!
//! - `rush`: the scenario's arrivals, every buyer paying (or walking away when pay is not
//!   mapped): no release happens, so oversell here is the order path's alone;
//! - `adversarial`: bots resubmitting within milliseconds (a quarter of the buyers), buyers
//!   resending their order with the same `Idempotency-Key`, failed orders retried with their
//!   key; still no release;
//! - `cancel-after-pay`: buyers pay, then cancel the paid order; half the buyers arrive later,
//!   to buy whatever a wrong restock put back;
//! - `restock`: cancels, cancels sent twice, pays after a cancel and (when the payment window
//!   is short enough to pass within the run) orders left to expire;
//! - `capacity`: the search for the highest arrival rate at which the objective holds, with
//!   what is left of the budget.

use super::class::Class;
use crate::runner::Levers;
use crate::traffic::adversary::RetrySpec;
use crate::traffic::Scenario;
use serde::Serialize;
use std::time::Duration;

/// An experiment of the battery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Rush,
    Adversarial,
    CancelAfterPay,
    Restock,
    Capacity,
}

impl Kind {
    /// Every experiment, in the order they run.
    pub const ALL: [Kind; 5] = [
        Kind::Rush,
        Kind::Adversarial,
        Kind::CancelAfterPay,
        Kind::Restock,
        Kind::Capacity,
    ];

    /// The experiment named `s` (`--experiments`).
    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s.trim())
    }

    /// Its name (and its report folder's suffix).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Rush => "rush",
            Kind::Adversarial => "adversarial",
            Kind::CancelAfterPay => "cancel-after-pay",
            Kind::Restock => "restock",
            Kind::Capacity => "capacity",
        }
    }

    /// The classes it drives.
    pub fn classes(self) -> &'static [Class] {
        match self {
            Kind::Rush => &[
                Class::OversellRace,
                Class::LostAck,
                Class::PhantomOrder,
                Class::PoolExhaustion,
                Class::RetryStorm,
                Class::BotsTakeUnits,
                Class::ReconcileResidual,
                Class::ColdStart,
            ],
            Kind::Adversarial => &[
                Class::OversellRace,
                Class::LimitRace,
                Class::DuplicateOnRetry,
                Class::BotsTakeUnits,
                Class::LostAck,
                Class::PhantomOrder,
            ],
            Kind::CancelAfterPay => &[Class::CancelAfterPay],
            Kind::Restock => &[Class::RestockNotIdempotent, Class::ReconcileResidual],
            Kind::Capacity => &[],
        }
    }
}

/// The reference shop's payment timeout in the restock experiment: short enough that orders
/// left unpaid expire within the run.
pub const EXPIRY: Duration = Duration::from_secs(1);
/// The longest declared payment window a foreign shop's restock experiment waits out.
pub const LONGEST_EXPIRY: Duration = Duration::from_secs(5);
/// Time a run needs beyond its sale, budgeted up front: the shop's start, the set-up, the
/// drain, the oracle and the report.
pub const RUN_OVERHEAD_S: f64 = 8.0;
/// The capacity probes' window, at most (a short sale on a fresh stock).
pub const PROBE_S: f64 = 3.0;

/// One experiment, planned.
#[derive(Debug, Clone)]
pub struct Planned {
    pub kind: Kind,
    pub scenario: Scenario,
    /// What it does, in a sentence.
    pub what: String,
    /// Its time, budgeted before it runs (s).
    pub estimate_s: f64,
}

/// An experiment left out, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub experiment: Kind,
    pub why: String,
}

/// The battery: the experiments in order, what was left out, the budget.
#[derive(Debug, Clone)]
pub struct Battery {
    pub planned: Vec<Planned>,
    pub skipped: Vec<Skipped>,
    pub budget: Duration,
    /// Seconds left for the capacity search (0: none).
    pub capacity_s: f64,
    /// The capacity probes' window (s).
    pub probe_s: f64,
}

impl Battery {
    /// The battery for `s` on `shop` within `budget`, of the experiments in `only` (the rush
    /// always); an error when the budget cannot hold the rush.
    pub fn plan(
        s: &Scenario,
        shop: &Levers,
        budget: Duration,
        only: &[Kind],
    ) -> anyhow::Result<Battery> {
        let mut planned = Vec::new();
        let mut skipped = Vec::new();
        let asked = |k: Kind| k == Kind::Rush || only.contains(&k);
        for kind in Kind::ALL {
            if !asked(kind) {
                skipped.push(Skipped {
                    experiment: kind,
                    why: "not asked for (--experiments)".into(),
                });
                continue;
            }
            if kind == Kind::Capacity {
                continue;
            }
            match experiment(kind, s, shop) {
                Ok(p) => planned.push(p),
                Err(why) => skipped.push(Skipped {
                    experiment: kind,
                    why,
                }),
            }
        }
        let rush = planned.first().map_or(0.0, |p: &Planned| p.estimate_s);
        anyhow::ensure!(
            budget.as_secs_f64() >= rush,
            "--budget {} cannot hold the rush (about {rush:.0}s: its sale plus {RUN_OVERHEAD_S:.0}s \
             to start, set up, drain and report); allowed: at least {}s",
            crate::duration::shown(budget),
            rush.ceil()
        );
        // The experiments after the rush that fit, in order.
        let mut used = 0.0;
        planned.retain(|p| {
            let fits = used + p.estimate_s <= budget.as_secs_f64();
            if fits {
                used += p.estimate_s;
            } else {
                skipped.push(Skipped {
                    experiment: p.kind,
                    why: format!(
                        "the budget: it needs about {:.0}s and {:.0}s of {} were left",
                        p.estimate_s,
                        budget.as_secs_f64() - used,
                        crate::duration::shown(budget)
                    ),
                });
            }
            fits
        });
        let probe_s = s.buyers.window_s.clamp(1.0, PROBE_S);
        let one_probe = probe_s + crate::capacity::PROBE_OVERHEAD.as_secs_f64();
        let left = budget.as_secs_f64() - used;
        let capacity_s = if !asked(Kind::Capacity) {
            0.0
        } else if left >= one_probe {
            left
        } else {
            skipped.push(Skipped {
                experiment: Kind::Capacity,
                why: format!(
                    "the budget: a probe takes about {one_probe:.0}s and {left:.0}s of {} were left",
                    crate::duration::shown(budget)
                ),
            });
            0.0
        };
        Ok(Battery {
            planned,
            skipped,
            budget,
            capacity_s,
            probe_s,
        })
    }

    /// The `--dry-run` printout: each experiment, its buyers and stock, its time; the capacity
    /// search's share; what is skipped and why.
    pub fn render(&self, subject: &str) -> String {
        use std::fmt::Write;
        let mut out = format!(
            "diagnose plan for {subject}: budget {}\n",
            crate::duration::shown(self.budget)
        );
        let _ = writeln!(
            out,
            "{:<17} {:>7} {:>6} {:>8}  what",
            "experiment", "buyers", "stock", "about"
        );
        for p in &self.planned {
            let _ = writeln!(
                out,
                "{:<17} {:>7} {:>6} {:>7.0}s  {}",
                p.kind.as_str(),
                p.scenario.total_buyers(),
                p.scenario.item.stock,
                p.estimate_s,
                p.what
            );
        }
        if self.capacity_s > 0.0 {
            let _ = writeln!(
                out,
                "{:<17} {:>7} {:>6} {:>7.0}s  the highest rate at which the objective holds: \
                 doubling from the scenario's own rate, then bisection; probes of {:.0}s",
                Kind::Capacity.as_str(),
                "-",
                "-",
                self.capacity_s,
                self.probe_s
            );
        }
        for s in &self.skipped {
            let _ = writeln!(out, "skipped {}: {}", s.experiment.as_str(), s.why);
        }
        out.push_str("nothing sent (--dry-run)\n");
        out
    }
}

/// The experiment `kind` on `s`, or why the shop's mapping cannot drive it.
fn experiment(kind: Kind, s: &Scenario, shop: &Levers) -> Result<Planned, String> {
    let mut e = s.clone();
    e.name = format!("{}-{}", s.name, kind.as_str());
    e.adversarial = Default::default();
    e.second_wave = None;
    e.client.retry = None;
    e.faults.clear();
    let (what, extra_s) = match kind {
        Kind::Rush => (rush(&mut e, shop), 0.0),
        Kind::Adversarial => (adversarial(&mut e, shop), 0.0),
        Kind::CancelAfterPay => (cancel_after_pay(&mut e, shop)?, 0.0),
        Kind::Restock => restock(&mut e, shop)?,
        Kind::Capacity => return Err("planned apart".into()),
    };
    let think = e.after_order.think_ms[1] as f64 / 1000.0;
    let estimate_s = e.buyers.window_s + think + extra_s + RUN_OVERHEAD_S;
    e.validate().map_err(|p| format!("{p}"))?;
    Ok(Planned {
        kind,
        scenario: e,
        what,
        estimate_s,
    })
}

/// Every buyer who gets an order pays it (or walks away, when pay is not mapped).
fn keep_all(e: &mut Scenario, shop: &Levers) {
    e.after_order.cancel = 0.0;
    if shop.pay {
        (e.after_order.pay, e.after_order.abandon) = (1.0, 0.0);
    } else {
        (e.after_order.pay, e.after_order.abandon) = (0.0, 1.0);
    }
    if shop.knobs {
        e.shop.payment_timeout = Duration::from_secs(900);
    }
}

fn rush(e: &mut Scenario, shop: &Levers) -> String {
    keep_all(e, shop);
    format!(
        "the scenario's rush: {} buyers over {}s ({:.0} % in the first {}s), every order kept \
         ({}): oversell here is the order path's alone",
        e.buyers.count,
        e.buyers.window_s,
        e.buyers.burst_share * 100.0,
        e.buyers.burst_s,
        if shop.pay { "paid" } else { "left unpaid" }
    )
}

fn adversarial(e: &mut Scenario, shop: &Levers) -> String {
    keep_all(e, shop);
    e.item.stock = e.item.stock.max(i64::from(e.buyers.count / 2));
    // A second order under one key shows only where the limit lets a buyer hold two.
    if shop.limit_in_setup {
        e.item.purchase_limit = e.item.purchase_limit.max(2);
    }
    e.bots.share = 0.25;
    e.bots.resubmits = 3;
    e.bots.interval_ms = [0, 2];
    e.bots.ip_pool = e.bots.ip_pool.max(4);
    e.client.retry = Some(RetrySpec {
        on: vec!["timeout".into(), "connect_error".into(), "5xx".into()],
        times: 2,
        backoff_ms: vec![50],
    });
    let resend = if shop.pay {
        e.adversarial.resend_same_key = 0.3;
        "30 % of the buyers resend their order with its Idempotency-Key, "
    } else {
        "(no same-key resend: it pays the order, and pay is not mapped) "
    };
    format!(
        "bots (25 % of the buyers, each order sent 4 times within 2 ms) against the purchase \
         limit of {}, {resend}failed orders retried twice with their key; {} units",
        e.item.purchase_limit, e.item.stock
    )
}

fn cancel_after_pay(e: &mut Scenario, shop: &Levers) -> Result<String, String> {
    if !(shop.pay && shop.cancel) {
        return Err(format!(
            "cancel after pay needs [target] {}: map it so buyers can pay and then cancel",
            needs(shop)
        ));
    }
    keep_all(e, shop);
    e.bots.share = 0.0;
    e.buyers.window_s = e.buyers.window_s.max(3.0);
    e.buyers.burst_share = 0.5;
    e.adversarial.cancel_after_pay = 0.35;
    Ok(format!(
        "35 % of the buyers pay, then cancel the paid order; half the buyers arrive later, to \
         buy what a wrong restock put back ({} units)",
        e.item.stock
    ))
}

/// Cancels, cancels twice, pays after a cancel and expiries; the extra seconds the expiries
/// need.
fn restock(e: &mut Scenario, shop: &Levers) -> Result<(String, f64), String> {
    if !shop.cancel {
        return Err(
            "restock needs [target] cancel: map the cancel request so buyers can release their \
             orders"
                .into(),
        );
    }
    e.bots.share = 0.0;
    e.buyers.window_s = e.buyers.window_s.max(4.0);
    e.buyers.burst_share = 0.5;
    let expiry = match (shop.knobs, shop.payment_window) {
        (true, _) => {
            e.shop.payment_timeout = EXPIRY;
            Some(EXPIRY)
        }
        (false, Some(w)) if w <= LONGEST_EXPIRY => Some(w),
        _ => None,
    };
    let abandon = if expiry.is_some() { 0.3 } else { 0.0 };
    let pay = if shop.pay { 0.4 } else { 0.0 };
    e.after_order.pay = pay;
    e.after_order.abandon = abandon;
    e.after_order.cancel = 1.0 - pay - abandon;
    e.adversarial.cancel_twice = 0.1;
    if shop.pay {
        e.adversarial.pay_after_cancel = 0.1;
    }
    let expiries = match expiry {
        Some(w) => format!(
            "30 % left unpaid to expire after {}",
            crate::duration::shown(w)
        ),
        None => format!(
            "no expiry (the shop's payment window{} is longer than {}: declare a shorter \
             --payment-window on a staging shop to drive it)",
            shop.payment_window
                .map_or(" is undeclared and".into(), |w| format!(
                    " {}",
                    crate::duration::shown(w)
                )),
            crate::duration::shown(LONGEST_EXPIRY)
        ),
    };
    Ok((
        format!(
            "{:.0} % cancel, 10 % cancel twice{}, {expiries}; half the buyers arrive later, to buy \
             what the releases put back",
            e.after_order.cancel * 100.0,
            if shop.pay {
                ", 10 % pay after cancelling"
            } else {
                ""
            }
        ),
        expiry.map_or(0.0, |w| w.as_secs_f64() + 1.0),
    ))
}

/// The requests a foreign shop must map for the state-machine experiments.
fn needs(shop: &Levers) -> &'static str {
    match (shop.pay, shop.cancel) {
        (false, false) => "pay and cancel",
        (false, true) => "pay",
        _ => "cancel",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shop that gives every lever (the reference shop's).
    fn every_lever() -> Levers {
        Levers {
            knobs: true,
            pay: true,
            cancel: true,
            payment_window: None,
            limit_in_setup: true,
            buyer_in_order: true,
            answers_not_found: true,
            counts_retries: true,
            audited_whole: true,
        }
    }

    fn smoke() -> Scenario {
        crate::scenarios::resolve(std::path::Path::new("smoke"))
            .unwrap()
            .0
    }

    #[test]
    fn the_reference_shop_gets_every_experiment_and_the_rest_goes_to_capacity() {
        let shop = every_lever();
        let b = Battery::plan(&smoke(), &shop, Duration::from_secs(600), &Kind::ALL).unwrap();
        let kinds: Vec<Kind> = b.planned.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::Rush,
                Kind::Adversarial,
                Kind::CancelAfterPay,
                Kind::Restock
            ]
        );
        assert!(b.skipped.is_empty(), "{:?}", b.skipped);
        let used: f64 = b.planned.iter().map(|p| p.estimate_s).sum();
        assert!((used + b.capacity_s - 600.0).abs() < 1e-9);
        let restock = &b.planned[3].scenario;
        assert_eq!(restock.shop.payment_timeout, EXPIRY);
        assert!(restock.after_order.abandon > 0.0);
        let rush = &b.planned[0].scenario;
        assert_eq!((rush.after_order.pay, rush.after_order.cancel), (1.0, 0.0));
    }

    #[test]
    fn a_mapping_without_pay_or_cancel_skips_the_state_machine_and_says_what_to_map() {
        let mut s = smoke();
        s.target = Some(crate::traffic::mapping::Mapping::default());
        let shop = Levers {
            knobs: false,
            pay: false,
            cancel: false,
            payment_window: None,
            limit_in_setup: false,
            buyer_in_order: false,
            answers_not_found: false,
            counts_retries: false,
            audited_whole: false,
        };
        let b = Battery::plan(&s, &shop, Duration::from_secs(600), &Kind::ALL).unwrap();
        let skipped: Vec<(Kind, &str)> = b
            .skipped
            .iter()
            .map(|s| (s.experiment, s.why.as_str()))
            .collect();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(skipped[0].1.contains("pay and cancel"), "{skipped:?}");
        assert!(skipped[1].1.contains("[target] cancel"), "{skipped:?}");
    }

    #[test]
    fn a_budget_too_small_for_the_rush_is_refused_and_a_small_one_drops_capacity() {
        let shop = every_lever();
        let e = Battery::plan(&smoke(), &shop, Duration::from_secs(5), &Kind::ALL).unwrap_err();
        assert!(e.to_string().contains("cannot hold the rush"), "{e}");
        let b = Battery::plan(&smoke(), &shop, Duration::from_secs(30), &Kind::ALL).unwrap();
        assert_eq!(b.planned.len(), 2, "{:?}", b.skipped);
        assert!(b.skipped.iter().any(|s| s.experiment == Kind::Capacity));
        assert!(b.render("naive").contains("skipped capacity: the budget"));
    }
}
