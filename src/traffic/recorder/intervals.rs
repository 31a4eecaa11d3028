//! Order latency per interval of the sale, for the HdrHistogram interval log and the timeline's
//! p99 per second: one interval a second while the run is short, and once answers arrive past
//! [`CAP`] intervals, every interval twice as long (neighbours merged), so a run of any length
//! keeps at most `CAP` histograms (each up to ~90 KiB at a one-second maximum latency, ~190 KiB
//! at the one-hour limit) instead of one per second for as long as it lasts.

use hdrhistogram::{AdditionError, Histogram};
use std::time::Duration;

/// Most intervals kept: five minutes at one second each; a 10-minute run keeps 2-second
/// intervals, a 20-minute one 4-second intervals.
pub const CAP: usize = 300;

/// Order latency (µs) by interval after the sale opened.
#[derive(Debug, Clone)]
pub struct Intervals {
    /// Seconds per interval: 1, 2, 4, ...
    width_s: u64,
    hists: Vec<Histogram<u64>>,
}

impl Default for Intervals {
    fn default() -> Self {
        Intervals {
            width_s: 1,
            hists: Vec::new(),
        }
    }
}

/// An interval's histogram: 3 significant digits like the run's, but it starts small and
/// grows to the largest value recorded.
pub fn interval_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_max(1_000, 3).expect("valid bounds");
    h.auto(true);
    h
}

impl Intervals {
    /// Intervals of `width_s` seconds (at least 1) holding `hists`, as a shard file stores them.
    pub fn from_parts(width_s: u64, hists: Vec<Histogram<u64>>) -> Self {
        let mut i = Intervals {
            width_s: width_s.max(1),
            hists,
        };
        while i.hists.len() > CAP {
            i.widen();
        }
        i
    }

    /// Seconds per interval.
    pub fn width_s(&self) -> u64 {
        self.width_s
    }

    /// The histograms, interval `k` covering seconds `k·width .. (k+1)·width`.
    pub fn histograms(&self) -> &[Histogram<u64>] {
        &self.hists
    }

    pub fn is_empty(&self) -> bool {
        self.hists.is_empty()
    }

    /// Records an order answered in whole second `second` after the opening, `micros` from its
    /// intended send (clamped into `1..=max_us`).
    pub fn record(&mut self, second: u64, micros: u64, max_us: u64) {
        while second / self.width_s >= CAP as u64 {
            self.widen();
        }
        let k = (second / self.width_s) as usize;
        if self.hists.len() <= k {
            self.hists.resize_with(k + 1, interval_histogram);
        }
        // Auto-resizing: `record` grows it; the clamp keeps the run histograms' limit.
        let _ = self.hists[k].record(micros.clamp(1, max_us));
    }

    /// Adds `other`'s intervals (another shard's), both at the wider of the two widths.
    pub fn add(&mut self, other: &Intervals) -> Result<(), AdditionError> {
        let mut other = other.clone();
        while self.width_s < other.width_s {
            self.widen();
        }
        while other.width_s < self.width_s {
            other.widen();
        }
        if self.hists.len() < other.hists.len() {
            self.hists
                .resize_with(other.hists.len(), interval_histogram);
        }
        for (k, h) in other.hists.iter().enumerate() {
            self.hists[k].add(h)?;
        }
        while self.hists.len() > CAP {
            self.widen();
        }
        Ok(())
    }

    /// Every non-empty interval: its start and length after the opening, and its histogram.
    pub fn iter(&self) -> impl Iterator<Item = (Duration, Duration, &Histogram<u64>)> {
        let w = self.width_s;
        self.hists
            .iter()
            .enumerate()
            .filter(|(_, h)| !h.is_empty())
            .map(move |(k, h)| (Duration::from_secs(k as u64 * w), Duration::from_secs(w), h))
    }

    /// The 99th percentile in ms for each second up to the last interval's end, at most
    /// `seconds` of them: its interval's (0 where no order was answered).
    pub fn p99_ms_per_second(&self, seconds: usize) -> Vec<f64> {
        (0..seconds.min(self.hists.len() * self.width_s as usize))
            .map(|s| match self.hists.get(s / self.width_s as usize) {
                Some(h) if !h.is_empty() => h.value_at_quantile(0.99) as f64 / 1000.0,
                _ => 0.0,
            })
            .collect()
    }

    /// Twice as long intervals: neighbours merged.
    fn widen(&mut self) {
        let hists = std::mem::take(&mut self.hists);
        let mut merged: Vec<Histogram<u64>> = Vec::with_capacity(hists.len().div_ceil(2));
        for (k, h) in hists.into_iter().enumerate() {
            if k % 2 == 0 {
                merged.push(h);
            } else {
                // Same precision, and the target grows: adding cannot fail.
                let _ = merged.last_mut().expect("pushed above").add(&h);
            }
        }
        self.hists = merged;
        self.width_s *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_run_keeps_at_most_cap_intervals_and_every_count() {
        let mut i = Intervals::default();
        // Two answers a second for an hour, the latency = the second (ms).
        for s in 0..3600u64 {
            i.record(s, (s + 1) * 1000, 3_600_000_000);
            i.record(s, (s + 1) * 1000, 3_600_000_000);
        }
        assert!(i.histograms().len() <= CAP, "{}", i.histograms().len());
        assert_eq!(
            i.width_s(),
            16,
            "3600 s in at most 300 intervals: 16 s each"
        );
        let total: u64 = i.histograms().iter().map(|h| h.len()).sum();
        assert_eq!(total, 7200);
        // The interval holding second 100 (s 96..112) holds latencies 97..=112 ms.
        let h = &i.histograms()[100 / 16];
        assert_eq!(h.len(), 32);
        assert!((96_900..=97_100).contains(&h.min()), "{}", h.min());
        let p99 = i.p99_ms_per_second(3600);
        assert_eq!(p99.len(), 3600);
        assert_eq!(p99[96], p99[111], "one interval, one figure");
    }

    #[test]
    fn a_short_run_keeps_one_interval_a_second() {
        let mut i = Intervals::default();
        i.record(0, 500, 3_600_000_000);
        i.record(4, 2_000, 3_600_000_000);
        assert_eq!(i.width_s(), 1);
        assert_eq!(i.histograms().len(), 5);
        let starts: Vec<u64> = i.iter().map(|(at, _, _)| at.as_secs()).collect();
        assert_eq!(starts, vec![0, 4]);
        assert_eq!(i.p99_ms_per_second(6)[4], 2.0);
    }

    #[test]
    fn intervals_of_different_widths_add_at_the_wider() {
        let mut a = Intervals::default();
        for s in 0..10 {
            a.record(s, 1_000, 3_600_000_000);
        }
        let mut b = Intervals::default();
        for s in 0..700 {
            b.record(s, 1_000, 3_600_000_000);
        }
        assert_eq!(b.width_s(), 4);
        a.add(&b).unwrap();
        assert_eq!(a.width_s(), 4);
        let total: u64 = a.histograms().iter().map(|h| h.len()).sum();
        assert_eq!(total, 710);
        assert_eq!(a.histograms()[0].len(), 8, "4 s of a, 4 s of b");
    }
}
