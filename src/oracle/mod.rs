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
//!
//! The clients' own evidence is judged on every run, with or without a server oracle
//! (`clients`): acknowledged units minus the restocks the run saw, above the initial stock, is
//! client-observed oversell; a server oracle whose `sold` is below what clients were told
//! disagrees with the clients (the gap is a lower bound on lost acknowledged orders); answers
//! no rule of the mapping classified are counted, with the rule to add. `verdict` writes the
//! one-line verdict.

mod clients;
mod orders;
mod verdict;

pub use orders::peak_held;

use crate::model::Order;
use crate::traffic::recorder::{Measurements, UnclassifiedAnswer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// Which server-side oracle judged a run and what it can see, for the report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OracleView {
    /// Where the truth comes from: the tables, the SQL or the URL (credentials redacted).
    pub source: String,
    /// What it can see.
    pub sees: String,
    /// What it cannot see.
    pub blind_to: String,
    /// A caveat about its figures that the verdict repeats (e.g. sold derived from stock).
    pub warning: Option<String>,
}

/// How the clients' answers were read: the mapping facts the oracle needs.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Where a created order's answer carries its id (`None`: the shop gives no ids).
    pub order_id_field: Option<String>,
    /// The largest share of answers no rule may classify.
    pub max_unclassified: f64,
}

/// Everything the oracle needs.
#[derive(Debug, Clone)]
pub struct Evidence<'a> {
    pub initial_stock: i64,
    pub purchase_limit: i64,
    pub truth: Truth,
    /// Which oracle gave `truth`, for the report.
    pub oracle: OracleView,
    pub reading: Reading,
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

/// The oracle's findings for one run. Fields added after the first v2 reports read as absent
/// (`serde(default)`) from older files.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Findings {
    /// False when no server-side truth was available: oversell could not be verified.
    pub verified: bool,
    pub truth_source: String,
    /// What the server-side oracle can see.
    #[serde(default)]
    pub oracle_sees: String,
    /// What it cannot see.
    #[serde(default)]
    pub oracle_blind_to: String,
    /// A caveat about the oracle's figures (e.g. sold derived from stock under-counts).
    #[serde(default)]
    pub oracle_warning: Option<String>,
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
    /// Client-side: acknowledged units minus the restocks the run saw.
    pub client_net_acks: i64,
    /// Units the run saw restocked: cancels answered ok, plus (with order rows) acknowledged
    /// orders the database shows released.
    #[serde(default)]
    pub restocks_seen: Option<i64>,
    /// Client-observed oversell: acknowledged − restocks seen − initial stock, floored at 0.
    /// Measured on every run, with or without a server oracle.
    #[serde(default)]
    pub client_oversell: Option<i64>,
    /// With a server oracle: what clients were told (net) minus what it counts as sold, when
    /// positive ("the oracle disagrees with the clients"); a lower bound on lost acknowledged
    /// orders.
    #[serde(default)]
    pub oracle_disagreement: Option<i64>,
    /// Acknowledgements whose answer carried no order id.
    #[serde(default)]
    pub acks_without_id: u64,
    /// Every request the clients sent, answered or not.
    #[serde(default)]
    pub answers: u64,
    /// Answers no rule of the mapping classified (a 2xx or 3xx), of every kind.
    #[serde(default)]
    pub unclassified: u64,
    /// `unclassified / answers`.
    #[serde(default)]
    pub unclassified_share: Option<f64>,
    /// The bound on that share (`target.max_unclassified`).
    #[serde(default)]
    pub max_unclassified: Option<f64>,
    /// The unclassified answers by kind and status, each with a sample body.
    #[serde(default)]
    pub unclassified_answers: Vec<UnclassifiedAnswer>,
    /// Which rule to add for each kind of unclassified answer.
    #[serde(default)]
    pub mapping_advice: Vec<String>,
    /// What the clients' evidence cannot show in this run (no order ids, restocks unseen).
    #[serde(default)]
    pub client_notes: Vec<String>,
    pub verdict: String,
}

