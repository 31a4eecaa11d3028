//! Scenario files: TOML data, deserialized with unknown fields rejected, then validated.
//!
//! Every error names the file, the field (as a dotted path) and what is allowed.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    #[serde(default)]
    pub second_wave: Option<WaveSpec>,
    #[serde(default)]
    pub client: ClientSpec,
    #[serde(default)]
    pub shop: ShopSpec,
    /// `[thresholds]`: limits the gate checks, parsed into catalog metrics as the file is
    /// read (unknown names and bad values are refused there).
    #[serde(default)]
    pub thresholds: crate::metric::Thresholds,
    /// `[target]`: a foreign shop's API (absent: the reference shop's).
    #[serde(default)]
    pub target: Option<super::mapping::Mapping>,
}

/// `[item]`: the sale.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ItemSpec {
    #[serde(default = "one")]
    pub id: i64,
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
}

/// `[buyers]`: how many people come, and when.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct BuyersSpec {
    pub count: u32,
    /// Seed of every random choice: the same seed sends the same schedule.
    #[serde(default = "seed")]
    pub seed: u64,
    pub arrival: Arrival,
    /// Seconds over which buyers arrive.
    pub window_s: f64,
    #[serde(default = "burst_s")]
    pub burst_s: f64,
    #[serde(default = "burst_share")]
    pub burst_share: f64,
}

/// `[browse]`: product-page views before ordering.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BrowseSpec {
    /// Share of buyers who view the product page before ordering.
    pub view_share: f64,
    /// Page views per viewing buyer, inclusive range.
    pub views: [u32; 2],
    /// Think time after each view, milliseconds, inclusive range.
    pub think_ms: [u64; 2],
}

/// `[bots]`: scripts that re-submit the same order.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BotsSpec {
    /// Share of buyers that are bots.
    pub share: f64,
    /// Extra submissions per bot, same user and device.
    pub resubmits: u32,
    /// Gap between a bot's submissions, milliseconds, inclusive range.
    pub interval_ms: [u64; 2],
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
    /// Think time before paying or cancelling, milliseconds, inclusive range.
    pub think_ms: [u64; 2],
}

/// `[second_wave]`: buyers who come back later (after restocks).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WaveSpec {
    pub count: u32,
    /// Seconds after the sale opens.
    pub at_s: f64,
    /// Seconds over which the wave arrives (uniformly).
    pub window_s: f64,
}

/// `[client]`: the simulated clients.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClientSpec {
    /// A request not answered within this is a timeout (an error).
    pub timeout_ms: u64,
    /// Real buyers come from this many client IPs (sent as `X-Forwarded-For`).
    pub ip_pool: u32,
}

/// `[shop]`: settings of the reference shop for this scenario (each applies to the strategies
/// it concerns). Absent fields keep the shop's defaults.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ShopSpec {
    pub pool_size: Option<u32>,
    pub acquire_timeout_ms: Option<u64>,
    pub lock_timeout_ms: Option<u64>,
    pub naive_gap_ms: Option<u64>,
    pub work_ms: Option<u64>,
    pub optimistic_retries: Option<u32>,
    pub optimistic_backoff_ms: Option<u64>,
    pub payment_timeout_s: Option<u64>,
    pub reconcile_interval_s: Option<u64>,
    pub reconcile_alert_threshold: Option<i64>,
    pub rate_limit: Option<f64>,
    pub ip_rate_limit: Option<f64>,
    pub ip_burst: Option<f64>,
    pub ip_unit_cap: Option<i64>,
    pub page_cache_ms: Option<u64>,
}

impl ShopSpec {
    /// The fields that are set, as numbers, for range checks.
    pub fn values(&self) -> Vec<(&'static str, f64)> {
        let mut v = Vec::new();
        macro_rules! push {
            ($($f:ident),*) => { $( if let Some(x) = self.$f { v.push((stringify!($f), x as f64)); } )* };
        }
        push!(
            pool_size,
            acquire_timeout_ms,
            lock_timeout_ms,
            naive_gap_ms,
            work_ms,
            optimistic_retries,
            optimistic_backoff_ms,
            payment_timeout_s,
            reconcile_interval_s,
            reconcile_alert_threshold,
            rate_limit,
            ip_rate_limit,
            ip_burst,
            ip_unit_cap,
            page_cache_ms
        );
        v
    }
}

fn one() -> i64 {
    1
}
fn item_name() -> String {
    "flash-sale item".into()
}
fn seed() -> u64 {
    1
}
fn burst_s() -> f64 {
    5.0
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
        }
    }
}

