//! How the clients' answers are sorted and replayed: each order by the attempt that asked for
//! it, order ids told twice, the answer classes, the clients' replay, the stock samples, and
//! the book's worked example.

use super::tests::{clients, evidence, order};
use super::*;
use crate::model::OrderStatus;
use crate::traffic::recorder::{Ack, Told};

#[test]
fn every_order_is_sorted_by_the_attempt_that_asked_for_it() {
    use crate::traffic::recorder::{Answer, AnswerClass, Attempt};
    let attempt = |key: &str, answer: Answer, id: Option<&str>| Attempt {
        retry: false,
        key: key.into(),
        buyer: 0,
        answer,
        class: AnswerClass::of(answer),
        order_id: id.map(Into::into),
        at_ms: 0,
    };
    let keyed = |id: &str, key: Option<&str>| Order {
        idempotency_key: key.map(str::to_string),
        ..order(
            id,
            if id == "y" { "intruder" } else { "u1" },
            OrderStatus::PendingPayment,
        )
    };
    let mut c = clients(&[("a", "u1")]);
    c.edit_records(|attempts, acks| {
        *attempts = vec![
            attempt("k-0", Answer::Created, Some("a")),
            attempt("k-late", Answer::Timeout, None),
            attempt("k-503", Answer::ServerError, None),
            attempt("k-no", Answer::SoldOut, None),
            attempt("k-noid", Answer::Created, None),
        ];
        acks.push(Ack {
            key: Some("k-noid".into()),
            order_id: None,
            ..acks[0].clone()
        });
    });
    let orders = vec![
        keyed("a", Some("k-0")),
        // The client gave up before the shop committed: indeterminate, and it bought.
        keyed("late", Some("k-late")),
        // The shop said sold out and bought anyway.
        keyed("no", Some("k-no")),
        // An answer that carried no id, traced by its key.
        keyed("noid", Some("k-noid")),
        // Nobody asked: inserted behind the clients' backs.
        keyed("x", Some("someone-else")),
        keyed("y", None),
    ];
    let truth = || Truth::Orders {
        db_stock: 4,
        orders: orders.clone(),
    };
    let f = audit(&evidence(10, truth(), &c));
    assert_eq!(f.orders_acknowledged, Some(2));
    assert_eq!(f.indeterminate, 2, "the timeout and the 5xx");
    assert_eq!(f.indeterminate_committed, Some(1));
    assert_eq!(f.refused_committed, Some(1));
    assert_eq!(f.phantom_orders, Some(2));
    assert!(
        f.verdict.contains("2 phantom orders")
            && f.verdict
                .contains("1 of 2 indeterminate order attempts committed")
            && f.verdict
                .contains("1 orders committed for requests the shop refused"),
        "{}",
        f.verdict
    );
    // Keys that were never sent trace nothing: beyond the acknowledged id, the rows are held
    // against their buyer's attempts (u1: one acknowledged without an id, two indeterminate,
    // one refused explain its four other rows); only the intruder's row is a phantom.
    let f = audit(&Evidence {
        reading: Reading {
            keys_sent: false,
            ..evidence(10, truth(), &c).reading
        },
        ..evidence(10, truth(), &c)
    });
    assert_eq!(
        (
            f.orders_acknowledged,
            f.indeterminate_committed,
            f.refused_committed,
            f.phantom_orders
        ),
        (Some(2), Some(2), Some(1), Some(1))
    );
}

#[test]
fn one_order_id_told_to_two_attempts_is_a_duplicate_ack_and_a_replay_is_not() {
    let mut c = clients(&[("a", "u1"), ("b", "u2"), ("b", "u3")]);
    // A retry of attempt k-0 told the same order again: one attempt, not a finding.
    c.edit_records(|_, acks| acks.push(acks[0].clone()));
    let orders = vec![
        order("a", "u1", OrderStatus::Paid),
        order("b", "u2", OrderStatus::Paid),
    ];
    let f = audit(&evidence(
        5,
        Truth::Orders {
            db_stock: 3,
            orders,
        },
        &c,
    ));
    assert_eq!(f.duplicate_acks, Some(1), "b was told to two attempts");
    assert!(
        f.verdict
            .contains("1 order ids were acknowledged to more than one attempt"),
        "{}",
        f.verdict
    );
    // Without order ids there is nothing to compare.
    let f = audit(&Evidence {
        reading: Reading {
            order_id_field: None,
            max_unclassified: 0.01,
            keys_sent: true,
        },
        ..evidence(5, Truth::Unverified, &c)
    });
    assert_eq!(f.duplicate_acks, None);
}

#[test]
fn order_answers_sort_into_acknowledged_refused_and_indeterminate() {
    use crate::traffic::recorder::{Answer, AnswerClass};
    for a in Answer::ALL {
        let expected = match a {
            Answer::Created => AnswerClass::Acknowledged,
            Answer::SoldOut
            | Answer::Duplicate
            | Answer::RateLimited
            | Answer::Rejected
            | Answer::NotFound
            | Answer::Invalid
            | Answer::Unauthorized => AnswerClass::Refused,
            // A 5xx, a timeout, a broken connection, or an answer the mapping cannot read.
            _ => AnswerClass::Indeterminate,
        };
        assert_eq!(AnswerClass::of(a), expected, "{}", a.as_str());
    }
}

