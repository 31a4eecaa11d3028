//! The clients' records replayed in time: which units they provably held, and when.
//!
//! An order is held from its acknowledgement (the moment the answer arrived: the shop had
//! reserved the unit by then) until the earliest moment the shop may have released it: the
//! send of a cancel answered `ok`, or, for an order not paid within the payment window, its
//! send plus the window (the shop may expire it on its own). Both ends are conservative, so a
//! count of held units above the stock is proof of oversell, with no server-side oracle.
//! A window nobody declared is unknown, never a default: an unpaid order may then have been
//! released at any moment, so only a paid order is held, from its payment's answer on.
//! One order acknowledged twice (a replay of one `Idempotency-Key`) is one order: acks are
//! grouped by order id, else by attempt key.

use super::repeats::Repeats;
use super::StockSample;
use crate::traffic::recorder::{AckList, AckView, KeyRef};
use crate::traffic::schedule::ident::IdRef;
use hashbrown::HashMap;

/// One order the clients provably held over `[from, until)` (ms after the sale opened).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    pub from: u64,
    pub until: u64,
    /// The first acknowledgement of the order (its user and device).
    pub ack: usize,
}

/// What names one order among the acknowledgements.
#[derive(Hash, PartialEq, Eq)]
enum OrderName<'a> {
    Id(&'a str),
    Key(KeyRef<'a>),
    Lone(usize),
}

/// What the records say of one order: its first acknowledgement, the earliest answer, send,
/// cancel send and pay answer among its acknowledgements (ms after the sale opened).
struct Facts {
    ack: usize,
    from: u64,
    sent: u64,
    cancel: Option<u64>,
    paid: Option<u64>,
}

/// The distinct orders of `acks`, grouped by order id, else by attempt key, each given to
/// `each` once with what all of its acknowledgements say. Only the names that may repeat
/// ([`Repeats`]) are grouped in a map; every other acknowledgement is an order of its own.
fn orders<'a, A: AckList + ?Sized>(acks: &'a A, mut each: impl FnMut(Facts)) {
    let name = |i: usize, a: &AckView<'a>| match (a.order_id, a.key) {
        (Some(id), _) => OrderName::Id(id),
        (None, Some(k)) => OrderName::Key(k),
        (None, None) => OrderName::Lone(i),
    };
    let repeats = Repeats::of((0..acks.len()).map(|i| name(i, &acks.ack(i))));
    let mut grouped: HashMap<OrderName<'a>, Facts> = HashMap::new();
    let earliest = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    for i in 0..acks.len() {
        let a = acks.ack(i);
        let facts = Facts {
            ack: i,
            from: a.at_ms,
            sent: a.sent_ms,
            cancel: a.cancel_sent_ms,
            paid: a.paid_ms,
        };
        let name = name(i, &a);
        if !repeats.may_repeat(&name) {
            each(facts);
            continue;
        }
        let f = grouped.entry(name).or_insert(facts);
        f.from = f.from.min(a.at_ms);
        f.sent = f.sent.min(a.sent_ms);
        f.cancel = earliest(f.cancel, a.cancel_sent_ms);
        f.paid = earliest(f.paid, a.paid_ms);
    }
    grouped.into_values().for_each(each);
}

/// Distinct acknowledged orders, neither cancelled nor paid within the window, that the shop
/// may have released on its own by `audited_ms` (their send + the window; any time when no
/// window was declared, or when the audit's time is unknown).
pub(super) fn may_have_expired<A: AckList + ?Sized>(
    acks: &A,
    window_ms: Option<u64>,
    audited_ms: Option<u64>,
) -> u64 {
    let mut n = 0;
    orders(acks, |f| {
        let may = f.cancel.is_none()
            && match (window_ms, audited_ms) {
                (Some(w), audited) => {
                    let expires = f.sent.saturating_add(w);
                    expires != u64::MAX
                        && f.paid.is_none_or(|p| p > expires)
                        && audited.is_none_or(|t| expires <= t)
                }
                (None, _) => f.paid.is_none(),
            };
        n += u64::from(may);
    });
    n
}

