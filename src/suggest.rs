//! "Did you mean …": the allowed name closest to one a user mistyped, by Jaro–Winkler
//! similarity (the measure clap's own suggestions use). Depends on nothing else in the crate.

/// How alike two names must be (0..1) before one is suggested for the other.
const MIN_SIMILARITY: f64 = 0.8;

/// The candidate most like `given`, if any is alike enough.
pub fn closest<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let given = given.trim().to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&given, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= MIN_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// `" (did you mean `NAME`?)"` for the closest candidate, or nothing.
pub fn did_you_mean<'a>(given: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(given, candidates)
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_near_miss_is_suggested_and_a_stranger_is_not() {
        let names = ["p99_ms", "p999_ms", "oversell", "lost_acks"];
        assert_eq!(closest("p95_ms", names), Some("p99_ms"));
        assert_eq!(closest("oversel", names), Some("oversell"));
        assert_eq!(closest("LOST_ACKS", names), Some("lost_acks"));
        assert_eq!(closest("throughput", names), None);
        assert_eq!(did_you_mean("zzz", names), "");
        assert_eq!(
            did_you_mean("lost_ack", names),
            " (did you mean `lost_acks`?)"
        );
    }
}
