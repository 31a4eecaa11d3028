//! Proofs read from the order rows (the second pass's witnesses) and the restock ledger: the
//! peak and the end of an oversell with the race in the purchases' own reads, a buyer over the
//! limit, phantom rows, restocks a correct shop never makes.

use super::orders::{ack_order, acks_of, joined, row_order, seconds, when};
use super::{Proof, ProofOrder, EXAMPLES};
use crate::model::Order;
use crate::oracle::rows::Checked;
use crate::oracle::{Evidence, Findings};
use crate::traffic::recorder::Measurements;
use hashbrown::HashSet;

/// The fewest of `held` whose units exceed `stock`: the purchases that read the least stock
/// first (the race: [`races`]), then those a client was told of, then the latest; listed in
/// the order they were created.
pub(super) fn fewest_over<'a>(
    held: &'a [Order],
    stock: i64,
    acked: &HashSet<&str>,
) -> Vec<&'a Order> {
    let mut ranked: Vec<&Order> = held.iter().collect();
    ranked.sort_by_key(|o| {
        (
            o.stock_read.unwrap_or(i64::MAX),
            !acked.contains(o.id.as_str()),
            std::cmp::Reverse(o.created_at_ms),
            o.id.clone(),
        )
    });
    let mut units = 0;
    let mut chosen: Vec<&Order> = ranked
        .into_iter()
        .take_while(|o| {
            let more = units <= stock;
            units += o.qty;
            more
        })
        .collect();
    chosen.sort_by(|a, b| (a.created_at_ms, &a.id).cmp(&(b.created_at_ms, &b.id)));
    chosen
}

