//! Every finished buyer's result, one byte a buyer in a vector indexed by the buyer: ten
//! million buyers cost 10 MB, where a map of them cost ~25 bytes each.

use super::BuyerResult;

/// A buyer's result, in one byte: recorded, bot, attempted, got an order.
const RECORDED: u8 = 1;
const BOT: u8 = 2;
const ATTEMPTED: u8 = 4;
const GOT_ORDER: u8 = 8;

/// The finished buyers' results, by buyer index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Buyers {
    flags: Vec<u8>,
    recorded: usize,
}

impl Buyers {
    /// Room for buyers `0..n`.
    pub(super) fn reserve(&mut self, n: usize) {
        self.flags.reserve(n);
    }

    /// Keeps `r` as buyer `buyer`'s result; false when the buyer had one already (replaced).
    pub fn insert(&mut self, buyer: usize, r: BuyerResult) -> bool {
        if self.flags.len() <= buyer {
            self.flags.resize(buyer + 1, 0);
        }
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        let was = std::mem::replace(
            &mut self.flags[buyer],
            RECORDED
                | flag(r.bot, BOT)
                | flag(r.attempted, ATTEMPTED)
                | flag(r.got_order, GOT_ORDER),
        );
        let new = was & RECORDED == 0;
        self.recorded += usize::from(new);
        new
    }

    /// Buyer `buyer`'s result, if it finished.
    pub fn get(&self, buyer: usize) -> Option<BuyerResult> {
        let f = *self.flags.get(buyer)?;
        (f & RECORDED != 0).then_some(BuyerResult {
            bot: f & BOT != 0,
            attempted: f & ATTEMPTED != 0,
            got_order: f & GOT_ORDER != 0,
        })
    }

    /// How many buyers finished.
    pub fn len(&self) -> usize {
        self.recorded
    }

    pub fn is_empty(&self) -> bool {
        self.recorded == 0
    }

    /// Every finished buyer and its result, by buyer index.
    pub fn iter(&self) -> impl Iterator<Item = (usize, BuyerResult)> + '_ {
        (0..self.flags.len()).filter_map(|b| self.get(b).map(|r| (b, r)))
    }

    /// Every finished buyer's result, by buyer index.
    pub fn values(&self) -> impl Iterator<Item = BuyerResult> + '_ {
        self.iter().map(|(_, r)| r)
    }
}

impl FromIterator<(usize, BuyerResult)> for Buyers {
    fn from_iter<I: IntoIterator<Item = (usize, BuyerResult)>>(iter: I) -> Self {
        let mut b = Buyers::default();
        for (i, r) in iter {
            b.insert(i, r);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buyer_is_kept_by_index_and_counted_once() {
        let r = |bot, attempted, got_order| BuyerResult {
            bot,
            attempted,
            got_order,
        };
        let mut b = Buyers::default();
        assert!(b.is_empty());
        assert!(b.insert(3, r(false, true, true)));
        assert!(b.insert(0, r(true, false, false)));
        assert!(
            !b.insert(3, r(false, true, false)),
            "a second result is not a new buyer"
        );
        assert_eq!(b.len(), 2);
        assert_eq!(b.get(1), None, "a buyer between two that finished did not");
        assert_eq!(b.get(9), None);
        assert_eq!(b.get(3), Some(r(false, true, false)));
        let all: Vec<_> = b.iter().collect();
        assert_eq!(
            all,
            vec![(0, r(true, false, false)), (3, r(false, true, false))]
        );
        assert_eq!(all.into_iter().collect::<Buyers>(), b);
    }
}
