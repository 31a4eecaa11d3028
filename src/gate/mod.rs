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
//! `not_settled` (alias `queue_not_drained`), `nothing_sold` and `undersell` (units left while
//! buyers were refused for reasons other than sold out; both always measured from the clients'
//! records, so `--allow-unverified` never passes a run that tested nothing); `unclassified`
//! defaults to 1 %; `late_sends` to 1 % (requests sent a tenth of the burst late: the run is
//! *generator-bound*, it did not send the arrivals planned, and the gate says so rather than
//! blame the shop). `send_lag_p99_ms` has no default: a bound you declare. A latency limit that
//! breaches with each request's send lag and holds without it is not verified (generator-bound),
//! never a FAIL of the shop ([`crate::report::lateness`]). `indeterminate_committed`,
//! `turned_away_buyers`, `error_rate`, the latencies, `db_qps_peak` and `throughput` (a floor:
//! at least) are limited only when asked: every catalog name `diff --fail-on` takes. Every strategy,
//! `naive` included, is judged by the same limits: the gate is about the shop, not about what a
//! design claims. Each limit is checked for every run (strategy,
//! or the foreign target) and ends as passed, breached, *not verified* when the run could not
//! measure it and someone asked for it, or *not required* when it could not and nobody did.
//! Who asked decides: a limit the user wrote (their own scenario file's `[thresholds]`, a
//! `--threshold` flag) that the run cannot measure is not verified, and fails the gate unless
//! `--allow-unverified`; a limit from the defaults or from a *bundled* scenario (its text is
//! one of `scenarios/*.toml`, however it was named) that the given server-side oracle cannot
//! measure is listed as "not verified (not required: the oracle cannot measure it)" and does
//! not fail the run, so the bundled `ci` scenario passes a correct shop judged by a totals-only
//! oracle. Without any server-side oracle nothing server-side was verified: those limits stay
//! not verified. No check is skipped: every limit is in the table, JUnit and the Markdown.
//! Not verified never passes a run whose own clients' evidence shows oversell: `oversell` is
//! then breached, measured by that evidence; `duplicate_buyers` and `duplicate_devices` fall
//! back to the clients' records (distinct orders held at once per user or device) when the
//! oracle has no order rows, and say so. The names, limit rules, formats and readings are the
//! metric catalog's ([`crate::metric`]).
//!
//! Exit codes (stable): 0 every threshold held; 1 a threshold was breached or not verified;
//! 2 bad usage or a bad scenario; 3 the target or a service could not be reached.
//!
//! - `junit`: one JUnit test case per threshold per run.

pub mod junit;
pub mod watch;

use crate::exit::Exit;
use crate::metric::Thresholds;
pub use crate::metric::{Metric, Override};
use crate::report::markup::md_cell;
use crate::report::table::{text, width, Align, TERMINAL_WIDTH};
use crate::report::{Report, RunReport};
use std::fmt::Write;

/// What a breached `send_lag_p99_ms` (a bound the user declared) or `late_sends` means.
pub const GENERATOR_BOUND: &str = "generator-bound: the generator sent its requests late (above the send-lag bound declared, or later than a tenth of the opening burst for more than 1 % of them: the arrivals planned were not sent), so this run measures the generator, not the shop; rerun with fewer buyers, a release build or a quieter machine";

/// Where a limit was set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Default,
    /// A bundled scenario's `[thresholds]` (its text is one of `scenarios/*.toml`).
    Bundled,
    /// The user's own scenario file.
    Scenario,
    Flag,
}

impl Origin {
    /// How the verdict table names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Default => "default",
            Origin::Bundled => "bundled scenario",
            Origin::Scenario => "scenario",
            Origin::Flag => "--threshold",
        }
    }

    /// The same in a word, where the verdict table would not fit [`TERMINAL_WIDTH`] otherwise.
    pub fn short(self) -> &'static str {
        match self {
            Origin::Bundled => "bundled",
            Origin::Flag => "flag",
            o => o.as_str(),
        }
    }

    /// Whether the user wrote this limit: one the run cannot measure then fails as not
    /// verified (unless allowed), instead of being listed as not required.
    pub fn user_written(self) -> bool {
        matches!(self, Origin::Scenario | Origin::Flag)
    }
}

/// One limit in force.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    pub metric: Metric,
    pub value: f64,
    pub origin: Origin,
    /// A limit on a watched gauge: its name (`metric` is then [`Metric::WatchMax`] or
    /// [`Metric::WatchDrainedWithinS`]); `None` for a catalog metric.
    pub gauge: Option<String>,
}

