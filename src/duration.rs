//! Durations as people write them: with a unit (`10s`, `500ms`, `2m`; humantime). The one
//! reader of every duration flag ([`crate::cli::values::duration`]) and of a scenario's `[shop]`
//! durations; it depends on nothing else in the crate.

use std::time::Duration;

/// A duration with its unit, as humantime reads it (`10s`, `500ms`, `1m 30s`) or one decimal
/// number with its unit (`2.5s`, `1.5ms`: the fraction is kept, never truncated). A bare number
/// is refused with a hint (its unit would be a guess), and so is a negative one, or one longer
/// than [`LONGEST`]; zero is allowed (each caller checks its own range).
pub fn parse(v: &str) -> Result<Duration, String> {
    let d = parse_any(v)?;
    if d > LONGEST {
        return Err(format!(
            "{v:?} is longer than a week ({}): nothing oversell waits for takes that long; \
             give a duration like 10s, 500ms or 2m",
            shown(LONGEST)
        ));
    }
    Ok(d)
}

/// The longest duration any flag or file takes: a week (the longest payment window).
pub const LONGEST: Duration = Duration::from_secs(7 * 24 * 3600);

/// [`parse`] without the upper bound.
fn parse_any(v: &str) -> Result<Duration, String> {
    let t = v.trim();
    if !t.is_empty() && t.parse::<f64>().is_ok() {
        return Err(format!(
            "{v:?} has no unit: write it with one, e.g. {t}s or {t}ms"
        ));
    }
    if t.starts_with('-') {
        return Err(format!(
            "{v:?} is negative: a duration is 0 or more, e.g. 10s or 500ms"
        ));
    }
    humantime::parse_duration(t)
        .or_else(|e| decimal(t).ok_or(e))
        .map_err(|e| format!("{v:?} is not a duration like 10s, 500ms or 2m ({e})"))
}

/// One decimal number and its unit (`2.5s`, `0.5ms`, `1.5m`), to the nanosecond.
fn decimal(t: &str) -> Option<Duration> {
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = t.split_at(split);
    let n: f64 = number.parse().ok()?;
    let per = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hr" | "hrs" => 3600.0,
        _ => return None,
    };
    let secs = n * per;
    (secs.is_finite() && secs < 1e12).then(|| Duration::from_secs_f64(secs))
}

/// A duration as [`parse`] reads it back and as messages show it: `500ms`, `15m`, `0s`.
pub fn shown(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// A duration written in a file with its unit (`window = "3s"`, `timeout = "500ms"`), read by
/// [`parse`]. A bare number is refused naming the unit it lacks (TOML gives the line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written(pub Duration);

impl<'de> serde::Deserialize<'de> for Written {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = Written;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration with its unit, as a string: \"3s\", \"500ms\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Written, E> {
                parse(v).map(Written).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Written, E> {
                Err(E::custom(bare(v)))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Written, E> {
                Err(E::custom(bare(v)))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Written, E> {
                Err(E::custom(bare(v)))
            }
        }
        d.deserialize_any(Visit)
    }
}

/// The refusal of a bare number where a duration with its unit belongs.
fn bare(v: impl std::fmt::Display) -> String {
    format!("{v} has no unit: write it as a string with one, e.g. \"{v}s\" or \"{v}ms\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absurd_duration_is_refused_and_a_week_is_not() {
        let e = parse("99999999999999h").unwrap_err();
        assert!(e.contains("longer than a week"), "{e}");
        assert!(parse("8d").is_err());
        assert_eq!(parse("7d"), Ok(LONGEST));
        assert_eq!(parse("168h"), Ok(LONGEST));
    }

    #[test]
    fn durations_need_a_unit_and_read_back_as_shown() {
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1m 30s"), Ok(Duration::from_secs(90)));
        let e = parse("10").unwrap_err();
        assert!(e.contains("10s or 10ms"), "{e}");
        assert!(parse("soon").is_err());
        for d in [0, 1, 1_500_000, 900_000_000_000u64] {
            let d = Duration::from_nanos(d);
            assert_eq!(parse(&shown(d)), Ok(d), "{}", shown(d));
        }
        assert_eq!(shown(Duration::from_secs(900)), "15m");
    }

    #[test]
    fn decimals_keep_their_fraction_and_negatives_are_refused() {
        assert_eq!(parse("2.5s"), Ok(Duration::from_millis(2500)));
        assert_eq!(parse("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse("0.5m"), Ok(Duration::from_secs(30)));
        let e = parse("-1s").unwrap_err();
        assert!(e.contains("negative"), "{e}");
        let e = parse("-3").unwrap_err();
        assert!(e.contains("no unit"), "{e}");
        assert!(parse("2.5 parsecs").is_err());
        assert!(parse("1.2.3s").is_err());
    }
}
