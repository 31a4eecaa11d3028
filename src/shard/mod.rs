//! Sharded generation: `--shard i/N` sends one deterministic part of the seeded schedule
//! (the buyers whose index is `i` modulo `N`), so N processes together send exactly the
//! single-process schedule; `--open-at` is the shared instant all of them open the sale at
//! (the clock is the only coordination). Each shard writes its raw results
//! ([`file::ShardFile`], `oversell.shard/v1`), and `oversell merge` combines them
//! ([`combine`]) before the oracle runs once.
//!
//! - `file`: the shard file (histograms in HdrHistogram's V2 deflate encoding, base64; the
//!   clients' records) and its interval log.
//! - `combine`: the checks that N shard files are one sale, and the lossless merge.
//! - `records`: the file's clients' records, spelled out in it, compact in memory.

pub mod combine;
pub mod file;
pub mod records;

use crate::traffic::schedule::Schedule;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Shard `index` of `count` (`--shard i/N`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardSpec {
    pub index: u32,
    pub count: u32,
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for ShardSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!("--shard takes i/N with N ≥ 1 and 0 ≤ i < N, e.g. 0/4 (got {s:?}: {why})")
        };
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad("no '/' between i and N"))?;
        let index: u32 = i
            .trim()
            .parse()
            .map_err(|_| bad("i is not a whole number"))?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| bad("N is not a whole number"))?;
        if count == 0 {
            return Err(bad("N must be at least 1"));
        }
        if index >= count {
            return Err(bad("i must be below N"));
        }
        Ok(ShardSpec { index, count })
    }
}

impl ShardSpec {
    /// The only shard of a single-process run.
    pub const WHOLE: ShardSpec = ShardSpec { index: 0, count: 1 };

    /// This shard's buyers of `plan`, in schedule order (each keeps its schedule index): the
    /// buyers whose index is this shard's modulo the count ([`Schedule::share`]).
    pub fn take(&self, plan: &Schedule) -> Schedule {
        plan.share(self.index as usize, self.count as usize)
    }

    /// Whether this shard sets the sale up (shard 0 does).
    pub fn sets_up(&self) -> bool {
        self.index == 0
    }
}

/// The furthest ahead `--open-at` may be.
pub const OPEN_AT_HORIZON: chrono::Duration = chrono::Duration::hours(24);

/// Parses `--open-at`: an RFC 3339 instant (`2026-11-30T17:00:00Z`), not in the past and at
/// most 24 h ahead of `now`.
pub fn parse_open_at(s: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let at = DateTime::parse_from_rfc3339(s.trim())
        .map_err(|e| {
            format!(
                "--open-at takes an RFC 3339 UTC instant such as 2026-11-30T17:00:00Z (got {s:?}: {e})"
            )
        })?
        .with_timezone(&Utc);
    if at <= now {
        return Err(format!(
            "--open-at {s} is in the past (now is {}): give an instant ahead, e.g. `date -u -d '+1 min' +%FT%TZ`",
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ));
    }
    if at - now > OPEN_AT_HORIZON {
        return Err(format!(
            "--open-at {s} is more than 24 h ahead (now is {}): the sale must open within a day",
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ));
    }
    Ok(at)
}

/// clap's parser for `--open-at` (checked against the clock when the command line is read).
pub fn open_at_arg(s: &str) -> Result<DateTime<Utc>, String> {
    parse_open_at(s, Utc::now())
}

/// A stable 64-bit FNV-1a hash of the scenario as it was read (its canonical JSON), in hex:
/// shards of one sale must agree on it.
pub fn scenario_hash(s: &crate::traffic::Scenario) -> String {
    let json = serde_json::to_vec(s).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in json {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_specs_parse_and_refuse_clearly() {
        assert_eq!(
            "2/4".parse::<ShardSpec>(),
            Ok(ShardSpec { index: 2, count: 4 })
        );
        assert_eq!("0/1".parse::<ShardSpec>(), Ok(ShardSpec::WHOLE));
        for (bad, why) in [
            ("4/4", "i must be below N"),
            ("0/0", "N must be at least 1"),
            ("1", "no '/'"),
            ("a/4", "i is not a whole number"),
            ("1/-2", "N is not a whole number"),
        ] {
            let e = bad.parse::<ShardSpec>().unwrap_err();
            assert!(e.contains(why) && e.contains("--shard"), "{bad}: {e}");
        }
    }

    #[test]
    fn the_shards_partition_the_schedule() {
        let s = crate::traffic::Scenario::parse(
            "name = \"t\"\n[item]\nstock = 5\n[buyers]\ncount = 103\nseed = 3\narrival = \"uniform\"\nwindow_s = 2\n[bots]\nshare = 0.2\nresubmits = 2\n",
        )
        .unwrap();
        let whole = crate::traffic::schedule::build(&s);
        let mut seen: Vec<_> = (0..4)
            .flat_map(|i| {
                ShardSpec { index: i, count: 4 }
                    .take(&whole)
                    .iter()
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(seen.len(), whole.len());
        seen.sort_by_key(|b| b.index);
        let whole: Vec<_> = whole.iter().collect();
        assert_eq!(seen, whole, "together the shards send exactly the schedule");
    }

    #[test]
    fn open_at_must_be_ahead_and_within_a_day() {
        let now = DateTime::parse_from_rfc3339("2026-11-30T16:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert!(parse_open_at("2026-11-30T16:00:05Z", now).is_ok());
        assert!(parse_open_at("2026-11-30T15:59:59Z", now)
            .unwrap_err()
            .contains("in the past"));
        assert!(parse_open_at("2026-12-01T16:00:01Z", now)
            .unwrap_err()
            .contains("more than 24 h"));
        assert!(parse_open_at("tomorrow", now)
            .unwrap_err()
            .contains("RFC 3339"));
    }
}
