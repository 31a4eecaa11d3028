//! Rows to values and values to bind parameters: the column order of `dialect`'s
//! `ITEM_COLS`, `ORDER_COLS` and `ORDER_READ`, in one place.

use super::StoreError;
use crate::model::{Item, Order, OrderStatus};
use sqlx::any::AnyRow;
use sqlx::{Any, Row};

/// A query on the `Any` driver, before its parameters are bound.
pub(super) type AnyQuery<'q> = sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>;

/// Binds an order's columns in `ORDER_COLS` order.
pub(super) fn bind_order<'q>(q: AnyQuery<'q>, o: &'q Order) -> AnyQuery<'q> {
    q.bind(&o.id)
        .bind(o.item_id)
        .bind(&o.user_id)
        .bind(o.device_id.as_deref())
        .bind(o.qty)
        .bind(o.status.as_str())
        .bind(o.created_at_ms)
        .bind(o.updated_at_ms)
        .bind(o.idempotency_key.as_deref())
}

/// The insert of one order with its columns bound: with the stock its purchase read when it
/// has one (`insert_order_read`), else the plain insert.
pub(super) fn insert_order<'q>(sql: &super::Statements, o: &'q Order) -> AnyQuery<'q> {
    match o.stock_read {
        Some(read) => bind_order(sqlx::query(sql.insert_order_read), o).bind(read),
        None => bind_order(sqlx::query(sql.insert_order), o),
    }
}

/// An item from a row of `ITEM_COLS`.
pub(super) fn item_from_row(r: &AnyRow) -> Result<Item, StoreError> {
    Ok(Item {
        id: r.try_get(0)?,
        name: r.try_get(1)?,
        price_cents: r.try_get(2)?,
        initial_stock: r.try_get(3)?,
        stock: r.try_get(4)?,
        version: r.try_get(5)?,
        purchase_limit: r.try_get(6)?,
    })
}

/// An order from a row of `ORDER_READ`.
pub(super) fn order_from_row(r: &AnyRow) -> Result<Order, StoreError> {
    let status: String = r.try_get(5)?;
    Ok(Order {
        id: r.try_get(0)?,
        item_id: r.try_get(1)?,
        user_id: r.try_get(2)?,
        device_id: r.try_get(3)?,
        qty: r.try_get(4)?,
        status: OrderStatus::parse(&status).ok_or_else(|| {
            sqlx::Error::Decode(format!("unknown order status {status:?}").into())
        })?,
        created_at_ms: r.try_get(6)?,
        updated_at_ms: r.try_get(7)?,
        idempotency_key: r.try_get(8)?,
        stock_read: r.try_get(9)?,
    })
}
