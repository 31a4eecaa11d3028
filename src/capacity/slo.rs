//! The service objective a probe is judged by: the scenario's `[thresholds]` (or `--slo`),
//! checked by the gate's own rules against the probe's report, every figure with its source
//! (the probe's HdrHistograms, the clients' records, the oracle); and the probe's verdict for
//! the search: held, broke (which metric first), broke while the generator was the limit, or
//! incorrect (oversell or lost acknowledged orders).

use super::search::Judged;
use crate::gate::{self, Limit, Status, Verdict};
use crate::metric::{Metric, Override};
use crate::report::{Report, RunReport};
use crate::traffic::Scenario;
use serde::{Deserialize, Serialize};

/// The metrics whose any non-zero value ends the search: correctness broke, whatever the
/// objective says.
pub const CORRECTNESS: &[Metric] = &[
    Metric::Oversell,
    Metric::PeakOversell,
    Metric::ClientOversell,
    Metric::ClientPeakOversell,
    Metric::LostAcks,
];

/// The limits every probe is held to.
#[derive(Debug, Clone)]
pub struct Objective {
    pub limits: Vec<Limit>,
}

impl Objective {
    /// `--slo` when given (it replaces the scenario's `[thresholds]`), else the scenario's;
    /// the catalog's default limits (oversell 0, lost acknowledged orders 0, ...) either way.
    /// `send_lag_p99_ms` is not a limit here: it is the bound that marks a probe
    /// generator-bound.
    pub fn new(s: &Scenario, slo: &[Override], bundled: bool) -> Self {
        let scenario = if slo.is_empty() {
            s.thresholds.clone()
        } else {
            crate::metric::Thresholds::default()
        };
        let limits = gate::limits(&scenario, None, slo, bundled && slo.is_empty())
            .into_iter()
            .filter(|l| l.metric != Metric::SendLagP99Ms)
            .collect();
        Objective { limits }
    }

    /// `p99_ms <= 200 ms, error_rate <= 1.00 %` (the limits set by the user or the scenario;
    /// the defaults apply too but are not listed).
    pub fn describe(&self) -> String {
        let set: Vec<String> = self
            .limits
            .iter()
            .filter(|l| l.origin != gate::Origin::Default)
            .map(|l| format!("{} <= {}", l.metric.name(), l.metric.format(l.value)))
            .collect();
        if set.is_empty() {
            "the catalog's defaults only".into()
        } else {
            set.join(", ")
        }
    }

    /// Judges the probe's one run: its figures, and the verdict for the search.
    pub fn judge(&self, report: &Report) -> (Judged, Vec<Figure>) {
        let verdict = Verdict::judge(report, &self.limits, false);
        let figures: Vec<Figure> = verdict.checks.iter().map(Figure::of).collect();
        let Some(run) = report.runs.first() else {
            return (
                Judged::Broke {
                    metric: "the probe made no run".into(),
                },
                figures,
            );
        };
        if let Some(m) = CORRECTNESS
            .iter()
            .find(|m| m.read(run).is_ok_and(|v| v > 0.0))
        {
            let v = m.read(run).unwrap_or_default();
            return (
                Judged::Incorrect {
                    metric: format!("{} = {} ({})", m.name(), m.format(v), m.source()),
                },
                figures,
            );
        }
        if verdict.passed() {
            return (Judged::Held, figures);
        }
        if let Some(why) = generator_limit(run) {
            return (Judged::GeneratorLimit { why }, figures);
        }
        let first = verdict
            .checks
            .iter()
            .find(|c| c.status != Status::Passed && !matches!(c.status, Status::NotRequired(_)))
            .map(|c| match c.status {
                Status::Breached => format!("{} {}", c.limit.metric.name(), c.measured_text()),
                _ => format!("{} not verified", c.limit.metric.name()),
            })
            .unwrap_or_else(|| "the objective".into());
        (Judged::Broke { metric: first }, figures)
    }
}

/// A sender wait p99 above this, with every sender held, says the senders' cap (not the
/// shop) limited the probe, unless a send-lag bound was declared.
const SENDERS_FULL_WAIT_MS: f64 = 5.0;

/// Why the generator, not the shop, limited this run: it is generator-bound, or
/// every sender held an unanswered request while requests waited for one.
pub fn generator_limit(run: &RunReport) -> Option<String> {
    if let Some(why) = crate::report::details::generator_bound(run) {
        return Some(why);
    }
    let bound = run.max_send_lag_ms.unwrap_or(SENDERS_FULL_WAIT_MS);
    let waited = run
        .sender_wait
        .as_ref()
        .map(|w| w.p99_ms)
        .filter(|p99| *p99 > bound)?;
    let full = run.generator.senders_full_at_s?;
    Some(format!(
        "all {} senders held an unanswered request from {full:.1} s and requests waited for \
         one (sender wait p99 {waited:.1} ms, HdrHistogram): raise [client] senders",
        run.generator.users
    ))
}

/// One limit checked on one probe, with where the figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub metric: String,
    pub limit: f64,
    pub measured: Option<f64>,
    pub source: String,
    /// `passed`, `breached`, `not_verified`, `not_required`.
    pub status: String,
}

impl Figure {
    fn of(c: &gate::Check) -> Self {
        Figure {
            metric: c.limit.metric.key(),
            limit: c.limit.value,
            measured: c.measured,
            source: c.source.into(),
            status: match c.status {
                Status::Passed => "passed",
                Status::Breached => "breached",
                Status::NotVerified(_) => "not_verified",
                Status::NotRequired(_) => "not_required",
            }
            .into(),
        }
    }
}
