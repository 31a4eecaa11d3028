//! The user's scalar oracle queries (`--sold-query`, `--stock-query`, `--backlog-query`): run
//! exactly as written, never spliced into text of ours (a comment or a stray parenthesis could
//! close it), and the first column of the first row read as a whole number.
//!
//! Each reading gets a connection of its own, as the run's reader ([`super::Reader`]: a role
//! the server itself keeps from writing, reading files and signalling sessions), closed after
//! it: nothing the query leaves on its session (an advisory lock, `GET_LOCK`, a variable)
//! outlives it. On that connection the query runs as one prepared statement (so never two
//! statements), inside `START TRANSACTION READ ONLY` (rolled back), under a statement timeout
//! (`statement_timeout` on PostgreSQL, `max_statement_time` on MariaDB, `max_execution_time` on
//! MySQL: `--oracle-timeout`), so a slow query can neither hang the run nor keep the server
//! busy after it. Before anything is sent, a query must start with `SELECT`, `WITH`, `VALUES`
//! or `TABLE`, and may not name `OUTFILE` or `DUMPFILE` ([`crate::read_only::refuse`]). An
//! error is its SQLSTATE and kind ([`super::sqlstate`]), never the server's message, which may
//! quote what the query read; a value that is not a number is never quoted back either.

use crate::store::Backend;
use sqlx::{Connection, Row, TypeInfo, ValueRef};
use std::time::Duration;

/// `--oracle-timeout`'s default: how long one oracle query may run.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Why a scalar query gave no number: the message names no flag or URL (the caller does).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScalarError {
    /// Refused before it was sent.
    #[error("{0}")]
    Refused(String),
    /// The database could not be reached.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// The server refused or stopped it (its own message).
    #[error("{0}")]
    Server(String),
    /// It ran, but its answer is not a whole number.
    #[error("{0}")]
    NotANumber(String),
}

/// Refuses a query that is not one read, or that would write a file
/// ([`crate::read_only::refuse`]).
pub fn refuse(query: &str) -> Result<(), ScalarError> {
    crate::read_only::refuse(query).map_err(ScalarError::Refused)
}

/// Runs `query` as `reader` ([`super::Reader`]: a role that can only read, or the user's own
/// credentials) on a connection of its own, under `timeout`, in a read-only transaction; its
/// first column of its first row (`None`: no row, or NULL).
pub async fn read(
    reader: &super::Reader,
    query: &str,
    timeout: Duration,
) -> Result<Option<i64>, ScalarError> {
    refuse(query)?;
    let query = query.trim().trim_end_matches(';').trim_end();
    // Beyond the server's own timeout: a server that does not answer at all.
    let limit = timeout + Duration::from_secs(10);
    let url = reader.login_url();
    let read = async {
        match reader.backend() {
            Backend::Postgres => postgres(url, query, timeout).await,
            Backend::Mysql => mysql(url, query, timeout).await,
        }
    };
    tokio::time::timeout(limit, read).await.unwrap_or_else(|_| {
        Err(ScalarError::Server(format!(
            "no answer within {} (--oracle-timeout)",
            crate::duration::shown(limit)
        )))
    })
}

/// A driver's error as a [`ScalarError::Server`]: the server's by its SQLSTATE and kind
/// ([`super::sqlstate`]), never its message, which may quote a row.
pub fn server_error(e: &sqlx::Error) -> ScalarError {
    ScalarError::Server(super::sqlstate::of(e))
}

fn server(e: sqlx::Error) -> ScalarError {
    server_error(&e)
}

/// A connection error: the driver's words (a refused connection, a failed login), which quote
/// no row.
fn connect_error(e: sqlx::Error) -> ScalarError {
    ScalarError::Connect(match e.as_database_error() {
        Some(_) => super::sqlstate::of(&e),
        None => e.to_string(),
    })
}

async fn postgres(url: &str, q: &str, timeout: Duration) -> Result<Option<i64>, ScalarError> {
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .map_err(connect_error)?;
    let ms = timeout.as_millis().max(1);
    let value = async {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "SET statement_timeout = {ms}; START TRANSACTION READ ONLY"
        )))
        .execute(&mut conn)
        .await
        .map_err(server)?;
        let row = sqlx::query(sqlx::AssertSqlSafe(q.to_string()))
            .fetch_optional(&mut conn)
            .await
            .map_err(server)?;
        row.map(|r| pg_number(&r)).transpose().map(Option::flatten)
    }
    .await;
    // The session ends here: its locks and settings go with it.
    let _ = conn.close().await;
    value
}

