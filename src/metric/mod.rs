//! The metric catalog: every figure oversell limits (`gate`), compares (`diff`), tabulates and
//! charts, with its one name, its unit, which way is better, how two runs are compared, whether
//! a threshold may limit it, and how a value is written for people.
//!
//! This module is the vocabulary and depends on nothing else in the crate, so the scenario file
//! can parse `[thresholds]` into it (`limits`: a threshold's name and value checked against the
//! metric's unit, `[thresholds]` and `--threshold`). How each metric is read from a run's
//! report (and where the figure comes from) is `report::catalog`, next to the report it reads.

mod limits;

pub use limits::{limitable_names, LimitError, Override, Thresholds};
use std::fmt;

/// One figure of a run. The order is the catalog's order (reports, `diff`, `gate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    Oversell,
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
    DbQpsPeak,
    Throughput,
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
    /// A rate of the database server's own counter; which counter depends on the run
    /// (PostgreSQL transactions/s or statements/s, MySQL Questions/s): never one unit.
    DbRate,
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
    /// `Some` when a threshold may limit it (always "at most"): the limit that applies when
    /// neither the scenario nor a flag sets one.
    pub threshold: Option<Option<f64>>,
}

const fn spec(
    name: &'static str,
    aliases: &'static [&'static str],
    label: &'static str,
    column: &'static str,
    unit: Unit,
    better: Better,
    threshold: Option<Option<f64>>,
) -> Spec {
    Spec {
        name,
        aliases,
        label,
        column,
        unit,
        better,
        rule: if unit.is_count() {
            Rule::Exact
        } else {
            Rule::Band
        },
        threshold,
    }
}

/// The send-lag p99 above which a run is *generator-bound* (its latency measured the
/// generator, not the shop), unless `[thresholds] send_lag_p99_ms` or `--max-send-lag-ms`
/// sets another bound.
pub const DEFAULT_MAX_SEND_LAG_MS: f64 = 5.0;

/// A threshold with a limit of 0 unless set.
const ZERO: Option<Option<f64>> = Some(Some(0.0));
/// A threshold with no limit unless set.
const OPTIONAL: Option<Option<f64>> = Some(None);

