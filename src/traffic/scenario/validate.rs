//! The rules of a scenario file: each section checks its own fields, and every error names the
//! field (as a dotted path) and what is allowed; [`ScenarioError`] adds the file.

use super::{
    AdversarialSpec, AfterOrderSpec, Arrival, BotsSpec, BrowseSpec, BuyersSpec, ClientSpec,
    ItemSpec, RetrySpec, WaveSpec,
};
use crate::model::MAX_ID_LEN;
use crate::shop::KnobError;
use crate::traffic::adversary::{RetryOn, Script};
use crate::traffic::mapping::Mapping;
use std::fmt::Display;
use std::path::PathBuf;

/// A scenario that could not be used; the message names file, field and what is allowed.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct ScenarioError {
    pub file: PathBuf,
    pub problem: ScenarioProblem,
}

/// What is wrong with a scenario's text.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioProblem {
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Read(std::io::Error),
    /// Not TOML, a value of the wrong type, or an unknown field (toml's message names it and
    /// lists the allowed ones).
    #[error("{}", .0.to_string().trim_end())]
    Syntax(#[from] toml::de::Error),
    /// A field outside its allowed values.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// A `[shop]` knob outside its range.
    #[error("field {} {}", .0.field(), .0.range())]
    Shop(#[from] KnobError),
    /// A `[[faults]]` entry outside its allowed values.
    #[error(transparent)]
    Fault(#[from] crate::nemesis::SpecError),
    /// A `[watch]` gauge, or a `watch.` threshold, that cannot be used.
    #[error(transparent)]
    Watch(#[from] crate::watch::WatchError),
}

/// Checks that every `watch.<name>.…` threshold of `[thresholds]` names a gauge of
/// `[watch]`.
pub(super) fn watch_limits_name_gauges(
    s: &super::Scenario,
) -> Result<(), crate::watch::WatchError> {
    for key in s.thresholds.watch().keys() {
        if !s.watch.0.contains_key(&key.gauge) {
            return Err(crate::watch::WatchError::new(
                format!("thresholds.{}", key.name()),
                crate::watch::gauge_names(&s.watch),
                format!("no [watch.{}] table", key.gauge),
            ));
        }
    }
    Ok(())
}

/// A field outside its allowed values.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field `{field}` must be {allowed} (got {got})")]
pub struct FieldError {
    /// The field as a dotted path, e.g. `buyers.count`.
    pub field: &'static str,
    /// What is allowed, e.g. `between 1 and 10000000`.
    pub allowed: &'static str,
    /// What the file says.
    pub got: String,
}

/// `Err` for `field`, which must be `allowed` but is `got`.
pub(super) fn bad(
    field: &'static str,
    allowed: &'static str,
    got: impl Display,
) -> Result<(), FieldError> {
    Err(FieldError {
        field,
        allowed,
        got: got.to_string(),
    })
}

/// A share: between 0 and 1.
pub(super) fn share(v: f64) -> bool {
    (0.0..=1.0).contains(&v)
}

/// An inclusive `[min, max]` range of at most `max`.
fn range_ok(r: [u64; 2], max: u64) -> bool {
    r[0] <= r[1] && r[1] <= max
}

/// What a text `[item] id` may be.
static ITEM_ID_ALLOWED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("a positive integer, or a string of 1 to {MAX_ID_LEN} visible characters")
});

impl ItemSpec {
    /// Checks `[item]`.
    pub fn validate(&self) -> Result<(), FieldError> {
        match &self.id {
            super::ItemId::Int(n) if *n <= 0 => {
                bad("item.id", "a positive integer, or a string", n)?
            }
            super::ItemId::Text(t)
                if t.is_empty() || t.len() > MAX_ID_LEN || t.chars().any(char::is_control) =>
            {
                bad("item.id", ITEM_ID_ALLOWED.as_str(), format!("{t:?}"))?
            }
            _ => {}
        }
        if !(1..=1_000_000).contains(&self.stock) {
            let why = if self.stock < 1 {
                "between 1 and 1000000 (a sale of 0 units sells nothing, so nothing can be \
                 oversold: every order would be answered sold out)"
            } else {
                "between 1 and 1000000 (the most one sale holds; more buyers than units is \
                 how a sale sells out: raise `buyers.count` instead)"
            };
            bad("item.stock", why, self.stock)?;
        }
        if !(1..=1000).contains(&self.purchase_limit) {
            bad(
                "item.purchase_limit",
                "between 1 and 1000",
                self.purchase_limit,
            )?;
        }
        Ok(())
    }
}

/// The most buyers a wave may hold: the plan keeps every buyer (about 300 bytes each), goose
/// users are created only close to their arrival (`traffic::attack`).
pub const MAX_BUYERS: u32 = 10_000_000;

impl BuyersSpec {
    /// Checks `[buyers]`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(1..=MAX_BUYERS).contains(&self.count) {
            bad(
                "buyers.count",
                "between 1 and 10000000 (each buyer not yet arrived costs the plan about 300 bytes; its task exists only close to its arrival)",
                self.count,
            )?;
        }
        if !(self.window_s > 0.0 && self.window_s <= 3600.0) {
            bad(
                "buyers.window_s",
                "more than 0 and at most 3600 seconds",
                self.window_s,
            )?;
        }
        if self.arrival == Arrival::Burst {
            if !(self.burst_s > 0.0 && self.burst_s <= self.window_s) {
                bad(
                    "buyers.burst_s",
                    "more than 0 and at most buyers.window_s",
                    self.burst_s,
                )?;
            }
            if !share(self.burst_share) {
                bad("buyers.burst_share", "between 0 and 1", self.burst_share)?;
            }
        }
        self.validate_trace()
    }

    /// Checks `[buyers] trace`: given with `arrival = "trace"` (and only then), at most
    /// [`MAX_TRACE`] counts, not all zero.
    fn validate_trace(&self) -> Result<(), FieldError> {
        let total: u64 = self.trace.iter().map(|n| u64::from(*n)).sum();
        match self.arrival {
            Arrival::Trace if self.trace.is_empty() || self.trace.len() > MAX_TRACE => bad(
                "buyers.trace",
                "a list of 1 to 36000 counts, buyers per interval (arrival = \"trace\")",
                format!("{} counts", self.trace.len()),
            ),
            Arrival::Trace if total == 0 => bad(
                "buyers.trace",
                "counts that add up to at least 1 buyer",
                "only zeros",
            ),
            Arrival::Trace => Ok(()),
            Arrival::Burst | Arrival::Uniform | Arrival::Ramp if !self.trace.is_empty() => bad(
                "buyers.trace",
                "given only with arrival = \"trace\" (it would be ignored)",
                format!(
                    "{} counts with arrival = \"{}\"",
                    self.trace.len(),
                    format!("{:?}", self.arrival).to_lowercase()
                ),
            ),
            Arrival::Burst | Arrival::Uniform | Arrival::Ramp => Ok(()),
        }
    }
}

