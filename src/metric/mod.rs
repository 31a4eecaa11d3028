//! The metric catalog: every figure oversell limits (`gate`), compares (`diff`), tabulates and
//! charts, with its one name, its unit, which way is better, how two runs are compared,
//! its default limit (every metric may be limited, by `gate --threshold` as by `diff
//! --fail-on`), where its figure comes from, and how a value is written for people.
//!
//! This module is the vocabulary and depends on nothing else in the crate but [`crate::suggest`], so the scenario file
//! can parse `[thresholds]` into it (`limits`: a threshold's name and value checked against the
//! metric's unit, `[thresholds]` and `--threshold`). How each metric is read from a run's
//! report is `report::catalog`, next to the report it reads.
//! `series`: the probes' per-second series ([`SeriesName`]: name, unit, the shop metric it is
//! read from, the gauge `--metrics-listen` publishes it as). `watch`: limits on a scenario's
//! watched gauges (`watch.<name>.max`, `watch.<name>.drained_within_s`).

mod limits;
mod series;
mod specs;
pub mod watch;

#[cfg(test)]
pub(crate) use limits::limitable_names;
pub use limits::{threshold_help, LimitError, Override, Thresholds};
pub use series::SeriesName;
use std::fmt;
pub use watch::{WatchFigure, WatchKey};

/// One figure of a run. The order is the catalog's order (reports, `diff`, `gate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    Oversell,
    OversoldAtEnd,
    PeakOversell,
    ClientOversell,
    ClientPeakOversell,
    StockPeakOversell,
    OracleDisagreement,
    LostAcks,
    DuplicateAcks,
    DuplicateOrdersPerKey,
    PhantomOrders,
    IndeterminateCommitted,
    RefusedCommitted,
    DeadLetters,
    DuplicateBuyers,
    DuplicateDevices,
    ClientDuplicateBuyers,
    ClientDuplicateDevices,
    StatusMismatches,
    WrongAnswers,
    ConservationDrift,
    RedisDrift,
    RestockMismatch,
    ReconcileResidual,
    StockBelowZero,
    StockAboveInitial,
    NotSettled,
    NothingSold,
    Undersell,
    TurnedAwayBuyers,
    ErrorRate,
    Unclassified,
    LoginFailures,
    MeanMs,
    P50Ms,
    P99Ms,
    P999Ms,
    ServiceP99Ms,
    SendLagP99Ms,
    LateSends,
    DbQpsPeak,
    Throughput,
    CapacityRps,
    /// A watched gauge's peak (`watch.<name>.max`): not in [`Metric::ALL`], since it names a
    /// gauge of the scenario's ([`WatchKey`]).
    WatchMax,
    /// Seconds from a watched gauge's peak back to its baseline
    /// (`watch.<name>.drained_within_s`); like [`Metric::WatchMax`], not in [`Metric::ALL`].
    WatchDrainedWithinS,
}

/// What a value counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Units of stock.
    Units,
    Orders,
    Buyers,
    /// Yes (1) or no (0).
    Flag,
    /// A share of order attempts, 0..1 (shown in %).
    Share,
    Millis,
    /// Orders per second.
    OrdersPerSecond,
    /// Buyers arriving per second (an arrival rate).
    BuyersPerSecond,
    /// A rate of the database server's own counter; which counter depends on the run
    /// (PostgreSQL transactions/s or statements/s, MySQL Questions/s): never one unit.
    DbRate,
    /// A watched gauge's own figure, in whatever it counts (connections, messages).
    Gauge,
    Seconds,
}

impl Unit {
    /// Whether values are whole counts.
    pub const fn is_count(self) -> bool {
        matches!(self, Unit::Units | Unit::Orders | Unit::Buyers | Unit::Flag)
    }
}

/// Which way is good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Lower,
    Higher,
}

/// How a baseline and a candidate are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The oracle's counts: any change counts.
    Exact,
    /// Timings and rates: a change within the noise band is "the same".
    Band,
}

/// Everything the catalog says about one metric.
#[derive(Debug)]
pub struct Spec {
    /// The one name: `[thresholds]`, `--threshold`, `diff --fail-on`, tables.
    pub name: &'static str,
    /// Older spellings still accepted wherever a name is read.
    pub aliases: &'static [&'static str],
    /// What people read (diff rows, chart titles).
    pub label: &'static str,
    /// A short table header.
    pub column: &'static str,
    pub unit: Unit,
    pub better: Better,
    pub rule: Rule,
    /// The limit that applies when neither the scenario nor a flag sets one (every metric
    /// may be limited: "at most" where lower is better, "at least" where higher is).
    pub default_limit: Option<f64>,
    /// Where the figure comes from (which records, counter or histogram): every report,
    /// `gate` and `diff` names it beside the figure.
    pub source: &'static str,
}

