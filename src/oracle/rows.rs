//! The order rows checked one at a time, as the database streams them: the oracle never holds
//! every row. What a row is checked against (the clients' acknowledged ids, the attempts'
//! keys and what each key's answers were) is indexed once from the clients' records; what the
//! rows add up to (units per user and device, the level held per millisecond, rows per key,
//! the rows no id or key explains, per user) is kept in accumulators that grow with the run's
//! buyers and the sale's milliseconds, not with a copy of the rows.
//!
//! Rows sharing an idempotency key are rare (the reference shop's schema forbids them): the
//! first pass counts rows per key, and only when some key has two does a second pass over the
//! same snapshot collect those keys' order ids ([`Check::wants_second_pass`]).
//!
//! Every figure is the one [`super::orders`]' definitions give over the whole set of rows:
//! the findings of a run do not depend on whether its rows were streamed or handed over.

use super::index::{Ids, Keys};
use super::orders::{by_buyer, Classes, Rows, Sorted};
use super::tally::{Holdings, Peak};
use super::witness::{Wanted, Witnesses, OWNERS};
use super::{DeadLetterSeen, Reading};
use crate::model::{Order, OrderStatus};
use crate::traffic::recorder::{KeyRef, Measurements, Told};
use crate::traffic::schedule::ident::IdRef;
// foldhash's maps: a million ids and keys hashed faster than with SipHash.
use hashbrown::{HashMap, HashSet};
use std::collections::{BTreeMap, BTreeSet};

/// What the rows are checked against: the clients' side and the run's facts.
#[derive(Clone, Copy)]
pub struct Ask<'a> {
    pub clients: &'a Measurements,
    pub reading: &'a Reading,
    /// The item's stock at the sale's start (what a proof of oversell is held against).
    pub initial_stock: i64,
    pub purchase_limit: i64,
    /// The run's buyers (to name the user of an attempt no acknowledgement names).
    pub users: Option<&'a crate::traffic::schedule::Schedule>,
    /// redis-lua: the dead-letter stream.
    pub dead_letters: Option<&'a [DeadLetterSeen]>,
    /// redis-lua: orders Redis says it restocked.
    pub redis_restocked_orders: Option<i64>,
}

/// What an order id is to the clients (static), and what the rows showed of it.
#[derive(Debug, Clone, Copy, Default)]
struct IdFacts {
    acked: bool,
    told: Option<Told>,
    /// The status of the last row with this id (`None`: no row).
    row: Option<OrderStatus>,
}

/// A key the run's attempts sent: its classes, whether a row carried it, and its rows (up to
/// 255: what is asked of them is whether there are two). 5 bytes a key.
#[derive(Debug, Clone, Copy, Default)]
struct KeyFacts {
    classes: Classes,
    used: bool,
    rows: u8,
}

/// One pass (two, if rows share a key) over the order rows.
pub struct Check<'a> {
    ask: Ask<'a>,
    kind: Rows,
    ids: Ids<'a, IdFacts>,
    /// The attempts' keys (none when the attempts carried none).
    keys: Option<Keys<'a, KeyFacts>>,
    /// Rows per key no attempt of this run sent.
    foreign_keys: HashMap<Box<str>, u32>,
    sorted: Sorted,
    /// Rows neither an id nor a key explains, per user.
    left: HashMap<Box<str>, u64>,
    users: Holdings,
    devices: Holdings,
    peak: Peak,
    by_status: [i64; 4],
    sold: i64,
    released: i64,
    /// Released rows of acknowledged orders no client cancelled: rows and units.
    released_unseen: (u64, i64),
    /// Second pass: the order ids of every key with two rows or more.
    shared: BTreeMap<String, BTreeSet<String>>,
    /// What the second pass collects for the proofs, and what it kept.
    want: Wanted,
    witnesses: Witnesses,
    /// Rows whose key no attempt of this run sent (phantoms): the first few.
    phantom_rows: Vec<Order>,
    rows: u64,
}

