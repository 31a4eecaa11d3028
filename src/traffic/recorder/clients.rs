//! The clients' records as the oracle reads them: the compact records of the run, sealed, read
//! through views that borrow their texts ([`AttemptView`], [`AckView`]) and name an attempt's
//! key by its number where it has one ([`KeyRef`]), so the oracle's maps point into the records
//! and no spelled-out copy of ten million attempts or their keys is ever made. [`ClientRecords::from_spelled`] and
//! [`ClientRecords::to_spelled`] convert from and to the spelled-out values ([`Attempt`],
//! [`Ack`]) that shard files and tests write.

use super::key::KeyRef;
use super::records::{
    index32, ms32, AckRec, Arena, AttemptRec, Link, OrderId, Records, Stored, StoredKey, RUNS,
    UNSET,
};
use super::{Ack, Answer, AnswerClass, Attempt};
use crate::traffic::schedule::ident::{IdRef, Ident};

/// Every order attempt and acknowledgement of a run (or of shards combined), sealed.
#[derive(Debug, Clone, Default)]
pub struct ClientRecords {
    /// Order ids, and keys given as text.
    pub(super) arena: Arena,
    /// The runs whose attempt keys are held as numbers (a run's own: one; merged shards': one
    /// each, up to [`RUNS`]).
    pub(super) runs: Vec<String>,
    pub(super) attempts: Vec<AttemptRec>,
    /// What acknowledgements handed over spelled out name of their own (their key, order id,
    /// buyer and answer instant), when no recorded attempt is theirs.
    pub(super) own: Vec<AttemptRec>,
    pub(super) acks: Vec<AckRec>,
}

/// One order attempt, as [`Attempt`] spells it, its texts borrowed from the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptView<'a> {
    /// Its idempotency key ("" without one).
    pub key: KeyRef<'a>,
    pub buyer: usize,
    pub answer: Answer,
    pub class: AnswerClass,
    pub order_id: Option<&'a str>,
    pub at_ms: u64,
    pub retry: bool,
}

/// One acknowledgement, as [`Ack`] spells it, its texts borrowed from the records and its user
/// and device ids as keys ([`IdRef`]: a seeded id is its number).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckView<'a> {
    pub key: Option<KeyRef<'a>>,
    pub order_id: Option<&'a str>,
    pub buyer: usize,
    pub user_id: IdRef<'a>,
    pub device_id: IdRef<'a>,
    pub bot: bool,
    pub at_ms: u64,
    pub sent_ms: u64,
    pub cancel_sent_ms: Option<u64>,
    pub paid_ms: Option<u64>,
}

impl ClientRecords {
    /// `records` as the oracle reads them (`run_key`: this run's, in its attempts' keys); the
    /// records are left empty.
    pub(super) fn seal(records: &mut Records, run_key: &str) -> Self {
        ClientRecords {
            arena: std::mem::take(&mut records.arena),
            runs: vec![run_key.to_string()],
            attempts: std::mem::take(&mut records.attempts),
            own: Vec::new(),
            acks: std::mem::take(&mut records.acks),
        }
    }