/// The most counts `[buyers] trace` may hold: ten hours of seconds, or an hour of tenths.
pub const MAX_TRACE: usize = 36_000;

impl BrowseSpec {
    /// Checks `[browse]`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !share(self.view_share) {
            bad("browse.view_share", "between 0 and 1", self.view_share)?;
        }
        if !(self.views[0] <= self.views[1] && self.views[1] <= 20) {
            bad(
                "browse.views",
                "[min, max] with min <= max <= 20",
                format!("{:?}", self.views),
            )?;
        }
        if !range_ok(self.think_ms, 600_000) {
            bad(
                "browse.think_ms",
                "[min, max] with min <= max <= 600000",
                format!("{:?}", self.think_ms),
            )?;
        }
        Ok(())
    }
}

impl BotsSpec {
    /// Checks `[bots]`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !share(self.share) {
            bad("bots.share", "between 0 and 1", self.share)?;
        }
        if self.resubmits > 100 {
            bad("bots.resubmits", "at most 100", self.resubmits)?;
        }
        if !range_ok(self.interval_ms, 60_000) {
            bad(
                "bots.interval_ms",
                "[min, max] with min <= max <= 60000",
                format!("{:?}", self.interval_ms),
            )?;
        }
        if self.ip_pool == 0 {
            bad("bots.ip_pool", "at least 1", 0)?;
        }
        Ok(())
    }
}

impl AfterOrderSpec {
    /// Checks `[after_order]`: three shares that add up to 1, and the think time.
    pub fn validate(&self) -> Result<(), FieldError> {
        for (field, v) in [
            ("after_order.pay", self.pay),
            ("after_order.cancel", self.cancel),
            ("after_order.abandon", self.abandon),
        ] {
            if !share(v) {
                bad(field, "between 0 and 1", v)?;
            }
        }
        let sum = self.pay + self.cancel + self.abandon;
        if (sum - 1.0).abs() > 1e-6 {
            bad(
                "after_order",
                "a mix whose pay + cancel + abandon add up to 1",
                sum,
            )?;
        }
        if !range_ok(self.think_ms, 3_600_000) {
            bad(
                "after_order.think_ms",
                "[min, max] with min <= max <= 3600000",
                format!("{:?}", self.think_ms),
            )?;
        }
        Ok(())
    }
}

/// The `[adversarial]` fields, by script.
fn adversarial_field(s: Script) -> &'static str {
    match s {
        Script::CancelAfterPay => "adversarial.cancel_after_pay",
        Script::CancelTwice => "adversarial.cancel_twice",
        Script::PayTwice => "adversarial.pay_twice",
        Script::PayAfterCancel => "adversarial.pay_after_cancel",
        Script::PayAndCancel => "adversarial.pay_and_cancel",
        Script::AtTimeout => "adversarial.at_timeout",
        Script::ResendSameKey => "adversarial.resend_same_key",
    }
}

