//! `oversell gate`: thresholds checked against a run's report, for CI.
//!
//! Limits come from the scenario's `[thresholds]` table (and `[target].max_unclassified` for
//! `unclassified`), overridden by `--threshold name=value` flags. Every correctness finding of
//! the oracle defaults to 0 when neither sets it: `oversell`, `peak_oversell` (oversell later
//! cancels covered up still fails), `client_oversell`, `oracle_disagreement`, `lost_acks`,
//! `duplicate_acks`, `duplicate_orders_per_key`, `phantom_orders`, `refused_committed`,
//! `dead_letters`, `duplicate_buyers`, `duplicate_devices`, `status_mismatches`,
//! `wrong_answers`, `conservation_drift`, `redis_drift`,
//! `restock_mismatch`, `reconcile_residual`, `stock_below_zero`, `stock_above_initial` and
//! `queue_not_drained`; `unclassified` defaults to 1 %; `send_lag_p99_ms` to 5 ms (a run above
//! it is *generator-bound*: the generator sent late, and the gate says so rather than blame the
//! shop). `indeterminate_committed`,
//! `undersell`, `error_rate` and the latencies are limited only when asked. Every strategy,
//! `naive` included, is judged by the same limits: the gate is about the shop, not about what a
//! design claims. Each limit is checked for every run (strategy,
//! or the foreign target) and ends as passed, breached, or *not verified* when the run could
//! not measure it (e.g. oversell with no oracle on a foreign target). Not verified fails the
//! gate unless the user allows it, and never passes a run whose own clients' evidence shows
//! oversell: `oversell` is then breached, measured by that evidence. The names, limit rules,
//! formats and readings are the metric catalog's ([`crate::metric`]).
//!
//! Exit codes (stable): 0 every threshold held; 1 a threshold was breached or not verified;
//! 2 bad usage or a bad scenario; 3 the target or a service could not be reached.
//!
//! - `junit`: one JUnit test case per threshold per run.

pub mod junit;

use crate::metric::Thresholds;
pub use crate::metric::{Metric, Override};
use crate::report::markup::md_cell;
use crate::report::table::{text, Align};
use crate::report::Report;
use std::fmt::Write;

/// What a breached `send_lag_p99_ms` means.
pub const GENERATOR_BOUND: &str = "generator-bound: the generator sent its requests late (send lag p99 above the bound), so this run's latency measures the generator, not the shop; rerun with fewer buyers, a release build or a quieter machine";

/// Where a limit was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Default,
    Scenario,
    Flag,
}

impl Origin {
    fn as_str(self) -> &'static str {
        match self {
            Origin::Default => "default",
            Origin::Scenario => "scenario",
            Origin::Flag => "--threshold",
        }
    }
}

/// One limit in force.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub metric: Metric,
    pub value: f64,
    pub origin: Origin,
}

/// The limits in force: flags over the scenario over the defaults. `max_unclassified`: the
/// bound the scenario's `[target]` table sets, if any (the `unclassified` limit).
pub fn limits(
    scenario: &Thresholds,
    max_unclassified: Option<f64>,
    flags: &[Override],
) -> Vec<Limit> {
    Metric::limitable()
        .filter_map(|m| {
            let flag = flags.iter().rev().find(|o| o.metric == m);
            let set = scenario
                .get(m)
                .or(max_unclassified.filter(|_| m == Metric::Unclassified));
            let (value, origin) = match (flag, set, m.default_limit()) {
                (Some(f), _, _) => (f.value, Origin::Flag),
                (None, Some(v), _) => (v, Origin::Scenario),
                (None, None, Some(v)) => (v, Origin::Default),
                (None, None, None) => return None,
            };
            Some(Limit {
                metric: m,
                value,
                origin,
            })
        })
        .collect()
}

/// How a check ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Passed,
    Breached,
    /// The run could not measure it; the reason.
    NotVerified(String),
}

/// One threshold checked against one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// The run's label (strategy, strategy/backend, or the target's host).
    pub run: String,
    pub limit: Limit,
    pub measured: Option<f64>,
    /// Where the measured figure comes from.
    pub source: &'static str,
    pub status: Status,
}