/// The distinct orders of `acks` with the interval each was provably held; `window_ms`: the
/// declared payment window (an order not paid within it may be released at its send + the
/// window), `None` when nobody declared one (an unpaid order may be released at once: only
/// paid orders are held, from the payment's answer). Orders never provably held (released
/// before their acknowledgement) are left out.
pub(super) fn held<A: AckList + ?Sized>(acks: &A, window_ms: Option<u64>) -> Vec<Held> {
    let mut out: Vec<Held> = Vec::new();
    orders(
        acks,
        |Facts {
             ack,
             from,
             sent,
             cancel,
             paid,
         }| {
            let (from, expiry) = match (window_ms, paid) {
                (Some(w), Some(p)) if p <= sent.saturating_add(w) => (from, u64::MAX),
                (Some(w), _) => (from, sent.saturating_add(w)),
                // No window declared: held from the moment the shop said it was paid.
                (None, Some(p)) => (from.max(p), u64::MAX),
                (None, None) => return,
            };
            let until = cancel.unwrap_or(u64::MAX).min(expiry);
            if until > from {
                out.push(Held { from, until, ack });
            }
        },
    );
    out.sort_by_key(|h| (h.from, h.ack));
    out
}

/// The most of `held` held at once (a release at the same instant as an acknowledgement
/// counts first).
pub(super) fn peak<'a>(held: impl IntoIterator<Item = &'a Held>) -> i64 {
    peak_at(held).map_or(0, |(_, most)| most)
}

/// The first instant the most of `held` were held at once, and how many (`None`: none held).
pub(super) fn peak_at<'a>(held: impl IntoIterator<Item = &'a Held>) -> Option<(u64, i64)> {
    let mut events: Vec<(u64, i64)> = Vec::new();
    for h in held {
        events.push((h.from, 1));
        if h.until != u64::MAX {
            events.push((h.until, -1));
        }
    }
    events.sort_unstable();
    let (mut now, mut most) = (0i64, None::<(u64, i64)>);
    for (t, d) in events {
        now += d;
        if most.is_none_or(|(_, m)| now > m) {
            most = Some((t, now));
        }
    }
    most.filter(|(_, m)| *m > 0)
}

/// The orders of `held` held at instant `t` (acknowledged by then, not released by then).
pub(super) fn held_at(held: &[Held], t: u64) -> Vec<Held> {
    held.iter()
        .filter(|h| h.from <= t && h.until > t)
        .copied()
        .collect()
}

/// The orders of `held` provably held while stock sample `s` was in flight: acknowledged by
/// its send, not released by its answer (what [`HeldIndex::during`] counts).
pub(super) fn held_during(held: &[Held], s: &StockSample) -> Vec<Held> {
    held.iter()
        .filter(|h| h.from <= s.sent_ms && h.until > s.answered_ms)
        .copied()
        .collect()
}

