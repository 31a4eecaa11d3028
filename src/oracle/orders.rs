//! What the oracle finds in the database's order rows (the reference shop, or any shop whose
//! rows it can read): each acknowledged order looked up by id, every order sorted by the
//! attempt that asked for it (its id, its idempotency key), each user's and device's holdings,
//! and the most units held at any moment, replayed from the rows' own timestamps.

use super::{Evidence, Findings};
use crate::model::{Order, OrderStatus};
use crate::traffic::recorder::{AnswerClass, Told};
use std::collections::{HashMap, HashSet};

/// Whose rows: the reference shop's (our statuses, with timestamps), or a foreign shop's
/// (`--orders-query`: its own statuses, read as released or holding stock, no timestamps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rows {
    Reference,
    Foreign,
}

/// The findings order rows allow: lost acknowledged orders, every order sorted
/// (acknowledged, indeterminate and committed, refused and committed, phantom), orders by status,
/// duplicate buyers and devices, status mismatches, bots' share, peak oversell (rows with
/// timestamps only), restocks, and (foreign rows) orders the shop cancelled on its own.
pub(super) fn findings(f: &mut Findings, orders: &[Order], e: &Evidence<'_>, rows: Rows) {
    let in_db: HashMap<&str, &Order> = orders.iter().map(|o| (o.id.as_str(), o)).collect();
    let lost: Vec<&str> = e
        .clients
        .acks
        .iter()
        .filter_map(|a| a.order_id.as_deref())
        .filter(|id| !in_db.contains_key(id))
        .collect();
    f.lost_acks = Some(lost.len() as u64);
    f.lost_ack_examples = lost.iter().take(20).map(|s| s.to_string()).collect();
    let dead_orders: HashSet<&str> = e
        .dead_letters
        .iter()
        .flatten()
        .map(|d| d.order_id.as_str())
        .collect();
    if e.dead_letters.is_some() {
        f.lost_acks_dead_lettered =
            Some(lost.iter().filter(|id| dead_orders.contains(*id)).count() as u64);
    }
    let sorted = sort(orders, e);
    f.orders_acknowledged = Some(sorted.acknowledged);
    f.indeterminate_committed = Some(sorted.indeterminate_committed);
    f.refused_committed = Some(sorted.refused_committed);
    f.phantom_orders = Some(sorted.phantom);
    if e.reading.keys_sent
        && !orders.is_empty()
        && orders.iter().all(|o| o.idempotency_key.is_none())
    {
        f.client_notes.push(
            "no order row carries an idempotency key: orders are traced by acknowledged id \
             alone, so an order an indeterminate attempt committed counts as a phantom"
                .into(),
        );
    }
    for st in OrderStatus::ALL {
        f.orders_by_status.insert(st.into(), 0);
    }
    let mut by_user: HashMap<&str, i64> = HashMap::new();
    let mut by_device: HashMap<&str, i64> = HashMap::new();
    for o in orders {
        *f.orders_by_status.entry(o.status.into()).or_default() += 1;
        if o.status.holds_stock() {
            *by_user.entry(&o.user_id).or_default() += o.qty;
            if let Some(d) = &o.device_id {
                *by_device.entry(d).or_default() += o.qty;
            }
        }
    }
    if let Some(restocked) = e.redis_restocked_orders {
        let released = orders.iter().filter(|o| !o.status.holds_stock()).count() as i64;
        // A cancel or expiry restocked in Redis whose order the database then refused: no row
        // to count it by, but a real restock.
        let released_then_dead: HashSet<&str> = e
            .dead_letters
            .iter()
            .flatten()
            .filter(|d| matches!(d.was.as_str(), "cancelled" | "expired"))
            .map(|d| d.order_id.as_str())
            .filter(|id| !in_db.contains_key(id))
            .collect();
        f.restock_mismatch = Some(released + released_then_dead.len() as i64 - restocked);
    }
    f.peak_oversell =
        (rows == Rows::Reference).then(|| (peak_held(orders) - e.initial_stock).max(0));
    f.duplicate_buyers = Some(by_user.values().filter(|q| **q > e.purchase_limit).count() as u64);
    f.duplicate_devices = Some(
        by_device
            .values()
            .filter(|q| **q > e.purchase_limit)
            .count() as u64,
    );
    let mismatches = e
        .clients
        .told
        .iter()
        .filter(|(id, told)| match in_db.get(id.as_str()) {
            Some(o) => match told {
                // A foreign shop's paid status has its own spelling: only a released row
                // contradicts "paid".
                Told::Paid if rows == Rows::Foreign => !o.status.holds_stock(),
                Told::Paid => o.status != OrderStatus::Paid,
                Told::Cancelled => o.status.holds_stock(),
            },
            None => false,
        })
        .count();
    let refused_but_applied = super::answers::refused_but_applied(e.clients, &in_db);
    f.status_mismatches = Some(mismatches as u64 + refused_but_applied);
    if rows == Rows::Foreign {
        let by_shop: Vec<&str> = e
            .clients
            .acks
            .iter()
            .filter_map(|a| a.order_id.as_deref())
            .filter(|id| {
                in_db.get(id).is_some_and(|o| !o.status.holds_stock())
                    && e.clients.told.get(*id) != Some(&Told::Cancelled)
            })
            .collect();
        f.cancelled_by_shop = Some(by_shop.len() as u64);
        f.cancelled_by_shop_examples = by_shop.iter().take(20).map(|s| s.to_string()).collect();
        f.client_notes.push(
            "the shop's order rows carry no timestamps: the replay of units held at each \
             moment (peak_oversell) is not made"
                .into(),
        );
    }
    let bots: HashSet<&str> = e
        .clients
        .acks
        .iter()
        .filter(|a| a.bot)
        .map(|a| a.user_id.as_str())
        .collect();
    let sold: i64 = by_user.values().sum();
    let bot_units: i64 = by_user
        .iter()
        .filter(|(u, _)| bots.contains(*u))
        .map(|(_, q)| q)
        .sum();
    f.bot_units = Some(bot_units);
    f.bot_share_of_units = Some(if sold > 0 {
        bot_units as f64 / sold as f64
    } else {
        0.0
    });
}

