//! The oracle's streamed check of the order rows (`Store::snapshot_into` into `oracle::Check`)
//! judges a sale exactly as the same rows handed over whole do, on PostgreSQL and MariaDB; a
//! run reports the oracle's own phase (`oracle_s`) and keeps the drivers' log lines off the
//! terminal, in its `run.log`.

use crate::helpers::*;
use oversell::testing::model::{now_ms, Order, OrderStatus, SaleSetup};
use oversell::testing::oracle::{self, Ask, Check, Evidence, OracleView, Reading, Rows, Truth};
use oversell::testing::shop::ShopKnobs;
use oversell::testing::store::{Backend, Store};
use oversell::testing::traffic::recorder::{Ack, Answer, AnswerClass, Attempt, Measurements, Told};

fn order(id: &str, user: &str, key: Option<&str>, status: OrderStatus, at: i64) -> Order {
    Order {
        id: id.into(),
        item_id: 1,
        user_id: user.into(),
        device_id: Some(format!("dev-{user}")),
        qty: 1,
        status,
        created_at_ms: at,
        updated_at_ms: at + 5,
        idempotency_key: key.map(str::to_string),
        stock_read: None,
    }
}

fn attempt(key: &str, buyer: usize, answer: Answer, order_id: Option<&str>) -> Attempt {
    Attempt {
        key: key.into(),
        buyer,
        answer,
        class: AnswerClass::of(answer),
        order_id: order_id.map(Into::into),
        at_ms: 10,
        retry: false,
    }
}

fn ack(key: &str, id: &str, buyer: usize, user: &str) -> Ack {
    Ack {
        key: Some(key.into()),
        order_id: Some(id.into()),
        buyer,
        user_id: user.into(),
        device_id: format!("dev-{user}"),
        bot: user.starts_with("bot"),
        at_ms: 10,
        sent_ms: 5,
        cancel_sent_ms: None,
        paid_ms: None,
    }
}

/// A sale of 3 units with every kind of trouble: 4 units held (oversold by 1), one
/// acknowledged order lost, an indeterminate attempt and a refused one that bought, a phantom
/// under a key no attempt sent, a buyer holding two, two rows under one key, a row matched by
/// its buyer, a paid order the client was told is cancelled.
fn sale() -> (Measurements, Vec<Order>) {
    let t = now_ms();
    let rows = vec![
        order("a", "u-0", Some("k0"), OrderStatus::PendingPayment, t),
        order("b", "u-1", Some("k1"), OrderStatus::Paid, t + 1),
        order("c", "u-2", Some("k2"), OrderStatus::Cancelled, t + 2),
        order("d", "u-3", Some("k3"), OrderStatus::PendingPayment, t + 3),
        order("e", "u-4", Some("k4"), OrderStatus::Expired, t + 4),
        order("f", "u-1", Some("k1b"), OrderStatus::Paid, t + 5),
        order("g", "u-9", Some("not-ours"), OrderStatus::Cancelled, t + 6),
        order("h1", "bot-5", Some("k5"), OrderStatus::Cancelled, t + 7),
        order("h2", "bot-5", Some("k5"), OrderStatus::Cancelled, t + 8),
        order("i", "u-6", None, OrderStatus::Cancelled, t + 9),
    ];
    let acks = vec![
        ack("k0", "a", 0, "u-0"),
        ack("k1", "b", 1, "u-1"),
        ack("k2", "c", 2, "u-2"),
        ack("k1b", "f", 1, "u-1"),
        ack("k5", "h1", 5, "bot-5"),
        ack("k7", "lost", 7, "u-7"),
    ];
    let attempts = vec![
        attempt("k0", 0, Answer::Created, Some("a")),
        attempt("k1", 1, Answer::Created, Some("b")),
        attempt("k2", 2, Answer::Created, Some("c")),
        attempt("k3", 3, Answer::Timeout, None),
        attempt("k4", 4, Answer::SoldOut, None),
        attempt("k1b", 1, Answer::Created, Some("f")),
        attempt("k5", 5, Answer::Created, Some("h1")),
        attempt("k6", 6, Answer::SoldOut, None),
        attempt("k7", 7, Answer::Created, Some("lost")),
    ];
    let mut c = Measurements::default();
    c.set_records(&attempts, &acks);
    c.told.insert("b".into(), Told::Cancelled);
    (c, rows)
}

fn evidence<'a>(truth: Truth, c: &'a Measurements, reading: &Reading) -> Evidence<'a> {
    Evidence {
        initial_stock: 3,
        purchase_limit: 1,
        truth,
        oracle: OracleView::default(),
        reading: reading.clone(),
        redis_stock: None,
        reconcile_residual: None,
        stock_seen: None,
        redis_restocked_orders: None,
        dead_letters: None,
        payment_window_ms: Some(900_000),
        audited_ms: Some(60_000),
        opened_ms: None,
        stock_samples: Vec::new(),
        restocks: None,
        clients: c,
        users: None,
    }
}

