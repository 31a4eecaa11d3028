//! The oracle's findings from hand-made evidence: each definition of BRIEF §4 on its own.

use super::*;
use crate::model::OrderStatus;
use crate::traffic::recorder::{Ack, BuyerResult, ClientRecords, Told};

pub(super) fn order(id: &str, user: &str, status: OrderStatus) -> Order {
    Order {
        id: id.into(),
        item_id: 1,
        user_id: user.into(),
        device_id: Some(format!("d-{user}")),
        qty: 1,
        status,
        created_at_ms: 0,
        updated_at_ms: 0,
        idempotency_key: None,
        stock_read: None,
    }
}

pub(super) fn clients(acks: &[(&str, &str)]) -> Measurements {
    Measurements {
        histograms: Default::default(),
        order_intervals: Default::default(),
        timeline: vec![],
        records: ClientRecords::from_spelled(
            &[],
            &acks
                .iter()
                .enumerate()
                .map(|(i, (id, user))| Ack {
                    key: Some(format!("k-{i}").into()),
                    order_id: Some((*id).into()),
                    buyer: i,
                    user_id: user.to_string(),
                    device_id: format!("d-{user}"),
                    bot: user.starts_with("bot"),
                    at_ms: 0,
                    sent_ms: 0,
                    cancel_sent_ms: None,
                    paid_ms: None,
                })
                .collect::<Vec<_>>(),
        ),
        told: Default::default(),
        cancels_ok: 0,
        follow_ups: vec![],
        retries: Default::default(),
        unclassified: vec![],
        first_sold_out_ms: None,
        send_lag: Default::default(),
        sender_wait: Default::default(),
        service: Default::default(),
        shop_latency: Default::default(),
        order_answer_span: None,
        decisions: Default::default(),
        buyers: (0..5)
            .map(|i| {
                (
                    i,
                    BuyerResult {
                        bot: false,
                        attempted: true,
                        got_order: i < 2,
                    },
                )
            })
            .collect(),
    }
}

/// Evidence of `initial` units, `truth` and `clients`, nothing else.
pub(super) fn evidence(initial: i64, truth: Truth, c: &Measurements) -> Evidence<'_> {
    Evidence {
        initial_stock: initial,
        purchase_limit: 1,
        truth,
        oracle: OracleView {
            source: "test".into(),
            ..OracleView::default()
        },
        reading: Reading {
            order_id_field: Some("order_id".into()),
            max_unclassified: 0.01,
            keys_sent: true,
        },
        redis_stock: None,
        reconcile_residual: None,
        stock_seen: None,
        redis_restocked_orders: None,
        dead_letters: None,
        payment_window_ms: Some(900_000),
        // A one-minute sale: no order could have run out its 15 minutes by the audit.
        audited_ms: Some(60_000),
        opened_ms: None,
        stock_samples: Vec::new(),
        restocks: None,
        clients: c,
        users: None,
    }
}

#[test]
fn oversell_lost_acks_phantoms_and_duplicates_come_from_the_database() {
    let c = clients(&[("a", "u1"), ("b", "u2"), ("c", "bot1"), ("lost", "u3")]);
    let orders = vec![
        order("a", "u1", OrderStatus::Paid),
        order("b", "u2", OrderStatus::PendingPayment),
        order("c", "bot1", OrderStatus::Paid),
        order("c2", "bot1", OrderStatus::Paid),
        order("x", "u9", OrderStatus::Cancelled),
    ];
    let f = audit(&evidence(
        3,
        Truth::Orders {
            db_stock: -1,
            orders,
        },
        &c,
    ));
    assert_eq!(f.sold, Some(4));
    assert_eq!(f.oversell, Some(1));
    assert_eq!(f.negative_stock, Some(true));
    assert_eq!(f.conservation_drift, Some(0));
    assert_eq!(f.lost_acks, Some(1));
    assert_eq!(f.lost_ack_examples, vec!["lost".to_string()]);
    assert_eq!(
        f.phantom_orders,
        Some(2),
        "c2 and x were never acknowledged"
    );
    assert_eq!(f.duplicate_buyers, Some(1));
    assert_eq!(f.bot_units, Some(2));
    assert!(
        f.verdict
            .starts_with("4 orders for 3 units: 1 oversold (sold 4 of 3)"),
        "{}",
        f.verdict
    );
}