    /// Stored key `k` of buyer `buyer`'s record.
    fn key(&self, k: StoredKey, buyer: u32) -> Option<KeyRef<'_>> {
        match k.get() {
            Stored::Attempt { run, n } => Some(KeyRef::Attempt {
                run: &self.runs[run],
                buyer,
                n,
            }),
            Stored::Text(t) => Some(KeyRef::Text(self.arena.get(t))),
            Stored::None => None,
        }
    }

    fn attempt_view<'a>(&'a self, a: &AttemptRec) -> AttemptView<'a> {
        AttemptView {
            key: self.key(a.key, a.buyer).unwrap_or(KeyRef::Text("")),
            buyer: a.buyer as usize,
            answer: a.answer,
            class: a.class,
            order_id: a.order_id.get().map(|s| self.arena.get(s)),
            at_ms: u64::from(a.at_ms),
            retry: a.retry,
        }
    }

    /// Attempt `i` (in the order recorded).
    pub fn attempt(&self, i: usize) -> AttemptView<'_> {
        self.attempt_view(&self.attempts[i])
    }

    /// Every order attempt, in the order recorded.
    pub fn attempts(&self) -> impl ExactSizeIterator<Item = AttemptView<'_>> + Clone + '_ {
        self.attempts.iter().map(|a| self.attempt_view(a))
    }

    /// Acknowledgement `i` (in the order recorded).
    pub fn ack(&self, i: usize) -> AckView<'_> {
        let a = &self.acks[i];
        let t = self.made_by(a);
        let set = |ms: u32| (ms != UNSET).then_some(u64::from(ms));
        let buyer = t.buyer as usize;
        let (user_id, device_id) = match &a.ids {
            Some(ids) => (ids.0.id_ref(), ids.1.id_ref()),
            None => (IdRef::user(buyer, a.bot), IdRef::device(buyer, a.bot)),
        };
        AckView {
            key: self.key(t.key, t.buyer),
            order_id: t.order_id.get().map(|s| self.arena.get(s)),
            buyer,
            user_id,
            device_id,
            bot: a.bot,
            at_ms: u64::from(t.at_ms),
            sent_ms: u64::from(a.sent_ms),
            cancel_sent_ms: set(a.cancel_sent_ms),
            paid_ms: set(a.paid_ms),
        }
    }

    /// The attempt (recorded, or the acknowledgement's own) whose answer `a` is.
    fn made_by(&self, a: &AckRec) -> &AttemptRec {
        match a.link {
            Link::Attempt(n) => &self.attempts[n as usize],
            Link::Own(n) => &self.own[n as usize],
        }
    }

    /// Attempt `i`'s idempotency key ("" without one): [`ClientRecords::attempt`]'s `key`
    /// alone, for the oracle's index, which compares it a million times (the whole view
    /// reads the order id's text too).
    pub fn attempt_key(&self, i: usize) -> KeyRef<'_> {
        let a = &self.attempts[i];
        self.key(a.key, a.buyer).unwrap_or(KeyRef::Text(""))
    }

    /// Acknowledgement `i`'s order id: [`ClientRecords::ack`]'s `order_id` alone (see
    /// [`ClientRecords::attempt_key`]).
    pub fn ack_order_id(&self, i: usize) -> Option<&str> {
        self.made_by(&self.acks[i])
            .order_id
            .get()
            .map(|s| self.arena.get(s))
    }

    /// Every acknowledgement, in the order recorded.
    pub fn acks(&self) -> impl ExactSizeIterator<Item = AckView<'_>> + Clone + '_ {
        (0..self.acks.len()).map(|i| self.ack(i))
    }

    /// The position of `run` among the runs whose keys are held as numbers, added if there
    /// is room.
    fn run_index(&mut self, run: &str) -> Option<usize> {
        // Merged records come shard by shard: the last run is the likeliest.
        if let Some(i) = self.runs.iter().rposition(|r| r == run) {
            return Some(i);
        }
        (self.runs.len() < RUNS).then(|| {
            self.runs.push(run.to_string());
            self.runs.len() - 1
        })
    }

    /// `key` of buyer `buyer`'s record as stored: an attempt's number when it is (or spells)
    /// one of this buyer's, else its text in the arena; "" and `None` are no key.
    fn store_key(&mut self, key: Option<KeyRef<'_>>, buyer: u32) -> StoredKey {
        let Some(k) = key.filter(|k| !k.is_empty()) else {
            return StoredKey::NONE;
        };
        let number = match k {
            KeyRef::Attempt { run, buyer: b, n } => Some((run, b, n)),
            KeyRef::Text(t) => KeyRef::parse(t),
        };
        let stored = number
            .filter(|&(_, b, _)| b == buyer)
            .and_then(|(run, _, n)| StoredKey::attempt(self.run_index(run)?, n));
        stored.unwrap_or_else(|| StoredKey::text(k.with_text(|t| self.arena.push(t))))
    }

    /// `key` and `order_id` of buyer `buyer`'s record, stored.
    fn texts(
        &mut self,
        key: Option<KeyRef<'_>>,
        buyer: u32,
        order_id: Option<&str>,
    ) -> (StoredKey, OrderId) {
        let key = self.store_key(key, buyer);
        (key, OrderId::of(order_id.map(|id| self.arena.push(id))))
    }

    /// Appends an attempt, its texts copied into the arena.
    fn push_attempt(&mut self, a: AttemptView<'_>) {
        let buyer = index32(a.buyer);
        let (key, order_id) = self.texts(Some(a.key), buyer, a.order_id);
        self.attempts.push(AttemptRec {
            at_ms: ms32(a.at_ms),
            buyer,
            key,
            order_id,
            answer: a.answer,
            class: a.class,
            retry: a.retry,
        });
    }

    /// Appends an acknowledgement with what it names of its own (its key, order id, buyer and
    /// answer instant: its answer a created one), its texts copied into the arena.
    fn push_ack(&mut self, a: AckView<'_>) {
        let buyer = index32(a.buyer);
        let (key, order_id) = self.texts(a.key, buyer, a.order_id);
        self.own.push(AttemptRec {
            at_ms: ms32(a.at_ms),
            buyer,
            key,
            order_id,
            answer: Answer::Created,
            class: AnswerClass::Acknowledged,
            retry: false,
        });
        let seeded = IdRef::user(a.buyer, a.bot) == a.user_id
            && IdRef::device(a.buyer, a.bot) == a.device_id;
        self.acks.push(AckRec {
            link: Link::Own(index32(self.own.len() - 1)),
            sent_ms: ms32(a.sent_ms),
            cancel_sent_ms: a.cancel_sent_ms.map_or(UNSET, ms32),
            paid_ms: a.paid_ms.map_or(UNSET, ms32),
            ids: (!seeded).then(|| {
                Box::new((
                    Ident::given(a.user_id.to_string()),
                    Ident::given(a.device_id.to_string()),
                ))
            }),
            bot: a.bot,
        });
    }

    /// The records of spelled-out attempts and acknowledgements (a shard file's, a test's),
    /// each in the order given.
    pub fn from_spelled(attempts: &[Attempt], acks: &[Ack]) -> Self {
        let mut r = ClientRecords::default();
        for a in attempts {
            r.push_spelled_attempt(a);
        }
        for a in acks {
            r.push_ack(a.view());
        }
        r
    }

    /// Appends a spelled-out attempt (a shard file's, read one at a time), kept compact.
    pub fn push_spelled_attempt(&mut self, a: &Attempt) {
        self.push_attempt(AttemptView {
            key: KeyRef::Text(&a.key),
            buyer: a.buyer,
            answer: a.answer,
            class: a.class,
            order_id: a.order_id.as_deref(),
            at_ms: a.at_ms,
            retry: a.retry,
        });
    }

    /// Appends a spelled-out acknowledgement (a shard file's, read one at a time), kept
    /// compact with what it names of its own.
    pub fn push_spelled_ack(&mut self, a: &Ack) {
        self.push_ack(a.view());
    }

    /// These records' attempts with `other`'s acknowledgements (a shard file's two lists, each
    /// read into records of its own), the acknowledgements' texts copied into these records.
    pub fn with_acks_of(mut self, other: &ClientRecords) -> Self {
        self.own.reserve_exact(other.acks.len());
        self.acks.reserve_exact(other.acks.len());
        for i in 0..other.acks.len() {
            self.push_ack(other.ack(i));
        }
        self
    }

    /// The shards' records as one, without spelling them out: the attempts in the order of
    /// their instant, buyer and key, the acknowledgements of their instant and buyer (ties in
    /// the shards' order), as a one-process run records them.
    pub fn merge(parts: &[ClientRecords]) -> Self {
        // The attempts by their position among all the parts' (4 bytes an attempt; its
        // instant, buyer and key read from its part), not by copies of what they are sorted
        // on (16 bytes) or of their views (~96): ten million attempts are sorted in 40 MB.
        let starts: Vec<usize> = std::iter::once(0)
            .chain(parts.iter().scan(0, |n, p| {
                *n += p.attempts.len();
                Some(*n)
            }))
            .collect();
        let locate = |g: u32| {
            let p = starts.partition_point(|&s| s <= g as usize) - 1;
            (p, g as usize - starts[p])
        };
        let mut attempts: Vec<u32> = (0..starts[parts.len()]).map(index32).collect();
        attempts.sort_by(|&x, &y| {
            let ((p, i), (q, j)) = (locate(x), locate(y));
            let (a, b) = (&parts[p].attempts[i], &parts[q].attempts[j]);
            (a.at_ms, a.buyer)
                .cmp(&(b.at_ms, b.buyer))
                .then_with(|| parts[p].attempt_key(i).cmp(&parts[q].attempt_key(j)))
        });
        let mut acks: Vec<(u32, u32, u32, u32)> = Vec::new();
        for (p, part) in parts.iter().enumerate() {
            let p = index32(p);
            acks.extend(part.acks.iter().enumerate().map(|(i, a)| {
                let t = part.made_by(a);
                (t.at_ms, t.buyer, p, index32(i))
            }));
        }
        acks.sort_by_key(|&(at, buyer, ..)| (at, buyer));
        let mut r = ClientRecords::default();
        r.attempts.reserve_exact(attempts.len());
        r.acks.reserve_exact(acks.len());
        r.own.reserve_exact(acks.len());
        for g in attempts {
            let (p, i) = locate(g);
            r.push_attempt(parts[p].attempt(i));
        }
        for (_, _, p, i) in acks {
            r.push_ack(parts[p as usize].ack(i as usize));
        }
        r
    }

    /// Every attempt and acknowledgement spelled out, each in the order recorded.
    pub fn to_spelled(&self) -> (Vec<Attempt>, Vec<Ack>) {
        (
            self.attempts().map(|a| a.spelled()).collect(),
            self.acks().map(|a| a.spelled()).collect(),
        )
    }
}

