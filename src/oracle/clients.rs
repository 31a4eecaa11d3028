//! The clients' own evidence, judged on every run: what they were told, what the run saw given
//! back, and the answers the mapping could not read.
//!
//! - restocks seen: cancels answered `ok`, plus (when the oracle has order rows) acknowledged
//!   orders the database shows released that no client cancel accounts for;
//! - client-observed oversell = acknowledged − restocks seen − initial stock, floored at 0: the
//!   shop promised units it did not have, whatever its own counters say;
//! - the oracle disagrees with the clients when what they were told (net) is more than it
//!   counts as sold: a lower bound on acknowledged orders it lost (a stock-derived oracle under
//!   lost updates does exactly this);
//! - client-observed peak oversell: the clients' records replayed in time ([`super::replay`]):
//!   the most units provably held at once (from each acknowledgement until its cancel was
//!   sent, or its payment window ran out unpaid), above the initial stock;
//! - client-observed duplicate buyers (and devices): one user holding more distinct orders at
//!   once than the purchase limit;
//! - stock-side peak (a foreign shop's stock sampled during the sale): units held plus the
//!   stock read, above the initial stock;
//! - unclassified answers, with the rule that would classify them.

use super::replay::Held;
use super::{replay, Evidence, Findings, StockSample};
use crate::traffic::recorder::{
    AckList, AckView, Answer, AnswerClass, ClientRecords, KeyRef, Kind, Told, UnclassifiedAnswer,
};
use crate::traffic::schedule::ident::IdRef;
use hashbrown::{HashMap, HashSet};

/// What the clients saw, before any server-side truth: acknowledgements, people turned away
/// (and those refused for another reason than sold out), whether anything was sold at all,
/// unclassified answers and what the run's mapping rules out.
pub(super) fn observe(f: &mut Findings, e: &Evidence<'_>) -> ClientWitness {
    let c = e.clients;
    f.acknowledged = c.acks().len() as u64;
    f.acks_without_id = c.acks().filter(|a| a.order_id.is_none()).count() as u64;
    f.turned_away_buyers = c
        .buyers
        .values()
        .filter(|b| !b.bot && b.attempted && !b.got_order)
        .count() as u64;
    f.refused_buyers = refused_buyers(c);
    f.unauthorized = c
        .attempts()
        .filter(|a| a.answer == Answer::Unauthorized)
        .count() as u64;
    f.nothing_sold = e.initial_stock > 0 && f.acknowledged == 0;
    f.indeterminate = c
        .attempts()
        .filter(|a| a.class == AnswerClass::Indeterminate)
        .count() as u64;
    f.duplicate_acks = e.reading.order_id_field.as_ref().map(|_| duplicate_acks(c));
    f.answers = c.total_requests();
    f.unclassified = c.unclassified_requests();
    f.unclassified_share = (f.answers > 0).then(|| f.unclassified as f64 / f.answers as f64);
    f.max_unclassified = Some(e.reading.max_unclassified);
    f.unclassified_answers = c.unclassified.clone();
    f.mapping_advice = c.unclassified.iter().map(advice).collect();
    let witness = held(f, e);
    match &e.reading.order_id_field {
        None => f.client_notes.push(
            "the shop gives no order ids (target.order_id_field is not set): acknowledgements \
             are counted by answer, so two acknowledgements of one order cannot be told apart, \
             a lost acknowledged order can only be counted against the oracle's sold (never \
             named), and pay/cancel requests that need an order id are not sent"
                .into(),
        ),
        Some(field) if f.acks_without_id > 0 => f.client_notes.push(format!(
            "{} created answers carried no `{field}` (target.order_id_field): they count as \
             acknowledgements, but cannot be checked one by one, paid or cancelled",
            f.acks_without_id
        )),
        Some(_) => {}
    }
    f.client_notes.extend(unauthorized_note(c));
    witness
}