/// An owner (user or device, by `owner`) that held more than `limit` units at once, with the
/// orders it held then (`None`: no owner did).
pub(super) fn owner_over<'a, A: AckList + ?Sized>(
    held: &[Held],
    acks: &'a A,
    owner: impl Fn(AckView<'a>) -> IdRef<'a>,
    limit: i64,
) -> Option<(IdRef<'a>, Vec<Held>)> {
    let mut by: HashMap<IdRef<'a>, Vec<Held>> = HashMap::new();
    for h in held {
        by.entry(owner(acks.ack(h.ack))).or_default().push(*h);
    }
    let mut over: Vec<(IdRef<'a>, Vec<Held>)> = by
        .into_iter()
        .filter(|(_, hs)| hs.len() as i64 > limit)
        .filter_map(|(o, hs)| {
            let (t, n) = peak_at(hs.iter())?;
            (n > limit).then(|| (o, held_at(&hs, t)))
        })
        .collect();
    // The earliest offence first, for a proof that does not change from run to run of the
    // oracle over the same records.
    over.sort_by_key(|(_, hs)| hs.iter().map(|h| (h.from, h.ack)).max());
    over.into_iter().next()
}

/// With no payment window declared: the shortest window under which `acks` prove a peak above
/// `stock`, and the peak oversell they prove if every unpaid order is held until its cancel
/// (`None` when even that proves nothing). The peak only grows with the window, so the
/// shortest one is found by bisection over the run's span.
pub(super) fn undeclared_window<A: AckList + ?Sized>(
    acks: &A,
    stock: i64,
) -> Option<super::UndeclaredWindow> {
    let over = |w: u64| peak(&held(acks, Some(w))) - stock;
    let longest = over(u64::MAX);
    if longest <= 0 {
        return None;
    }
    // Past the last acknowledgement a longer window changes no instant the peak is taken at.
    let last = (0..acks.len()).map(|i| acks.ack(i).at_ms).max();
    let (mut lo, mut hi) = (0u64, last.unwrap_or(0) + 1);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if over(mid) > 0 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(super::UndeclaredWindow {
        proves_from_s: hi as f64 / 1000.0,
        peak_oversell: longest,
    })
}

/// Owners (users or devices, by `owner`) that held more than `limit` units at once.
pub(super) fn owners_over<'a, A: AckList + ?Sized>(
    held: &[Held],
    acks: &'a A,
    owner: impl Fn(AckView<'a>) -> IdRef<'a>,
    limit: i64,
) -> u64 {
    // Most owners hold one order: only those with more than the limit in all are replayed,
    // and (with a limit of one or more) only owners named twice can be.
    let repeats = (limit >= 1).then(|| Repeats::of(held.iter().map(|h| owner(acks.ack(h.ack)))));
    let may_be_over = |o: &IdRef<'a>| repeats.as_ref().is_none_or(|r| r.may_repeat(o));
    let mut count: HashMap<IdRef<'a>, i64> = HashMap::new();
    for h in held {
        let o = owner(acks.ack(h.ack));
        if may_be_over(&o) {
            *count.entry(o).or_default() += 1;
        }
    }
    let mut by: HashMap<IdRef<'a>, Vec<Held>> = HashMap::new();
    for h in held {
        let o = owner(acks.ack(h.ack));
        if count.get(&o).is_some_and(|n| *n > limit) {
            by.entry(o).or_default().push(*h);
        }
    }
    by.values().filter(|hs| peak(hs.iter()) > limit).count() as u64
}

/// The held orders indexed for stock readings: sorted by acknowledgement (as [`held`] returns
/// them) and, apart, their release instants sorted.
pub(super) struct HeldIndex<'a> {
    held: &'a [Held],
    untils: Vec<u64>,
}

impl<'a> HeldIndex<'a> {
    /// `held` as [`held`] returned it (sorted by `from`).
    pub(super) fn new(held: &'a [Held]) -> Self {
        let mut untils: Vec<u64> = held.iter().map(|h| h.until).collect();
        untils.sort_unstable();
        HeldIndex { held, untils }
    }

    /// Units provably held when a stock sample was taken: acknowledged before it was sent, and
    /// not released (cancel sent, window over) before its answer came. In O(log n) plus the
    /// orders acknowledged while the reading was in flight: those acknowledged by the send,
    /// minus those released by the answer (every order is released after it is acknowledged,
    /// so those are the ones released by then less the ones acknowledged after the send).
    pub(super) fn during(&self, s: &StockSample) -> i64 {
        let acked = self.held.partition_point(|h| h.from <= s.sent_ms);
        let released = self.untils.partition_point(|&u| u <= s.answered_ms);
        let in_flight = self.held[acked..]
            .iter()
            .take_while(|h| h.from <= s.answered_ms)
            .filter(|h| h.until <= s.answered_ms)
            .count();
        (acked - (released - in_flight)) as i64
    }
}

