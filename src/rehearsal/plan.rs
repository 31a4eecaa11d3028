//! The plan as numbers: what `--dry-run` prints instead of sending, and the banner printed
//! before load goes to a remote host.

use crate::traffic::schedule::{AfterOrder, Schedule};
use crate::traffic::Scenario;
use std::fmt::Write;
use std::time::Duration;

/// The plan as numbers, for `--dry-run` and the remote banner.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSummary {
    pub buyers: usize,
    pub bots: usize,
    /// Buyers arriving in each whole second after the sale opens.
    pub arrivals_per_second: Vec<u32>,
    /// Requests due in each second if every answer were instant (views, orders, bot repeats).
    pub requests_per_second: Vec<u32>,
    /// Views + orders + bot repeats.
    pub planned_requests: u64,
    /// Pay/cancel requests, at most one per unit sold.
    pub follow_ups_at_most: u64,
    /// `[target.login]`: when each buyer logs in, and how many at once before the sale.
    pub login: Option<(crate::traffic::mapping::LoginWhen, usize)>,
}

impl PlanSummary {
    /// Summarizes a plan of buyers for a scenario's sale.
    pub fn of(s: &Scenario, plan: &Schedule) -> Self {
        let mut per: Vec<u32> = Vec::new();
        let mut bump = |at: Duration| {
            let i = at.as_secs() as usize;
            if per.len() <= i {
                per.resize(i + 1, 0);
            }
            per[i] += 1;
        };
        let mut follow = 0u64;
        let mut bots = 0;
        for b in plan.iter() {
            bots += usize::from(b.bot);
            let mut t = b.arrival;
            for think in &b.views {
                bump(t);
                t += *think;
            }
            bump(t);
            for gap in &b.resubmits {
                t += *gap;
                bump(t);
            }
            if !matches!(b.after, AfterOrder::Abandon) {
                follow += 1;
            }
        }
        let planned = per.iter().map(|n| *n as u64).sum();
        let units = (s.item.stock.max(0) as u64).saturating_mul(s.item.purchase_limit as u64);
        PlanSummary {
            buyers: plan.len(),
            bots,
            arrivals_per_second: plan.per_second(),
            requests_per_second: per,
            planned_requests: planned,
            follow_ups_at_most: follow.min(units),
            login: s
                .target
                .as_ref()
                .and_then(|m| m.login.as_ref())
                .map(|l| (l.when, l.concurrency)),
        }
    }

    /// Most arrivals in one second.
    pub fn peak_arrivals(&self) -> u32 {
        self.arrivals_per_second.iter().copied().max().unwrap_or(0)
    }

    /// Most requests due in one second (answers taken as instant).
    pub fn peak_requests(&self) -> u32 {
        self.requests_per_second.iter().copied().max().unwrap_or(0)
    }

    /// The `--dry-run` printout.
    pub fn render(&self, target: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "dry run: nothing is sent. Plan against {target}:");
        let _ = writeln!(
            s,
            "  {} buyers ({} bots) over {} s; ~{} requests (views, orders, bot repeats) plus at most {} pay/cancel",
            self.buyers,
            self.bots,
            self.arrivals_per_second.len(),
            self.planned_requests,
            self.follow_ups_at_most
        );
        let _ = writeln!(
            s,
            "  peak: {} arrivals/s, ~{} requests/s",
            self.peak_arrivals(),
            self.peak_requests()
        );
        match self.login {
            Some((crate::traffic::mapping::LoginWhen::BeforeSale, at_once)) => {
                let _ = writeln!(
                    s,
                    "  plus {} logins (target.login) before the sale opens, {at_once} at a time",
                    self.buyers
                );
            }
            Some((crate::traffic::mapping::LoginWhen::OnArrival, _)) => {
                let _ = writeln!(
                    s,
                    "  plus {} logins (target.login), each buyer's first request at its arrival",
                    self.buyers
                );
            }
            None => {}
        }
        let _ = writeln!(s, "  second  arrivals  requests");
        for (i, a) in self.arrivals_per_second.iter().enumerate() {
            let r = self.requests_per_second.get(i).copied().unwrap_or(0);
            let _ = writeln!(s, "  {i:>6}  {a:>8}  {r:>8}");
        }
        s
    }

    /// The banner printed before load goes to a remote host.
    pub fn banner(&self, host: &str) -> String {
        format!(
            "WARNING: --allow-remote: sending load to {host} (not loopback): {} buyers, ~{} requests, peak ~{} requests/s ({} arrivals/s)",
            self.buyers,
            self.planned_requests + self.follow_ups_at_most,
            self.peak_requests(),
            self.peak_arrivals()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_summary_counts_every_planned_request() {
        let s = Scenario::parse(
            r#"
name = "t"
[item]
stock = 5
[buyers]
count = 100
arrival = "uniform"
window_s = 2
[bots]
share = 0.5
resubmits = 2
"#,
        )
        .unwrap();
        let plan = crate::traffic::schedule::build(&s);
        let p = PlanSummary::of(&s, &plan);
        let bots = plan.iter().filter(|b| b.bot).count() as u64;
        assert_eq!(p.planned_requests, 100 + 2 * bots);
        assert_eq!(p.follow_ups_at_most, 5, "pay/cancel only for sold units");
        assert_eq!(p.arrivals_per_second.iter().sum::<u32>(), 100);
        assert!(p.peak_requests() >= p.peak_arrivals());
        assert!(p.render("http://127.0.0.1:1").contains("nothing is sent"));
    }
}
