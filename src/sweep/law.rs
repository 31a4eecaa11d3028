//! The rushes behind the post-mortem's law ([`crate::report::law`]): a strategy fired at five
//! arrival rates, three rounds of them (the line goes through each rate's median), up to the scenario's own peak rate, each rush on the scenario's stock and
//! shop knobs (its business logic between check and write) with buyers who only order: no
//! browsing, no bots, no cancels (so nothing re-sells what the race oversold), arriving at
//! random at the one rate: the stock's worth of buyers plus a second of arrivals (three per
//! unit at least), so that no rush runs out of buyers before its race does. Each rush is an
//! ordinary run whose report goes under `<out>/`.

use crate::report::law::{Law, LawPoint};
use crate::runner::{self, Cell, RunPlan, Subject};
use crate::traffic::scenario::Arrival;
use crate::traffic::{schedule, Scenario};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How many arrival rates: the post-mortem's law wants a line, a line wants points.
pub const RUSHES: usize = 5;
/// Rushes at each rate, in rounds (every rate once, then again): the line goes through each
/// rate's median, so one rush the machine stalled does not bend it.
pub const ROUNDS: usize = 3;
/// Buyers per unit of stock in each rush, at least.
const BUYERS_PER_UNIT: u32 = 3;

/// The scenario's highest arrival rate (buyers/s): its burst, ramp's end, trace's busiest
/// interval, or uniform's only rate.
pub fn peak_rate(s: &Scenario) -> f64 {
    let b = &s.buyers;
    let count = f64::from(b.count);
    match b.arrival {
        Arrival::Burst => (count * b.burst_share / b.burst_s.max(1e-3))
            .max(count * (1.0 - b.burst_share) / (b.window_s - b.burst_s).max(1e-3)),
        Arrival::Uniform => count / b.window_s.max(1e-3),
        Arrival::Ramp => 2.0 * count / b.window_s.max(1e-3),
        Arrival::Trace => {
            let busiest = b.trace.iter().copied().max().unwrap_or(0) as f64;
            let total: f64 = b.trace.iter().map(|c| *c as f64).sum::<f64>().max(1.0);
            let per = b.window_s.max(1e-3) / b.trace.len().max(1) as f64;
            busiest / total * count / per
        }
    }
}

/// The rates of the rushes: equal steps up to the scenario's peak rate, whole buyers/s.
pub fn rates(s: &Scenario) -> Vec<f64> {
    let peak = peak_rate(s).max(RUSHES as f64);
    (1..=RUSHES)
        .map(|k| (peak * k as f64 / RUSHES as f64).round())
        .collect()
}

/// `s` as one rush at `rate` buyers/s.
pub fn rush(s: &Scenario, rate: f64) -> Scenario {
    let mut p = s.clone();
    p.name = format!("{}-rush-{rate:.0}", s.name);
    let stock = u32::try_from(s.item.stock.max(1)).unwrap_or(u32::MAX);
    let buyers = stock
        .saturating_add(rate.ceil() as u32)
        .max(stock.saturating_mul(BUYERS_PER_UNIT));
    p.buyers.count = buyers.max(10);
    p.buyers.arrival = Arrival::Uniform;
    p.buyers.window_s = f64::from(p.buyers.count) / rate.max(1.0);
    p.buyers.trace = Vec::new();
    p.browse.view_share = 0.0;
    p.bots.share = 0.0;
    p.after_order.pay = 0.0;
    p.after_order.cancel = 0.0;
    p.after_order.abandon = 1.0;
    p.adversarial = Default::default();
    p.second_wave = None;
    p.faults = Vec::new();
    p.watch = Default::default();
    p
}

/// What the rushes describe, for the report.
fn described(s: &Scenario) -> String {
    format!(
        "the stock's worth of buyers plus a second of arrivals (at least {BUYERS_PER_UNIT} per \
         unit), at random at one arrival rate, each ordering once and walking away (no \
         browsing, bots or cancels), on {} units with the scenario's shop knobs",
        s.item.stock
    )
}

/// Everything the rushes need.
pub struct LawPlan<'a> {
    pub scenario: &'a Scenario,
    pub scenario_file: &'a Path,
    pub cell: Cell,
    pub redis_url: String,
    /// The rushes' reports go to `<out>/`.
    pub out: PathBuf,
    /// The folder `report` paths are written relative to.
    pub relative_to: &'a Path,
    pub drain_limit: Duration,
    pub progress: bool,
}

/// Runs the rushes one after another and fits the line.
pub async fn run(plan: &LawPlan<'_>) -> anyhow::Result<Law> {
    let rates = rates(plan.scenario);
    let rushes: Vec<f64> = (0..ROUNDS).flat_map(|_| rates.iter().copied()).collect();
    let mut points = Vec::new();
    for (i, rate) in rushes.iter().enumerate() {
        if plan.progress {
            crate::telemetry::stderr_line(&format!(
                "== the law: rush {}/{} of {} at {rate:.0} buyers/s",
                i + 1,
                rushes.len(),
                plan.cell.strategy
            ));
        }
        let s = rush(plan.scenario, *rate);
        let run_plan = RunPlan::new(
            s.clone(),
            plan.scenario_file.to_path_buf(),
            Subject::reference(vec![plan.cell.clone()], plan.redis_url.clone())?,
            plan.out.clone(),
        )
        .with_buyers(schedule::build(&s))
        .with_drain_limit(plan.drain_limit)
        .with_progress(false);
        let (report, dir) = runner::execute(&run_plan).await?;
        let Some(run) = report.runs.first() else {
            continue;
        };
        let f = &run.findings;
        if plan.progress {
            crate::telemetry::stderr_line(&format!("   {}", f.verdict));
        }
        points.push(LawPoint {
            rate: *rate,
            oversell: f.oversell,
            oversold_at_end: f.oversold_at_end,
            in_flight: run
                .order_latency()
                .filter(|l| l.count > 0)
                .map(|l| rate * l.mean_ms / 1000.0),
            generator_bound: run.generator_bound,
            report: dir
                .strip_prefix(plan.relative_to)
                .unwrap_or(&dir)
                .display()
                .to_string(),
        });
    }
    let law = Law {
        strategy: plan.cell.strategy,
        backend: plan.cell.backend.as_str().to_string(),
        stock: plan.scenario.item.stock,
        gap_ms: plan.scenario.shop.naive_gap.as_secs_f64() * 1000.0,
        rush: described(plan.scenario),
        points,
        fit: None,
    };
    Ok(law.fitted())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rushes_climb_to_the_scenarios_peak_on_its_stock_with_buyers_who_only_order() {
        let s = crate::scenarios::resolve(Path::new("flash-100")).unwrap().0;
        // flash-100: 80 % of 3000 buyers in 2 s.
        assert_eq!(rates(&s), [240.0, 480.0, 720.0, 960.0, 1200.0]);
        let r = rush(&s, 600.0);
        assert_eq!(r.item.stock, s.item.stock);
        assert_eq!(
            r.buyers.count, 700,
            "the stock's worth and a second of arrivals"
        );
        assert!((r.buyers.window_s - 700.0 / 600.0).abs() < 1e-9);
        assert_eq!(rush(&s, 100.0).buyers.count, 300, "three per unit at least");
        assert_eq!((r.browse.view_share, r.bots.share), (0.0, 0.0));
        assert_eq!(r.after_order.abandon, 1.0);
        assert_eq!(r.shop.naive_gap, s.shop.naive_gap);
        r.validate().expect("a valid scenario");
    }
}