static SPECS: &[Spec] = &[
    spec(
        "oversell",
        &[],
        "oversold units",
        "oversold units",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "peak_oversell",
        &[],
        "units oversold at the peak (later releases may have covered them)",
        "peak oversell",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "client_oversell",
        &[],
        "client-observed oversold units",
        "client oversell",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "client_peak_oversell",
        &[],
        "units the clients provably held at once beyond the stock",
        "client peak oversell",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "stock_peak_oversell",
        &[],
        "units a stock sample shows beyond what can exist (held + stock − initial)",
        "stock peak oversell",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "oracle_disagreement",
        &[],
        "acknowledged units the oracle does not count",
        "oracle disagreement",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "lost_acks",
        &[],
        "lost acknowledged orders",
        "lost acks",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "duplicate_acks",
        &[],
        "order ids acknowledged to more than one attempt",
        "duplicate acks",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "duplicate_orders_per_key",
        &[],
        "orders beyond the first bought under one Idempotency-Key",
        "duplicate orders per key",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "phantom_orders",
        &[],
        "phantom orders (no request of the run asked for them)",
        "phantom orders",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "indeterminate_committed",
        &[],
        "indeterminate order attempts that committed",
        "indeterminate committed",
        Unit::Orders,
        Better::Lower,
        OPTIONAL,
    ),
    spec(
        "refused_committed",
        &[],
        "orders committed for refused requests",
        "refused committed",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "dead_letters",
        &[],
        "dead-lettered stream entries",
        "dead letters",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "duplicate_buyers",
        &[],
        "duplicate buyers",
        "duplicate buyers",
        Unit::Buyers,
        Better::Lower,
        ZERO,
    ),
    spec(
        "duplicate_devices",
        &[],
        "devices holding more than the limit",
        "duplicate devices",
        Unit::Buyers,
        Better::Lower,
        ZERO,
    ),
    spec(
        "client_duplicate_buyers",
        &[],
        "users the clients' records show holding more than the limit",
        "client duplicate buyers",
        Unit::Buyers,
        Better::Lower,
        ZERO,
    ),
    spec(
        "client_duplicate_devices",
        &[],
        "devices the clients' records show holding more than the limit",
        "client duplicate devices",
        Unit::Buyers,
        Better::Lower,
        ZERO,
    ),
    spec(
        "status_mismatches",
        &[],
        "orders not in the state their clients were told",
        "status mismatches",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "wrong_answers",
        &[],
        "adversarial buyers' orders answered as no correct shop answers",
        "wrong answers",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "conservation_drift",
        &[],
        "conservation drift, |initial − (stock + sold)|",
        "conservation drift",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "redis_drift",
        &[],
        "Redis stock against the database's after reconciliation, absolute",
        "Redis drift",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "restock_mismatch",
        &[],
        "released orders against restocks, absolute",
        "restock mismatch",
        Unit::Orders,
        Better::Lower,
        ZERO,
    ),
    spec(
        "reconcile_residual",
        &[],
        "final reconciliation residual before its correction, absolute",
        "reconcile residual",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "stock_below_zero",
        &[],
        "units the database stock went below zero (at the end, or as sampled)",
        "stock below 0",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "stock_above_initial",
        &[],
        "units the database stock rose above the initial stock (as sampled)",
        "stock above initial",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "not_settled",
        &["queue_not_drained"],
        "not settled within the limit (1 = yes): the shop's queue not drained, or a foreign shop's oracle and backlog not at rest",
        "not settled",
        Unit::Flag,
        Better::Lower,
        ZERO,
    ),
    spec(
        "nothing_sold",
        &[],
        "the shop accepted no order while it had stock (1 = yes): the run tested nothing",
        "nothing sold",
        Unit::Flag,
        Better::Lower,
        ZERO,
    ),
    spec(
        "undersell",
        &[],
        "units left unsold while buyers were refused for reasons other than sold out",
        "undersell",
        Unit::Units,
        Better::Lower,
        ZERO,
    ),
    spec(
        "turned_away_buyers",
        &[],
        "people who tried to order and got none (for any reason, sold out included)",
        "turned away",
        Unit::Buyers,
        Better::Lower,
        OPTIONAL,
    ),
    spec(
        "error_rate",
        &[],
        "order error rate (first attempts; retries are counted apart)",
        "error rate",
        Unit::Share,
        Better::Lower,
        OPTIONAL,
    ),
    spec(
        "unclassified",
        &[],
        "answers no mapping rule classified",
        "unclassified",
        Unit::Share,
        Better::Lower,
        Some(Some(0.01)),
    ),
    spec(
        "login_failures",
        &[],
        "share of the buyers' logins that failed",
        "login failures",
        Unit::Share,
        Better::Lower,
        Some(Some(0.5)),
    ),
    spec(
        "mean_ms",
        &["latency_mean"],
        "order latency mean",
        "avg order latency",
        Unit::Millis,
        Better::Lower,
        None,
    ),
    spec(
        "p50_ms",
        &["latency_p50"],
        "order latency p50",
        "order p50",
        Unit::Millis,
        Better::Lower,
        None,
    ),
    spec(
        "p99_ms",
        &["latency_p99"],
        "order latency p99",
        "order p99",
        Unit::Millis,
        Better::Lower,
        OPTIONAL,
    ),
    spec(
        "p999_ms",
        &["latency_p999"],
        "order latency p99.9",
        "order p99.9",
        Unit::Millis,
        Better::Lower,
        OPTIONAL,
    ),
    spec(
        "service_p99_ms",
        &[],
        "order service time p99 (actual send to the full answer: the shop's share)",
        "order service p99",
        Unit::Millis,
        Better::Lower,
        OPTIONAL,
    ),
    spec(
        "send_lag_p99_ms",
        &["max_send_lag_ms"],
        "send lag p99 (intended to actual send: the generator's lateness; above the limit the run is generator-bound)",
        "send lag p99",
        Unit::Millis,
        Better::Lower,
        Some(Some(DEFAULT_MAX_SEND_LAG_MS)),
    ),
    spec(
        "db_qps_peak",
        &[],
        "DB peak QPS",
        "DB peak QPS",
        Unit::DbRate,
        Better::Lower,
        None,
    ),
    spec(
        "throughput",
        &[],
        "order throughput",
        "throughput",
        Unit::OrdersPerSecond,
        Better::Higher,
        None,
    ),
];

