//! From the tally to the scenario's numbers, each with what it was measured from: the
//! arrival trace (scaled and compressed as asked) and the closest burst and uniform shapes,
//! the view share and views per viewer, think times as quantile ranges, bots, the
//! pay/cancel/abandon shares with their delays, and the stock.

use super::tally::{After, Gaps, Tally};
use crate::traffic::schedule::apportion;

/// How the scenario differs from the log: `--scale`, `--compress`, `--stock`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shaping {
    /// Buyers times this, the same shape.
    pub scale: f64,
    /// The same buyers in the time divided by this.
    pub compress: f64,
    /// The stock, when given.
    pub stock: Option<i64>,
}

/// A range fitted from quantiles: the uniform draw `[lo, hi]` with the measured 10th and 90th
/// percentiles, and what it was measured from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub lo: u64,
    pub hi: u64,
    pub p10: u64,
    pub p50: u64,
    pub p90: u64,
    pub n: u64,
    /// `hi` was cut to the scenario's limit.
    pub clamped: bool,
}

impl Range {
    /// The range of `h` (milliseconds), at most `max`; `None` when nothing was measured.
    pub fn of(h: &Gaps, max: u64) -> Option<Range> {
        if h.is_empty() {
            return None;
        }
        let q = |p: f64| h.value_at_quantile(p);
        let (p10, p50, p90) = (q(0.10), q(0.50), q(0.90));
        // A uniform draw on [lo, hi] has its 10th and 90th percentiles a tenth of the range in.
        let pad = (p90 - p10) / 8;
        let hi = p90 + pad;
        Some(Range {
            lo: p10.saturating_sub(pad).min(max),
            hi: hi.min(max),
            p10,
            p50,
            p90,
            n: h.len(),
            clamped: hi > max,
        })
    }
}

/// Small whole numbers (views per viewer, resubmits per bot) counted, with their quantiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Counts(Vec<u64>);

impl Counts {
    fn of(values: impl Iterator<Item = u16>, cap: u16) -> Counts {
        let mut v = vec![0u64; cap as usize + 1];
        for x in values {
            v[x.min(cap) as usize] += 1;
        }
        Counts(v)
    }

    /// How many were counted.
    pub fn n(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The smallest value with at least `p` of them at or below it.
    pub fn quantile(&self, p: f64) -> u32 {
        let want = (p * self.n() as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (v, c) in self.0.iter().enumerate() {
            seen += c;
            if seen >= want {
                return v as u32;
            }
        }
        0
    }
}

/// The closest burst shape to the trace (maximum likelihood over whole seconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstFit {
    pub burst_s: f64,
    pub share: f64,
    /// Largest gap between its cumulative arrivals and the trace's, over the seconds (0 to 1).
    pub distance: f64,
}

/// The stock and how it was found.
#[derive(Debug, Clone, PartialEq)]
pub enum Stock {
    Given(i64),
    /// The most units held at once; the refused order answers by status.
    Inferred {
        units: i64,
        refused: Vec<(u16, u64)>,
    },
}

impl Stock {
    pub fn units(&self) -> i64 {
        match self {
            Stock::Given(n) | Stock::Inferred { units: n, .. } => *n,
        }
    }
}

/// Everything fitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    pub shaping: Shaping,
    /// Buyers in the log (visitors with an order attempt).
    pub log_buyers: u64,
    /// Of them, known only by their client IP.
    pub by_ip: u64,
    /// Visitors who only viewed.
    pub only_viewed: u64,
    /// The log's arrivals per second from the sale start (each buyer's first request).
    pub log_trace: Vec<u32>,
    /// The scenario's: scaled and compressed.
    pub trace: Vec<u32>,
    pub burst: BurstFit,
    /// The uniform shape's distance to the trace.
    pub uniform_distance: f64,
    /// Buyers who are not bots, and of them those who viewed before ordering.
    pub people: u64,
    pub viewers: u64,
    pub views: Counts,
    pub view_think: Option<Range>,
    pub bots: u64,
    pub resubmits: Counts,
    pub bot_interval: Option<Range>,
    /// Buyers with an order answered 2xx, and of them those who paid and cancelled.
    pub ordered: u64,
    pub paid: u64,
    pub cancelled: u64,
    pub pay_delay: Option<Range>,
    pub cancel_delay: Option<Range>,
    /// Pay and cancel delays together (the scenario has one think time for both).
    pub after_think: Option<Range>,
    pub stock: Stock,
}

/// The scenario's limits the ranges are cut to (`traffic::scenario` checks them).
pub const BROWSE_THINK_MAX: u64 = 600_000;
pub const AFTER_THINK_MAX: u64 = 3_600_000;
pub const BOT_INTERVAL_MAX: u64 = 60_000;