impl Limit {
    /// The threshold's name: the catalog's, or `watch.<name>.max`.
    pub fn name(&self) -> String {
        match (&self.gauge, self.metric) {
            (Some(g), Metric::WatchDrainedWithinS) => format!("watch.{g}.drained_within_s"),
            (Some(g), _) => format!("watch.{g}.max"),
            (None, m) => m.name().to_string(),
        }
    }
}

/// The limits in force: flags over the scenario over the defaults. `max_unclassified`: the
/// bound the scenario's `[target]` table sets, if any (the `unclassified` limit); `bundled`:
/// the scenario is one of the bundled files (its limits are [`Origin::Bundled`]).
pub fn limits(
    scenario: &Thresholds,
    max_unclassified: Option<f64>,
    flags: &[Override],
    bundled: bool,
) -> Vec<Limit> {
    let from_scenario = if bundled {
        Origin::Bundled
    } else {
        Origin::Scenario
    };
    let catalog = flags
        .iter()
        .filter(|o| o.watch.is_none())
        .cloned()
        .collect::<Vec<_>>();
    let mut out = catalog_limits(scenario, max_unclassified, &catalog, from_scenario);
    out.extend(watch::limits(scenario, flags, from_scenario));
    out
}

/// The catalog metrics' limits in force.
fn catalog_limits(
    scenario: &Thresholds,
    max_unclassified: Option<f64>,
    flags: &[Override],
    from_scenario: Origin,
) -> Vec<Limit> {
    Metric::ALL
        .iter()
        .copied()
        .filter_map(|m| {
            let flag = flags.iter().rev().find(|o| o.metric == m);
            let set = scenario
                .get(m)
                .or(max_unclassified.filter(|_| m == Metric::Unclassified));
            let (value, origin) = match (flag, set, m.default_limit()) {
                (Some(f), _, _) => (f.value, Origin::Flag),
                (None, Some(v), _) => (v, from_scenario),
                (None, None, Some(v)) => (v, Origin::Default),
                (None, None, None) => return None,
            };
            Some(Limit {
                metric: m,
                value,
                origin,
                gauge: None,
            })
        })
        .collect()
}

/// How a check ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Passed,
    Breached,
    /// The run could not measure it, and the user asked for it; the reason.
    NotVerified(String),
    /// The run's oracle could not measure it, and only the defaults or a bundled scenario
    /// asked for it: listed, never failing the run; the reason.
    NotRequired(String),
}

/// Where `duplicate_buyers`/`duplicate_devices` come from when the oracle has no order rows.
pub const CLIENTS_FALLBACK: &str =
    "clients' records (no order rows): distinct orders held at once, per owner";

/// How the verdict writes a check that was not required.
pub const NOT_REQUIRED: &str = "not verified (not required: the oracle cannot measure it)";

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
    /// A breach's counterexample, when the oracle found one ([`crate::oracle::proof`]).
    pub proof: Option<crate::oracle::Proof>,
}

impl Check {
    /// `oversell <= 0`, `capacity_rps >= 500` (higher is better there, and for `throughput`).
    pub fn title(&self) -> String {
        format!(
            "{} {} {}",
            self.limit.name(),
            self.limit.metric.bound(),
            self.limit.metric.format(self.limit.value)
        )
    }

