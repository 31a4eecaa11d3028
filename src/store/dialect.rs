//! The SQL the shop speaks, once per backend: every statement the store runs, the session
//! set-up of each pooled connection, the run lock, the snapshot transaction and the migrations.
//!
//! Statements are written once with `?` placeholders and rewritten to `$n` for PostgreSQL; only
//! the few that genuinely differ between PostgreSQL and MySQL/MariaDB are spelled twice.

use super::Backend;
use sqlx::migrate::Migrator;
use std::sync::OnceLock;
use std::time::Duration;

/// The statements every new pooled connection runs first: how long a statement waits for a
/// row lock, and (MySQL) the isolation level.
pub fn session_setup(backend: Backend, lock_timeout: Duration) -> Vec<String> {
    let lock_ms = lock_timeout.as_millis().max(1);
    match backend {
        Backend::Postgres => vec![format!("SET lock_timeout = '{lock_ms}ms'")],
        // READ COMMITTED: every statement sees the latest committed row, so an optimistic
        // retry can never re-read a stale REPEATABLE READ snapshot.
        Backend::Mysql => vec![
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED".into(),
            format!(
                "SET SESSION innodb_lock_wait_timeout = {}",
                lock_ms.div_ceil(1000)
            ),
        ],
    }
}

/// The schema migrations of `backend` (`migrations/<backend>/`), compiled in.
pub fn migrator(backend: Backend) -> Migrator {
    match backend {
        Backend::Postgres => sqlx::migrate!("./migrations/postgres"),
        Backend::Mysql => sqlx::migrate!("./migrations/mysql"),
    }
}

/// An order's columns as an insert writes them, in the order `rows::bind_order` binds.
const ORDER_COLS: &str = "id, item_id, user_id, device_id, qty, status, created_at_ms, \
     updated_at_ms, idempotency_key";
/// An order's columns as a read returns them, in the order `rows::order_from_row` reads: the
/// inserted ones, then the stock the purchase read (`stock_read`, written only by the
/// strategies that read one on their own: [`Statements::insert_order_read`],
/// [`Statements::note_stock_read`]).
const ORDER_READ: &str = "id, item_id, user_id, device_id, qty, status, created_at_ms, \
     updated_at_ms, idempotency_key, stock_read";

