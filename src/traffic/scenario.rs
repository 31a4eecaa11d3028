//! Scenario files: TOML data, deserialized with unknown fields rejected, then validated section
//! by section (`validate`: each section's rules and the typed errors).
//!
//! Every error names the file, the field (as a dotted path) and what is allowed. The `[shop]`
//! table is the shop's own [`ShopKnobs`], read as an overlay on its defaults.

pub use super::adversary::RetrySpec;
use crate::nemesis::{FaultSpec, NemesisSpec};
use crate::shop::ShopKnobs;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub mod masked;
mod validate;
mod written;
use crate::duration::Written;
use validate::bad;
pub use validate::{FieldError, ScenarioError, ScenarioProblem, MAX_BUYERS};

/// A scenario file as written.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub item: ItemSpec,
    pub buyers: BuyersSpec,
    #[serde(default)]
    pub browse: BrowseSpec,
    #[serde(default)]
    pub bots: BotsSpec,
    #[serde(default)]
    pub after_order: AfterOrderSpec,
    /// `[adversarial]`: shares of the buyers who get an order that follow a script instead.
    #[serde(default)]
    pub adversarial: AdversarialSpec,
    #[serde(default)]
    pub second_wave: Option<WaveSpec>,
    #[serde(default)]
    pub client: ClientSpec,
    /// `[shop]`: the reference shop's knobs for this scenario (each applies to the strategies
    /// it concerns); absent fields keep the shop's defaults.
    #[serde(default)]
    pub shop: ShopKnobs,
    /// `[thresholds]`: limits the gate checks, parsed into catalog metrics as the file is
    /// read (unknown names and bad values are refused there).
    #[serde(default)]
    pub thresholds: crate::metric::Thresholds,
    /// `[target]`: a foreign shop's API (absent: the reference shop's).
    #[serde(default)]
    pub target: Option<super::mapping::Mapping>,
    /// `[nemesis]`: how the faults' private services are set up (the private Redis's
    /// persistence).
    #[serde(default)]
    pub nemesis: NemesisSpec,
    /// `[[faults]]`: what goes wrong during the sale (`--fault` adds to these).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultSpec>,
    /// `[watch]`: the shop's own gauges, sampled every second during the sale
    /// ([`crate::watch`]).
    #[serde(default, skip_serializing_if = "crate::watch::WatchSpec::is_empty")]
    pub watch: crate::watch::WatchSpec,
}

/// An item's id: an integer (the reference shop's), or a string (a foreign shop's UUID, say).
/// Templates take it as text.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ItemId {
    Int(i64),
    Text(String),
}

impl std::fmt::Display for ItemId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ItemId::Int(n) => write!(f, "{n}"),
            ItemId::Text(t) => write!(f, "{t}"),
        }
    }
}

/// `[item]`: the sale.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ItemSpec {
    /// An integer, or a string for a foreign shop (`"0b7e…"`).
    #[serde(default = "first_item")]
    pub id: ItemId,
    pub stock: i64,
    #[serde(default = "one")]
    pub purchase_limit: i64,
    #[serde(default = "item_name")]
    pub name: String,
    #[serde(default)]
    pub price_cents: i64,
}

/// Arrival shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrival {
    /// `burst_share` of buyers within the first `burst_s`, the rest spread over the window.
    Burst,
    /// Evenly at random over the window.
    Uniform,
    /// Arrival rate rising linearly from zero to its peak at the end of the window.
    Ramp,
    /// Given counts per interval (`[buyers] trace`), replayed: the window is cut into as many
    /// equal intervals as the trace has counts, and each interval gets its count of buyers at
    /// seeded instants within it (`oversell fit` writes a log's arrivals per second).
    Trace,
}

