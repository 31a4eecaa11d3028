//! The batch's decisions: splitting when stock runs short, the limit, keys.

use super::{decide, Decision};
use crate::inventory::Outcome;
use crate::model::{Order, OrderStatus, Purchase};

fn buy(user: &str, qty: i64, key: Option<&str>) -> Purchase {
    Purchase {
        item_id: 1,
        user_id: user.into(),
        device_id: None,
        qty,
        client_ip: String::new(),
        idempotency_key: key.map(str::to_string),
    }
}

fn order(id: &str, user: &str, qty: i64, key: Option<&str>, status: OrderStatus) -> Order {
    Order {
        status,
        id: id.into(),
        ..Order::pending(&buy(user, qty, key))
    }
}

/// Granted quantities, or the answer, per purchase.
fn summary(d: &[Decision]) -> Vec<String> {
    d.iter()
        .map(|d| match d {
            Decision::Grant(o) => format!("grant {}", o.qty),
            Decision::Answer(a) => format!("{a:?}"),
        })
        .collect()
}

fn decide_owned(batch: &[Purchase], stock: i64, limit: i64, existing: &[Order]) -> Vec<Decision> {
    let refs: Vec<&Purchase> = batch.iter().collect();
    decide(&refs, stock, limit, existing)
}

#[test]
fn a_batch_that_fits_is_granted_whole() {
    let batch: Vec<_> = (0..5).map(|i| buy(&format!("u{i}"), 1, None)).collect();
    let d = decide_owned(&batch, 5, 1, &[]);
    assert!(d.iter().all(|d| matches!(d, Decision::Grant(_))), "{d:?}");
}

#[test]
fn when_stock_runs_short_the_first_that_fit_are_granted_and_exactly_the_stock() {
    let batch: Vec<_> = (0..10).map(|i| buy(&format!("u{i}"), 1, None)).collect();
    let d = decide_owned(&batch, 3, 1, &[]);
    let granted: i64 = d
        .iter()
        .map(|d| match d {
            Decision::Grant(o) => o.qty,
            _ => 0,
        })
        .sum();
    assert_eq!(granted, 3);
    assert!(d[..3].iter().all(|d| matches!(d, Decision::Grant(_))));
    assert!(d[3..]
        .iter()
        .all(|d| *d == Decision::Answer(Outcome::SoldOut)));
}

#[test]
fn a_purchase_too_big_for_the_rest_is_refused_and_a_smaller_one_after_it_still_fits() {
    let batch = [buy("a", 2, None), buy("b", 2, None), buy("c", 1, None)];
    let d = decide_owned(&batch, 3, 5, &[]);
    assert_eq!(summary(&d), ["grant 2", "SoldOut", "grant 1"]);
}

#[test]
fn nothing_is_granted_from_empty_stock() {
    let batch = [buy("a", 1, None), buy("b", 1, None)];
    let d = decide_owned(&batch, 0, 1, &[]);
    assert_eq!(summary(&d), ["SoldOut", "SoldOut"]);
}

#[test]
fn the_limit_counts_live_orders_and_grants_earlier_in_the_batch() {
    let existing = [
        order("1-old", "a", 1, None, OrderStatus::Paid),
        order("1-gone", "b", 2, None, OrderStatus::Cancelled),
    ];
    let batch = [
        buy("a", 1, None),
        buy("b", 2, None),
        buy("c", 1, None),
        buy("c", 1, None),
    ];
    let d = decide_owned(&batch, 10, 2, &existing);
    // a holds 1 of 2: one more fits; b's cancelled order holds nothing; c's second purchase
    // meets the first one's grant (limit 2: it fits too).
    assert_eq!(summary(&d), ["grant 1", "grant 2", "grant 1", "grant 1"]);
    let d = decide_owned(&batch, 10, 1, &existing);
    assert_eq!(
        summary(&d),
        ["Duplicate", "Duplicate", "grant 1", "Duplicate"]
    );
}

#[test]
fn the_limit_is_checked_before_the_stock_as_for_update_does() {
    let existing = [order("1-x", "a", 1, Some("k"), OrderStatus::PendingPayment)];
    let d = decide_owned(&[buy("a", 1, None)], 0, 1, &existing);
    assert_eq!(summary(&d), ["Duplicate"]);
}

#[test]
fn a_key_that_bought_an_order_gets_it_back_and_nothing_moves() {
    let existing = [order("1-x", "a", 1, Some("k"), OrderStatus::PendingPayment)];
    let d = decide_owned(
        &[buy("a", 1, Some("k")), buy("z", 1, Some("k"))],
        5,
        1,
        &existing,
    );
    assert_eq!(
        d,
        [
            Decision::Answer(Outcome::Replayed {
                order_id: "1-x".into()
            }),
            Decision::Answer(Outcome::KeyReused)
        ]
    );
}

#[test]
fn a_key_twice_in_one_batch_buys_one_order() {
    let batch = [
        buy("a", 1, Some("k")),
        buy("a", 1, Some("k")),
        buy("b", 1, Some("k")),
    ];
    let d = decide_owned(&batch, 5, 3, &[]);
    let Decision::Grant(first) = &d[0] else {
        panic!("{d:?}")
    };
    assert_eq!(
        d[1],
        Decision::Answer(Outcome::Replayed {
            order_id: first.id.clone()
        })
    );
    assert_eq!(d[2], Decision::Answer(Outcome::KeyReused));
}

#[test]
fn a_refused_key_is_free_for_the_next_attempt_in_the_batch() {
    // The first attempt is over the limit; a later one with the same key (another buyer)
    // is a new attempt.
    let existing = [order("1-x", "a", 1, None, OrderStatus::Paid)];
    let batch = [buy("a", 1, Some("k")), buy("b", 1, Some("k"))];
    let d = decide_owned(&batch, 5, 1, &existing);
    assert_eq!(summary(&d), ["Duplicate", "grant 1"]);
}

#[test]
fn a_key_whose_order_lapsed_gets_it_back_only_while_stock_lasts() {
    let existing = [order("1-x", "a", 1, Some("k"), OrderStatus::Expired)];
    let d = decide_owned(&[buy("a", 1, Some("k"))], 1, 1, &existing);
    assert_eq!(
        d,
        [Decision::Answer(Outcome::Replayed {
            order_id: "1-x".into()
        })]
    );
    let d = decide_owned(&[buy("a", 1, Some("k"))], 0, 1, &existing);
    assert_eq!(summary(&d), ["SoldOut"]);
}
