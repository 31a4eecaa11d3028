//! Durations as people write them: with a unit (`10s`, `500ms`, `2m`; humantime). The one
//! reader of every duration flag ([`crate::cli::values::duration`]) and of a scenario's `[shop]`
//! durations; it depends on nothing else in the crate.

use std::time::Duration;

/// A duration with its unit, as humantime reads it: `10s`, `500ms`, `1m 30s`. A bare number is
/// refused with a hint (its unit would be a guess); zero is allowed (each caller checks its own
/// range).
pub fn parse(v: &str) -> Result<Duration, String> {
    let t = v.trim();
    if !t.is_empty() && t.parse::<f64>().is_ok() {
        return Err(format!(
            "{v:?} has no unit: write it with one, e.g. {t}s or {t}ms"
        ));
    }
    humantime::parse_duration(t)
        .map_err(|e| format!("{v:?} is not a duration like 10s, 500ms or 2m ({e})"))
}

/// A duration as [`parse`] reads it back and as messages show it: `500ms`, `15m`, `0s`.
pub fn shown(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
