//! The classes the rush's behaviour shows rather than the oracle's counts: the pool draining,
//! the retry storm, bots' share of the units, a cold start; and a `[watch]` reconcile
//! residual. Each is read from the rush (the scenario's own intensity: any shop breaks far
//! beyond it, which the capacity search measures instead), with the figures it rests on.

use super::battery::Kind;
use super::class::Class;
use super::row::{intensity, Figure, Row};
use super::run::Done;
use crate::report::RunReport;
use crate::traffic::recorder::Answer;
use crate::watch::Gauge;
use std::path::Path;

/// The share of first order attempts answered with an error (busy, 5xx, timeouts) above which
/// the rush is said to have failed its buyers.
pub const ERROR_RATE: f64 = 0.01;
/// The chance below which bots' share of the units is not luck (one-sided binomial).
pub const BOTS_P: f64 = 0.001;

/// Seconds waited for a connection per second above which the reference shop's pool is said
/// to have drained (one request waiting a whole second, in a second).
pub const POOL_WAIT_S: f64 = 1.0;

/// The gauge of the shop's connection pool and the peak that says it drained: the reference
/// shop's seconds waited for a connection ([`POOL_WAIT_S`]; its waiters count queue waits
/// too), or a `[watch]` gauge whose name says pool (any waiter).
fn pool_gauge(run: &RunReport) -> Option<(&str, &Gauge, f64)> {
    if let Some((n, g)) = run.watch.get_key_value("shop_pool_wait_s") {
        return Some((n.as_str(), g, POOL_WAIT_S));
    }
    run.watch
        .iter()
        .find(|(n, _)| n.contains("pool") && !n.starts_with("shop_pool_in_use"))
        .map(|(n, g)| (n.as_str(), g, f64::MIN_POSITIVE))
}

/// The gauge of the shop's conflict retries: the reference shop's own, or a `[watch]` gauge
/// whose name says retries or conflicts.
fn retry_gauge(run: &RunReport) -> Option<(&str, &Gauge)> {
    run.watch
        .get_key_value("shop_cas_retries")
        .or_else(|| {
            run.watch
                .iter()
                .find(|(n, _)| n.contains("retr") || n.contains("conflict"))
        })
        .map(|(n, g)| (n.as_str(), g))
}

/// The retries the gauge counted over the run: the sum of its per-second samples for the
/// reference shop's rate, the rise of a `[watch]` counter otherwise.
fn retries(name: &str, g: &Gauge) -> f64 {
    if name == "shop_cas_retries" {
        return g.series.iter().map(|p| p.1).sum();
    }
    let first = g.baseline.or_else(|| g.series.first().map(|p| p.1));
    match (first, g.peak) {
        (Some(a), Some(b)) => (b - a).max(0.0),
        _ => 0.0,
    }
}

/// The rush's run: its experiment and its one run.
fn rush(done: &[Done]) -> Option<(&Done, &RunReport)> {
    let d = done.iter().find(|d| d.kind == Kind::Rush)?;
    Some((d, d.report.runs.first()?))
}

fn p99(run: &RunReport) -> Option<f64> {
    run.order_latency().map(|l| l.p99_ms)
}

fn pct(v: f64) -> String {
    format!("{:.2} %", v * 100.0)
}

/// Whether the rush's shop stormed: it counted more conflict retries than orders it
/// acknowledged. `None`: nothing counts its retries.
fn storm(run: &RunReport, counts_retries: bool) -> Option<(f64, bool)> {
    match retry_gauge(run) {
        Some((n, g)) => {
            let r = retries(n, g);
            Some((r, r > 0.0 && r >= run.findings.acknowledged.max(1) as f64))
        }
        // A shop that counts its retries exports its counter once it first counts one.
        None if counts_retries => Some((0.0, false)),
        None => None,
    }
}

/// `retry_storm`: the shop's conflict retries at the rush outnumber the orders it took.
pub fn retry_storm(done: &[Done], dir: &Path, counts_retries: bool) -> Row {
    let c = Class::RetryStorm;
    let Some((d, run)) = rush(done) else {
        return Row::not_testable(c, "the rush did not run".into());
    };
    match storm(run, counts_retries) {
        None => Row::not_testable(
            c,
            "declare a [watch] gauge named retries (or conflicts) reading the shop's counter of \
             optimistic-update conflicts it retried, so the storm can be counted"
                .into(),
        ),
        Some((r, false)) => Row::not_found(
            c,
            format!(
                "tried {}; the shop counted {r:.0} conflict retries for {} acknowledged orders",
                intensity(d),
                run.findings.acknowledged
            ),
        ),
        Some((r, true)) => {
            let source = retry_gauge(run).map_or(String::new(), |(_, g)| g.source.clone());
            let mut row = Row::found(
                c,
                d,
                dir,
                format!(
                    "{r:.0} compare-and-swap retries for {} acknowledged orders at the rush: most \
                     attempts lost to another and went round again",
                    run.findings.acknowledged
                ),
            );
            row.figures.push(Figure::new(
                "conflict retries",
                r,
                format!("{r:.0}"),
                source,
            ));
            if let Some(p) = p99(run) {
                let fig = Figure::new(
                    "p99 under the retry storm",
                    p,
                    format!("{p:.1} ms"),
                    "the clients' order latency (HdrHistogram, from the intended send)",
                );
                row.figures.push(fig);
            }
            row.figures
                .push(error_figure("error rate under the retry storm", run));
            row
        }
    }
}