    /// Why a breach is not the shop's fault: `send_lag_p99_ms` or `late_sends` breached means
    /// the run is generator-bound.
    pub fn breach_reason(&self) -> Option<&'static str> {
        (self.status == Status::Breached
            && matches!(self.limit.metric, Metric::SendLagP99Ms | Metric::LateSends))
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
                let (measured, source, status) = check(run, l);
                let proof = (status == Status::Breached)
                    .then(|| crate::oracle::proof::of(&run.findings.proofs, &l.name()))
                    .flatten()
                    .cloned();
                checks.push(Check {
                    run: run.label(mb),
                    limit: l.clone(),
                    measured,
                    source,
                    status,
                    proof,
                });
            }
        }
        Verdict {
            scenario: report.scenario.name.clone(),
            checks,
            allow_unverified,
        }
    }

    /// Checks not measured and not required (listed, passing).
    pub fn not_required(&self) -> usize {
        self.checks
            .iter()
            .filter(|c| matches!(c.status, Status::NotRequired(_)))
            .count()
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

    /// [`Exit::Success`] passed, [`Exit::Failed`] failed.
    pub fn exit_code(&self) -> Exit {
        Exit::judged(self.passed())
    }

    fn result_word(&self, c: &Check) -> &'static str {
        match &c.status {
            Status::Passed => "pass",
            Status::Breached if c.breach_reason().is_some() => "FAIL (generator-bound)",
            Status::Breached => "FAIL",
            Status::NotVerified(_) if self.allow_unverified => "not verified (allowed)",
            Status::NotVerified(_) => "FAIL (not verified)",
            Status::NotRequired(_) => NOT_REQUIRED,
        }
    }

    fn headline(&self) -> String {
        format!(
            "oversell gate: {} — scenario {}: {} checks, {} breached, {} not verified, {} not required{}",
            if self.passed() { "PASS" } else { "FAIL" },
            self.scenario,
            self.checks.len(),
            self.breached(),
            self.unverified(),
            self.not_required(),
            if self.unverified() > 0 && self.allow_unverified {
                " (allowed by --allow-unverified)"
            } else {
                ""
            }
        )
    }

    /// The terminal verdict in its full width: [`Verdict::render_for`]'s wide form.
    pub fn render(&self) -> String {
        self.render_for(true)
    }

    /// The terminal verdict: by default in [`TERMINAL_WIDTH`] columns (the checks grouped under
    /// each run, a not-required check's reason in the notes, every line wrapped); `wide`, one
    /// row per check with its run and the full result, lines as they are.
    pub fn render_for(&self, wide: bool) -> String {
        let fit = |l: &str| crate::report::table::fit(l, wide);
        let mut s = String::new();
        let _ = writeln!(s, "{}", fit(&self.headline()));
        if wide {
            s.push_str(&self.table_wide());
        } else {
            s.push_str(&self.table_narrow());
        }
        for note in self.notes() {
            let _ = writeln!(s, "{}", fit(&note));
        }
        s
    }

    /// One row per check: run, threshold, limit (with its origin), measured, result.
    fn table_wide(&self) -> String {
        let rows: Vec<Vec<String>> = self
            .checks
            .iter()
            .map(|c| {
                vec![
                    c.run.clone(),
                    c.limit.name(),
                    limit_text(c, Origin::as_str),
                    c.measured_text(),
                    self.result_word(c).to_string(),
                ]
            })
            .collect();
        let header = ["run", "threshold", "limit", "measured", "result"].map(String::from);
        text(&header, &rows, &[Align::Left; 5])
    }

    /// The checks under a line naming their run, the columns aligned across runs; the origin
    /// shortened only if the full one does not fit.
    fn table_narrow(&self) -> String {
        let header = ["threshold", "limit", "measured", "result"].map(String::from);
        let render = |origin: fn(Origin) -> &'static str| {
            let rows: Vec<Vec<String>> = self
                .checks
                .iter()
                .map(|c| {
                    vec![
                        c.limit.name(),
                        limit_text(c, origin),
                        c.measured_text(),
                        match c.status {
                            Status::NotRequired(_) => "not required".to_string(),
                            _ => self.result_word(c).to_string(),
                        },
                    ]
                })
                .collect();
            let table = text(&header, &rows, &[Align::Left; 4]);
            let mut lines = table.lines();
            let mut s = String::new();
            for l in lines.by_ref().take(2) {
                let _ = writeln!(s, "  {l}");
            }
            let mut run: Option<&str> = None;
            for (c, l) in self.checks.iter().zip(lines) {
                if run != Some(c.run.as_str()) {
                    let _ = writeln!(s, "{}", c.run);
                    run = Some(&c.run);
                }
                let _ = writeln!(s, "  {l}");
            }
            s
        };
        let full = render(Origin::as_str);
        if width(&full) <= TERMINAL_WIDTH {
            full
        } else {
            render(Origin::short)
        }
    }

    /// What the table leaves to a line of its own: why a breach is the generator's, where a
    /// figure came from when not from the oracle, why a check was not verified or required.
    fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for c in &self.checks {
            let name = c.limit.name();
            if let Some(why) = c.breach_reason() {
                notes.push(format!("  {} {name}: {why}", c.run));
            }
            if let Some(p) = &c.proof {
                let proof = crate::oracle::proof::line(p).replace('\n', "\n    ");
                notes.push(format!("  {} {name}: {proof}", c.run));
            }
            if c.source == watch::NOT_DRAINED {
                notes.push(format!("  {} {name}: {}", c.run, watch::NOT_DRAINED));
            }
            if c.source == CLIENTS_FALLBACK {
                notes.push(format!(
                    "  {} {name}: measured by the {CLIENTS_FALLBACK}",
                    c.run
                ));
            }
            match &c.status {
                Status::NotVerified(why) => {
                    notes.push(format!("  {} {name}: not verified: {why}", c.run));
                }
                Status::NotRequired(why) => notes.push(format!(
                    "  {} {name}: not required ({} limit): {why}",
                    c.run,
                    c.limit.origin.as_str()
                )),
                _ => {}
            }
        }
        notes
    }

    /// Markdown for `$GITHUB_STEP_SUMMARY`: the verdict table, then the report's headline.
    pub fn markdown(&self, report: &Report, report_dir: &std::path::Path) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## {}\n", self.headline());
        let _ = writeln!(s, "| run | threshold | limit | measured | result |");
        let _ = writeln!(s, "|---|---|---:|---:|---|");
        for c in &self.checks {
            let result = match &c.status {
                Status::NotVerified(why) | Status::NotRequired(why) => {
                    format!("{} — {why}", self.result_word(c))
                }
                _ => match c.breach_reason() {
                    Some(why) => format!("{} — {why}", self.result_word(c)),
                    None if c.source == CLIENTS_FALLBACK => {
                        format!(
                            "{} — measured by the {CLIENTS_FALLBACK}",
                            self.result_word(c)
                        )
                    }
                    None => self.result_word(c).to_string(),
                },
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                md_cell(&c.run),
                c.limit.name(),
                md_cell(&c.limit.metric.format(c.limit.value)),
                md_cell(&c.measured_text()),
                md_cell(&result)
            );
        }
        let proofs: Vec<&Check> = self.checks.iter().filter(|c| c.proof.is_some()).collect();
        if !proofs.is_empty() {
            let _ = writeln!(s, "\n### Proofs\n");
        }
        let mut shown: Vec<(&str, &str)> = Vec::new();
        for c in proofs {
            if let Some(p) = &c.proof {
                if shown.contains(&(c.run.as_str(), p.claim.as_str())) {
                    continue;
                }
                shown.push((&c.run, &p.claim));
                let _ = writeln!(s, "{} — `{}`\n", md_cell(&c.run), c.limit.name());
                s.push_str(&crate::report::proofs::markdown(p));
            }
        }
        let _ = writeln!(s, "\n{}", crate::report::markdown::headline(report));
        let _ = writeln!(s, "Report: `{}`\n", report_dir.join("report.md").display());
        s
    }
}