/// The race, in the orders' own reads: sorted by the stock each purchase read, the first `j`
/// of them all read at most `r` units left, `r` below the `j` units they took, and all were
/// sold — the `j` that took most beyond `r` (the smallest of those): "1-a (u-17) and 1-b
/// (u-903) both read stock 1 and both passed the check: 2 units sold where 1 was left". Every
/// set of more orders than the stock, each read at most the stock, holds one.
pub(super) fn races(orders: &[ProofOrder]) -> Vec<String> {
    let mut read: Vec<&ProofOrder> = orders.iter().filter(|o| o.stock_read.is_some()).collect();
    read.sort_by_key(|o| (o.stock_read, o.created_at_ms));
    // The prefix that took the most beyond what its reads said was left (the first of those):
    // the sharpest witness, "two read 1" where there is one.
    let mut units = 0;
    let mut witness: Option<(usize, i64, i64)> = None;
    for (i, o) in read.iter().enumerate() {
        units += o.qty;
        let r = o.stock_read.unwrap_or(0).max(0);
        if r < units && witness.is_none_or(|(_, wr, wu)| units - r > wu - wr) {
            witness = Some((i + 1, r, units));
        }
    }
    let Some((j, r, units)) = witness else {
        return Vec::new();
    };
    let group = &read[..j];
    let named = |o: &&ProofOrder| {
        format!(
            "{} ({})",
            o.id.as_deref().unwrap_or("?"),
            o.user.as_deref().unwrap_or("?")
        )
    };
    let created = group.iter().filter_map(|o| o.created_at_ms);
    let spread = created.clone().max().unwrap_or(0) - created.min().unwrap_or(0);
    let left = if r == 1 { "was" } else { "were" };
    let same = group.iter().all(|o| o.stock_read == group[0].stock_read);
    let line =
        match (j, same) {
            (2, true) => format!(
            "{} and {} both read stock {r} and both passed the check, {spread} ms apart: {units} \
             units sold where {r} {left} left",
            named(&group[0]),
            named(&group[1])
        ),
            (_, true) => format!(
                "{} orders all read stock {r} and all passed the check, within {spread} ms \
             (e.g. {}): {units} units sold where {r} {left} left",
                j,
                group
                    .iter()
                    .take(3)
                    .map(named)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => {
                format!(
            "the {j} purchases that read the least stock each read at most {r} left and all \
             passed the check, within {spread} ms (e.g. {}): {units} units sold where at most \
             {r} {left} left",
            group.iter().take(3).map(named).collect::<Vec<_>>().join(", ")
        )
            }
        };
    vec![line]
}

/// The peak the order rows replayed: the instant, and the fewest orders held then that exceed
/// the stock.
pub(super) fn rows_peak(rows: &Checked, e: &Evidence<'_>) -> Option<Proof> {
    let w = rows.witnesses();
    let t = w.peak_at?;
    let acked: HashSet<&str> = e.clients.acks().filter_map(|a| a.order_id).collect();
    let at_ms = e.opened_ms.map(|o| t - o);
    let units: i64 = w.peak.iter().map(|o| o.qty).sum();
    let mut p = Proof {
        findings: vec!["oversell".into(), "peak_oversell".into()],
        source: "order rows (created_at_ms, updated_at_ms, status, stock_read), joined with the \
                 clients' records by order id"
            .into(),
        at_ms,
        at_row_ms: Some(t),
        opened_at_ms: e.opened_ms,
        stock: Some(e.initial_stock),
        ..Proof::default()
    };
    if w.peak_rows as usize > w.peak.len() {
        p.unlisted = Some(w.peak_rows);
        p.claim = format!(
            "at {} {} orders were held at once for a stock of {}: the rows created by then and \
             not released by then (too many to list)",
            when(at_ms, t),
            w.peak_rows,
            e.initial_stock
        );
        return Some(p);
    }
    let chosen = fewest_over(&w.peak, e.initial_stock, &acked);
    p.orders = joined(&chosen, e.clients);
    p.claim = format!(
        "at {} the rows held {units} units for a stock of {}: these {} orders ({} units) were \
         all held at once",
        when(at_ms, t),
        e.initial_stock,
        p.orders.len(),
        p.units()
    );
    // The race over every row held then, not only those listed: the sharpest witness.
    let all: Vec<ProofOrder> = w.peak.iter().map(|o| row_order(o, None)).collect();
    p.facts = races(&all);
    Some(p)
}

/// More sold at the end than stocked: the fewest holding rows that exceed the stock.
pub(super) fn rows_end(rows: &Checked, e: &Evidence<'_>, f: &Findings) -> Option<Proof> {
    let w = rows.witnesses();
    if f.oversold_at_end <= Some(0) || (w.end.is_empty() && w.end_rows == 0) {
        return None;
    }
    let mut p = Proof {
        findings: vec!["oversold_at_end".into()],
        source: "order rows (status) after the run drained".into(),
        opened_at_ms: e.opened_ms,
        stock: Some(e.initial_stock),
        ..Proof::default()
    };
    if w.end_rows as usize > w.end.len() {
        p.unlisted = Some(w.end_rows);
        p.claim = format!(
            "after the run {} orders hold stock for a stock of {} (too many to list: every row \
             not cancelled or expired)",
            w.end_rows, e.initial_stock
        );
        return Some(p);
    }
    let acked: HashSet<&str> = e.clients.acks().filter_map(|a| a.order_id).collect();
    let chosen = fewest_over(&w.end, e.initial_stock, &acked);
    p.orders = joined(&chosen, e.clients);
    p.claim = format!(
        "after the run these {} orders ({} units) all still hold stock, for a stock of {}",
        p.orders.len(),
        p.units(),
        e.initial_stock
    );
    let all: Vec<ProofOrder> = w.end.iter().map(|o| row_order(o, None)).collect();
    p.facts = races(&all);
    Some(p)
}

/// A user holding more than the limit in the rows.
pub(super) fn rows_owner(user: &str, orders: &[Order], e: &Evidence<'_>) -> Proof {
    let rows: Vec<&Order> = orders.iter().collect();
    let orders = joined(&rows, e.clients);
    let units: i64 = orders.iter().map(|o| o.qty).sum();
    Proof {
        findings: vec!["duplicate_buyers".into()],
        claim: format!(
            "buyer {user} holds {units} units in {} orders after the run, with a purchase limit \
             of {}",
            orders.len(),
            e.purchase_limit
        ),
        source: "order rows (user_id, status)".into(),
        opened_at_ms: e.opened_ms,
        orders,
        ..Proof::default()
    }
}

/// Rows no request of this run asked for: those whose key the run never sent, then the rows
/// of buyers whose attempts explain fewer rows than they have.
pub(super) fn phantoms(rows: &Checked, f: &Findings, opened: Option<i64>) -> Proof {
    let n = f.phantom_orders.unwrap_or(0);
    let mut listed: Vec<ProofOrder> = rows
        .phantom_rows()
        .iter()
        .take(EXAMPLES)
        .map(|o| row_order(o, None))
        .collect();
    let mut facts = Vec::new();
    if !listed.is_empty() {
        facts.push(format!(
            "{} rows carry an Idempotency-Key no attempt of this run sent",
            listed.len()
        ));
    }
    for (user, over, user_rows) in &rows.witnesses().phantoms {
        facts.push(format!(
            "buyer {user} has {} rows no order id or key of this run names, {over} more than its \
             own attempts can explain (acknowledged, indeterminate or refused)",
            user_rows.len()
        ));
        listed.extend(user_rows.iter().map(|o| row_order(o, None)));
    }
    Proof {
        findings: vec!["phantom_orders".into()],
        claim: format!("{n} order rows were asked for by no request of this run"),
        source: "order rows (id, idempotency_key, user_id) against every attempt's id, key and \
                 buyer"
            .into(),
        opened_at_ms: opened,
        orders: listed,
        facts,
        ..Proof::default()
    }
}

/// The restock ledger's orders restocked twice, and restocks of orders still holding their
/// units: each order with its restocks.
pub(super) fn restocks(
    l: &crate::store::RestockAnomalies,
    e: &Evidence<'_>,
    c: &Measurements,
) -> Proof {
    let at = |ms: i64| match e.opened_ms {
        Some(open) => format!("+{}", seconds(ms - open)),
        None => format!("{ms} (the rows' clock)"),
    };
    let mut facts = Vec::new();
    let mut ids: Vec<&str> = Vec::new();
    for t in &l.twice {
        facts.push(format!(
            "order {} was restocked {} times, {} units in all: first at {}, last at {}",
            t.order_id,
            t.restocks,
            t.units,
            at(t.first_ms),
            at(t.last_ms)
        ));
        ids.push(&t.order_id);
    }
    for h in &l.held {
        facts.push(format!(
            "order {} was restocked at {} ({} units) and its row still holds them ({})",
            h.order_id,
            at(h.at_ms),
            h.qty,
            h.status
        ));
        ids.push(&h.order_id);
    }
    let wanted: HashSet<&str> = ids.iter().copied().collect();
    let acks = acks_of(c, &wanted);
    let orders = ids
        .iter()
        .map(|id| match acks.get(id) {
            Some(a) => ack_order(a),
            None => ProofOrder {
                id: Some(id.to_string()),
                qty: 1,
                ..ProofOrder::default()
            },
        })
        .collect();
    Proof {
        findings: vec!["restock_mismatch".into()],
        claim: format!(
            "{} restocks a correct shop never makes: units given back twice for one order, or \
             for an order that still holds them",
            l.extra_restocks
        ),
        source: "the shop's restock ledger (one row per restock, written with it), against the \
                 order rows"
            .into(),
        opened_at_ms: e.opened_ms,
        orders,
        facts,
        ..Proof::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(id: &str, stock_read: i64, created: i64) -> ProofOrder {
        ProofOrder {
            id: Some(id.into()),
            user: Some(format!("u-{id}")),
            qty: 1,
            created_at_ms: Some(created),
            stock_read: Some(stock_read),
            ..ProofOrder::default()
        }
    }

    #[test]
    fn the_race_is_the_fewest_purchases_that_read_less_stock_than_they_took() {
        // The post-mortem's reconstruction: two purchases both read 1.
        let both = [
            read("a", 3, 1),
            read("b", 1, 7),
            read("c", 1, 8),
            read("d", 2, 5),
        ];
        let lines = races(&both);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].starts_with("b (u-b) and c (u-c) both read stock 1")
                && lines[0].contains("2 units sold where 1 was left"),
            "{lines:?}"
        );
        // Spread over reads: three purchases read at most 2 left.
        let spread = [read("a", 2, 1), read("b", 2, 2), read("c", 1, 3)];
        let lines = races(&spread);
        assert!(
            lines[0].contains("the 3 purchases that read the least stock each read at most 2"),
            "{lines:?}"
        );
        // A correct shop's reads (the last unit read 1, the one before 2...): no race.
        let correct = [read("a", 3, 1), read("b", 2, 2), read("c", 1, 3)];
        assert!(races(&correct).is_empty());
        // More orders than the stock, each read at most the stock: always a race.
        let over: Vec<ProofOrder> = (0..21)
            .map(|i| read(&i.to_string(), 20 - i / 2, i))
            .collect();
        assert_eq!(races(&over).len(), 1);
    }
}
