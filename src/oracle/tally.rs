//! Small, exact accumulators for order rows read one at a time: units held per user (or
//! device), and the most units held at once.
//!
//! A user id the schedule seeded (`u-17`, `bot-4`, `dev-9`, `bot-dev-2`) is kept as a number in
//! a vector indexed by it, 4 bytes each, so ten million buyers' holdings cost 40 MB, not ten
//! million strings (a holding past `i32` moves to the text map, exact); any other id is kept as
//! its text. A spelling is seeded only in its canonical form (digits, no
//! leading zero, within `u32`), so two ids are the same entry exactly when their texts are equal.

use std::collections::{BTreeMap, HashMap};

/// `s` as (form, number) when it is a seeded id in canonical form
/// ([`crate::traffic::schedule::ident::seeded_number`]).
pub(super) fn seeded(s: &str) -> Option<(usize, u32)> {
    let (form, _, n) = crate::traffic::schedule::ident::seeded_number(s)?;
    u32::try_from(n).ok().map(|n| (form, n))
}

/// Not seen: a user with rows has a sum, maybe 0.
const UNSEEN: i32 = i32::MIN;
/// Kept in the text map: its sum left `i32`.
const MOVED: i32 = i32::MIN + 1;

/// Units held per id (user or device), for every id that has a row.
#[derive(Debug)]
pub(super) struct Holdings {
    seeded: [Vec<i32>; 4],
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

    /// The seeded slot of `id`, if it has one (`None`: kept as text).
    fn seeded_slot(&mut self, id: &str) -> Option<&mut i32> {
        let (form, n) = seeded(id).filter(|(_, n)| (*n as usize) < self.cap)?;
        let v = &mut self.seeded[form];
        if v.len() <= n as usize {
            v.resize(n as usize + 1, UNSEEN);
        }
        Some(&mut v[n as usize]).filter(|s| **s != MOVED)
    }

    /// `id` has a row holding `qty` units (0: a row that holds none).
    pub(super) fn add(&mut self, id: &str, qty: i64) {
        if let Some(s) = self.seeded_slot(id) {
            let sum = if *s == UNSEEN {
                qty
            } else {
                i64::from(*s) + qty
            };
            match i32::try_from(sum).ok().filter(|v| *v > MOVED) {
                Some(v) => *s = v,
                None => {
                    // Past `i32`: kept as text from here on.
                    *s = MOVED;
                    self.text.insert(id.into(), sum);
                }
            }
            return;
        }
        match self.text.get_mut(id) {
            Some(s) => *s += qty,
            None => {
                self.text.insert(id.into(), qty);
            }
        }
    }

    /// What `id` holds, if it has a row.
    pub(super) fn get(&self, id: &str) -> Option<i64> {
        let seeded = seeded(id).filter(|(_, n)| (*n as usize) < self.cap);
        match seeded.and_then(|(form, n)| self.seeded[form].get(n as usize)) {
            Some(&MOVED) | None => self.text.get(id).copied(),
            Some(&UNSEEN) => None,
            Some(v) => Some(i64::from(*v)),
        }
    }

    /// Every id's holding.
    fn values(&self) -> impl Iterator<Item = i64> + '_ {
        self.seeded
            .iter()
            .flatten()
            .filter(|v| **v != UNSEEN && **v != MOVED)
            .map(|v| i64::from(*v))
            .chain(self.text.values().copied())
    }

    /// Ids holding more than `limit`.
    pub(super) fn over(&self, limit: i64) -> u64 {
        self.values().filter(|q| *q > limit).count() as u64
    }

    /// Up to `n` of the ids holding more than `limit`, spelled as their rows spell them.
    pub(super) fn over_ids(&self, limit: i64, n: usize) -> Vec<String> {
        use crate::traffic::schedule::ident::seeded_spelling;
        let seeded = self.seeded.iter().enumerate().flat_map(|(form, v)| {
            v.iter()
                .enumerate()
                .filter(move |(_, q)| **q != UNSEEN && **q != MOVED && i64::from(**q) > limit)
                .map(move |(i, _)| seeded_spelling(form, i as u64))
        });
        let text = self
            .text
            .iter()
            .filter(|(_, q)| **q > limit)
            .map(|(id, _)| id.to_string());
        seeded.chain(text).take(n).collect()
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
        self.peak_at().map_or(0, |(_, held)| held)
    }

    /// The first instant the most was held, and how much (`None` with nothing held).
    pub(super) fn peak_at(&self) -> Option<(i64, i64)> {
        let (mut held, mut peak) = (0i64, None::<(i64, i64)>);
        for (t, d) in &self.net {
            held += d;
            if peak.is_none_or(|(_, p)| held > p) {
                peak = Some((*t, held));
            }
        }
        peak.filter(|(_, p)| *p > 0)
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

    #[test]
    fn a_holding_past_32_bits_moves_to_the_text_map_and_stays_exact() {
        let mut h = Holdings::new(10);
        h.add("u-3", 5);
        h.add("u-3", i64::from(i32::MAX));
        assert_eq!(h.get("u-3"), Some(i64::from(i32::MAX) + 5));
        h.add("u-3", -10);
        assert_eq!(
            h.get("u-3"),
            Some(i64::from(i32::MAX) - 5),
            "stays in the map"
        );
        h.add("u-4", i64::from(i32::MIN));
        assert_eq!(
            h.get("u-4"),
            Some(i64::from(i32::MIN)),
            "a first row past i32 too"
        );
        h.add("u-5", 0);
        assert_eq!(h.get("u-5"), Some(0));
        assert_eq!(h.over(0), 1);
        assert_eq!(h.values().count(), 3);
    }
}
