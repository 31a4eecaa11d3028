//! Limits on watched gauges (a scenario's `[watch]`): `watch.<name>.max` (the gauge's peak, at
//! most) and `watch.<name>.drained_within_s` (seconds from its peak back to its pre-sale
//! baseline, at most), in `[thresholds]` (`watch.pool.max = 40`, a dotted key) and
//! `--threshold watch.pool.max=40`. The gauge's name is the user's, so these are not catalog
//! metrics of their own: each names one of two catalog figures ([`Metric::WatchMax`],
//! [`Metric::WatchDrainedWithinS`]) and the gauge.

use super::{LimitError, Metric};

/// What a threshold's name starts with: `watch.`.
pub const PREFIX: &str = "watch.";

/// The figure of a watched gauge a threshold limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WatchFigure {
    /// `max`: the gauge's peak.
    Max,
    /// `drained_within_s`: seconds from its peak until it was back to its baseline.
    DrainedWithinS,
}

impl WatchFigure {
    /// Both, in the order the docs list them.
    pub const ALL: [WatchFigure; 2] = [WatchFigure::Max, WatchFigure::DrainedWithinS];

    /// Its spelling after the gauge's name: `max`, `drained_within_s`.
    pub const fn name(self) -> &'static str {
        match self {
            WatchFigure::Max => "max",
            WatchFigure::DrainedWithinS => "drained_within_s",
        }
    }

    /// The catalog figure it is.
    pub const fn metric(self) -> Metric {
        match self {
            WatchFigure::Max => Metric::WatchMax,
            WatchFigure::DrainedWithinS => Metric::WatchDrainedWithinS,
        }
    }

    fn named(name: &str) -> Option<WatchFigure> {
        WatchFigure::ALL.into_iter().find(|f| f.name() == name)
    }

    /// What a limit on it may be.
    const fn allowed(self) -> &'static str {
        match self {
            WatchFigure::Max => "a finite number (the gauge's peak may be at most this)",
            WatchFigure::DrainedWithinS => "a number of seconds of 0 or more",
        }
    }
}

/// Whether `name` may name a watched gauge: 1 to 40 of `a-z`, `0-9`, `_` and `-`, starting
/// with a letter (no dot: it would split `watch.<name>.max`).
pub fn is_gauge_name(name: &str) -> bool {
    (1..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// What a gauge's name may be, for messages.
pub const GAUGE_NAME_RULE: &str =
    "1 to 40 of a-z, 0-9, '_' and '-', starting with a letter (e.g. pool, queue_backlog)";

/// One watched gauge's threshold: which gauge, which figure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchKey {
    pub gauge: String,
    pub figure: WatchFigure,
}

impl WatchKey {
    /// The key a threshold name stands for: `None` when it does not start with `watch.` (a
    /// catalog name), an error when it does but is not `watch.<name>.<figure>`.
    pub fn parse(name: &str) -> Option<Result<WatchKey, LimitError>> {
        let rest = name.trim().strip_prefix(PREFIX)?;
        let bad = || LimitError::BadWatch {
            name: name.trim().to_string(),
            allowed: format!(
                "watch.<name>.max or watch.<name>.drained_within_s, <name> {GAUGE_NAME_RULE}"
            ),
        };
        let Some((gauge, figure)) = rest.rsplit_once('.') else {
            return Some(Err(bad()));
        };
        Some(match WatchFigure::named(figure) {
            Some(figure) if is_gauge_name(gauge) => Ok(WatchKey {
                gauge: gauge.to_string(),
                figure,
            }),
            _ => Err(bad()),
        })
    }

    /// `watch.pool.max`.
    pub fn name(&self) -> String {
        format!("{PREFIX}{}.{}", self.gauge, self.figure.name())
    }

    /// Checks a limit on it.
    pub fn check(&self, value: f64) -> Result<f64, LimitError> {
        let ok = match self.figure {
            WatchFigure::Max => value.is_finite(),
            WatchFigure::DrainedWithinS => value.is_finite() && value >= 0.0,
        };
        if ok {
            Ok(value)
        } else {
            Err(LimitError::BadWatch {
                name: self.name(),
                allowed: format!("{} (got {value})", self.figure.allowed()),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_threshold_names_are_parsed_and_checked() {
        let k = WatchKey::parse("watch.pool.max").unwrap().unwrap();
        assert_eq!(k.gauge, "pool");
        assert_eq!(k.figure, WatchFigure::Max);
        assert_eq!(k.name(), "watch.pool.max");
        let d = WatchKey::parse(" watch.queue-1.drained_within_s").unwrap();
        assert_eq!(d.unwrap().figure, WatchFigure::DrainedWithinS);
        assert!(WatchKey::parse("p99_ms").is_none(), "a catalog name");
        for bad in [
            "watch.pool",
            "watch.pool.peak",
            "watch.Pool.max",
            "watch..max",
            "watch.a.b.max",
        ] {
            let e = WatchKey::parse(bad).unwrap().unwrap_err().to_string();
            assert!(e.contains("watch.<name>.max"), "{bad}: {e}");
        }
        assert_eq!(k.check(-2.5), Ok(-2.5));
        assert!(k.check(f64::NAN).is_err());
        let d = WatchKey::parse("watch.q.drained_within_s")
            .unwrap()
            .unwrap();
        assert_eq!(d.check(0.0), Ok(0.0));
        let e = d.check(-1.0).unwrap_err().to_string();
        assert!(e.contains("seconds of 0 or more"), "{e}");
    }
}
