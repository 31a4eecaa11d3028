//! The oracle: audits the final database and Redis state against what every client was told.
//!
//! Nothing here is assumed from a strategy's name. Given the orders in the database after the
//! queue has drained (or, for a foreign shop, the totals its owner's query returns) and the
//! clients' records, it computes the brief's definitions (§4):
//! - sold = units of orders not cancelled/expired; oversell = max(0, sold − initial);
//! - conservation: db stock + sold = initial (drift reported otherwise), and for redis-lua
//!   Redis stock after reconciliation = db stock;
//! - lost acknowledged orders: a 201 order id the database does not have;
//! - every order in the database sorted by what was asked for it, Jepsen style: each order
//!   attempt carried its own `Idempotency-Key` and the clients kept its answer's class
//!   (acknowledged, refused, indeterminate: see `AnswerClass`). An order is *acknowledged*
//!   when a client was told its id (or, without ids, its key); *indeterminate and committed*
//!   when its key is an attempt whose answer was a timeout, a broken connection or a 5xx (it
//!   did buy, its client never heard); *refused and committed* when its key only ever got a
//!   clean no; a *phantom* when no request of this run names it at all;
//! - duplicate acknowledgements: one order id told to two attempts;
//! - wrong answers to adversarial buyers (`answers`: the table a correct shop's answers
//!   follow) and orders bought twice under one idempotency key;
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

mod answers;
mod clients;
mod orders;
mod verdict;

pub use answers::{judge as judge_follow_up, KeyDuplicate, Wrong, WrongAnswer, RULES};
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
    /// Whether each order attempt carried its idempotency key (`target.idempotency_header`
    /// is set): only then can an order row be traced to the attempt that bought it.
    pub keys_sent: bool,
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
    /// Orders no request of this run asked for: neither an acknowledged id nor any attempt's
    /// idempotency key names them.
    pub phantom_orders: Option<u64>,
    /// Order rows traced to an acknowledgement (by id, or by key when the answer had no id).
    #[serde(default)]
    pub orders_acknowledged: Option<u64>,
    /// Order attempts whose answer was indeterminate (a timeout, a broken connection, a 5xx,
    /// an answer no rule reads): they may or may not have bought.
    #[serde(default)]
    pub indeterminate: u64,
    /// Order rows whose key is an indeterminate attempt's: it did buy, and its client was
    /// never told. Not a phantom, not an error of the oracle.
    #[serde(default)]
    pub indeterminate_committed: Option<u64>,
    /// Order rows whose key is only refused attempts' (sold out, duplicate, ...): the shop said
    /// no and bought anyway.
    #[serde(default)]
    pub refused_committed: Option<u64>,
    /// Order ids acknowledged to more than one attempt (distinct idempotency keys): two
    /// clients were told they hold the same order.
    #[serde(default)]
    pub duplicate_acks: Option<u64>,
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
    /// Orders of adversarial buyers (`[adversarial]`) whose scripted follow-ups were sent.
    #[serde(default)]
    pub follow_ups: Option<u64>,
    /// Of those, orders answered as no correct shop answers (`oracle::RULES`; the clients'
    /// records).
    #[serde(default)]
    pub wrong_answers: Option<u64>,
    /// Up to 20 of them: the order, the sequence sent, the answers, the rule broken.
    #[serde(default)]
    pub wrong_answer_examples: Vec<WrongAnswer>,
    /// Orders beyond the first bought under one Idempotency-Key: order rows sharing a key
    /// (when the oracle has rows) or one key acknowledged with two order ids (clients'
    /// records), whichever shows more. `None`: the attempts carried no key.
    #[serde(default)]
    pub duplicate_orders_per_key: Option<u64>,
    /// Up to 20 keys that bought more than once, with their order ids.
    #[serde(default)]
    pub duplicate_key_examples: Vec<KeyDuplicate>,
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
    answers::observe(
        &mut f,
        e.clients,
        e.reading.order_id_field.is_some(),
        e.reading.keys_sent,
    );
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
            answers::rows(&mut f, orders, e.reading.keys_sent);
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
mod tests;