impl<'a> Check<'a> {
    /// A check of `kind` rows against `ask`.
    pub fn new(ask: Ask<'a>, kind: Rows) -> Self {
        let c = ask.clients;
        let mut ids: Ids<'a, IdFacts> = Ids::new(&c.records);
        for (i, a) in c.acks().enumerate() {
            if let Some(id) = a.order_id {
                ids.acked(i, id).acked = true;
            }
        }
        for (id, told) in &c.told {
            ids.entry(id.as_str()).told = Some(*told);
        }
        let others = c.follow_ups.iter().filter_map(|f| f.order_id.as_deref());
        let dead = ask.dead_letters.into_iter().flatten();
        for id in others.chain(dead.map(|d| d.order_id.as_str())) {
            ids.entry(id);
        }
        let keys = ask
            .reading
            .keys_sent
            .then(|| Keys::new(&c.records, |k: &mut KeyFacts, a| k.classes.add(a)));
        let expected = ask.users.map_or(0, |u| u.len()).max(c.acks().len());
        Check {
            ask,
            kind,
            ids,
            keys,
            foreign_keys: HashMap::new(),
            sorted: Sorted::default(),
            left: HashMap::new(),
            users: Holdings::new(expected),
            devices: Holdings::new(expected),
            peak: Peak::default(),
            by_status: [0; 4],
            sold: 0,
            released: 0,
            released_unseen: (0, 0),
            shared: BTreeMap::new(),
            want: Wanted::default(),
            witnesses: Witnesses::default(),
            phantom_rows: Vec::new(),
            rows: 0,
        }
    }

    /// Checks one row.
    pub fn row(&mut self, o: &Order) {
        self.rows += 1;
        let holds = o.status.holds_stock();
        let status = OrderStatus::ALL.iter().position(|s| *s == o.status);
        self.by_status[status.expect("a status of ALL")] += 1;
        let qty = if holds { o.qty } else { 0 };
        self.users.add(&o.user_id, qty);
        if holds {
            self.sold += o.qty;
            if let Some(d) = &o.device_id {
                self.devices.add(d, o.qty);
            }
        } else {
            self.released += 1;
        }
        let id = self.ids.get_mut(o.id.as_str());
        let acked = id.as_ref().is_some_and(|f| f.acked);
        if let Some(f) = id {
            f.row = Some(o.status);
            if !holds && f.acked && f.told != Some(Told::Cancelled) {
                self.released_unseen.0 += 1;
                self.released_unseen.1 += o.qty;
            }
        }
        if self.kind.timestamps {
            let released = (!holds).then_some(o.updated_at_ms);
            self.peak.add(o.created_at_ms, o.qty, released);
        }
        self.sort(o, acked);
    }

    /// Sorts `o` by what was asked for it (`acked`: a client was told its id): see
    /// [`super::orders::Sorted`].
    fn sort(&mut self, o: &Order, acked: bool) {
        let keys_sent = self.ask.reading.keys_sent;
        let key = match o.idempotency_key.as_deref() {
            Some(k) if keys_sent => match self
                .keys
                .as_mut()
                .and_then(|keys| keys.get_mut(KeyRef::Text(k)))
            {
                Some(facts) => {
                    facts.used = true;
                    facts.rows = facts.rows.saturating_add(1);
                    Some(facts.classes)
                }
                None => {
                    let n = self.foreign_keys.entry(k.into()).or_default();
                    *n = n.saturating_add(1);
                    None
                }
            },
            _ => None,
        };
        let s = &mut self.sorted;
        match key {
            _ if acked => s.acknowledged += 1,
            Some(Classes { acked: true, .. }) => s.acknowledged += 1,
            Some(Classes {
                indeterminate: true,
                ..
            }) => s.indeterminate_committed += 1,
            Some(Classes { refused: true, .. }) => s.refused_committed += 1,
            // A key the run sent none of: no request of this run asked for it.
            None if keys_sent && o.idempotency_key.is_some() => {
                *s.phantom.get_or_insert(0) += 1;
                if self.phantom_rows.len() < super::proof::EXAMPLES {
                    self.phantom_rows.push(o.clone());
                }
            }
            _ => *self.left.entry(o.user_id.as_str().into()).or_default() += 1,
        }
    }

