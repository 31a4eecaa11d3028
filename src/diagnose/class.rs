//! The failure classes a diagnosis has one row for, in the post-mortem's vocabulary, each with
//! its remedy and its section of the book; and a row's status.

use serde::{Deserialize, Serialize};

/// Where the book's chapter lives: every remedy links to its class's section there.
pub const BOOK: &str = "docs/src/gate/diagnose.md";

/// One failure class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Check and deduct are not one atomic step: buyers who read the same stock all buy.
    OversellRace,
    /// The per-buyer limit is counted apart from the write: one buyer's concurrent orders all
    /// pass it.
    LimitRace,
    /// A release (cancel, expiry) restocks more than once, or a cancelled order can be paid.
    RestockNotIdempotent,
    /// Cancelling a paid order puts its units back while the order stays paid.
    CancelAfterPay,
    /// An order the client was told it bought is not in the shop's records.
    LostAck,
    /// An order in the shop's records that no client was told about.
    PhantomOrder,
    /// A retry with the same idempotency key buys a second order.
    DuplicateOnRetry,
    /// Every request waits on one hot row holding a connection: the pool drains, requests
    /// time out.
    PoolExhaustion,
    /// Optimistic updates lose to each other on the hot row and retry: conflicts pile up.
    RetryStorm,
    /// Scripts resubmitting orders take a larger share of the units than their share of the
    /// buyers.
    BotsTakeUnits,
    /// The cache and the database disagree on the stock after the sale.
    ReconcileResidual,
    /// The shop was not ready at the opening: orders answered "unknown item" before later
    /// ones bought.
    ColdStart,
}

impl Class {
    /// Every class, in the diagnosis's order.
    pub const ALL: [Class; 12] = [
        Class::OversellRace,
        Class::LimitRace,
        Class::RestockNotIdempotent,
        Class::CancelAfterPay,
        Class::LostAck,
        Class::PhantomOrder,
        Class::DuplicateOnRetry,
        Class::PoolExhaustion,
        Class::RetryStorm,
        Class::BotsTakeUnits,
        Class::ReconcileResidual,
        Class::ColdStart,
    ];

    /// The name in reports and on the terminal.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::OversellRace => "oversell_race",
            Class::LimitRace => "limit_race",
            Class::RestockNotIdempotent => "restock_not_idempotent",
            Class::CancelAfterPay => "cancel_after_pay",
            Class::LostAck => "lost_ack",
            Class::PhantomOrder => "phantom_order",
            Class::DuplicateOnRetry => "duplicate_on_retry",
            Class::PoolExhaustion => "pool_exhaustion",
            Class::RetryStorm => "retry_storm",
            Class::BotsTakeUnits => "bots_take_units",
            Class::ReconcileResidual => "reconcile_residual",
            Class::ColdStart => "cold_start",
        }
    }

    /// The post-mortem's remedy, in a sentence.
    pub fn remedy(self) -> &'static str {
        match self {
            Class::OversellRace => {
                "Make check and deduct one atomic step: a single conditional update \
                 (UPDATE ... SET stock = stock - q WHERE stock >= q) or a Lua pre-deduct in Redis."
            }
            Class::LimitRace => {
                "Enforce the per-buyer limit in the same atomic step as the deduct (a unique \
                 key per buyer and item, or the limit inside the Lua script), never as a count \
                 before the write."
            }
            Class::RestockNotIdempotent => {
                "Put an order state machine in front of every restock, with the order id as the \
                 restock's idempotency key: a release restocks once, and only an order that \
                 still holds its units."
            }
            Class::CancelAfterPay => {
                "Check the order's state before restocking: a paid order is refused (or \
                 refunded through its own path), never restocked while it stays paid."
            }
            Class::LostAck => {
                "Acknowledge an order only after it is durable (its row committed, or its \
                 stream entry written with the write-behind's acknowledgement), and reconcile \
                 the ones in flight."
            }
            Class::PhantomOrder => {
                "Make the order write and the answer one outcome: an order that failed must \
                 leave no row (roll back, or mark it failed), so every order is one a client \
                 was told about."
            }
            Class::DuplicateOnRetry => {
                "Store the Idempotency-Key with the order under a unique constraint and answer \
                 a retry with the first order, never a second one."
            }
            Class::PoolExhaustion => {
                "Take the hot row off the connection pool: a queue in front of the hot row (one \
                 writer per item), or pre-deduct in Redis so only sure orders reach the \
                 database."
            }
            Class::RetryStorm => {
                "Stop compare-and-swap retries on a hot row: pre-deduct in Redis (a Lua script) \
                 or queue the item's orders, so losers are answered sold out instead of retried."
            }
            Class::BotsTakeUnits => {
                "Put a token bucket with user, IP and device dedup before the deduct, so \
                 scripts resubmitting orders are turned away before they reach the stock."
            }
            Class::ReconcileResidual => {
                "Reconcile the cache against the database on a schedule, with the database as \
                 the truth, and alert when the residual is not zero."
            }
            Class::ColdStart => {
                "Preload the stock (and the item) into the cache before the sale opens, and \
                 open the sale only once it is there."
            }
        }
    }

    /// The book's section on this class (its remedy and how it is tested).
    pub fn link(self) -> String {
        format!("{BOOK}#{}", self.as_str())
    }
}

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A row's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A run showed it: the row carries the proof and the figures.
    Found,
    /// Driven, and not seen: the row says what was tried and at what intensity.
    NotFound,
    /// Could not be driven or measured: the row says what to declare or map.
    NotTestable,
}

impl Status {
    /// The word in the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Found => "found",
            Status::NotFound => "not_found",
            Status::NotTestable => "not_testable",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_has_its_issue_name_a_remedy_and_an_anchor() {
        let names: Vec<&str> = Class::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            names,
            [
                "oversell_race",
                "limit_race",
                "restock_not_idempotent",
                "cancel_after_pay",
                "lost_ack",
                "phantom_order",
                "duplicate_on_retry",
                "pool_exhaustion",
                "retry_storm",
                "bots_take_units",
                "reconcile_residual",
                "cold_start"
            ]
        );
        for c in Class::ALL {
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
            assert!(c.remedy().ends_with('.'), "{c}");
            assert!(c.link().starts_with(BOOK), "{c}");
        }
    }
}