impl AdversarialSpec {
    /// Checks `[adversarial]`: shares between 0 and 1 that add up to at most 1.
    pub fn validate(&self) -> Result<(), FieldError> {
        for (script, v) in self.shares() {
            if !share(v) {
                bad(adversarial_field(script), "between 0 and 1", v)?;
            }
        }
        let sum = self.total();
        if sum > 1.0 + 1e-6 {
            bad(
                "adversarial",
                "shares that add up to at most 1 (the rest follow [after_order])",
                sum,
            )?;
        }
        Ok(())
    }
}

/// Checks that the `[target]` mapping has the pay and cancel requests the scripts send.
pub(super) fn target_fits_scripts(m: &Mapping, a: &AdversarialSpec) -> Result<(), FieldError> {
    for (script, v) in a.shares() {
        if v <= 0.0 {
            continue;
        }
        if m.pay.is_none() && script.pays() {
            bad(
                "target.pay",
                "a request (method, path) because an [adversarial] script that pays has a share above 0",
                format!("nothing ({} = {v})", adversarial_field(script)),
            )?;
        }
        if m.cancel.is_none() && script.cancels() {
            bad(
                "target.cancel",
                "a request (method, path) because an [adversarial] script that cancels has a share above 0",
                format!("nothing ({} = {v})", adversarial_field(script)),
            )?;
        }
    }
    Ok(())
}

/// The most retries `[client] retry` may ask for.
pub const MAX_RETRIES: u32 = 10;

impl RetrySpec {
    /// Checks `[client] retry`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.on.is_empty() {
            bad(
                "client.retry.on",
                "a non-empty list of \"timeout\", \"connect_error\", \"5xx\"",
                "[]",
            )?;
        }
        for v in &self.on {
            if RetryOn::parse(v).is_none() {
                bad(
                    "client.retry.on",
                    "a list of \"timeout\", \"connect_error\", \"5xx\"",
                    format!("{v:?}"),
                )?;
            }
        }
        if !(1..=MAX_RETRIES).contains(&self.times) {
            bad("client.retry.times", "between 1 and 10", self.times)?;
        }
        if self.backoff_ms.is_empty()
            || self.backoff_ms.len() > self.times as usize
            || self.backoff_ms.iter().any(|ms| *ms > 60_000)
        {
            bad(
                "client.retry.backoff_ms",
                "1 to client.retry.times waits, each at most 60000 ms (the wait before each retry; the last repeats)",
                format!("{:?}", self.backoff_ms),
            )?;
        }
        Ok(())
    }
}

impl WaveSpec {
    /// Checks `[second_wave]`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.count > MAX_BUYERS {
            bad("second_wave.count", "at most 10000000", self.count)?;
        }
        if !(self.at_s >= 0.0 && self.at_s <= 3600.0) {
            bad("second_wave.at_s", "between 0 and 3600 seconds", self.at_s)?;
        }
        if !(self.window_s > 0.0 && self.window_s <= 3600.0) {
            bad(
                "second_wave.window_s",
                "more than 0 and at most 3600 seconds",
                self.window_s,
            )?;
        }
        Ok(())
    }
}

/// Checks that the `[target]` mapping has every request the scenario will send: `view` when
/// buyers browse, `pay` and `cancel` when their shares are above 0.
pub(super) fn target_fits(
    m: &Mapping,
    browse: &BrowseSpec,
    after: &AfterOrderSpec,
) -> Result<(), FieldError> {
    if m.view.is_none() && browse.view_share > 0.0 {
        bad(
            "target.view",
            "a request (method, path) because browse.view_share is above 0",
            "nothing",
        )?;
    }
    if m.pay.is_none() && after.pay > 0.0 {
        bad(
            "target.pay",
            "a request (method, path) because after_order.pay is above 0",
            "nothing",
        )?;
    }
    if m.cancel.is_none() && after.cancel > 0.0 {
        bad(
            "target.cancel",
            "a request (method, path) because after_order.cancel is above 0",
            "nothing",
        )?;
    }
    Ok(())
}

/// The most senders `[client] senders` may ask for.
pub const MAX_SENDERS: u32 = 16_384;

impl ClientSpec {
    /// Checks `[client]`.
    pub fn validate(&self) -> Result<(), FieldError> {
        if !(1..=600_000).contains(&self.timeout_ms) {
            bad("client.timeout_ms", "between 1 and 600000", self.timeout_ms)?;
        }
        if self.ip_pool == 0 {
            bad("client.ip_pool", "at least 1", 0)?;
        }
        if !(1..=MAX_SENDERS).contains(&self.senders) {
            bad(
                "client.senders",
                "between 1 and 16384 (each sender may hold a connection to the shop)",
                self.senders,
            )?;
        }
        if let Some(r) = &self.retry {
            r.validate()?;
        }
        Ok(())
    }
}