#[test]
fn a_dead_lettered_acknowledged_order_is_lost_and_said_to_be_dead_lettered() {
    let c = clients(&[("a", "u1"), ("dl", "u2"), ("dl2", "u3")]);
    let letter = |id: &str, kind: &str, was: &str| DeadLetterSeen {
        order_id: id.into(),
        kind: crate::store::PersistKind::parse(kind),
        was: was.into(),
    };
    // dl: refused while pending (dead-lettering released its unit); dl2: cancelled in
    // Redis (restocked there), then refused, then its cancel followed it aside.
    let letters = vec![
        letter("dl", "order", "pending_payment"),
        letter("dl2", "order", "cancelled"),
        letter("dl2", "cancel", "dead_lettered"),
    ];
    let evidence = |dead_letters| Evidence {
        redis_stock: Some(4),
        reconcile_residual: Some(0),
        redis_restocked_orders: Some(1),
        dead_letters,
        ..evidence(
            5,
            Truth::Orders {
                db_stock: 4,
                orders: vec![order("a", "u1", OrderStatus::Paid)],
            },
            &c,
        )
    };
    let f = audit(&evidence(Some(letters)));
    assert_eq!(f.lost_acks, Some(2));
    assert_eq!(f.lost_acks_dead_lettered, Some(2));
    assert_eq!(f.dead_letters, Some(3));
    assert_eq!(
        f.restock_mismatch,
        Some(0),
        "dl2's restock is accounted for"
    );
    assert_eq!((f.conservation_drift, f.redis_drift), (Some(0), Some(0)));
    assert!(
        f.verdict
            .contains("lost 2 acknowledged orders (2 dead-lettered")
            && f.verdict.contains("3 stream entries dead-lettered"),
        "{}",
        f.verdict
    );
    // Without the dead-letter stream the same database shows an unexplained restock.
    let f = audit(&evidence(None));
    assert_eq!(
        (f.restock_mismatch, f.lost_acks_dead_lettered),
        (Some(-1), None)
    );
}

#[test]
fn peak_oversell_replays_the_orders_history() {
    let at = |id: &str, status, c: i64, u: i64| Order {
        created_at_ms: c,
        updated_at_ms: u,
        ..order(id, id, status)
    };
    // Stock 2: three orders at t=1,2,3 (peak 3 held), one cancelled at t=4, one bought at t=4.
    let orders = vec![
        at("a", OrderStatus::Paid, 1, 1),
        at("b", OrderStatus::Cancelled, 2, 4),
        at("c", OrderStatus::Paid, 3, 3),
        at("d", OrderStatus::Paid, 4, 4),
    ];
    assert_eq!(peak_held(&orders), 3);
    // Released and re-bought in the same millisecond: never held twice.
    let orders = vec![
        at("a", OrderStatus::Expired, 1, 5),
        at("b", OrderStatus::Paid, 5, 5),
    ];
    assert_eq!(peak_held(&orders), 1);
}

#[test]
fn undersell_counts_units_left_while_buyers_were_refused_for_another_reason_than_sold_out() {
    use crate::traffic::recorder::{Answer, AnswerClass, Attempt};
    let mut c = clients(&[("a", "u1"), ("b", "u2")]);
    // Buyers 2, 3 and 4 got no order: 2 unauthorized, 3 invalid then not found, 4 sold out.
    let attempt = |buyer, answer| Attempt {
        key: format!("k-{buyer}-{answer:?}").into(),
        buyer,
        answer,
        class: AnswerClass::of(answer),
        order_id: None,
        at_ms: 0,
        retry: false,
    };
    c.edit_records(|attempts, _| {
        *attempts = vec![
            attempt(2, Answer::Unauthorized),
            attempt(3, Answer::Invalid),
            attempt(3, Answer::NotFound),
            attempt(4, Answer::SoldOut),
        ]
    });
    let orders = vec![
        order("a", "u1", OrderStatus::Paid),
        order("b", "u2", OrderStatus::Paid),
    ];
    let f = audit(&Evidence {
        redis_stock: Some(8),
        reconcile_residual: Some(0),
        stock_seen: Some((8, 10)),
        ..evidence(
            10,
            Truth::Orders {
                db_stock: 8,
                orders,
            },
            &c,
        )
    });
    assert_eq!(f.oversell, Some(0));
    assert_eq!(f.turned_away_buyers, 3);
    assert_eq!(f.refused_buyers, 2);
    assert_eq!(
        f.undersell,
        Some(2),
        "8 left, but only 2 people were refused for another reason than sold out"
    );
    assert!(!f.nothing_sold);
    assert_eq!(f.redis_drift, Some(0));
    // Without an oracle, the units left are the clients' net acknowledgements' complement.
    let f = audit(&evidence(10, Truth::Unverified, &c));
    assert_eq!(f.undersell, Some(2));
    assert!(
        f.verdict
            .contains("refused for reasons other than sold out"),
        "{}",
        f.verdict
    );
}

#[test]
fn a_sale_with_stock_and_no_acknowledgement_tested_nothing() {
    use crate::traffic::recorder::{Answer, AnswerClass, Attempt};
    let mut c = clients(&[]);
    c.edit_records(|attempts, _| {
        *attempts = (0..5)
            .map(|buyer| Attempt {
                key: format!("k-{buyer}").into(),
                buyer,
                answer: Answer::Unauthorized,
                class: AnswerClass::Refused,
                order_id: None,
                at_ms: 0,
                retry: false,
            })
            .collect()
    });
    let f = audit(&evidence(
        20,
        Truth::Totals {
            sold: 0,
            stock: Some(20),
        },
        &c,
    ));
    assert!(f.nothing_sold);
    assert_eq!(f.unauthorized, 5);
    assert_eq!(f.undersell, Some(5), "20 left, 5 people refused");
    assert!(
        f.verdict
            .contains("the shop accepted no order: this run tested nothing")
            && f.verdict.contains("5 order attempts were unauthorized"),
        "{}",
        f.verdict
    );
    let f = audit(&evidence(
        0,
        Truth::Totals {
            sold: 0,
            stock: Some(0),
        },
        &c,
    ));
    assert!(!f.nothing_sold, "nothing to sell: nothing to test");
}

