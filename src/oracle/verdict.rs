//! The one-line verdict of a run: the mapping first when it left too many answers unread, then
//! what the server-side oracle found (or that there was none), then what the clients' own
//! evidence shows beside it.

use super::Findings;

/// The verdict for `f`.
pub(super) fn render(f: &Findings) -> String {
    let mut parts = Vec::new();
    if f.mapping_incomplete() {
        parts.push(format!(
            "MAPPING INCOMPLETE: {} of {} answers ({:.2} %) matched no rule of [target] (bound {:.2} %), so these figures cannot be trusted; {}",
            f.unclassified,
            f.answers,
            f.unclassified_share.unwrap_or(0.0) * 100.0,
            f.max_unclassified.unwrap_or(0.0) * 100.0,
            f.mapping_advice.first().map_or("", String::as_str)
        ));
    }
    if f.nothing_sold {
        let why = if f.unauthorized > 0 {
            format!(
                " ({} order attempts were unauthorized: the shop refused the harness's credentials)",
                f.unauthorized
            )
        } else {
            String::new()
        };
        parts.push(format!(
            "the shop accepted no order: this run tested nothing{why}"
        ));
    }
    let client_oversell = f.client_oversell.unwrap_or(0);
    let clients_oversold =
        client_oversell > 0 || f.client_peak_oversell > Some(0) || f.stock_peak_oversell > Some(0);
    if f.verified {
        server(f, clients_oversold, &mut parts);
    } else {
        parts.push("oversell not verified by a server-side oracle (none given)".into());
    }
    if client_oversell > 0 || !f.verified {
        parts.push(format!(
            "clients were told {} orders and saw {} restocked: {} units acknowledged for {}{}",
            f.acknowledged,
            f.restocks_seen.unwrap_or(0),
            f.client_net_acks,
            f.initial_stock,
            if client_oversell > 0 {
                format!(": client-observed oversell {client_oversell}")
            } else {
                String::new()
            }
        ));
    }
    if let (Some(d), Some(sold)) = (f.oracle_disagreement.filter(|d| *d > 0), f.sold) {
        parts.push(format!(
            "the oracle disagrees with the clients: it counts {sold} sold, clients were told {}; at least {d} acknowledged orders are missing from its count{}",
            f.client_net_acks,
            if f.shop_released_acks.is_none() {
                " (lost, or cancelled by the shop itself: totals cannot tell which)"
            } else {
                ""
            }
        ));
    }
    // The shop's own cancellations explain oversell the clients saw covered up: say so, so
    // they do not read as lost orders.
    let oversold = f.client_oversell > Some(0) || f.client_peak_oversell > Some(0);
    if let Some(n) = f.shop_released_acks.filter(|n| *n > 0 && oversold) {
        parts.push(format!(
            "the shop cancelled {n} acknowledged orders itself (released in its rows, no client cancelled them: not lost orders)"
        ));
    }
    clients_replay(f, &mut parts);
    if let Some(d) = f.duplicate_acks.filter(|d| *d > 0) {
        parts.push(format!(
            "{d} order ids were acknowledged to more than one attempt"
        ));
    }
    if let Some(u) = f.undersell.filter(|u| *u > 0) {
        parts.push(format!(
            "{u} units left unsold while {} buyers were refused for reasons other than sold out (unauthorized, invalid, not found)",
            f.refused_buyers
        ));
    }
    if let Some(w) = f.wrong_answers.filter(|w| *w > 0) {
        parts.push(format!(
            "{w} adversarial buyers' orders were answered as no correct shop answers (wrong answers)"
        ));
    }
    if let Some(d) = f.duplicate_orders_per_key.filter(|d| *d > 0) {
        parts.push(format!(
            "{d} orders were bought again under an Idempotency-Key that had bought one"
        ));
    }
    if let Some(w) = &f.oracle_warning {
        parts.push(w.clone());
    }
    if f.unclassified > 0 && !f.mapping_incomplete() {
        parts.push(format!(
            "{} answers matched no rule of [target]",
            f.unclassified
        ));
    }
    parts.join("; ")
}

/// What the clients' records replayed in time show: the peak held, duplicate owners, and the
/// stock samples' excess.
fn clients_replay(f: &Findings, parts: &mut Vec<String>) {
    if let Some(p) = f.client_peak_oversell.filter(|p| *p > 0) {
        parts.push(format!(
            "clients provably held {} units at once for {}: client-observed peak oversell {p}",
            f.client_peak_held.unwrap_or(0),
            f.initial_stock
        ));
    }
    if let Some(s) = f.stock_peak_oversell.filter(|s| *s > 0) {
        parts.push(format!(
            "the stock sampled during the sale showed {s} units that cannot exist (held by clients + stock read, above the initial {}): stock-side peak oversell",
            f.initial_stock
        ));
    }
    if let Some(d) = f.client_duplicate_buyers.filter(|d| *d > 0) {
        parts.push(format!(
            "{d} users held more than the limit at once (clients' records)"
        ));
    }
    if let Some(d) = f.client_duplicate_devices.filter(|d| *d > 0) {
        parts.push(format!(
            "{d} devices held more than the limit at once (clients' records)"
        ));
    }
}

