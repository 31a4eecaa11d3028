//! Limits on catalog metrics: a threshold's name and value checked against the metric's unit,
//! the scenario's `[thresholds]` table and the `--threshold NAME=VALUE` flag, parsed into them.

use super::watch::WatchKey;
use super::{Metric, Unit};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

impl Metric {
    /// Checks a limit for this metric: counts are whole and not negative, shares lie in
    /// 0..1, milliseconds and rates are positive.
    fn check_limit(self, value: f64) -> Result<f64, LimitError> {
        let positive = value > 0.0 && value.is_finite();
        let (ok, allowed) = match self.spec().unit {
            u if u.is_count() => (value >= 0.0 && value.fract() == 0.0, "a count of 0 or more"),
            Unit::Share => ((0.0..=1.0).contains(&value), "a share between 0 and 1"),
            Unit::Millis => (positive, "a positive number of milliseconds"),
            Unit::OrdersPerSecond => (positive, "a positive number of orders per second"),
            Unit::BuyersPerSecond => (positive, "a positive rate in buyers per second"),
            _ => (positive, "a positive rate per second"),
        };
        if ok {
            Ok(value)
        } else {
            Err(LimitError::Invalid {
                name: self.name(),
                allowed,
                value,
            })
        }
    }

    /// The metric a threshold name stands for (any catalog name or alias).
    pub fn limitable_named(name: &str) -> Result<Metric, LimitError> {
        Metric::named(name).ok_or_else(|| LimitError::Unknown(name.trim().to_string()))
    }

    /// A threshold (`name`, `value` in the metric's own unit: milliseconds for a latency):
    /// the metric and its checked limit.
    pub fn limit(name: &str, value: f64) -> Result<(Metric, f64), LimitError> {
        let metric = Metric::limitable_named(name)?;
        Ok((metric, metric.check_limit(value)?))
    }

    /// A limit given as a bare number under `name`: a duration metric takes one only under an
    /// older name that carries its unit (`p99_ms = 500`, `latency_p99`); its own name needs
    /// the unit written (`p99 = "500ms"`), as every duration does.
    fn bare(self, name: &str, value: f64) -> Result<f64, LimitError> {
        if self.spec().unit == Unit::Millis && name.trim() == self.name() {
            return Err(LimitError::NeedsUnit {
                name: self.name(),
                value: value.to_string(),
            });
        }
        Ok(value)
    }

    /// A limit's value as written after `name=`: a number, or with its unit — a duration for
    /// a latency (`500ms`, `1.5s`), a percentage for a share (`1%`).
    fn written(self, name: &str, text: &str) -> Result<f64, LimitError> {
        let t = text.trim();
        if let Ok(v) = t.parse::<f64>() {
            return self.bare(name, v);
        }
        let not_a_number = || LimitError::NotANumber {
            name: name.trim().to_string(),
            value: text.to_string(),
        };
        match self.spec().unit {
            Unit::Millis => crate::duration::parse(t)
                .map(|d| d.as_secs_f64() * 1000.0)
                .map_err(|why| LimitError::BadDuration {
                    name: self.name(),
                    why,
                }),
            Unit::Share => t
                .strip_suffix('%')
                .and_then(|p| p.trim().parse::<f64>().ok())
                .map(|p| p / 100.0)
                .ok_or_else(not_a_number),
            _ => Err(not_a_number()),
        }
    }

    /// A limit written as text (`--threshold`, `--slo`, a string in `[thresholds]`): the
    /// metric's value, checked.
    pub fn limit_written(name: &str, text: &str) -> Result<(Metric, f64), LimitError> {
        let metric = Metric::limitable_named(name)?;
        Ok((metric, metric.check_limit(metric.written(name, text)?)?))
    }
}

