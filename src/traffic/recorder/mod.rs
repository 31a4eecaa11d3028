//! What the clients saw: every request's latency in HdrHistograms and a per-second timeline, by
//! request kind and answer, plus each client's record of the orders it was told about.
//!
//! Latency is the full response time (until the body has been read) measured from the
//! request's *intended* send time: a buyer's arrival for its first request, the previous answer
//! plus think time for the next. A request that could not go out on time (the generator fell
//! behind, or the shop was slow to answer an earlier one) carries that delay in its latency, so a
//! stalled shop shows up in the high percentiles instead of being hidden (coordinated omission).
//! Each request is also split in two, per kind: its *send lag* (intended send to actual send:
//! the generator's own lateness, with a free sender) and its *service time* (actual send to the
//! full answer: the shop's and the network's share). A request that found every sender held by
//! an unanswered request waited for one: that *sender wait* is the shop's time (its slowness
//! held the senders), kept apart from send lag. Latency = send lag + sender wait + service
//! time, so a run whose latency is mostly send lag measured the generator, not the shop.
//!
//! Everything recorded is also published as it happens to the process's live metrics
//! ([`crate::live`]; free when no `--metrics-listen` recorder is installed).

mod answer;
mod buyers;
mod clients;
mod follow_up;
mod intervals;
mod key;
mod login;
mod measurements;
mod records;

use crate::live;
use crate::traffic::schedule::ident::Ident;
pub use answer::{Answer, AnswerClass, Kind};
pub use buyers::Buyers;
pub use clients::{AckList, AckView, AttemptView, ClientRecords};
pub use follow_up::{FollowUp, Script, Step};
use hdrhistogram::Histogram;
pub use intervals::{interval_histogram, Intervals};
pub use key::KeyRef;
pub use login::{LoginReport, LoginTally};
pub use measurements::{Ack, Attempt, Measurements};
pub use records::{AttemptId, Key};
use records::{Records, Slot};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// When a request went out, as [`Recorder::sending`] returns it: the actual send, and the
/// moment the shop became answerable for it (the send, or when it began to wait for a sender
/// every one of which an unanswered request held). Before that, its delay is send lag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    pub at: Instant,
    pub shop_from: Instant,
}

impl From<Instant> for Sent {
    /// A send with no sender wait and no lag recorded apart.
    fn from(at: Instant) -> Sent {
        Sent { at, shop_from: at }
    }
}

/// What a client was last told about an order it paid or cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Told {
    Paid,
    Cancelled,
}

/// One buyer's end result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuyerResult {
    pub bot: bool,
    pub attempted: bool,
    pub got_order: bool,
}

/// Answers no rule classified, grouped by request kind and status, with the first body seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnclassifiedAnswer {
    pub kind: Kind,
    pub status: u16,
    pub count: u64,
    /// The first such body, cut to [`SAMPLE_BYTES`] (a redirect: its `Location`).
    pub sample: String,
}

/// How much of an unclassified answer's body is kept as a sample.
pub const SAMPLE_BYTES: usize = 200;

#[derive(Default)]
struct Inner {
    hist: BTreeMap<(Kind, Answer), Histogram<u64>>,
    order_intervals: Intervals,
    timeline: Vec<BTreeMap<(Kind, Answer), u64>>,
    /// The attempts, acknowledgements and buyers' results, compact.
    records: Records,
    told: HashMap<String, Told>,
    cancels_ok: u64,
    follow_ups: Vec<FollowUp>,
    retries: BTreeMap<(Kind, Answer), Histogram<u64>>,
    /// Keys whose next recorded attempt is a retry.
    retrying: std::collections::HashSet<String>,
    unclassified: BTreeMap<(Kind, u16), UnclassifiedAnswer>,
    first_sold_out_ms: Option<u64>,
    arrived: u64,
    finished: u64,
    send_lag: BTreeMap<Kind, Histogram<u64>>,
    sender_wait: BTreeMap<Kind, Histogram<u64>>,
    service: BTreeMap<Kind, Histogram<u64>>,
    shop_latency: BTreeMap<Kind, Histogram<u64>>,
    in_flight: u64,
    /// First and last order answer, after the sale opened.
    order_answers: Option<(std::time::Duration, std::time::Duration)>,
    /// Logins sent on the buyers' arrival (`[target.login] when = "on_arrival"`).
    logins: LoginTally,
    decisions: Decisions,
}