#[test]
fn the_clients_replay_proves_a_covered_up_peak_and_duplicate_buyers_without_an_oracle() {
    // Stock 2: three acknowledged at once, two by one user; one cancelled later. The final
    // count (3 − 1 = 2) looks fine; the peak (3 at once) and the user holding 2 do not.
    let mut c = clients(&[("a", "u1"), ("b", "u1"), ("c", "u2")]);
    c.edit_records(|_, acks| {
        for (i, a) in acks.iter_mut().enumerate() {
            a.at_ms = 10 + i as u64;
        }
        acks[2].cancel_sent_ms = Some(100);
    });
    c.cancels_ok = 1;
    let f = audit(&evidence(2, Truth::Unverified, &c));
    assert_eq!(f.client_oversell, Some(0));
    assert_eq!(f.client_peak_held, Some(3));
    assert_eq!(f.client_peak_oversell, Some(1));
    assert_eq!(f.client_duplicate_buyers, Some(1));
    assert_eq!(f.client_duplicate_devices, Some(1));
    assert_eq!(f.stock_peak_oversell, None, "no stock sampled");
    assert!(
        f.verdict.contains("client-observed peak oversell 1"),
        "{}",
        f.verdict
    );
    assert!(
        f.verdict.contains("1 users held more than the limit"),
        "{}",
        f.verdict
    );
}

#[test]
fn stock_samples_give_the_stock_extremes_and_the_stock_side_peak() {
    let mut c = clients(&[("a", "u1"), ("b", "u2")]);
    c.edit_records(|_, acks| {
        for a in acks {
            a.at_ms = 10;
        }
    });
    let mut e = evidence(
        5,
        Truth::Totals {
            sold: 2,
            stock: Some(3),
        },
        &c,
    );
    e.stock_samples = vec![
        StockSample {
            sent_ms: 0,
            answered_ms: 1,
            stock: 5,
            settled: true,
        },
        // Two held and 4 in stock: one unit too many.
        StockSample {
            sent_ms: 1000,
            answered_ms: 1001,
            stock: 4,
            settled: true,
        },
    ];
    let f = audit(&e);
    assert_eq!((f.min_stock_seen, f.max_stock_seen), (Some(4), Some(5)));
    assert_eq!(f.stock_samples, Some(2));
    assert_eq!(f.stock_peak_oversell, Some(1));
    assert!(
        f.verdict.contains("stock-side peak oversell"),
        "{}",
        f.verdict
    );
}

#[test]
fn the_docs_worked_example_reads_as_documented() {
    // docs/src/rehearsal/evidence.md: stock 2; A, B, C acknowledged at 20, 25, 30 ms; C's cancel sent at
    // 200 ms; a stock reading sent at 1000 ms returned 3; the oracle counts 2 sold, stock 3.
    let mut c = clients(&[("A", "u1"), ("B", "u2"), ("C", "u3")]);
    c.edit_records(|_, acks| {
        for (a, (sent, at)) in acks.iter_mut().zip([(10, 20), (12, 25), (10, 30)]) {
            (a.sent_ms, a.at_ms) = (sent, at);
        }
        acks[2].cancel_sent_ms = Some(200);
    });
    c.cancels_ok = 1;
    c.told.insert("C".into(), Told::Cancelled);
    let mut e = evidence(
        2,
        Truth::Totals {
            sold: 2,
            stock: Some(3),
        },
        &c,
    );
    e.stock_samples = vec![
        StockSample {
            sent_ms: 0,
            answered_ms: 2,
            stock: 2,
            settled: true,
        },
        StockSample {
            sent_ms: 1000,
            answered_ms: 1003,
            stock: 3,
            settled: true,
        },
    ];
    let f = audit(&e);
    assert_eq!(
        f.verdict,
        "3 orders for 2 units: 1 oversold by the clients' records; the oracle counts none at the \
         end (sold 2 of 2); stock rose above the initial 2 (to 3); \
         conservation drift -3; clients provably held 3 units at once for 2: client-observed \
         peak oversell 1; the stock sampled during the sale showed 3 units that cannot exist \
         (held by clients + stock read, above the initial 2): stock-side peak oversell"
    );
}

#[test]
fn a_cancel_recorded_without_its_send_never_counts_its_order_as_held() {
    // Stock 1: two acknowledged at once, one cancelled, but the record has no cancel send
    // (an older shard file): nothing is proved about when it was released.
    let mut c = clients(&[("a", "u1"), ("b", "u2")]);
    c.cancels_ok = 1;
    c.told.insert("b".into(), Told::Cancelled);
    let f = audit(&evidence(1, Truth::Unverified, &c));
    assert_eq!(f.client_peak_held, Some(1));
    assert_eq!(f.client_peak_oversell, Some(0));
    // Without order ids the cancel is taken off the peak instead.
    let mut c = clients(&[("a", "u1"), ("b", "u2")]);
    c.edit_records(|_, acks| {
        for a in acks {
            a.order_id = None;
        }
    });
    c.cancels_ok = 1;
    let f = audit(&evidence(1, Truth::Unverified, &c));
    assert_eq!(f.client_peak_held, Some(1));
}