/// The shortest *late send* ([`Scenario::late_send_after`]): beyond a busy machine's
/// scheduling tail.
pub const LATE_SEND_MIN: std::time::Duration = std::time::Duration::from_millis(50);
/// The longest *late send*: a request that late landed in another second of the arrival
/// curve.
pub const LATE_SEND_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// `[buyers]`: how many people come, and when.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BuyersSpec {
    pub count: u32,
    /// Seed of every random choice: the same seed sends the same schedule.
    #[serde(default = "seed")]
    pub seed: u64,
    pub arrival: Arrival,
    /// Seconds over which buyers arrive (or `window = "60s"`).
    #[serde(default = "written::unset")]
    pub window_s: f64,
    /// `window = "60s"`: [`BuyersSpec::window_s`] with its unit (one of the two).
    #[serde(default, skip_serializing)]
    pub window: Option<Written>,
    /// Seconds of the opening rush (`arrival = "burst"`; default 5; or `burst = "5s"`).
    #[serde(default = "written::unset")]
    pub burst_s: f64,
    /// `burst = "5s"`: [`BuyersSpec::burst_s`] with its unit.
    #[serde(default, skip_serializing)]
    pub burst: Option<Written>,
    #[serde(default = "burst_share")]
    pub burst_share: f64,
    /// `arrival = "trace"`: buyers per interval, the window cut into `trace.len()` equal
    /// intervals. When the counts add up to `count` each interval gets exactly its count;
    /// otherwise `count` is shared out in proportion (a scaled scenario keeps the shape).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trace: Vec<u32>,
}

/// `[browse]`: product-page views before ordering.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrowseSpec {
    /// Share of buyers who view the product page before ordering.
    pub view_share: f64,
    /// Page views per viewing buyer, inclusive range.
    pub views: [u32; 2],
    /// Think time after each view, milliseconds, inclusive range (or `think = ["0ms", "2s"]`).
    #[serde(default = "written::unset_range")]
    pub think_ms: [u64; 2],
    /// `think = ["0ms", "2s"]`: [`BrowseSpec::think_ms`] with units.
    #[serde(default, skip_serializing)]
    pub think: Option<[Written; 2]>,
}

/// `[bots]`: scripts that re-submit the same order.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BotsSpec {
    /// Share of buyers that are bots.
    pub share: f64,
    /// Extra submissions per bot, same user and device.
    pub resubmits: u32,
    /// Gap between a bot's submissions, milliseconds, inclusive range (or `interval`).
    #[serde(default = "written::unset_range")]
    pub interval_ms: [u64; 2],
    /// `interval = ["20ms", "100ms"]`: [`BotsSpec::interval_ms`] with units.
    #[serde(default, skip_serializing)]
    pub interval: Option<[Written; 2]>,
    /// Bots come from this many client IPs.
    pub ip_pool: u32,
}

/// `[after_order]`: what a buyer does with a created order.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AfterOrderSpec {
    pub pay: f64,
    pub cancel: f64,
    /// Walk away: the order waits for the payment timeout.
    pub abandon: f64,
    /// Think time before paying or cancelling, milliseconds, inclusive range (or `think`).
    #[serde(default = "written::unset_range")]
    pub think_ms: [u64; 2],
    /// `think = ["1s", "5s"]`: [`AfterOrderSpec::think_ms`] with units.
    #[serde(default, skip_serializing)]
    pub think: Option<[Written; 2]>,
}

/// `[adversarial]`: shares of the buyers who get an order that follow a script (see
/// [`super::adversary::Script`]) instead of `[after_order]`; together at most 1.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdversarialSpec {
    /// Pay, then cancel the paid order.
    pub cancel_after_pay: f64,
    /// Cancel, then cancel again.
    pub cancel_twice: f64,
    /// Pay, then pay again.
    pub pay_twice: f64,
    /// Cancel, then pay the cancelled order.
    pub pay_after_cancel: f64,
    /// Pay and cancel sent at once.
    pub pay_and_cancel: f64,
    /// Pay right at the end of the payment window.
    pub at_timeout: f64,
    /// Resend the order attempt with the same `Idempotency-Key`, then pay.
    pub resend_same_key: f64,
}

