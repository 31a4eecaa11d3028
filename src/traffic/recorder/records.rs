//! The clients' records of order attempts, acknowledgements and buyers' results, kept compact
//! while the run goes: small fixed-size records that name their buyer by index and their
//! idempotency key by attempt number (`ovs-<run>-<buyer>-<n>` is spelled only when a person
//! reads it), an acknowledgement by the attempt that was told, the order ids the shop returned
//! in one text arena, and a buyer's result in one byte of a vector indexed by buyer
//! ([`super::Buyers`]). They are handed to the oracle as they are (`ClientRecords::seal`),
//! which reads a key as a [`super::KeyRef`].

use super::buyers::Buyers;
use super::{Answer, AnswerClass, BuyerResult};
use crate::traffic::schedule::ident::Ident;

/// An order attempt's idempotency key, as the recorder is handed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'a> {
    /// Attempt `n` of buyer `buyer` (0: its first submission; a bot's extra submissions are
    /// 1, 2, ...), spelled `ovs-<run>-<buyer>-<n>` ([`super::Recorder::attempt_key`]).
    Attempt { buyer: usize, n: usize },
    /// Any other text.
    Text(&'a str),
}

impl<'a> From<&'a str> for Key<'a> {
    fn from(s: &'a str) -> Self {
        Key::Text(s)
    }
}

impl<'a> From<&'a String> for Key<'a> {
    fn from(s: &'a String) -> Self {
        Key::Text(s)
    }
}

/// A recorded attempt, by its position: what [`super::Recorder::attempt`] returns, for
/// [`super::Recorder::ack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptId(usize);

/// `ovs-<run>-<buyer>-<n>`: the one spelling of an attempt's key.
pub(super) fn spell(run_key: &str, buyer: usize, n: usize) -> String {
    format!("ovs-{run_key}-{buyer}-{n}")
}

/// A text in an [`Arena`], by its position among the arena's texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TextId(u32);

/// Texts kept end to end in one string, each named by its [`TextId`]: 4 bytes a text beside
/// its bytes (under 4 GiB and 2 billion texts in all).
#[derive(Debug, Clone, Default)]
pub(super) struct Arena {
    text: String,
    /// Where each text ends (the next one starts there).
    ends: Vec<u32>,
}

impl Arena {
    pub(super) fn reserve(&mut self, texts: usize, bytes: usize) {
        self.text.reserve(bytes);
        self.ends.reserve(texts);
    }

    /// Keeps `s`.
    pub(super) fn push(&mut self, s: &str) -> TextId {
        self.text.push_str(s);
        self.ends
            .push(u32::try_from(self.text.len()).expect("under 4 GiB of recorded texts"));
        TextId(u32::try_from(self.ends.len() - 1).expect("under 2 billion recorded texts"))
    }

    pub(super) fn get(&self, t: TextId) -> &str {
        let i = t.0 as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.text[start..self.ends[i] as usize]
    }
}

/// The runs whose attempt keys a set of records holds as numbers ([`StoredKey`]): one for a
/// run's own records, one per shard for merged ones.
pub(super) const RUNS: usize = 1 << 7;

/// Attempt numbers kept as numbers; a larger one is kept as text.
const ATTEMPTS: u32 = 1 << 24;

/// A stored key in 32 bits: attempt `n` of the record's own buyer in the records' run `run`
/// (spelled `ovs-<run>-<buyer>-<n>` only when read as text), a text in the arena, or none
/// (an acknowledgement handed over without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StoredKey(u32);

/// A stored key, unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stored {
    Attempt { run: usize, n: u32 },
    Text(TextId),
    None,
}

const TEXT: u32 = 1 << 31;

impl StoredKey {
    pub(super) const NONE: StoredKey = StoredKey(u32::MAX);

    /// Attempt `n` of run `run`, if both fit.
    pub(super) fn attempt(run: usize, n: u32) -> Option<StoredKey> {
        (run < RUNS && n < ATTEMPTS).then_some(StoredKey((run as u32) << 24 | n))
    }

    pub(super) fn text(t: TextId) -> StoredKey {
        assert!(t.0 < TEXT - 1, "under 2 billion recorded texts");
        StoredKey(TEXT | t.0)
    }

