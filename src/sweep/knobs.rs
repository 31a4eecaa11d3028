//! `--vary KNOB=v1,v2,...`: which knob a sweep varies, which strategies have it, and the
//! scenario at one of its values. A shop knob is any field of [`ShopKnobs`], spelled as its
//! `serve` flag (`pool-size`, `work` with values like `1ms`) or its `[shop]` field
//! (`pool_size`); a duration's old spelling (`work-ms=1,5`, numbers in its unit) still works
//! but is not listed; `rate` is the arrival rate.

use crate::inventory::Strategy;
use crate::shop::ShopKnobs;
use crate::traffic::Scenario;

/// What a sweep varies.
#[derive(Debug, Clone, PartialEq)]
pub enum Knob {
    /// The arrival rate (buyers/s over the scenario's window), the shape kept
    /// ([`crate::capacity::scale`]).
    Rate,
    /// A `[shop]` knob, by its field name as given (`pool_size`, `work`, or a duration's old
    /// `work_ms`).
    Shop(String),
}

/// `--vary`: the knob and its values, as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Vary {
    pub knob: Knob,
    pub values: Vec<String>,
}

/// The strategies that have `field`, when only some do ([`Strategy::knobs`]); `None`: a knob
/// of every strategy.
fn owners(field: &str) -> Option<Vec<Strategy>> {
    let owners: Vec<Strategy> = Strategy::all()
        .iter()
        .copied()
        .filter(|s| s.knobs().contains(&field))
        .collect();
    (!owners.is_empty()).then_some(owners)
}

/// Every knob a sweep may vary, as flags: `rate` and the shop's.
pub fn names() -> Vec<String> {
    let mut v = vec!["rate".to_string()];
    v.extend(shop_fields().iter().map(|f| f.replace('_', "-")));
    v
}

/// The `[shop]` fields a sweep may set (a defect is a testing aid, never swept).
fn shop_fields() -> Vec<String> {
    ShopKnobs::NAMES
        .iter()
        .filter(|k| **k != "defect")
        .map(|k| k.to_string())
        .collect()
}

/// A knob's name: itself, or the duration an old key (`work_ms`) spells.
fn current(field: &str) -> &str {
    ShopKnobs::OLD_KEYS
        .iter()
        .find(|(_, old)| *old == field)
        .map_or(field, |(new, _)| *new)
}

impl Knob {
    /// The flag spelling: `rate`, `pool-size`.
    pub fn flag(&self) -> String {
        match self {
            Knob::Rate => "rate".into(),
            Knob::Shop(f) => f.replace('_', "-"),
        }
    }

    /// The scenario `s` with this knob at `value` (checked: a value out of range names the
    /// knob and its range).
    pub fn apply(&self, s: &Scenario, value: &str) -> anyhow::Result<Scenario> {
        match self {
            Knob::Rate => {
                let rate: f64 = value
                    .trim()
                    .parse()
                    .ok()
                    .filter(|r: &f64| r.is_finite() && *r > 0.0)
                    .ok_or_else(|| {
                        anyhow::anyhow!("--vary rate={value}: a rate is buyers per second above 0")
                    })?;
                Ok(crate::capacity::scale(s, rate, s.buyers.window_s))
            }
            Knob::Shop(field) => {
                let mut fields = match serde_json::to_value(&s.shop)? {
                    serde_json::Value::Object(m) => m,
                    _ => anyhow::bail!("the [shop] knobs are not a table"),
                };
                let parsed: serde_json::Value = serde_json::from_str(value.trim())
                    .unwrap_or_else(|_| serde_json::Value::String(value.trim().to_string()));
                // The table holds a duration under its old key: the new one replaces it.
                if let Some((_, old)) = ShopKnobs::OLD_KEYS
                    .iter()
                    .find(|(new, _)| *new == field.as_str())
                {
                    fields.remove(*old);
                }
                fields.insert(field.clone(), parsed);
                let knobs: ShopKnobs = serde_json::from_value(serde_json::Value::Object(fields))
                    .map_err(|e| {
                        anyhow::anyhow!(
                            "--vary {}={value}: not a value of this knob ({e})",
                            self.flag()
                        )
                    })?;
                knobs
                    .validate()
                    .map_err(|e| anyhow::anyhow!("--vary {}={value}: {e}", self.flag()))?;
                let mut p = s.clone();
                p.shop = knobs;
                Ok(p)
            }
        }
    }
}