impl AttemptView<'_> {
    /// This attempt spelled out.
    pub fn spelled(&self) -> Attempt {
        Attempt {
            key: self.key.to_string().into(),
            buyer: self.buyer,
            answer: self.answer,
            class: self.class,
            order_id: self.order_id.map(Into::into),
            at_ms: self.at_ms,
            retry: self.retry,
        }
    }
}

impl AckView<'_> {
    /// This acknowledgement spelled out.
    pub fn spelled(&self) -> Ack {
        Ack {
            key: self.key.map(|k| k.to_string().into()),
            order_id: self.order_id.map(Into::into),
            buyer: self.buyer,
            user_id: self.user_id.to_string(),
            device_id: self.device_id.to_string(),
            bot: self.bot,
            at_ms: self.at_ms,
            sent_ms: self.sent_ms,
            cancel_sent_ms: self.cancel_sent_ms,
            paid_ms: self.paid_ms,
        }
    }
}

/// Acknowledgements read by position: the records', or spelled-out ones (a test's).
pub trait AckList {
    fn len(&self) -> usize;
    /// Acknowledgement `i`.
    fn ack(&self, i: usize) -> AckView<'_>;
}

impl AckList for ClientRecords {
    fn len(&self) -> usize {
        self.acks.len()
    }

    fn ack(&self, i: usize) -> AckView<'_> {
        ClientRecords::ack(self, i)
    }
}

impl AckList for [Ack] {
    fn len(&self) -> usize {
        <[Ack]>::len(self)
    }

    fn ack(&self, i: usize) -> AckView<'_> {
        self[i].view()
    }
}

impl AckList for Vec<Ack> {
    fn len(&self) -> usize {
        <[Ack]>::len(self)
    }

    fn ack(&self, i: usize) -> AckView<'_> {
        self[i].view()
    }
}

impl Ack {
    /// This acknowledgement as the records' view of it.
    pub fn view(&self) -> AckView<'_> {
        AckView {
            key: self.key.as_deref().map(KeyRef::Text),
            order_id: self.order_id.as_deref(),
            buyer: self.buyer,
            user_id: IdRef::of(&self.user_id),
            device_id: IdRef::of(&self.device_id),
            bot: self.bot,
            at_ms: self.at_ms,
            sent_ms: self.sent_ms,
            cancel_sent_ms: self.cancel_sent_ms,
            paid_ms: self.paid_ms,
        }
    }
}
