//! Proofs: every finding that fails carries its counterexample, the smallest set of orders,
//! rows or samples that shows it, which a reader can check against their own rows (in the
//! spirit of Elle's anomalies). An oversell is shown as the instant the most units were held
//! and the fewest acknowledged orders held then that exceed the stock, each with its id, buyer,
//! send and acknowledgement times, its later pay or cancel and, in the reference shop, the stock
//! its purchase read ("both read 1"). A duplicate buyer is the buyer and its orders; a lost
//! acknowledgement the ids missing from the rows; a phantom the rows no request explains. A
//! finding that only totals can show (conservation, an oracle's count) is shown as its figures.
//!
//! `build` (in `proof/build.rs`) gathers them from the oracle's findings: `rows` from the rows the
//! second pass kept ([`super::witness`]) and the restock ledger, `clients` from the clients'
//! records, `totals` from the figures alone; `render` writes them for people.

mod build;
mod clients;
mod orders;
mod render;
mod rows;
mod totals;

pub(super) use build::collect;
pub use render::{line, seconds, terminal};

use serde::{Deserialize, Serialize};

/// The most orders one proof lists: a larger set is described by its instant and count (its
/// rows are the ones a query at that instant returns), never cut short.
pub const LISTED: usize = 10_000;
/// The most rows or ids a proof of a count lists (lost, phantom, per key).
pub const EXAMPLES: usize = 20;

/// One finding's counterexample.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Proof {
    /// The findings it proves (catalog names: `oversell`, `peak_oversell`, ...).
    pub findings: Vec<String>,
    /// What it shows, in one sentence.
    pub claim: String,
    /// Where its facts were read: the order rows, the clients' records, the stock samples.
    pub source: String,
    /// The instant the claim is about, in ms after the sale opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
    /// The same instant on the rows' own clock (ms since the Unix epoch, as `created_at_ms`
    /// and `updated_at_ms` hold it), for a claim read from order rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_row_ms: Option<i64>,
    /// When the sale opened on the rows' clock (ms since the Unix epoch), when the shop shares
    /// the harness's clock: row times less this are ms after the sale opened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_at_ms: Option<i64>,
    /// The stock the claim is held against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock: Option<i64>,
    /// The orders that show it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orders: Vec<ProofOrder>,
    /// The set is larger than [`LISTED`]: how many orders it holds (`orders` is then empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unlisted: Option<u64>,
    /// Further facts, one line each: the stock two purchases both read, the figures of a count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<String>,
}

/// One order of a proof: what its row and its client say of it. Client times are ms after the
/// sale opened; row times are the row's own (ms since the Unix epoch on the shop's clock).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ProofOrder {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The buyer (user id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The `Idempotency-Key` it was bought under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    pub qty: i64,
    /// When its client meant to send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_ms: Option<u64>,
    /// When its client was told it exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked_ms: Option<u64>,
    /// Its client's pay answered ok, at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paid_ms: Option<u64>,
    /// Its client's cancel (answered ok) was sent, at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_sent_ms: Option<u64>,
    /// Its row's status after the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Its row's creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at_ms: Option<i64>,
    /// Its row's release (cancel or expiry), if it was released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at_ms: Option<i64>,
    /// The stock its purchase read before it decided (the reference shop's racy reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock_read: Option<i64>,
}

impl Proof {
    /// Whether it proves `finding` (a catalog name).
    pub fn proves(&self, finding: &str) -> bool {
        self.findings.iter().any(|f| f == finding)
    }

    /// Units the listed orders hold.
    pub fn units(&self) -> i64 {
        self.orders.iter().map(|o| o.qty).sum()
    }
}

/// The first proof of `finding` among `proofs`.
pub fn of<'a>(proofs: &'a [Proof], finding: &str) -> Option<&'a Proof> {
    proofs.iter().find(|p| p.proves(finding))
}
