//! The oracle: audits the final database and Redis state against what every client was told.
//!
//! Nothing here is assumed from a strategy's name. Given the orders in the database after the
//! queue has drained (or, for a foreign shop, the totals its owner's query returns) and the
//! clients' records, it computes the brief's definitions (§4):
//! - sold = units of orders not cancelled/expired; oversell = max(0, sold − initial);
//! - conservation: db stock + sold = initial (drift reported otherwise), and for redis-lua
//!   Redis stock after reconciliation = db stock;
//! - lost acknowledged orders: a 201 order id the database does not have; phantom orders: an
//!   order the database has that no client was told about (e.g. its client timed out);
//! - duplicate buyers: users (and devices) holding more than the purchase limit;
//! - undersell: units left unsold while buyers were turned away;
//! - dead letters (redis-lua): stream entries the database refused N times and the shop moved
//!   aside. A dead-lettered acknowledged order has no row, so it IS a lost acknowledged order
//!   from its client's point of view: it is counted there, and also said to be dead-lettered.

use crate::model::{Order, OrderStatus};
use crate::traffic::recorder::{Measurements, Told};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};

/// What the oracle knows of the server side.
#[derive(Debug, Clone)]
pub enum Truth {
    /// Every order row and the stock (the reference shop, or a shop whose tables we can read).
    Orders { db_stock: i64, orders: Vec<Order> },
    /// Totals from a user's query or endpoint: units sold and, optionally, stock left.
    Totals { sold: i64, stock: Option<i64> },
    /// Nothing: only the clients' side can be shown.
    Unverified,
}

/// Everything the oracle needs.
#[derive(Debug, Clone)]
pub struct Evidence<'a> {
    pub initial_stock: i64,
    pub purchase_limit: i64,
    pub truth: Truth,
    /// Where `truth` came from, for the report.
    pub truth_source: String,
    /// redis-lua: Redis stock after the final reconciliation.
    pub redis_stock: Option<i64>,
    /// redis-lua: the residual the final reconciliation found (before correcting it).
    pub reconcile_residual: Option<i64>,
    /// Lowest and highest database stock the probe saw during the run.
    pub stock_seen: Option<(i64, i64)>,
    /// redis-lua: orders the restock script's idempotency set says were restocked.
    pub redis_restocked_orders: Option<i64>,
    /// redis-lua: the item's dead-letter stream.
    pub dead_letters: Option<Vec<DeadLetterSeen>>,
    pub clients: &'a Measurements,
}

/// One dead-lettered stream entry, as the oracle reads it from Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterSeen {
    pub order_id: String,
    /// The entry's type: `order`, `pay`, `cancel`, `expire`.
    pub kind: String,
    /// The order's state in Redis when the entry was dead-lettered.
    pub was: String,
}

/// The oracle's findings for one run.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Findings {
    /// False when no server-side truth was available: oversell could not be verified.
    pub verified: bool,
    pub truth_source: String,
    pub initial_stock: i64,
    pub sold: Option<i64>,
    pub oversell: Option<i64>,
    pub undersell: Option<i64>,
    pub negative_stock: Option<bool>,
    pub db_stock: Option<i64>,
    pub redis_stock: Option<i64>,
    /// initial − (db stock + sold): positive = leaked units, negative = phantom units.
    pub conservation_drift: Option<i64>,
    /// Redis stock − db stock after reconciliation (redis-lua).
    pub redis_drift: Option<i64>,
    pub reconcile_residual: Option<i64>,
    pub orders_by_status: BTreeMap<String, i64>,
    pub acknowledged: u64,
    pub lost_acks: Option<u64>,
    /// Up to 20 of the lost order ids.
    pub lost_ack_examples: Vec<String>,
    /// redis-lua: stream entries the database refused and the shop dead-lettered.
    #[serde(default)]
    pub dead_letters: Option<u64>,
    /// redis-lua: lost acknowledged orders that were dead-lettered (counted in `lost_acks` too).
    #[serde(default)]
    pub lost_acks_dead_lettered: Option<u64>,
    pub phantom_orders: Option<u64>,
    pub duplicate_buyers: Option<u64>,
    pub duplicate_devices: Option<u64>,
    /// Clients told "paid" whose order is not paid, or told "cancelled" whose order still holds
    /// stock.
    pub status_mismatches: Option<u64>,
    /// Units held by bots, and their share of everything sold (fairness).
    pub bot_units: Option<i64>,
    pub bot_share_of_units: Option<f64>,
    /// The most units held beyond the stock at any moment, replayed from the orders' own
    /// timestamps (created, and released for cancelled/expired ones). Oversell that later
    /// cancels covered up still shows here.
    pub peak_oversell: Option<i64>,
    /// Lowest database stock sampled during the run (negative = oversold at that moment).
    pub min_stock_seen: Option<i64>,
    /// Highest database stock sampled; above the initial stock means units were restocked
    /// more than once.
    pub max_stock_seen: Option<i64>,
    /// redis-lua: released orders (cancelled + expired) in the database, plus dead-lettered
    /// orders Redis had released before they were dead-lettered, minus orders Redis restocked;
    /// non-zero means a release was restocked twice or never.
    pub restock_mismatch: Option<i64>,
    /// People (not bots) who tried to order and never got one.
    pub turned_away_buyers: u64,
    /// Client-side only: acknowledged orders minus those the client itself cancelled.
    pub client_net_acks: i64,
    pub verdict: String,
}

