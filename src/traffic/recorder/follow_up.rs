//! What adversarial buyers sent after their order and how each step was answered
//! (`[adversarial]`), and the retries `[client] retry` sent, kept apart from first attempts.

use super::{new_histogram, Answer, Kind, Recorder};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// What an adversarial buyer does with its order. The spelling is the `[adversarial]` field's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Script {
    /// Pays, then cancels the paid order.
    CancelAfterPay,
    /// Cancels, then cancels again.
    CancelTwice,
    /// Pays, then pays again.
    PayTwice,
    /// Cancels, then pays the cancelled order.
    PayAfterCancel,
    /// Sends pay and cancel at the same instant.
    PayAndCancel,
    /// Pays right at the end of the payment window (within `adversary::AT_TIMEOUT_SPREAD` of
    /// it).
    AtTimeout,
    /// Sends the order attempt again with the same `Idempotency-Key` right after its answer
    /// (a client that lost the answer), then pays.
    ResendSameKey,
}

impl Script {
    /// Every script, in the `[adversarial]` table's order.
    pub const ALL: [Script; 7] = [
        Script::CancelAfterPay,
        Script::CancelTwice,
        Script::PayTwice,
        Script::PayAfterCancel,
        Script::PayAndCancel,
        Script::AtTimeout,
        Script::ResendSameKey,
    ];

    /// The `[adversarial]` field and report spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Script::CancelAfterPay => "cancel_after_pay",
            Script::CancelTwice => "cancel_twice",
            Script::PayTwice => "pay_twice",
            Script::PayAfterCancel => "pay_after_cancel",
            Script::PayAndCancel => "pay_and_cancel",
            Script::AtTimeout => "at_timeout",
            Script::ResendSameKey => "resend_same_key",
        }
    }

    /// Whether the script sends a pay request.
    pub fn pays(self) -> bool {
        !matches!(self, Script::CancelTwice)
    }

    /// Whether the script sends a cancel request.
    pub fn cancels(self) -> bool {
        matches!(
            self,
            Script::CancelAfterPay
                | Script::CancelTwice
                | Script::PayAfterCancel
                | Script::PayAndCancel
        )
    }
}

/// One request of a script, and its answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    pub kind: Kind,
    pub answer: Answer,
    /// A resent order's answer: the order id it carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order_id: Option<String>,
    /// Milliseconds after the sale opened, when the answer came.
    pub at_ms: u64,
}

/// One order's scripted follow-up: the script, the order and every step in the order sent
/// (`pay_and_cancel`: pay and cancel sent at once, pay listed first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowUp {
    pub script: Script,
    pub buyer: usize,
    /// The order attempt's idempotency key.
    pub key: String,
    /// The order's id, as the created answer carried it (`None`: the shop gives none, or no
    /// order was created).
    pub order_id: Option<String>,
    /// How the order attempt itself was answered (created, or a lost answer resent).
    pub ordered: Answer,
    pub steps: Vec<Step>,
}

impl Step {
    /// A step answered at `done`.
    pub fn answered(
        rec: &Recorder,
        kind: Kind,
        answer: Answer,
        order_id: Option<String>,
        done: Instant,
    ) -> Step {
        Step {
            kind,
            answer,
            order_id,
            at_ms: done.saturating_duration_since(rec.opened()).as_millis() as u64,
        }
    }
}

impl Recorder {
    /// An adversarial buyer's order and what it sent after it.
    pub fn follow_up(&self, f: FollowUp) {
        self.lock().follow_ups.push(f);
    }

    /// A retry (`[client] retry`, or a resend with the same key) was answered at `done`:
    /// latency from `intended` (its own: the failed answer plus the backoff). Counted apart
    /// from first attempts: the request and timing tables (latency, service time), the error
    /// rate and the timeline see first attempts only. Its send lag (the generator's lateness,
    /// whatever the request) is in the send lag of every request, recorded as it was sent.
    pub fn record_retry(&self, kind: Kind, answer: Answer, intended: Instant, done: Instant) {
        let latency = done.saturating_duration_since(intended);
        let micros = latency.as_micros().min(u64::MAX as u128) as u64;
        metrics::counter!(crate::live::ANSWERS, "kind" => kind.as_str(), "outcome" => answer.as_str())
            .increment(1);
        let mut st = self.lock();
        if st.in_flight > 0 {
            st.in_flight -= 1;
            metrics::gauge!(crate::live::IN_FLIGHT).decrement(1.0);
        }
        st.retries
            .entry((kind, answer))
            .or_insert_with(new_histogram)
            .saturating_record(micros.max(1));
    }

    /// The next attempt recorded for `key` ([`Recorder::attempt`]) is a retry of it.
    pub fn retrying<'k>(&self, key: impl Into<super::Key<'k>>) {
        let key = self.key_text(key.into());
        self.lock().retrying.insert(key);
    }
}

impl super::Measurements {
    /// Retries of one kind by answer.
    pub fn retry_counts(&self, kind: Kind) -> std::collections::BTreeMap<Answer, u64> {
        self.retries
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, a), h)| (*a, h.len()))
            .collect()
    }

    /// Every retry of one kind merged into one histogram.
    pub fn retries_by_kind(&self, kind: Kind) -> Histogram<u64> {
        let mut h = new_histogram();
        for ((k, _), hist) in &self.retries {
            if *k == kind {
                h.add(hist).expect("same-precision histograms merge");
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::recorder::Told;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_retry_is_kept_apart_from_first_attempts_and_a_second_cancel_restocks_nothing() {
        let opened = Instant::now();
        let rec = Recorder::new(opened);
        let first = rec.sending(Kind::Order, opened, None);
        rec.record(
            Kind::Order,
            Answer::Busy,
            opened,
            first,
            opened + Duration::from_millis(5),
        );
        let retry_at = opened + Duration::from_millis(55);
        rec.sending(Kind::Order, retry_at, None);
        rec.record_retry(
            Kind::Order,
            Answer::Created,
            retry_at,
            retry_at + Duration::from_millis(3),
        );
        rec.told(Some("A"), Told::Cancelled);
        rec.told(Some("A"), Told::Cancelled);
        rec.told(Some("B"), Told::Paid);
        rec.told(Some("B"), Told::Cancelled);
        let m = rec.finish();
        assert_eq!(m.counts(Kind::Order), [(Answer::Busy, 1)].into());
        assert_eq!(m.retry_counts(Kind::Order), [(Answer::Created, 1)].into());
        assert_eq!(
            m.timeline[0].values().sum::<u64>(),
            1,
            "the timeline is first attempts'"
        );
        assert_eq!(m.service[&Kind::Order].len(), 1, "service time too");
        assert_eq!(
            m.send_lag[&Kind::Order].len(),
            2,
            "send lag is every request's"
        );
        let latency = m.retries_by_kind(Kind::Order);
        assert!(
            (2_900..=3_100).contains(&latency.max()),
            "from its own intended send"
        );
        assert_eq!(rec.progress().in_flight, 0);
        assert_eq!(m.cancels_ok, 2, "one restock per order cancelled");
        assert_eq!(m.told["B"], Told::Cancelled, "the last ok wins");
    }
}
