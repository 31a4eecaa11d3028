//! The orders a proof names: rows and acknowledgements as proof orders, joined by id, and the
//! instants they are shown at. Read by the builders of every kind of proof.

use super::ProofOrder;
use crate::model::Order;
use crate::traffic::recorder::{AckView, Measurements};
use hashbrown::{HashMap, HashSet};

/// The orders of `acks` named by `ids`, by id (the first acknowledgement of each).
pub(super) fn acks_of<'a>(
    c: &'a Measurements,
    ids: &HashSet<&str>,
) -> HashMap<&'a str, AckView<'a>> {
    let mut by = HashMap::new();
    for a in c.acks() {
        if let Some(id) = a.order_id.filter(|id| ids.contains(id)) {
            by.entry(id).or_insert(a);
        }
    }
    by
}

/// A row as a proof order, with what its client was told of it (if anything).
pub(super) fn row_order(o: &Order, ack: Option<&AckView<'_>>) -> ProofOrder {
    let released = (!o.status.holds_stock()).then_some(o.updated_at_ms);
    ProofOrder {
        id: Some(o.id.clone()),
        user: Some(o.user_id.clone()),
        device: o.device_id.clone(),
        key: o.idempotency_key.clone(),
        qty: o.qty,
        sent_ms: ack.map(|a| a.sent_ms),
        acked_ms: ack.map(|a| a.at_ms),
        paid_ms: ack.and_then(|a| a.paid_ms),
        cancel_sent_ms: ack.and_then(|a| a.cancel_sent_ms),
        status: Some(o.status.as_str().to_string()),
        created_at_ms: Some(o.created_at_ms),
        released_at_ms: released,
        stock_read: o.stock_read,
    }
}

/// An acknowledgement as a proof order (no row read).
pub(super) fn ack_order(a: &AckView<'_>) -> ProofOrder {
    ProofOrder {
        id: a.order_id.map(str::to_string),
        user: Some(a.user_id.to_string()),
        device: Some(a.device_id.to_string()),
        key: a.key.map(|k| k.with_text(str::to_string)),
        qty: 1,
        sent_ms: Some(a.sent_ms),
        acked_ms: Some(a.at_ms),
        paid_ms: a.paid_ms,
        cancel_sent_ms: a.cancel_sent_ms,
        ..ProofOrder::default()
    }
}

/// `rows` as proof orders, joined with the clients' acknowledgements of them.
pub(super) fn joined(rows: &[&Order], c: &Measurements) -> Vec<ProofOrder> {
    let ids: HashSet<&str> = rows.iter().map(|o| o.id.as_str()).collect();
    let acks = acks_of(c, &ids);
    rows.iter()
        .map(|o| row_order(o, acks.get(o.id.as_str())))
        .collect()
}

/// An instant: `+1.234 s` after the sale opened when known, else the row's own clock.
pub(super) fn when(after_open: Option<i64>, row_ms: i64) -> String {
    match after_open {
        Some(ms) => format!("+{}", seconds(ms)),
        None => format!("{row_ms} ms (the rows' clock)"),
    }
}

/// `ms` as seconds with milliseconds: `1.234 s`.
pub fn seconds(ms: i64) -> String {
    format!("{}.{:03} s", ms / 1000, (ms % 1000).abs())
}
