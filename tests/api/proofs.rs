//! Every proof is checkable: each FAIL of naive and of the reference shop's defects carries a
//! proof, and a checker written here, apart from the oracle, re-derives each one from the
//! order rows in the real database and what the proof says of the clients: every order it
//! names exists, was held at the instant it names (created by then, not released by then),
//! and the set exceeds what it is held against. A proof that names an order that does not
//! exist, or a set that does not prove its claim, fails the checker (the last test).

use crate::helpers::*;
use oversell::testing::inventory::{Defect, Strategy};
use oversell::testing::runner::{self, RunPlan};
use oversell::testing::store::Backend;
use serde_json::Value;
use std::collections::HashMap;

/// An order row as the database holds it after the run.
#[derive(Debug, Clone)]
struct Row {
    user: String,
    qty: i64,
    status: String,
    created: i64,
    updated: i64,
    stock_read: Option<i64>,
    /// Rows of the restock ledger for this order.
    restocks: i64,
}

impl Row {
    fn holds(&self) -> bool {
        matches!(self.status.as_str(), "pending_payment" | "paid")
    }

    /// Held at `t` on the rows' clock: created by then, not released by then.
    fn held_at(&self, t: i64) -> bool {
        self.created <= t && (self.holds() || self.updated.max(self.created) > t)
    }
}