impl AdversarialSpec {
    /// Each script's share, in [`super::adversary::Script::ALL`]'s order.
    pub fn shares(&self) -> [(super::adversary::Script, f64); 7] {
        use super::adversary::Script as S;
        [
            (S::CancelAfterPay, self.cancel_after_pay),
            (S::CancelTwice, self.cancel_twice),
            (S::PayTwice, self.pay_twice),
            (S::PayAfterCancel, self.pay_after_cancel),
            (S::PayAndCancel, self.pay_and_cancel),
            (S::AtTimeout, self.at_timeout),
            (S::ResendSameKey, self.resend_same_key),
        ]
    }

    /// The shares together.
    pub fn total(&self) -> f64 {
        self.shares().iter().map(|(_, v)| v).sum()
    }
}

/// `[second_wave]`: buyers who come back later (after restocks).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WaveSpec {
    pub count: u32,
    /// Seconds after the sale opens (or `at = "20s"`).
    #[serde(default = "written::unset")]
    pub at_s: f64,
    /// `at = "20s"`: [`WaveSpec::at_s`] with its unit.
    #[serde(default, skip_serializing)]
    pub at: Option<Written>,
    /// Seconds over which the wave arrives, uniformly (or `window = "10s"`).
    #[serde(default = "written::unset")]
    pub window_s: f64,
    /// `window = "10s"`: [`WaveSpec::window_s`] with its unit.
    #[serde(default, skip_serializing)]
    pub window: Option<Written>,
}

/// `[client] senders`'s default: goose users (senders) in the pool, at most; one per buyer
/// below that. Large, so a slow shop (hundreds of requests held for a second each) holds them
/// all only under a real pile-up; each idle sender costs a few KiB. The generator raises its
/// open-files limit to fit.
pub const SENDERS: u32 = 2048;

/// `[client]`: the simulated clients.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientSpec {
    /// A request not answered within this many milliseconds is a timeout (an error; or
    /// `timeout = "10s"`).
    #[serde(default = "written::unset_ms")]
    pub timeout_ms: u64,
    /// `timeout = "10s"`: [`ClientSpec::timeout_ms`] with its unit.
    #[serde(default, skip_serializing)]
    pub timeout: Option<Written>,
    /// Real buyers come from this many client IPs (sent as `X-Forwarded-For`).
    pub ip_pool: u32,
    /// The most goose senders the generator starts (one per buyer below it): a request that
    /// finds every sender held by an unanswered one waits for a sender (sender wait, the
    /// shop's time).
    pub senders: u32,
    /// `retry = { on = [...], times, backoff_ms }`: failed requests resent (absent: never).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetrySpec>,
}

fn one() -> i64 {
    1
}
fn first_item() -> ItemId {
    ItemId::Int(1)
}

impl ItemSpec {
    /// The item's id as the reference shop knows it: an integer. A string id never reaches
    /// the reference shop ([`ItemSpec::reference_check`] refuses it first); 0 stands in.
    pub fn number(&self) -> i64 {
        match self.id {
            ItemId::Int(n) => n,
            ItemId::Text(_) => 0,
        }
    }

    /// Refuses a string id for the reference shop, whose item ids are integers.
    pub fn reference_check(&self) -> Result<(), FieldError> {
        match &self.id {
            ItemId::Int(_) => Ok(()),
            ItemId::Text(t) => validate::bad(
                "item.id",
                "an integer for the reference shop (a string id, like a UUID, is for a \
                 foreign shop's [target])",
                format!("{t:?}"),
            ),
        }
    }
}
fn item_name() -> String {
    "flash-sale item".into()
}
fn seed() -> u64 {
    1
}
fn burst_share() -> f64 {
    0.8
}

impl Default for BrowseSpec {
    fn default() -> Self {
        BrowseSpec {
            view_share: 0.0,
            views: [1, 1],
            think_ms: [0, 0],
            think: None,
        }
    }
}

impl Default for BotsSpec {
    fn default() -> Self {
        BotsSpec {
            share: 0.0,
            resubmits: 0,
            interval_ms: [20, 100],
            interval: None,
            ip_pool: 4,
        }
    }
}