impl Metric {
    /// Every metric, in catalog order.
    pub const ALL: &[Metric] = &[
        Metric::Oversell,
        Metric::OversoldAtEnd,
        Metric::PeakOversell,
        Metric::ClientOversell,
        Metric::ClientPeakOversell,
        Metric::StockPeakOversell,
        Metric::OracleDisagreement,
        Metric::LostAcks,
        Metric::DuplicateAcks,
        Metric::DuplicateOrdersPerKey,
        Metric::PhantomOrders,
        Metric::IndeterminateCommitted,
        Metric::RefusedCommitted,
        Metric::DeadLetters,
        Metric::DuplicateBuyers,
        Metric::DuplicateDevices,
        Metric::ClientDuplicateBuyers,
        Metric::ClientDuplicateDevices,
        Metric::StatusMismatches,
        Metric::WrongAnswers,
        Metric::ConservationDrift,
        Metric::RedisDrift,
        Metric::RestockMismatch,
        Metric::ReconcileResidual,
        Metric::StockBelowZero,
        Metric::StockAboveInitial,
        Metric::NotSettled,
        Metric::NothingSold,
        Metric::Undersell,
        Metric::TurnedAwayBuyers,
        Metric::ErrorRate,
        Metric::Unclassified,
        Metric::LoginFailures,
        Metric::MeanMs,
        Metric::P50Ms,
        Metric::P99Ms,
        Metric::P999Ms,
        Metric::ServiceP99Ms,
        Metric::SendLagP99Ms,
        Metric::LateSends,
        Metric::DbQpsPeak,
        Metric::Throughput,
        Metric::CapacityRps,
    ];

    /// Every metric one run's report carries: all but [`Metric::CapacityRps`] (found by a
    /// search of many runs, `oversell capacity`), the last of [`Metric::ALL`].
    pub const RUN: &[Metric] = match Metric::ALL.split_last() {
        Some((_, run)) => run,
        None => &[],
    };

    /// What the catalog says about this metric.
    pub fn spec(self) -> &'static Spec {
        &specs::SPECS[self as usize]
    }

    /// The metric's one name.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The metric's key where a machine reads its bare value (the `--json` summary, a
    /// report's `thresholds`): its name with its unit when the number has one that the name
    /// does not say (`p99_ms`: milliseconds), else its name.
    pub fn key(self) -> String {
        match self.spec().unit {
            Unit::Millis => format!("{}_ms", self.name()),
            _ => self.name().to_string(),
        }
    }

    /// The metric a name (or an older alias) stands for.
    pub fn named(name: &str) -> Option<Metric> {
        let name = name.trim();
        Metric::ALL
            .iter()
            .copied()
            .find(|m| m.name() == name || m.spec().aliases.contains(&name))
    }

    /// Every name a metric is known by (its one name, then its older aliases), with the
    /// metric: what `--threshold`, `[thresholds]` and `diff --fail-on` all accept.
    pub fn every_name() -> impl Iterator<Item = (&'static str, Metric)> {
        Metric::ALL.iter().flat_map(|m| {
            std::iter::once(m.name())
                .chain(m.spec().aliases.iter().copied())
                .map(move |n| (n, *m))
        })
    }

    /// `" (did you mean `p99_ms`?)"` for a name the catalog does not know, or nothing.
    pub fn did_you_mean(name: &str) -> String {
        let near = crate::suggest::closest(name, Metric::every_name().map(|(n, _)| n));
        near.and_then(Metric::named)
            .map(|m| format!(" (did you mean `{m}`?)"))
            .unwrap_or_default()
    }

    /// The limit that applies when neither the scenario nor a flag sets one.
    pub fn default_limit(self) -> Option<f64> {
        self.spec().default_limit
    }

    /// Whether `measured` holds `limit`: at most where lower is better, at least where
    /// higher is.
    pub fn within(self, measured: f64, limit: f64) -> bool {
        match self.spec().better {
            Better::Lower => measured <= limit + 1e-12,
            Better::Higher => measured >= limit - 1e-12,
        }
    }

    /// How a limit on it is written: `<=` (at most) or `>=` (at least).
    pub fn bound(self) -> &'static str {
        match self.spec().better {
            Better::Lower => "<=",
            Better::Higher => ">=",
        }
    }

    /// The value alone, at the metric's precision: `3`, `0.50` (%), `12.5`, `0.845`.
    pub fn number(self, v: f64) -> String {
        match self.spec().unit {
            Unit::Share => format!("{:.2}", v * 100.0),
            Unit::Millis if v.abs() >= 1.0 => format!("{v:.1}"),
            Unit::Millis => format!("{v:.3}"),
            Unit::OrdersPerSecond | Unit::BuyersPerSecond | Unit::Seconds => format!("{v:.1}"),
            Unit::Gauge => {
                let s = format!("{v:.3}");
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            }
            _ => format!("{v:.0}"),
        }
    }

    /// The value with its unit: `3`, `0.50 %`, `12.5 ms`, `103.4 orders/s`. A database rate
    /// has no fixed unit; the report layer appends the run's (see `report::catalog`).
    pub fn format(self, v: f64) -> String {
        let n = self.number(v);
        match self.spec().unit {
            Unit::Share => format!("{n} %"),
            Unit::Millis => format!("{n} ms"),
            Unit::OrdersPerSecond => format!("{n} orders/s"),
            Unit::BuyersPerSecond => format!("{n} buyers/s"),
            Unit::Seconds => format!("{n} s"),
            _ => n,
        }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests;