impl Check {
    /// `oversell <= 0`.
    pub fn title(&self) -> String {
        format!(
            "{} <= {}",
            self.limit.metric.name(),
            self.limit.metric.format(self.limit.value)
        )
    }

    /// Why a breach is not the shop's fault: `send_lag_p99_ms` breached means the run is
    /// generator-bound.
    pub fn breach_reason(&self) -> Option<&'static str> {
        (self.status == Status::Breached && self.limit.metric == Metric::SendLagP99Ms)
            .then_some(GENERATOR_BOUND)
    }

    /// The measured value for people, or `not verified`.
    pub fn measured_text(&self) -> String {
        self.measured
            .map_or("not verified".into(), |v| self.limit.metric.format(v))
    }
}

/// The gate's decision over every run of a report.
#[derive(Debug, Clone)]
pub struct Verdict {
    pub scenario: String,
    pub checks: Vec<Check>,
    pub allow_unverified: bool,
}

impl Verdict {
    /// Checks every limit against every run of `report`.
    pub fn judge(report: &Report, limits: &[Limit], allow_unverified: bool) -> Verdict {
        let mb = report.multi_backend();
        let mut checks = Vec::new();
        for run in &report.runs {
            for l in limits {
                let client_oversell = run.findings.client_oversell.filter(|c| *c > 0);
                let (measured, source, status) = match l.metric.read(run) {
                    Ok(v) if v <= l.value + 1e-12 => (Some(v), l.metric.source(), Status::Passed),
                    Ok(v) => (Some(v), l.metric.source(), Status::Breached),
                    // Not verified never passes a run whose own clients were told of more
                    // units than it had: that evidence measures oversell from below.
                    Err(_) if l.metric == Metric::Oversell && client_oversell.is_some() => (
                        client_oversell.map(|c| c as f64),
                        "clients' acknowledgements, no server-side oracle (a lower bound)",
                        Status::Breached,
                    ),
                    // A default limit (nobody asked for it) on a figure this oracle cannot
                    // give — e.g. lost acks from a totals-only SQL oracle — is not checked.
                    // Without any oracle it still fails: nothing was verified at all.
                    Err(_) if l.origin == Origin::Default && run.findings.verified => continue,
                    Err(why) => (None, "", Status::NotVerified(why)),
                };
                checks.push(Check {
                    run: run.label(mb),
                    limit: *l,
                    measured,
                    source,
                    status,
                });
            }
        }
        Verdict {
            scenario: report.scenario.name.clone(),
            checks,
            allow_unverified,
        }
    }

