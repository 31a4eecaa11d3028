//! Which oracle judged a run, what it can and cannot see, and the clients' own evidence beside
//! it: client-observed oversell and duplicates, the stock's samples, where the oracle and the
//! clients disagree, and what the adversarial buyers found.

use super::{opt, pct, Fact};
use crate::oracle::Findings;

/// Which oracle judged, what it can and cannot see, and the clients' own evidence beside it.
/// `**…**` marks what a reader must not miss (bold in Markdown and HTML).
pub(super) fn oracle_and_clients(f: &Findings) -> Vec<Fact> {
    let mut v: Vec<Fact> = vec![format!("oracle: {}", f.truth_source).into()];
    if !f.oracle_sees.is_empty() {
        v.push(format!("the oracle sees: {}", f.oracle_sees).into());
        v.push(format!("the oracle cannot see: {}", f.oracle_blind_to).into());
    }
    if let Some(w) = &f.oracle_warning {
        v.push(Fact {
            lead: Some("warning: "),
            text: w.clone(),
        });
    }
    if let Some(c) = f.client_oversell {
        v.push(format!(
            "client evidence: {} acknowledged, {} restocked as the run saw it, {} units held for {}: client-observed oversell {c}",
            f.acknowledged,
            opt(f.restocks_seen),
            f.client_net_acks,
            f.initial_stock
        ).into());
    }
    v.extend(client_peak(f));
    v.extend(client_duplicates(f));
    v.extend(stock_samples(f));
    if let Some(n) = f.shop_released_acks.filter(|n| *n > 0) {
        v.push(format!(
            "the shop cancelled {n} acknowledged orders itself: its rows show them cancelled or expired and no client cancelled them (not lost orders)"
        ).into());
    }
    v.extend(disagreement(f));
    v.extend(unclassified(f));
    for n in &f.client_notes {
        v.push(format!("note: {n}").into());
    }
    v
}

/// `lead` and `text` when `alarm`, else `quiet` and `text`: a finding that is only bold when
/// it found something.
fn flagged(alarm: bool, lead: &'static str, quiet: &str, text: String) -> Fact {
    if alarm {
        Fact {
            lead: Some(lead),
            text,
        }
    } else {
        format!("{quiet}{text}").into()
    }
}

/// The clients' records replayed in time: the most units provably held at once.
fn client_peak(f: &Findings) -> Option<Fact> {
    let (Some(held), Some(p)) = (f.client_peak_held, f.client_peak_oversell) else {
        return None;
    };
    let held_as = match f.payment_window_s {
        Some(w) if w >= crate::oracle::NEVER_RELEASED_S => "from each acknowledgement until its cancel was sent: the shop has no payment step, so no order is released unpaid".into(),
        Some(w) => format!("from each acknowledgement until its cancel was sent, or {w} s after an unpaid order's send"),
        None => "paid orders only, from the payment's answer until a cancel was sent: no payment window declared".into(),
    };
    let text = format!(
        "at most {held} units provably held at once ({held_as}) for {}: client-observed peak oversell {p}",
        f.initial_stock
    );
    let lead = "client-observed peak oversell: ";
    Some(flagged(p > 0, lead, "client-observed peak: ", text))
}

/// Users and devices the clients' records show holding more than the purchase limit.
fn client_duplicates(f: &Findings) -> Option<Fact> {
    let (Some(b), Some(d)) = (f.client_duplicate_buyers, f.client_duplicate_devices) else {
        return None;
    };
    let text = format!(
        "{b} users and {d} devices held more distinct orders at once than the purchase limit (clients' records)"
    );
    let lead = "client-observed duplicate buyers: ";
    Some(flagged(
        b + d > 0,
        lead,
        "client-observed duplicates: ",
        text,
    ))
}

/// The stock's readings during the sale and the stock-side peak oversell.
fn stock_samples(f: &Findings) -> Option<Fact> {
    let (Some(n), Some(s)) = (f.stock_samples, f.stock_peak_oversell) else {
        return None;
    };
    let text = format!(
        "{n} readings of the stock during the sale (lowest {}, highest {}); held + stock above the initial {}: stock-side peak oversell {s}",
        opt(f.min_stock_seen),
        opt(f.max_stock_seen),
        f.initial_stock
    );
    Some(flagged(
        s > 0,
        "stock-side peak oversell: ",
        "stock sampled: ",
        text,
    ))
}

/// Whether the oracle counts at least what the clients were told.
fn disagreement(f: &Findings) -> Option<Fact> {
    match (f.oracle_disagreement, f.sold) {
        (Some(d), Some(sold)) if d > 0 => Some(Fact {
            lead: Some("the oracle disagrees with the clients"),
            text: format!(
                ": it counts {sold} sold, clients were told {}: at least {d} acknowledged orders are missing from its count (a lower bound on lost acknowledged orders)",
                f.client_net_acks
            ),
        }),
        (Some(_), Some(_)) => Some(
            String::from("the oracle agrees with the clients (it counts at least what they were told)")
                .into(),
        ),
        _ => None,
    }
}

/// Answers no rule of `[target]` classified, with the mapping's advice.
fn unclassified(f: &Findings) -> Option<Fact> {
    (f.unclassified > 0).then(|| Fact {
        lead: Some("answers no rule of [target] classified: "),
        text: format!(
            "{} of {} ({}, bound {}): {}",
            f.unclassified,
            f.answers,
            f.unclassified_share.map_or("n/a".into(), pct),
            f.max_unclassified.map_or("n/a".into(), pct),
            f.mapping_advice.join("; ")
        ),
    })
}

/// What the adversarial buyers found: wrong answers and keys that bought twice, with examples.
pub(super) fn adversarial(f: &Findings) -> Vec<String> {
    let mut v = Vec::new();
    if let (Some(n), Some(wrong)) = (f.follow_ups.filter(|n| *n > 0), f.wrong_answers) {
        v.push(format!(
            "adversarial buyers: {n} orders followed a script; {wrong} answered as no correct shop answers (wrong answers, clients' records)"
        ));
    }
    for w in f.wrong_answer_examples.iter().take(5) {
        v.push(format!(
            "wrong answer: {} order {} (key {}): {}: {}",
            w.script.as_str(),
            w.order_id.as_deref().unwrap_or("without id"),
            w.key,
            w.sequence,
            w.why.as_str()
        ));
    }
    if let Some(n) = f.duplicate_orders_per_key.filter(|n| *n > 0) {
        v.push(format!(
            "{n} orders beyond the first bought under one Idempotency-Key (duplicate orders per key)"
        ));
    }
    for d in f.duplicate_key_examples.iter().take(5) {
        v.push(format!(
            "key {} bought {} ({})",
            d.key,
            d.order_ids.join(", "),
            d.seen_in
        ));
    }
    v
}