/// How many orders fell in each of the oracle's sorts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sorted {
    pub acknowledged: u64,
    pub indeterminate_committed: u64,
    pub refused_committed: u64,
    pub phantom: u64,
}

/// Sorts every order by what was asked for it: an acknowledged id (or, for an answer that
/// carried none, its attempt's key), else the class of the attempts its key names
/// (indeterminate before refused: one of them may have bought), else nothing: a phantom.
/// Keys count only when the attempts sent them.
pub(super) fn sort(orders: &[Order], e: &Evidence<'_>) -> Sorted {
    let c = e.clients;
    let acked_ids: HashSet<&str> = c
        .acks
        .iter()
        .filter_map(|a| a.order_id.as_deref())
        .collect();
    let mut by_key: HashMap<&str, (bool, bool, bool)> = HashMap::new();
    if e.reading.keys_sent {
        for a in &c.attempts {
            let k = by_key.entry(&*a.key).or_default();
            match a.class {
                AnswerClass::Acknowledged if a.order_id.is_none() => k.0 = true,
                AnswerClass::Acknowledged => {}
                AnswerClass::Indeterminate => k.1 = true,
                AnswerClass::Refused => k.2 = true,
            }
        }
    }
    let mut s = Sorted::default();
    for o in orders {
        let key = o.idempotency_key.as_deref().and_then(|k| by_key.get(k));
        match key {
            _ if acked_ids.contains(o.id.as_str()) => s.acknowledged += 1,
            Some((true, _, _)) => s.acknowledged += 1,
            Some((_, true, _)) => s.indeterminate_committed += 1,
            Some((_, _, true)) => s.refused_committed += 1,
            _ => s.phantom += 1,
        }
    }
    s
}

/// The most units held at once: each order holds its units from creation until it is released.
pub fn peak_held(orders: &[Order]) -> i64 {
    let mut events: Vec<(i64, i64)> = Vec::with_capacity(orders.len() * 2);
    for o in orders {
        events.push((o.created_at_ms, o.qty));
        if !o.status.holds_stock() {
            events.push((o.updated_at_ms.max(o.created_at_ms), -o.qty));
        }
    }
    // At equal timestamps, releases first: a unit given back and re-bought in the same
    // millisecond was never held twice.
    events.sort_by_key(|(t, d)| (*t, *d));
    let (mut held, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        held += d;
        peak = peak.max(held);
    }
    peak
}
