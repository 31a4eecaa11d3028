//! The clients' records of order attempts, acknowledgements and buyers' results, kept compact
//! while the run goes: small fixed-size records that name their buyer by index and their
//! idempotency key by attempt number (`ovs-<run>-<buyer>-<n>` is spelled only at the end), an
//! acknowledgement by the attempt that was told, the order ids the shop returned in one text
//! arena, and a buyer's result in one byte of a vector indexed by buyer. They are handed to
//! the oracle as they are, every attempt's key spelled once (`ClientRecords::seal`), and
//! [`Records::buyers`] gives the buyers' results.

use super::{Answer, AnswerClass, BuyerResult};
use crate::traffic::schedule::ident::Ident;
use std::collections::BTreeMap;

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

/// A text in an [`Arena`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    pub(super) start: u32,
    pub(super) len: u32,
}

/// Texts kept end to end in one string, each named by its [`Span`] (under 4 GiB in all).
#[derive(Debug, Clone, Default)]
pub(super) struct Arena(String);

impl Arena {
    pub(super) fn with_capacity(bytes: usize) -> Self {
        Arena(String::with_capacity(bytes))
    }

    pub(super) fn reserve(&mut self, bytes: usize) {
        self.0.reserve(bytes);
    }

    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    /// Keeps `s`.
    pub(super) fn push(&mut self, s: &str) -> Span {
        self.push_with(|t| t.push_str(s))
    }

    /// Keeps, as one text, what `write` appends.
    pub(super) fn push_with(&mut self, write: impl FnOnce(&mut String)) -> Span {
        let start = self.0.len();
        write(&mut self.0);
        Span {
            start: u32::try_from(start).expect("under 4 GiB of recorded texts"),
            len: u32::try_from(self.0.len() - start).expect("a text under 4 GiB"),
        }
    }

    pub(super) fn get(&self, s: Span) -> &str {
        &self.0[s.start as usize..(s.start + s.len) as usize]
    }
}

/// A stored key: an attempt number of the record's own buyer, text (in the arena), the
/// number's spelling (sealed records' key text), or none (an acknowledgement handed over
/// without one).
#[derive(Debug, Clone, Copy)]
pub(super) enum StoredKey {
    Attempt(u32),
    Text(Span),
    Spelled(Span),
    None,
}

/// An attempt: 36 bytes (its instant and buyer in 32 bits each: 49 days after the opening,
/// 4 billion buyers).
#[derive(Debug, Clone)]
pub(super) struct AttemptRec {
    pub(super) at_ms: u32,
    pub(super) buyer: u32,
    pub(super) key: StoredKey,
    pub(super) order_id: Option<Span>,
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

/// A buyer's result, in one byte: recorded, bot, attempted, got an order.
const RECORDED: u8 = 1;
const BOT: u8 = 2;
const ATTEMPTED: u8 = 4;
const GOT_ORDER: u8 = 8;

/// Every order attempt, acknowledgement and buyer's result of a run.
#[derive(Debug, Default)]
pub(super) struct Records {
    /// The texts (order ids, keys given as text, in that order of arrival).
    pub(super) arena: Arena,
    pub(super) attempts: Vec<AttemptRec>,
    pub(super) acks: Vec<AckRec>,
    /// By buyer index.
    buyers: Vec<u8>,
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
        self.arena.reserve(buyers.saturating_mul(40));
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
        let key = match key {
            Key::Attempt { buyer: b, n } if b == buyer => match u32::try_from(n) {
                Ok(n) => StoredKey::Attempt(n),
                Err(_) => StoredKey::Text(self.arena.push(&spell(run_key, b, n))),
            },
            Key::Attempt { buyer: b, n } => StoredKey::Text(self.arena.push(&spell(run_key, b, n))),
            Key::Text(s) => StoredKey::Text(self.arena.push(s)),
        };
        let order_id = order_id.map(|id| self.arena.push(id));
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
        let id = self.attempts[attempt as usize].order_id;
        Some(id.map(|s| self.arena.get(s)))
    }

    /// Buyer `buyer` is done.
    pub(super) fn finished(&mut self, buyer: usize, r: BuyerResult) {
        if self.buyers.len() <= buyer {
            self.buyers.resize(buyer + 1, 0);
        }
        let flag = |on: bool, f: u8| if on { f } else { 0 };
        self.buyers[buyer] = RECORDED
            | flag(r.bot, BOT)
            | flag(r.attempted, ATTEMPTED)
            | flag(r.got_order, GOT_ORDER);
    }

    /// Every finished buyer's result, by buyer index.
    pub(super) fn buyers(&self) -> BTreeMap<usize, BuyerResult> {
        self.buyers
            .iter()
            .enumerate()
            .filter(|(_, f)| *f & RECORDED != 0)
            .map(|(i, f)| {
                let r = BuyerResult {
                    bot: f & BOT != 0,
                    attempted: f & ATTEMPTED != 0,
                    got_order: f & GOT_ORDER != 0,
                };
                (i, r)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_is_as_small_as_its_docs_say() {
        // A million buyers' attempts and acknowledgements: 36 MB and 32 MB, plus the arena.
        assert!(std::mem::size_of::<AttemptRec>() <= 36);
        assert!(std::mem::size_of::<AckRec>() <= 32);
    }

    #[test]
    fn instants_past_49_days_are_kept_below_unset() {
        assert_eq!(ms32(12), 12);
        assert_eq!(ms32(u64::MAX), UNSET - 1);
        assert_eq!(ms32(u64::from(u32::MAX)), UNSET - 1);
    }
}