/// The most units a stock sample shows beyond what can exist: held units plus the stock read,
/// minus the initial stock, over every settled sample (the backlog read 0 around it: an
/// asynchronous shop's stock lags what it acknowledged while anything waits to be written),
/// floored at 0; `None` without a settled sample.
pub(super) fn stock_peak(held: &[Held], samples: &[StockSample], initial: i64) -> Option<i64> {
    let index = HeldIndex::new(held);
    samples
        .iter()
        .filter(|s| s.settled)
        .map(|s| (index.during(s) + s.stock - initial).max(0))
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::recorder::Ack;

    /// An ack of order `id` answered at `at`, sent at `sent`.
    fn ack(id: &str, user: &str, sent: u64, at: u64) -> Ack {
        Ack {
            key: Some(format!("k-{id}").into()),
            order_id: Some(id.into()),
            buyer: 0,
            user_id: user.into(),
            device_id: format!("d-{user}"),
            bot: false,
            at_ms: at,
            sent_ms: sent,
            cancel_sent_ms: None,
            paid_ms: None,
        }
    }

    fn cancelled(mut a: Ack, at: u64) -> Ack {
        a.cancel_sent_ms = Some(at);
        a
    }

    const WINDOW: Option<u64> = Some(900_000);

    #[test]
    fn oversell_that_cancels_cover_up_later_still_peaks_above_the_stock() {
        // Stock 2: three acknowledged by 30 ms, two of them cancelled at 100 ms.
        let acks = vec![
            cancelled(ack("a", "u1", 0, 10), 100),
            cancelled(ack("b", "u2", 0, 20), 100),
            ack("c", "u3", 0, 30),
        ];
        let h = held(&acks, WINDOW);
        assert_eq!(peak(&h), 3, "one over a stock of 2 at 30 ms");
    }

    #[test]
    fn a_correct_sale_with_cancels_and_rebuys_never_exceeds_the_stock() {
        // Stock 1: sold, cancel sent at 50, the unit bought again at 60 (answered), cancelled
        // at 80, bought again at 90.
        let acks = vec![
            cancelled(ack("a", "u1", 0, 10), 50),
            cancelled(ack("b", "u2", 55, 60), 80),
            ack("c", "u3", 85, 90),
        ];
        assert_eq!(peak(&held(&acks, WINDOW)), 1);
        // A re-buy acknowledged at the very instant of the cancel's send is not counted twice.
        let acks = vec![cancelled(ack("a", "u1", 0, 10), 50), ack("b", "u2", 40, 50)];
        assert_eq!(peak(&held(&acks, WINDOW)), 1);
    }

    #[test]
    fn an_unpaid_order_is_released_at_its_send_plus_the_window_not_before() {
        // Window 100 ms; stock 1. Order a sent at 0, never paid: the shop may release it at
        // 100. A second order acknowledged at 99 is oversell; one at 100 is not.
        let before = vec![ack("a", "u1", 0, 5), ack("b", "u2", 90, 99)];
        assert_eq!(peak(&held(&before, Some(100))), 2);
        let after = vec![ack("a", "u1", 0, 5), ack("b", "u2", 95, 100)];
        assert_eq!(peak(&held(&after, Some(100))), 1);
        // Paid within the window: held for good.
        let mut paid = after.clone();
        paid[0].paid_ms = Some(50);
        assert_eq!(peak(&held(&paid, Some(100))), 2);
        // Paid only after the window: the shop could have released it first.
        paid[0].paid_ms = Some(150);
        assert_eq!(peak(&held(&paid, Some(100))), 1);
    }

    #[test]
    fn without_a_declared_window_only_paid_orders_are_held_and_from_their_payment() {
        // Stock 1. a is acknowledged at 5 and never paid: with no window declared, the shop
        // may have expired it at once, so b (acknowledged at 50) proves nothing.
        let acks = vec![ack("a", "u1", 0, 5), ack("b", "u2", 40, 50)];
        assert_eq!(peak(&held(&acks, None)), 0);
        assert_eq!(
            peak(&held(&acks, Some(100))),
            2,
            "a declared window proves it"
        );
        // a paid at 30: held from 30 on; b, paid at 60, too: two units held at once.
        let mut paid = acks.clone();
        paid[0].paid_ms = Some(30);
        paid[1].paid_ms = Some(60);
        let h = held(&paid, None);
        assert_eq!(
            h[0].from, 30,
            "from the payment's answer, not the acknowledgement"
        );
        assert_eq!(peak(&h), 2);
        // b's cancel sent at 55, before its payment could count: one at a time.
        paid[1].cancel_sent_ms = Some(55);
        assert_eq!(peak(&held(&paid, None)), 1);
    }

    #[test]
    fn the_window_that_would_prove_oversell_is_the_shortest_one() {
        // Stock 1: a sent at 0 (acknowledged at 5, unpaid), b acknowledged at 99: a window of
        // 100 ms proves 2 held at 99; 99 ms does not (a may be released at 99).
        let acks = vec![ack("a", "u1", 0, 5), ack("b", "u2", 90, 99)];
        let w = undeclared_window(&acks, 1).unwrap();
        assert_eq!(w.proves_from_s, 0.1);
        assert_eq!(w.peak_oversell, 1);
        assert_eq!(peak(&held(&acks, Some(99))), 1);
        // Nothing to prove: no advice.
        assert_eq!(undeclared_window(&acks, 2), None);
    }

    #[test]
    fn duplicate_buyers_count_distinct_orders_and_subtract_cancels() {
        let replay = |a: &Ack| {
            let mut b = a.clone();
            b.at_ms += 5;
            b
        };
        let a1 = ack("a1", "u1", 0, 10);
        let acks = vec![
            // u1: one order told twice (a replay of its key): one order.
            a1.clone(),
            replay(&a1),
            // u2: two orders at once: over a limit of 1.
            ack("b1", "u2", 0, 10),
            ack("b2", "u2", 0, 12),
            // u3: bought, cancelled, bought again.
            cancelled(ack("c1", "u3", 0, 10), 40),
            ack("c2", "u3", 50, 60),
        ];
        let h = held(&acks, WINDOW);
        assert_eq!(h.len(), 5, "the replay is one order");
        assert_eq!(owners_over(&h, &acks, |a| a.user_id, 1), 1);
        assert_eq!(owners_over(&h, &acks, |a| a.user_id, 2), 0);
        // Without ids, distinct attempt keys.
        let mut keyed = acks.clone();
        for a in &mut keyed {
            a.order_id = None;
        }
        let h = held(&keyed, WINDOW);
        assert_eq!(owners_over(&h, &keyed, |a| a.user_id, 1), 1);
        assert_eq!(owners_over(&h, &keyed, |a| a.device_id, 1), 1);
    }

    #[test]
    fn a_stock_sample_above_what_can_exist_is_counted() {
        // Stock 10; 4 held (one cancel sent at 45, after the sample): a sample of 6 is
        // consistent, 8 shows 2 units that cannot exist.
        let acks = vec![
            ack("a", "u1", 0, 10),
            ack("b", "u2", 0, 10),
            ack("c", "u3", 0, 10),
            cancelled(ack("d", "u4", 0, 10), 45),
            // acknowledged after the sample was sent: not counted.
            ack("e", "u5", 20, 35),
        ];
        let h = held(&acks, WINDOW);
        let sample = |stock| StockSample {
            sent_ms: 30,
            answered_ms: 40,
            stock,
            settled: true,
        };
        assert_eq!(HeldIndex::new(&h).during(&sample(6)), 4);
        assert_eq!(stock_peak(&h, &[sample(6)], 10), Some(0));
        assert_eq!(stock_peak(&h, &[sample(6), sample(8)], 10), Some(2));
        // A cancel sent before the sample's answer may have been applied: not counted.
        let early = StockSample {
            answered_ms: 50,
            ..sample(7)
        };
        assert_eq!(stock_peak(&h, &[early], 10), Some(0));
        assert_eq!(stock_peak(&h, &[], 10), None);
        // A reading taken while the shop's backlog was not known to be empty is never held
        // against the clients' records: its stock may lag what the shop acknowledged.
        let lagging = StockSample {
            settled: false,
            ..sample(60)
        };
        assert_eq!(stock_peak(&h, &[lagging], 10), None);
        assert_eq!(stock_peak(&h, &[lagging, sample(6)], 10), Some(0));
    }

    #[test]
    fn the_indexed_count_is_the_plain_count() {
        // Orders acknowledged and released at every combination of instants around readings.
        let mut acks = Vec::new();
        for from in 0..12u64 {
            for len in 1..6u64 {
                let a = cancelled(ack(&format!("{from}-{len}"), "u", 0, from), from + len);
                acks.push(a);
            }
        }
        let h = held(&acks, WINDOW);
        let index = HeldIndex::new(&h);
        for sent in 0..14 {
            for took in 0..4 {
                let s = StockSample {
                    sent_ms: sent,
                    answered_ms: sent + took,
                    stock: 0,
                    settled: true,
                };
                let plain = h
                    .iter()
                    .filter(|x| x.from <= s.sent_ms && x.until > s.answered_ms)
                    .count() as i64;
                assert_eq!(index.during(&s), plain, "{s:?}");
            }
        }
    }
}
