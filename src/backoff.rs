//! Capped exponential backoff with jitter, for the background loops' retries.

use rand::Rng;
use std::time::Duration;

/// The next wait after each failure doubles from `base` up to `cap`; each wait is drawn
/// uniformly from its upper half, so consumers that failed together do not retry together.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    failures: u32,
}

impl Backoff {
    /// A backoff starting at `base`, never waiting longer than `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Backoff {
            base,
            cap: cap.max(base),
            failures: 0,
        }
    }

    /// The wait after one more failure.
    pub fn next_wait(&mut self) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(1u32 << self.failures.min(16))
            .min(self.cap);
        self.failures = self.failures.saturating_add(1);
        let half = ceiling / 2;
        half + rand::rng().random_range(Duration::ZERO..=half)
    }

    /// Back to `base` after a success.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// Failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap_with_jitter_and_reset() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let waits: Vec<Duration> = (0..8).map(|_| b.next_wait()).collect();
        assert!(waits[0] >= Duration::from_millis(50) && waits[0] <= Duration::from_millis(100));
        assert!(waits[2] >= Duration::from_millis(200) && waits[2] <= Duration::from_millis(400));
        assert!(waits.iter().all(|w| *w <= Duration::from_secs(1)));
        assert!(waits[7] >= Duration::from_millis(500), "{waits:?}");
        assert_eq!(b.failures(), 8);
        b.reset();
        assert!(b.next_wait() <= Duration::from_millis(100));
    }
}