    /// Whether the rows must be read again ([`Check::row_again`]): some key has two rows or
    /// more (their ids), or a finding needs the rows that prove it (the rows held at the peak
    /// when it passed the stock, the holding rows when more were sold than stocked, the rows
    /// of users over the limit). Decides what the second pass keeps.
    pub fn wants_second_pass(&mut self) -> bool {
        let initial = self.ask.initial_stock;
        self.want = Wanted {
            peak_at: self
                .kind
                .timestamps
                .then(|| self.peak.peak_at())
                .flatten()
                .filter(|(_, held)| *held > initial)
                .map(|(t, _)| t),
            end: self.sold > initial,
            owners: self
                .users
                .over_ids(self.ask.purchase_limit, OWNERS)
                .into_iter()
                .collect(),
            phantom_users: self
                .sorted_with_phantom_users()
                .1
                .into_iter()
                .take(OWNERS)
                .collect(),
        };
        self.witnesses.peak_at = self.want.peak_at;
        let sent = self.keys.iter().flat_map(|keys| keys.values());
        sent.into_iter().any(|k: &KeyFacts| k.rows > 1)
            || self.foreign_keys.values().any(|n| *n > 1)
            || self.want.any()
    }

    /// The second pass: keeps the id of a row whose key has two rows or more, and the rows a
    /// proof names.
    pub fn row_again(&mut self, o: &Order) {
        // A row neither its id (acknowledged) nor a key the run sent explains: held against
        // its buyer's attempts, and named by a proof of phantoms when they do not explain it.
        let acked = self.ids.get(o.id.as_str()).is_some_and(|f| f.acked);
        let keyed = self.ask.reading.keys_sent && o.idempotency_key.is_some();
        self.witnesses.row(&self.want, o, !acked && !keyed);
        let Some(k) = o.idempotency_key.as_deref() else {
            return;
        };
        let rows = match self
            .keys
            .as_ref()
            .and_then(|keys| keys.get(KeyRef::Text(k)))
        {
            Some(f) => u32::from(f.rows),
            None => self.foreign_keys.get(k).copied().unwrap_or(0),
        };
        if rows > 1 {
            self.shared
                .entry(k.into())
                .or_default()
                .insert(o.id.clone());
        }
    }

    /// Rows checked so far (first pass).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// What the rows showed.
    pub fn finish(self) -> Checked {
        let c = self.ask.clients;
        let status_of = |id: &str| self.ids.get(id).and_then(|f| f.row);
        let lost: Vec<&str> = c
            .acks()
            .filter_map(|a| a.order_id)
            .filter(|id| status_of(id).is_none())
            .collect();
        let dead = self.ask.dead_letters;
        let dead_orders: HashSet<&str> = dead
            .into_iter()
            .flatten()
            .map(|d| d.order_id.as_str())
            .collect();
        let lost_dead = dead.map(|_| lost.iter().filter(|id| dead_orders.contains(*id)).count());
        let restock_mismatch = self.ask.redis_restocked_orders.map(|restocked| {
            // A cancel or expiry restocked in Redis whose order the database then refused: no
            // row to count it by, but a real restock.
            let released_then_dead: HashSet<&str> = dead
                .into_iter()
                .flatten()
                .filter(|d| matches!(d.was.as_str(), "cancelled" | "expired"))
                .map(|d| d.order_id.as_str())
                .filter(|id| status_of(id).is_none())
                .collect();
            self.released + released_then_dead.len() as i64 - restocked
        });
        let mismatches = self.told_mismatches();
        let refused_applied = super::answers::refused_but_applied_by(c, status_of);
        let by_shop: Option<Vec<&str>> = (!self.kind.our_statuses).then(|| {
            c.acks()
                .filter_map(|a| a.order_id)
                .filter(|id| {
                    status_of(id).is_some_and(|st| !st.holds_stock())
                        && c.told.get(*id) != Some(&Told::Cancelled)
                })
                .collect()
        });
        let bots: HashSet<IdRef<'_>> = c.acks().filter(|a| a.bot).map(|a| a.user_id).collect();
        let bot_units: i64 = bots
            .iter()
            .filter_map(|u| self.users.get(&u.to_string()))
            .filter(|q| *q != 0)
            .sum();
        let limit = self.ask.purchase_limit;
        let sorted = self.sorted();
        Checked {
            sold: self.sold,
            by_status: self.by_status,
            lost: lost.len() as u64,
            lost_examples: lost.iter().take(20).map(|s| s.to_string()).collect(),
            lost_dead_lettered: lost_dead.map(|n| n as u64),
            sorted,
            restock_mismatch,
            peak_held: self.kind.timestamps.then(|| self.peak.peak()),
            duplicate_buyers: self.users.over(limit),
            duplicate_devices: self.devices.over(limit),
            status_mismatches: mismatches + refused_applied,
            cancelled_by_shop: by_shop.map(|v| {
                let examples = v.iter().take(20).map(|s| s.to_string()).collect();
                (v.len() as u64, examples)
            }),
            bot_units,
            released_unseen: self.released_unseen,
            shared_keys: self.shared,
            kind: self.kind,
            witnesses: self.witnesses,
            phantom_rows: self.phantom_rows,
        }
    }

