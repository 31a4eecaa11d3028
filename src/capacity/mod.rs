//! `oversell capacity`: for each strategy (or a foreign target), the highest arrival rate at
//! which the scenario's objective still holds, keeping the scenario's shape.
//!
//! - [`scale`]: the scenario at another rate: the same shape (browsing, bots, pay/cancel mix,
//!   burst share, buyers per unit of stock) squeezed into a probe of `--probe` (10s by default).
//! - `search`: doubling, then bisection within the precision ([`search::Search`], pure).
//! - `slo`: the objective, judged from each probe's own report ([`slo::Objective`]).
//! - `report`: `report.json` (`oversell.capacity/v1`), `report.md`, `report.html`, the
//!   terminal table; `charts`: p99, error rate and sold-out time against the offered rate.
//! - `gate`: `gate --threshold capacity_rps=R`: one run at R, held to the rest of the objective.
//!
//! Every probe is a real run (`runner::execute`) on a fresh sale: the reference shop started
//! for it, or the target set up again by its mapping's set-up requests. Its whole report is
//! kept under `probes/`.

pub mod charts;
pub mod gate;
pub mod report;
pub mod search;
pub mod slo;

use crate::inventory::Strategy;
use crate::rehearsal::PlanSummary;
use crate::runner::{self, RunPlan, Subject};
use crate::traffic::{schedule, Scenario};
use search::{Answer, Judged, Search, Settings};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The time a probe needs beyond its sale, budgeted before the first one has been measured:
/// the shop's start, the sale's set-up, the drain and the report.
pub const PROBE_OVERHEAD: Duration = Duration::from_secs(5);

/// What the rates count: buyers arriving per second, averaged over the probe's window.
pub const RATE_UNIT: &str = "buyers/s (arrivals averaged over the probe's window)";

/// The scenario `s` at `rate` buyers per second over `seconds`: its buyers, stock and second
/// wave scaled by the same factor, its burst and wave times by the window's. Every other
/// field (browsing, bots, the after-order mix, the client, `[shop]`) is kept.
pub fn scale(s: &Scenario, rate: f64, seconds: f64) -> Scenario {
    let mut p = s.clone();
    let buyers = ((rate * seconds).round() as u32).max(1);
    let factor = buyers as f64 / s.buyers.count.max(1) as f64;
    let time = seconds / s.buyers.window_s;
    p.buyers.count = buyers;
    p.buyers.window_s = seconds;
    p.buyers.burst_s = (s.buyers.burst_s * time).clamp(0.001, seconds);
    p.item.stock = ((s.item.stock as f64 * factor).round() as i64).max(1);
    if let Some(w) = &mut p.second_wave {
        w.count = ((w.count as f64 * factor).round() as u32).max(1);
        w.at_s *= time;
        w.window_s = (w.window_s * time).max(0.001);
    }
    p
}

/// The scenario's own arrival rate (buyers/s over its window).
pub fn own_rate(s: &Scenario) -> f64 {
    s.buyers.count as f64 / s.buyers.window_s
}

/// Everything `capacity` needs, decided before any probe.
#[derive(Debug, Clone)]
pub struct CapacityPlan {
    pub scenario: Scenario,
    pub scenario_file: PathBuf,
    /// The subjects of the search, one shop each: a reference strategy on a backend (its shop
    /// started for every probe), or the foreign target (its sale set up again by its mapping
    /// before every probe).
    pub who: Vec<Subject>,
    pub objective: slo::Objective,
    pub settings: Settings,
    pub probe_seconds: f64,
    /// For the whole command, shared out among the subjects still to search.
    pub budget: Duration,
    /// The report goes to `<out>/<UTC timestamp>-<scenario>-capacity/`.
    pub out: PathBuf,
    pub drain_limit: Duration,
    /// Progress lines on stderr (the current bracket).
    pub progress: bool,
}