impl Default for AfterOrderSpec {
    fn default() -> Self {
        AfterOrderSpec {
            pay: 1.0,
            cancel: 0.0,
            abandon: 0.0,
            think_ms: [0, 0],
            think: None,
        }
    }
}

impl Default for ClientSpec {
    fn default() -> Self {
        ClientSpec {
            timeout_ms: 10_000,
            timeout: None,
            ip_pool: 1000,
            senders: SENDERS,
            retry: None,
        }
    }
}

impl Scenario {
    /// Reads, parses and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let err = |problem| ScenarioError {
            file: path.to_path_buf(),
            problem,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(ScenarioProblem::Read(e)))?;
        Self::parse(&text).map_err(err)
    }

    /// Parses and validates scenario text.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioProblem> {
        let mut s: Scenario = toml::from_str(text)?;
        s.resolve_units()?;
        s.resolve_fault_units()?;
        s.validate()?;
        Ok(s)
    }

    /// Checks every section's fields, in the order the file lists them.
    pub fn validate(&self) -> Result<(), ScenarioProblem> {
        if self.name.trim().is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            bad(
                "name",
                "a non-empty name of letters, digits, '-', '_' or '.'",
                format!("{:?}", self.name),
            )?;
        }
        self.item.validate()?;
        self.buyers.validate()?;
        self.browse.validate()?;
        self.bots.validate()?;
        self.after_order.validate()?;
        self.adversarial.validate()?;
        if let Some(w) = &self.second_wave {
            w.validate()?;
        }
        self.client.validate()?;
        self.shop.validate()?;
        if let Some(t) = &self.target {
            validate::target_fits(t, &self.browse, &self.after_order)?;
            validate::target_fits_scripts(t, &self.adversarial)?;
        }
        crate::nemesis::validate_all(&self.faults)?;
        self.watch.validate()?;
        validate::watch_limits_name_gauges(self)?;
        Ok(())
    }

    /// The API mapping of the shop under test: the `[target]` table or the reference shop's.
    pub fn mapping(&self) -> super::mapping::Mapping {
        self.target.clone().unwrap_or_default()
    }

    /// Total buyers over both waves.
    pub fn total_buyers(&self) -> u32 {
        self.buyers.count + self.second_wave.as_ref().map_or(0, |w| w.count)
    }

    /// How late a request may go out before the arrival it belongs to counts as not sent as
    /// planned: a tenth of a burst's opening rush (of a trace's interval), at least 50 ms and
    /// at most 1 s; 1 s for an arrival curve with no rush (`report::lateness`).
    pub fn late_send_after(&self) -> std::time::Duration {
        match self.buyers.arrival {
            Arrival::Burst => std::time::Duration::from_secs_f64(self.buyers.burst_s / 10.0)
                .clamp(LATE_SEND_MIN, LATE_SEND_MAX),
            Arrival::Trace => std::time::Duration::from_secs_f64(
                self.buyers.window_s / self.buyers.trace.len().max(1) as f64 / 10.0,
            )
            .clamp(LATE_SEND_MIN, LATE_SEND_MAX),
            Arrival::Uniform | Arrival::Ramp => LATE_SEND_MAX,
        }
    }

    /// The payment window `at_timeout` buyers wait for before paying: the one the scenario
    /// declares for the shop it is written for (its `[target]` table's
    /// ([`Mapping::declared_payment_window`]) when it has one, else its `[shop]`
    /// `payment_timeout`), else the post-mortem's 15 minutes. Traffic only: evidence never
    /// assumes it (it asks the shop under test, `ShopUnderTest::payment_window`).
    ///
    /// [`Mapping::declared_payment_window`]: super::mapping::Mapping::declared_payment_window
    pub fn payment_window(&self) -> std::time::Duration {
        let declared = match self.target.is_some() {
            true => self.mapping().declared_payment_window(),
            false => Some(self.shop.payment_timeout),
        };
        declared.unwrap_or(std::time::Duration::from_secs(
            super::mapping::PAYMENT_WINDOW_S,
        ))
    }
}

#[cfg(test)]
mod tests;