/// Asynchronous orders: how many order attempts were answered `pending`, how many of them the
/// shop then decided (found by polling) and how many never were, and the time from acceptance
/// (the pending answer) to the decision.
#[derive(Debug, Clone, Default)]
pub struct Decisions {
    pub pending: u64,
    pub decided: u64,
    pub undecided: u64,
    /// Pending answers that carried no order id for a poll that needs one (never polled).
    pub without_id: u64,
    /// Acceptance to decision, µs (decided orders only); `None` until an order is pending.
    pub latency: Option<Histogram<u64>>,
}

/// Shared by every simulated buyer of one run.
pub struct Recorder {
    opened: Instant,
    /// Starts every idempotency key of this run: keys never repeat across runs.
    run_key: String,
    inner: Mutex<Inner>,
}

/// A snapshot for progress lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct Progress {
    pub arrived: u64,
    pub finished: u64,
    pub orders: u64,
    pub created: u64,
    pub errors: u64,
    /// Requests sent and not answered yet.
    pub in_flight: u64,
}

/// Highest latency tracked: one hour, in microseconds (longer values are clamped to it).
pub const MAX_TRACKED_US: u64 = 3_600_000_000;

/// A latency histogram: 1 µs to one hour, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_US, 3).expect("valid bounds")
}

impl Recorder {
    /// A recorder for a sale that opens at `opened`.
    pub fn new(opened: Instant) -> Self {
        let nonce: [u8; 6] = rand::random();
        Recorder {
            opened,
            run_key: nonce.iter().map(|b| format!("{b:02x}")).collect(),
            inner: Mutex::default(),
        }
    }

    /// When the sale opened (the schedule's zero).
    pub fn opened(&self) -> Instant {
        self.opened
    }

    /// Makes room for `buyers` buyers' records at once (see `Records::reserve`); the attack
    /// calls it before the first buyer arrives.
    pub fn reserve(&self, buyers: usize) {
        self.lock().records.reserve(buyers);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().expect("recorder poisoned")
    }

    /// A request intended for `intended` is being sent now: records its send lag and its sender
    /// wait, and returns the actual send time (pass it to [`Recorder::record`]).
    /// `waited_since`: when the request was queued, if every sender was then held by an
    /// unanswered request (the time from there to now is sender wait, the shop's); otherwise
    /// the whole delay since `intended` is send lag (a free sender, late: the generator's).
    pub fn sending(&self, kind: Kind, intended: Instant, waited_since: Option<Instant>) -> Sent {
        let now = Instant::now();
        let (lag, wait) = match waited_since {
            Some(queued) => (
                queued.saturating_duration_since(intended),
                now.saturating_duration_since(queued),
            ),
            None => (now.saturating_duration_since(intended), Duration::ZERO),
        };
        let us = |d: Duration| (d.as_micros().min(u64::MAX as u128) as u64).max(1);
        metrics::histogram!(live::SEND_LAG, "kind" => kind.as_str()).record(lag.as_secs_f64());
        metrics::histogram!(live::SENDER_WAIT, "kind" => kind.as_str()).record(wait.as_secs_f64());
        metrics::gauge!(live::IN_FLIGHT).increment(1.0);
        let mut st = self.lock();
        st.in_flight += 1;
        st.send_lag
            .entry(kind)
            .or_insert_with(new_histogram)
            .saturating_record(us(lag));
        st.sender_wait
            .entry(kind)
            .or_insert_with(new_histogram)
            .saturating_record(us(wait));
        Sent {
            at: now,
            shop_from: waited_since.unwrap_or(now).max(intended),
        }
    }