impl CapacityPlan {
    /// Refuses a budget that cannot hold one probe per subject (exit 2).
    pub fn check_budget(&self) -> anyhow::Result<()> {
        let one = Duration::from_secs_f64(self.probe_seconds) + PROBE_OVERHEAD;
        let need = one * self.who.len() as u32;
        anyhow::ensure!(
            self.budget >= need,
            "--budget {} is too small for one probe of each of the {} subject(s): a probe takes \
             --probe {} plus about {} s to start, set up and drain; allowed: at least {}s",
            crate::duration::shown(self.budget),
            self.who.len(),
            crate::duration::shown(Duration::from_secs_f64(self.probe_seconds)),
            PROBE_OVERHEAD.as_secs(),
            need.as_secs()
        );
        Ok(())
    }

    /// The probe at `rate`: the scaled scenario as a run plan writing into `out`.
    fn probe_plan(&self, who: &Subject, rate: f64, out: PathBuf) -> RunPlan {
        let mut s = scale(&self.scenario, rate, self.probe_seconds);
        s.name = probe_name(&self.scenario.name, who, rate);
        RunPlan {
            buyers: schedule::build(&s),
            scenario: s,
            scenario_file: self.scenario_file.clone(),
            subject: who.clone(),
            columns: Default::default(),
            out,
            drain_limit: self.drain_limit,
            progress: false,
            live: None,
            repeat: 1,
        }
    }

    /// The `--dry-run` printout: per subject the rates the doubling would try, each probe's
    /// buyers, stock and requests, and the worst case the budget allows.
    pub fn render_dry_run(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let per = self.budget.as_secs_f64() / self.who.len().max(1) as f64;
        let probe = self.probe_seconds + PROBE_OVERHEAD.as_secs_f64();
        let fits = ((per / probe).floor() as usize).max(1);
        let _ = writeln!(
            out,
            "capacity plan: scenario {} ({}), objective: {}",
            self.scenario.name,
            self.scenario_file.display(),
            self.objective.describe()
        );
        let _ = writeln!(
            out,
            "subjects: {}; budget {} (about {fits} probe(s) of {} + {} s each per subject); precision {:.0} %",
            self.who.iter().map(|w| w.label(0)).collect::<Vec<_>>().join(", "),
            crate::duration::shown(self.budget),
            crate::duration::shown(Duration::from_secs_f64(self.probe_seconds)),
            PROBE_OVERHEAD.as_secs(),
            self.settings.precision * 100.0
        );
        let _ = writeln!(out, "rates are {RATE_UNIT}");
        let _ = writeln!(
            out,
            "{:>10} {:>8} {:>7} {:>10} {:>10}",
            "rate", "buyers", "stock", "peak/s", "requests"
        );
        let mut rate = self.settings.start.min(self.settings.max_rate);
        let mut worst = 0u64;
        let mut last = rate;
        for i in 0..fits {
            last = rate;
            let s = scale(&self.scenario, rate, self.probe_seconds);
            let plan = schedule::build(&s);
            let sum = PlanSummary::of(&s, &plan);
            let requests = sum.planned_requests + sum.follow_ups_at_most;
            let _ = writeln!(
                out,
                "{:>10} {:>8} {:>7} {:>10} {:>10}",
                search::rate(rate),
                sum.buyers,
                s.item.stock,
                sum.peak_arrivals(),
                requests
            );
            if i + 1 == fits {
                // No probe of the search goes above the last doubling the budget reaches.
                worst = requests * fits as u64;
            }
            if rate >= self.settings.max_rate {
                worst = requests * fits as u64;
                break;
            }
            rate = (rate * 2.0).min(self.settings.max_rate);
        }
        let _ = writeln!(
            out,
            "worst case: at most {worst} requests per subject, {} in all ({} probe(s) per \
             subject at most, none above {} buyers/s, the last rate listed); nothing sent \
             (--dry-run)",
            worst * self.who.len() as u64,
            fits,
            search::rate(last),
        );
        out
    }

    /// The requests of one probe at `--max-rate`, the largest any probe sends.
    pub fn worst_probe_requests(&self) -> u64 {
        let s = scale(&self.scenario, self.settings.max_rate, self.probe_seconds);
        let sum = PlanSummary::of(&s, &schedule::build(&s));
        sum.planned_requests + sum.follow_ups_at_most
    }
}

/// The probe's scenario name (and folder): `flash-100-for-update-80.0rps`.
fn probe_name(scenario: &str, who: &Subject, rate: f64) -> String {
    let who = who.short_name(0);
    format!("{scenario}-{who}-{}rps", search::rate(rate))
}

