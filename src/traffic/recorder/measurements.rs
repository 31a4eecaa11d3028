//! The recorder's final content, as the oracle and the report read it, and the clients'
//! records spelled out (what a shard file or a test writes: [`Attempt`], [`Ack`]).

use super::{
    new_histogram, Answer, AnswerClass, ClientRecords, Decisions, FollowUp, Kind, Told,
    UnclassifiedAnswer,
};
use super::{AckView, AttemptView};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// A key or an order id as the oracle reads it: one allocation, shared by an attempt and the
/// acknowledgement of it (serialized as a string).
pub type Text = std::sync::Arc<str>;

/// One order attempt: the idempotency key it was sent with, and how it was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    pub key: Text,
    pub buyer: usize,
    pub answer: Answer,
    pub class: AnswerClass,
    /// The order id a created answer carried.
    pub order_id: Option<Text>,
    /// Milliseconds after the sale opened, when the answer (or the failure) came.
    pub at_ms: u64,
    /// Sent again with the key of an earlier attempt (`[client] retry`, `resend_same_key`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry: bool,
}

/// An order a client was told exists (an answer classified `created`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ack {
    /// The idempotency key of the attempt that was told (`None`: sent without one).
    pub key: Option<Text>,
    /// The order id the answer carried; `None` when the mapping has no `order_id_field` or
    /// the answer lacked it (the acknowledgement still counts, by answer).
    pub order_id: Option<Text>,
    pub buyer: usize,
    pub user_id: String,
    pub device_id: String,
    pub bot: bool,
    /// Milliseconds after the sale opened.
    pub at_ms: u64,
    /// Milliseconds after the sale opened when the order was due to be sent (its intended
    /// send: never later than the actual send, so a release counted from it is conservative).
    #[serde(default)]
    pub sent_ms: u64,
    /// A cancel of this order answered `ok`: when it was due to be sent (the shop may have
    /// released the unit from then on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_sent_ms: Option<u64>,
    /// A pay of this order answered `ok`: when the answer came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paid_ms: Option<u64>,
}

/// The recorder's final content.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    pub histograms: BTreeMap<(Kind, Answer), Histogram<u64>>,
    /// Order latency of the orders answered in each interval after the sale opened (one
    /// second each, longer in a long run; for the HdrHistogram interval log); all answers
    /// together.
    pub order_intervals: super::Intervals,
    /// Index = whole seconds after the sale opened.
    pub timeline: Vec<BTreeMap<(Kind, Answer), u64>>,
    /// Every order attempt with its idempotency key and answer class, and every order a client
    /// was told exists, compact ([`Measurements::attempts`], [`Measurements::acks`]).
    pub records: ClientRecords,
    /// What clients were last told about orders they paid or cancelled, by order id.
    pub told: HashMap<String, Told>,
    /// Cancels answered `ok`, with or without an order id: units the run saw restocked (one
    /// per order id).
    pub cancels_ok: u64,
    /// Adversarial buyers' orders and the steps they sent after them (`[adversarial]`).
    pub follow_ups: Vec<FollowUp>,
    /// Retries (`[client] retry`, resends with the same key) by kind and answer, latency from
    /// each retry's own intended send (µs); never in `histograms`.
    pub retries: BTreeMap<(Kind, Answer), Histogram<u64>>,
    /// Answers no rule classified, by kind and status.
    pub unclassified: Vec<UnclassifiedAnswer>,
    pub first_sold_out_ms: Option<u64>,
    pub buyers: super::Buyers,
    /// Send lag (intended send to actual send, µs, less any sender wait) by kind.
    pub send_lag: BTreeMap<Kind, Histogram<u64>>,
    /// Sender wait (queued with every sender held by an unanswered request, until a sender
    /// took it, µs; 1 µs when it did not wait) by kind: the shop's time, part of latency.
    pub sender_wait: BTreeMap<Kind, Histogram<u64>>,
    /// Service time (actual send to the full answer, µs) by kind.
    pub service: BTreeMap<Kind, Histogram<u64>>,
    /// Latency less send lag (µs) by kind: from the moment the shop became answerable (the
    /// send, or the start of a sender wait) to the full answer. Latency as it would read had
    /// the generator sent every request on time.
    pub shop_latency: BTreeMap<Kind, Histogram<u64>>,
    /// From the first order answer to the last.
    pub order_answer_span: Option<std::time::Duration>,
    /// Asynchronous orders: pending, decided, undecided, acceptance to decision.
    pub decisions: Decisions,
}

impl Measurements {
    /// Every order attempt, in the order recorded.
    pub fn attempts(&self) -> impl ExactSizeIterator<Item = AttemptView<'_>> + Clone + '_ {
        self.records.attempts()
    }

    /// Every order a client was told exists (an answer classified `created`), in the order
    /// recorded.
    pub fn acks(&self) -> impl ExactSizeIterator<Item = AckView<'_>> + Clone + '_ {
        self.records.acks()
    }

    /// Replaces the clients' records with these spelled-out ones (a shard file's, a test's).
    pub fn set_records(&mut self, attempts: &[Attempt], acks: &[Ack]) {
        self.records = ClientRecords::from_spelled(attempts, acks);
    }

    /// The clients' records spelled out.
    pub fn spelled(&self) -> (Vec<Attempt>, Vec<Ack>) {
        self.records.to_spelled()
    }

    /// The clients' records spelled out, changed by `f`, and put back (tests).
    #[cfg(test)]
    pub fn edit_records(&mut self, f: impl FnOnce(&mut Vec<Attempt>, &mut Vec<Ack>)) {
        let (mut attempts, mut acks) = self.spelled();
        f(&mut attempts, &mut acks);
        self.set_records(&attempts, &acks);
    }

    /// Send lag of every request merged into one histogram (µs).
    pub fn send_lag_all(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for lag in self.send_lag.values() {
            h.add(lag).expect("same-precision histograms merge");
        }
        h
    }

    /// Sender wait of every request merged into one histogram (µs).
    pub fn sender_wait_all(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for w in self.sender_wait.values() {
            h.add(w).expect("same-precision histograms merge");
        }
        h
    }

    /// Service time of every request merged into one histogram (µs).
    pub fn service_all(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for s in self.service.values() {
            h.add(s).expect("same-precision histograms merge");
        }
        h
    }

    /// All answers of one kind merged into one histogram.
    pub fn by_kind(&self, kind: Kind) -> Histogram<u64> {
        let mut h = new_histogram();
        for ((k, _), hist) in &self.histograms {
            if *k == kind {
                h.add(hist).expect("same-precision histograms merge");
            }
        }
        h
    }

    /// Every request recorded, of every kind (answered or not).
    pub fn total_requests(&self) -> u64 {
        self.histograms.values().map(|h| h.len()).sum()
    }

    /// Requests (of every kind) whose answer no rule classified.
    pub fn unclassified_requests(&self) -> u64 {
        self.unclassified.iter().map(|u| u.count).sum()
    }

    /// Requests of one kind by answer.
    pub fn counts(&self, kind: Kind) -> BTreeMap<Answer, u64> {
        self.histograms
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, a), h)| (*a, h.len()))
            .collect()
    }
}
