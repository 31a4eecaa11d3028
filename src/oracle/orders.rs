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
    f.phantom_orders = sorted.phantom;
    if sorted.by_buyer > 0 {
        f.client_notes.push(format!(
            "{} order rows carry no id or key an attempt of this run names: each was matched to \
             its buyer's acknowledged, indeterminate or refused attempts (`user_id`); a row \
             beyond them is a phantom",
            sorted.by_buyer
        ));
    }
    if sorted.unknown {
        f.client_notes.push(
            "phantom orders not verified: order rows that no id or key of this run names carry \
             user ids none of this run's buyers has (the shop's user ids are not the run's), so \
             who asked for them cannot be told"
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

/// How many orders fell in each of the oracle's sorts. `phantom` is `None` when rows were
/// left that neither an id, a key nor a buyer of this run names (the shop's user ids are
/// not the run's): the harness could not see who asked for them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sorted {
    pub acknowledged: u64,
    pub indeterminate_committed: u64,
    pub refused_committed: u64,
    pub phantom: Option<u64>,
    /// Rows explained by their buyer's attempts, not by an id or a key.
    pub by_buyer: u64,
    /// Rows left whose buyer could not be told (their user ids are not the run's).
    pub unknown: bool,
}

/// The classes of one attempt (or of the attempts of one key): acknowledged without an id,
/// indeterminate, refused.
#[derive(Debug, Default, Clone, Copy)]
struct Classes {
    acked: bool,
    indeterminate: bool,
    refused: bool,
}

impl Classes {
    fn add(&mut self, a: &crate::traffic::recorder::Attempt) {
        match a.class {
            AnswerClass::Acknowledged if a.order_id.is_none() => self.acked = true,
            AnswerClass::Acknowledged => {}
            AnswerClass::Indeterminate => self.indeterminate = true,
            AnswerClass::Refused => self.refused = true,
        }
    }
}

/// Sorts every order by what was asked for it: an acknowledged id (or, for an answer that
/// carried none, its attempt's key), else the class of the attempts its key names
/// (indeterminate before refused: one of them may have bought). Keys count only when the
/// attempts sent them. Rows neither explains are held against their buyer: each of the
/// buyer's attempts no row's id or key already accounts for explains one row (acknowledged
/// first, then indeterminate, then refused); a row beyond them all is a phantom.
pub(super) fn sort(orders: &[Order], e: &Evidence<'_>) -> Sorted {
    let c = e.clients;
    let acked_ids: HashSet<&str> = c
        .acks
        .iter()
        .filter_map(|a| a.order_id.as_deref())
        .collect();
    let mut by_key: HashMap<&str, Classes> = HashMap::new();
    if e.reading.keys_sent {
        for a in &c.attempts {
            by_key.entry(&*a.key).or_default().add(a);
        }
    }
    let mut s = Sorted::default();
    let mut left: Vec<&Order> = Vec::new();
    let mut used_keys: HashSet<&str> = HashSet::new();
    for o in orders {
        let key = o.idempotency_key.as_deref().and_then(|k| by_key.get(k));
        if key.is_some() {
            used_keys.extend(o.idempotency_key.as_deref());
        }
        match key {
            _ if acked_ids.contains(o.id.as_str()) => s.acknowledged += 1,
            Some(Classes { acked: true, .. }) => s.acknowledged += 1,
            Some(Classes {
                indeterminate: true,
                ..
            }) => s.indeterminate_committed += 1,
            Some(Classes { refused: true, .. }) => s.refused_committed += 1,
            // A key the run sent none of: no request of this run asked for it.
            None if e.reading.keys_sent && o.idempotency_key.is_some() => {
                *s.phantom.get_or_insert(0) += 1
            }
            _ => left.push(o),
        }
    }
    if left.is_empty() {
        s.phantom = Some(s.phantom.unwrap_or(0));
        return s;
    }
    let acked_users: HashSet<&str> = c.acks.iter().map(|a| a.user_id.as_str()).collect();
    let ours = orders
        .iter()
        .any(|o| acked_users.contains(o.user_id.as_str()))
        || e.users.is_some_and(|s| {
            // No acknowledged user in the rows: any buyer of this run that asked at all.
            let buyers: HashSet<usize> = c.attempts.iter().map(|a| a.buyer).collect();
            let users: HashSet<String> = buyers
                .into_iter()
                .filter_map(|b| s.user_id(b).map(|u| u.to_string()))
                .collect();
            orders.iter().any(|o| users.contains(&o.user_id))
        });
    let by_buyer = by_buyer(&left, e, &used_keys, ours);
    s.acknowledged += by_buyer.acknowledged;
    s.indeterminate_committed += by_buyer.indeterminate_committed;
    s.refused_committed += by_buyer.refused_committed;
    s.by_buyer = by_buyer.by_buyer;
    // Rows whose buyer cannot be told leave only the phantoms a foreign key proved.
    s.phantom = match (by_buyer.phantom, s.phantom) {
        (Some(p), known) => Some(p + known.unwrap_or(0)),
        (None, known) => known,
    };
    s.unknown = by_buyer.phantom.is_none();
    s
}

/// [`sort`]'s second pass: `left`, the rows no id or key explained, held against what each
/// buyer's remaining attempts can explain (attempts whose answer carried an id, and keys a
/// row already carries, are accounted for). The buyer is the row's `user_id` read as this
/// run's user id; `ours`: some row names a user this run acknowledged (the rows' user ids are
/// the run's).
fn by_buyer(left: &[&Order], e: &Evidence<'_>, used_keys: &HashSet<&str>, ours: bool) -> Sorted {
    let c = e.clients;
    let acked_user: HashMap<usize, &str> = c
        .acks
        .iter()
        .map(|a| (a.buyer, a.user_id.as_str()))
        .collect();
    let user_of = |buyer: usize| -> Option<String> {
        acked_user.get(&buyer).map(|u| u.to_string()).or_else(|| {
            e.users
                .and_then(|s| s.user_id(buyer))
                .map(|u| u.to_string())
        })
    };
    // One potential order per key sent (a retry under it is the same order), else per attempt.
    let mut groups: HashMap<(usize, &str), (usize, Classes)> = HashMap::new();
    for (i, a) in c.attempts.iter().enumerate() {
        if a.class == AnswerClass::Acknowledged && a.order_id.is_some() {
            continue;
        }
        if e.reading.keys_sent && used_keys.contains(&*a.key) {
            continue;
        }
        let name = if e.reading.keys_sent {
            (usize::MAX, &*a.key)
        } else {
            (i, "")
        };
        groups
            .entry(name)
            .or_insert((a.buyer, Classes::default()))
            .1
            .add(a);
    }
    // What each user's attempts can explain: acknowledged, indeterminate, refused.
    let wanted: HashSet<&str> = left.iter().map(|o| o.user_id.as_str()).collect();
    let mut budget: HashMap<String, [u64; 3]> = HashMap::new();
    let mut known_users = 0usize;
    for (buyer, classes) in groups.into_values() {
        let Some(user) = user_of(buyer).filter(|u| wanted.contains(u.as_str())) else {
            continue;
        };
        let b = budget.entry(user).or_insert_with(|| {
            known_users += 1;
            [0; 3]
        });
        if classes.acked {
            b[0] += 1;
        } else if classes.indeterminate {
            b[1] += 1;
        } else if classes.refused {
            b[2] += 1;
        }
    }
    let mut s = Sorted::default();
    for o in left {
        let user = o.user_id.as_str();
        let slot = budget
            .get_mut(user)
            .and_then(|b| b.iter_mut().enumerate().find(|(_, n)| **n > 0));
        match slot {
            Some((class, n)) => {
                *n -= 1;
                s.by_buyer += 1;
                match class {
                    0 => s.acknowledged += 1,
                    1 => s.indeterminate_committed += 1,
                    _ => s.refused_committed += 1,
                }
            }
            None => *s.phantom.get_or_insert(0) += 1,
        }
    }
    // A row is a phantom only if the run can tell buyers apart in the rows: some row's user is
    // one of this run's. Otherwise the shop's user ids are not the run's: nothing is known.
    s.phantom = (ours || known_users > 0).then(|| s.phantom.unwrap_or(0));
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
