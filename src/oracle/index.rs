//! The attempts' idempotency keys indexed for the order rows, each key once: a table of the
//! position of the first attempt that sent it, hashed by the key's spelling ([`KeyRef`]), whose
//! text or number stays in the clients' records, and the key's facts at that position. 4 bytes
//! a key in the table, not the text's pointer and length in a map of ten million keys.

use crate::traffic::recorder::{AttemptView, ClientRecords, KeyRef};
use hashbrown::hash_table::{Entry, HashTable};
use hashbrown::DefaultHashBuilder;
use std::hash::BuildHasher;

/// Each distinct key of the records' attempts, with facts of type `F` about it.
pub(super) struct Keys<'a, F> {
    records: &'a ClientRecords,
    hasher: DefaultHashBuilder,
    /// The position of the first attempt with the key.
    table: HashTable<u32>,
    /// By the position of the first attempt with the key (other positions: unused).
    facts: Vec<F>,
}

impl<'a, F: Default + Clone> Keys<'a, F> {
    /// Every key of `records`' attempts, each attempt given to `add` with its key's facts.
    pub(super) fn new(
        records: &'a ClientRecords,
        mut add: impl FnMut(&mut F, &AttemptView<'a>),
    ) -> Self {
        let hasher = DefaultHashBuilder::default();
        let n = records.attempts().len();
        let mut table: HashTable<u32> = HashTable::with_capacity(n);
        let mut facts: Vec<F> = vec![F::default(); n];
        let key_of = |i: u32| records.attempt_key(i as usize);
        for (i, a) in records.attempts().enumerate() {
            let i = u32::try_from(i).expect("under 4 billion attempts");
            let hash = hasher.hash_one(a.key);
            let first = match table.entry(
                hash,
                |&j| key_of(j) == a.key,
                |&j| hasher.hash_one(key_of(j)),
            ) {
                Entry::Occupied(e) => *e.get(),
                Entry::Vacant(v) => *v.insert(i).get(),
            };
            add(&mut facts[first as usize], &a);
        }
        Keys {
            records,
            hasher,
            table,
            facts,
        }
    }

    fn slot(&self, key: KeyRef<'_>) -> Option<usize> {
        let records = self.records;
        self.table
            .find(self.hasher.hash_one(key), |&j| {
                records.attempt_key(j as usize) == key
            })
            .map(|&j| j as usize)
    }

    /// The facts of `key`, if an attempt sent it.
    pub(super) fn get(&self, key: KeyRef<'_>) -> Option<&F> {
        self.slot(key).map(|f| &self.facts[f])
    }

    /// The facts of `key`, if an attempt sent it.
    pub(super) fn get_mut(&mut self, key: KeyRef<'_>) -> Option<&mut F> {
        self.slot(key).map(|f| &mut self.facts[f])
    }

    /// Every key's facts.
    pub(super) fn values(&self) -> impl Iterator<Item = &F> {
        self.table.iter().map(|&j| &self.facts[j as usize])
    }
}

/// An id named by something other than an acknowledgement: its position among `others`.
const OTHER: u32 = 1 << 31;

/// Order ids, each once, with facts of type `F`: a table of (where its text is, its facts),
/// hashed by the text. An acknowledged id's text stays in the clients' records (the table
/// holds the acknowledgement's position); any other id's (a told, followed-up or dead-lettered
/// one) is borrowed beside it.
pub(super) struct Ids<'a, F> {
    records: &'a ClientRecords,
    others: Vec<&'a str>,
    hasher: DefaultHashBuilder,
    table: HashTable<(u32, F)>,
}

/// The text at `at` (see [`Ids`]).
fn text<'a>(records: &'a ClientRecords, others: &[&'a str], at: u32) -> &'a str {
    if at & OTHER != 0 {
        others[(at & !OTHER) as usize]
    } else {
        records.ack_order_id(at as usize).unwrap_or("")
    }
}

impl<'a, F: Default> Ids<'a, F> {
    /// No ids yet, room for the records' acknowledgements'.
    pub(super) fn new(records: &'a ClientRecords) -> Self {
        Ids {
            records,
            others: Vec::new(),
            hasher: DefaultHashBuilder::default(),
            table: HashTable::with_capacity(records.acks().len()),
        }
    }

    /// The facts of `id`, added (as `at`, or as one of `others` when `at` is `None`) if absent.
    fn insert(&mut self, id: &'a str, at: Option<u32>) -> &mut F {
        let (records, hasher) = (self.records, &self.hasher);
        let others = &self.others;
        let entry = self.table.entry(
            hasher.hash_one(id),
            |(j, _)| text(records, others, *j) == id,
            |(j, _)| hasher.hash_one(text(records, others, *j)),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(e) => &mut e.into_mut().1,
            hashbrown::hash_table::Entry::Vacant(v) => {
                let at = at.unwrap_or_else(|| {
                    self.others.push(id);
                    OTHER | u32::try_from(self.others.len() - 1).expect("under 2 billion ids")
                });
                &mut v.insert((at, F::default())).into_mut().1
            }
        }
    }

    /// The facts of acknowledgement `i`'s order id (`id`), added if absent.
    pub(super) fn acked(&mut self, i: usize, id: &'a str) -> &mut F {
        let at = u32::try_from(i).ok().filter(|i| i & OTHER == 0);
        self.insert(id, Some(at.expect("under 2 billion acknowledgements")))
    }

    /// The facts of `id`, added if absent.
    pub(super) fn entry(&mut self, id: &'a str) -> &mut F {
        self.insert(id, None)
    }

    fn find(&self, id: &str) -> Option<&(u32, F)> {
        let (records, others) = (self.records, &self.others);
        self.table.find(self.hasher.hash_one(id), |(j, _)| {
            text(records, others, *j) == id
        })
    }

    /// The facts of `id`, if it is here.
    pub(super) fn get(&self, id: &str) -> Option<&F> {
        self.find(id).map(|(_, f)| f)
    }

    /// The facts of `id`, if it is here.
    pub(super) fn get_mut(&mut self, id: &str) -> Option<&mut F> {
        let (records, others) = (self.records, &self.others);
        let hash = self.hasher.hash_one(id);
        self.table
            .find_mut(hash, |(j, _)| text(records, others, *j) == id)
            .map(|(_, f)| f)
    }
}
