//! What a correct shop must answer adversarial buyers (`[adversarial]`), and one key that
//! bought more than once (`duplicate_orders_per_key`).
//!
//! [`RULES`] is the table (docs/src/rehearsal/adversarial.md repeats it). Only a decisive answer is judged:
//! `ok` (the step was applied) or `rejected` (409: the order's state forbids it) to a pay or
//! cancel, `created` (with its order id) or a clean refusal to a resent order. A timeout, a
//! broken connection, a 5xx or an answer no rule reads told the client nothing and is never a
//! wrong answer (it is an error, counted as one).
//!
//! What the shop then did is judged against the rows (`orders.rs`'s status mismatches, with
//! [`refused_but_applied`]): a pay refused as `rejected` (and never answered ok) must not leave
//! the order paid, a refused cancel must not leave it cancelled.

use super::Findings;
#[cfg(test)]
use crate::model::Order;
use crate::model::OrderStatus;
use crate::traffic::adversary::Script;
use crate::traffic::recorder::{Answer, AnswerClass, FollowUp, KeyRef, Kind, Measurements};
use serde::{Deserialize, Serialize};
#[cfg(test)]
use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};

/// The answers a correct shop gives each script: (script, what the buyer sends, what a correct
/// shop answers). Anything else decisive is a wrong answer.
#[cfg(test)]
pub const RULES: &[(Script, &str, &str)] = &[
    (
        Script::CancelAfterPay,
        "pay, then cancel",
        "a cancel after a pay answered ok is refused (`rejected`): a paid order is not cancelled",
    ),
    (
        Script::CancelTwice,
        "cancel, then cancel",
        "the second cancel is `ok` (idempotent) or `rejected`; the units go back once",
    ),
    (
        Script::PayTwice,
        "pay, then pay",
        "the second pay is `ok` (idempotent) or `rejected`; a pay refused as `rejected` is never followed by a pay answered ok",
    ),
    (
        Script::PayAfterCancel,
        "cancel, then pay",
        "a pay after a cancel answered ok is refused (`rejected`): a cancelled order is not paid",
    ),
    (
        Script::PayAndCancel,
        "pay and cancel at once",
        "at most one of them is `ok`; the order ends as that one says",
    ),
    (
        Script::AtTimeout,
        "pay at the end of the payment window",
        "`ok` or `rejected`; the order then ends paid (ok) or released (rejected)",
    ),
    (
        Script::ResendSameKey,
        "the order again, same Idempotency-Key, then pay",
        "the resend of a created order is `created` with the same order id, never a second order nor a refusal",
    ),
];

/// Why a sequence of answers is wrong: each is one row of [`RULES`] broken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wrong {
    /// One order told both paid and cancelled.
    PaidAndCancelled,
    /// A pay answered ok after a pay of the same order was refused as `rejected`.
    PaidAfterRefusal,
    /// A resend with the same key got a different order.
    ResendNewOrder,
    /// A resend with the same key of a created order was refused.
    ResendRefused,
}

impl Wrong {
    /// What went wrong, for people.
    pub fn as_str(self) -> &'static str {
        match self {
            Wrong::PaidAndCancelled => "one order was told both paid and cancelled",
            Wrong::PaidAfterRefusal => "a pay answered ok after the shop refused to pay the order",
            Wrong::ResendNewOrder => {
                "the resend with the same Idempotency-Key got another order (a second order for one key)"
            }
            Wrong::ResendRefused => {
                "the resend with the same Idempotency-Key of a created order was refused: its client never learns it holds the order"
            }
        }
    }
}

/// One order answered wrongly: what was sent, what came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WrongAnswer {
    pub script: Script,
    pub order_id: Option<String>,
    pub key: String,
    /// `order → created, pay → ok, cancel → ok`.
    pub sequence: String,
    pub why: Wrong,
}

/// One idempotency key that bought more than one order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyDuplicate {
    pub key: String,
    pub order_ids: Vec<String>,
    /// `order rows` or `clients' records`.
    pub seen_in: String,
}

/// How many examples a finding keeps.
const EXAMPLES: usize = 20;

