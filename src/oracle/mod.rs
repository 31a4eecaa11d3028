//! The oracle: audits the final database and Redis state against what every client was told.
//!
//! Nothing here is assumed from a strategy's name. Given the orders in the database after the
//! queue has drained (or, for a foreign shop, the totals its owner's query returns) and the
//! clients' records, it computes the brief's definitions (§4):
//! - sold = units of orders not cancelled/expired; oversell = the most units promised beyond
//!   the stock at once (the rows replayed in time, the clients' records, or the end: whichever
//!   proves most), oversold at the end = max(0, sold − initial);
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
//! - a run that tested nothing: the item had stock and the shop acknowledged no order
//!   (`nothing_sold`); undersell: units left unsold while buyers were refused for reasons
//!   other than sold out (unauthorized, invalid, not found), from the oracle's sold or, without
//!   one, the clients' net acknowledgements: both always measured;
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
mod index;
mod orders;
pub mod proof;
mod repeats;
mod replay;
mod rows;
mod tally;
mod verdict;
mod witness;

#[cfg(test)]
pub(crate) use answers::judge as judge_follow_up;
pub use answers::{KeyDuplicate, WrongAnswer};
pub use orders::peak_held;
pub use orders::Rows;
pub use proof::Proof;
pub use rows::{Ask, Check, Checked};

use crate::model::{Order, StatusKey};
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
    /// A foreign shop's order rows (`--orders-query`): this run's rows, without timestamps.
    Rows(ForeignRows),
    /// The reference shop's order rows, already checked as the database streamed them
    /// ([`Check`]), and the stock read in the same snapshot.
    Checked { db_stock: i64, rows: Box<Checked> },
    /// Nothing: only the clients' side can be shown.
    Unverified,
}

/// A foreign shop's order rows, as its owner's query returned them after the run settled,
/// less the rows present before the sale. Statuses are the shop's own: a released one (the
/// query's released statuses) is read as cancelled, `paid` as paid, any other as holding stock.
#[derive(Debug, Clone, Default)]
pub struct ForeignRows {
    pub orders: Vec<Order>,
    /// The stock the stock query read, if one was given.
    pub stock: Option<i64>,
    /// This run's rows by the shop's own status spelling.
    pub statuses: BTreeMap<StatusKey, i64>,
    /// Rows present before the sale (not this run's).
    pub present_before: u64,
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
    /// The payment window the scenario declares (ms): an order not paid within it may be
    /// released by the shop on its own from its send + the window. `None`: nobody declared
    /// one, so it is unknown (an unpaid order may have been released at any moment).
    pub payment_window_ms: Option<u64>,
    /// When the final state was read, in ms after the sale opened (an upper bound: taken
    /// after the read); `None` when unknown (every unpaid order may have expired by then).
    pub audited_ms: Option<u64>,
    /// When the sale opened, in ms since the Unix epoch on the shop's clock, when the shop
    /// shares the harness's machine (the reference shop): the order rows' times are read
    /// against it in proofs. `None`: rows' times are shown as they are.
    pub opened_ms: Option<i64>,
    /// A foreign shop's stock, read through its oracle during the sale (empty otherwise).
    pub stock_samples: Vec<StockSample>,
    /// The reference shop's restock ledger: orders restocked twice, restocks of orders that
    /// still hold their units (`None`: no ledger, a foreign shop).
    pub restocks: Option<crate::store::RestockAnomalies>,
    pub clients: &'a Measurements,
    /// The run's buyers, to name the user of an attempt no acknowledgement names (order rows
    /// matched by buyer); `None`: only acknowledged buyers are known.
    pub users: Option<&'a crate::traffic::schedule::Schedule>,
}

/// A payment window this long (s) or longer means no order is ever released unpaid (a mapping
/// with no payment step).
pub const NEVER_RELEASED_S: f64 = 1e12;

/// What the clients' records would prove if the shop declared a payment window: with no
/// window declared an unpaid order is not held at all, so this is advice, never a finding.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct UndeclaredWindow {
    /// The shortest window (s) under which the records prove a peak above the stock.
    pub proves_from_s: f64,
    /// The client-observed peak oversell the records would prove if every unpaid order were
    /// held until its cancel was sent (the longest window).
    pub peak_oversell: i64,
}

/// One reading of a foreign shop's stock during the sale: when the read was sent and
/// answered (ms after the sale opened), the stock it returned, and whether nothing was waiting
/// to be written then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StockSample {
    pub sent_ms: u64,
    pub answered_ms: u64,
    pub stock: i64,
    /// The shop's backlog read 0 before the send and after the answer (or the shop declared it
    /// has none): the stock read then includes every acknowledged order. Only such a reading is
    /// held against what the clients held.
    #[serde(default)]
    pub settled: bool,
}