fn error_figure(name: &str, run: &RunReport) -> Figure {
    Figure::new(
        name,
        run.error_rate,
        pct(run.error_rate),
        "the clients' records: first order attempts answered busy, 5xx, or not at all",
    )
}

/// `pool_exhaustion`: at the rush the shop failed orders (busy, 5xx, timeouts) while its pool
/// had waiters, and no retry storm explains the errors.
pub fn pool_exhaustion(done: &[Done], dir: &Path, counts_retries: bool) -> Row {
    let c = Class::PoolExhaustion;
    let Some((d, run)) = rush(done) else {
        return Row::not_testable(c, "the rush did not run".into());
    };
    let pool = pool_gauge(run);
    let waited = pool.and_then(|(_, g, _)| g.peak).unwrap_or(0.0);
    let drained = pool.is_none_or(|(_, _, at)| waited >= at);
    let stormed = storm(run, counts_retries).is_some_and(|s| s.1);
    let errors = run.error_rate >= ERROR_RATE;
    let found = errors && !stormed && drained;
    if !found {
        let gauge = match pool {
            Some((n, _, _)) if errors && !drained => format!(
                "; {n} peaked at {waited:.1}: the failed requests waited elsewhere than for a \
                 connection (a queue, a lock)"
            ),
            Some((n, _, _)) => format!("; {n} peaked at {waited:.1}"),
            None => "; no pool gauge watched (declare [watch.pool] to see it)".into(),
        };
        let storm = if errors && stormed {
            " (the errors came with a retry storm: see retry_storm)"
        } else {
            ""
        };
        return Row::not_found(
            c,
            format!(
                "tried {}; order error rate {}{gauge}{storm}",
                intensity(d),
                pct(run.error_rate)
            ),
        );
    }
    let detail = match pool {
        Some((n, _, _)) => format!(
            "{} of the rush's first order attempts failed while the shop waited for database \
             connections ({n} peaked at {waited:.1})",
            pct(run.error_rate)
        ),
        None => format!(
            "{} of the rush's first order attempts failed (busy, 5xx, timeouts); no pool gauge \
             is watched, so the drained pool is inferred from the answers: declare \
             [watch.pool] to see it",
            pct(run.error_rate)
        ),
    };
    let mut row = Row::found(c, d, dir, detail);
    row.figures
        .push(error_figure("error rate when the pool drained", run));
    if let Some((n, g, _)) = pool {
        row.figures.push(Figure::new(
            n,
            waited,
            format!("{waited:.1}"),
            g.source.clone(),
        ));
    }
    if let Some(p) = p99(run) {
        row.figures.push(Figure::new(
            "order p99 at the rush",
            p,
            format!("{p:.1} ms"),
            "the clients' order latency (HdrHistogram, from the intended send)",
        ));
    }
    row
}

/// The chance that `k` or more of `n` units go to bots by luck, when each unit goes to a bot
/// with chance `p` (the bots' share of the buyers).
fn binomial_tail(n: u64, k: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    let (mut term, mut below) = ((1.0 - p).powf(n as f64), 0.0);
    for i in 0..k {
        below += term;
        term *= (n - i) as f64 / (i + 1) as f64 * p / (1.0 - p).max(f64::MIN_POSITIVE);
    }
    (1.0 - below).max(0.0)
}

