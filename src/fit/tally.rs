//! What the fit keeps while the log streams past: a few bytes per buyer (its first request,
//! its views before ordering, its order attempts, whether it paid or cancelled) and
//! histograms of the gaps it measures (think times, a bot's resubmit intervals, the delays
//! before pay and cancel). No line is kept: a log of any length costs its buyers.

use super::parse::Request;
use super::route::Action;
use hdrhistogram::Histogram;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// The longest gap the histograms hold, in milliseconds (a day); longer ones are clamped.
const MAX_GAP_MS: u64 = 86_400_000;

/// A histogram of gaps in milliseconds.
pub type Gaps = Histogram<u64>;

fn gaps() -> Gaps {
    Histogram::new_with_max(MAX_GAP_MS, 3).unwrap_or_else(|e| panic!("histogram bounds: {e}"))
}

fn record(h: &mut Gaps, micros: i64) {
    h.saturating_record((micros.max(0) / 1000) as u64);
}

/// What a buyer did after its order was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    Nothing,
    Paid,
    Cancelled,
}

/// One buyer, as far as the log has gone (32 bytes).
#[derive(Debug, Clone, Copy)]
pub struct Buyer {
    /// Its first request at or after the sale start (µs since the epoch).
    pub first: i64,
    last: i64,
    last_order: i64,
    /// Views before its first order attempt.
    pub views: u16,
    /// Order attempts.
    pub attempts: u16,
    /// Order attempts within the bot window of the previous one.
    pub resubmits: u16,
    view_pending: bool,
    /// An order attempt of it was answered 2xx.
    pub ordered: bool,
    pub after: After,
    /// Known only by its client IP.
    pub by_ip: bool,
}

/// The buyers' map is keyed by hashes already: no second hashing.
#[derive(Default)]
pub struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Everything measured from the log.
pub struct Tally {
    /// Requests before this (µs since the epoch) are left out.
    pub start: i64,
    /// Requests after this are left out.
    pub end: Option<i64>,
    /// Two order attempts this close (µs) make a bot.
    bot_window: i64,
    pub buyers: HashMap<u64, Buyer, BuildHasherDefault<Prehashed>>,
    /// Gap after a view to the buyer's next request (its think time).
    pub view_think: Gaps,
    /// Gap between a bot's order attempts.
    pub bot_gaps: Gaps,
    /// From the buyer's last order attempt to its pay.
    pub pay_delay: Gaps,
    /// From the buyer's last order attempt to its cancel.
    pub cancel_delay: Gaps,
    /// Requests per action (view, order, pay, cancel) within the sale.
    pub requests: BTreeMap<&'static str, u64>,
    /// Order attempts answered 2xx.
    pub orders_ok: u64,
    /// Order attempts answered otherwise, by status.
    pub refused: BTreeMap<u16, u64>,
    /// Units held at once (acknowledged orders minus 2xx cancels, in log order), at most.
    pub held_peak: i64,
    held: i64,
    /// Pay or cancel requests of buyers with no acknowledged order, or a second one.
    pub stray_follow_ups: u64,
    /// Requests left out: before the start, after the end.
    pub before_start: u64,
    pub after_end: u64,
    /// Whether any time had a fraction of a second.
    pub fractions: bool,
    /// Lines read out of time order by more than a second (for one buyer).
    pub out_of_order: u64,
}

impl Tally {
    /// An empty tally of the sale from `start` (to `end`), bots within `bot_window_us`.
    pub fn new(start: i64, end: Option<i64>, bot_window_us: i64) -> Tally {
        Tally {
            start,
            end,
            bot_window: bot_window_us,
            buyers: HashMap::default(),
            view_think: gaps(),
            bot_gaps: gaps(),
            pay_delay: gaps(),
            cancel_delay: gaps(),
            requests: BTreeMap::new(),
            orders_ok: 0,
            refused: BTreeMap::new(),
            held_peak: 0,
            held: 0,
            stray_follow_ups: 0,
            before_start: 0,
            after_end: 0,
            fractions: false,
            out_of_order: 0,
        }
    }

    /// Takes one request of the log.
    pub fn add(&mut self, r: &Request) {
        let t = r.at.micros;
        if t < self.start {
            self.before_start += 1;
            return;
        }
        if self.end.is_some_and(|e| t > e) {
            self.after_end += 1;
            return;
        }
        self.fractions |= r.at.fraction;
        *self.requests.entry(r.action.as_str()).or_default() += 1;
        let b = self.buyers.entry(r.buyer).or_insert(Buyer {
            first: t,
            last: t,
            last_order: t,
            views: 0,
            attempts: 0,
            resubmits: 0,
            view_pending: false,
            ordered: false,
            after: After::Nothing,
            by_ip: r.by_ip,
        });
        if t + 1_000_000 < b.last {
            self.out_of_order += 1;
        }
        b.first = b.first.min(t);
        let ok = (200..300).contains(&r.status);
        match r.action {
            Action::View if b.attempts == 0 => {
                if b.view_pending {
                    record(&mut self.view_think, t - b.last);
                }
                b.views = b.views.saturating_add(1);
                b.view_pending = true;
            }
            Action::View => {}
            Action::Order => {
                if b.view_pending {
                    record(&mut self.view_think, t - b.last);
                    b.view_pending = false;
                }
                if b.attempts > 0 && t - b.last_order <= self.bot_window {
                    b.resubmits = b.resubmits.saturating_add(1);
                    record(&mut self.bot_gaps, t - b.last_order);
                }
                b.attempts = b.attempts.saturating_add(1);
                b.last_order = b.last_order.max(t);
                if ok {
                    b.ordered = true;
                    self.orders_ok += 1;
                    self.held += 1;
                    self.held_peak = self.held_peak.max(self.held);
                } else {
                    *self.refused.entry(r.status).or_default() += 1;
                }
            }
            Action::Pay | Action::Cancel => {
                if b.ordered && b.after == After::Nothing {
                    let (after, delay) = if r.action == Action::Pay {
                        (After::Paid, &mut self.pay_delay)
                    } else {
                        (After::Cancelled, &mut self.cancel_delay)
                    };
                    b.after = after;
                    record(delay, t - b.last_order);
                } else {
                    self.stray_follow_ups += 1;
                }
                if r.action == Action::Cancel && ok {
                    self.held -= 1;
                }
            }
        }
        b.last = b.last.max(t);
    }

    /// The buyers who attempted an order (the model's buyers).
    pub fn ordering(&self) -> impl Iterator<Item = &Buyer> {
        self.buyers.values().filter(|b| b.attempts > 0)
    }

    /// Visitors who only viewed (not in the model: its buyers all order).
    pub fn only_viewed(&self) -> usize {
        self.buyers.values().filter(|b| b.attempts == 0).count()
    }
}
