//! The attempts' idempotency keys indexed for the order rows, each key once: a table of
//! positions (the first attempt that sent it, its facts), hashed by the key's text, which stays
//! in the clients' records. 8 bytes a key in the table and its facts beside it, not the text's
//! pointer and length in a map of a million keys.

use crate::traffic::recorder::{AttemptView, ClientRecords};
use hashbrown::hash_table::{Entry, HashTable};
use hashbrown::DefaultHashBuilder;
use std::hash::BuildHasher;

/// Each distinct key of the records' attempts, with facts of type `F` about it.
pub(super) struct Keys<'a, F> {
    records: &'a ClientRecords,
    hasher: DefaultHashBuilder,
    /// (the position of the first attempt with the key, its facts' position).
    table: HashTable<(u32, u32)>,
    facts: Vec<F>,
}

impl<'a, F: Default> Keys<'a, F> {
    /// Every key of `records`' attempts, each attempt given to `add` with its key's facts.
    pub(super) fn new(
        records: &'a ClientRecords,
        mut add: impl FnMut(&mut F, &AttemptView<'a>),
    ) -> Self {
        let hasher = DefaultHashBuilder::default();
        let mut table: HashTable<(u32, u32)> = HashTable::with_capacity(records.attempts().len());
        let mut facts: Vec<F> = Vec::new();
        let key_of = |i: u32| records.attempt(i as usize).key;
        for (i, a) in records.attempts().enumerate() {
            let i = u32::try_from(i).expect("under 4 billion attempts");
            let hash = hasher.hash_one(a.key);
            let slot = match table.entry(
                hash,
                |&(j, _)| key_of(j) == a.key,
                |&(j, _)| hasher.hash_one(key_of(j)),
            ) {
                Entry::Occupied(e) => e.get().1 as usize,
                Entry::Vacant(v) => {
                    v.insert((i, facts.len() as u32));
                    facts.push(F::default());
                    facts.len() - 1
                }
            };
            add(&mut facts[slot], &a);
        }
        facts.shrink_to_fit();
        Keys {
            records,
            hasher,
            table,
            facts,
        }
    }

    fn slot(&self, key: &str) -> Option<usize> {
        let records = self.records;
        self.table
            .find(self.hasher.hash_one(key), |&(j, _)| {
                records.attempt(j as usize).key == key
            })
            .map(|&(_, f)| f as usize)
    }

    /// The facts of `key`, if an attempt sent it.
    pub(super) fn get(&self, key: &str) -> Option<&F> {
        self.slot(key).map(|f| &self.facts[f])
    }

    /// The facts of `key`, if an attempt sent it.
    pub(super) fn get_mut(&mut self, key: &str) -> Option<&mut F> {
        self.slot(key).map(|f| &mut self.facts[f])
    }

    /// Every key's facts.
    pub(super) fn values(&self) -> impl Iterator<Item = &F> {
        self.facts.iter()
    }
}