/// The rule `f`'s answers break, if any (`ids`: the shop gives order ids).
pub fn judge(f: &FollowUp, ids: bool) -> Option<Wrong> {
    let ok = |kind: Kind| {
        f.steps
            .iter()
            .any(|s| s.kind == kind && s.answer == Answer::Ok)
    };
    if ok(Kind::Pay) && ok(Kind::Cancel) {
        return Some(Wrong::PaidAndCancelled);
    }
    let mut pay_rejected = false;
    for s in &f.steps {
        match (s.kind, s.answer) {
            (Kind::Pay, Answer::Rejected) => pay_rejected = true,
            (Kind::Pay, Answer::Ok) if pay_rejected => return Some(Wrong::PaidAfterRefusal),
            (Kind::Order, a) if f.ordered == Answer::Created => match AnswerClass::of(a) {
                AnswerClass::Acknowledged
                    if ids && s.order_id.is_some() && s.order_id != f.order_id =>
                {
                    return Some(Wrong::ResendNewOrder)
                }
                AnswerClass::Refused => return Some(Wrong::ResendRefused),
                _ => {}
            },
            _ => {}
        }
    }
    None
}

/// `order → created, pay → ok, cancel → rejected`.
fn sequence(f: &FollowUp) -> String {
    std::iter::once(format!("order → {}", f.ordered.as_str()))
        .chain(
            f.steps
                .iter()
                .map(|s| format!("{} → {}", s.kind.as_str(), s.answer.as_str())),
        )
        .collect::<Vec<_>>()
        .join(", ")
}

/// The clients' side: every adversarial buyer's order judged by [`RULES`], and the keys the
/// clients saw acknowledged with more than one order id.
pub(super) fn observe(f: &mut Findings, c: &Measurements, ids: bool, keys_sent: bool) {
    f.follow_ups = Some(c.follow_ups.len() as u64);
    let wrong: Vec<WrongAnswer> = c
        .follow_ups
        .iter()
        .filter_map(|fu| {
            judge(fu, ids).map(|why| WrongAnswer {
                script: fu.script,
                order_id: fu.order_id.clone(),
                key: fu.key.clone(),
                sequence: sequence(fu),
                why,
            })
        })
        .collect();
    f.wrong_answers = Some(wrong.len() as u64);
    f.wrong_answer_examples = wrong.into_iter().take(EXAMPLES).collect();
    if !keys_sent {
        return;
    }
    // Each key's first order id; a key told a second id keeps them all (rare). A key told one
    // id once shares nothing: only the keys that may repeat are mapped.
    let told = || {
        c.attempts()
            .filter(|a| a.answer == Answer::Created && a.order_id.is_some())
    };
    let repeats = super::repeats::Repeats::of(told().map(|a| a.key));
    let mut first: hashbrown::HashMap<KeyRef<'_>, &str> = hashbrown::HashMap::new();
    let mut shared: BTreeMap<KeyRef<'_>, BTreeSet<&str>> = BTreeMap::new();
    for a in told().filter(|a| repeats.may_repeat(&a.key)) {
        if let (Answer::Created, Some(id)) = (a.answer, a.order_id) {
            let was = *first.entry(a.key).or_insert(id);
            if was != id || shared.contains_key(&a.key) {
                let ids = shared.entry(a.key).or_default();
                ids.insert(was);
                ids.insert(id);
            }
        }
    }
    let dups = duplicates(shared, "clients' records");
    f.duplicate_orders_per_key = Some(extra(&dups));
    f.duplicate_key_examples = dups.into_iter().take(EXAMPLES).collect();
}

/// The order rows' side: rows sharing one idempotency key. The finding is the larger of the
/// rows' and the clients' counts (each sees what the other may not: the rows an indeterminate
/// attempt that bought, the clients an order the rows lost).
#[cfg(test)]
pub(super) fn rows(f: &mut Findings, orders: &[Order], keys_sent: bool) {
    if !keys_sent {
        return;
    }
    let mut by_key: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for o in orders {
        if let Some(k) = o.idempotency_key.as_deref() {
            by_key.entry(k).or_default().insert(o.id.as_str());
        }
    }
    apply_rows(f, by_key);
}

/// [`rows`] from the rows' order ids by key (keys with one id may be left out: they share
/// nothing).
pub(super) fn apply_rows(f: &mut Findings, by_key: BTreeMap<&str, BTreeSet<&str>>) {
    let dups = duplicates(by_key, "order rows");
    let n = extra(&dups);
    if n >= f.duplicate_orders_per_key.unwrap_or(0) {
        f.duplicate_orders_per_key = Some(n);
        if n > 0 {
            f.duplicate_key_examples = dups.into_iter().take(EXAMPLES).collect();
        }
    }
}