async fn rows(db: &str) -> HashMap<String, Row> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(db)
        .await
        .unwrap();
    type Fields = (String, String, i64, String, i64, i64, Option<i64>);
    let got: Vec<Fields> = sqlx::query_as(
        "SELECT id, user_id, qty, status, created_at_ms, updated_at_ms, stock_read FROM orders",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let restocks: HashMap<String, i64> = sqlx::query_as::<_, (String, i64)>(
        "SELECT order_id, COUNT(*) FROM restocks GROUP BY order_id",
    )
    .fetch_all(&pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    pool.close().await;
    got.into_iter()
        .map(|(id, user, qty, status, created, updated, stock_read)| {
            let row = Row {
                user,
                qty,
                status,
                created,
                updated,
                stock_read,
                restocks: restocks.get(&id).copied().unwrap_or(0),
            };
            (id, row)
        })
        .collect()
}

/// Re-derives `proof` from `rows` (the stock `stock`, the purchase limit `limit`): `Err` with
/// why when it does not prove what it claims.
fn check(proof: &Value, rows: &HashMap<String, Row>, stock: i64, limit: i64) -> Result<(), String> {
    let findings: Vec<&str> = proof["findings"]
        .as_array()
        .ok_or("no findings")?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let orders = proof["orders"].as_array().cloned().unwrap_or_default();
    let named = |o: &Value| -> Result<Row, String> {
        let id = o["id"].as_str().ok_or("an order without an id")?;
        let row = rows.get(id).ok_or(format!("order {id} has no row"))?;
        if o.get("stock_read").is_some() && o["stock_read"].as_i64() != row.stock_read {
            return Err(format!(
                "{id}: the proof says it read {}, its row {:?}",
                o["stock_read"], row.stock_read
            ));
        }
        if o["created_at_ms"]
            .as_i64()
            .is_some_and(|c| c != row.created)
        {
            return Err(format!(
                "{id}: created at {} in the proof, {} in its row",
                o["created_at_ms"], row.created
            ));
        }
        Ok(row.clone())
    };
    let units = |rs: &[Row]| rs.iter().map(|r| r.qty).sum::<i64>();
    let first = findings.first().copied().unwrap_or_default();
    match first {
        "oversell" | "peak_oversell" => {
            let t = proof["at_row_ms"]
                .as_i64()
                .ok_or("no instant on the rows' clock")?;
            let rs = orders.iter().map(named).collect::<Result<Vec<_>, _>>()?;
            if let Some(r) = rs.iter().find(|r| !r.held_at(t)) {
                return Err(format!("an order not held at {t}: {r:?}"));
            }
            let held_then: i64 = rows.values().filter(|r| r.held_at(t)).map(|r| r.qty).sum();
            if units(&rs) <= stock || held_then <= stock {
                return Err(format!(
                    "{} units listed, {held_then} held at {t}: not above {stock}",
                    units(&rs)
                ));
            }
        }
        "oversold_at_end" => {
            let rs = orders.iter().map(named).collect::<Result<Vec<_>, _>>()?;
            if rs.iter().any(|r| !r.holds()) || units(&rs) <= stock {
                return Err(format!(
                    "{} holding units listed, stock {stock}",
                    units(&rs)
                ));
            }
        }
        "duplicate_buyers" => {
            let rs = orders.iter().map(named).collect::<Result<Vec<_>, _>>()?;
            let user = &rs.first().ok_or("no orders")?.user;
            if rs.iter().any(|r| &r.user != user || !r.holds()) || units(&rs) <= limit {
                return Err(format!("{rs:?} is not one buyer holding more than {limit}"));
            }
        }
        "client_peak_oversell" => {
            // The clients' records: acknowledged by the instant, not released by it; the orders
            // exist (the reference shop's rows), and there are more than the stock.
            let t = proof["at_ms"].as_u64().ok_or("no instant")?;
            for o in &orders {
                named(o)?;
                let acked = o["acked_ms"]
                    .as_u64()
                    .ok_or("an order never acknowledged")?;
                let cancel = o["cancel_sent_ms"].as_u64();
                if acked > t || cancel.is_some_and(|c| c <= t) {
                    return Err(format!("{o} was not held at {t}"));
                }
            }
            if orders.len() as i64 <= stock {
                return Err(format!("{} orders for a stock of {stock}", orders.len()));
            }
        }
        "restock_mismatch" if !orders.is_empty() => {
            // Each order the ledger restocked twice, or restocked while its row holds it.
            for o in &orders {
                let r = named(o)?;
                if r.restocks < 2 && !(r.restocks >= 1 && r.holds()) {
                    return Err(format!(
                        "{o} was restocked {} times, {}",
                        r.restocks, r.status
                    ));
                }
            }
        }
        "client_duplicate_buyers" | "client_duplicate_devices" => {
            for o in &orders {
                named(o)?;
            }
            if orders.len() as i64 <= limit {
                return Err(format!("{} orders for a limit of {limit}", orders.len()));
            }
        }
        // Figures only totals show: their claim holds the figures; nothing to look up.
        _ if orders.is_empty() => {
            if proof["claim"].as_str().is_none_or(str::is_empty) {
                return Err("a proof without a claim".into());
            }
        }
        other => {
            for o in &orders {
                named(o)?;
            }
            if orders.is_empty() {
                return Err(format!("{other}: no orders"));
            }
        }
    }
    Ok(())
}

/// Runs `strategy` (with `defect`) on `scenario` against a fresh database; the report's run,
/// the database's rows, and the database URL.
async fn run(
    scenario: &str,
    strategy: Strategy,
    defect: Option<Defect>,
) -> (Value, HashMap<String, Row>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let (mut s, file) =
        oversell::testing::scenarios::resolve(std::path::Path::new(scenario)).unwrap();
    s.shop.defect = defect;
    let db = fresh_db_url(Backend::Postgres);
    let plan = RunPlan::reference(
        s,
        file.origin(),
        cells(&[strategy], Backend::Postgres, &db),
        redis_url(),
        env!("CARGO_BIN_EXE_oversell").into(),
        tmp.path().to_path_buf(),
    );
    let (_, dir) = runner::execute(&plan).await.expect("the run completes");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let rows = rows(&db).await;
    (report["runs"][0].clone(), rows, db)
}

/// Every breached finding of `r` has a proof, and every proof re-derives from `rows`.
fn every_fail_is_proven(r: &Value, rows: &HashMap<String, Row>, limit: i64) {
    let stock = r["initial_stock"].as_i64().unwrap();
    let proofs = r["proofs"].as_array().cloned().unwrap_or_default();
    let proven = |m: &str| {
        proofs
            .iter()
            .any(|p| p["findings"].as_array().unwrap().iter().any(|f| f == m))
    };
    for m in [
        "oversell",
        "oversold_at_end",
        "peak_oversell",
        "client_peak_oversell",
        "duplicate_buyers",
        "lost_acks",
        "phantom_orders",
        "conservation_drift",
        "stock_below_zero",
        "restock_mismatch",
    ] {
        let breached = match &r[m] {
            Value::Number(n) => n.as_f64().unwrap() != 0.0,
            _ => false,
        } || (m == "stock_below_zero"
            && r["min_stock_seen"].as_i64().is_some_and(|s| s < 0));
        assert!(!breached || proven(m), "{m} breached without a proof: {r}");
    }
    assert!(!proofs.is_empty(), "{r}");
    for p in &proofs {
        if let Err(why) = check(p, rows, stock, limit) {
            panic!("a proof does not hold: {why}\n{p}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naives_oversell_is_proven_by_orders_the_rows_hold_and_two_purchases_that_read_the_same_stock(
) {
    let (r, rows, db) = run("ci", Strategy::Naive, None).await;

    assert!(r["oversell"].as_i64().unwrap() > 0, "{r}");
    every_fail_is_proven(&r, &rows, 1);
    let peak = r["proofs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["findings"][0] == "oversell")
        .expect("the rows' proof of the peak");
    let orders = peak["orders"].as_array().unwrap();
    assert!(
        orders.iter().all(|o| o["stock_read"].is_i64()),
        "every purchase's read: {peak}"
    );
    let facts = peak["facts"].to_string();
    assert!(
        facts.contains("passed the check") && facts.contains("units sold where"),
        "{peak}"
    );
    assert!(
        r["verdict"]
            .as_str()
            .unwrap()
            .contains(" orders for 20 units: "),
        "{r}"
    );
    drop_database(&db).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_defects_fails_each_carry_a_proof_the_rows_bear_out() {
    for (scenario, strategy, defect) in [
        (
            "selftest-get-then-decr",
            Strategy::ForUpdate,
            Defect::GetThenDecr,
        ),
        (
            "selftest-limit-race",
            Strategy::ForUpdate,
            Defect::LimitRace,
        ),
        (
            "selftest-double-restock",
            Strategy::Conditional,
            Defect::DoubleRestock,
        ),
    ] {
        let (r, rows, db) = run(scenario, strategy, Some(defect)).await;
        every_fail_is_proven(&r, &rows, 1);
        if defect == Defect::DoubleRestock {
            // The order and both restocks, from the shop's ledger.
            let p = r["proofs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["findings"][0] == "restock_mismatch")
                .unwrap_or_else(|| panic!("the double restock's proof: {r}"));
            assert!(
                p["facts"].to_string().contains("was restocked 2 times"),
                "{p}"
            );
        }
        drop_database(&db).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checker_refuses_a_proof_that_names_a_missing_order_or_too_few() {
    let (r, rows, db) = run("ci", Strategy::Naive, None).await;
    let stock = r["initial_stock"].as_i64().unwrap();
    let peak = r["proofs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["findings"][0] == "oversell")
        .cloned()
        .expect("a proof of the peak");
    assert_eq!(check(&peak, &rows, stock, 1), Ok(()));

    let mut missing = peak.clone();
    missing["orders"][0]["id"] = "1-no-such-order".into();
    assert!(check(&missing, &rows, stock, 1)
        .unwrap_err()
        .contains("no row"));

    let mut short = peak.clone();
    short["orders"]
        .as_array_mut()
        .unwrap()
        .truncate(stock as usize);
    assert!(
        check(&short, &rows, stock, 1).is_err(),
        "the stock's worth proves nothing"
    );

    let mut early = peak.clone();
    early["at_row_ms"] = (peak["at_row_ms"].as_i64().unwrap() - 60_000).into();
    assert!(
        check(&early, &rows, stock, 1).is_err(),
        "before any order was held"
    );

    let mut misread = peak.clone();
    misread["orders"][0]["stock_read"] = 99_999.into();
    assert!(
        check(&misread, &rows, stock, 1).is_err(),
        "a stock no purchase read"
    );
    drop_database(&db).await;
}
