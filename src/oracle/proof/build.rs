//! Each failing finding's proof, from the rows the second pass kept, the clients' records and
//! the findings' own figures. A proof never claims more than its orders show: the tests
//! re-derive every one from the rows and the records (`tests/api/proofs.rs`).

use super::{Proof, ProofOrder, EXAMPLES, LISTED};
use crate::model::Order;
use crate::oracle::clients::ClientWitness;
use crate::oracle::replay::Held;
use crate::oracle::rows::Checked;
use crate::oracle::{Evidence, Findings};
use crate::traffic::recorder::{AckView, Measurements};
use hashbrown::{HashMap, HashSet};

/// Every proof of `f`'s failing findings (`checked`: the order rows' findings, when the oracle
/// read rows; `w`: what the clients' records showed).
pub(in crate::oracle) fn collect(
    f: &Findings,
    e: &Evidence<'_>,
    checked: Option<&Checked>,
    w: &ClientWitness,
) -> Vec<Proof> {
    let c = e.clients;
    let mut out = Vec::new();
    if let Some(rows) = checked {
        out.extend(rows_peak(rows, e));
        out.extend(rows_end(rows, e, f));
        for (user, orders) in &rows.witnesses().owners {
            out.push(rows_owner(user, orders, e));
        }
        if f.phantom_orders > Some(0) {
            out.push(phantoms(rows, f, e.opened_ms));
        }
    }
    let c_peak = w
        .peak
        .as_ref()
        .map(|(t, held)| clients_peak(*t, held, w.untimed, e));
    let rows_proved = out.iter().any(|p| p.proves("peak_oversell"));
    out.extend(c_peak.map(|mut p| {
        if !rows_proved {
            p.findings.push("oversell".into());
        }
        p
    }));
    if let Some((s, held)) = &w.sample {
        out.push(sample(s, held, e));
    }
    for (finding, owner) in [
        ("client_duplicate_buyers", &w.user),
        ("client_duplicate_devices", &w.device),
    ] {
        if let Some((who, held)) = owner {
            out.push(clients_owner(finding, who, held, e));
        }
    }
    if f.lost_acks > Some(0) {
        out.push(lost(f, c));
    }
    out.extend(per_key(f));
    out.extend(wrong(f));
    if let Some(l) = e.restocks.as_ref().filter(|l| l.extra_restocks > 0) {
        out.push(restocks(l, e, c));
    }
    let counted: Vec<Proof> = counts(f)
        .into_iter()
        .filter(|p| !out.iter().any(|q| q.proves(&p.findings[0])))
        .collect();
    out.extend(counted);
    headline(f, &mut out);
    out.extend(remaining(f, &out));
    out
}

/// The headline's proof: the first proof of an oversell it rests on, when none names it yet.
fn headline(f: &Findings, out: &mut [Proof]) {
    if f.oversell <= Some(0) || out.iter().any(|p| p.proves("oversell")) {
        return;
    }
    let rest = [
        "peak_oversell",
        "client_peak_oversell",
        "oversold_at_end",
        "client_oversell",
    ];
    if let Some(p) = rest
        .iter()
        .find_map(|m| out.iter().position(|p| p.proves(m)))
    {
        out[p].findings.push("oversell".into());
    }
}

/// Every other correctness finding above 0 with no proof of its own yet: its figure and where
/// it was read, so no FAIL of the oracle goes without one.
fn remaining(f: &Findings, out: &[Proof]) -> Vec<Proof> {
    let n = |v: Option<u64>| v.map(|v| v as i64);
    let figures: [(&str, Option<i64>, &str, &str); 12] = [
        (
            "oversold_at_end",
            f.oversold_at_end,
            "units sold beyond the stock after the run settled",
            "the oracle's sold against the initial stock",
        ),
        (
            "oversell",
            f.oversell,
            "units promised beyond the stock",
            "the oracle",
        ),
        (
            "duplicate_acks",
            n(f.duplicate_acks),
            "order ids acknowledged to more than one attempt",
            "the clients' acknowledgements (order ids and keys)",
        ),
        (
            "refused_committed",
            n(f.refused_committed),
            "orders committed for requests the shop refused",
            "the order rows' idempotency keys against the attempts' answers",
        ),
        (
            "indeterminate_committed",
            n(f.indeterminate_committed),
            "orders committed whose clients were never told",
            "the order rows' idempotency keys against the attempts' answers",
        ),
        (
            "dead_letters",
            n(f.dead_letters),
            "stream entries the database refused, moved aside",
            "Redis's dead-letter stream",
        ),
        (
            "duplicate_devices",
            n(f.duplicate_devices),
            "devices holding more than the purchase limit",
            "the order rows' device ids",
        ),
        (
            "status_mismatches",
            n(f.status_mismatches),
            "orders not in the state their clients were told (paid or cancelled)",
            "the order rows' statuses against the clients' pay and cancel answers",
        ),
        (
            "redis_drift",
            f.redis_drift.filter(|d| *d != 0),
            "Redis's stock minus the database's after reconciliation",
            "Redis and the item's row",
        ),
        (
            "reconcile_residual",
            f.reconcile_residual.filter(|d| *d != 0),
            "the residual the final reconciliation corrected",
            "the shop's reconciliation",
        ),
        (
            "undersell",
            f.undersell,
            "units left unsold while buyers were refused for reasons other than sold out",
            "the clients' answers against the stock",
        ),
        (
            "nothing_sold",
            i64::from(f.nothing_sold).into(),
            "the item had stock and the shop acknowledged no order: the run tested nothing",
            "the clients' acknowledgements",
        ),
    ];
    figures
        .into_iter()
        .filter(|(m, v, _, _)| v.is_some_and(|v| v != 0) && !out.iter().any(|p| p.proves(m)))
        .map(|(m, v, what, source)| Proof {
            findings: vec![m.to_string()],
            claim: format!("{}: {what}", v.unwrap_or(0)),
            source: source.into(),
            ..Proof::default()
        })
        .collect()
}