    /// Records one answered (or failed) request: latency from `intended` to `done`, service
    /// time from `sent` (the actual send, as [`Recorder::sending`] returned it) to `done`, and
    /// the latency the shop is answerable for (from the send, or from when the request began
    /// to wait for a sender) apart, so that what the generator's lateness adds is known.
    pub fn record(
        &self,
        kind: Kind,
        answer: Answer,
        intended: Instant,
        sent: impl Into<Sent>,
        done: Instant,
    ) {
        let sent = sent.into();
        let latency = done.saturating_duration_since(intended);
        let micros = latency.as_micros().min(u64::MAX as u128) as u64;
        let shop_us = done.saturating_duration_since(sent.shop_from).as_micros() as u64;
        let sent = sent.at;
        let service = done.saturating_duration_since(sent);
        let service_us = service.as_micros().min(u64::MAX as u128) as u64;
        let since_open = done.saturating_duration_since(self.opened);
        let second = since_open.as_secs() as usize;
        let at_ms = since_open.as_millis() as u64;
        metrics::counter!(live::ANSWERS, "kind" => kind.as_str(), "outcome" => answer.as_str())
            .increment(1);
        metrics::histogram!(live::LATENCY, "kind" => kind.as_str()).record(latency.as_secs_f64());
        let mut st = self.lock();
        if st.in_flight > 0 {
            st.in_flight -= 1;
            metrics::gauge!(live::IN_FLIGHT).decrement(1.0);
        }
        if kind == Kind::Order {
            st.order_answers = Some(match st.order_answers {
                Some((first, last)) => (first.min(since_open), last.max(since_open)),
                None => (since_open, since_open),
            });
        }
        st.hist
            .entry((kind, answer))
            .or_insert_with(new_histogram)
            .saturating_record(micros.max(1));
        st.service
            .entry(kind)
            .or_insert_with(new_histogram)
            .saturating_record(service_us.max(1));
        st.shop_latency
            .entry(kind)
            .or_insert_with(new_histogram)
            .saturating_record(shop_us.max(1));
        if st.timeline.len() <= second {
            st.timeline.resize_with(second + 1, BTreeMap::new);
        }
        if kind == Kind::Order {
            st.order_intervals
                .record(second as u64, micros, MAX_TRACKED_US);
        }
        *st.timeline[second].entry((kind, answer)).or_default() += 1;
        if kind == Kind::Order && answer == Answer::SoldOut && st.first_sold_out_ms.is_none() {
            st.first_sold_out_ms = Some(at_ms);
        }
    }

    /// An order answered `pending` at `accepted` was decided at `decided` (`None`: never,
    /// within `target.poll.max_wait_ms`).
    pub fn decision(&self, accepted: Instant, decided: Option<Instant>) {
        let mut st = self.lock();
        let d = &mut st.decisions;
        d.pending += 1;
        let h = d.latency.get_or_insert_with(new_histogram);
        match decided {
            Some(at) => {
                d.decided += 1;
                let us = at.saturating_duration_since(accepted).as_micros();
                h.saturating_record((us.min(u64::MAX as u128) as u64).max(1));
            }
            None => d.undecided += 1,
        }
    }

    /// A pending answer carried no order id, and the poll request needs one.
    pub fn pending_without_id(&self) {
        self.lock().decisions.without_id += 1;
    }

    /// A buyer's first request is due.
    pub fn arrived(&self) {
        metrics::counter!(live::ARRIVALS).increment(1);
        self.lock().arrived += 1;
    }

    /// A buyer is done; `result` says whether it tried to order and got one.
    pub fn finished(&self, buyer: usize, result: BuyerResult) {
        metrics::counter!(live::BUYERS_DONE).increment(1);
        let mut st = self.lock();
        st.finished += 1;
        st.records.finished(buyer, result);
    }

    /// The client of attempt `attempt` (as [`Recorder::attempt`] returned it) was told an
    /// order exists (its id and the answer's instant are the attempt's); the buyer's ids and
    /// whether it is a bot, and when the attempt was meant to go out (`sent`). Returns the
    /// acknowledgement's index, for [`Recorder::followed_up`].
    pub fn ack(
        &self,
        attempt: AttemptId,
        user_id: &Ident,
        device_id: &Ident,
        bot: bool,
        sent: Instant,
    ) -> usize {
        let sent_ms = self.ms(sent);
        let mut st = self.lock();
        st.records.ack(attempt, user_id, device_id, bot, sent_ms)
    }

