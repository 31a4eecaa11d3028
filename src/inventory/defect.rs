//! Known defects, built in: a testing aid (`serve --defect NAME`, `oversell selftest`).
//!
//! Each [`Defect`] is one realistic mistake a real team ships, taken by the reference shop's
//! own code path (a small branch marked `DEFECT` in the strategy or the inventory), never by a
//! separate fake shop. It exists so a user can see on their own machine what the harness
//! catches: `oversell selftest` fires the scenario meant for each defect and reports whether
//! the gate caught it. A shop with a defect says so (a warning in its log, the
//! `oversell_defect_active` gauge), a report made with one records it, and `gate` refuses one
//! unless `--allow-defect` is given.

use super::Strategy;
use serde::{Deserialize, Serialize};

/// A known defect the reference shop can be started with.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    Serialize,
    Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Defect {
    /// The per-buyer purchase limit checked apart from the write: the buyer's orders are
    /// counted, a moment passes, then the order is inserted, so one buyer's concurrent
    /// submissions can all pass the count and hold more than the limit.
    LimitRace,
    /// The stock read, checked in the shop, then decremented by a second statement that
    /// trusts the read (`SELECT` without `FOR UPDATE`; `conditional` without its
    /// `WHERE stock >= q`): oversells at the peak; later cancels can make the final count
    /// look right.
    GetThenDecr,
    /// A release (cancel or expiry) restocks twice: the release's own restock, then a second
    /// restock path (the "order released" listener) that skips the idempotency guard.
    DoubleRestock,
    /// Cancelling a paid order puts its units back (the restock runs before the state check,
    /// and is not undone when the order turns out to be paid): the order stays paid.
    CancelPaidRestocks,
    /// The `Idempotency-Key` header is read but never passed down to the order: a retry with
    /// the same key buys a second order instead of getting the first back.
    KeyReuse,
}

/// A defect asked of a strategy that does not have it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--defect {defect} is not built into {strategy}: it applies to {} (a testing aid: see docs/src/gate/detection.md)",
    .defect.strategies().iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
)]
pub struct NotBuiltIn {
    pub defect: Defect,
    pub strategy: Strategy,
}

impl Defect {
    /// Every defect, in the order `selftest` runs them.
    pub const ALL: [Defect; 5] = [
        Defect::LimitRace,
        Defect::GetThenDecr,
        Defect::DoubleRestock,
        Defect::CancelPaidRestocks,
        Defect::KeyReuse,
    ];

    /// The CLI spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Defect::LimitRace => "limit-race",
            Defect::GetThenDecr => "get-then-decr",
            Defect::DoubleRestock => "double-restock",
            Defect::CancelPaidRestocks => "cancel-paid-restocks",
            Defect::KeyReuse => "key-reuse",
        }
    }

    /// Parses the CLI spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// What the mistake is, in one line.
    pub fn what(self) -> &'static str {
        match self {
            Defect::LimitRace => {
                "per-buyer limit counted, then the order inserted: one buyer's concurrent orders all pass"
            }
            Defect::GetThenDecr => {
                "stock read and checked in the shop, then decremented by a second statement"
            }
            Defect::DoubleRestock => {
                "a release restocks, then a second restock path skips the idempotency guard"
            }
            Defect::CancelPaidRestocks => {
                "cancelling a paid order restocks its unit; the order stays paid"
            }
            Defect::KeyReuse => {
                "the Idempotency-Key is never stored: a retry buys a second order"
            }
        }
    }

    /// The strategy `selftest` fires this defect at by default.
    pub fn fired_at(self) -> Strategy {
        match self {
            Defect::LimitRace
            | Defect::GetThenDecr
            | Defect::DoubleRestock
            | Defect::CancelPaidRestocks
            | Defect::KeyReuse => Strategy::Conditional,
        }
    }

    /// The strategies this defect is built into ([`Strategy::defects`]): the one `selftest`
    /// fires at first, then the others in the enum's order.
    pub fn strategies(self) -> Vec<Strategy> {
        let first = self.fired_at();
        std::iter::once(first)
            .chain(Strategy::all().iter().copied().filter(|s| *s != first))
            .filter(|s| s.defects().contains(&self))
            .collect()
    }

    /// Whether `strategy` has this defect built in; the error lists the ones that do.
    pub fn check(self, strategy: Strategy) -> Result<(), NotBuiltIn> {
        if self.strategies().contains(&strategy) {
            Ok(())
        } else {
            Err(NotBuiltIn {
                defect: self,
                strategy,
            })
        }
    }

    /// The warning a shop (and a run) with this defect prints.
    pub fn warning(self, strategy: Strategy) -> String {
        format!(
            "WARNING: DEFECT {} IS ACTIVE in this {strategy} shop ({}): a testing aid, never a \
             shop to trust (see docs/src/gate/detection.md)",
            self.as_str().to_uppercase(),
            self.what()
        )
    }
}

impl std::fmt::Display for Defect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::ValueEnum;

    #[test]
    fn the_cli_spelling_is_the_serde_and_clap_spelling() {
        for d in Defect::ALL {
            assert_eq!(Defect::parse(d.as_str()), Some(d));
            assert_eq!(
                serde_json::to_value(d).unwrap(),
                serde_json::Value::String(d.as_str().into())
            );
            let clap = d.to_possible_value().unwrap();
            assert_eq!(clap.get_name(), d.as_str());
        }
    }

    #[test]
    fn a_defect_on_a_strategy_without_it_lists_the_ones_that_have_it() {
        assert!(Defect::LimitRace.check(Strategy::Conditional).is_ok());
        let e = Defect::LimitRace
            .check(Strategy::RedisLua)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("redis-lua") && e.contains("conditional, for-update"),
            "{e}"
        );
        assert_eq!(
            Defect::DoubleRestock.strategies(),
            [
                Strategy::Conditional,
                Strategy::ForUpdate,
                Strategy::Optimistic,
                Strategy::Batched
            ]
        );
        for d in Defect::ALL {
            assert_eq!(
                d.strategies()[0],
                d.fired_at(),
                "{d} is built into {}",
                d.fired_at()
            );
            assert!(!d.strategies().is_empty());
            assert!(
                !d.strategies().contains(&Strategy::Naive),
                "naive is wrong already"
            );
        }
    }
}
