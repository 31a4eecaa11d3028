//! Buyers' logins (`[target.login]`): whether one succeeded, and the tally a run reports in
//! its `login` section: sent, ok, failed (by reason, each with a sample body), the time the
//! logins took and their latency. Logins are kept out of the sale's figures: a `before_sale`
//! login is sent before the sale opens and recorded only here; an `on_arrival` one is
//! recorded under its own kind `login` as well, never as an order.
//!
//! A login fails on a transport error, an answer other than `ok`/`created` (by the login's
//! own `outcomes`, or the defaults: any 2xx is ok), or a 2xx that lacks a value its `extract`
//! names; a buyer whose login failed does not go on to order.

use super::mapping::LoginWhen;
use super::recorder::{cut, new_histogram, Answer, SAMPLE_BYTES};
use super::target::Classified;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Why one login failed (`Ok`: it succeeded).
pub fn judge(c: &Classified) -> Result<(), String> {
    match c.answer {
        Answer::Ok | Answer::Created => {}
        Answer::Timeout | Answer::ConnectError => {
            return Err(format!("no answer ({})", c.answer.as_str()))
        }
        a => return Err(format!("answered {}", a.as_str())),
    }
    match &c.learned.missing {
        Some((name, from)) => Err(format!(
            "target.login.extract.{name}: `{from}` is not in the answer"
        )),
        None => Ok(()),
    }
}

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

    /// The report section.
    pub fn report(&self, when: LoginWhen, seconds: Option<f64>) -> LoginReport {
        let failed: u64 = self.failures.iter().map(|f| f.count).sum();
        let ms = |q: f64| {
            if self.latency.is_empty() {
                0.0
            } else {
                self.latency.value_at_quantile(q) as f64 / 1000.0
            }
        };
        LoginReport {
            when: when.as_str().into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_grouped_by_reason_with_the_first_body() {
        let mut t = LoginTally::default();
        t.add(Ok(()), Duration::from_millis(2), "");
        t.add(
            Err("answered unauthorized".into()),
            Duration::from_millis(3),
            "no",
        );
        t.add(
            Err("answered unauthorized".into()),
            Duration::from_millis(3),
            "later",
        );
        let r = t.report(LoginWhen::BeforeSale, Some(1.5));
        assert_eq!((r.sent, r.ok, r.failed), (3, 1, 2));
        assert_eq!(r.failures.len(), 1);
        assert_eq!(r.failures[0].sample, "no");
        assert!((r.failure_share() - 2.0 / 3.0).abs() < 1e-9);
        assert!(
            r.line().contains("3 sent, 1 ok, 2 failed in 1.50 s"),
            "{}",
            r.line()
        );
    }
}