    /// Orders whose row contradicts what a client was told of its pay or cancel.
    fn told_mismatches(&self) -> u64 {
        let status_of = |id: &str| self.ids.get(id).and_then(|f| f.row);
        self.ask
            .clients
            .told
            .iter()
            .filter(|(id, told)| match status_of(id) {
                Some(st) => match told {
                    // A foreign shop's paid status has its own spelling: only a released row
                    // contradicts "paid".
                    Told::Paid if !self.kind.our_statuses => !st.holds_stock(),
                    Told::Paid => st != OrderStatus::Paid,
                    Told::Cancelled => st.holds_stock(),
                },
                None => false,
            })
            .count() as u64
    }

    /// The sort's totals, with the rows left to their buyers ([`by_buyer`]).
    fn sorted(&self) -> Sorted {
        self.sorted_with_phantom_users().0
    }

    /// [`Check::sorted`], and the users whose rows no attempt of theirs explains, by how many.
    fn sorted_with_phantom_users(&self) -> (Sorted, Vec<(String, u64)>) {
        let mut s = self.sorted;
        if self.left.is_empty() {
            s.phantom = Some(s.phantom.unwrap_or(0));
            return (s, Vec::new());
        }
        let c = self.ask.clients;
        let seen = |u: &str| self.users.get(u).is_some();
        let ours = c.acks().any(|a| seen(&a.user_id.to_string()))
            || self.ask.users.is_some_and(|s| {
                // No acknowledged user in the rows: any buyer of this run that asked at all.
                let buyers: HashSet<usize> = c.attempts().map(|a| a.buyer).collect();
                buyers
                    .into_iter()
                    .filter_map(|b| s.user_id(b))
                    .any(|u| seen(&u.as_cow()))
            });
        let used = |k: KeyRef<'_>| {
            let facts = self.keys.as_ref().and_then(|keys| keys.get(k));
            facts.is_some_and(|f| f.used)
        };
        let (b, phantom_users) =
            by_buyer(&self.left, c, self.ask.reading, self.ask.users, used, ours);
        s.acknowledged += b.acknowledged;
        s.indeterminate_committed += b.indeterminate_committed;
        s.refused_committed += b.refused_committed;
        s.by_buyer = b.by_buyer;
        // Rows whose buyer cannot be told leave only the phantoms a foreign key proved.
        s.phantom = match (b.phantom, s.phantom) {
            (Some(p), known) => Some(p + known.unwrap_or(0)),
            (None, known) => known,
        };
        s.unknown = b.phantom.is_none();
        (s, phantom_users)
    }
}