/// A check's limit as the verdict table shows it: `<= 0 (default)`, the origin named by `origin`.
fn limit_text(c: &Check, origin: fn(Origin) -> &'static str) -> String {
    format!(
        "{} {} ({})",
        c.limit.metric.bound(),
        c.limit.metric.format(c.limit.value),
        origin(c.limit.origin)
    )
}

/// One limit checked against one run: the measured value, its source and the status.
fn check(run: &RunReport, l: &Limit) -> (Option<f64>, &'static str, Status) {
    if let Some(gauge) = &l.gauge {
        return watch::check(run, l, gauge);
    }
    let f = &run.findings;
    let judged = |v: f64, source: &'static str| {
        let status = if l.metric.within(v, l.value) {
            Status::Passed
        } else {
            Status::Breached
        };
        (Some(v), source, status)
    };
    let why = match l.metric.read(run) {
        Ok(v) => {
            // A latency limit that holds once each request's send lag is taken out was
            // breached by the generator's lateness, not by the shop: not verified.
            let held_on_time = l
                .metric
                .read_without_send_lag(run)
                .filter(|w| !l.metric.within(v, l.value) && l.metric.within(*w, l.value));
            // A figure that passes only under something nobody declared is not verified.
            if let Some(why) = f
                .unsettled
                .get(l.metric.name())
                .filter(|_| l.metric.within(v, l.value))
            {
                return (Some(v), l.metric.source(), Status::NotVerified(why.clone()));
            }
            if let Some(w) = held_on_time {
                return (
                    Some(v),
                    l.metric.source(),
                    Status::NotVerified(format!(
                        "generator-bound: {} with each request's send lag, {} without it: the \
                         breach is the generator's lateness, not the shop's (rerun on a quieter \
                         machine, or with fewer buyers)",
                        l.metric.format(v),
                        l.metric.format(w)
                    )),
                );
            }
            return judged(v, l.metric.source());
        }
        Err(why) => why,
    };
    // Not verified never passes a run whose own clients were told of more units than it had:
    // that evidence measures oversell from below.
    if let Some(c) = f
        .client_oversell
        .filter(|c| *c > 0 && l.metric == Metric::Oversell)
    {
        return (
            Some(c as f64),
            "clients' acknowledgements, no server-side oracle (a lower bound)",
            Status::Breached,
        );
    }
    // No order rows: the clients' records count duplicate buyers (and devices) instead.
    let fallback = match l.metric {
        Metric::DuplicateBuyers => f.client_duplicate_buyers,
        Metric::DuplicateDevices => f.client_duplicate_devices,
        _ => None,
    };
    if let Some(v) = fallback {
        return judged(v as f64, CLIENTS_FALLBACK);
    }
    if !l.origin.user_written() && f.verified {
        (None, "", Status::NotRequired(why))
    } else {
        (None, "", Status::NotVerified(why))
    }
}

#[cfg(test)]
mod tests;
