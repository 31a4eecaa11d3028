//! The run's shop processes when there are several (`--shops K`): how the buyers were spread
//! over them and what each one answered and applied, from each shop's own `/metrics`.

use serde::{Deserialize, Serialize};

/// Where a figure of [`ShopSpread`] comes from (written into the report next to it).
pub const SOURCE: &str = "each shop's own /metrics, read after the drain: \
    oversell_http_requests_total on the buyers' routes (product page, order, pay, cancel) and \
    oversell_persisted_events_total; the consumer group from XINFO CONSUMERS";

/// The K shops of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShopSpread {
    /// How many shop processes served the run (K).
    pub count: u32,
    /// How the buyers were spread: `buyer i -> shop i mod K`.
    pub rule: String,
    /// Where the figures come from.
    pub source: String,
    pub shops: Vec<ShopShare>,
    /// redis-lua: consumers in the item's consumer group at the end of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_consumers: Option<u64>,
}

/// One shop process of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShopShare {
    /// 1 to K; shop 1 set the sale up and ran the final reconciliation.
    pub shop: u32,
    pub url: String,
    /// Buyers of the seeded schedule sent to this shop.
    pub buyers: u64,
    /// Buyers' requests this shop answered, by its own counter (`None`: its /metrics did not
    /// answer).
    pub requests_answered: Option<u64>,
    /// redis-lua: stream events its persistence consumer applied to the database.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persisted_events: Option<u64>,
    /// redis-lua: its consumer's name in the item's group (`None`: not in the group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<String>,
}

impl ShopSpread {
    /// One line for the report's details: `3 shops (buyer i -> shop i mod 3): shop 1 ...`.
    pub fn line(&self) -> String {
        let each: Vec<String> = self
            .shops
            .iter()
            .map(|s| {
                let answered = s
                    .requests_answered
                    .map_or("n/a".to_string(), |n| n.to_string());
                let applied = s
                    .persisted_events
                    .map(|n| format!(", applied {n} events"))
                    .unwrap_or_default();
                format!(
                    "shop {} {} buyers, answered {answered} requests{applied}",
                    s.shop, s.buyers
                )
            })
            .collect();
        let group = self
            .group_consumers
            .map(|n| format!("; {n} consumers in the group"))
            .unwrap_or_default();
        format!(
            "{} shops ({}): {}{group} (source: {})",
            self.count,
            self.rule,
            each.join("; "),
            self.source
        )
    }
}
