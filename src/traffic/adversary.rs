//! Adversarial buyers (`[adversarial]`) and client retries (`[client] retry`): the scripts a
//! buyer may follow with its order instead of `[after_order]`, the payment window they are
//! timed against, and the retry policy that resends a request with its `Idempotency-Key`.
//!
//! What a correct shop must answer to each script is the oracle's table
//! (`oracle::answers`); `docs/src/rehearsal/adversarial.md` is its user-facing page.

use super::recorder::Answer;
use serde::{Deserialize, Serialize};
use std::time::Duration;

pub use super::recorder::Script;

/// An `at_timeout` buyer pays within this much of the window's end, either side (seeded), so
/// a run sees pays just before and just after the shop's own deadline.
pub const AT_TIMEOUT_SPREAD: Duration = Duration::from_millis(250);

/// `[client] retry`: failed requests resent with the same request (an order with its
/// attempt's `Idempotency-Key`), as real clients do.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// Which failures are retried: `timeout`, `connect_error`, `5xx`.
    pub on: Vec<String>,
    /// Retries after the first attempt, at most.
    #[serde(default = "retry_times")]
    pub times: u32,
    /// Milliseconds to wait before each retry, from the failed answer (the last repeats).
    #[serde(default = "retry_backoff")]
    pub backoff_ms: Vec<u64>,
}

fn retry_times() -> u32 {
    2
}

fn retry_backoff() -> Vec<u64> {
    vec![50, 200]
}

/// Which failed answers `[client] retry` resends (the `on` list's spellings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryOn {
    /// No answer within `client.timeout_ms`.
    Timeout,
    /// Could not connect, or the connection broke.
    ConnectError,
    /// Any 5xx answer (busy included).
    ServerError,
}

impl RetryOn {
    /// Every value, as `client.retry.on` spells it.
    pub const ALL: [RetryOn; 3] = [
        RetryOn::Timeout,
        RetryOn::ConnectError,
        RetryOn::ServerError,
    ];

    /// The scenario's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            RetryOn::Timeout => "timeout",
            RetryOn::ConnectError => "connect_error",
            RetryOn::ServerError => "5xx",
        }
    }

    /// The value a spelling names.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether `answer` is one of these.
    pub fn matches(self, answer: Answer) -> bool {
        match self {
            RetryOn::Timeout => answer == Answer::Timeout,
            RetryOn::ConnectError => answer == Answer::ConnectError,
            RetryOn::ServerError => matches!(answer, Answer::Busy | Answer::ServerError),
        }
    }
}

/// `[client] retry`, checked: which answers are resent, how many times, after which waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    pub on: Vec<RetryOn>,
    /// Retries after the first attempt, at most.
    pub times: u32,
    /// The wait before retry k is `backoff[k - 1]` (the last repeated), from the failed answer.
    pub backoff: Vec<Duration>,
}

impl RetryPolicy {
    /// The policy of a validated `[client] retry` (unknown `on` values were refused there).
    pub fn of(spec: &RetrySpec) -> Self {
        RetryPolicy {
            on: spec.on.iter().filter_map(|s| RetryOn::parse(s)).collect(),
            times: spec.times,
            backoff: spec
                .backoff_ms
                .iter()
                .map(|ms| Duration::from_millis(*ms))
                .collect(),
        }
    }

    /// The wait before retry `n` (1: the first retry) of a request answered `answer`, or
    /// `None` when it is not retried.
    pub fn wait(&self, answer: Answer, n: u32) -> Option<Duration> {
        if n == 0 || n > self.times || !self.on.iter().any(|r| r.matches(answer)) {
            return None;
        }
        let i = (n as usize - 1).min(self.backoff.len().saturating_sub(1));
        Some(self.backoff.get(i).copied().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_waits_its_backoff_and_stops_after_its_times() {
        let p = RetryPolicy {
            on: vec![RetryOn::Timeout, RetryOn::ServerError],
            times: 3,
            backoff: vec![Duration::from_millis(50), Duration::from_millis(200)],
        };
        assert_eq!(p.wait(Answer::Timeout, 1), Some(Duration::from_millis(50)));
        assert_eq!(p.wait(Answer::Busy, 2), Some(Duration::from_millis(200)));
        assert_eq!(
            p.wait(Answer::ServerError, 3),
            Some(Duration::from_millis(200)),
            "the last wait repeats"
        );
        assert_eq!(p.wait(Answer::Timeout, 4), None, "times = 3");
        assert_eq!(p.wait(Answer::ConnectError, 1), None, "not in `on`");
        assert_eq!(
            p.wait(Answer::SoldOut, 1),
            None,
            "a clean answer is never retried"
        );
    }

    #[test]
    fn script_spellings_are_the_fields() {
        for s in Script::ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
        }
        assert!(!Script::CancelTwice.pays() && Script::CancelTwice.cancels());
        assert!(Script::AtTimeout.pays() && !Script::AtTimeout.cancels());
    }
}