/// One dead-lettered stream entry, as the oracle reads it from Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterSeen {
    pub order_id: String,
    /// The entry's type: `order`, `pay`, `cancel`, `expire` (`None`: not decodable).
    pub kind: Option<crate::store::PersistKind>,
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
    /// The headline: the most units promised beyond the stock at once ("107 orders for 100
    /// units"): the largest of what the order rows replayed in time (`peak_oversell`), the
    /// clients' records (`client_peak_oversell`, `client_oversell`) and the end
    /// (`oversold_at_end`) prove. Reports before this figure held the end here.
    pub oversell: Option<i64>,
    /// Units oversold at the end: max(0, sold − initial stock). Cancels can re-sell what the
    /// race oversold, so it can be below the peak.
    #[serde(default)]
    pub oversold_at_end: Option<i64>,
    /// Units left unsold (initial − the oracle's sold, else − the clients' net
    /// acknowledgements) while people were refused for reasons other than sold out, at most
    /// one unit per such person.
    pub undersell: Option<i64>,
    /// The item had stock and the shop acknowledged no order: the run tested nothing.
    #[serde(default)]
    pub nothing_sold: bool,
    /// People (not bots) whose every order attempt was refused as unauthorized, invalid or
    /// not found: turned away for a reason other than sold out.
    #[serde(default)]
    pub refused_buyers: u64,
    /// Order attempts answered `unauthorized` (401/403): the shop refused the harness's
    /// credentials.
    #[serde(default)]
    pub unauthorized: u64,
    pub negative_stock: Option<bool>,
    pub db_stock: Option<i64>,
    pub redis_stock: Option<i64>,
    /// initial − (db stock + sold): positive = leaked units, negative = phantom units.
    pub conservation_drift: Option<i64>,
    /// Redis stock − db stock after reconciliation (redis-lua).
    pub redis_drift: Option<i64>,
    pub reconcile_residual: Option<i64>,
    pub orders_by_status: BTreeMap<StatusKey, i64>,
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
    /// Foreign order rows: acknowledged orders the shop released (a released status) that no
    /// client cancelled: cancelled by the shop itself, reported apart from lost orders.
    #[serde(default)]
    pub cancelled_by_shop: Option<u64>,
    /// Up to 20 of their ids.
    #[serde(default)]
    pub cancelled_by_shop_examples: Vec<String>,
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
    /// The most units the clients provably held at once: acknowledged (from the answer), not
    /// yet cancelled (until the cancel's send), not past the payment window unpaid.
    #[serde(default)]
    pub client_peak_held: Option<i64>,
    /// Client-observed peak oversell: `client_peak_held` − initial stock, floored at 0. A
    /// proof, no oracle needed: oversell that later cancels covered up still shows here.
    #[serde(default)]
    pub client_peak_oversell: Option<i64>,
    /// Users the clients' records show holding more than the purchase limit at once (distinct
    /// orders, minus cancels sent).
    #[serde(default)]
    pub client_duplicate_buyers: Option<u64>,
    /// Devices the clients' records show holding more than the purchase limit at once.
    #[serde(default)]
    pub client_duplicate_devices: Option<u64>,
    /// The payment window the replay used (s); `None`: none was declared, so unpaid orders
    /// were not counted as held (see `undeclared_window`).
    #[serde(default)]
    pub payment_window_s: Option<f64>,
    /// No payment window declared, and the clients' records would prove oversell if the shop
    /// keeps unpaid orders long enough: what declaring it would add (not a finding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undeclared_window: Option<UndeclaredWindow>,
    /// Without order rows: acknowledged orders, unpaid and not cancelled, that the shop may
    /// have released on its own before the final read (past their declared window, or any
    /// time when none was declared); `client_oversell` does not count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub may_have_expired: Option<u64>,
    /// Stock readings of a foreign shop taken during the sale.
    #[serde(default)]
    pub stock_samples: Option<u64>,
    /// Of those, the settled ones (the shop's backlog read 0 around them, or it declared none):
    /// the only ones held against the clients' records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock_samples_settled: Option<u64>,
    /// Stock-side peak: over the settled stock samples, units held by the clients plus the
    /// stock read, minus the initial stock (floored at 0): units the stock shows that cannot
    /// exist.
    #[serde(default)]
    pub stock_peak_oversell: Option<i64>,
    /// With order rows: acknowledged orders the rows show released (cancelled or expired)
    /// that no client cancelled: the shop's own cancellations, not lost orders.
    #[serde(default)]
    pub shop_released_acks: Option<u64>,
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
    /// Figures whose value holds only under something nobody declared (the payment window):
    /// catalog name → what the records would show otherwise and the declaration that settles
    /// it. The gate never passes them: they are *not verified* until declared.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unsettled: BTreeMap<String, String>,
    /// Each failing finding's counterexample: the smallest set of orders, rows or samples that
    /// shows it ([`proof`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proofs: Vec<Proof>,
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