/// The acknowledgements the clients' proofs name (positions in the records): those held at
/// the peak, while the stock sample with the most excess was in flight, and by an owner over
/// the limit.
#[derive(Debug, Default)]
pub(super) struct ClientWitness {
    /// The peak instant (ms after the sale opened) and the orders held then.
    pub peak: Option<(u64, Vec<Held>)>,
    /// Cancels answered ok whose send was not recorded: each may have released any order, so
    /// the peak counts that many fewer.
    pub untimed: i64,
    /// The stock sample that shows the most units that cannot exist, and the orders held
    /// while it was in flight.
    pub sample: Option<(StockSample, Vec<Held>)>,
    /// A user over the limit and its orders held at once.
    pub user: Option<(String, Vec<Held>)>,
    /// A device over the limit and its orders held at once.
    pub device: Option<(String, Vec<Held>)>,
}

/// The note for order attempts the shop answered 401/403: it refused the harness's
/// credentials, so those buyers never really tried to buy.
fn unauthorized_note(c: &crate::traffic::recorder::Measurements) -> Option<String> {
    let refused = c
        .attempts()
        .filter(|a| a.answer == crate::traffic::recorder::Answer::Unauthorized)
        .count();
    (refused > 0).then(|| {
        format!(
            "{refused} order attempts were answered 401/403 (unauthorized): the shop refused \
             the harness's credentials — set target.login / headers"
        )
    })
}

/// The clients' records replayed in time: peak oversell, duplicate buyers and devices, and the
/// stock-side peak when the stock was sampled; what proves each, when it is above its bound.
fn held(f: &mut Findings, e: &Evidence<'_>) -> ClientWitness {
    let c = e.clients;
    let acks = &c.records;
    let mut held = replay::held(acks, e.payment_window_ms);
    // A cancel answered ok whose send was not recorded (an older shard file, a request path
    // that records none) may have released its unit at any time: its order is never counted
    // as held, and such cancels that name no order are taken off the peak.
    let timed: HashSet<&str> = c
        .acks()
        .filter(|a| a.cancel_sent_ms.is_some())
        .filter_map(|a| a.order_id)
        .collect();
    let untimed_by_id: HashSet<&str> = c
        .told
        .iter()
        .filter(|(id, t)| **t == Told::Cancelled && !timed.contains(id.as_str()))
        .map(|(id, _)| id.as_str())
        .collect();
    if !untimed_by_id.is_empty() {
        held.retain(|h| {
            acks.ack(h.ack)
                .order_id
                .is_none_or(|id| !untimed_by_id.contains(id))
        });
    }
    let recorded = c.acks().filter(|a| a.cancel_sent_ms.is_some()).count();
    let untimed = c
        .cancels_ok
        .saturating_sub((recorded + untimed_by_id.len()) as u64) as i64;
    let peak = (replay::peak(&held) - untimed).max(0);
    f.payment_window_s = e.payment_window_ms.map(|ms| ms as f64 / 1000.0);
    if e.payment_window_ms.is_none() {
        f.undeclared_window = replay::undeclared_window(acks, e.initial_stock + untimed);
        f.client_notes.push(undeclared_note(f.undeclared_window));
    }
    if let Some(w) = f.undeclared_window {
        let proved = (peak - e.initial_stock).max(0);
        if w.peak_oversell > proved {
            f.unsettled.insert(
                "client_peak_oversell".into(),
                format!(
                    "{proved} with unpaid orders not held, up to {} if the shop keeps them at \
                     least {} s: {UNDECLARED}",
                    w.peak_oversell, w.proves_from_s
                ),
            );
        }
    }
    f.client_peak_held = Some(peak);
    f.client_peak_oversell = Some((peak - e.initial_stock).max(0));
    let limit = e.purchase_limit;
    f.client_duplicate_buyers = Some(replay::owners_over(&held, acks, |a| a.user_id, limit));
    f.client_duplicate_devices = Some(replay::owners_over(&held, acks, |a| a.device_id, limit));
    if e.payment_window_ms.is_none() {
        undeclared_owners(f, e, limit);
    }
    let mut w = witness(f, e, &held, untimed);
    if !e.stock_samples.is_empty() {
        f.stock_samples = Some(e.stock_samples.len() as u64);
        f.stock_samples_settled = Some(e.stock_samples.iter().filter(|s| s.settled).count() as u64);
        f.stock_peak_oversell = replay::stock_peak(&held, &e.stock_samples, e.initial_stock);
        if f.stock_peak_oversell > Some(0) {
            let index = replay::HeldIndex::new(&held);
            w.sample = e
                .stock_samples
                .iter()
                .filter(|s| s.settled)
                .max_by_key(|s| (index.during(s) + s.stock, std::cmp::Reverse(s.sent_ms)))
                .map(|s| (*s, replay::held_during(&held, s)));
        }
    }
    w
}