/// Audits one run.
pub fn audit(e: &Evidence<'_>) -> Findings {
    let c = e.clients;
    let acked: HashSet<&str> = c.acks.iter().map(|a| a.order_id.as_str()).collect();
    let cancelled_by_clients = c.told.values().filter(|t| **t == Told::Cancelled).count() as i64;
    let turned_away = c
        .buyers
        .values()
        .filter(|b| !b.bot && b.attempted && !b.got_order)
        .count() as u64;
    let mut f = Findings {
        truth_source: e.truth_source.clone(),
        initial_stock: e.initial_stock,
        acknowledged: c.acks.len() as u64,
        turned_away_buyers: turned_away,
        client_net_acks: c.acks.len() as i64 - cancelled_by_clients,
        redis_stock: e.redis_stock,
        reconcile_residual: e.reconcile_residual,
        min_stock_seen: e.stock_seen.map(|s| s.0),
        max_stock_seen: e.stock_seen.map(|s| s.1),
        dead_letters: e.dead_letters.as_ref().map(|d| d.len() as u64),
        ..Findings::default()
    };
    let (sold, stock) = match &e.truth {
        Truth::Unverified => {
            f.verdict = unverified_verdict(&f);
            return f;
        }
        Truth::Totals { sold, stock } => (*sold, *stock),
        Truth::Orders { db_stock, orders } => {
            let sold: i64 = orders
                .iter()
                .filter(|o| o.status.holds_stock())
                .map(|o| o.qty)
                .sum();
            orders_findings(&mut f, orders, &acked, e);
            (sold, Some(*db_stock))
        }
    };
    f.verified = true;
    f.sold = Some(sold);
    f.oversell = Some((sold - e.initial_stock).max(0));
    f.undersell = Some((e.initial_stock - sold).max(0).min(turned_away as i64));
    f.db_stock = stock;
    f.negative_stock = stock.map(|s| s < 0);
    f.conservation_drift = stock.map(|s| e.initial_stock - (s + sold));
    f.redis_drift = match (e.redis_stock, stock) {
        (Some(r), Some(d)) => Some(r - d),
        _ => None,
    };
    f.verdict = verdict(&f);
    f
}

fn orders_findings(f: &mut Findings, orders: &[Order], acked: &HashSet<&str>, e: &Evidence<'_>) {
    let in_db: HashMap<&str, &Order> = orders.iter().map(|o| (o.id.as_str(), o)).collect();
    let lost: Vec<&str> = e
        .clients
        .acks
        .iter()
        .map(|a| a.order_id.as_str())
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
    f.phantom_orders = Some(
        orders
            .iter()
            .filter(|o| !acked.contains(o.id.as_str()))
            .count() as u64,
    );
    for st in OrderStatus::ALL {
        f.orders_by_status.insert(st.as_str().to_string(), 0);
    }
    let mut by_user: HashMap<&str, i64> = HashMap::new();
    let mut by_device: HashMap<&str, i64> = HashMap::new();
    for o in orders {
        *f.orders_by_status
            .entry(o.status.as_str().to_string())
            .or_default() += 1;
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
    f.peak_oversell = Some((peak_held(orders) - e.initial_stock).max(0));
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
                Told::Paid => o.status != OrderStatus::Paid,
                Told::Cancelled => o.status.holds_stock(),
            },
            None => false,
        })
        .count();
    f.status_mismatches = Some(mismatches as u64);
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

