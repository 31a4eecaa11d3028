//! The oracle's definitions over order rows (the reference shop's, or any shop's whose rows it
//! can read): every order sorted by the attempt that asked for it (its id, its idempotency key,
//! else its buyer), and the most units held at any moment, replayed from the rows' own
//! timestamps. [`super::rows`] applies them to the rows one at a time.

use super::Reading;
use crate::model::Order;
use crate::traffic::recorder::{AnswerClass, KeyRef, Measurements};
use crate::traffic::schedule::ident::IdRef;
use crate::traffic::schedule::Schedule;
use hashbrown::HashMap;

/// What a shop's order rows carry: the oracle reads them by these, never by which kind of
/// shop wrote them (the reference shop's rows carry both; `--orders-query`'s rows of a foreign
/// shop neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rows {
    /// Each row carries its creation and last-change times: the units held at each moment are
    /// replayed (the peak); without them the replay is not made, and the report says so.
    pub timestamps: bool,
    /// The statuses are ours (`paid` is [`OrderStatus::Paid`]); without, they are the shop's
    /// own spelling, read only as holding or releasing stock, and an acknowledged order the
    /// shop released on its own is counted as cancelled by the shop.
    ///
    /// [`OrderStatus::Paid`]: crate::model::OrderStatus::Paid
    pub our_statuses: bool,
}

/// How many orders fell in each of the oracle's sorts. `phantom` is `None` when rows were
/// left that neither an id, a key nor a buyer of this run names (the shop's user ids are
/// not the run's): the harness could not see who asked for them.
///
/// Every order is sorted by what was asked for it: an acknowledged id (or, for an answer that
/// carried none, its attempt's key), else the class of the attempts its key names
/// (indeterminate before refused: one of them may have bought). Keys count only when the
/// attempts sent them. Rows neither explains are held against their buyer: each of the
/// buyer's attempts no row's id or key already accounts for explains one row (acknowledged
/// first, then indeterminate, then refused); a row beyond them all is a phantom
/// ([`super::rows::Check`] sorts each row as it comes, [`by_buyer`] the rows left).
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

impl Sorted {
    /// What the report says of rows sorted by their buyer, or whose buyer is unknown.
    pub(super) fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.by_buyer > 0 {
            notes.push(format!(
                "{} order rows carry no id or key an attempt of this run names: each was \
                 matched to its buyer's acknowledged, indeterminate or refused attempts \
                 (`user_id`); a row beyond them is a phantom",
                self.by_buyer
            ));
        }
        if self.unknown {
            notes.push(
                "phantom orders not verified: order rows that no id or key of this run names \
                 carry user ids none of this run's buyers has (the shop's user ids are not the \
                 run's), so who asked for them cannot be told"
                    .into(),
            );
        }
        notes
    }
}

/// The classes of one attempt (or of the attempts of one key): acknowledged without an id,
/// indeterminate, refused.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Classes {
    pub acked: bool,
    pub indeterminate: bool,
    pub refused: bool,
}

impl Classes {
    pub(super) fn add(&mut self, a: &crate::traffic::recorder::AttemptView<'_>) {
        match a.class {
            AnswerClass::Acknowledged if a.order_id.is_none() => self.acked = true,
            AnswerClass::Acknowledged => {}
            AnswerClass::Indeterminate => self.indeterminate = true,
            AnswerClass::Refused => self.refused = true,
        }
    }
}

/// The sort's second step: `left`, the rows no id or key explained (how many per user),
/// held against what each buyer's remaining attempts can explain (with the users whose rows
/// outnumber them, and by how many) (attempts whose answer
/// carried an id, and keys a row already carries (`used`), are accounted for). The buyer is
/// the row's `user_id` read as this run's user id; `ours`: some row names a user this run
/// acknowledged (the rows' user ids are the run's). Which of a user's rows takes which of its
/// attempts does not change the counts: a user's rows take its acknowledged attempts first,
/// then its indeterminate ones, then its refused ones.
pub(super) fn by_buyer(
    left: &HashMap<Box<str>, u64>,
    c: &Measurements,
    reading: &Reading,
    users: Option<&Schedule>,
    used: impl Fn(KeyRef<'_>) -> bool,
    ours: bool,
) -> (Sorted, Vec<(String, u64)>) {
    let acked_user: HashMap<usize, IdRef<'_>> = c.acks().map(|a| (a.buyer, a.user_id)).collect();
    let user_of = |buyer: usize| -> Option<String> {
        acked_user
            .get(&buyer)
            .map(|u| u.to_string())
            .or_else(|| users.and_then(|s| s.user_id(buyer)).map(|u| u.to_string()))
    };
    // One potential order per key sent (a retry under it is the same order), else per attempt.
    let mut groups: HashMap<(usize, KeyRef<'_>), (usize, Classes)> = HashMap::new();
    for (i, a) in c.attempts().enumerate() {
        if a.class == AnswerClass::Acknowledged && a.order_id.is_some() {
            continue;
        }
        if reading.keys_sent && used(a.key) {
            continue;
        }
        let name = if reading.keys_sent {
            (usize::MAX, a.key)
        } else {
            (i, KeyRef::Text(""))
        };
        groups
            .entry(name)
            .or_insert((a.buyer, Classes::default()))
            .1
            .add(&a);
    }
    // What each user's attempts can explain: acknowledged, indeterminate, refused.
    let mut budget: HashMap<String, [u64; 3]> = HashMap::new();
    for (buyer, classes) in groups.into_values() {
        let Some(user) = user_of(buyer).filter(|u| left.contains_key(u.as_str())) else {
            continue;
        };
        let b = budget.entry(user).or_insert([0; 3]);
        if classes.acked {
            b[0] += 1;
        } else if classes.indeterminate {
            b[1] += 1;
        } else if classes.refused {
            b[2] += 1;
        }
    }
    let known_users = budget.len();
    let (mut s, mut phantom_users) = held_against(left, &budget);
    // A row is a phantom only if the run can tell buyers apart in the rows: some row's user is
    // one of this run's. Otherwise the shop's user ids are not the run's: nothing is known.
    let phantom = phantom_users.iter().map(|(_, n)| n).sum();
    s.phantom = (ours || known_users > 0).then_some(phantom);
    if s.phantom.is_none() {
        phantom_users.clear();
    }
    phantom_users.sort();
    (s, phantom_users)
}

/// Each user's rows left (`left`) taken by its attempts' `budget` (acknowledged, then
/// indeterminate, then refused): the totals, and the users with rows beyond them.
fn held_against(
    left: &HashMap<Box<str>, u64>,
    budget: &HashMap<String, [u64; 3]>,
) -> (Sorted, Vec<(String, u64)>) {
    let mut s = Sorted::default();
    let mut beyond = Vec::new();
    for (user, rows) in left {
        let mut rows = *rows;
        if let Some(b) = budget.get(&**user) {
            let counts = [
                &mut s.acknowledged,
                &mut s.indeterminate_committed,
                &mut s.refused_committed,
            ];
            for (have, count) in b.iter().zip(counts) {
                let took = rows.min(*have);
                *count += took;
                s.by_buyer += took;
                rows -= took;
            }
        }
        if rows > 0 {
            beyond.push((user.to_string(), rows));
        }
    }
    (s, beyond)
}

/// The most units held at once: each order holds its units from creation until it is released.
pub fn peak_held(orders: &[Order]) -> i64 {
    let mut peak = super::tally::Peak::default();
    for o in orders {
        let released = (!o.status.holds_stock()).then_some(o.updated_at_ms);
        peak.add(o.created_at_ms, o.qty, released);
    }
    peak.peak()
}
