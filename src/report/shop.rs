//! Whose shop a run fired at, as the shop under test describes itself: its name, what stands
//! beside it, what the buyers were fired at, and the strategy of ours it ran, if any. The
//! report reads these fields; it never asks which kind of shop it was.
//!
//! In the report's JSON the description keeps the typed form every report since v2 carries
//! (`"shop": "reference"` with `strategy` and `backend`, or `"shop": "foreign"` with `host`,
//! `url` and `oracle`), so older reports read unchanged and `diff` compares across them.

use crate::inventory::Strategy;
use crate::store::Backend;
use clap::ValueEnum as _;
use serde::{Deserialize, Serialize};

/// What the reference shop is called as the target of a run.
const REFERENCE_TARGET: &str = "reference shop";

/// The colour of a run that ran no strategy of ours, in every chart.
const OTHER_COLOUR: (u8, u8, u8) = (0x7f, 0x7f, 0x7f);

/// A run's shop, described by the shop under test itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Wire", try_from = "Wire")]
pub struct Shop {
    /// The run's name in tables, charts and file names: the strategy's, or the target's
    /// `host[:port]`.
    pub name: String,
    /// What stands beside the name: the backend, or which oracle audited the target.
    pub detail: String,
    /// What the buyers were fired at: [`REFERENCE_TARGET`], or the target's URL, credentials
    /// masked.
    pub target: String,
    /// The strategy of ours the shop ran, when it ran one (its colour, its facts).
    pub strategy: Option<Strategy>,
}

impl Shop {
    /// The reference shop running `strategy` on `backend`.
    pub fn strategy_on(strategy: Strategy, backend: Backend) -> Self {
        Shop {
            name: strategy.as_str().into(),
            detail: backend.as_str().into(),
            target: REFERENCE_TARGET.into(),
            strategy: Some(strategy),
        }
    }

    /// The run's colour in every chart ([`colour_of`] its strategy).
    pub fn colour(&self) -> (u8, u8, u8) {
        colour_of(self.strategy)
    }
}

/// The colour of a shop that ran `strategy` in every chart: the strategy's own
/// ([`Strategy::colour`]), or grey for a shop that ran none of ours.
pub fn colour_of(strategy: Option<Strategy>) -> (u8, u8, u8) {
    strategy.map_or(OTHER_COLOUR, Strategy::colour)
}

/// The oracle a shop's run was audited by, when the shop is not ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OracleKind {
    None,
    Sql,
    Http,
}

impl OracleKind {
    const ALL: [OracleKind; 3] = [OracleKind::None, OracleKind::Sql, OracleKind::Http];

    /// How labels and file names spell it: `sql oracle`.
    pub fn as_str(self) -> &'static str {
        match self {
            OracleKind::None => "no oracle",
            OracleKind::Sql => "sql oracle",
            OracleKind::Http => "http oracle",
        }
    }
}

/// The description as the report's JSON spells it.
#[derive(Serialize, Deserialize)]
#[serde(tag = "shop", rename_all = "snake_case")]
enum Wire {
    Reference {
        strategy: Strategy,
        backend: String,
    },
    Foreign {
        host: String,
        url: String,
        oracle: OracleKind,
    },
}

impl From<Shop> for Wire {
    fn from(s: Shop) -> Self {
        match s.strategy {
            Some(strategy) => Wire::Reference {
                strategy,
                backend: s.detail,
            },
            None => Wire::Foreign {
                oracle: OracleKind::ALL
                    .into_iter()
                    .find(|o| o.as_str() == s.detail)
                    .unwrap_or(OracleKind::None),
                host: s.name,
                url: s.target,
            },
        }
    }
}

impl TryFrom<Wire> for Shop {
    type Error = String;

    fn try_from(w: Wire) -> Result<Self, String> {
        match w {
            Wire::Reference { strategy, backend } => {
                let backend = Backend::value_variants()
                    .iter()
                    .copied()
                    .find(|b| b.as_str() == backend)
                    .ok_or_else(|| format!("unknown backend {backend:?}"))?;
                Ok(Shop::strategy_on(strategy, backend))
            }
            Wire::Foreign { host, url, oracle } => Ok(Shop {
                name: host,
                detail: oracle.as_str().into(),
                target: url,
                strategy: None,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_descriptions_keep_their_json() {
        let ours = Shop::strategy_on(Strategy::ForUpdate, Backend::Mysql);
        let json = serde_json::to_value(&ours).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"shop": "reference", "strategy": "for-update", "backend": "mysql"})
        );
        assert_eq!(serde_json::from_value::<Shop>(json).unwrap(), ours);
        let theirs = serde_json::json!(
            {"shop": "foreign", "host": "127.0.0.1:9000", "url": "http://127.0.0.1:9000", "oracle": "http"}
        );
        let read: Shop = serde_json::from_value(theirs.clone()).unwrap();
        assert_eq!(
            (read.name.as_str(), read.detail.as_str()),
            ("127.0.0.1:9000", "http oracle")
        );
        assert_eq!(read.colour(), OTHER_COLOUR);
        assert_eq!(serde_json::to_value(&read).unwrap(), theirs);
        let bad =
            serde_json::json!({"shop": "reference", "strategy": "naive", "backend": "oracle"});
        assert!(serde_json::from_value::<Shop>(bad).is_err());
    }
}