/// One probe as the report keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Probe {
    /// The offered rate (see [`RATE_UNIT`]).
    pub rate_rps: f64,
    pub buyers: u32,
    pub stock: i64,
    pub seconds: f64,
    /// How the search read it.
    #[serde(flatten)]
    pub judged: Judged,
    /// Every limit of the objective, measured on this probe.
    pub figures: Vec<slo::Figure>,
    /// Order latency p99 (ms, oversell HdrHistogram from the intended send).
    pub p99_ms: Option<f64>,
    /// Order error rate (clients' records of first order attempts).
    pub error_rate: Option<f64>,
    /// From the opening to the first sold-out answer (clients' records).
    pub sold_out_s: Option<f64>,
    /// Orders answered per second (clients' records).
    pub throughput: Option<f64>,
    /// Send lag p99 (ms, HdrHistogram of send lag).
    pub send_lag_p99_ms: Option<f64>,
    /// The probe's report folder, inside the capacity report's.
    pub report: String,
    /// Wall seconds the probe took, shop start to report.
    pub wall_s: f64,
}

/// One subject's search.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub subject: String,
    /// The reference strategy, when the subject is one.
    pub strategy: Option<Strategy>,
    pub answer: Answer,
    /// The highest rate at which the objective held (absent: correctness broke, or none held).
    pub capacity_rps: Option<f64>,
    /// `[held, broke]`: the bracket the search narrowed it to.
    pub bracket: [Option<f64>; 2],
    /// What broke first at the bracket's upper end.
    pub broke_first: Option<String>,
    /// The rate where correctness broke (oversell, lost acknowledged orders), first in reports.
    pub correctness_broke_at_rps: Option<f64>,
    pub probes_used: usize,
    pub probes: Vec<Probe>,
}

impl Outcome {
    fn new(who: &Subject, search: &Search, probes: Vec<Probe>, budget_ran_out: bool) -> Self {
        let answer = search.answer(budget_ran_out);
        let (lo, hi) = answer.bracket();
        let broke_first = hi.and_then(|hi| {
            probes
                .iter()
                .find(|p| p.rate_rps == hi)
                .and_then(|p| match &p.judged {
                    Judged::Broke { metric } | Judged::Incorrect { metric } => Some(metric.clone()),
                    // The reason in full is the answer's.
                    Judged::GeneratorLimit { .. } => Some("the generator's limit".into()),
                    Judged::Held => None,
                })
        });
        Outcome {
            subject: who.label(0),
            strategy: who.strategy(0),
            capacity_rps: answer.capacity(),
            correctness_broke_at_rps: match &answer {
                Answer::Incorrect { at, .. } => Some(*at),
                _ => None,
            },
            bracket: [lo, hi],
            broke_first,
            probes_used: probes.len(),
            answer,
            probes,
        }
    }
}