/// The post-mortem's words for an oversell: "107 orders for 100 units", then the peak and the
/// end apart (cancels can re-sell what the race oversold). Orders when every order its proof
/// names is of one unit, units otherwise.
fn headline(f: &Findings, oversell: i64, sold: i64) -> String {
    let stock = f.initial_stock;
    let proof = super::proof::of(&f.proofs, "oversell");
    let single = proof.is_some_and(|p| !p.orders.is_empty() && p.orders.iter().all(|o| o.qty == 1));
    let promised = stock + oversell;
    let lead = if single {
        format!("{promised} orders for {stock} units")
    } else {
        format!("{promised} units promised for {stock}")
    };
    let end = f.oversold_at_end.unwrap_or(0);
    let at_end = if end == oversell {
        format!("{oversell} oversold")
    } else if end > 0 {
        format!("{oversell} oversold at the peak, {end} still at the end")
    } else if f.peak_oversell > Some(0) {
        format!(
            "{oversell} oversold at the peak, none left at the end (later releases re-sold them)"
        )
    } else {
        format!("{oversell} oversold by the clients' records; the oracle counts none at the end")
    };
    format!("{lead}: {at_end} (sold {sold} of {stock})")
}

/// What the server-side oracle found. `clients_oversold`: the clients' evidence shows
/// oversell, so "no oversell" is only the oracle's view.
fn server(f: &Findings, clients_oversold: bool, parts: &mut Vec<String>) {
    let sold = f.sold.unwrap_or(0);
    let none = if clients_oversold {
        "the oracle sees no oversell"
    } else {
        "no oversell"
    };
    parts.push(match f.oversell.filter(|o| *o > 0) {
        Some(o) => headline(f, o, sold),
        None => format!("sold {sold} of {}: {none}", f.initial_stock),
    });
    if f.negative_stock == Some(true) {
        parts.push(format!("stock went negative ({})", f.db_stock.unwrap_or(0)));
    } else if let Some(min) = f.min_stock_seen.filter(|m| *m < 0) {
        parts.push(format!("stock was negative during the run ({min})"));
    }
    if let Some(max) = f.max_stock_seen.filter(|m| *m > f.initial_stock) {
        parts.push(format!(
            "stock rose above the initial {} (to {max})",
            f.initial_stock
        ));
    }
    if let Some(m) = f.restock_mismatch.filter(|m| *m != 0) {
        parts.push(format!("restocks do not match releases ({m})"));
    }
    if let Some(l) = f.lost_acks.filter(|l| *l > 0) {
        match f.lost_acks_dead_lettered.filter(|d| *d > 0) {
            Some(d) => parts.push(format!(
                "lost {l} acknowledged orders ({d} dead-lettered: the database refused them)"
            )),
            None => parts.push(format!("lost {l} acknowledged orders")),
        }
    }
    if let Some(c) = f.cancelled_by_shop.filter(|c| *c > 0) {
        parts.push(format!(
            "{c} acknowledged orders were cancelled by the shop itself (a released status no client asked for; not lost)"
        ));
    }
    if let Some(d) = f.dead_letters.filter(|d| *d > 0) {
        parts.push(format!("{d} stream entries dead-lettered"));
    }
    if let Some(p) = f.phantom_orders.filter(|p| *p > 0) {
        parts.push(format!(
            "{p} phantom orders (no request of this run asked for them)"
        ));
    }
    if let Some(r) = f.refused_committed.filter(|r| *r > 0) {
        parts.push(format!(
            "{r} orders committed for requests the shop refused"
        ));
    }
    if let Some(i) = f.indeterminate_committed.filter(|i| *i > 0) {
        parts.push(format!(
            "{i} of {} indeterminate order attempts committed (their clients were never told)",
            f.indeterminate
        ));
    }
    if let Some(m) = f.status_mismatches.filter(|m| *m > 0) {
        parts.push(format!(
            "{m} orders are not in the state their clients were told (paid or cancelled)"
        ));
    }
    if let Some(d) = f.duplicate_buyers.filter(|d| *d > 0) {
        parts.push(format!("{d} buyers hold more than the limit"));
    }
    if let Some(d) = f.duplicate_devices.filter(|d| *d > 0) {
        parts.push(format!("{d} devices hold more than the limit"));
    }
    if let Some(d) = f.conservation_drift.filter(|d| *d != 0) {
        parts.push(format!("conservation drift {d}"));
    }
    if let Some(d) = f.redis_drift.filter(|d| *d != 0) {
        parts.push(format!("Redis differs from the database by {d}"));
    }
}