/// Every statement the store runs, already in the backend's placeholder style.
#[derive(Debug, Clone)]
pub struct Statements {
    pub read_item: &'static str,
    /// The item's stock and the units its live orders hold (pending payment or paid), in one
    /// statement (the probe samples it every second).
    pub read_stock: &'static str,
    pub lock_item: &'static str,
    pub held_by_user: &'static str,
    pub held_by_device: &'static str,
    pub deduct: &'static str,
    /// `for-update`'s write: deducts unless the buyer's live orders (this transaction's own
    /// new order included) then exceed the item's limit; one statement under the row lock.
    pub deduct_within_limit: &'static str,
    /// PostgreSQL: `deduct_within_limit` stamping the buyer's order in the same statement.
    pub deduct_within_limit_stamped: &'static str,
    /// An order's created and updated times set (MySQL's for-update, after its deduct).
    pub stamp_order: &'static str,
    /// for-update's lock: the item's columns and `released_at_ms`.
    pub lock_for_purchase: &'static str,
    /// A release's restock, recording when it happened (`released_at_ms`).
    pub release_restock: &'static str,
    pub cas_deduct: &'static str,
    /// `conditional` (and `batched`, for a whole batch): `stock = stock - q WHERE stock >= q`,
    /// no version compare; one row updated is the decision.
    pub conditional_deduct: &'static str,
    pub insert_order: &'static str,
    /// An order with the stock its purchase read (`stock_read`): naive's insert.
    pub insert_order_read: &'static str,
    /// Stores the stock a purchase read on its order row, inserted before the read (a
    /// defect's read-then-write inside a transaction).
    pub note_stock_read: &'static str,
    /// `conditional`: the order insert that is also the purchase-limit check (the buyer's live
    /// units plus this order's must fit the limit); exact because the transaction's
    /// `conditional_deduct` holds the item row until commit.
    pub insert_order_within_limit: &'static str,
    pub insert_order_if_absent: &'static str,
    pub delete_orders: &'static str,
    /// One restock in the ledger: item, order, units, when.
    pub insert_restock: &'static str,
    pub delete_restocks: &'static str,
    /// The ledger's orders restocked more than once: order, restocks, units, first, last.
    pub restocked_twice: &'static str,
    /// The ledger's restocks of orders whose row still holds stock: order, units, when, status.
    pub restocked_held: &'static str,
    /// How many orders an item has (a set-up without reset refuses an item that has some).
    pub count_orders: &'static str,
    pub delete_item: &'static str,
    pub insert_item: &'static str,
    pub get_order: &'static str,
    /// The order an `Idempotency-Key` bought, by item and key (unique per item).
    pub order_by_key: &'static str,
    /// Stores an order's key on a row persisted before its `order` event (which carries it).
    pub set_key_if_missing: &'static str,
    pub set_status_if: &'static str,
    pub restock: &'static str,
    pub deduct_if_stock: &'static str,
    pub orders_for_item: &'static str,
    pub overdue_orders: &'static str,
    /// Sets the low-water mark (`items.stream_applied`).
    pub set_applied: &'static str,
    /// The item's stock and low-water mark, read together.
    pub reconcile_snapshot: &'static str,
    /// Locks the item row and reads its low-water mark: batches of one item commit one at a time.
    pub lock_applied: &'static str,
    /// Stream ids applied above a mark, in stream order.
    pub applied_above: &'static str,
    /// Forgets the applied ids above the old mark and at or below the new one (the new mark
    /// covers them; those at or below the old one are gone already). Bounded below so the
    /// scan does not walk the index entries of every id deleted before (dead until a vacuum).
    pub delete_applied_upto: &'static str,
    /// Forgets every applied id of an item (a fresh sale).
    pub delete_applied: &'static str,
    pub list_items: &'static str,
    pub insert_reconciliation: &'static str,
    /// Takes the run lock without waiting: one row, `1` when taken. PostgreSQL advisory locks
    /// are per database; MySQL's GET_LOCK is server-wide, so its name carries the database's.
    pub run_lock: &'static str,
    /// Opens a REPEATABLE READ transaction on one consistent snapshot.
    pub snapshot_begin: &'static [&'static str],
    /// Ends the snapshot transaction.
    pub snapshot_end: &'static str,
}

