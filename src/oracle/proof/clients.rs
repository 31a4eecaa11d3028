//! Proofs read from the clients' records: the peak the acknowledgements replay, the stock
//! sample that shows units that cannot exist, an owner over the limit, lost acknowledgements.

use super::orders::{ack_order, acks_of, seconds};
use super::{Proof, ProofOrder, LISTED};
use crate::oracle::replay::Held;
use crate::oracle::{Evidence, Findings};
use crate::traffic::recorder::Measurements;
use hashbrown::HashSet;

/// The peak the clients' records replayed: the instant, and the fewest acknowledged orders held
/// then that exceed the stock.
pub(super) fn clients_peak(t: u64, held: &[Held], untimed: i64, e: &Evidence<'_>) -> Proof {
    // The latest acknowledged first: the ones that passed the stock.
    let mut by_ack: Vec<Held> = held.to_vec();
    by_ack.sort_by_key(|h| std::cmp::Reverse((h.from, h.ack)));
    let need = (e.initial_stock + untimed + 1).max(0) as usize;
    let mut chosen: Vec<Held> = by_ack.into_iter().take(need.min(LISTED)).collect();
    chosen.sort_by_key(|h| (h.from, h.ack));
    let mut p = Proof {
        findings: vec!["client_peak_oversell".into()],
        source: "clients' records: each order held from its acknowledgement until its cancel \
                 was sent or its payment window ran out unpaid"
            .into(),
        at_ms: Some(t as i64),
        stock: Some(e.initial_stock),
        ..Proof::default()
    };
    if need > LISTED {
        p.unlisted = Some(held.len() as u64);
        p.claim = format!(
            "at +{} clients held {} acknowledged orders at once for a stock of {} (too many to \
             list)",
            seconds(t as i64),
            held.len(),
            e.initial_stock
        );
        return p;
    }
    p.orders = held_orders(&chosen, e.clients);
    p.claim = format!(
        "at +{} clients held {} acknowledged orders at once for a stock of {}: these {} were \
         all acknowledged by then, none cancelled{}",
        seconds(t as i64),
        held.len(),
        e.initial_stock,
        p.orders.len(),
        if e.payment_window_ms.is_some() {
            " and none past its payment window unpaid"
        } else {
            ", each paid before"
        }
    );
    if untimed > 0 {
        p.facts.push(format!(
            "{untimed} cancels answered ok carry no send time: each may have released one of \
             them, so {untimed} more are listed than the stock needs"
        ));
    }
    p
}

/// The stock sample that shows units that cannot exist.
pub(super) fn sample(s: &crate::oracle::StockSample, held: &[Held], e: &Evidence<'_>) -> Proof {
    let need = (e.initial_stock - s.stock + 1).max(0) as usize;
    let mut chosen: Vec<Held> = held.iter().copied().take(need.min(LISTED)).collect();
    chosen.sort_by_key(|h| (h.from, h.ack));
    Proof {
        findings: vec!["stock_peak_oversell".into()],
        claim: format!(
            "the stock read between +{} and +{} was {}, while clients held {} acknowledged \
             orders: {} + {} = {} units, above the {} that exist; these {} were held \
             throughout the read",
            seconds(s.sent_ms as i64),
            seconds(s.answered_ms as i64),
            s.stock,
            held.len(),
            s.stock,
            held.len(),
            s.stock + held.len() as i64,
            e.initial_stock,
            chosen.len()
        ),
        source: "the stock samples read through the oracle during the sale, against the \
                 clients' records"
            .into(),
        at_ms: Some(s.sent_ms as i64),
        stock: Some(e.initial_stock),
        orders: held_orders(&chosen, e.clients),
        ..Proof::default()
    }
}

/// An owner over the limit in the clients' records.
pub(super) fn clients_owner(finding: &str, who: &str, held: &[Held], e: &Evidence<'_>) -> Proof {
    let orders = held_orders(held, e.clients);
    let what = if finding.ends_with("devices") {
        "device"
    } else {
        "buyer"
    };
    let mut findings = vec![finding.to_string()];
    findings.push(finding.trim_start_matches("client_").to_string());
    Proof {
        findings,
        claim: format!(
            "{what} {who} held {} acknowledged orders at once, with a purchase limit of {}",
            orders.len(),
            e.purchase_limit
        ),
        source: "clients' records: acknowledgements, cancels sent, payment windows".into(),
        orders,
        ..Proof::default()
    }
}

/// Acknowledged orders missing from the rows.
pub(super) fn lost(f: &Findings, c: &Measurements) -> Proof {
    let ids: HashSet<&str> = f.lost_ack_examples.iter().map(String::as_str).collect();
    let acks = acks_of(c, &ids);
    let orders = f
        .lost_ack_examples
        .iter()
        .filter_map(|id| acks.get(id.as_str()))
        .map(ack_order)
        .collect();
    Proof {
        findings: vec!["lost_acks".into()],
        claim: format!(
            "{} orders their clients were told exist have no row{}",
            f.lost_acks.unwrap_or(0),
            if f.lost_acks > Some(f.lost_ack_examples.len() as u64) {
                format!(" (the first {} listed)", f.lost_ack_examples.len())
            } else {
                String::new()
            }
        ),
        source: "clients' acknowledgements (order ids) looked up in the order rows".into(),
        orders,
        ..Proof::default()
    }
}

/// The acknowledgements of `held`, as proof orders.
pub(super) fn held_orders(held: &[Held], c: &Measurements) -> Vec<ProofOrder> {
    held.iter()
        .map(|h| ack_order(&c.records.ack(h.ack)))
        .collect()
}
