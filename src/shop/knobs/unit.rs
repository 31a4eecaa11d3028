//! The duration knobs' units: each keeps the unit its old spelling named (`work_ms`,
//! `payment_timeout_s`), which is the unit of its range, of its hidden old flag and of its key
//! in `report.json`; the new spellings (`--work 5ms`, `work = "5ms"`) carry their own unit.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The unit a duration knob was written in before it took a unit of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds (`work_ms`, `--work-ms`).
    Ms,
    /// Seconds (`payment_timeout_s`, `--payment-timeout-s`).
    S,
}

impl Unit {
    fn nanos(self) -> u64 {
        match self {
            Unit::Ms => 1_000_000,
            Unit::S => 1_000_000_000,
        }
    }

    /// `n` of this unit.
    pub const fn duration(self, n: u64) -> Duration {
        match self {
            Unit::Ms => Duration::from_millis(n),
            Unit::S => Duration::from_secs(n),
        }
    }

    /// The value name of the hidden old flag in `--help` (`--work-ms <MS>`).
    pub const fn value_name(self) -> &'static str {
        match self {
            Unit::Ms => "MS",
            Unit::S => "S",
        }
    }

    /// The unit's name in an error: `ms`, `s`.
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::S => "s",
        }
    }

    /// An old key's number (`work_ms = 9`, `payment_timeout_s = 0.5`) as a duration, to the
    /// nanosecond; `None` for a negative, infinite or too large one.
    pub fn of_number(self, n: f64) -> Option<Duration> {
        let nanos = n * self.nanos() as f64;
        (nanos.is_finite() && nanos >= 0.0 && nanos < u64::MAX as f64)
            .then(|| Duration::from_nanos(nanos.round() as u64))
    }

    /// `d` counted in this unit, as `report.json` stores it: a whole number when it is one
    /// (what every older reader expects), else a fraction.
    pub fn count(self, d: Duration) -> Count {
        let nanos = d.as_nanos();
        let unit = u128::from(self.nanos());
        match u64::try_from(nanos / unit) {
            Ok(whole) if nanos.is_multiple_of(unit) => Count::Whole(whole),
            _ => Count::Part(nanos as f64 / unit as f64),
        }
    }
}

/// A duration knob in `report.json`: a number of its [`Unit`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Count {
    Whole(u64),
    Part(f64),
}

/// A `[shop]` duration in its new spelling: a string with a unit (`"500ms"`, `"15m"`); a bare
/// number is refused with the hint, as on the command line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Text(pub Duration);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Text;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration with its unit, like \"500ms\" or \"15m\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Text, E> {
                crate::duration::parse(v).map(Text).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Text, E> {
                Err(E::custom(no_unit(&v.to_string())))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Text, E> {
                Err(E::custom(no_unit(&v.to_string())))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Text, E> {
                Err(E::custom(no_unit(&v.to_string())))
            }
        }
        d.deserialize_any(Visitor)
    }
}

fn no_unit(n: &str) -> String {
    format!("{n} has no unit: write it as a string with one, e.g. \"{n}s\" or \"{n}ms\"")
}

/// A `[shop]` duration from its new key (`work = "5ms"`) or its old one (`work_ms = 5`); both
/// is refused naming both, neither is `None` (the default).
pub fn either(
    (new, new_value): (&str, Option<Text>),
    (old, old_value): (&str, Option<f64>),
    unit: Unit,
) -> Result<Option<Duration>, String> {
    match (new_value, old_value) {
        (Some(_), Some(_)) => Err(format!(
            "`{new}` and `{old}` are the same knob (`{old}` is its old spelling, in {}): give \
             one of them",
            unit.name()
        )),
        (Some(Text(d)), None) => Ok(Some(d)),
        (None, Some(n)) => unit.of_number(n).map(Some).ok_or_else(|| {
            format!(
                "`{old}` = {n} is not a duration in {} (write `{new} = \"...\"` with a unit)",
                unit.name()
            )
        }),
        (None, None) => Ok(None),
    }
}

/// `--work 5ms`'s parser: [`crate::duration::parse`], kept as humantime's type so that
/// `--help` shows the default with its unit.
pub fn flag(v: &str) -> Result<humantime::Duration, String> {
    crate::duration::parse(v).map(humantime::Duration::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_number_is_exact_to_the_nanosecond_and_counts_back_the_same() {
        assert_eq!(Unit::Ms.of_number(9.0), Some(Duration::from_millis(9)));
        assert_eq!(Unit::S.of_number(0.5), Some(Duration::from_millis(500)));
        assert_eq!(Unit::Ms.of_number(-1.0), None);
        assert_eq!(Unit::S.of_number(f64::INFINITY), None);
        assert_eq!(Unit::Ms.count(Duration::from_secs(2)), Count::Whole(2000));
        assert_eq!(Unit::S.count(Duration::from_millis(1500)), Count::Part(1.5));
        assert_eq!(
            serde_json::to_string(&Unit::Ms.count(Duration::from_millis(9))).unwrap(),
            "9"
        );
    }
}