/// Lowest and highest stock seen during the run: the probe's, else the stock samples'.
fn stock_seen(e: &Evidence<'_>) -> Option<(i64, i64)> {
    e.stock_seen.or_else(|| {
        let stock = e.stock_samples.iter().map(|s| s.stock);
        Some((stock.clone().min()?, stock.max()?))
    })
}

/// What [`Truth::Orders`]' rows carry: their times, and statuses of ours.
const ORDER_ROWS: Rows = Rows {
    timestamps: true,
    our_statuses: true,
};

/// What [`Truth::Rows`]' rows carry (`--orders-query`): neither.
const QUERIED_ROWS: Rows = Rows {
    timestamps: false,
    our_statuses: false,
};

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
        min_stock_seen: stock_seen(e).map(|s| s.0),
        max_stock_seen: stock_seen(e).map(|s| s.1),
        dead_letters: e.dead_letters.as_ref().map(|d| d.len() as u64),
        ..Findings::default()
    };
    let witness = clients::observe(&mut f, e);
    answers::observe(
        &mut f,
        e.clients,
        e.reading.order_id_field.is_some(),
        e.reading.keys_sent,
    );
    let ask = Ask {
        clients: e.clients,
        reading: &e.reading,
        initial_stock: e.initial_stock,
        purchase_limit: e.purchase_limit,
        users: e.users,
        dead_letters: e.dead_letters.as_deref(),
        redis_restocked_orders: e.redis_restocked_orders,
    };
    let (checked, stock, statuses) = match &e.truth {
        Truth::Unverified => {
            clients::judge(&mut f, e, None);
            clients::unsettled_headline(&mut f);
            f.proofs = proof::collect(&f, e, None, &witness);
            f.verdict = verdict::render(&f);
            return f;
        }
        Truth::Totals { sold, stock } => {
            return verified(f, e, *sold, *stock, None, &witness);
        }
        Truth::Orders { db_stock, orders } => (
            std::borrow::Cow::Owned(rows::check_all(ask, ORDER_ROWS, orders)),
            Some(*db_stock),
            None,
        ),
        Truth::Checked { db_stock, rows } => {
            (std::borrow::Cow::Borrowed(&**rows), Some(*db_stock), None)
        }
        Truth::Rows(rows) => (
            std::borrow::Cow::Owned(rows::check_all(ask, QUERIED_ROWS, &rows.orders)),
            rows.stock,
            Some(&rows.statuses),
        ),
    };
    checked.apply(&mut f, e.initial_stock, e.reading.keys_sent);
    if let Some(statuses) = statuses {
        f.orders_by_status = statuses.clone();
    }
    let released_unseen = Some(checked.released_unseen());
    let mut f = verified(f, e, checked.sold(), stock, released_unseen, &witness);
    f.proofs = proof::collect(&f, e, Some(&checked), &witness);
    f.verdict = verdict::render(&f);
    f
}

/// The findings of a run the server side verified: `sold` units, `stock` left, and (with
/// order rows) the released rows of acknowledged orders no client cancelled.
fn verified(
    mut f: Findings,
    e: &Evidence<'_>,
    sold: i64,
    stock: Option<i64>,
    released_unseen: Option<(u64, i64)>,
    witness: &clients::ClientWitness,
) -> Findings {
    f.verified = true;
    f.sold = Some(sold);
    f.oversold_at_end = Some((sold - e.initial_stock).max(0));
    f.db_stock = stock;
    f.negative_stock = stock.map(|s| s < 0);
    f.conservation_drift = stock.map(|s| e.initial_stock - (s + sold));
    // Released orders against Redis's restock set (redis-lua), and the ledger's restocks
    // beyond one per released order (every reference strategy): a restock a correct shop
    // never makes.
    f.restock_mismatch = match (f.restock_mismatch, &e.restocks) {
        (m, Some(l)) => Some(m.unwrap_or(0) + l.extra_restocks),
        (m, None) => m,
    };
    f.redis_drift = match (e.redis_stock, stock) {
        (Some(r), Some(d)) => Some(r - d),
        _ => None,
    };
    clients::judge(&mut f, e, released_unseen);
    f.oversell = [
        f.oversold_at_end,
        f.peak_oversell,
        f.client_peak_oversell,
        f.client_oversell,
    ]
    .into_iter()
    .flatten()
    .max();
    clients::unsettled_headline(&mut f);
    f.proofs = proof::collect(&f, e, None, witness);
    f.verdict = verdict::render(&f);
    f
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_assumptions;
#[cfg(test)]
mod tests_clients;