fn verdict(f: &Findings) -> String {
    let sold = f.sold.unwrap_or(0);
    let mut parts = vec![match (f.oversell, f.peak_oversell) {
        (Some(o), _) if o > 0 => format!("sold {sold} of {}: oversold {o}", f.initial_stock),
        (_, Some(p)) if p > 0 => format!(
            "sold {sold} of {}: no oversell at the end, but {p} units were oversold at the peak (later releases covered them)",
            f.initial_stock
        ),
        _ => format!("sold {sold} of {}: no oversell", f.initial_stock),
    }];
    if let (Some(o), Some(p)) = (f.oversell, f.peak_oversell) {
        if o > 0 && p > o {
            parts.push(format!("{p} oversold at the peak"));
        }
    }
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
    if let Some(d) = f.dead_letters.filter(|d| *d > 0) {
        parts.push(format!("{d} stream entries dead-lettered"));
    }
    if let Some(d) = f.duplicate_buyers.filter(|d| *d > 0) {
        parts.push(format!("{d} buyers hold more than the limit"));
    }
    if let Some(d) = f.conservation_drift.filter(|d| *d != 0) {
        parts.push(format!("conservation drift {d}"));
    }
    if let Some(d) = f.redis_drift.filter(|d| *d != 0) {
        parts.push(format!("Redis differs from the database by {d}"));
    }
    if let Some(u) = f.undersell.filter(|u| *u > 0) {
        parts.push(format!(
            "{u} units left unsold while buyers were turned away"
        ));
    }
    parts.join("; ")
}

