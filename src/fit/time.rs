//! The times an access log holds, read into microseconds since the Unix epoch: nginx's
//! `$time_local` (`06/Dec/2026:01:55:28 +0000`, the combined format's, with an optional
//! fraction as Apache's `%{msec_frac}t` writes it), `$time_iso8601` / RFC 3339
//! (`2026-12-06T01:55:28.250+00:00`) and `$msec` (epoch seconds, `1796522128.250`; 13 digits
//! are read as epoch milliseconds). `--sale-start` and `--sale-end` take the same forms.

use chrono::DateTime;

/// A time read from the log: microseconds since the epoch, and whether it had a fraction of a
/// second (a log of whole seconds cannot tell think times below a second).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub micros: i64,
    pub fraction: bool,
}

/// What a time may look like, for error messages.
pub const FORMS: &str = "06/Dec/2026:01:55:28 +0000 (nginx $time_local, a fraction allowed), \
                         2026-12-06T01:55:28.250+00:00 (RFC 3339, nginx $time_iso8601) or \
                         1796522128.250 (epoch seconds, nginx $msec)";

/// Reads one time in any of the [`FORMS`].
pub fn parse(text: &str) -> Option<Stamp> {
    let t = text.trim().trim_start_matches('[').trim_end_matches(']');
    if t.is_empty() {
        return None;
    }
    if t.bytes().next().is_some_and(|b| b.is_ascii_digit()) && !t.contains(['-', '/', ':']) {
        return epoch(t);
    }
    let (dt, fraction) = if t.contains('/') {
        let dt = DateTime::parse_from_str(t, "%d/%b/%Y:%H:%M:%S%.f %z").ok()?;
        (dt, t.split(' ').next().is_some_and(|s| s.contains('.')))
    } else {
        let dt = DateTime::parse_from_rfc3339(t).ok()?;
        (dt, t.contains('.'))
    };
    Some(Stamp {
        micros: dt.timestamp_micros(),
        fraction,
    })
}

/// Epoch seconds with an optional fraction, or 13-digit epoch milliseconds.
fn epoch(t: &str) -> Option<Stamp> {
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let n: i64 = whole.parse().ok()?;
    if frac.is_empty() && whole.len() == 13 {
        return Some(Stamp {
            micros: n.checked_mul(1000)?,
            fraction: true,
        });
    }
    let digits: String = frac.chars().chain("000000".chars()).take(6).collect();
    let micros: i64 = digits.parse().ok()?;
    Some(Stamp {
        micros: n.checked_mul(1_000_000)?.checked_add(micros)?,
        fraction: !frac.is_empty(),
    })
}

/// A time given on the command line (`--sale-start`, `--sale-end`).
pub fn arg(v: &str) -> Result<i64, String> {
    parse(v)
        .map(|s| s.micros)
        .ok_or_else(|| format!("{v:?} is not a time this reads: give {FORMS}"))
}

/// Microseconds since the epoch as RFC 3339 in UTC, to the millisecond.
pub fn show(micros: i64) -> String {
    DateTime::from_timestamp_micros(micros)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| format!("{micros} µs after the epoch"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: i64 = 1_796_519_128_000_000;

    #[test]
    fn every_form_of_one_instant_reads_the_same() {
        let whole = Stamp {
            micros: AT,
            fraction: false,
        };
        let quarter = Stamp {
            micros: AT + 250_000,
            fraction: true,
        };
        assert_eq!(parse("06/Dec/2026:01:05:28 +0000"), Some(whole));
        assert_eq!(parse("[06/Dec/2026:02:05:28 +0100]"), Some(whole));
        assert_eq!(parse("06/Dec/2026:01:05:28.250 +0000"), Some(quarter));
        assert_eq!(parse("2026-12-06T01:05:28+00:00"), Some(whole));
        assert_eq!(parse("2026-12-06T01:05:28.25Z"), Some(quarter));
        assert_eq!(parse("1796519128"), Some(whole));
        assert_eq!(parse("1796519128.250"), Some(quarter));
        assert_eq!(parse("1796519128250"), Some(quarter));
        assert_eq!(show(AT + 250_000), "2026-12-06T01:05:28.250Z");
    }

    #[test]
    fn what_is_not_a_time_is_refused() {
        for bad in [
            "",
            "yesterday",
            "06/Dec/2026:01:05:28",
            "2026-12-06 01:05:28",
            "17.5.3",
            "-5",
            "99999999999999999999",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert!(arg("noon").unwrap_err().contains("$time_local"));
    }
}