/// The names thresholds accept (the whole catalog), comma-separated.
pub fn limitable_names() -> String {
    Metric::ALL
        .iter()
        .map(|m| m.name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `gate --help` says of `--threshold`: every name it takes, from the catalog.
pub fn threshold_help() -> String {
    let at_least: Vec<&str> = Metric::ALL
        .iter()
        .filter(|m| m.bound() == ">=")
        .map(|m| m.name())
        .collect();
    format!(
        "A limit, overriding the scenario: NAME=VALUE, repeatable; the run's figure must be at \
         most VALUE (at least, for {}). A latency takes its unit (p99=500ms), a share a \
         fraction or a percentage (error_rate=0.01, error_rate=1%). A limit given here that \
         the run cannot measure is not verified. NAME is one of {}, or watch.<name>.max and \
         watch.<name>.drained_within_s for a gauge of the scenario's [watch].",
        at_least.join(", "),
        limitable_names(),
    )
}

/// A threshold that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LimitError {
    #[error(
        "unknown threshold `{0}`{near}; allowed: {names}",
        near = Metric::did_you_mean(.0),
        names = limitable_names()
    )]
    Unknown(String),
    #[error("threshold `{name}` must be {allowed} (got {value})")]
    Invalid {
        name: &'static str,
        allowed: &'static str,
        value: f64,
    },
    #[error("expected NAME=VALUE (NAME one of {names}), got {0:?}", names = limitable_names())]
    NotAPair(String),
    #[error("threshold `{name}` needs a number, got {value:?}")]
    NotANumber { name: String, value: String },
    /// A latency limit without its unit under the metric's own name.
    #[error(
        "threshold `{name}` is a duration: write its unit, e.g. {name}={value}ms or \
         {name}={value}s (got {value:?} without one)"
    )]
    NeedsUnit { name: &'static str, value: String },
    /// A latency limit whose duration does not read.
    #[error("threshold `{name}`: {why}")]
    BadDuration { name: &'static str, why: String },
    /// A `watch.` threshold that is not `watch.<name>.<figure>`, or a value it cannot take.
    #[error("threshold `{name}` must be {allowed}")]
    BadWatch { name: String, allowed: String },
}

/// The limits a scenario's `[thresholds]` table sets, parsed when the file is read: unknown
/// names and values out of range are refused there, naming the threshold and what is allowed.
/// Limits on watched gauges (`watch.pool.max = 40`: TOML reads the dotted key as nested
/// tables; `"watch.pool.max" = 40` works too) are kept apart, by gauge.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Thresholds(BTreeMap<Metric, f64>, BTreeMap<WatchKey, f64>);

impl Thresholds {
    /// The limits set on watched gauges.
    pub fn watch(&self) -> &BTreeMap<WatchKey, f64> {
        &self.1
    }

    /// Sets a limit on a watched gauge (checked).
    pub fn set_watch(&mut self, key: WatchKey, value: f64) -> Result<(), LimitError> {
        let v = key.check(value)?;
        self.1.insert(key, v);
        Ok(())
    }

    /// The limit set for `metric`, if any.
    pub fn get(&self, metric: Metric) -> Option<f64> {
        self.0.get(&metric).copied()
    }

    /// Sets a limit (checked).
    pub fn set(&mut self, name: &str, value: f64) -> Result<Metric, LimitError> {
        let (metric, value) = Metric::limit(name, value)?;
        self.0.insert(metric, value);
        Ok(metric)
    }

    /// The send-lag p99 bound (ms) declared (`send_lag_p99_ms`, `--max-send-lag`): above it
    /// a run is generator-bound. `None`: none declared, and none is assumed.
    pub fn max_send_lag_ms(&self) -> Option<f64> {
        self.get(Metric::SendLagP99Ms)
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty() && self.1.is_empty()
    }
}

impl Serialize for Thresholds {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len() + self.1.len()))?;
        for (m, v) in &self.0 {
            if m.spec().unit.is_count() {
                map.serialize_entry(&m.key(), &(*v as i64))?;
            } else {
                map.serialize_entry(&m.key(), v)?;
            }
        }
        for (k, v) in &self.1 {
            map.serialize_entry(&k.name(), v)?;
        }
        map.end()
    }
}

