//! Evidence that rests only on what the run observed or the user declared: order rows matched
//! by buyer when the shop gives no ids, and a payment window nobody declared.

use super::*;
use crate::model::OrderStatus;
use crate::traffic::recorder::{Ack, Answer, AnswerClass, Attempt};

/// `n` buyers `u0..`, each one order attempt (key `k-i`) acknowledged without an order id at
/// `i` ms, sent at 0, unpaid.
fn acked_without_ids(n: usize) -> Measurements {
    let acks: Vec<Ack> = (0..n)
        .map(|i| Ack {
            key: Some(format!("k-{i}").into()),
            order_id: None,
            buyer: i,
            user_id: format!("u{i}"),
            device_id: format!("d{i}"),
            bot: false,
            at_ms: 10 + i as u64,
            sent_ms: i as u64,
            cancel_sent_ms: None,
            paid_ms: None,
        })
        .collect();
    let attempts: Vec<Attempt> = (0..n)
        .map(|i| Attempt {
            key: format!("k-{i}").into(),
            buyer: i,
            answer: Answer::Created,
            class: AnswerClass::Acknowledged,
            order_id: None,
            at_ms: 10 + i as u64,
            retry: false,
        })
        .collect();
    Measurements {
        records: crate::traffic::recorder::ClientRecords::from_spelled(&attempts, &acks),
        ..Measurements::default()
    }
}

/// A row of the shop's table: no idempotency key, no timestamps (a foreign shop's).
fn row(id: &str, user: &str) -> Order {
    Order {
        id: id.into(),
        item_id: 0,
        user_id: user.into(),
        device_id: None,
        qty: 1,
        status: OrderStatus::PendingPayment,
        created_at_ms: 0,
        updated_at_ms: 0,
        idempotency_key: None,
        stock_read: None,
    }
}

fn evidence<'a>(stock: i64, truth: Truth, c: &'a Measurements) -> Evidence<'a> {
    Evidence {
        initial_stock: stock,
        purchase_limit: 1,
        truth,
        oracle: OracleView::default(),
        reading: Reading {
            order_id_field: None,
            max_unclassified: 0.01,
            keys_sent: true,
        },
        redis_stock: None,
        reconcile_residual: None,
        stock_seen: None,
        redis_restocked_orders: None,
        dead_letters: None,
        payment_window_ms: None,
        audited_ms: Some(60_000),
        opened_ms: None,
        stock_samples: Vec::new(),
        restocks: None,
        clients: c,
        users: None,
    }
}

fn rows(orders: Vec<Order>) -> Truth {
    Truth::Rows(ForeignRows {
        orders,
        ..ForeignRows::default()
    })
}

#[test]
fn a_shop_without_order_ids_has_its_rows_matched_by_buyer_and_no_phantom() {
    let c = acked_without_ids(20);
    let table: Vec<Order> = (0..20)
        .map(|i| row(&format!("r{i}"), &format!("u{i}")))
        .collect();
    let f = audit(&evidence(20, rows(table), &c));
    assert_eq!(f.phantom_orders, Some(0), "{:?}", f.client_notes);
    assert_eq!(f.orders_acknowledged, Some(20));
    assert!(f.client_notes.iter().any(|n| n.contains("20 order rows")));
    assert!(!f.verdict.contains("phantom"), "{}", f.verdict);
}

#[test]
fn its_twin_that_writes_a_second_row_for_one_buyer_has_one_phantom() {
    let c = acked_without_ids(20);
    let mut table: Vec<Order> = (0..20)
        .map(|i| row(&format!("r{i}"), &format!("u{i}")))
        .collect();
    table.push(row("r-extra", "u3"));
    let f = audit(&evidence(20, rows(table), &c));
    assert_eq!(f.phantom_orders, Some(1));
    assert!(f.verdict.contains("1 phantom orders"), "{}", f.verdict);
}