impl Findings {
    /// Whether more answers than the bound matched no rule: the run's figures cannot be
    /// trusted until the mapping classifies them.
    pub fn mapping_incomplete(&self) -> bool {
        match (self.unclassified_share, self.max_unclassified) {
            (Some(s), Some(max)) => s > max + 1e-12,
            _ => false,
        }
    }
}

/// Audits one run.
pub fn audit(e: &Evidence<'_>) -> Findings {
    let mut f = Findings {
        truth_source: e.oracle.source.clone(),
        oracle_sees: e.oracle.sees.clone(),
        oracle_blind_to: e.oracle.blind_to.clone(),
        oracle_warning: e.oracle.warning.clone(),
        initial_stock: e.initial_stock,
        redis_stock: e.redis_stock,
        reconcile_residual: e.reconcile_residual,
        min_stock_seen: e.stock_seen.map(|s| s.0),
        max_stock_seen: e.stock_seen.map(|s| s.1),
        dead_letters: e.dead_letters.as_ref().map(|d| d.len() as u64),
        ..Findings::default()
    };
    clients::observe(&mut f, e);
    let (sold, stock, orders) = match &e.truth {
        Truth::Unverified => {
            clients::judge(&mut f, e, None);
            f.verdict = verdict::render(&f);
            return f;
        }
        Truth::Totals { sold, stock } => (*sold, *stock, None),
        Truth::Orders { db_stock, orders } => {
            let sold: i64 = orders
                .iter()
                .filter(|o| o.status.holds_stock())
                .map(|o| o.qty)
                .sum();
            orders::findings(&mut f, orders, e);
            (sold, Some(*db_stock), Some(orders.as_slice()))
        }
    };
    f.verified = true;
    f.sold = Some(sold);
    f.oversell = Some((sold - e.initial_stock).max(0));
    f.undersell = Some(
        (e.initial_stock - sold)
            .max(0)
            .min(f.turned_away_buyers as i64),
    );
    f.db_stock = stock;
    f.negative_stock = stock.map(|s| s < 0);
    f.conservation_drift = stock.map(|s| e.initial_stock - (s + sold));
    f.redis_drift = match (e.redis_stock, stock) {
        (Some(r), Some(d)) => Some(r - d),
        _ => None,
    };
    clients::judge(&mut f, e, orders);
    f.verdict = verdict::render(&f);
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::OrderStatus;
    use crate::traffic::recorder::{Ack, BuyerResult, Told};

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
                    order_id: Some(id.to_string()),
                    buyer: i,
                    user_id: user.to_string(),
                    device_id: format!("d-{user}"),
                    bot: user.starts_with("bot"),
                    at_ms: 0,
                })
                .collect(),
            told: Default::default(),
            cancels_ok: 0,
            unclassified: vec![],
            first_sold_out_ms: None,
            send_lag: Default::default(),
            order_answer_span: None,
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

    /// Evidence of `initial` units, `truth` and `clients`, nothing else.
    fn evidence(initial: i64, truth: Truth, c: &Measurements) -> Evidence<'_> {
        Evidence {
            initial_stock: initial,
            purchase_limit: 1,
            truth,
            oracle: OracleView {
                source: "test".into(),
                ..OracleView::default()
            },
            reading: Reading {
                order_id_field: Some("order_id".into()),
                max_unclassified: 0.01,
            },
            redis_stock: None,
            reconcile_residual: None,
            stock_seen: None,
            redis_restocked_orders: None,
            dead_letters: None,
            clients: c,
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
        let f = audit(&evidence(
            3,
            Truth::Orders {
                db_stock: -1,
                orders,
            },
            &c,
        ));
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
            redis_stock: Some(4),
            reconcile_residual: Some(0),
            redis_restocked_orders: Some(1),
            dead_letters,
            ..evidence(
                5,
                Truth::Orders {
                    db_stock: 4,
                    orders: vec![order("a", "u1", OrderStatus::Paid)],
                },
                &c,
            )
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
            redis_stock: Some(8),
            reconcile_residual: Some(0),
            stock_seen: Some((8, 10)),
            ..evidence(
                10,
                Truth::Orders {
                    db_stock: 8,
                    orders,
                },
                &c,
            )
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
        let f = audit(&evidence(2, Truth::Unverified, &c));
        assert!(!f.verified);
        assert_eq!(f.oversell, None);
        assert_eq!(f.client_oversell, Some(1), "measured without any oracle");
        assert!(
            f.verdict.contains("not verified") && f.verdict.contains("client-observed oversell 1"),
            "{}",
            f.verdict
        );
    }

    #[test]
    fn a_stock_derived_oracle_that_undercounts_disagrees_with_the_clients() {
        // 6 acknowledged, one cancel answered ok, 3 units: the shop's own counter says 2 sold.
        let mut c = clients(&[
            ("a", "u1"),
            ("b", "u2"),
            ("c", "u3"),
            ("d", "u4"),
            ("e", "u5"),
            ("f", "u6"),
        ]);
        c.cancels_ok = 1;
        let f = audit(&evidence(
            3,
            Truth::Totals {
                sold: 2,
                stock: Some(1),
            },
            &c,
        ));
        assert_eq!(f.oversell, Some(0), "the oracle alone sees none");
        assert_eq!(f.restocks_seen, Some(1));
        assert_eq!(f.client_net_acks, 5);
        assert_eq!(f.client_oversell, Some(2));
        assert_eq!(f.oracle_disagreement, Some(3));
        assert!(
            f.verdict.contains("the oracle sees no oversell")
                && f.verdict.contains("client-observed oversell 2")
                && f.verdict.contains(
                    "the oracle disagrees with the clients: it counts 2 sold, clients were told 5"
                ),
            "{}",
            f.verdict
        );
    }

    #[test]
    fn restocks_the_database_shows_for_acknowledged_orders_count_once() {
        // Stock 1: "a" expired (the client never heard), "b" cancelled by its client, "c" paid.
        let mut c = clients(&[("a", "u1"), ("b", "u2"), ("c", "u3")]);
        c.cancels_ok = 1;
        c.told.insert("b".into(), Told::Cancelled);
        let orders = vec![
            order("a", "u1", OrderStatus::Expired),
            order("b", "u2", OrderStatus::Cancelled),
            order("c", "u3", OrderStatus::Paid),
        ];
        let f = audit(&evidence(
            1,
            Truth::Orders {
                db_stock: 0,
                orders,
            },
            &c,
        ));
        assert_eq!(f.restocks_seen, Some(2));
        assert_eq!(f.client_oversell, Some(0));
        assert_eq!(f.oracle_disagreement, Some(0));
        assert_eq!(f.verdict, "sold 1 of 1: no oversell");
    }

    #[test]
    fn too_many_unclassified_answers_lead_the_verdict_with_the_rule_to_add() {
        use crate::traffic::recorder::{Kind, UnclassifiedAnswer};
        let mut c = clients(&[]);
        let mut h = crate::traffic::recorder::new_histogram();
        for _ in 0..10 {
            h.record(1000).unwrap();
        }
        c.histograms.insert(
            (Kind::Order, crate::traffic::recorder::Answer::Unclassified),
            h,
        );
        c.unclassified = vec![UnclassifiedAnswer {
            kind: Kind::Order,
            status: 200,
            count: 10,
            sample: r#"{"message":"purchased"}"#.into(),
        }];
        let f = audit(&evidence(5, Truth::Unverified, &c));
        assert!(f.mapping_incomplete());
        assert_eq!(f.unclassified_share, Some(1.0));
        assert!(
            f.verdict
                .starts_with("MAPPING INCOMPLETE: 10 of 10 answers")
                && f.verdict
                    .contains(r#"{ status = ["200"], outcome = "created" }"#),
            "{}",
            f.verdict
        );
    }
}