/// `bots_take_units`: at the rush, bots hold more of the units than their share of the buyers
/// gives them by chance (p < [`BOTS_P`]).
pub fn bots_take_units(done: &[Done], dir: &Path, buyer_in_order: bool) -> Row {
    let c = Class::BotsTakeUnits;
    let Some((d, run)) = rush(done) else {
        return Row::not_testable(c, "the rush did not run".into());
    };
    if !buyer_in_order {
        return Row::not_testable(
            c,
            "map the buyer into [target] order (a {user_id} in its path, body or headers): bots \
             are told apart by who orders"
                .into(),
        );
    }
    let share = d.scenario.bots.share;
    if share <= 0.0 {
        return Row::not_testable(
            c,
            "the scenario has no bots: declare [bots] (share, resubmits) to see what scripts \
             resubmitting orders take"
                .into(),
        );
    }
    let (Some(units), Some(sold)) = (run.findings.bot_units, run.findings.sold) else {
        return Row::not_testable(
            c,
            "give an oracle that reads the shop's order rows with their user ids \
             (--oracle-sql with --orders-query), so the units bots hold can be counted"
                .into(),
        );
    };
    let (units, sold) = (units.max(0) as u64, sold.max(0) as u64);
    let chance = binomial_tail(sold, units, share);
    let fair = share * sold as f64;
    if chance >= BOTS_P || units as f64 <= fair {
        return Row::not_found(
            c,
            format!(
                "tried {} with {:.0} % bots resubmitting {} times; bots hold {units} of {sold} \
                 units (their share of the buyers gives {fair:.1})",
                intensity(d),
                share * 100.0,
                d.scenario.bots.resubmits
            ),
        );
    }
    let mut row = Row::found(
        c,
        d,
        dir,
        format!(
            "bots ({:.0} % of the buyers) hold {units} of {sold} units sold: their share gives \
             {fair:.1}, and {units} or more by chance is below {BOTS_P}",
            share * 100.0
        ),
    );
    row.figures.push(Figure::new(
        "units bots hold",
        units as f64,
        format!("{units} of {sold}"),
        "oracle: the order rows of bot users",
    ));
    row
}

/// `cold_start`: at the rush, orders answered "unknown item" (not_found) before later orders
/// bought: the shop opened before its stock was there.
pub fn cold_start(done: &[Done], dir: &Path, answers_not_found: bool) -> Row {
    let c = Class::ColdStart;
    let Some((d, run)) = rush(done) else {
        return Row::not_testable(c, "the rush did not run".into());
    };
    if !answers_not_found {
        return Row::not_testable(
            c,
            "map the shop's \"unknown item\" answer to outcome = \"not_found\" in [target] \
             outcomes, so an order refused because the stock was not loaded yet is told apart"
                .into(),
        );
    }
    let per = |a: Answer| run.timeline.orders.get(&a).cloned().unwrap_or_default();
    let (unknown, created) = (per(Answer::NotFound), per(Answer::Created));
    let first_unknown = unknown.iter().position(|n| *n > 0);
    let bought_later = first_unknown.and_then(|i| {
        created
            .iter()
            .skip(i + 1)
            .position(|n| *n > 0)
            .map(|j| i + 1 + j)
    });
    let total: u64 = unknown.iter().sum();
    let (Some(at), Some(later)) = (first_unknown, bought_later) else {
        return Row::not_found(
            c,
            format!(
                "tried {}; {total} orders answered not_found, none of them before a later order \
                 bought",
                intensity(d)
            ),
        );
    };
    let mut row = Row::found(
        c,
        d,
        dir,
        format!(
            "{total} orders answered not_found (unknown item) from second {at} of the sale, and \
             orders bought again from second {later}: the stock was not there at the opening"
        ),
    );
    row.figures.push(Figure::new(
        "orders told unknown item",
        total as f64,
        total.to_string(),
        "the clients' records (timeline of order answers)",
    ));
    row
}

/// `reconcile_residual` from a `[watch.reconcile_residual]` gauge, when the oracle could not
/// measure it: its last sample, after the sale settled.
pub fn watched_residual(done: &[Done], dir: &Path) -> Option<Row> {
    let c = Class::ReconcileResidual;
    let (d, g) = done
        .iter()
        .find_map(|d| Some((d, d.report.runs.first()?.watch.get("reconcile_residual")?)))?;
    let last = g.series.last().map(|p| p.1)?;
    if last == 0.0 {
        return Some(Row::not_found(
            c,
            format!(
                "tried {}; [watch.reconcile_residual] read 0 at the end ({} samples)",
                intensity(d),
                g.samples
            ),
        ));
    }
    let mut row = Row::found(
        c,
        d,
        dir,
        format!("[watch.reconcile_residual] still read {last} after the sale settled"),
    );
    row.figures.push(Figure::new(
        "reconcile residual at the end",
        last,
        format!("{last}"),
        g.source.clone(),
    ));
    Some(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binomial_tail_is_one_for_nothing_and_small_for_many() {
        assert_eq!(binomial_tail(10, 0, 0.05), 1.0);
        let one = binomial_tail(10, 1, 0.05);
        assert!((one - (1.0 - 0.95f64.powi(10))).abs() < 1e-12, "{one}");
        let four = binomial_tail(10, 4, 0.05);
        assert!((four - 0.001_028_5).abs() < 1e-6, "{four}");
        assert!(binomial_tail(10, 5, 0.05) < BOTS_P);
        assert!(binomial_tail(10, 2, 0.05) > BOTS_P);
    }
}