#[test]
fn a_refused_buyers_row_is_refused_and_committed_and_an_indeterminate_ones_committed() {
    let mut c = acked_without_ids(2);
    c.edit_records(|attempts, _| {
        for (i, answer) in [(2, Answer::SoldOut), (3, Answer::Timeout)] {
            attempts.push(Attempt {
                key: format!("k-{i}").into(),
                buyer: i,
                answer,
                class: AnswerClass::of(answer),
                order_id: None,
                at_ms: 30,
                retry: false,
            });
        }
    });
    let smoke = crate::scenarios::Bundled::named("smoke")
        .unwrap()
        .load()
        .unwrap();
    let s = crate::traffic::schedule::build(&smoke);
    let users: Vec<String> = (0..4).map(|i| s.user_id(i).unwrap().to_string()).collect();
    c.edit_records(|_, acks| {
        for (a, u) in acks.iter_mut().zip(&users) {
            a.user_id = u.clone();
        }
    });
    let table: Vec<Order> = users
        .iter()
        .enumerate()
        .map(|(i, u)| row(&format!("r{i}"), u))
        .collect();
    let f = audit(&Evidence {
        users: Some(&s),
        ..evidence(2, rows(table), &c)
    });
    assert_eq!(f.refused_committed, Some(1));
    assert_eq!(f.indeterminate_committed, Some(1));
    assert_eq!(f.phantom_orders, Some(0));
}

#[test]
fn rows_whose_users_are_not_the_runs_leave_phantoms_not_verified() {
    let c = acked_without_ids(3);
    let table = vec![row("a", "17"), row("b", "18"), row("c", "19")];
    let f = audit(&evidence(3, rows(table), &c));
    assert_eq!(f.phantom_orders, None);
    assert!(f
        .client_notes
        .iter()
        .any(|n| n.contains("phantom orders not verified")));
}

/// A shop that expires unpaid orders after 1.5 s and sells the units again: 30 units, every
/// buyer's order acknowledged 100 ms after it was sent, one every 50 ms, none paid or
/// cancelled (ms after the opening).
fn early_expiry() -> Measurements {
    let mut c = acked_without_ids(0);
    c.edit_records(|_, acks| {
        for i in 0..90u64 {
            acks.push(Ack {
                key: Some(format!("k-{i}").into()),
                order_id: Some(format!("o-{i}").into()),
                buyer: i as usize,
                user_id: format!("u{i}"),
                device_id: format!("d{i}"),
                bot: false,
                at_ms: i * 50 + 100,
                sent_ms: i * 50,
                cancel_sent_ms: None,
                paid_ms: None,
            });
        }
    });
    c
}

#[test]
fn an_undeclared_payment_window_is_unknown_and_proves_nothing_about_unpaid_orders() {
    let c = early_expiry();
    let f = audit(&evidence(30, Truth::Unverified, &c));
    assert_eq!(f.payment_window_s, None);
    assert_eq!(f.client_peak_oversell, Some(0), "{:?}", f.client_notes);
    assert_eq!(
        f.client_oversell,
        Some(0),
        "unpaid orders may have expired: {f:?}"
    );
    assert_eq!(f.may_have_expired, Some(90));
    // What declaring the window would add: 31 held at once past 1.5 s... from 1.55 s on.
    let w = f.undeclared_window.expect("advice");
    assert!(w.peak_oversell > 0);
    assert!(w.proves_from_s > 1.5, "{w:?}");
    assert!(
        f.client_notes
            .iter()
            .any(|n| n.contains("declare target.payment_window")),
        "{:?}",
        f.client_notes
    );
}

#[test]
fn the_true_window_declared_still_passes_and_a_longer_one_proves_oversell() {
    let c = early_expiry();
    let declared = |ms| {
        audit(&Evidence {
            payment_window_ms: Some(ms),
            ..evidence(30, Truth::Unverified, &c)
        })
    };
    let right = declared(1_500);
    assert_eq!(right.client_peak_oversell, Some(0));
    assert_eq!(right.undeclared_window, None);
    // Declaring 900 s for a shop that keeps them 1.5 s is the user's claim: then the units
    // re-sold are proof of oversell under it.
    let wrong = declared(900_000);
    assert!(wrong.client_peak_oversell > Some(0));
}

#[test]
fn paid_orders_are_held_without_a_window_and_oversell_among_them_is_proven() {
    let mut c = early_expiry();
    c.edit_records(|_, acks| {
        for a in acks {
            a.paid_ms = Some(a.at_ms + 5);
        }
    });
    let f = audit(&evidence(30, Truth::Unverified, &c));
    assert_eq!(
        f.client_peak_oversell,
        Some(60),
        "every order paid: 90 held for 30"
    );
    assert_eq!(f.client_oversell, Some(60));
}