/// A number in a TOML or JSON table; `null` (v1 reports wrote unset limits as null) is none.
struct Number(Option<f64>);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Number, E> {
                Ok(Number(Some(v as f64)))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Number, E> {
                Ok(Number(Some(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Number, E> {
                Ok(Number(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Number, D::Error> {
                Number::deserialize(d)
            }
        }
        d.deserialize_any(V)
    }
}

/// A limit in a TOML or JSON table: a number, or text with its unit (`"500ms"`, `"1%"`).
enum Value {
    Number(Number),
    Text(String),
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, or a value with its unit (\"500ms\", \"1%\")")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Number(Number(Some(v as f64))))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::Number(Number(Some(v as f64))))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Number(Number(Some(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Text(v.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Number(Number(None)))
            }
            fn visit_none<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Number(Number(None)))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
                Value::deserialize(d)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Thresholds {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Thresholds;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a table of limits ({})", limitable_names())
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Thresholds, A::Error> {
                let mut t = Thresholds::default();
                while let Some(name) = map.next_key::<String>()? {
                    if name.trim() == "watch" {
                        // `watch.pool.max = 40`: TOML's dotted key, nested tables.
                        let gauges: BTreeMap<String, BTreeMap<String, Number>> =
                            map.next_value()?;
                        for (gauge, figures) in gauges {
                            for (figure, Number(v)) in figures {
                                let name = format!("watch.{gauge}.{figure}");
                                t.watch_entry(&name, v).map_err(de::Error::custom)?;
                            }
                        }
                        continue;
                    }
                    if WatchKey::parse(&name).is_some() {
                        let Number(v) = map.next_value()?;
                        t.watch_entry(&name, v).map_err(de::Error::custom)?;
                        continue;
                    }
                    let metric = Metric::limitable_named(&name).map_err(de::Error::custom)?;
                    let value = match map.next_value()? {
                        Value::Number(Number(Some(v))) => metric.bare(&name, v),
                        Value::Number(Number(None)) => continue,
                        Value::Text(text) => metric.written(&name, &text),
                    };
                    let v = value
                        .and_then(|v| metric.check_limit(v))
                        .map_err(de::Error::custom)?;
                    t.0.insert(metric, v);
                }
                Ok(t)
            }
        }
        d.deserialize_map(V)
    }
}

impl Thresholds {
    /// A `watch.<name>.<figure>` entry of `[thresholds]` (`None`: a null, no limit).
    fn watch_entry(&mut self, name: &str, value: Option<f64>) -> Result<(), LimitError> {
        let key = WatchKey::parse(name).unwrap_or_else(|| {
            Err(LimitError::BadWatch {
                name: name.into(),
                allowed: "watch.<name>.max or watch.<name>.drained_within_s".into(),
            })
        })?;
        match value {
            Some(v) => self.set_watch(key, v),
            None => Ok(()),
        }
    }
}

/// A `--threshold NAME=VALUE` flag, parsed like a `[thresholds]` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Override {
    pub metric: Metric,
    pub value: f64,
    /// A limit on a watched gauge (`watch.pool.max=40`): which gauge and figure; `metric` is
    /// then the figure's ([`Metric::WatchMax`] or [`Metric::WatchDrainedWithinS`]).
    pub watch: Option<WatchKey>,
}

impl FromStr for Override {
    type Err = LimitError;

    fn from_str(s: &str) -> Result<Self, LimitError> {
        let (name, value) = s
            .split_once('=')
            .ok_or_else(|| LimitError::NotAPair(s.to_string()))?;
        let number = |name: &str| -> Result<f64, LimitError> {
            value.trim().parse().map_err(|_| LimitError::NotANumber {
                name: name.trim().to_string(),
                value: value.to_string(),
            })
        };
        if let Some(key) = WatchKey::parse(name) {
            let key = key?;
            let value = key.check(number(name)?)?;
            return Ok(Override {
                metric: key.figure.metric(),
                value,
                watch: Some(key),
            });
        }
        let (metric, value) = Metric::limit_written(name, value)?;
        Ok(Override {
            metric,
            value,
            watch: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_thresholds_are_the_ones_users_script_against() {
        assert_eq!(
            limitable_names(),
            "oversell, oversold_at_end, peak_oversell, client_oversell, client_peak_oversell, \
             stock_peak_oversell, oracle_disagreement, lost_acks, duplicate_acks, \
             duplicate_orders_per_key, phantom_orders, indeterminate_committed, \
             refused_committed, dead_letters, duplicate_buyers, duplicate_devices, \
             client_duplicate_buyers, client_duplicate_devices, status_mismatches, \
             wrong_answers, conservation_drift, redis_drift, restock_mismatch, \
             reconcile_residual, stock_below_zero, stock_above_initial, not_settled, \
             nothing_sold, undersell, turned_away_buyers, error_rate, unclassified, \
             login_failures, mean, p50, p99, p999, service_p99, send_lag_p99, late_sends, \
             db_qps_peak, throughput, capacity_rps"
        );
        assert_eq!(
            Metric::limit("max_send_lag_ms", 20.0),
            Ok((Metric::SendLagP99Ms, 20.0)),
            "the flag's spelling works in [thresholds] too"
        );
        assert!(Metric::limit("send_lag_p99_ms", 0.0).is_err());
        assert_eq!(
            Metric::limit("latency_mean", 3.0),
            Ok((Metric::MeanMs, 3.0)),
            "every name diff --fail-on takes, aliases included"
        );
        assert!(Metric::limit("throughput", 0.0).is_err());
        assert!(Metric::limit("db_qps_peak", -1.0).is_err());
    }

    #[test]
    fn latency_thresholds_take_units_and_the_old_ms_names_bare_numbers() {
        let o: Override = "p99=500ms".parse().unwrap();
        assert_eq!((o.metric, o.value), (Metric::P99Ms, 500.0));
        let o: Override = "p99=1.5s".parse().unwrap();
        assert_eq!(o.value, 1500.0);
        let o: Override = "p99_ms=500".parse().unwrap();
        assert_eq!((o.metric, o.value), (Metric::P99Ms, 500.0));
        let o: Override = "p99_ms=500ms".parse().unwrap();
        assert_eq!(o.value, 500.0);
        let o: Override = "latency_p99=250".parse().unwrap();
        assert_eq!(o.value, 250.0);
        let e = "p99=500".parse::<Override>().unwrap_err().to_string();
        assert!(e.contains("p99=500ms"), "{e}");
        let e = "p99=soon".parse::<Override>().unwrap_err().to_string();
        assert!(e.contains("threshold `p99`"), "{e}");
        let o: Override = "error_rate=1%".parse().unwrap();
        assert!((o.value - 0.01).abs() < 1e-12);
        let o: Override = "error_rate=0.01".parse().unwrap();
        assert!((o.value - 0.01).abs() < 1e-12);
        assert!("oversell=1ms".parse::<Override>().is_err());
        let t: Thresholds =
            toml::from_str("p99 = \"500ms\"\nmean_ms = 20\nerror_rate = \"2%\"\n").unwrap();
        assert_eq!(t.get(Metric::P99Ms), Some(500.0));
        assert_eq!(t.get(Metric::MeanMs), Some(20.0));
        assert_eq!(t.get(Metric::ErrorRate), Some(0.02));
        let e = toml::from_str::<Thresholds>("p99 = 500")
            .unwrap_err()
            .to_string();
        assert!(e.contains("write its unit"), "{e}");
        // A report's JSON keeps each latency's unit in its key.
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains("\"p99_ms\":500.0"), "{json}");
        assert_eq!(serde_json::from_str::<Thresholds>(&json).unwrap(), t);
    }

    #[test]
    fn a_thresholds_table_round_trips_and_skips_nulls() {
        let t: Thresholds =
            serde_json::from_str(r#"{"oversell": 0, "p99_ms": 3000.0, "undersell": null}"#)
                .unwrap();
        assert_eq!(t.get(Metric::Oversell), Some(0.0));
        assert_eq!(t.get(Metric::Undersell), None);
        let back: Thresholds = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(back, t);
        let e = serde_json::from_str::<Thresholds>(r#"{"error_rate": 2}"#).unwrap_err();
        assert!(e.to_string().contains("a share between 0 and 1"), "{e}");
    }

    #[test]
    fn watch_limits_are_read_from_dotted_keys_quoted_keys_and_flags() {
        let t: Thresholds = toml::from_str(
            "oversell = 0\nwatch.pool.max = 40\n\"watch.queue.drained_within_s\" = 12.5\n",
        )
        .unwrap();
        let pool = WatchKey::parse("watch.pool.max").unwrap().unwrap();
        let queue = WatchKey::parse("watch.queue.drained_within_s")
            .unwrap()
            .unwrap();
        assert_eq!(t.watch().get(&pool), Some(&40.0));
        assert_eq!(t.watch().get(&queue), Some(&12.5));
        assert_eq!(t.get(Metric::Oversell), Some(0.0));
        let json = serde_json::to_string(&t).unwrap();
        assert!(json.contains("\"watch.pool.max\":40"), "{json}");
        let back: Thresholds = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        let e = toml::from_str::<Thresholds>("watch.pool.peak = 1").unwrap_err();
        assert!(e.to_string().contains("watch.<name>.max"), "{e}");
        let e = toml::from_str::<Thresholds>("watch.q.drained_within_s = -1").unwrap_err();
        assert!(e.to_string().contains("0 or more"), "{e}");
        let o: Override = "watch.pool.max=40".parse().unwrap();
        assert_eq!(
            (o.metric, o.value, o.watch),
            (Metric::WatchMax, 40.0, Some(pool))
        );
        assert!("watch.pool.max=x".parse::<Override>().is_err());
        assert!("watch.pool=1".parse::<Override>().is_err());
    }
}