impl Default for BotsSpec {
    fn default() -> Self {
        BotsSpec {
            share: 0.0,
            resubmits: 0,
            interval_ms: [20, 100],
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
        }
    }
}

impl Default for ClientSpec {
    fn default() -> Self {
        ClientSpec {
            timeout_ms: 10_000,
            ip_pool: 1000,
        }
    }
}

/// A scenario that could not be used; the message names file, field and what is allowed.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ScenarioError {
    pub file: PathBuf,
    pub message: String,
}

impl Scenario {
    /// Reads, parses and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let err = |message: String| ScenarioError {
            file: path.to_path_buf(),
            message,
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| err(format!("cannot read the file: {e}")))?;
        Self::parse(&text).map_err(err)
    }

    /// Parses and validates scenario text.
    pub fn parse(text: &str) -> Result<Scenario, String> {
        let s: Scenario = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
        s.validate()?;
        Ok(s)
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<(), String> {
        let bad = |field: &str, allowed: &str, got: &dyn std::fmt::Display| {
            Err(format!("field `{field}` must be {allowed} (got {got})"))
        };
        let share = |v: f64| (0.0..=1.0).contains(&v);
        let range_ok = |r: [u64; 2], max: u64| r[0] <= r[1] && r[1] <= max;
        if self.name.trim().is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return bad(
                "name",
                "a non-empty name of letters, digits, '-', '_' or '.'",
                &format!("{:?}", self.name),
            );
        }
        if self.item.id <= 0 {
            return bad("item.id", "a positive integer", &self.item.id);
        }
        if !(0..=1_000_000).contains(&self.item.stock) {
            return bad("item.stock", "between 0 and 1000000", &self.item.stock);
        }
        if !(1..=1000).contains(&self.item.purchase_limit) {
            return bad(
                "item.purchase_limit",
                "between 1 and 1000",
                &self.item.purchase_limit,
            );
        }
        if !(1..=200_000).contains(&self.buyers.count) {
            return bad("buyers.count", "between 1 and 200000", &self.buyers.count);
        }
        if !(self.buyers.window_s > 0.0 && self.buyers.window_s <= 3600.0) {
            return bad(
                "buyers.window_s",
                "more than 0 and at most 3600 seconds",
                &self.buyers.window_s,
            );
        }
        if self.buyers.arrival == Arrival::Burst {
            if !(self.buyers.burst_s > 0.0 && self.buyers.burst_s <= self.buyers.window_s) {
                return bad(
                    "buyers.burst_s",
                    "more than 0 and at most buyers.window_s",
                    &self.buyers.burst_s,
                );
            }
            if !share(self.buyers.burst_share) {
                return bad(
                    "buyers.burst_share",
                    "between 0 and 1",
                    &self.buyers.burst_share,
                );
            }
        }
        if !share(self.browse.view_share) {
            return bad(
                "browse.view_share",
                "between 0 and 1",
                &self.browse.view_share,
            );
        }
        if !(self.browse.views[0] <= self.browse.views[1] && self.browse.views[1] <= 20) {
            return bad(
                "browse.views",
                "[min, max] with min <= max <= 20",
                &format!("{:?}", self.browse.views),
            );
        }
        if !range_ok(self.browse.think_ms, 600_000) {
            return bad(
                "browse.think_ms",
                "[min, max] with min <= max <= 600000",
                &format!("{:?}", self.browse.think_ms),
            );
        }
        if !share(self.bots.share) {
            return bad("bots.share", "between 0 and 1", &self.bots.share);
        }
        if self.bots.resubmits > 100 {
            return bad("bots.resubmits", "at most 100", &self.bots.resubmits);
        }
        if !range_ok(self.bots.interval_ms, 60_000) {
            return bad(
                "bots.interval_ms",
                "[min, max] with min <= max <= 60000",
                &format!("{:?}", self.bots.interval_ms),
            );
        }
        if self.bots.ip_pool == 0 {
            return bad("bots.ip_pool", "at least 1", &0);
        }
        let a = &self.after_order;
        for (field, v) in [
            ("after_order.pay", a.pay),
            ("after_order.cancel", a.cancel),
            ("after_order.abandon", a.abandon),
        ] {
            if !share(v) {
                return bad(field, "between 0 and 1", &v);
            }
        }
        if ((a.pay + a.cancel + a.abandon) - 1.0).abs() > 1e-6 {
            return bad(
                "after_order",
                "a mix whose pay + cancel + abandon add up to 1",
                &(a.pay + a.cancel + a.abandon),
            );
        }
        if !range_ok(a.think_ms, 3_600_000) {
            return bad(
                "after_order.think_ms",
                "[min, max] with min <= max <= 3600000",
                &format!("{:?}", a.think_ms),
            );
        }
        if let Some(w) = &self.second_wave {
            if w.count > 200_000 {
                return bad("second_wave.count", "at most 200000", &w.count);
            }
            if !(w.at_s >= 0.0 && w.at_s <= 3600.0) {
                return bad("second_wave.at_s", "between 0 and 3600 seconds", &w.at_s);
            }
            if !(w.window_s > 0.0 && w.window_s <= 3600.0) {
                return bad(
                    "second_wave.window_s",
                    "more than 0 and at most 3600 seconds",
                    &w.window_s,
                );
            }
        }
        if !(1..=600_000).contains(&self.client.timeout_ms) {
            return bad(
                "client.timeout_ms",
                "between 1 and 600000",
                &self.client.timeout_ms,
            );
        }
        if self.client.ip_pool == 0 {
            return bad("client.ip_pool", "at least 1", &0);
        }
        for (name, value) in self.shop.values() {
            if let Err(e) = crate::shop::check_knob(name, value) {
                return Err(format!("field `shop.{name}` {e}"));
            }
        }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
name = "t"
[item]
stock = 10
[buyers]
count = 100
arrival = "uniform"
window_s = 2
"#;

    #[test]
    fn a_minimal_scenario_parses_with_defaults() {
        let s = Scenario::parse(MINIMAL).unwrap();
        assert_eq!(s.item.purchase_limit, 1);
        assert_eq!(s.after_order.pay, 1.0);
        assert_eq!(s.client.timeout_ms, 10_000);
    }

    #[test]
    fn an_unknown_field_is_named() {
        let text = MINIMAL.replace("count = 100", "count = 100\ncuont = 3");
        let e = Scenario::parse(&text).unwrap_err();
        assert!(e.contains("cuont"), "{e}");
        assert!(e.contains("count"), "the allowed fields are listed: {e}");
    }

    #[test]
    fn an_unknown_threshold_is_an_error() {
        let e = Scenario::parse(&format!("{MINIMAL}\n[thresholds]\np95_ms = 3\n")).unwrap_err();
        assert!(e.contains("p95_ms") && e.contains("p99_ms"), "{e}");
    }

    #[test]
    fn a_target_table_is_validated_with_field_names() {
        let target = r#"
[target]
view = { method = "GET", path = "/p/{item_id}" }
order = { method = "POST", path = "/buy", body = '{"sku": {item_id}}' }
pay = { method = "POST", path = "/pay/{order_id}" }
cancel = { method = "DELETE", path = "/buy/{order_id}" }
order_id_field = "data.id"
outcomes = [{ status = ["200"], outcome = "created" }]
"#;
        let s = Scenario::parse(&format!("{MINIMAL}{target}")).unwrap();
        assert_eq!(s.mapping().order_id_field, "data.id");
        assert!(s.mapping().setup.is_none());
        let e = Scenario::parse(&format!(
            "{MINIMAL}{}",
            target.replace("\"DELETE\"", "\"ERASE\"")
        ))
        .unwrap_err();
        assert!(e.contains("target.cancel.method"), "{e}");
        let e = Scenario::parse(&format!("{MINIMAL}{target}verb = 1\n")).unwrap_err();
        assert!(e.contains("verb"), "{e}");
        assert_eq!(
            Scenario::parse(MINIMAL).unwrap().mapping(),
            Default::default()
        );
    }

    #[test]
    fn a_bad_range_names_the_field_and_the_allowed_values() {
        let e = Scenario::parse(&MINIMAL.replace("count = 100", "count = 0")).unwrap_err();
        assert!(
            e.contains("buyers.count") && e.contains("between 1 and 200000"),
            "{e}"
        );
        let e = Scenario::parse(&MINIMAL.replace("\"uniform\"", "\"spike\"")).unwrap_err();
        assert!(e.contains("burst") && e.contains("ramp"), "{e}");
        let e = Scenario::parse(&format!("{MINIMAL}\n[after_order]\npay = 0.5\n")).unwrap_err();
        assert!(
            e.contains("after_order") && e.contains("add up to 1"),
            "{e}"
        );
    }
}