/// Keys with more than one order id.
fn duplicates<K: std::fmt::Display>(
    by_key: BTreeMap<K, BTreeSet<&str>>,
    seen_in: &str,
) -> Vec<KeyDuplicate> {
    by_key
        .into_iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(key, ids)| KeyDuplicate {
            key: key.to_string(),
            order_ids: ids.into_iter().map(str::to_string).collect(),
            seen_in: seen_in.to_string(),
        })
        .collect()
}

/// Orders beyond the first of each key.
fn extra(dups: &[KeyDuplicate]) -> u64 {
    dups.iter().map(|d| d.order_ids.len() as u64 - 1).sum()
}

/// Adversarial orders whose row contradicts a refusal: a pay refused as `rejected` (never
/// answered ok) yet the order is paid, or a refused cancel yet it is cancelled. Counted among
/// the status mismatches.
#[cfg(test)]
pub(super) fn refused_but_applied(c: &Measurements, in_db: &HashMap<&str, &Order>) -> u64 {
    refused_but_applied_by(c, |id| in_db.get(id).map(|o| o.status))
}

/// [`refused_but_applied`] with each order's status in the rows (`None`: no row).
pub(super) fn refused_but_applied_by(
    c: &Measurements,
    status_of: impl Fn(&str) -> Option<OrderStatus>,
) -> u64 {
    c.follow_ups
        .iter()
        .filter(|fu| {
            let Some(status) = fu.order_id.as_deref().and_then(&status_of) else {
                return false;
            };
            let answered = |kind: Kind, answer: Answer| {
                fu.steps
                    .iter()
                    .any(|s| s.kind == kind && s.answer == answer)
            };
            let refused =
                |kind: Kind| answered(kind, Answer::Rejected) && !answered(kind, Answer::Ok);
            (refused(Kind::Pay) && status == OrderStatus::Paid)
                || (refused(Kind::Cancel) && status == OrderStatus::Cancelled)
        })
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::recorder::Step;

    fn follow_up(script: Script, steps: &[(Kind, Answer)]) -> FollowUp {
        FollowUp {
            script,
            buyer: 0,
            key: "k".into(),
            order_id: Some("A".into()),
            ordered: Answer::Created,
            steps: steps
                .iter()
                .map(|(kind, answer)| Step {
                    kind: *kind,
                    answer: *answer,
                    order_id: None,
                    at_ms: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn every_script_has_one_row_in_the_table() {
        let scripts: Vec<Script> = RULES.iter().map(|r| r.0).collect();
        assert_eq!(scripts, Script::ALL);
    }

    #[test]
    fn the_answers_a_correct_shop_gives_are_never_wrong() {
        use Answer::*;
        use Kind::*;
        for (script, steps) in [
            (Script::CancelAfterPay, vec![(Pay, Ok), (Cancel, Rejected)]),
            (Script::CancelAfterPay, vec![(Pay, Rejected), (Cancel, Ok)]),
            (Script::CancelTwice, vec![(Cancel, Ok), (Cancel, Ok)]),
            (Script::CancelTwice, vec![(Cancel, Ok), (Cancel, Rejected)]),
            (Script::PayTwice, vec![(Pay, Ok), (Pay, Ok)]),
            (Script::PayTwice, vec![(Pay, Ok), (Pay, Rejected)]),
            (Script::PayAfterCancel, vec![(Cancel, Ok), (Pay, Rejected)]),
            (Script::PayAndCancel, vec![(Pay, Ok), (Cancel, Rejected)]),
            (Script::PayAndCancel, vec![(Pay, Rejected), (Cancel, Ok)]),
            (Script::AtTimeout, vec![(Pay, Rejected)]),
            (Script::AtTimeout, vec![(Pay, Ok)]),
            // Errors tell the client nothing: never judged.
            (Script::PayAfterCancel, vec![(Cancel, Timeout), (Pay, Ok)]),
        ] {
            assert_eq!(
                judge(&follow_up(script, &steps), true),
                None,
                "{script:?} {steps:?}"
            );
        }
    }

    #[test]
    fn each_broken_rule_is_named() {
        use Answer::*;
        use Kind::*;
        for (script, steps, why) in [
            (
                Script::CancelAfterPay,
                vec![(Pay, Ok), (Cancel, Ok)],
                Wrong::PaidAndCancelled,
            ),
            (
                Script::PayAfterCancel,
                vec![(Cancel, Ok), (Pay, Ok)],
                Wrong::PaidAndCancelled,
            ),
            (
                Script::PayAndCancel,
                vec![(Pay, Ok), (Cancel, Ok)],
                Wrong::PaidAndCancelled,
            ),
            (
                Script::PayTwice,
                vec![(Pay, Rejected), (Pay, Ok)],
                Wrong::PaidAfterRefusal,
            ),
        ] {
            assert_eq!(
                judge(&follow_up(script, &steps), true),
                Some(why),
                "{script:?}"
            );
        }
    }

    #[test]
    fn a_resend_must_get_the_same_order() {
        let mut f = follow_up(Script::ResendSameKey, &[(Kind::Order, Answer::Created)]);
        f.steps[0].order_id = Some("A".into());
        assert_eq!(judge(&f, true), None);
        f.steps[0].order_id = Some("B".into());
        assert_eq!(judge(&f, true), Some(Wrong::ResendNewOrder));
        assert_eq!(
            judge(&f, false),
            None,
            "without ids the ids cannot be compared"
        );
        f.steps[0].answer = Answer::Duplicate;
        assert_eq!(judge(&f, true), Some(Wrong::ResendRefused));
        f.steps[0].answer = Answer::Timeout;
        assert_eq!(judge(&f, true), None, "a lost answer says nothing");
        f.ordered = Answer::Timeout;
        f.steps[0].answer = Answer::SoldOut;
        assert_eq!(
            judge(&f, true),
            None,
            "the first attempt's answer was lost: a refusal of the resend is fair"
        );
        assert_eq!(
            sequence(&f),
            "order → timeout, order → sold_out",
            "the sequence sent, with its answers"
        );
    }

    fn order(id: &str, key: Option<&str>, status: OrderStatus) -> Order {
        Order {
            id: id.into(),
            item_id: 1,
            user_id: format!("u-{id}"),
            device_id: None,
            qty: 1,
            status,
            created_at_ms: 0,
            updated_at_ms: 0,
            idempotency_key: key.map(str::to_string),
            stock_read: None,
        }
    }

    #[test]
    fn rows_sharing_a_key_count_beyond_the_first_and_beat_the_clients_view() {
        let mut f = Findings::default();
        let mut c = Measurements::default();
        c.edit_records(|attempts, _| {
            attempts.push(crate::traffic::recorder::Attempt {
                key: "k1".into(),
                buyer: 0,
                answer: Answer::Created,
                class: AnswerClass::Acknowledged,
                order_id: Some("A".into()),
                at_ms: 0,
                retry: false,
            })
        });
        observe(&mut f, &c, true, true);
        assert_eq!(
            f.duplicate_orders_per_key,
            Some(0),
            "the clients saw one order"
        );
        let orders = [
            order("A", Some("k1"), OrderStatus::Paid),
            // A timed-out first try that bought, and its retry that bought again.
            order("B", Some("k1"), OrderStatus::PendingPayment),
            order("C", Some("k2"), OrderStatus::Paid),
            order("D", None, OrderStatus::Paid),
            order("E", None, OrderStatus::Paid),
        ];
        rows(&mut f, &orders, true);
        assert_eq!(f.duplicate_orders_per_key, Some(1));
        assert_eq!(f.duplicate_key_examples[0].order_ids, ["A", "B"]);
        assert_eq!(f.duplicate_key_examples[0].seen_in, "order rows");
        let mut none = Findings::default();
        observe(&mut none, &c, true, false);
        rows(&mut none, &orders, false);
        assert_eq!(
            none.duplicate_orders_per_key, None,
            "no keys sent: not measured"
        );
    }

    #[test]
    fn a_refusal_the_rows_contradict_is_a_status_mismatch() {
        let c = Measurements {
            follow_ups: vec![
                follow_up(Script::AtTimeout, &[(Kind::Pay, Answer::Rejected)]),
                follow_up(
                    Script::CancelAfterPay,
                    &[(Kind::Pay, Answer::Ok), (Kind::Cancel, Answer::Rejected)],
                ),
            ],
            ..Measurements::default()
        };
        let paid = order("A", None, OrderStatus::Paid);
        let in_db: HashMap<&str, &Order> = [("A", &paid)].into();
        assert_eq!(
            refused_but_applied(&c, &in_db),
            1,
            "the pay refused at the timeout left the order paid; the refused cancel kept it paid"
        );
        let expired = order("A", None, OrderStatus::Expired);
        let in_db: HashMap<&str, &Order> = [("A", &expired)].into();
        assert_eq!(refused_but_applied(&c, &in_db), 0);
    }
}