/// What proves the replay's findings above their bound: the orders held at the peak, and an
/// owner over the limit with its orders held at once.
fn witness(f: &Findings, e: &Evidence<'_>, held: &[Held], untimed: i64) -> ClientWitness {
    let (acks, limit) = (&e.clients.records, e.purchase_limit);
    let mut w = ClientWitness {
        untimed,
        ..ClientWitness::default()
    };
    if f.client_peak_oversell > Some(0) {
        w.peak = replay::peak_at(held).map(|(t, _)| (t, replay::held_at(held, t)));
    }
    let spelled = |(o, hs): (IdRef<'_>, Vec<Held>)| (o.to_string(), hs);
    if f.client_duplicate_buyers > Some(0) {
        w.user = replay::owner_over(held, acks, |a| a.user_id, limit).map(spelled);
    }
    if f.client_duplicate_devices > Some(0) {
        w.device = replay::owner_over(held, acks, |a| a.device_id, limit).map(spelled);
    }
    w
}

/// The declaration that settles a figure resting on the payment window.
const UNDECLARED: &str = "no payment window declared (declare target.payment_window or \
                          --payment-window to settle it)";

/// With no payment window declared: duplicate owners the records show if every unpaid order
/// is held until its cancel, beyond those they prove (only paid orders held): not settled.
fn undeclared_owners(f: &mut Findings, e: &Evidence<'_>, limit: i64) {
    let acks = &e.clients.records;
    let kept = replay::held(acks, Some(u64::MAX));
    for (name, proved, owner) in [
        (
            "client_duplicate_buyers",
            f.client_duplicate_buyers,
            (|a: AckView<'_>| a.user_id) as fn(AckView<'_>) -> IdRef<'_>,
        ),
        (
            "client_duplicate_devices",
            f.client_duplicate_devices,
            |a| a.device_id,
        ),
    ] {
        let upto = replay::owners_over(&kept, acks, owner, limit);
        let proved = proved.unwrap_or(0);
        if upto > proved {
            f.unsettled.insert(
                name.into(),
                format!("{proved} with unpaid orders not held, up to {upto} if the shop keeps them: {UNDECLARED}"),
            );
        }
    }
}

/// The headline rests on the clients' figures: not settled when one of them is not, and it
/// does not already prove oversell.
pub(super) fn unsettled_headline(f: &mut Findings) {
    if f.oversell > Some(0) {
        return;
    }
    let why = ["client_peak_oversell", "client_oversell"]
        .iter()
        .find_map(|m| f.unsettled.get(*m).map(|w| format!("{m}: {w}")));
    if let Some(why) = why {
        f.unsettled.insert("oversell".into(), why);
    }
}

/// What a run without a declared payment window could not prove, and what declaring it adds.
fn undeclared_note(advice: Option<super::UndeclaredWindow>) -> String {
    let lead = "no payment window declared (target.payment_window or --payment-window): the shop may release an \
                unpaid order at any moment, so the replay counts only paid orders as held, \
                from their payment's answer";
    match advice {
        None => format!("{lead}; declaring it would prove no more oversell in this run"),
        Some(w) => format!(
            "{lead}; not verified: if the shop keeps unpaid orders at least {} s, these records \
             prove a peak oversell of up to {} units — declare target.payment_window (or --payment-window) to make \
             it a finding",
            w.proves_from_s, w.peak_oversell
        ),
    }
}

/// People (not bots) whose every order attempt was refused for a reason other than sold out:
/// unauthorized, invalid or not found.
fn refused_buyers(c: &crate::traffic::recorder::Measurements) -> u64 {
    // One byte a buyer (ten million buyers: 10 MB, where a map of them took ~280 MB), unless
    // a buyer index is far past the number of attempts (records read from a file).
    const NONE: u8 = 0;
    const REFUSED: u8 = 1;
    const NOT: u8 = 2;
    let buyers = c.attempts().map(|a| a.buyer).max().map_or(0, |m| m + 1);
    let mut by_buyer: Vec<u8> = Vec::new();
    let mut far: HashMap<usize, u8> = HashMap::new();
    if buyers <= c.attempts().len().saturating_mul(4).max(1 << 16) {
        by_buyer.resize(buyers, NONE);
    }
    for a in c.attempts() {
        let refused = matches!(
            a.answer,
            Answer::Unauthorized | Answer::Invalid | Answer::NotFound
        );
        let state = match by_buyer.get_mut(a.buyer) {
            Some(s) => s,
            None => far.entry(a.buyer).or_insert(NONE),
        };
        *state = if refused && *state != NOT {
            REFUSED
        } else {
            NOT
        };
    }
    let refused = |(b, s): (usize, u8)| s == REFUSED && c.buyers.get(b).is_some_and(|r| !r.bot);
    let dense = by_buyer.iter().enumerate().map(|(b, s)| (b, *s));
    dense.chain(far).filter(|&p| refused(p)).count() as u64
}

/// Order ids acknowledged to more than one attempt. Two acknowledgements of one id under the
/// same key are one attempt told twice (a retry's replay); an acknowledgement without a key is
/// an attempt of its own.
fn duplicate_acks(c: &crate::traffic::recorder::Measurements) -> u64 {
    // Per order id: the first key it was told under (`None`: a keyless attempt), and whether
    // a second attempt was told it (another key, or any keyless one).
    // An id told once is no duplicate: only ids that may repeat are mapped.
    let repeats = super::repeats::Repeats::of(c.acks().filter_map(|a| a.order_id));
    let mut told: HashMap<&str, (Option<KeyRef<'_>>, bool)> = HashMap::new();
    for a in c.acks() {
        let Some(id) = a.order_id.filter(|id| repeats.may_repeat(id)) else {
            continue;
        };
        let key = a.key;
        match told.entry(id) {
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert((key, false));
            }
            hashbrown::hash_map::Entry::Occupied(mut o) => {
                let (first, twice) = o.get_mut();
                *twice |= match (*first, key) {
                    (Some(f), Some(k)) => f != k,
                    _ => true,
                };
            }
        }
    }
    told.values().filter(|(_, twice)| *twice).count() as u64
}

/// Some of the records' acknowledgements, by position.
struct Open<'a> {
    records: &'a ClientRecords,
    open: Vec<usize>,
}