impl Statements {
    /// The statement table for `backend`, built once per process.
    pub fn for_backend(backend: Backend) -> &'static Self {
        static PG: OnceLock<Statements> = OnceLock::new();
        static MY: OnceLock<Statements> = OnceLock::new();
        match backend {
            Backend::Postgres => PG.get_or_init(|| Self::build(backend)),
            Backend::Mysql => MY.get_or_init(|| Self::build(backend)),
        }
    }

    fn build(backend: Backend) -> Self {
        let sp = Spelling::of(backend);
        let raw = Statements {
            read_item: leak(format!("SELECT {ITEM_COLS} FROM items WHERE id = ?")),
            read_stock: leak(sp.read_stock()),
            lock_item: leak(format!(
                "SELECT {ITEM_COLS} FROM items WHERE id = ? FOR UPDATE"
            )),
            lock_for_purchase: leak(format!(
                "SELECT {ITEM_COLS}, released_at_ms FROM items WHERE id = ? FOR UPDATE"
            )),
            held_by_user: leak(sp.held("user_id")),
            held_by_device: leak(sp.held("device_id")),
            deduct: DEDUCT,
            deduct_within_limit_stamped: leak(format!(
                "WITH stamp AS ({STAMP_ORDER}) {}",
                sp.deduct_within_limit()
            )),
            deduct_within_limit: leak(sp.deduct_within_limit()),
            stamp_order: STAMP_ORDER,
            cas_deduct: CAS_DEDUCT,
            conditional_deduct: CONDITIONAL_DEDUCT,
            insert_order: leak(format!(
                "INSERT INTO orders ({ORDER_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            )),
            insert_order_read: leak(format!(
                "INSERT INTO orders ({ORDER_COLS}, stock_read) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            )),
            note_stock_read: "UPDATE orders SET stock_read = ? WHERE id = ?",
            insert_order_within_limit: leak(sp.insert_order_within_limit()),
            insert_order_if_absent: leak(sp.insert_order_if_absent()),
            delete_orders: "DELETE FROM orders WHERE item_id = ?",
            insert_restock: "INSERT INTO restocks (item_id, order_id, qty, at_ms) VALUES (?, ?, ?, ?)",
            delete_restocks: "DELETE FROM restocks WHERE item_id = ?",
            restocked_twice: leak(format!(
                "SELECT order_id, COUNT(*), CAST(SUM(qty) AS {}), MIN(at_ms), MAX(at_ms) \
                 FROM restocks WHERE item_id = ? GROUP BY order_id HAVING COUNT(*) > 1 \
                 ORDER BY MIN(at_ms)",
                sp.sum_cast
            )),
            restocked_held: "SELECT r.order_id, r.qty, r.at_ms, o.status FROM restocks r \
                 JOIN orders o ON o.id = r.order_id \
                 WHERE r.item_id = ? AND o.status IN ('pending_payment', 'paid') \
                 ORDER BY r.at_ms",
            count_orders: "SELECT COUNT(*) FROM orders WHERE item_id = ?",
            delete_item: "DELETE FROM items WHERE id = ?",
            insert_item: INSERT_ITEM,
            get_order: leak(format!("SELECT {ORDER_READ} FROM orders WHERE id = ?")),
            order_by_key: leak(format!(
                "SELECT {ORDER_READ} FROM orders WHERE item_id = ? AND idempotency_key = ?"
            )),
            set_key_if_missing: SET_KEY_IF_MISSING,
            set_status_if: SET_STATUS_IF,
            restock: RESTOCK,
            release_restock: RELEASE_RESTOCK,
            deduct_if_stock: DEDUCT_IF_STOCK,
            orders_for_item: leak(format!("SELECT {ORDER_READ} FROM orders WHERE item_id = ?")),
            overdue_orders: OVERDUE_ORDERS,
            set_applied: "UPDATE items SET stream_applied = ? WHERE id = ?",
            reconcile_snapshot: "SELECT stock, stream_applied FROM items WHERE id = ?",
            lock_applied: "SELECT stream_applied FROM items WHERE id = ? FOR UPDATE",
            applied_above: APPLIED_ABOVE,
            delete_applied_upto: DELETE_APPLIED_UPTO,
            delete_applied: "DELETE FROM applied_runs WHERE item_id = ?",
            list_items: "SELECT id FROM items ORDER BY id",
            insert_reconciliation: INSERT_RECONCILIATION,
            run_lock: sp.run_lock,
            snapshot_begin: sp.snapshot_begin,
            snapshot_end: "COMMIT",
        };
        match backend {
            Backend::Mysql => raw,
            Backend::Postgres => raw.map(|q| leak(numbered_placeholders(q.to_string()))),
        }
    }

    fn map(self, f: impl Fn(&'static str) -> &'static str) -> Self {
        Statements {
            read_item: f(self.read_item),
            read_stock: f(self.read_stock),
            lock_item: f(self.lock_item),
            held_by_user: f(self.held_by_user),
            held_by_device: f(self.held_by_device),
            deduct: f(self.deduct),
            deduct_within_limit: f(self.deduct_within_limit),
            deduct_within_limit_stamped: f(self.deduct_within_limit_stamped),
            stamp_order: f(self.stamp_order),
            lock_for_purchase: f(self.lock_for_purchase),
            release_restock: f(self.release_restock),
            cas_deduct: f(self.cas_deduct),
            conditional_deduct: f(self.conditional_deduct),
            insert_order: f(self.insert_order),
            insert_order_read: f(self.insert_order_read),
            note_stock_read: f(self.note_stock_read),
            insert_order_within_limit: f(self.insert_order_within_limit),
            insert_order_if_absent: f(self.insert_order_if_absent),
            delete_orders: f(self.delete_orders),
            insert_restock: f(self.insert_restock),
            delete_restocks: f(self.delete_restocks),
            restocked_twice: f(self.restocked_twice),
            restocked_held: f(self.restocked_held),
            count_orders: f(self.count_orders),
            delete_item: f(self.delete_item),
            insert_item: f(self.insert_item),
            get_order: f(self.get_order),
            order_by_key: f(self.order_by_key),
            set_key_if_missing: f(self.set_key_if_missing),
            set_status_if: f(self.set_status_if),
            restock: f(self.restock),
            deduct_if_stock: f(self.deduct_if_stock),
            orders_for_item: f(self.orders_for_item),
            overdue_orders: f(self.overdue_orders),
            set_applied: f(self.set_applied),
            reconcile_snapshot: f(self.reconcile_snapshot),
            lock_applied: f(self.lock_applied),
            applied_above: f(self.applied_above),
            delete_applied_upto: f(self.delete_applied_upto),
            delete_applied: f(self.delete_applied),
            list_items: f(self.list_items),
            insert_reconciliation: f(self.insert_reconciliation),
            run_lock: f(self.run_lock),
            // No placeholders: run as they are.
            snapshot_begin: self.snapshot_begin,
            snapshot_end: self.snapshot_end,
        }
    }
}

/// Leaked once per backend per process: sqlx accepts `&'static str` as audited SQL.
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// An item's columns, in the order `rows::item_from_row` reads them.
const ITEM_COLS: &str = "id, name, price_cents, initial_stock, stock, version, purchase_limit";

const DEDUCT: &str = "UPDATE items SET stock = stock - ?, version = version + 1 WHERE id = ?";
const CAS_DEDUCT: &str = "UPDATE items SET stock = stock - ?, version = version + 1 \
                         WHERE id = ? AND stock >= ? AND version = ?";
const CONDITIONAL_DEDUCT: &str = "UPDATE items SET stock = stock - ? WHERE id = ? AND stock >= ?";
const DEDUCT_IF_STOCK: &str = "UPDATE items SET stock = stock - ?, version = version + 1 \
                              WHERE id = ? AND stock >= ?";
const RESTOCK: &str = "UPDATE items SET stock = stock + ?, version = version + 1 WHERE id = ?";
const RELEASE_RESTOCK: &str = "UPDATE items SET stock = stock + ?, version = version + 1, \
                 released_at_ms = GREATEST(released_at_ms, ?) WHERE id = ?";
/// `deduct_within_limit_stamped` (PostgreSQL) is `deduct_within_limit` stamping the buyer's
/// order (inserted before the lock) with the time the lock was granted, in one statement;
/// binds: stamp, stamp, order id, then the deduct's. MySQL's multi-table UPDATE would read the
/// buyer's other orders with locks, which buyers queued for the row lock hold (deadlocks under
/// load), so MySQL runs `stamp_order` after the deduct.
const STAMP_ORDER: &str = "UPDATE orders SET created_at_ms = ?, updated_at_ms = ? WHERE id = ?";
const INSERT_ITEM: &str =
    "INSERT INTO items (id, name, price_cents, initial_stock, stock, version, \
                          purchase_limit, stream_applied, updated_at_ms) \
                          VALUES (?, ?, ?, ?, ?, 0, ?, '0-0', ?)";
const SET_KEY_IF_MISSING: &str =
    "UPDATE orders SET idempotency_key = ? WHERE id = ? AND idempotency_key IS NULL";
const SET_STATUS_IF: &str = "UPDATE orders SET status = ?, updated_at_ms = ? \
                            WHERE id = ? AND status = ?";
const OVERDUE_ORDERS: &str = "SELECT id FROM orders WHERE item_id = ? \
                             AND status = 'pending_payment' AND created_at_ms < ? LIMIT 500";
const APPLIED_ABOVE: &str = "SELECT ms, seq_from, seq_to FROM applied_runs WHERE item_id = ? \
                 AND (ms > ? OR (ms = ? AND seq_to > ?)) ORDER BY ms, seq_to";
const DELETE_APPLIED_UPTO: &str = "DELETE FROM applied_runs WHERE item_id = ? \
                 AND (ms, seq_to) > (?, ?) AND (ms, seq_to) <= (?, ?)";
const INSERT_RECONCILIATION: &str = "INSERT INTO reconciliations \
                                    (item_id, at_ms, redis_stock, expected, residual, corrected) \
                                    VALUES (?, ?, ?, ?, ?, ?)";

/// What one backend spells its own way, and the statements built from those spellings.
struct Spelling {
    /// The integer type a `SUM` is cast to.
    sum_cast: &'static str,
    /// MySQL's `FROM DUAL` before a `WHERE` of a `SELECT` with no table.
    from_dual: &'static str,
    /// PostgreSQL's second guard on an insert-if-absent.
    insert_ignore_tail: &'static str,
    run_lock: &'static str,
    snapshot_begin: &'static [&'static str],
}

impl Spelling {
    fn of(backend: Backend) -> Self {
        match backend {
            Backend::Postgres => Spelling {
                sum_cast: "BIGINT",
                from_dual: "",
                insert_ignore_tail: " ON CONFLICT (id) DO NOTHING",
                run_lock: "SELECT CASE WHEN pg_try_advisory_lock(4242001) THEN 1 ELSE 0 END",
                snapshot_begin: &["BEGIN ISOLATION LEVEL REPEATABLE READ"],
            },
            Backend::Mysql => Spelling {
                sum_cast: "SIGNED",
                from_dual: " FROM DUAL",
                insert_ignore_tail: "",
                run_lock: "SELECT GET_LOCK(CONCAT('oversell-run:', DATABASE()), 0)",
                snapshot_begin: &[
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
                    "START TRANSACTION WITH CONSISTENT SNAPSHOT",
                ],
            },
        }
    }

    /// The units a buyer's live orders of one item hold, by `col` (`user_id`, `device_id`).
    fn held(&self, col: &str) -> String {
        let sum_cast = self.sum_cast;
        format!(
            "SELECT CAST(COALESCE(SUM(qty), 0) AS {sum_cast}) FROM orders \
             WHERE item_id = ? AND {col} = ? AND status IN ('pending_payment', 'paid')"
        )
    }

    fn read_stock(&self) -> String {
        let sum_cast = self.sum_cast;
        format!(
            "SELECT stock, (SELECT CAST(COALESCE(SUM(qty), 0) AS {sum_cast}) FROM orders \
             WHERE item_id = items.id AND status IN ('pending_payment', 'paid')) \
             FROM items WHERE id = ?"
        )
    }

    /// The subquery is a plain (MySQL: READ COMMITTED consistent) read taken after the row lock
    /// was granted, so it sees every order committed by the lock's previous holders; orders not
    /// yet committed by buyers still queued for the lock are not counted, and those buyers count
    /// this one when their turn comes.
    fn deduct_within_limit(&self) -> String {
        let sum_cast = self.sum_cast;
        format!(
            "UPDATE items SET stock = stock - ?, version = version + 1 WHERE id = ? AND \
             (SELECT CAST(COALESCE(SUM(qty), 0) AS {sum_cast}) FROM orders \
             WHERE item_id = ? AND user_id = ? AND status IN ('pending_payment', 'paid')) <= ?"
        )
    }

    fn insert_order_within_limit(&self) -> String {
        let Spelling {
            sum_cast,
            from_dual,
            ..
        } = self;
        format!(
            "INSERT INTO orders ({ORDER_COLS}) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?{from_dual} \
             WHERE (SELECT CAST(COALESCE(SUM(qty), 0) AS {sum_cast}) FROM orders \
             WHERE item_id = ? AND user_id = ? AND status IN ('pending_payment', 'paid')) \
             + ? <= ?"
        )
    }

    /// Insert-if-absent without INSERT IGNORE: MySQL's IGNORE also turns a refused row (too
    /// long, a CHECK constraint) into a warning, and the order would vanish silently. `WHERE NOT
    /// EXISTS` is exact because a batch holds its item's row lock (`lock_applied`) and order ids
    /// carry their item's id; PostgreSQL keeps ON CONFLICT as a second guard.
    fn insert_order_if_absent(&self) -> String {
        let Spelling {
            from_dual,
            insert_ignore_tail,
            ..
        } = self;
        format!(
            "INSERT INTO orders ({ORDER_COLS}) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?{from_dual} \
             WHERE NOT EXISTS (SELECT 1 FROM orders WHERE id = ?){insert_ignore_tail}"
        )
    }
}

/// PostgreSQL: the persistence consumer's run of new pending orders in one statement whose
/// text does not depend on the run's length (so it stays prepared, and its plan cached, on each
/// connection; a `VALUES` list of 9 parameters per row was a new statement to parse and plan for
/// every distinct batch length). Binds the item id, the status, then one array per column
/// ([`super::pg_array`]): ids, users, devices, quantities, times, keys. Answers the ids
/// that were **not** inserted: a replayed order conflicts on the primary key and is left as it
/// is (normally no row comes back).
pub const PG_INSERT_ORDERS: &str = "WITH ins AS (INSERT INTO orders (id, item_id, user_id, \
     device_id, qty, status, created_at_ms, updated_at_ms, idempotency_key) \
     SELECT u.id, $1, u.user_id, u.device_id, u.qty, $2, u.at, u.at, u.key \
     FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::text[]) \
     AS u(id, user_id, device_id, qty, at, key) \
     ON CONFLICT (id) DO NOTHING RETURNING id) \
     SELECT a.id FROM unnest($3::text[]) AS a(id) \
     WHERE NOT EXISTS (SELECT 1 FROM ins WHERE ins.id = a.id)";

/// PostgreSQL: [`PG_INSERT_ORDERS`] without its arbiter, for a run of orders that should all
/// be new: the same binds, no `ON CONFLICT` probe of the primary key per row before its insert
/// (the insert's own uniqueness check remains), no row back. An order that exists fails the
/// statement with a unique violation (`persist::Insert::Plain`).
pub const PG_INSERT_NEW_ORDERS: &str = "INSERT INTO orders (id, item_id, user_id, \
     device_id, qty, status, created_at_ms, updated_at_ms, idempotency_key) \
     SELECT u.id, $1, u.user_id, u.device_id, u.qty, $2, u.at, u.at, u.key \
     FROM unnest($3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::text[]) \
     AS u(id, user_id, device_id, qty, at, key)";

/// PostgreSQL: [`insert_applied`] as one statement whatever the number of runs: binds the item
/// id, then the runs' `ms`, `seq_from` and `seq_to` as three arrays (distinct `(ms, seq_to)`).
pub const PG_INSERT_APPLIED: &str = "INSERT INTO applied_runs (item_id, ms, seq_from, seq_to) \
     SELECT $1, u.ms, u.f, u.t FROM unnest($2::bigint[], $3::bigint[], $4::bigint[]) AS u(ms, f, t) \
     ON CONFLICT (item_id, ms, seq_to) \
     DO UPDATE SET seq_from = LEAST(applied_runs.seq_from, EXCLUDED.seq_from)";

/// Records `rows` runs of applied stream ids of one item (`(item_id, ms, seq_from, seq_to)`
/// bound per row). A run recorded before with the same last id (a replayed batch) keeps the
/// lower start: both runs end at that id, so their union is the longer one.
pub fn insert_applied(backend: Backend, rows: usize) -> String {
    let values = vec!["(?, ?, ?, ?)"; rows.max(1)].join(", ");
    let head = "INSERT INTO applied_runs (item_id, ms, seq_from, seq_to) VALUES";
    match backend {
        Backend::Postgres => numbered_placeholders(format!(
            "{head} {values} ON CONFLICT (item_id, ms, seq_to) \
             DO UPDATE SET seq_from = LEAST(applied_runs.seq_from, EXCLUDED.seq_from)"
        )),
        Backend::Mysql => format!(
            "{head} {values} ON DUPLICATE KEY UPDATE seq_from = LEAST(seq_from, VALUES(seq_from))"
        ),
    }
}

/// Inserts `rows` orders in one statement (`ORDER_COLS` bound per row): `batched`'s batch and
/// the persistence consumer's run of orders.
pub fn insert_orders(backend: Backend, rows: usize) -> String {
    let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?)"; rows.max(1)].join(", ");
    placeholders(
        backend,
        format!("INSERT INTO orders ({ORDER_COLS}) VALUES {values}"),
    )
}

/// `batched`: the orders of one item that bear on a batch, read under the item's row lock:
/// those of its `users` buyers (their holdings, for the limit) and those bought with its `keys`
/// (replays). Two index lookups (`orders_item_user`, `orders_item_idempotency`) joined by
/// `UNION` rather than one `OR` that MySQL may answer with a scan of the item's orders. Binds
/// the item id and the users, then (with keys) the item id and the keys.
pub fn batch_orders(backend: Backend, users: usize, keys: usize) -> String {
    let list = |n: usize| vec!["?"; n.max(1)].join(", ");
    let mut sql = format!(
        "SELECT {ORDER_READ} FROM orders WHERE item_id = ? AND user_id IN ({})",
        list(users)
    );
    if keys > 0 {
        sql.push_str(&format!(
            " UNION SELECT {ORDER_READ} FROM orders WHERE item_id = ? AND idempotency_key IN ({})",
            list(keys)
        ));
    }
    placeholders(backend, sql)
}

/// The ids among `rows` given order ids that already have a row (the persistence consumer's
/// check before its multi-row insert).
pub fn existing_orders(backend: Backend, rows: usize) -> String {
    let list = vec!["?"; rows.max(1)].join(", ");
    placeholders(
        backend,
        format!("SELECT id FROM orders WHERE id IN ({list})"),
    )
}

fn placeholders(backend: Backend, sql: String) -> String {
    match backend {
        Backend::Mysql => sql,
        Backend::Postgres => numbered_placeholders(sql),
    }
}

/// Rewrites `?` placeholders (outside string literals) to PostgreSQL's `$1, $2, ...`.
pub fn numbered_placeholders(sql: String) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut n = 0;
    let mut in_literal = false;
    for c in sql.chars() {
        match c {
            '\'' => {
                in_literal = !in_literal;
                out.push(c);
            }
            '?' if !in_literal => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_literals_only() {
        let sql = "SELECT '?' FROM t WHERE a = ? AND b = ?".to_string();
        assert_eq!(
            numbered_placeholders(sql),
            "SELECT '?' FROM t WHERE a = $1 AND b = $2"
        );
    }

    #[test]
    fn mysql_statements_keep_question_marks() {
        let s = Statements::for_backend(Backend::Mysql);
        assert!(s.cas_deduct.contains("version = ?"));
        assert!(!s.insert_order_if_absent.contains("IGNORE"));
        assert!(s
            .insert_order_if_absent
            .contains("FROM DUAL WHERE NOT EXISTS"));
        let p = Statements::for_backend(Backend::Postgres);
        assert!(p.cas_deduct.ends_with("version = $4"));
        assert!(p
            .insert_order_if_absent
            .ends_with("id = $10) ON CONFLICT (id) DO NOTHING"));
        assert!(p
            .order_by_key
            .ends_with("item_id = $1 AND idempotency_key = $2"));
        assert!(insert_applied(Backend::Postgres, 2).contains("($5, $6, $7, $8) ON CONFLICT"));
        assert!(insert_applied(Backend::Mysql, 1).contains("VALUES (?, ?, ?, ?) ON DUPLICATE"));
        assert!(p.conditional_deduct.ends_with("id = $2 AND stock >= $3"));
        assert!(p.insert_order_within_limit.ends_with("+ $12 <= $13"));
        assert!(s
            .insert_order_within_limit
            .contains("FROM DUAL WHERE (SELECT"));
        assert!(insert_orders(Backend::Postgres, 2).ends_with("$17, $18)"));
        assert_eq!(
            batch_orders(Backend::Postgres, 2, 1),
            format!(
                "SELECT {ORDER_READ} FROM orders WHERE item_id = $1 AND user_id IN ($2, $3) \
                 UNION SELECT {ORDER_READ} FROM orders WHERE item_id = $4 \
                 AND idempotency_key IN ($5)"
            )
        );
        assert!(batch_orders(Backend::Mysql, 1, 0).ends_with("AND user_id IN (?)"));
        assert!(existing_orders(Backend::Mysql, 3).ends_with("IN (?, ?, ?)"));
    }
}
