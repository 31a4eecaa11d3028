//! The shop under test, behind one abstraction ([`ShopUnderTest`]): what a run, `capacity`,
//! `sweep`, `gate` and the report need from it, whoever it is.
//!
//! Two kinds implement it, each in its own house under [`crate::under_test`]: the reference
//! shop (a child process per strategy and backend, or several: `--shops K`) and someone else's
//! shop at a URL, mapped by the scenario's `[target]` table. The rest of the harness holds a
//! [`Subject`] and asks it; it never matches on which kind it is, and only the reference
//! implementation reaches into the reference shop's internals. A shard (`--shard i/N`) fires
//! at one of them already serving, and `merge` judges the shards against it, through the same
//! trait.

use super::merge::Merged;
use super::{RunPlan, Slot};
use crate::inventory::Strategy;
use crate::nemesis::BoxFuture;
use crate::report::{Report, RunReport};
use crate::shard::file::ShardFile;
use crate::traffic::mapping::Mapping;
use crate::traffic::target::{Prepared, Target};
use crate::traffic::Scenario;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The servers a run talks to, whose versions and settings the report records.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Servers {
    /// Database URLs (as given: the report redacts them).
    pub databases: Vec<String>,
    pub redis: Option<String>,
}

/// What a shop holds for a plan's whole length (the reference shop: a run lock on each of its
/// databases), released when dropped.
pub type Held = Box<dyn std::any::Any + Send>;

/// What the harness can drive and know of a shop beyond firing its buyers at it: what
/// `diagnose`'s experiments may set, send and read. Each kind says its own
/// ([`ShopUnderTest::levers`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Levers {
    /// The scenario's `[shop]` knobs configure it (its payment timeout, ...): an experiment
    /// may set them.
    pub knobs: bool,
    /// Buyers can pay an order, and cancel one.
    pub pay: bool,
    pub cancel: bool,
    /// The payment window the shop declares (`--payment-window`, `[target] payment_window`):
    /// orders left unpaid expire after it.
    pub payment_window: Option<Duration>,
    /// The sale's set-up sends the purchase limit (`{purchase_limit}`), so an experiment may
    /// raise it.
    pub limit_in_setup: bool,
    /// The order request carries the buyer (`{user_id}` in it, or a login): the shop can hold
    /// each buyer to a limit.
    pub buyer_in_order: bool,
    /// An order for an item it does not sell is told apart (a `not_found` answer).
    pub answers_not_found: bool,
    /// It counts its conflict retries (`shop_cas_retries`, exported from its first retry on:
    /// absent means none).
    pub counts_retries: bool,
    /// Its every store is audited by the harness's own oracle (its rows, its cache), not
    /// through a user's queries.
    pub audited_whole: bool,
}

/// What the harness needs from the shop under test. A plan runs its shops in turn (`shops()`
/// of them, each `--repeat` times): shop `i` is one strategy on one backend for the reference
/// shop, the one target for a foreign shop.
pub trait ShopUnderTest: fmt::Debug + Send + Sync {
    /// How many shops a plan runs in turn.
    fn shops(&self) -> usize;

    /// Shop `i`'s label in progress lines and reports: `for-update/postgres`, or the target's
    /// host.
    fn label(&self, i: usize) -> String;

    /// Shop `i`'s short name in a folder name: its strategy, or `target`.
    fn short_name(&self, i: usize) -> String;

    /// Shop `i`'s reference strategy, when it is one.
    fn strategy(&self, i: usize) -> Option<Strategy>;

    /// What the plan and a dry run call the whole subject: `the reference shop (naive, ...)`,
    /// or the target's URL, credentials masked.
    fn describe(&self) -> String;

    /// The target's host when it is not on this machine (the plan warns before any request).
    fn remote_host(&self) -> Option<String>;

    /// Whether the scenario can be run against it, its faults included (`Err`: why not, for
    /// the user): the reference shop takes every fault and needs an integer item id; a
    /// foreign shop takes no fault (they act on the reference shop's own services).
    fn check(&self, s: &Scenario) -> Result<(), String>;

    /// Takes what the plan needs to itself for its whole length (a reference shop resets its
    /// database's sale: one run at a time per database).
    fn lock(&self) -> BoxFuture<'_, anyhow::Result<Vec<Held>>>;

    /// The servers whose versions the report records.
    fn servers(&self) -> Servers;

    /// The database a `[watch]` query reads when it names none (`--oracle-sql`'s, or the
    /// reference shop's).
    fn watch_database(&self) -> Option<String>;

    /// Whether sources off this machine may be read (`--allow-remote`).
    fn allow_remote(&self) -> bool;

    /// Where the report's figures come from, by name (the report's `sources`).
    fn sources(&self) -> BTreeMap<String, String>;

    /// The payment window the shop declares (the scenario's `[shop]` for the reference shop,
    /// `[target] payment_window` for a foreign one); `None`: unknown, nothing is assumed.
    fn payment_window(&self, s: &Scenario) -> Option<Duration>;

    /// What the harness can drive and know of it under scenario `s` ([`Levers`]).
    fn levers(&self, s: &Scenario) -> Levers;

    /// Runs shop `i` once: sets the sale up, fires the plan's buyers, waits for it to settle,
    /// and audits its final state against the clients' records.
    fn run<'a>(
        &'a self,
        plan: &'a RunPlan,
        i: usize,
        dir: &'a Path,
        slot: &'a Slot,
    ) -> BoxFuture<'a, anyhow::Result<RunReport>>;

    /// A shard's view of its API, the shop already serving at `--shop-url` (`Err`: the
    /// scenario can't be run against it).
    fn shard_mapping(&self, s: &Scenario) -> anyhow::Result<Mapping>;

    /// The requests shard 0 sends to set a fresh sale up, in order, each named by its field.
    fn shard_setup(&self, target: &Target, admin_token: Option<&str>) -> Vec<(String, Prepared)>;

    /// The URL that answers 200 once the sale of `item` is set up, which the shards that don't
    /// set it up wait for (`None`: no route to rely on; they go by the clock alone).
    fn item_url(&self, base_url: &str, item: i64) -> Option<String>;

    /// Writes what the shard file records of it for `merge`: its own field of `file` (the
    /// reference shop's `shop`, a foreign shop's `target`).
    fn record(&self, base_url: &str, file: &mut ShardFile);

    /// `merge`: the shards' combined records judged against this shop, and the report written.
    fn merge<'a>(&'a self, merged: Merged<'a>) -> BoxFuture<'a, anyhow::Result<(Report, PathBuf)>>;
}

/// The shop under test, as a plan holds it.
#[derive(Clone)]
pub struct Subject(Arc<dyn ShopUnderTest>);

impl Subject {
    /// The subject `shop`.
    pub fn new(shop: impl ShopUnderTest + 'static) -> Self {
        Subject(Arc::new(shop))
    }
}

impl std::ops::Deref for Subject {
    type Target = dyn ShopUnderTest;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl fmt::Debug for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
