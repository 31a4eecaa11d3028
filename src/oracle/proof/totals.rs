//! Proofs of what only totals show, and of the examples the oracle keeps: a key that bought
//! twice, a wrong answer, and the figures of conservation, the stock and the oracle's count.

use super::{Proof, ProofOrder};
use crate::oracle::Findings;

/// One Idempotency-Key that bought more than one order.
pub(super) fn per_key(f: &Findings) -> Option<Proof> {
    let d = f.duplicate_key_examples.first()?;
    (f.duplicate_orders_per_key > Some(0)).then(|| Proof {
        findings: vec!["duplicate_orders_per_key".into()],
        claim: format!(
            "Idempotency-Key {} bought {} orders: {}",
            d.key,
            d.order_ids.len(),
            d.order_ids.join(", ")
        ),
        source: d.seen_in.clone(),
        orders: d
            .order_ids
            .iter()
            .map(|id| ProofOrder {
                id: Some(id.clone()),
                key: Some(d.key.clone()),
                qty: 1,
                ..ProofOrder::default()
            })
            .collect(),
        ..Proof::default()
    })
}

/// An adversarial buyer answered as no correct shop answers.
pub(super) fn wrong(f: &Findings) -> Option<Proof> {
    let w = f.wrong_answer_examples.first()?;
    (f.wrong_answers > Some(0)).then(|| Proof {
        findings: vec!["wrong_answers".into()],
        claim: format!(
            "order {} ({}): {}: {}",
            w.order_id.as_deref().unwrap_or("without an id"),
            w.script.as_str(),
            w.sequence,
            w.why.as_str()
        ),
        source: "clients' records of the adversarial buyer's requests and answers".into(),
        orders: vec![ProofOrder {
            id: w.order_id.clone(),
            key: Some(w.key.clone()),
            qty: 1,
            ..ProofOrder::default()
        }],
        ..Proof::default()
    })
}

/// The findings only totals show: their figures, each named by where it was read.
pub(super) fn counts(f: &Findings) -> Vec<Proof> {
    let mut out = stock(f);
    out.extend(clients(f));
    out
}

/// A proof made of a claim and its source.
fn figures(finding: &str, claim: String, source: &str) -> Proof {
    Proof {
        findings: vec![finding.into()],
        claim,
        source: source.into(),
        ..Proof::default()
    }
}

/// What the stock shows: conservation, the stock sampled above what was stocked or below 0,
/// restocks against Redis's set.
fn stock(f: &Findings) -> Vec<Proof> {
    let mut out = Vec::new();
    let mut count = |finding: &str, claim: String, source: &str| {
        out.push(figures(finding, claim, source));
    };
    let sold = f.sold.unwrap_or(0);
    if let (Some(d), Some(stock)) = (f.conservation_drift.filter(|d| *d != 0), f.db_stock) {
        count(
            "conservation_drift",
            format!(
                "stock {stock} + {sold} units held by orders = {} units, for {} stocked: {}",
                stock + sold,
                f.initial_stock,
                if d < 0 {
                    format!(
                        "{} units exist that were never stocked (restocked more than released)",
                        -d
                    )
                } else {
                    format!("{d} units are gone (taken and never sold)")
                }
            ),
            "the item's stock and the order rows, read in one snapshot",
        );
    }
    if let Some(max) = f.max_stock_seen.filter(|m| *m > f.initial_stock) {
        count(
            "stock_above_initial",
            format!(
                "the stock read {max} during the sale, above the {} ever stocked",
                f.initial_stock
            ),
            "the stock sampled every second during the sale",
        );
    }
    if let Some(min) = f.min_stock_seen.filter(|m| *m < 0) {
        count(
            "stock_below_zero",
            format!("the stock read {min} during the sale"),
            "the stock sampled every second during the sale",
        );
    }
    if let Some(m) = f.restock_mismatch.filter(|m| *m != 0) {
        count(
            "restock_mismatch",
            format!(
                "released orders and restocks in Redis differ by {m} (released rows and \
                 dead-lettered releases, minus the orders Redis's restock set holds)"
            ),
            "the order rows' statuses and Redis's restock set",
        );
    }
    out
}

/// What the clients' figures show against the stock and the oracle's count.
fn clients(f: &Findings) -> Vec<Proof> {
    let mut out = Vec::new();
    let mut count = |finding: &str, claim: String, source: &str| {
        out.push(figures(finding, claim, source));
    };
    if let (Some(d), Some(sold)) = (f.oracle_disagreement.filter(|d| *d > 0), f.sold) {
        count(
            "oracle_disagreement",
            format!(
                "clients were told {} orders and saw {} restocked ({} units held), the oracle \
                 counts {sold} sold: {d} acknowledged units are missing from its count",
                f.acknowledged,
                f.restocks_seen.unwrap_or(0),
                f.client_net_acks
            ),
            "clients' acknowledgements and cancels against the oracle's sold",
        );
    }
    if let Some(o) = f.client_oversell.filter(|o| *o > 0) {
        count(
            "client_oversell",
            format!(
                "clients were told {} orders and saw {} restocked: {} units for a stock of {} \
                 ({o} beyond it)",
                f.acknowledged,
                f.restocks_seen.unwrap_or(0),
                f.client_net_acks,
                f.initial_stock
            ),
            "clients' acknowledgements and cancels",
        );
    }
    out
}