    pub(super) fn get(self) -> Stored {
        match self.0 {
            u32::MAX => Stored::None,
            k if k & TEXT != 0 => Stored::Text(TextId(k & !TEXT)),
            k => Stored::Attempt {
                run: (k >> 24) as usize,
                n: k & (ATTEMPTS - 1),
            },
        }
    }
}

/// An order id, if any, in 32 bits: its text in the arena.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OrderId(u32);

impl OrderId {
    pub(super) const NONE: OrderId = OrderId(u32::MAX);

    pub(super) fn of(t: Option<TextId>) -> OrderId {
        t.map_or(OrderId::NONE, |t| OrderId(t.0))
    }

    pub(super) fn get(self) -> Option<TextId> {
        (self != OrderId::NONE).then_some(TextId(self.0))
    }
}

/// An attempt: 20 bytes (its instant and buyer in 32 bits each: 49 days after the opening,
/// 4 billion buyers).
#[derive(Debug, Clone)]
pub(super) struct AttemptRec {
    pub(super) at_ms: u32,
    pub(super) buyer: u32,
    pub(super) key: StoredKey,
    pub(super) order_id: OrderId,
    pub(super) answer: Answer,
    pub(super) class: AnswerClass,
    pub(super) retry: bool,
}

/// "Not set" for an acknowledgement's optional instants.
pub(super) const UNSET: u32 = u32::MAX;

/// An instant in ms after the opening, in 32 bits (49 days; later ones are kept as the last
/// instant that fits, below [`UNSET`]).
pub(super) fn ms32(ms: u64) -> u32 {
    u32::try_from(ms).unwrap_or(UNSET - 1).min(UNSET - 1)
}

/// A position or buyer index in 32 bits.
pub(super) fn index32(i: usize) -> u32 {
    u32::try_from(i).expect("under 4 billion buyers and records")
}

/// Whose key, order id, buyer and answer instant an acknowledgement's are.
#[derive(Debug, Clone, Copy)]
pub(super) enum Link {
    /// The recorded attempt that was told, by position.
    Attempt(u32),
    /// Its own (handed over spelled out): the sealed records' `own`, by position.
    Own(u32),
}

/// An acknowledgement: 32 bytes.
#[derive(Debug, Clone)]
pub(super) struct AckRec {
    pub(super) link: Link,
    pub(super) sent_ms: u32,
    pub(super) cancel_sent_ms: u32,
    pub(super) paid_ms: u32,
    /// The user and device ids, unless they are the buyer's seeded ones ([`Ident::user`],
    /// [`Ident::device`]).
    pub(super) ids: Option<Box<(Ident, Ident)>>,
    pub(super) bot: bool,
}

/// Every order attempt, acknowledgement and buyer's result of a run.
#[derive(Debug, Default)]
pub(super) struct Records {
    /// The texts (order ids, keys given as text, in that order of arrival).
    pub(super) arena: Arena,
    pub(super) attempts: Vec<AttemptRec>,
    pub(super) acks: Vec<AckRec>,
    pub(super) buyers: Buyers,
}

/// How an acknowledgement's follow-up is kept: `cancel_sent_ms` or `paid_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    CancelSent,
    Paid,
}

impl Records {
    /// Room for `buyers` buyers' attempts, acknowledgements, order ids and results, taken
    /// once: the vectors never grow by doubling (a copy of each, and the old block left to the
    /// allocator, at the moment they are largest). Room no buyer uses is never touched, so it
    /// costs address space, not memory.
    pub(super) fn reserve(&mut self, buyers: usize) {
        self.attempts.reserve(buyers);
        self.acks.reserve(buyers);
        // An order id is 36 bytes for the reference shop (a UUID).
        self.arena.reserve(buyers, buyers.saturating_mul(40));
        self.buyers.reserve(buyers);
    }