async fn streamed_rows_are_judged_as_the_whole_rows(backend: Backend) {
    // Arrange: the rows in a real database, the unique key index dropped so two rows can share
    // a key (the oracle checks for it whatever the schema says).
    let url = fresh_db_url(backend);
    let store = Store::connect(&url, &ShopKnobs::default().pool())
        .await
        .unwrap();
    let setup = SaleSetup {
        stock: 3,
        name: "x".into(),
        price_cents: 1,
        purchase_limit: 1,
    };
    store.setup_sale(1, &setup).await.unwrap();
    let drop_index = match backend {
        Backend::Postgres => "DROP INDEX orders_item_idempotency",
        Backend::Mysql => "ALTER TABLE orders DROP INDEX orders_item_idempotency",
    };
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    sqlx::query(drop_index).execute(&pool).await.unwrap();
    pool.close().await;
    let (clients, rows) = sale();
    for o in &rows {
        store.insert_order(o).await.unwrap();
    }
    store.deduct_unchecked(1, 4).await.unwrap();
    let reading = Reading {
        order_id_field: Some("order_id".into()),
        max_unclassified: 0.01,
        keys_sent: true,
    };

    // Act: the rows handed over whole, and the same rows streamed into the check.
    let whole = store.orders_for_item(1).await.unwrap();
    let db_stock = store.item(1).await.unwrap().unwrap().stock;
    let handed = oracle::audit(&evidence(
        Truth::Orders {
            db_stock,
            orders: whole,
        },
        &clients,
        &reading,
    ));
    let ask = Ask {
        clients: &clients,
        reading: &reading,
        initial_stock: 3,
        purchase_limit: 1,
        users: None,
        dead_letters: None,
        redis_restocked_orders: None,
    };
    let carry = Rows {
        timestamps: true,
        our_statuses: true,
    };
    let mut check = Check::new(ask, carry);
    let item = store.snapshot_into(1, &mut check).await.unwrap().unwrap();
    assert_eq!(
        check.rows(),
        rows.len() as u64,
        "{backend:?}: every row seen once"
    );
    let checked = Box::new(check.finish());
    let streamed = oracle::audit(&evidence(
        Truth::Checked {
            db_stock: item.stock,
            rows: checked,
        },
        &clients,
        &reading,
    ));
    store.close().await;
    drop_database(&url).await;

    // Assert: the same findings, and they are the trouble the sale holds.
    assert_eq!(streamed, handed, "{backend:?}");
    let f = streamed;
    assert_eq!(f.sold, Some(4), "{}", f.verdict);
    assert_eq!(f.oversold_at_end, Some(1));
    assert!(
        f.oversell >= Some(1),
        "the headline is the peak: {}",
        f.verdict
    );
    assert_eq!(f.lost_acks, Some(1));
    assert_eq!(f.lost_ack_examples, ["lost"]);
    assert_eq!(f.indeterminate_committed, Some(1));
    assert_eq!(f.refused_committed, Some(1), "k4's row");
    assert_eq!(
        f.phantom_orders,
        Some(3),
        "the row under a key no attempt sent, k5's second row, u-6's row (no ack names buyer 6)"
    );
    assert_eq!(f.duplicate_buyers, Some(1), "u-1 holds two");
    assert_eq!(f.duplicate_orders_per_key, Some(1));
    assert_eq!(f.duplicate_key_examples[0].order_ids, ["h1", "h2"]);
    assert_eq!(
        f.status_mismatches,
        Some(1),
        "b was told cancelled and is paid"
    );
    assert_eq!(
        f.peak_oversell,
        Some(5),
        "8 held at t+8: releases come 5 ms after creation"
    );
    assert_eq!(f.negative_stock, Some(true));
    assert_eq!(f.conservation_drift, Some(0));
}

#[tokio::test]
async fn the_streamed_oracle_judges_postgres_rows_as_the_whole_rows() {
    streamed_rows_are_judged_as_the_whole_rows(Backend::Postgres).await;
}

#[tokio::test]
async fn the_streamed_oracle_judges_mariadb_rows_as_the_whole_rows() {
    streamed_rows_are_judged_as_the_whole_rows(Backend::Mysql).await;
}

#[tokio::test]
async fn a_run_reports_the_oracles_phase_and_keeps_driver_lines_in_its_log() {
    // Arrange: every sqlx statement logged (debug), so driver lines are certain to be written.
    let out = tempfile::tempdir().unwrap();
    let db = fresh_db_url(Backend::Postgres);
    let out_dir = out.path().to_str().unwrap();

    // Act
    let run = oversell_cli(
        &[
            "run",
            "--strategy",
            "for-update",
            "--scenario",
            "scenarios/smoke.toml",
            "--database-url",
            &db,
            "--redis-url",
            &redis_url(),
            "--out",
            out_dir,
        ],
        &[("RUST_LOG", "warn,oversell=info,sqlx=debug")],
    )
    .await;
    drop_database(&db).await;

    // Assert
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(
        !run.both().contains("sqlx"),
        "no driver line on the terminal: {}",
        run.both()
    );
    let dir = only_report_dir(out.path());
    let log = std::fs::read_to_string(dir.join("run.log")).expect("the run's log is written");
    assert!(
        log.contains("sqlx::query"),
        "the driver's lines are in run.log: {log}"
    );
    let report = only_report(out.path());
    let oracle_s = report["runs"][0]["oracle_s"].as_f64();
    assert!(
        oracle_s.is_some_and(|s| s >= 0.0),
        "oracle_s is reported: {}",
        report["runs"][0]
    );
    let read_s = report["runs"][0]["oracle_read_s"].as_f64().unwrap();
    let audit_s = report["runs"][0]["oracle_audit_s"].as_f64().unwrap();
    assert!(
        (read_s + audit_s - oracle_s.unwrap()).abs() < 1e-9,
        "oracle_s is its read and its audit: {read_s} + {audit_s}"
    );
    let details = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        details.contains("oracle:") && details.contains("the audit"),
        "the details name the oracle's phase and its two parts: {details}"
    );
}