/// What the order rows showed, as [`Check::finish`] gives it: owned, the rows gone.
#[derive(Debug, Clone)]
pub struct Checked {
    sold: i64,
    by_status: [i64; 4],
    lost: u64,
    lost_examples: Vec<String>,
    lost_dead_lettered: Option<u64>,
    sorted: Sorted,
    restock_mismatch: Option<i64>,
    peak_held: Option<i64>,
    duplicate_buyers: u64,
    duplicate_devices: u64,
    status_mismatches: u64,
    cancelled_by_shop: Option<(u64, Vec<String>)>,
    bot_units: i64,
    released_unseen: (u64, i64),
    shared_keys: BTreeMap<String, BTreeSet<String>>,
    kind: Rows,
    /// The rows the proofs name (second pass).
    witnesses: Witnesses,
    /// Rows whose key no attempt of this run sent: the first few phantoms.
    phantom_rows: Vec<Order>,
}

impl Checked {
    /// The rows' findings with nothing compared against Redis's restock set: for a read that
    /// Redis moved under (releases still flowing), which shows no difference that is a fact.
    pub fn without_redis_comparison(self) -> Self {
        Checked {
            restock_mismatch: None,
            ..self
        }
    }

    /// Units the rows hold (orders not cancelled or expired).
    pub fn sold(&self) -> i64 {
        self.sold
    }

    /// Released rows of acknowledged orders no client cancelled: rows and units.
    pub(super) fn released_unseen(&self) -> (u64, i64) {
        self.released_unseen
    }

    /// The rows the proofs name.
    pub(super) fn witnesses(&self) -> &Witnesses {
        &self.witnesses
    }

    /// The first few rows no request of this run asked for (their key is none of the run's).
    pub(super) fn phantom_rows(&self) -> &[Order] {
        &self.phantom_rows
    }

    /// Writes the rows' findings into `f` (`initial`: the item's initial stock; `keys_sent`:
    /// the attempts carried keys).
    pub(super) fn apply(&self, f: &mut super::Findings, initial: i64, keys_sent: bool) {
        f.lost_acks = Some(self.lost);
        f.lost_ack_examples = self.lost_examples.clone();
        f.lost_acks_dead_lettered = self.lost_dead_lettered;
        let s = &self.sorted;
        f.orders_acknowledged = Some(s.acknowledged);
        f.indeterminate_committed = Some(s.indeterminate_committed);
        f.refused_committed = Some(s.refused_committed);
        f.phantom_orders = s.phantom;
        f.client_notes.extend(s.notes());
        for (st, n) in OrderStatus::ALL.iter().zip(self.by_status) {
            f.orders_by_status.insert((*st).into(), n);
        }
        f.restock_mismatch = self.restock_mismatch;
        f.peak_oversell = self.peak_held.map(|p| (p - initial).max(0));
        f.duplicate_buyers = Some(self.duplicate_buyers);
        f.duplicate_devices = Some(self.duplicate_devices);
        f.status_mismatches = Some(self.status_mismatches);
        if let Some((n, examples)) = &self.cancelled_by_shop {
            f.cancelled_by_shop = Some(*n);
            f.cancelled_by_shop_examples = examples.clone();
        }
        if !self.kind.timestamps {
            f.client_notes.push(
                "the shop's order rows carry no timestamps: the replay of units held at each \
                 moment (peak_oversell) is not made"
                    .into(),
            );
        }
        f.bot_units = Some(self.bot_units);
        f.bot_share_of_units = Some(if self.sold > 0 {
            self.bot_units as f64 / self.sold as f64
        } else {
            0.0
        });
        if keys_sent {
            let by_key = self
                .shared_keys
                .iter()
                .map(|(k, ids)| (k.as_str(), ids.iter().map(String::as_str).collect()))
                .collect();
            super::answers::apply_rows(f, by_key);
        }
    }
}

/// Checks `orders` (all of them, handed over) as a stream would be.
pub(super) fn check_all(ask: Ask<'_>, kind: Rows, orders: &[Order]) -> Checked {
    let mut check = Check::new(ask, kind);
    for o in orders {
        check.row(o);
    }
    if check.wants_second_pass() {
        for o in orders {
            check.row_again(o);
        }
    }
    check.finish()
}

impl crate::store::OrderSink for Check<'_> {
    fn order(&mut self, o: &Order) {
        self.row(o);
    }

    fn second_pass(&mut self) -> bool {
        self.wants_second_pass()
    }

    fn order_again(&mut self, o: &Order) {
        self.row_again(o);
    }
}
