//! `--orders-query`: the order rows of a foreign shop, read from its database with the user's
//! query (`SELECT order_id, user_id[, qty, status[, idempotency_key]] FROM …`) in a read-only
//! transaction, before the sale and after it settles. Rows present before the sale are not
//! this run's; a row whose status is one of the released statuses (`--released-statuses`,
//! default `cancelled,canceled,expired,refunded,failed`) holds no stock. The rows become the
//! oracle's [`crate::oracle::ForeignRows`]: lost acknowledged orders by id, phantoms, duplicate
//! buyers by user id, status mismatches, orders the shop cancelled on its own. They carry no
//! timestamps, so the peak replay the reference shop's rows allow is not made.

use crate::guard::read_only::ReadOnly;
use crate::model::{Order, OrderStatus, StatusKey};
use crate::oracle::ForeignRows;
use sqlx::{Column, Executor, Row as _, Statement};
use std::collections::{BTreeMap, HashSet};

/// The columns `--orders-query` returns, in order (the first two required).
pub const COLUMNS: [&str; 5] = ["order_id", "user_id", "qty", "status", "idempotency_key"];

/// `--released-statuses`' default: statuses whose rows hold no stock.
pub const RELEASED: &str = "cancelled,canceled,expired,refunded,failed";

/// The user's orders query and which statuses release stock.
#[derive(Debug, Clone, PartialEq)]
pub struct OrdersQuery {
    pub query: String,
    /// Lower-case statuses whose rows hold no stock.
    pub released: Vec<String>,
    /// How long the query may run (`--oracle-timeout`).
    pub timeout: std::time::Duration,
}

/// One order row as the query returned it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Row {
    pub order_id: String,
    pub user_id: String,
    pub qty: i64,
    /// `None`: the query returns no status column (every row holds stock).
    pub status: Option<String>,
    pub idempotency_key: Option<String>,
}

impl OrdersQuery {
    /// A query with released statuses given as `a,b,c` (case-insensitive).
    pub fn new(query: &str, released: &str) -> Self {
        OrdersQuery {
            query: query.trim().trim_end_matches(';').trim().to_string(),
            released: released
                .split(',')
                .map(|s| s.trim().to_lowercase())
                .filter(|s| !s.is_empty())
                .collect(),
            timeout: crate::guard::scalar::TIMEOUT,
        }
    }

    /// The query with its own statement timeout.
    pub fn with_timeout(self, timeout: std::time::Duration) -> Self {
        OrdersQuery { timeout, ..self }
    }

    /// Whether a row in `status` holds its units.
    pub fn holds_stock(&self, status: Option<&str>) -> bool {
        status.is_none_or(|s| !self.released.contains(&s.trim().to_lowercase()))
    }

    /// Every row the query returns now, sorted by id, in a read-only transaction. The columns
    /// are checked before any row is read: wrong ones are an error naming the flag and the
    /// expected columns.
    pub async fn read(&self, reader: &crate::guard::Reader) -> anyhow::Result<Vec<Row>> {
        crate::guard::scalar::refuse(&self.query)
            .map_err(|e| anyhow::anyhow!("--orders-query `{}` was not sent: {e}", self.query))?;
        let fail = |e: &dyn std::fmt::Display| {
            anyhow::anyhow!(
                "--orders-query `{}` failed: {e} (it must be one SELECT returning the columns {}; it runs in a read-only transaction)",
                self.query,
                expected()
            )
        };
        let server = |e: sqlx::Error| fail(&crate::guard::sqlstate::of(&e));
        let mut tx = ReadOnly::begin(reader, self.timeout)
            .await
            .map_err(server)?;
        let rows = async {
            let conn = tx.conn();
            let sql = sqlx::SqlSafeStr::into_sql_str(sqlx::AssertSqlSafe(self.query.clone()));
            let names: Vec<String> = (&mut *conn)
                .prepare(sql)
                .await
                .map_err(server)?
                .columns()
                .iter()
                .map(|c| c.name().to_lowercase())
                .collect();
            check_columns(&names).map_err(|why| {
                anyhow::anyhow!(
                    "--orders-query `{}` returns the columns {} : {why}; it must return {} in that order (rename with AS)",
                    self.query,
                    names.join(", "),
                    expected()
                )
            })?;
            let rows = sqlx::query(sqlx::AssertSqlSafe(self.query.clone()))
                .fetch_all(&mut *conn)
                .await
                .map_err(server)?;
            rows.iter()
                .map(|r| row(r, names.len()).map_err(|e| fail(&e)))
                .collect::<anyhow::Result<Vec<Row>>>()
        }
        .await;
        tx.finish().await;
        let mut rows = rows?;
        rows.sort();
        Ok(rows)
    }