    /// Breached checks.
    pub fn breached(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| c.status == Status::Breached)
            .count()
    }

    /// Checks that could not be measured.
    pub fn unverified(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| matches!(c.status, Status::NotVerified(_)))
            .count()
    }

    /// Whether the gate passes.
    pub fn passed(&self) -> bool {
        self.breached() == 0 && (self.allow_unverified || self.unverified() == 0)
    }

    /// 0 passed, 1 failed.
    pub fn exit_code(&self) -> i32 {
        if self.passed() {
            0
        } else {
            1
        }
    }

    fn result_word(&self, c: &Check) -> &'static str {
        match &c.status {
            Status::Passed => "pass",
            Status::Breached if c.breach_reason().is_some() => "FAIL (generator-bound)",
            Status::Breached => "FAIL",
            Status::NotVerified(_) if self.allow_unverified => "not verified (allowed)",
            Status::NotVerified(_) => "FAIL (not verified)",
        }
    }

    fn headline(&self) -> String {
        format!(
            "oversell gate: {} — scenario {}: {} checks, {} breached, {} not verified{}",
            if self.passed() { "PASS" } else { "FAIL" },
            self.scenario,
            self.checks.len(),
            self.breached(),
            self.unverified(),
            if self.unverified() > 0 && self.allow_unverified {
                " (allowed by --allow-unverified)"
            } else {
                ""
            }
        )
    }

    /// The one-screen terminal verdict.
    pub fn render(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .checks
            .iter()
            .map(|c| {
                vec![
                    c.run.clone(),
                    c.limit.metric.name().to_string(),
                    format!(
                        "<= {} ({})",
                        c.limit.metric.format(c.limit.value),
                        c.limit.origin.as_str()
                    ),
                    c.measured_text(),
                    self.result_word(c).to_string(),
                ]
            })
            .collect();
        let header = ["run", "threshold", "limit", "measured", "result"].map(String::from);
        let mut s = String::new();
        let _ = writeln!(s, "{}", self.headline());
        s.push_str(&text(&header, &rows, &[Align::Left; 5]));
        for c in &self.checks {
            if let Some(why) = c.breach_reason() {
                let _ = writeln!(s, "  {} {}: {why}", c.run, c.limit.metric.name());
            }
            if let Status::NotVerified(why) = &c.status {
                let _ = writeln!(
                    s,
                    "  {} {}: not verified: {why}",
                    c.run,
                    c.limit.metric.name()
                );
            }
        }
        s
    }

    /// Markdown for `$GITHUB_STEP_SUMMARY`: the verdict table, then the report's headline.
    pub fn markdown(&self, report: &Report, report_dir: &std::path::Path) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## {}\n", self.headline());
        let _ = writeln!(s, "| run | threshold | limit | measured | result |");
        let _ = writeln!(s, "|---|---|---:|---:|---|");
        for c in &self.checks {
            let result = match &c.status {
                Status::NotVerified(why) => format!("{} — {why}", self.result_word(c)),
                _ => match c.breach_reason() {
                    Some(why) => format!("{} — {why}", self.result_word(c)),
                    None => self.result_word(c).to_string(),
                },
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                md_cell(&c.run),
                c.limit.metric.name(),
                md_cell(&c.limit.metric.format(c.limit.value)),
                md_cell(&c.measured_text()),
                md_cell(&result)
            );
        }
        let _ = writeln!(s, "\n{}", crate::report::markdown::headline(report));
        let _ = writeln!(s, "Report: `{}`\n", report_dir.join("report.md").display());
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_override_the_scenario_which_overrides_the_defaults() {
        let mut t = Thresholds::default();
        t.set("oversell", 2.0).unwrap();
        t.set("p99_ms", 300.0).unwrap();
        let flags: Vec<Override> = ["p99_ms=500", "error_rate=0.1", "p99_ms=700"]
            .iter()
            .map(|f| f.parse().unwrap())
            .collect();
        let l = limits(&t, None, &flags);
        let get = |m| l.iter().find(|x| x.metric == m).copied();
        assert_eq!(get(Metric::Oversell).unwrap().value, 2.0);
        assert_eq!(get(Metric::Oversell).unwrap().origin, Origin::Scenario);
        assert_eq!(get(Metric::LostAcks).unwrap().origin, Origin::Default);
        assert_eq!(
            get(Metric::P99Ms).unwrap().value,
            700.0,
            "the last flag wins"
        );
        assert_eq!(get(Metric::ErrorRate).unwrap().origin, Origin::Flag);
        assert!(get(Metric::Undersell).is_none(), "no default for undersell");
        assert_eq!(get(Metric::ClientOversell).unwrap().value, 0.0);
        assert_eq!(get(Metric::Unclassified).unwrap().value, 0.01);
        let l = limits(&t, Some(0.2), &[]);
        let u = l.iter().find(|x| x.metric == Metric::Unclassified).unwrap();
        assert_eq!((u.value, u.origin), (0.2, Origin::Scenario));
    }

    #[test]
    fn a_bad_threshold_flag_names_the_allowed_ones() {
        let e = "p95_ms=3".parse::<Override>().unwrap_err().to_string();
        assert!(
            e.contains("p95_ms") && e.contains("p999_ms") && e.contains("oversell"),
            "{e}"
        );
        assert!("oversell".parse::<Override>().is_err());
        assert!("oversell=-1".parse::<Override>().is_err());
        assert!("oversell=0.5".parse::<Override>().is_err());
        assert!("error_rate=2".parse::<Override>().is_err());
        assert!("p99_ms=0".parse::<Override>().is_err());
        assert_eq!("error_rate = 0.05".parse::<Override>().unwrap().value, 0.05);
    }
}
