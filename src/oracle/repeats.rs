//! Which names may occur more than once, found from 8-byte hashes instead of a map of every
//! name: a million order ids told once each cost one sorted vector of hashes, and only the few
//! names whose hash repeats (the names that do repeat, and any hash collision) go to the exact
//! maps that follow. A name whose hash occurs once occurs once: nothing is missed.

use hashbrown::{DefaultHashBuilder, HashSet};
use std::hash::{BuildHasher, Hash};

/// The hashes of names that may occur more than once.
#[derive(Debug, Default)]
pub(super) struct Repeats {
    /// One hasher for the names and the questions: the same name always hashes alike.
    hasher: DefaultHashBuilder,
    twice: HashSet<u64>,
}

impl Repeats {
    /// The hashes among `names` that occur more than once.
    pub(super) fn of<T: Hash>(names: impl Iterator<Item = T>) -> Self {
        let hasher = DefaultHashBuilder::default();
        let mut hashes: Vec<u64> = names.map(|n| hasher.hash_one(&n)).collect();
        hashes.sort_unstable();
        let twice = hashes
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[0])
            .collect();
        Repeats { hasher, twice }
    }

    /// Whether `name` may occur more than once (false: it occurs at most once).
    pub(super) fn may_repeat<T: Hash>(&self, name: &T) -> bool {
        !self.twice.is_empty() && self.twice.contains(&self.hasher.hash_one(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_occurs_twice_may_repeat_and_one_that_occurs_once_does_not() {
        let names = ["a", "b", "a", "c"];
        let r = Repeats::of(names.iter());
        assert!(r.may_repeat(&&"a"));
        assert!(!r.may_repeat(&&"b"));
        assert!(!r.may_repeat(&&"c"));
        assert!(!Repeats::of(["x", "y"].iter()).may_repeat(&&"x"));
    }
}
