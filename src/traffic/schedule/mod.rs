//! The seeded plan of every buyer: who arrives when, browses how much, whether it is a bot, and
//! what it does after ordering. Fixed before the sale opens by the scenario's seed, so two runs
//! send the same schedule and a slow shop can never change when buyers arrive.
//!
//! A [`Schedule`] holds only the sorted arrivals (8 bytes a buyer): each buyer's
//! [`BuyerPlan`] is drawn from its own seeded stream when it is asked for ([`draw`]), so a
//! million buyers cost 8 MB before the sale, not the 130 MB their plans would.

use super::adversary::Script;
use super::scenario::Scenario;
pub use draw::apportion;
pub use ident::Ident;
use std::sync::Arc;
use std::time::Duration;

mod draw;
pub mod ident;

/// What a buyer does with a created order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterOrder {
    Pay {
        think: Duration,
    },
    Cancel {
        think: Duration,
    },
    Abandon,
    /// An `[adversarial]` script. `think`: from the order's answer to the first follow-up
    /// (`at_timeout`: from the order's intended send to its pay, about the payment window).
    Script {
        script: Script,
        think: Duration,
    },
}

/// One person's plan, drawn when its journey is spawned: ~136 bytes, and nothing else for a
/// seeded buyer who orders straight away (its ids are spelled from numbers, [`Ident`]).
#[derive(Debug, Clone, PartialEq)]
pub struct BuyerPlan {
    pub index: usize,
    pub user_id: Ident,
    pub device_id: Ident,
    /// Sent as `X-Forwarded-For`.
    pub ip: Ident,
    /// Intended time of the first request, from the moment the sale opens.
    pub arrival: Duration,
    /// Think time after each product-page view (empty: orders straight away).
    pub views: Box<[Duration]>,
    pub bot: bool,
    /// Gaps between a bot's submissions of the same order (empty for people).
    pub resubmits: Box<[Duration]>,
    pub after: AfterOrder,
    /// 1 for the opening rush, 2 for the second wave.
    pub wave: u8,
}

/// Every buyer of a scenario (or a shard's share of them), in arrival order: the arrivals are
/// held, each buyer's plan is drawn from the seed when asked for. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Schedule {
    draw: Arc<draw::Draw>,
    /// Every buyer's arrival and wave, packed (`draw::unpack`), by buyer index: the index
    /// order is the arrival order.
    arrivals: Arc<[u64]>,
    /// A buyers CSV's accounts, by buyer index (`None`: the seeded ids).
    accounts: Option<Arc<[Names]>>,
    /// The buyers here: indexes `first`, `first + step`, ... (a shard's share; 0 and 1 for all).
    first: usize,
    step: usize,
}

/// A buyer's ids given instead of the seeded ones (a buyers CSV's row).
#[derive(Debug, Clone, PartialEq)]
pub struct Names {
    pub user_id: Ident,
    pub device_id: Ident,
    pub ip: Ident,
}

/// Every buyer of the scenario, ordered by arrival.
pub fn build(s: &Scenario) -> Schedule {
    Schedule {
        draw: Arc::new(draw::Draw::of(s)),
        arrivals: draw::packed_arrivals(s).into(),
        accounts: None,
        first: 0,
        step: 1,
    }
}

impl Schedule {
    /// How many buyers this schedule sends.
    pub fn len(&self) -> usize {
        let n = self.arrivals.len();
        if self.first >= n {
            0
        } else {
            (n - self.first).div_ceil(self.step)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buyer index of this schedule's `k`-th buyer.
    pub fn index(&self, k: usize) -> usize {
        self.first + k * self.step
    }

    /// When this schedule's `k`-th buyer arrives, from the opening (no draw: cheap).
    pub fn arrival(&self, k: usize) -> Duration {
        draw::unpack(self.arrivals[self.index(k)]).0
    }

    /// This schedule's `k`-th buyer, drawn from its seeded stream (with its CSV account's ids
    /// when there is one). Panics past [`Schedule::len`], as indexing does.
    pub fn get(&self, k: usize) -> BuyerPlan {
        assert!(k < self.len(), "buyer {k} of a schedule of {}", self.len());
        let index = self.index(k);
        let (arrival, wave) = draw::unpack(self.arrivals[index]);
        let mut b = self.draw.buyer(index, arrival, wave);
        if let Some(a) = self.accounts.as_ref().and_then(|a| a.get(index)) {
            b.user_id = a.user_id.clone();
            b.device_id = a.device_id.clone();
            b.ip = a.ip.clone();
        }
        b
    }

    /// The user id of buyer `index` (its CSV account's, else its seeded one), whether or not
    /// this schedule's share sends it; `None` past the scenario's buyers.
    pub fn user_id(&self, index: usize) -> Option<Ident> {
        let packed = *self.arrivals.get(index)?;
        if let Some(a) = self.accounts.as_ref().and_then(|a| a.get(index)) {
            return Some(a.user_id.clone());
        }
        let (arrival, wave) = draw::unpack(packed);
        Some(self.draw.buyer(index, arrival, wave).user_id)
    }

    /// Every buyer, in arrival order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = BuyerPlan> + '_ {
        (0..self.len()).map(|k| self.get(k))
    }

    /// Every buyer's index, in arrival order (no draw).
    pub fn indexes(&self) -> impl ExactSizeIterator<Item = usize> + '_ {
        (0..self.len()).map(|k| self.index(k))
    }

    /// The share of shard `shard` of `of`: every `of`-th buyer of this schedule from its
    /// `shard`-th, each keeping its index (`of` ≥ 1).
    pub fn share(&self, shard: usize, of: usize) -> Schedule {
        let of = of.max(1);
        Schedule {
            first: self.first + shard * self.step,
            step: self.step * of,
            ..self.clone()
        }
    }

    /// Gives buyer `i` the ids `accounts[i]` (a buyers CSV's rows), up to the accounts' number.
    pub fn rename(&mut self, accounts: Vec<Names>) {
        self.accounts = Some(accounts.into());
    }

    /// Arrivals per whole second of the schedule (for `--dry-run` and the plan summary).
    pub fn per_second(&self) -> Vec<u32> {
        let mut v: Vec<u32> = Vec::new();
        for k in 0..self.len() {
            let s = self.arrival(k).as_secs() as usize;
            if v.len() <= s {
                v.resize(s + 1, 0);
            }
            v[s] += 1;
        }
        v
    }

    /// Bytes this holds for its buyers (the arrivals, the accounts' text): what a plan costs
    /// before the sale opens.
    pub fn stored_bytes(&self) -> usize {
        let accounts = self.accounts.as_ref().map_or(0, |a| {
            a.iter()
                .map(|a| {
                    std::mem::size_of::<Names>()
                        + a.user_id.stored_bytes()
                        + a.device_id.stored_bytes()
                        + a.ip.stored_bytes()
                })
                .sum()
        });
        self.arrivals.len() * std::mem::size_of::<u64>() + accounts
    }
}

#[cfg(test)]
mod tests;
