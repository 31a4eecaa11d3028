//! Unit tests of the metric catalog: one name each, defaults, formats.

use super::specs::SPECS;
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
    assert_eq!(Metric::RUN.len() + 1, Metric::ALL.len());
    assert!(!Metric::RUN.contains(&Metric::CapacityRps));
}

#[test]
fn every_count_the_oracle_finds_defaults_to_zero_but_indeterminate_orders_and_turned_away() {
    // Counts a threshold may limit are the oracle's findings (and the clients' evidence):
    // each is a defect at any value above 0, except the two that describe the sale
    // rather than judge the shop. Undersell (units left while buyers were refused for
    // reasons other than sold out) judges it: a run that refused buyers it could have
    // served tested nothing.
    let informational = [Metric::IndeterminateCommitted, Metric::TurnedAwayBuyers];
    let counts: Vec<Metric> = Metric::ALL
        .iter()
        .copied()
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