async fn mysql(url: &str, q: &str, timeout: Duration) -> Result<Option<i64>, ScalarError> {
    let mut conn = sqlx::MySqlConnection::connect(url)
        .await
        .map_err(connect_error)?;
    let value = async {
        // MariaDB: seconds; MySQL has max_execution_time (ms, SELECT only) instead.
        let mariadb = format!(
            "SET SESSION max_statement_time = {:.3}",
            timeout.as_secs_f64()
        );
        if sqlx::raw_sql(sqlx::AssertSqlSafe(mariadb))
            .execute(&mut conn)
            .await
            .is_err()
        {
            let mysql = format!(
                "SET SESSION max_execution_time = {}",
                timeout.as_millis().max(1)
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(mysql))
                .execute(&mut conn)
                .await
                .map_err(server)?;
        }
        sqlx::raw_sql("START TRANSACTION READ ONLY")
            .execute(&mut conn)
            .await
            .map_err(server)?;
        let row = sqlx::query(sqlx::AssertSqlSafe(q.to_string()))
            .fetch_optional(&mut conn)
            .await
            .map_err(server)?;
        row.map(|r| mysql_number(&r))
            .transpose()
            .map(Option::flatten)
    }
    .await;
    let _ = conn.close().await;
    value
}

/// The first column of a PostgreSQL row as a whole number.
fn pg_number(row: &sqlx::postgres::PgRow) -> Result<Option<i64>, ScalarError> {
    let raw = row.try_get_raw(0).map_err(|_| no_column())?;
    if raw.is_null() {
        return Ok(None);
    }
    let ty = raw.type_info().name().to_string();
    let bad = |e: sqlx::Error| not_number(&super::sqlstate::of(&e));
    let n = match ty.as_str() {
        "INT2" => row.try_get::<i16, _>(0).map_err(bad)? as i64,
        "INT4" => row.try_get::<i32, _>(0).map_err(bad)? as i64,
        "INT8" => row.try_get::<i64, _>(0).map_err(bad)?,
        "FLOAT4" => whole(row.try_get::<f32, _>(0).map_err(bad)? as f64)?,
        "FLOAT8" => whole(row.try_get::<f64, _>(0).map_err(bad)?)?,
        "NUMERIC" => numeric(raw.as_bytes().map_err(|e| not_number(&e.to_string()))?)?,
        "TEXT" | "VARCHAR" | "BPCHAR" | "NAME" => {
            decimal(&row.try_get::<String, _>(0).map_err(bad)?)?
        }
        other => return Err(not_number(&format!("its first column is a {other}"))),
    };
    Ok(Some(n))
}

/// The first column of a MySQL/MariaDB row as a whole number (DECIMAL arrives as its digits).
fn mysql_number(row: &sqlx::mysql::MySqlRow) -> Result<Option<i64>, ScalarError> {
    let raw = row.try_get_raw(0).map_err(|_| no_column())?;
    if raw.is_null() {
        return Ok(None);
    }
    let ty = raw.type_info().name().to_string();
    if let Ok(n) = row.try_get::<i64, _>(0) {
        return Ok(Some(n));
    }
    if let Ok(n) = row.try_get::<u64, _>(0) {
        return i64::try_from(n)
            .map(Some)
            .map_err(|_| not_number("its number is too large"));
    }
    if let Ok(f) = row.try_get::<f64, _>(0) {
        return whole(f).map(Some);
    }
    match ty.as_str() {
        "DECIMAL" | "VARCHAR" | "CHAR" | "TEXT" => {
            let text = row
                .try_get_unchecked::<String, _>(0)
                .map_err(|e| not_number(&super::sqlstate::of(&e)))?;
            decimal(&text).map(Some)
        }
        other => Err(not_number(&format!("its first column is a {other}"))),
    }
}

fn no_column() -> ScalarError {
    not_number("its answer has no column")
}