/// The orders of `acks` named by `ids`, by id (the first acknowledgement of each).
fn acks_of<'a>(c: &'a Measurements, ids: &HashSet<&str>) -> HashMap<&'a str, AckView<'a>> {
    let mut by = HashMap::new();
    for a in c.acks() {
        if let Some(id) = a.order_id.filter(|id| ids.contains(id)) {
            by.entry(id).or_insert(a);
        }
    }
    by
}

/// A row as a proof order, with what its client was told of it (if anything).
fn row_order(o: &Order, ack: Option<&AckView<'_>>) -> ProofOrder {
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
fn ack_order(a: &AckView<'_>) -> ProofOrder {
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
fn joined(rows: &[&Order], c: &Measurements) -> Vec<ProofOrder> {
    let ids: HashSet<&str> = rows.iter().map(|o| o.id.as_str()).collect();
    let acks = acks_of(c, &ids);
    rows.iter()
        .map(|o| row_order(o, acks.get(o.id.as_str())))
        .collect()
}

/// The fewest of `held` whose units exceed `stock`: the purchases that read the least stock
/// first (the race: [`races`]), then those a client was told of, then the latest; listed in
/// the order they were created.
fn fewest_over<'a>(held: &'a [Order], stock: i64, acked: &HashSet<&str>) -> Vec<&'a Order> {
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
fn races(orders: &[ProofOrder]) -> Vec<String> {
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
fn rows_peak(rows: &Checked, e: &Evidence<'_>) -> Option<Proof> {
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
fn rows_end(rows: &Checked, e: &Evidence<'_>, f: &Findings) -> Option<Proof> {
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
fn rows_owner(user: &str, orders: &[Order], e: &Evidence<'_>) -> Proof {
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
fn phantoms(rows: &Checked, f: &Findings, opened: Option<i64>) -> Proof {
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

/// The acknowledgements of `held`, as proof orders.
fn held_orders(held: &[Held], c: &Measurements) -> Vec<ProofOrder> {
    held.iter()
        .map(|h| ack_order(&c.records.ack(h.ack)))
        .collect()
}

/// The peak the clients' records replayed: the instant, and the fewest acknowledged orders held
/// then that exceed the stock.
fn clients_peak(t: u64, held: &[Held], untimed: i64, e: &Evidence<'_>) -> Proof {
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
fn sample(s: &crate::oracle::StockSample, held: &[Held], e: &Evidence<'_>) -> Proof {
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
fn clients_owner(finding: &str, who: &str, held: &[Held], e: &Evidence<'_>) -> Proof {
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

/// The restock ledger's orders restocked twice, and restocks of orders still holding their
/// units: each order with its restocks.
fn restocks(l: &crate::store::RestockAnomalies, e: &Evidence<'_>, c: &Measurements) -> Proof {
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

/// Acknowledged orders missing from the rows.
fn lost(f: &Findings, c: &Measurements) -> Proof {
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

/// One Idempotency-Key that bought more than one order.
fn per_key(f: &Findings) -> Option<Proof> {
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
fn wrong(f: &Findings) -> Option<Proof> {
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
fn counts(f: &Findings) -> Vec<Proof> {
    let mut out = Vec::new();
    let mut count = |finding: &str, claim: String, source: &str| {
        out.push(Proof {
            findings: vec![finding.into()],
            claim,
            source: source.into(),
            ..Proof::default()
        });
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

/// An instant: `+1.234 s` after the sale opened when known, else the row's own clock.
fn when(after_open: Option<i64>, row_ms: i64) -> String {
    match after_open {
        Some(ms) => format!("+{}", seconds(ms)),
        None => format!("{row_ms} ms (the rows' clock)"),
    }
}

/// `ms` as seconds with milliseconds: `1.234 s`.
pub fn seconds(ms: i64) -> String {
    format!("{}.{:03} s", ms / 1000, (ms % 1000).abs())
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