    /// Records an attempt of `buyer` under `key` (`run_key`: this run's, to spell another
    /// buyer's attempt key), answered `answer` at `at_ms`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attempt(
        &mut self,
        run_key: &str,
        key: Key<'_>,
        buyer: usize,
        answer: Answer,
        order_id: Option<&str>,
        at_ms: u64,
        retry: bool,
    ) -> AttemptId {
        // The run's own attempt keys are run 0's numbers ([`super::ClientRecords::seal`]).
        let own = match key {
            Key::Attempt { buyer: b, n } if b == buyer => {
                u32::try_from(n).ok().and_then(|n| StoredKey::attempt(0, n))
            }
            _ => None,
        };
        let key = own.unwrap_or_else(|| {
            StoredKey::text(match key {
                Key::Attempt { buyer: b, n } => self.arena.push(&spell(run_key, b, n)),
                Key::Text(s) => self.arena.push(s),
            })
        });
        let order_id = OrderId::of(order_id.map(|id| self.arena.push(id)));
        self.attempts.push(AttemptRec {
            at_ms: ms32(at_ms),
            buyer: index32(buyer),
            key,
            order_id,
            answer,
            class: AnswerClass::of(answer),
            retry,
        });
        AttemptId(self.attempts.len() - 1)
    }

    /// Records that attempt `attempt` was told an order exists (the attempt was meant to go
    /// out at `sent_ms`); returns the acknowledgement's index.
    pub(super) fn ack(
        &mut self,
        attempt: AttemptId,
        user_id: &Ident,
        device_id: &Ident,
        bot: bool,
        sent_ms: u64,
    ) -> usize {
        let buyer = self.attempts[attempt.0].buyer as usize;
        let seeded = *user_id == Ident::user(buyer, bot) && *device_id == Ident::device(buyer, bot);
        self.acks.push(AckRec {
            link: Link::Attempt(index32(attempt.0)),
            sent_ms: ms32(sent_ms),
            cancel_sent_ms: UNSET,
            paid_ms: UNSET,
            ids: (!seeded).then(|| Box::new((user_id.clone(), device_id.clone()))),
            bot,
        });
        self.acks.len() - 1
    }

    /// Keeps the earliest `at` in acknowledgement `ack`'s `slot`; returns the order id it was
    /// told about (`None`: no such acknowledgement, `Some(None)`: told without an id).
    pub(super) fn follow_up(&mut self, ack: usize, slot: Slot, at: u64) -> Option<Option<&str>> {
        let a = self.acks.get_mut(ack)?;
        let kept = match slot {
            Slot::CancelSent => &mut a.cancel_sent_ms,
            Slot::Paid => &mut a.paid_ms,
        };
        *kept = (*kept).min(ms32(at));
        let Link::Attempt(attempt) = a.link else {
            return Some(None);
        };
        let id = self.attempts[attempt as usize].order_id.get();
        Some(id.map(|s| self.arena.get(s)))
    }

    /// Buyer `buyer` is done.
    pub(super) fn finished(&mut self, buyer: usize, r: BuyerResult) {
        self.buyers.insert(buyer, r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_as_small_as_its_docs_say() {
        // A million buyers' attempts and acknowledgements: 20 MB and 32 MB, plus the arena.
        assert!(std::mem::size_of::<AttemptRec>() <= 20);
        assert!(std::mem::size_of::<AckRec>() <= 32);
    }

    #[test]
    fn a_stored_key_unpacks_to_what_was_packed() {
        let k = |run, n| StoredKey::attempt(run, n).map(StoredKey::get);
        assert_eq!(k(0, 0), Some(Stored::Attempt { run: 0, n: 0 }));
        assert_eq!(
            k(RUNS - 1, ATTEMPTS - 1),
            Some(Stored::Attempt {
                run: RUNS - 1,
                n: ATTEMPTS - 1
            })
        );
        assert_eq!(k(RUNS, 0), None, "a run past the last is kept as text");
        assert_eq!(k(0, ATTEMPTS), None, "so is a large attempt number");
        let mut arena = Arena::default();
        let (a, b) = (arena.push("first"), arena.push(""));
        let c = arena.push("third");
        assert_eq!(StoredKey::text(c).get(), Stored::Text(c));
        assert_eq!(StoredKey::NONE.get(), Stored::None);
        assert_eq!(
            (arena.get(a), arena.get(b), arena.get(c)),
            ("first", "", "third")
        );
        assert_eq!(OrderId::of(Some(b)).get(), Some(b));
        assert_eq!(OrderId::of(None).get(), None);
    }

    #[test]
    fn instants_past_49_days_are_kept_below_unset() {
        assert_eq!(ms32(12), 12);
        assert_eq!(ms32(u64::MAX), UNSET - 1);
        assert_eq!(ms32(u64::from(u32::MAX)), UNSET - 1);
    }
}