impl Model {
    /// Fits the model from the tally.
    pub fn fit(t: &Tally, shaping: Shaping) -> Model {
        let ordering = || t.ordering();
        let log_trace = per_second(ordering().map(|b| b.first - t.start), 1.0);
        let compressed = per_second(ordering().map(|b| b.first - t.start), shaping.compress);
        let n = ordering().count() as u64;
        let wanted = (n as f64 * shaping.scale).round() as u64;
        let trace: Vec<u32> = apportion(wanted, &compressed)
            .into_iter()
            .map(|c| u32::try_from(c).unwrap_or(u32::MAX))
            .collect();
        let (burst, uniform_distance) = shapes(&trace);
        let people = || ordering().filter(|b| b.resubmits == 0);
        let viewers = || people().filter(|b| b.views > 0);
        let mut after_think = t.pay_delay.clone();
        // Both histograms have the same bounds: adding cannot fail.
        let _ = after_think.add(&t.cancel_delay);
        let ordered = || ordering().filter(|b| b.ordered);
        Model {
            shaping,
            log_buyers: n,
            by_ip: ordering().filter(|b| b.by_ip).count() as u64,
            only_viewed: t.only_viewed() as u64,
            log_trace,
            trace,
            burst,
            uniform_distance,
            people: people().count() as u64,
            viewers: viewers().count() as u64,
            views: Counts::of(viewers().map(|b| b.views), 20),
            view_think: Range::of(&t.view_think, BROWSE_THINK_MAX),
            bots: ordering().filter(|b| b.resubmits > 0).count() as u64,
            resubmits: Counts::of(
                ordering().filter(|b| b.resubmits > 0).map(|b| b.resubmits),
                100,
            ),
            bot_interval: Range::of(&t.bot_gaps, BOT_INTERVAL_MAX),
            ordered: ordered().count() as u64,
            paid: ordered().filter(|b| b.after == After::Paid).count() as u64,
            cancelled: ordered().filter(|b| b.after == After::Cancelled).count() as u64,
            pay_delay: Range::of(&t.pay_delay, AFTER_THINK_MAX),
            cancel_delay: Range::of(&t.cancel_delay, AFTER_THINK_MAX),
            after_think: Range::of(&after_think, AFTER_THINK_MAX),
            stock: match shaping.stock {
                Some(s) => Stock::Given(s),
                None => Stock::Inferred {
                    units: t.held_peak,
                    refused: t.refused.iter().map(|(s, n)| (*s, *n)).collect(),
                },
            },
        }
    }

    /// The scenario's buyers.
    pub fn count(&self) -> u64 {
        self.trace.iter().map(|c| u64::from(*c)).sum()
    }

    /// The share of buyers who are bots.
    pub fn bot_share(&self) -> f64 {
        ratio(self.bots, self.log_buyers)
    }

    /// The share of buyers who are not bots that viewed before ordering.
    pub fn view_share(&self) -> f64 {
        ratio(self.viewers, self.people)
    }

    /// Pay, cancel and abandon in ten-thousandths that add up to 10000 (pay only when no order
    /// was acknowledged).
    pub fn after_bp(&self) -> [u64; 3] {
        if self.ordered == 0 {
            return [10_000, 0, 0];
        }
        let bp = |k: u64| (k as f64 * 10_000.0 / self.ordered as f64).round() as u64;
        let (pay, cancel) = (bp(self.paid), bp(self.cancelled));
        let cancel = cancel.min(10_000 - pay);
        [pay, cancel, 10_000 - pay - cancel]
    }
}

/// `part / whole`, 0 for an empty whole.
pub fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// Counts per second of offsets (µs) divided by `compress`.
fn per_second(offsets: impl Iterator<Item = i64>, compress: f64) -> Vec<u32> {
    let mut v: Vec<u32> = Vec::new();
    for o in offsets {
        let s = (o.max(0) as f64 / 1e6 / compress).floor() as usize;
        if v.len() <= s {
            v.resize(s + 1, 0);
        }
        v[s] = v[s].saturating_add(1);
    }
    v
}

/// The closest burst (maximum likelihood: `burst_s` whole seconds holding `share` of the
/// arrivals, the rest spread over the remaining window) and the uniform shape's distance.
pub fn shapes(trace: &[u32]) -> (BurstFit, f64) {
    let w = trace.len();
    let total: f64 = trace.iter().map(|c| f64::from(*c)).sum();
    let uniform = distance(trace, |k| k as f64 / w as f64);
    let mut best = BurstFit {
        burst_s: w as f64,
        share: 1.0,
        distance: uniform,
    };
    let mut best_ll = f64::NEG_INFINITY;
    let mut inside = 0.0;
    let xlogy = |x: f64, y: f64| if x > 0.0 { x * y.ln() } else { 0.0 };
    for b in 1..w {
        inside += f64::from(trace[b - 1]);
        let outside = total - inside;
        let p = inside / total.max(1.0);
        let ll = xlogy(inside, p / b as f64) + xlogy(outside, (1.0 - p) / (w - b) as f64);
        if ll > best_ll {
            best_ll = ll;
            best = BurstFit {
                burst_s: b as f64,
                share: p,
                distance: 0.0,
            };
        }
    }
    let (b, p) = (best.burst_s, best.share);
    best.distance = distance(trace, |k| {
        let k = k as f64;
        if k <= b {
            p * k / b
        } else if (w as f64) > b {
            p + (1.0 - p) * (k - b) / (w as f64 - b)
        } else {
            1.0
        }
    });
    (best, uniform)
}

/// The largest gap, at the end of each second, between the trace's cumulative share of
/// arrivals and a shape's (`cdf(k)`: its share before second `k`).
fn distance(trace: &[u32], cdf: impl Fn(usize) -> f64) -> f64 {
    let total: f64 = trace.iter().map(|c| f64::from(*c)).sum::<f64>().max(1.0);
    let mut cum = 0.0;
    let mut worst: f64 = 0.0;
    for (k, c) in trace.iter().enumerate() {
        cum += f64::from(*c);
        worst = worst.max((cum / total - cdf(k + 1)).abs());
    }
    worst
}