    /// This run's rows (those whose id was not present before the sale) as the oracle's truth,
    /// with the stock the stock query read.
    pub fn this_run(&self, before: &[Row], after: Vec<Row>, stock: Option<i64>) -> ForeignRows {
        let old: HashSet<&str> = before.iter().map(|r| r.order_id.as_str()).collect();
        let mut statuses: BTreeMap<StatusKey, i64> = BTreeMap::new();
        let orders = after
            .into_iter()
            .filter(|r| !old.contains(r.order_id.as_str()))
            .map(|r| {
                let shown = r.status.clone().unwrap_or_else(|| "(no status)".into());
                *statuses.entry(shown.into()).or_default() += 1;
                let status = if !self.holds_stock(r.status.as_deref()) {
                    OrderStatus::Cancelled
                } else if r
                    .status
                    .as_deref()
                    .is_some_and(|s| s.eq_ignore_ascii_case("paid"))
                {
                    OrderStatus::Paid
                } else {
                    OrderStatus::PendingPayment
                };
                Order {
                    id: r.order_id,
                    item_id: 0,
                    user_id: r.user_id,
                    device_id: None,
                    qty: r.qty,
                    status,
                    created_at_ms: 0,
                    updated_at_ms: 0,
                    idempotency_key: r.idempotency_key,
                    stock_read: None,
                }
            })
            .collect();
        ForeignRows {
            orders,
            stock,
            statuses,
            present_before: before.len() as u64,
        }
    }
}

/// `order_id, user_id[, qty, status[, idempotency_key]]`.
fn expected() -> String {
    format!(
        "{}, {}[, {}, {}[, {}]]",
        COLUMNS[0], COLUMNS[1], COLUMNS[2], COLUMNS[3], COLUMNS[4]
    )
}

/// Whether `names` are a prefix of [`COLUMNS`] of two columns or more; why not.
fn check_columns(names: &[String]) -> Result<(), String> {
    if names.len() < 2 || names.len() > COLUMNS.len() {
        return Err(format!(
            "{} columns, 2 to {} expected",
            names.len(),
            COLUMNS.len()
        ));
    }
    match names
        .iter()
        .zip(COLUMNS)
        .find(|(got, want)| got.as_str() != *want)
    {
        Some((got, want)) => Err(format!("`{got}` where `{want}` is expected")),
        None => Ok(()),
    }
}

/// A value as text: a string, or an integer or float written out.
fn text(r: &sqlx::any::AnyRow, i: usize) -> Result<Option<String>, sqlx::Error> {
    if let Ok(v) = r.try_get::<Option<String>, _>(i) {
        return Ok(v);
    }
    if let Ok(v) = r.try_get::<Option<i64>, _>(i) {
        return Ok(v.map(|v| v.to_string()));
    }
    r.try_get::<Option<f64>, _>(i)
        .map(|v| v.map(|v| v.to_string()))
}

/// One row of `n` columns.
fn row(r: &sqlx::any::AnyRow, n: usize) -> Result<Row, String> {
    let get = |i: usize| {
        text(r, i).map_err(|e| {
            format!(
                "column `{}`: {}",
                COLUMNS[i],
                crate::guard::sqlstate::of(&e)
            )
        })
    };
    let order_id = get(0)?.ok_or("a row has no order_id (NULL)")?;
    let user_id = get(1)?.unwrap_or_default();
    let qty = if n > 2 {
        match get(2)? {
            Some(q) => q
                .parse::<f64>()
                .ok()
                .filter(|q| q.fract() == 0.0)
                .map(|q| q as i64)
                .ok_or_else(|| {
                    format!(
                        "column `qty` holds a value that is not a whole number ({} characters, \
                         not shown)",
                        q.chars().count()
                    )
                })?,
            None => 1,
        }
    } else {
        1
    };
    Ok(Row {
        order_id,
        user_id,
        qty,
        status: if n > 3 { get(3)? } else { None },
        idempotency_key: if n > 4 { get(4)? } else { None },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_columns_must_be_the_documented_ones_in_order() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_columns(&names(&["order_id", "user_id"])).is_ok());
        assert!(check_columns(&names(&["order_id", "user_id", "qty", "status"])).is_ok());
        let e = check_columns(&names(&["id", "user_id"])).unwrap_err();
        assert!(e.contains("`id`") && e.contains("`order_id`"), "{e}");
        assert!(check_columns(&names(&["order_id"])).is_err());
    }

    #[test]
    fn rows_present_before_the_sale_are_not_this_runs_and_released_ones_hold_nothing() {
        let q = OrdersQuery::new("SELECT ...;", "Cancelled, refunded");
        let r = |id: &str, status: &str| Row {
            order_id: id.into(),
            user_id: "u".into(),
            qty: 1,
            status: Some(status.into()),
            idempotency_key: None,
        };
        let before = vec![r("old", "confirmed")];
        let after = vec![
            r("old", "CANCELLED"),
            r("a", "confirmed"),
            r("b", "REFUNDED"),
        ];
        let rows = q.this_run(&before, after, Some(3));
        assert_eq!(rows.orders.len(), 2);
        assert_eq!(rows.present_before, 1);
        assert!(rows.orders[0].status.holds_stock());
        assert!(!rows.orders[1].status.holds_stock());
        assert_eq!(rows.statuses["REFUNDED"], 1);
        assert_eq!(q.query, "SELECT ...");
    }
}