fn not_number(why: &str) -> ScalarError {
    ScalarError::NotANumber(format!("{why}; it must return one whole number"))
}

/// A float that holds a whole number.
fn whole(f: f64) -> Result<i64, ScalarError> {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        Ok(f as i64)
    } else {
        Err(not_number("it returned a number that is not whole"))
    }
}

/// Decimal digits (`12`, `12.00`, `-3`) that hold a whole number. The text is never quoted
/// back: a query may return anything (the contents of a file) as text.
fn decimal(text: &str) -> Result<i64, ScalarError> {
    let t = text.trim();
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    match (int.parse::<i64>(), frac.bytes().all(|b| b == b'0')) {
        (Ok(n), true) => Ok(n),
        _ => Err(not_number(&format!(
            "it returned text that is not a whole number ({} characters, not shown)",
            t.chars().count()
        ))),
    }
}

/// PostgreSQL's binary NUMERIC (digit count, weight, sign, scale, then base-10000 digits) as
/// a whole number.
fn numeric(b: &[u8]) -> Result<i64, ScalarError> {
    let word = |i: usize| -> Option<i16> { Some(i16::from_be_bytes([*b.get(i)?, *b.get(i + 1)?])) };
    let bad = || not_number("it returned a NUMERIC that could not be read");
    let (ndigits, weight) = (word(0).ok_or_else(bad)?, word(2).ok_or_else(bad)?);
    let sign = word(4).ok_or_else(bad)? as u16;
    if sign == 0xC000 {
        return Err(not_number("it returned NaN"));
    }
    let mut n: i128 = 0;
    for i in 0..ndigits.max(0) as usize {
        let d = word(8 + 2 * i).ok_or_else(bad)? as i128;
        let power = weight as i32 - i as i32;
        if power < 0 {
            if d != 0 {
                return Err(not_number("it returned a fraction"));
            }
            continue;
        }
        n += d * 10_000i128.pow(power as u32);
    }
    let n = if sign == 0x4000 { -n } else { n };
    i64::try_from(n).map_err(|_| not_number("its number is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_reads_are_sent_and_none_that_writes_a_file() {
        assert!(refuse("  select count(*) from o").is_ok());
        assert!(refuse("(SELECT 1)").is_ok());
        assert!(refuse("WITH x AS (SELECT 1) SELECT * FROM x").is_ok());
        for q in [
            "SELECT 1), 0) AS SIGNED) INTO OUTFILE '/tmp/x' #",
            "SELECT 1 INTO DumpFile '/tmp/x'",
            "/* hi */ SELECT 1",
            "DO SLEEP(1)",
            "CALL p()",
        ] {
            assert!(matches!(refuse(q), Err(ScalarError::Refused(_))), "{q}");
        }
        // A write is named as what it is, in the user's terms (not a syntax error).
        let e = refuse("DELETE FROM orders").unwrap_err().to_string();
        assert!(e.starts_with("only SELECT is allowed"), "{e}");
        assert!(e.ends_with("it is a DELETE"), "{e}");
        let e = refuse("-- note\nSELECT 1").unwrap_err().to_string();
        assert!(e.contains("no comment before it"), "{e}");
    }

    #[test]
    fn numbers_are_read_whole() {
        assert_eq!(decimal("12.000"), Ok(12));
        assert_eq!(decimal("-3"), Ok(-3));
        assert!(decimal("2.5").is_err());
        // 12345678 = [1234, 5678] with weight 1; -7 = [7] weight 0 sign 0x4000.
        let n = |digits: &[i16], weight: i16, sign: u16| {
            let mut b = Vec::new();
            for w in [digits.len() as i16, weight, sign as i16, 0] {
                b.extend(w.to_be_bytes());
            }
            for d in digits {
                b.extend(d.to_be_bytes());
            }
            numeric(&b)
        };
        assert_eq!(n(&[1234, 5678], 1, 0), Ok(12_345_678));
        assert_eq!(n(&[7], 0, 0x4000), Ok(-7));
        assert_eq!(
            n(&[3], 1, 0),
            Ok(30_000),
            "trailing zero digits are not stored"
        );
        assert!(n(&[3, 5000], 0, 0).is_err(), "3.5");
    }
}
