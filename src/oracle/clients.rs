//! The clients' own evidence, judged on every run: what they were told, what the run saw given
//! back, and the answers the mapping could not read.
//!
//! - restocks seen: cancels answered `ok`, plus (when the oracle has order rows) acknowledged
//!   orders the database shows released that no client cancel accounts for;
//! - client-observed oversell = acknowledged − restocks seen − initial stock, floored at 0: the
//!   shop promised units it did not have, whatever its own counters say;
//! - the oracle disagrees with the clients when what they were told (net) is more than it
//!   counts as sold: a lower bound on acknowledged orders it lost (a stock-derived oracle under
//!   lost updates does exactly this);
//! - unclassified answers, with the rule that would classify them.

use super::{Evidence, Findings};
use crate::model::Order;
use crate::traffic::recorder::{Answer, AnswerClass, Kind, Told, UnclassifiedAnswer};
use std::collections::{HashMap, HashSet};

/// What the clients saw, before any server-side truth: acknowledgements, people turned away
/// (and those refused for another reason than sold out), whether anything was sold at all,
/// unclassified answers and what the run's mapping rules out.
pub(super) fn observe(f: &mut Findings, e: &Evidence<'_>) {
    let c = e.clients;
    f.acknowledged = c.acks.len() as u64;
    f.acks_without_id = c.acks.iter().filter(|a| a.order_id.is_none()).count() as u64;
    f.turned_away_buyers = c
        .buyers
        .values()
        .filter(|b| !b.bot && b.attempted && !b.got_order)
        .count() as u64;
    f.refused_buyers = refused_buyers(c);
    f.unauthorized = c
        .attempts
        .iter()
        .filter(|a| a.answer == Answer::Unauthorized)
        .count() as u64;
    f.nothing_sold = e.initial_stock > 0 && f.acknowledged == 0;
    f.indeterminate = c
        .attempts
        .iter()
        .filter(|a| a.class == AnswerClass::Indeterminate)
        .count() as u64;
    f.duplicate_acks = e.reading.order_id_field.as_ref().map(|_| duplicate_acks(c));
    f.answers = c.total_requests();
    f.unclassified = c.unclassified_requests();
    f.unclassified_share = (f.answers > 0).then(|| f.unclassified as f64 / f.answers as f64);
    f.max_unclassified = Some(e.reading.max_unclassified);
    f.unclassified_answers = c.unclassified.clone();
    f.mapping_advice = c.unclassified.iter().map(advice).collect();
    match &e.reading.order_id_field {
        None => f.client_notes.push(
            "the shop gives no order ids (target.order_id_field is not set): acknowledgements \
             are counted by answer, so two acknowledgements of one order cannot be told apart, \
             a lost acknowledged order can only be counted against the oracle's sold (never \
             named), and pay/cancel requests that need an order id are not sent"
                .into(),
        ),
        Some(field) if f.acks_without_id > 0 => f.client_notes.push(format!(
            "{} created answers carried no `{field}` (target.order_id_field): they count as \
             acknowledgements, but cannot be checked one by one, paid or cancelled",
            f.acks_without_id
        )),
        Some(_) => {}
    }
}

/// People (not bots) whose every order attempt was refused for a reason other than sold out:
/// unauthorized, invalid or not found.
fn refused_buyers(c: &crate::traffic::recorder::Measurements) -> u64 {
    let mut by_buyer: HashMap<usize, bool> = HashMap::new();
    for a in &c.attempts {
        let refused = matches!(
            a.answer,
            Answer::Unauthorized | Answer::Invalid | Answer::NotFound
        );
        *by_buyer.entry(a.buyer).or_insert(true) &= refused;
    }
    by_buyer
        .iter()
        .filter(|(b, refused)| **refused && c.buyers.get(b).is_some_and(|r| !r.bot))
        .count() as u64
}

/// Order ids acknowledged to more than one attempt. Two acknowledgements of one id under the
/// same key are one attempt told twice (a retry's replay); an acknowledgement without a key is
/// an attempt of its own.
fn duplicate_acks(c: &crate::traffic::recorder::Measurements) -> u64 {
    // Per order id: the keys it was told under, and how many keyless attempts were told it.
    let mut told: HashMap<&str, (HashSet<&str>, usize)> = HashMap::new();
    for a in &c.acks {
        let Some(id) = a.order_id.as_deref() else {
            continue;
        };
        let entry = told.entry(id).or_default();
        match a.key.as_deref() {
            Some(k) => {
                entry.0.insert(k);
            }
            None => entry.1 += 1,
        }
    }
    told.values()
        .filter(|(keys, keyless)| keys.len() + keyless > 1)
        .count() as u64
}

/// The rule to add for one kind of unclassified answer.
fn advice(u: &UnclassifiedAnswer) -> String {
    let seen = format!(
        "{} answered {} {} times (e.g. {:?})",
        u.kind.as_str(),
        u.status,
        u.count,
        u.sample
    );
    if (300..400).contains(&u.status) {
        return format!(
            "{seen}: the harness follows no redirect; point target.{}.path where the shop \
             redirects, or add a rule to target.outcomes for status \"{}\"",
            u.kind.as_str(),
            u.status
        );
    }
    let outcome = if u.kind == Kind::Order {
        "created"
    } else {
        "ok"
    };
    format!(
        "{seen}: add a rule to target.outcomes, e.g. {{ status = [\"{}\"], outcome = \"{outcome}\" }} \
         (with `field`/`equals` to tell it apart from other answers of that status)",
        u.status
    )
}

/// Judges the clients' evidence on its own and against the oracle's `sold` (when `f.sold`
/// is set); `orders`: the database's rows, when the oracle has them.
pub(super) fn judge(f: &mut Findings, e: &Evidence<'_>, orders: Option<&[Order]>) {
    let c = e.clients;
    let cancelled: HashSet<&str> = c
        .told
        .iter()
        .filter(|(_, t)| **t == Told::Cancelled)
        .map(|(id, _)| id.as_str())
        .collect();
    let released_unseen = orders.map_or(0, |orders| {
        let acked: HashSet<&str> = c
            .acks
            .iter()
            .filter_map(|a| a.order_id.as_deref())
            .collect();
        orders
            .iter()
            .filter(|o| !o.status.holds_stock())
            .filter(|o| acked.contains(o.id.as_str()) && !cancelled.contains(o.id.as_str()))
            .map(|o| o.qty)
            .sum::<i64>()
    });
    let restocks = c.cancels_ok as i64 + released_unseen;
    let net = f.acknowledged as i64 - restocks;
    f.restocks_seen = Some(restocks);
    f.client_net_acks = net;
    f.client_oversell = Some((net - e.initial_stock).max(0));
    f.oracle_disagreement = f.sold.map(|sold| (net - sold).max(0));
    let left = e.initial_stock - f.sold.unwrap_or(net);
    f.undersell = Some(left.max(0).min(f.refused_buyers as i64));
    let unseen_restocks_matter =
        orders.is_none() && (f.client_oversell > Some(0) || f.oracle_disagreement > Some(0));
    if unseen_restocks_matter {
        f.client_notes.push(
            "client evidence subtracts only the cancels clients saw answered ok: units the shop \
             released on its own during the run (unpaid orders expiring) and sold again are not \
             subtracted, so acknowledgements may legitimately exceed the stock by that many"
                .into(),
        );
    }
}
