//! Buyers' logins (`[target.login]`): whether one succeeded, and the tally a run reports in
//! its `login` section: sent, ok, failed (by reason, each with a sample body), the time the
//! logins took and their latency. Logins are kept out of the sale's figures: a `before_sale`
//! login is sent before the sale opens and recorded only here; an `on_arrival` one is
//! recorded under its own kind `login` as well, never as an order.
//!
//! A login fails on a transport error, an answer other than `ok`/`created` (by the login's
//! own `outcomes`, or the defaults: any 2xx is ok), or a 2xx that lacks a value its `extract`
//! names; a buyer whose login failed does not go on to order.

use super::recorder::Answer;
pub use super::recorder::{LoginReport, LoginTally};
use super::target::Classified;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::mapping::LoginWhen;
    use std::time::Duration;

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
        let r = t.report(LoginWhen::BeforeSale.as_str(), Some(1.5));
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