/// Runs every subject's search, writing the report as each finishes; returns it and its
/// folder.
pub async fn execute(plan: &CapacityPlan) -> anyhow::Result<(report::CapacityReport, PathBuf)> {
    let started = Instant::now();
    let dir = crate::report::new_dir(&plan.out, &format!("{}-capacity", plan.scenario.name));
    let probes_dir = dir.join("probes");
    std::fs::create_dir_all(&probes_dir)?;
    let mut report = report::CapacityReport::new(plan);
    let n = plan.who.len();
    for (i, who) in plan.who.iter().enumerate() {
        let left = plan.budget.saturating_sub(started.elapsed());
        let deadline = Instant::now() + left / (n - i) as u32;
        let mut search = Search::new(plan.settings);
        let mut probes: Vec<Probe> = Vec::new();
        let mut budget_ran_out = false;
        let mut estimate = Duration::from_secs_f64(plan.probe_seconds) + PROBE_OVERHEAD;
        while let Some(rate) = search.next() {
            if Instant::now() + estimate > deadline {
                budget_ran_out = true;
                break;
            }
            if plan.progress {
                let (lo, hi) = search.answer(false).bracket();
                crate::telemetry::stderr_line(&format!(
                    "== capacity {} ({}/{n}): probe {} at {}/s, bracket [{}, {}]",
                    who.label(0),
                    i + 1,
                    probes.len() + 1,
                    search::rate(rate),
                    lo.map_or("-".into(), search::rate),
                    hi.map_or("-".into(), search::rate),
                ));
            }
            let t0 = Instant::now();
            let run_plan = plan.probe_plan(who, rate, probes_dir.clone());
            let (probe_report, probe_dir) = runner::execute(&run_plan).await?;
            let (judged, figures) = plan.objective.judge(&probe_report);
            let wall = t0.elapsed();
            estimate = estimate.max(wall);
            if plan.progress {
                crate::telemetry::stderr_line(&format!(
                    "   {}/s: {}",
                    search::rate(rate),
                    judged_line(&judged)
                ));
            }
            search.record(rate, &judged);
            probes.push(probe_record(
                &run_plan,
                rate,
                judged,
                figures,
                &probe_report,
                probe_dir.strip_prefix(&dir).unwrap_or(&probe_dir),
                wall,
            ));
        }
        let outcome = Outcome::new(who, &search, probes, budget_ran_out);
        if plan.progress {
            crate::telemetry::stderr_line(&format!(
                "== {}: {}",
                outcome.subject,
                outcome.answer.describe()
            ));
        }
        report.outcomes.push(outcome);
        report.elapsed_s = started.elapsed().as_secs_f64();
        report::write_data(&dir, &report)?;
    }
    write(&dir, &report)?;
    Ok((report, dir))
}

/// One line for a judged probe.
pub fn judged_line(j: &Judged) -> String {
    match j {
        Judged::Held => "held".into(),
        Judged::Broke { metric } => format!("broke: {metric}"),
        Judged::GeneratorLimit { why } => format!("generator limit (not the shop's): {why}"),
        Judged::Incorrect { metric } => format!("CORRECTNESS BROKE: {metric}"),
    }
}

fn probe_record(
    plan: &RunPlan,
    rate: f64,
    judged: Judged,
    figures: Vec<slo::Figure>,
    report: &crate::report::Report,
    dir: &std::path::Path,
    wall: Duration,
) -> Probe {
    use crate::metric::Metric;
    let run = report.runs.first();
    let read = |m: Metric| run.and_then(|r| m.read(r).ok());
    Probe {
        rate_rps: rate,
        buyers: plan.scenario.total_buyers(),
        stock: plan.scenario.item.stock,
        seconds: plan.scenario.buyers.window_s,
        judged,
        figures,
        p99_ms: read(Metric::P99Ms),
        error_rate: read(Metric::ErrorRate),
        sold_out_s: run.and_then(|r| r.time_to_sell_out_s),
        throughput: read(Metric::Throughput),
        send_lag_p99_ms: read(Metric::SendLagP99Ms),
        report: dir.display().to_string(),
        wall_s: wall.as_secs_f64(),
    }
}

/// Writes everything: the data files, the charts and `report.html`.
fn write(dir: &std::path::Path, r: &report::CapacityReport) -> anyhow::Result<()> {
    report::write_data(dir, r)?;
    let charts = anyhow::Context::context(charts::capacity(dir, r), "drawing the capacity charts")?;
    let html = report::html(
        &format!("Capacity: {}", r.scenario),
        &report::markdown_table_html(r),
        &charts,
    );
    anyhow::Context::context(
        std::fs::write(dir.join("report.html"), html),
        "writing report.html",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_keeps_the_shape_and_the_buyers_per_unit() {
        let s = crate::scenarios::resolve(std::path::Path::new("flash-100"))
            .unwrap()
            .0;
        let p = scale(&s, 100.0, 10.0);
        assert_eq!(p.buyers.count, 1000);
        assert_eq!(p.buyers.window_s, 10.0);
        assert!((p.buyers.burst_s - 2.0 / 6.0).abs() < 1e-9);
        assert_eq!(p.buyers.burst_share, s.buyers.burst_share);
        assert_eq!(p.item.stock, 33, "3000 buyers for 100 units: 1000 for 33");
        assert_eq!(p.bots.share, s.bots.share);
        assert_eq!(p.shop, s.shop);
        assert!((own_rate(&p) - 100.0).abs() < 1e-9);
    }
}