    /// Milliseconds from the sale's opening to `at` (0 before it).
    pub fn ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.opened).as_millis() as u64
    }

    /// The client of acknowledgement `ack` (as [`Recorder::ack`] returned it) was told its order
    /// is paid or cancelled (answered `ok`): what it was told is kept ([`Recorder::told`]), and
    /// a cancel with its send instant `sent` (the unit may be released from then on), a pay
    /// with its answer instant `done`, the earliest of each.
    pub fn followed_up(&self, ack: usize, told: Told, sent: Instant, done: Instant) {
        let (sent, done) = (self.ms(sent), self.ms(done));
        let (slot, at) = match told {
            Told::Cancelled => (Slot::CancelSent, sent),
            Told::Paid => (Slot::Paid, done),
        };
        let mut st = self.lock();
        let Some(id) = st.records.follow_up(ack, slot, at) else {
            return;
        };
        let id = id.map(str::to_string);
        tell(&mut st, id.as_deref(), told);
    }

    /// The idempotency key of buyer `buyer`'s order attempt `n` (0: the first submission;
    /// a bot's extra submissions are attempts 1, 2, ...): `ovs-<run>-<buyer>-<n>`.
    pub fn attempt_key(&self, buyer: usize, n: usize) -> String {
        records::spell(&self.run_key, buyer, n)
    }

    /// `key` spelled out.
    fn key_text(&self, key: Key<'_>) -> String {
        match key {
            Key::Attempt { buyer, n } => self.attempt_key(buyer, n),
            Key::Text(s) => s.to_string(),
        }
    }

    /// An order attempt was answered (or failed) at `done`: its key, its answer and the
    /// order id a created answer carried are kept. Returns the attempt, for
    /// [`Recorder::ack`].
    pub fn attempt<'k>(
        &self,
        key: impl Into<Key<'k>>,
        buyer: usize,
        answer: Answer,
        order_id: Option<&str>,
        done: Instant,
    ) -> AttemptId {
        let key = key.into();
        let at_ms = done.saturating_duration_since(self.opened).as_millis() as u64;
        let mut st = self.lock();
        // Retries are rare: the key is spelled only when one is pending.
        let retry = !st.retrying.is_empty() && st.retrying.remove(&self.key_text(key));
        st.records
            .attempt(&self.run_key, key, buyer, answer, order_id, at_ms, retry)
    }

    /// A client was told its order (by id, when it has one) is paid or cancelled. A cancel
    /// counts as a restock once per order: a second cancel answered ok gave nothing back.
    pub fn told(&self, order_id: Option<&str>, told: Told) {
        tell(&mut self.lock(), order_id, told);
    }

    /// An answer no rule classified: counted per kind and status, the first body kept.
    pub fn unclassified(&self, kind: Kind, status: u16, body: &str) {
        let mut st = self.lock();
        let e = st
            .unclassified
            .entry((kind, status))
            .or_insert_with(|| UnclassifiedAnswer {
                kind,
                status,
                count: 0,
                sample: cut(body, SAMPLE_BYTES),
            });
        e.count += 1;
    }

    /// A buyer's login on its arrival was answered (or failed) after `latency`.
    pub fn login(&self, result: Result<(), String>, latency: std::time::Duration, body: &str) {
        self.lock().logins.add(result, latency, body);
    }

    /// The logins sent on arrival so far.
    pub fn logins(&self) -> LoginTally {
        self.lock().logins.clone()
    }

    /// Counts for a progress line.
    pub fn progress(&self) -> Progress {
        let st = self.lock();
        let mut p = Progress {
            arrived: st.arrived,
            finished: st.finished,
            in_flight: st.in_flight,
            ..Progress::default()
        };
        for ((kind, answer), h) in &st.hist {
            if *kind == Kind::Order {
                p.orders += h.len();
                if *answer == Answer::Created {
                    p.created += h.len();
                }
                if answer.is_error() {
                    p.errors += h.len();
                }
            }
        }
        p
    }

    /// Everything recorded, for the oracle and the report. The clients' order records are
    /// taken out as they are, sealed ([`ClientRecords::seal`]), so call it once, when the run is
    /// over.
    pub fn finish(&self) -> Measurements {
        let mut st = self.lock();
        let buyers = std::mem::take(&mut st.records.buyers);
        let records = ClientRecords::seal(&mut st.records, &self.run_key);
        Measurements {
            histograms: st.hist.clone(),
            order_intervals: st.order_intervals.clone(),
            timeline: st.timeline.clone(),
            records,
            told: st.told.clone(),
            cancels_ok: st.cancels_ok,
            follow_ups: st.follow_ups.clone(),
            retries: st.retries.clone(),
            unclassified: st.unclassified.values().cloned().collect(),
            first_sold_out_ms: st.first_sold_out_ms,
            buyers,
            send_lag: st.send_lag.clone(),
            sender_wait: st.sender_wait.clone(),
            service: st.service.clone(),
            shop_latency: st.shop_latency.clone(),
            order_answer_span: st.order_answers.map(|(first, last)| last - first),
            decisions: st.decisions.clone(),
        }
    }
}

/// A client was told its order (by id, when it has one) is paid or cancelled: one restock seen
/// per order, whatever it was told after.
fn tell(st: &mut Inner, order_id: Option<&str>, told: Told) {
    let again = order_id.is_some_and(|id| st.told.get(id) == Some(&Told::Cancelled));
    if told == Told::Cancelled && !again {
        st.cancels_ok += 1;
    }
    if let Some(id) = order_id {
        st.told.insert(id.to_string(), told);
    }
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests;