#[test]
fn without_an_oracle_the_verdict_says_so() {
    let c = clients(&[("a", "u1"), ("b", "u2"), ("c", "u3")]);
    let f = audit(&evidence(2, Truth::Unverified, &c));
    assert!(!f.verified);
    assert_eq!(f.oversell, None);
    assert_eq!(f.client_oversell, Some(1), "measured without any oracle");
    assert!(
        f.verdict.contains("not verified") && f.verdict.contains("client-observed oversell 1"),
        "{}",
        f.verdict
    );
}

#[test]
fn a_stock_derived_oracle_that_undercounts_disagrees_with_the_clients() {
    // 6 acknowledged, one cancel answered ok, 3 units: the shop's own counter says 2 sold.
    let mut c = clients(&[
        ("a", "u1"),
        ("b", "u2"),
        ("c", "u3"),
        ("d", "u4"),
        ("e", "u5"),
        ("f", "u6"),
    ]);
    c.cancels_ok = 1;
    let f = audit(&evidence(
        3,
        Truth::Totals {
            sold: 2,
            stock: Some(1),
        },
        &c,
    ));
    assert_eq!(f.oversold_at_end, Some(0), "the oracle alone sees none");
    assert_eq!(
        f.oversell,
        Some(2),
        "the clients were promised 2 beyond the stock"
    );
    assert_eq!(f.restocks_seen, Some(1));
    assert_eq!(f.client_net_acks, 5);
    assert_eq!(f.client_oversell, Some(2));
    assert_eq!(f.oracle_disagreement, Some(3));
    assert!(
        f.verdict
            .contains("2 oversold by the clients' records; the oracle counts none at the end")
            && f.verdict.contains("client-observed oversell 2")
            && f.verdict.contains(
                "the oracle disagrees with the clients: it counts 2 sold, clients were told 5"
            ),
        "{}",
        f.verdict
    );
}

#[test]
fn restocks_the_database_shows_for_acknowledged_orders_count_once() {
    // Stock 1: "a" expired (the client never heard), "b" cancelled by its client, "c" paid.
    let mut c = clients(&[("a", "u1"), ("b", "u2"), ("c", "u3")]);
    c.cancels_ok = 1;
    c.told.insert("b".into(), Told::Cancelled);
    let orders = vec![
        order("a", "u1", OrderStatus::Expired),
        order("b", "u2", OrderStatus::Cancelled),
        order("c", "u3", OrderStatus::Paid),
    ];
    // "a" sent at 0, answered at 10, unpaid: releasable at 50; "b" bought at 55, cancelled at 58.
    c.edit_records(|_, acks| {
        for (a, (at, cancel)) in acks
            .iter_mut()
            .zip([(10, None), (55, Some(58)), (60, None)])
        {
            a.at_ms = at;
            a.cancel_sent_ms = cancel;
        }
    });
    let mut e = evidence(
        1,
        Truth::Orders {
            db_stock: 0,
            orders,
        },
        &c,
    );
    e.payment_window_ms = Some(50);
    let f = audit(&e);
    assert_eq!(f.client_peak_held, Some(1));
    assert_eq!(f.shop_released_acks, Some(1));
    assert_eq!(f.restocks_seen, Some(2));
    assert_eq!(f.client_oversell, Some(0));
    assert_eq!(f.oracle_disagreement, Some(0));
    assert_eq!(f.verdict, "sold 1 of 1: no oversell");
}

#[test]
fn too_many_unclassified_answers_lead_the_verdict_with_the_rule_to_add() {
    use crate::traffic::recorder::{Kind, UnclassifiedAnswer};
    let mut c = clients(&[]);
    let mut h = crate::traffic::recorder::new_histogram();
    for _ in 0..10 {
        h.record(1000).unwrap();
    }
    c.histograms.insert(
        (Kind::Order, crate::traffic::recorder::Answer::Unclassified),
        h,
    );
    c.unclassified = vec![UnclassifiedAnswer {
        kind: Kind::Order,
        status: 200,
        count: 10,
        sample: r#"{"message":"purchased"}"#.into(),
    }];
    let f = audit(&evidence(5, Truth::Unverified, &c));
    assert!(f.mapping_incomplete());
    assert_eq!(f.unclassified_share, Some(1.0));
    assert!(
        f.verdict
            .starts_with("MAPPING INCOMPLETE: 10 of 10 answers")
            && f.verdict
                .contains(r#"{ status = ["200"], outcome = "created" }"#),
        "{}",
        f.verdict
    );
}