fn unverified_verdict(f: &Findings) -> String {
    let mut v = format!(
        "oversell not verified (no server-side oracle); clients hold {} acknowledged orders net of their own cancels for {} units",
        f.client_net_acks, f.initial_stock
    );
    if f.client_net_acks > f.initial_stock {
        v.push_str(&format!(
            ": acknowledgements exceed stock by {}, which is oversell unless units were restocked by expiry",
            f.client_net_acks - f.initial_stock
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::recorder::{Ack, BuyerResult};

    fn order(id: &str, user: &str, status: OrderStatus) -> Order {
        Order {
            id: id.into(),
            item_id: 1,
            user_id: user.into(),
            device_id: Some(format!("d-{user}")),
            qty: 1,
            status,
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    fn clients(acks: &[(&str, &str)]) -> Measurements {
        Measurements {
            histograms: Default::default(),
            order_intervals: vec![],
            timeline: vec![],
            acks: acks
                .iter()
                .enumerate()
                .map(|(i, (id, user))| Ack {
                    order_id: id.to_string(),
                    buyer: i,
                    user_id: user.to_string(),
                    device_id: format!("d-{user}"),
                    bot: user.starts_with("bot"),
                    at_ms: 0,
                })
                .collect(),
            told: Default::default(),
            first_sold_out_ms: None,
            buyers: (0..5)
                .map(|i| {
                    (
                        i,
                        BuyerResult {
                            bot: false,
                            attempted: true,
                            got_order: i < 2,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn oversell_lost_acks_phantoms_and_duplicates_come_from_the_database() {
        let c = clients(&[("a", "u1"), ("b", "u2"), ("c", "bot1"), ("lost", "u3")]);
        let orders = vec![
            order("a", "u1", OrderStatus::Paid),
            order("b", "u2", OrderStatus::PendingPayment),
            order("c", "bot1", OrderStatus::Paid),
            order("c2", "bot1", OrderStatus::Paid),
            order("x", "u9", OrderStatus::Cancelled),
        ];
        let f = audit(&Evidence {
            initial_stock: 3,
            purchase_limit: 1,
            truth: Truth::Orders {
                db_stock: -1,
                orders,
            },
            truth_source: "test".into(),
            redis_stock: None,
            reconcile_residual: None,
            stock_seen: None,
            redis_restocked_orders: None,
            dead_letters: None,
            clients: &c,
        });
        assert_eq!(f.sold, Some(4));
        assert_eq!(f.oversell, Some(1));
        assert_eq!(f.negative_stock, Some(true));
        assert_eq!(f.conservation_drift, Some(0));
        assert_eq!(f.lost_acks, Some(1));
        assert_eq!(f.lost_ack_examples, vec!["lost".to_string()]);
        assert_eq!(
            f.phantom_orders,
            Some(2),
            "c2 and x were never acknowledged"
        );
        assert_eq!(f.duplicate_buyers, Some(1));
        assert_eq!(f.bot_units, Some(2));
        assert!(f.verdict.contains("oversold 1"), "{}", f.verdict);
    }

    #[test]
    fn a_dead_lettered_acknowledged_order_is_lost_and_said_to_be_dead_lettered() {
        let c = clients(&[("a", "u1"), ("dl", "u2"), ("dl2", "u3")]);
        let letter = |id: &str, kind: &str, was: &str| DeadLetterSeen {
            order_id: id.into(),
            kind: kind.into(),
            was: was.into(),
        };
        // dl: refused while pending (dead-lettering released its unit); dl2: cancelled in
        // Redis (restocked there), then refused, then its cancel followed it aside.
        let letters = vec![
            letter("dl", "order", "pending_payment"),
            letter("dl2", "order", "cancelled"),
            letter("dl2", "cancel", "dead_lettered"),
        ];
        let evidence = |dead_letters| Evidence {
            initial_stock: 5,
            purchase_limit: 1,
            truth: Truth::Orders {
                db_stock: 4,
                orders: vec![order("a", "u1", OrderStatus::Paid)],
            },
            truth_source: "test".into(),
            redis_stock: Some(4),
            reconcile_residual: Some(0),
            stock_seen: None,
            redis_restocked_orders: Some(1),
            dead_letters,
            clients: &c,
        };
        let f = audit(&evidence(Some(letters)));
        assert_eq!(f.lost_acks, Some(2));
        assert_eq!(f.lost_acks_dead_lettered, Some(2));
        assert_eq!(f.dead_letters, Some(3));
        assert_eq!(
            f.restock_mismatch,
            Some(0),
            "dl2's restock is accounted for"
        );
        assert_eq!((f.conservation_drift, f.redis_drift), (Some(0), Some(0)));
        assert!(
            f.verdict
                .contains("lost 2 acknowledged orders (2 dead-lettered")
                && f.verdict.contains("3 stream entries dead-lettered"),
            "{}",
            f.verdict
        );
        // Without the dead-letter stream the same database shows an unexplained restock.
        let f = audit(&evidence(None));
        assert_eq!(
            (f.restock_mismatch, f.lost_acks_dead_lettered),
            (Some(-1), None)
        );
    }

    #[test]
    fn peak_oversell_replays_the_orders_history() {
        let at = |id: &str, status, c: i64, u: i64| Order {
            created_at_ms: c,
            updated_at_ms: u,
            ..order(id, id, status)
        };
        // Stock 2: three orders at t=1,2,3 (peak 3 held), one cancelled at t=4, one bought at t=4.
        let orders = vec![
            at("a", OrderStatus::Paid, 1, 1),
            at("b", OrderStatus::Cancelled, 2, 4),
            at("c", OrderStatus::Paid, 3, 3),
            at("d", OrderStatus::Paid, 4, 4),
        ];
        assert_eq!(peak_held(&orders), 3);
        // Released and re-bought in the same millisecond: never held twice.
        let orders = vec![
            at("a", OrderStatus::Expired, 1, 5),
            at("b", OrderStatus::Paid, 5, 5),
        ];
        assert_eq!(peak_held(&orders), 1);
    }

    #[test]
    fn undersell_counts_units_left_while_buyers_were_turned_away() {
        let c = clients(&[("a", "u1"), ("b", "u2")]);
        let orders = vec![
            order("a", "u1", OrderStatus::Paid),
            order("b", "u2", OrderStatus::Paid),
        ];
        let f = audit(&Evidence {
            initial_stock: 10,
            purchase_limit: 1,
            truth: Truth::Orders {
                db_stock: 8,
                orders,
            },
            truth_source: "test".into(),
            redis_stock: Some(8),
            reconcile_residual: Some(0),
            stock_seen: Some((8, 10)),
            redis_restocked_orders: None,
            dead_letters: None,
            clients: &c,
        });
        assert_eq!(f.oversell, Some(0));
        assert_eq!(
            f.undersell,
            Some(3),
            "8 left, but only 3 people were turned away"
        );
        assert_eq!(f.redis_drift, Some(0));
    }

    #[test]
    fn without_an_oracle_the_verdict_says_so() {
        let c = clients(&[("a", "u1"), ("b", "u2"), ("c", "u3")]);
        let f = audit(&Evidence {
            initial_stock: 2,
            purchase_limit: 1,
            truth: Truth::Unverified,
            truth_source: "none".into(),
            redis_stock: None,
            reconcile_residual: None,
            stock_seen: None,
            redis_restocked_orders: None,
            dead_letters: None,
            clients: &c,
        });
        assert!(!f.verified);
        assert_eq!(f.oversell, None);
        assert!(
            f.verdict.contains("not verified") && f.verdict.contains("exceed stock by 1"),
            "{}",
            f.verdict
        );
    }
}