impl AckList for Open<'_> {
    fn len(&self) -> usize {
        self.open.len()
    }

    fn ack(&self, i: usize) -> AckView<'_> {
        self.records.ack(self.open[i])
    }
}

/// The rule to add for one kind of unclassified answer.
fn advice(u: &UnclassifiedAnswer) -> String {
    let seen = format!(
        "{} answered {} {} times (e.g. {:?})",
        u.kind.as_str(),
        u.status,
        u.count,
        u.sample
    );
    if (300..400).contains(&u.status) {
        return format!(
            "{seen}: the harness follows no redirect; point target.{}.path where the shop \
             redirects, or add a rule to target.outcomes for status \"{}\"",
            u.kind.as_str(),
            u.status
        );
    }
    let outcome = if u.kind == Kind::Order {
        "created"
    } else {
        "ok"
    };
    format!(
        "{seen}: add a rule to target.outcomes, e.g. {{ status = [\"{}\"], outcome = \"{outcome}\" }} \
         (with `field`/`equals` to tell it apart from other answers of that status)",
        u.status
    )
}

/// Judges the clients' evidence on its own and against the oracle's `sold` (when `f.sold`
/// is set); `released_unseen`: when the oracle has the database's rows, the released rows of
/// acknowledged orders no client cancelled (rows, units): the shop's own cancellations (or
/// expiries), told apart from lost orders.
pub(super) fn judge(f: &mut Findings, e: &Evidence<'_>, released_unseen: Option<(u64, i64)>) {
    let c = e.clients;
    let cancelled: HashSet<&str> = c
        .told
        .iter()
        .filter(|(_, t)| **t == Told::Cancelled)
        .map(|(id, _)| id.as_str())
        .collect();
    let released_unseen_rows = released_unseen;
    f.shop_released_acks = released_unseen.map(|(n, _)| n);
    // Without rows, what the shop may have released on its own is unseen: the orders that
    // could have expired by the final read are not counted as sold to anyone.
    f.may_have_expired = released_unseen.is_none().then(|| {
        let open = Open {
            records: &c.records,
            open: (0..c.records.len())
                .filter(|i| {
                    c.records
                        .ack(*i)
                        .order_id
                        .is_none_or(|id| !cancelled.contains(id))
                })
                .collect(),
        };
        replay::may_have_expired(&open, e.payment_window_ms, e.audited_ms)
    });
    let released_unseen =
        released_unseen.map_or(f.may_have_expired.unwrap_or(0) as i64, |(_, units)| units);
    let restocks = c.cancels_ok as i64 + released_unseen;
    let net = f.acknowledged as i64 - restocks;
    f.restocks_seen = Some(restocks);
    f.client_net_acks = net;
    f.client_oversell = Some((net - e.initial_stock).max(0));
    f.oracle_disagreement = f.sold.map(|sold| (net - sold).max(0));
    if e.payment_window_ms.is_none() && released_unseen_rows.is_none() {
        // Without rows and without a window, orders unpaid and not cancelled were taken as
        // released by the shop: what the figures are if it kept them instead.
        let kept = f.acknowledged as i64 - c.cancels_ok as i64;
        let over = (kept - e.initial_stock).max(0);
        if over > f.client_oversell.unwrap_or(0) {
            f.unsettled.insert(
                "client_oversell".into(),
                format!(
                    "{} with every unpaid order released by the shop, {over} if it kept them: \
                     {UNDECLARED}",
                    f.client_oversell.unwrap_or(0)
                ),
            );
        }
        if let Some(sold) = f
            .sold
            .filter(|sold| kept - sold > f.oracle_disagreement.unwrap_or(0))
        {
            f.unsettled.insert(
                "oracle_disagreement".into(),
                format!(
                    "{} acknowledged units are missing from the oracle's count ({sold} sold) \
                     unless the shop released unpaid orders on its own: {UNDECLARED}",
                    kept - sold
                ),
            );
        }
    }
    let left = e.initial_stock - f.sold.unwrap_or(net);
    f.undersell = Some(left.max(0).min(f.refused_buyers as i64));
    if let Some(n) = f.may_have_expired.filter(|n| *n > 0) {
        f.client_notes.push(format!(
            "client evidence: {n} acknowledged orders, unpaid and not cancelled, may have been \
             released by the shop on its own before the final read ({}); without order rows \
             they are not counted as held at the end",
            match e.payment_window_ms {
                Some(ms) => format!("past their {} s payment window", ms as f64 / 1000.0),
                None => "no payment window declared".into(),
            }
        ));
    }
}
