//! Buyers' logins as the recorder tallies them (`[target.login]`): how many were answered ok,
//! the failures by reason (each with a sample body), and their latency; and the run's `login`
//! section built from the tally. Judging one login is `traffic::login`'s.

use super::{cut, new_histogram, SAMPLE_BYTES};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Failed logins of one reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoginFailure {
    /// `answered unauthorized`, `target.login.extract.token: ...`, `no answer (timeout)`.
    pub reason: String,
    pub count: u64,
    /// The first such answer's body, cut to [`SAMPLE_BYTES`].
    pub sample: String,
}

/// A run's `login` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoginReport {
    /// `before_sale` or `on_arrival`.
    pub when: String,
    pub sent: u64,
    pub ok: u64,
    pub failed: u64,
    /// Wall time of the logins before the sale, first sent to last answered (`on_arrival`:
    /// absent, they are spread over the sale).
    pub seconds: Option<f64>,
    /// Latency of the logins (ms), from the login's intended send to its full answer.
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub failures: Vec<LoginFailure>,
}

impl LoginReport {
    /// The share of logins that failed (0 when none was sent).
    pub fn failure_share(&self) -> f64 {
        if self.sent == 0 {
            0.0
        } else {
            self.failed as f64 / self.sent as f64
        }
    }

    /// One line for people: `login (before_sale): 200 sent, 198 ok, 2 failed in 1.2 s`.
    pub fn line(&self) -> String {
        let took = self
            .seconds
            .map(|s| format!(" in {s:.2} s"))
            .unwrap_or_default();
        format!(
            "login ({}): {} sent, {} ok, {} failed{took}; latency p50 {:.1} ms, p99 {:.1} ms",
            self.when, self.sent, self.ok, self.failed, self.latency_p50_ms, self.latency_p99_ms
        )
    }
}

/// Logins counted as they are answered.
#[derive(Debug, Clone)]
pub struct LoginTally {
    ok: u64,
    failures: Vec<LoginFailure>,
    latency: Histogram<u64>,
}

impl Default for LoginTally {
    fn default() -> Self {
        LoginTally {
            ok: 0,
            failures: Vec::new(),
            latency: new_histogram(),
        }
    }
}

impl LoginTally {
    /// One login answered (or failed) after `latency`; `body` is kept as the sample of its
    /// failure's reason.
    pub fn add(&mut self, result: Result<(), String>, latency: Duration, body: &str) {
        let micros = latency.as_micros().min(u64::MAX as u128) as u64;
        self.latency.saturating_record(micros.max(1));
        match result {
            Ok(()) => self.ok += 1,
            Err(reason) => match self.failures.iter_mut().find(|f| f.reason == reason) {
                Some(f) => f.count += 1,
                None => self.failures.push(LoginFailure {
                    reason,
                    count: 1,
                    sample: cut(body, SAMPLE_BYTES),
                }),
            },
        }
    }

    /// The report section; `when`: `before_sale` or `on_arrival` (`LoginWhen`'s spelling).
    pub fn report(&self, when: &str, seconds: Option<f64>) -> LoginReport {
        let failed: u64 = self.failures.iter().map(|f| f.count).sum();
        let ms = |q: f64| {
            if self.latency.is_empty() {
                0.0
            } else {
                self.latency.value_at_quantile(q) as f64 / 1000.0
            }
        };
        LoginReport {
            when: when.into(),
            sent: self.ok + failed,
            ok: self.ok,
            failed,
            seconds,
            latency_p50_ms: ms(0.5),
            latency_p99_ms: ms(0.99),
            failures: self.failures.clone(),
        }
    }
}