impl Metric {
    /// Every metric, in catalog order.
    pub const ALL: &[Metric] = &[
        Metric::Oversell,
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
        Metric::DbQpsPeak,
        Metric::Throughput,
    ];

    /// What the catalog says about this metric.
    pub fn spec(self) -> &'static Spec {
        &SPECS[self as usize]
    }

    /// The metric's one name.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The metric a name (or an older alias) stands for.
    pub fn named(name: &str) -> Option<Metric> {
        let name = name.trim();
        Metric::ALL
            .iter()
            .copied()
            .find(|m| m.name() == name || m.spec().aliases.contains(&name))
    }

    /// The metrics a threshold may limit, in catalog order.
    pub fn limitable() -> impl Iterator<Item = Metric> {
        Metric::ALL
            .iter()
            .copied()
            .filter(|m| m.spec().threshold.is_some())
    }

    /// The limit that applies when neither the scenario nor a flag sets one.
    pub fn default_limit(self) -> Option<f64> {
        self.spec().threshold.flatten()
    }

    /// The value alone, at the metric's precision: `3`, `0.50` (%), `12.5`, `0.845`.
    pub fn number(self, v: f64) -> String {
        match self.spec().unit {
            Unit::Share => format!("{:.2}", v * 100.0),
            Unit::Millis if v.abs() >= 1.0 => format!("{v:.1}"),
            Unit::Millis => format!("{v:.3}"),
            Unit::OrdersPerSecond => format!("{v:.1}"),
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
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_are_unique_and_the_table_is_in_enum_order() {
        let mut names: Vec<&str> = SPECS
            .iter()
            .flat_map(|s| std::iter::once(s.name).chain(s.aliases.iter().copied()))
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
        for m in Metric::ALL {
            assert_eq!(Metric::named(m.name()), Some(*m));
        }
        assert_eq!(Metric::named("latency_p99"), Some(Metric::P99Ms));
    }

    #[test]
    fn every_count_the_oracle_finds_defaults_to_zero_but_indeterminate_orders_and_turned_away() {
        // Counts a threshold may limit are the oracle's findings (and the clients' evidence):
        // each is a defect at any value above 0, except the two that describe the sale
        // rather than judge the shop. Undersell (units left while buyers were refused for
        // reasons other than sold out) judges it: a run that refused buyers it could have
        // served tested nothing.
        let informational = [Metric::IndeterminateCommitted, Metric::TurnedAwayBuyers];
        let counts: Vec<Metric> = Metric::limitable()
            .filter(|m| m.spec().unit.is_count())
            .collect();
        assert!(counts.len() >= 17, "{counts:?}");
        for m in counts {
            let expected = (!informational.contains(&m)).then_some(0.0);
            assert_eq!(m.default_limit(), expected, "{m}");
        }
    }

    #[test]
    fn values_are_written_at_their_precision() {
        assert_eq!(Metric::P99Ms.format(60000.0), "60000.0 ms");
        assert_eq!(Metric::P99Ms.format(0.8454), "0.845 ms");
        assert_eq!(Metric::ErrorRate.format(0.0123), "1.23 %");
        assert_eq!(Metric::Oversell.format(3.0), "3");
        assert_eq!(Metric::NotSettled.format(1.0), "1");
        assert_eq!(Metric::named("queue_not_drained"), Some(Metric::NotSettled));
    }
}
