//! Small, exact accumulators for order rows read one at a time: units held per user (or
//! device), and the most units held at once.
//!
//! A user id the schedule seeded (`u-17`, `bot-4`, `dev-9`, `bot-dev-2`) is kept as a number in
//! a vector indexed by it, so a million buyers' holdings cost 8 MB, not a million strings; any
//! other id is kept as its text. A spelling is seeded only in its canonical form (digits, no
//! leading zero, within `u32`), so two ids are the same entry exactly when their texts are equal.

use std::collections::{BTreeMap, HashMap};

/// `s` as (form, number) when it is a seeded id in canonical form
/// ([`crate::traffic::schedule::ident::seeded_number`]).
pub(super) fn seeded(s: &str) -> Option<(usize, u32)> {
    let (form, _, n) = crate::traffic::schedule::ident::seeded_number(s)?;
    u32::try_from(n).ok().map(|n| (form, n))
}

/// Not seen: a user with rows has a sum, maybe 0.
const UNSEEN: i64 = i64::MIN;

/// Units held per id (user or device), for every id that has a row.
#[derive(Debug)]
pub(super) struct Holdings {
    seeded: [Vec<i64>; 4],
    text: HashMap<Box<str>, i64>,
    /// Seeded numbers at or above this are kept as text (a shop's id that merely looks seeded
    /// must not allocate a vector as long as its number).
    cap: usize,
}

impl Holdings {
    /// Holdings whose seeded ids are expected below `expected` (the run's buyers).
    pub(super) fn new(expected: usize) -> Self {
        Holdings {
            seeded: Default::default(),
            text: HashMap::new(),
            cap: expected.saturating_mul(2).max(1 << 16),
        }
    }

    fn slot(&mut self, id: &str) -> &mut i64 {
        match seeded(id).filter(|(_, n)| (*n as usize) < self.cap) {
            Some((form, n)) => {
                let v = &mut self.seeded[form];
                if v.len() <= n as usize {
                    v.resize(n as usize + 1, UNSEEN);
                }
                &mut v[n as usize]
            }
            None => {
                if !self.text.contains_key(id) {
                    self.text.insert(id.into(), UNSEEN);
                }
                self.text.get_mut(id).expect("just inserted")
            }
        }
    }

    /// `id` has a row holding `qty` units (0: a row that holds none).
    pub(super) fn add(&mut self, id: &str, qty: i64) {
        let s = self.slot(id);
        *s = if *s == UNSEEN { qty } else { *s + qty };
    }

    /// What `id` holds, if it has a row.
    pub(super) fn get(&self, id: &str) -> Option<i64> {
        let v = match seeded(id).filter(|(_, n)| (*n as usize) < self.cap) {
            Some((form, n)) => *self.seeded[form].get(n as usize)?,
            None => *self.text.get(id)?,
        };
        (v != UNSEEN).then_some(v)
    }

    /// Every id's holding.
    fn values(&self) -> impl Iterator<Item = i64> + '_ {
        self.seeded
            .iter()
            .flatten()
            .chain(self.text.values())
            .copied()
            .filter(|v| *v != UNSEEN)
    }

    /// Ids holding more than `limit`.
    pub(super) fn over(&self, limit: i64) -> u64 {
        self.values().filter(|q| *q > limit).count() as u64
    }
}

/// The most units held at once, from each order's creation and release: the net change per
/// millisecond is enough, since at one instant releases come before creations (a unit given
/// back and re-bought in the same millisecond was never held twice) so the instant's highest
/// level is the one after all of its changes. Memory grows with the sale's distinct
/// milliseconds, not with its orders.
#[derive(Debug, Default)]
pub(super) struct Peak {
    net: BTreeMap<i64, i64>,
}

impl Peak {
    /// An order of `qty` units created at `created`, released at `released` (if it was).
    pub(super) fn add(&mut self, created: i64, qty: i64, released: Option<i64>) {
        *self.net.entry(created).or_default() += qty;
        if let Some(r) = released {
            *self.net.entry(r.max(created)).or_default() -= qty;
        }
    }

    /// The most held at once (0 with nothing held).
    pub(super) fn peak(&self) -> i64 {
        let (mut held, mut peak) = (0i64, 0i64);
        for d in self.net.values() {
            held += d;
            peak = peak.max(held);
        }
        peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::schedule::Ident;

    #[test]
    fn only_canonical_seeded_spellings_are_numbers() {
        for (i, bot) in [(0, false), (17, false), (4, true)] {
            let u = Ident::user(i, bot).to_string();
            let d = Ident::device(i, bot).to_string();
            assert_eq!(seeded(&u).map(|s| s.1), Some(i as u32), "{u}");
            assert_eq!(seeded(&d).map(|s| s.1), Some(i as u32), "{d}");
        }
        assert_ne!(seeded("bot-dev-3"), seeded("bot-3"));
        for text in ["u-01", "u-", "u-1x", "alice", "u-99999999999", "dev--1"] {
            assert_eq!(seeded(text), None, "{text}");
        }
    }

    #[test]
    fn holdings_are_per_id_text_or_seeded_and_a_far_number_is_text() {
        let mut h = Holdings::new(10);
        h.add("u-1", 1);
        h.add("u-1", 1);
        h.add("u-2", 0);
        h.add("alice", 3);
        h.add("u-4000000000", 2);
        assert_eq!(h.get("u-1"), Some(2));
        assert_eq!(h.get("u-2"), Some(0));
        assert_eq!(h.get("u-3"), None);
        assert_eq!(h.get("u-01"), None, "another text, not u-1");
        assert_eq!(h.get("u-4000000000"), Some(2));
        assert_eq!(h.over(1), 3);
        assert!(h.seeded[0].len() < 100, "no vector as long as a far number");
    }
}