impl Vary {
    /// Parses `KNOB=v1,v2,...` for `strategy`: an unknown knob, or one the strategy does not
    /// have, is refused naming the allowed ones.
    pub fn parse(text: &str, strategy: Strategy) -> anyhow::Result<Vary> {
        let (name, values) = text.split_once('=').ok_or_else(|| {
            anyhow::anyhow!(
                "--vary takes KNOB=v1,v2,... (got {text:?}); KNOB is one of {}",
                names().join(", ")
            )
        })?;
        let field = name.trim().replace('-', "_");
        let knob = if field == "rate" {
            Knob::Rate
        } else if shop_fields().iter().any(|f| f.as_str() == current(&field)) {
            Knob::Shop(field.clone())
        } else {
            anyhow::bail!(
                "--vary: unknown knob {:?}; allowed: {}",
                name.trim(),
                names().join(", ")
            );
        };
        if let Some(owners) = owners(current(&field)) {
            anyhow::ensure!(
                owners.contains(&strategy),
                "--vary {}: strategy {strategy} does not have this knob (it concerns {}); \
                 allowed for {strategy}: {}",
                knob.flag(),
                owners
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                names()
                    .into_iter()
                    .filter(|n| owners_of(n).is_none_or(|o| o.contains(&strategy)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let values: Vec<String> = values
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        anyhow::ensure!(
            !values.is_empty(),
            "--vary {}: give at least one value (KNOB=v1,v2,...)",
            knob.flag()
        );
        Ok(Vary { knob, values })
    }
}

fn owners_of(flag: &str) -> Option<Vec<Strategy>> {
    owners(&flag.replace('-', "_"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flash() -> Scenario {
        crate::scenarios::resolve(std::path::Path::new("flash-100"))
            .unwrap()
            .0
    }

    #[test]
    fn a_shop_knob_is_set_by_its_flag_spelling_and_checked() {
        let v = Vary::parse("pool-size=2,8", Strategy::ForUpdate).unwrap();
        assert_eq!(v.knob, Knob::Shop("pool_size".into()));
        assert_eq!(v.values, ["2", "8"]);
        let s = v.knob.apply(&flash(), "2").unwrap();
        assert_eq!(s.shop.pool_size, 2);
        assert_eq!(s.shop.work, flash().shop.work, "the rest is kept");
        let e = v.knob.apply(&flash(), "0").unwrap_err().to_string();
        assert!(
            e.contains("--pool-size") && e.contains("between 1 and 1000"),
            "{e}"
        );
    }

    #[test]
    fn a_knob_the_strategy_lacks_or_an_unknown_one_is_refused_with_the_allowed() {
        let e = Vary::parse("batch-max=1,2", Strategy::ForUpdate)
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not have") && e.contains("batched"), "{e}");
        assert!(e.contains("pool-size") && !e.contains("batch-max,"), "{e}");
        let e = Vary::parse("pool=1", Strategy::ForUpdate)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown knob") && e.contains("pool-size"), "{e}");
    }

    #[test]
    fn a_duration_is_varied_with_units_or_by_its_old_spelling() {
        let v = Vary::parse("work=1ms,20ms", Strategy::ForUpdate).unwrap();
        assert_eq!(v.knob, Knob::Shop("work".into()));
        let s = v.knob.apply(&flash(), "20ms").unwrap();
        assert_eq!(s.shop.work, std::time::Duration::from_millis(20));
        let e = v.knob.apply(&flash(), "20").unwrap_err().to_string();
        assert!(e.contains("--vary work=20") && e.contains("20ms"), "{e}");
        let e = v.knob.apply(&flash(), "2h").unwrap_err().to_string();
        assert!(e.contains("between 0s and 1m"), "{e}");
        let old = Vary::parse("work-ms=20", Strategy::ForUpdate).unwrap();
        assert_eq!(old.knob.apply(&flash(), "20").unwrap().shop, s.shop);
        assert!(Vary::parse("work-ms=20", Strategy::Naive).is_err());
        assert!(names().contains(&"work".to_string()));
        assert!(!names().contains(&"work-ms".to_string()));
    }

    #[test]
    fn every_knob_a_strategy_owns_is_a_shop_knob() {
        for s in Strategy::all() {
            for k in s.knobs() {
                assert!(shop_fields().iter().any(|f| f == k), "{s}: {k}");
            }
        }
        assert_eq!(
            owners("work"),
            Some(vec![
                Strategy::ForUpdate,
                Strategy::ForUpdateQueued,
                Strategy::Optimistic
            ])
        );
        assert_eq!(
            owners("consumers"),
            Some(vec![Strategy::RedisLua, Strategy::RedisBuckets])
        );
        assert_eq!(owners("pool_size"), None);
    }

    #[test]
    fn rate_scales_the_scenario_over_its_own_window() {
        let v = Vary::parse("rate=100", Strategy::Naive).unwrap();
        let s = v.knob.apply(&flash(), "100").unwrap();
        assert_eq!(s.buyers.count, 6000);
        assert_eq!(s.buyers.window_s, 60.0);
        assert!(v.knob.apply(&flash(), "-1").is_err());
    }
}
