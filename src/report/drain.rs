//! How a run ended: the reference shop's queue drained, or a foreign shop settled (its
//! oracle's reading unchanged for the settle window, its backlog at 0), and what the report
//! says about it.

use serde::{Deserialize, Serialize};

/// How draining went: the reference shop's queue drained, or a foreign shop settled.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Drain {
    pub drained: bool,
    pub waited_ms: u64,
    pub limit_ms: u64,
    /// A foreign shop: how its settling was judged (absent: a reference shop's drain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<Settling>,
}

/// Whether a foreign shop settled after the last buyer (BRIEF §4: the oracle's reading
/// unchanged for the settle window, and the backlog at 0 where one can be read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettleState {
    Settled,
    NotSettled,
    /// Neither an oracle nor a backlog signal: nothing could say whether the shop was done.
    Unknown,
}

/// How a foreign shop's settling went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settling {
    pub state: SettleState,
    /// How long the oracle's reading had to stay unchanged.
    pub window_ms: u64,
    /// The backlog signal read (`None`: none was given).
    pub backlog: Option<String>,
    /// Its last reading (`None`: never read, or unreadable).
    pub backlog_last: Option<i64>,
    /// How many times the oracle (and backlog) were read.
    pub readings: u64,
}

impl Settling {
    /// What the report says about the settling of a run that waited `waited_ms` of `limit_ms`.
    pub fn line(&self, waited_ms: u64, limit_ms: u64) -> String {
        let backlog = match (&self.backlog, self.backlog_last) {
            (Some(b), Some(n)) => format!("; backlog {b} last read {n}"),
            (Some(b), None) => format!("; backlog {b} never read"),
            (None, _) => {
                "; no backlog signal: orders missing after settling may be late rather than lost"
                    .into()
            }
        };
        match self.state {
            SettleState::Settled => format!(
                "settled after {waited_ms} ms: the oracle's reading unchanged for {} ms{} (limit {limit_ms} ms, {} readings){backlog}",
                self.window_ms,
                if self.backlog.is_some() { " and the backlog at 0" } else { "" },
                self.readings
            ),
            SettleState::NotSettled => format!(
                "NOT settled within {limit_ms} ms (--drain-timeout): the oracle's reading kept changing or the backlog stayed above 0 ({} readings){backlog}",
                self.readings
            ),
            SettleState::Unknown => format!(
                "could not tell whether the shop settled: no oracle and no backlog signal (--backlog-query or [target.settle] backlog); waited {waited_ms} ms"
            ),
        }
    }
}
