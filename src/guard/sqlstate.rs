//! A database error as the user is told it: its SQLSTATE and the condition's name, never the
//! server's message (which may quote a row: `invalid input syntax for type integer: "<the
//! contents of a file>"`).

/// PostgreSQL's conditions a user's read-only query meets most (Appendix A of its manual).
const CONDITIONS: [(&str, &str); 34] = [
    ("0A000", "feature not supported"),
    (
        "21000",
        "cardinality violation (a subquery returned more than one row)",
    ),
    ("22001", "string data right truncation"),
    ("22003", "numeric value out of range"),
    ("22007", "invalid datetime format"),
    ("22008", "datetime field overflow"),
    ("22012", "division by zero"),
    ("22023", "invalid parameter value"),
    ("22P02", "invalid text representation"),
    (
        "25006",
        "read-only SQL transaction (the query tried to write)",
    ),
    ("28000", "invalid authorization specification"),
    ("28P01", "invalid password"),
    ("3D000", "invalid catalog name (no such database)"),
    ("3F000", "invalid schema name"),
    ("40001", "serialization failure"),
    ("40P01", "deadlock detected"),
    (
        "42501",
        "insufficient privilege (the server refused it to this role)",
    ),
    ("42601", "syntax error"),
    ("42702", "ambiguous column"),
    ("42703", "undefined column"),
    ("42725", "ambiguous function"),
    ("42804", "datatype mismatch"),
    ("42809", "wrong object type"),
    ("42883", "undefined function"),
    ("42P01", "undefined table"),
    ("42P02", "undefined parameter"),
    ("42P18", "indeterminate datatype"),
    ("53300", "too many connections"),
    ("55P03", "lock not available"),
    (
        "57014",
        "query canceled (the statement timeout: --oracle-timeout)",
    ),
    ("57P01", "admin shutdown"),
    ("58030", "I/O error"),
    ("58P01", "undefined file"),
    ("HV000", "foreign data wrapper error"),
];

/// The classes (a SQLSTATE's first two characters), for a code not in [`CONDITIONS`].
const CLASSES: [(&str, &str); 26] = [
    ("01", "warning"),
    ("02", "no data"),
    ("08", "connection exception"),
    ("0A", "feature not supported"),
    ("0L", "invalid grantor"),
    ("0P", "invalid role specification"),
    ("21", "cardinality violation"),
    ("22", "data exception"),
    ("23", "integrity constraint violation"),
    ("25", "invalid transaction state"),
    ("28", "invalid authorization specification"),
    ("2F", "SQL routine exception"),
    ("38", "external routine exception"),
    ("39", "external routine invocation exception"),
    ("3D", "invalid catalog name"),
    ("3F", "invalid schema name"),
    ("40", "transaction rollback"),
    ("42", "syntax error or access rule violation"),
    ("53", "insufficient resources"),
    ("54", "program limit exceeded"),
    ("55", "object not in prerequisite state"),
    ("57", "operator intervention"),
    ("58", "system error"),
    ("HV", "foreign data wrapper error"),
    ("P0", "PL/pgSQL error"),
    ("XX", "internal error"),
];

/// MariaDB's and MySQL's error numbers a user's read-only query meets most.
const MYSQL: [(u16, &str); 16] = [
    (1044, "access denied to the database"),
    (1045, "access denied"),
    (1054, "unknown column"),
    (1064, "syntax error"),
    (
        1142,
        "command denied on the table (the server refused it to this user)",
    ),
    (1143, "command denied on the column"),
    (1146, "no such table"),
    (
        1227,
        "access denied: a privilege this user lacks (FILE, SUPER, PROCESS …)",
    ),
    (
        1290,
        "refused by a server option (--read-only, --secure-file-priv)",
    ),
    (1305, "no such function or procedure"),
    (1317, "query interrupted"),
    (1370, "execute command denied"),
    (1792, "read-only transaction (the query tried to write)"),
    (
        1969,
        "query interrupted: max_statement_time exceeded (--oracle-timeout)",
    ),
    (
        3024,
        "query interrupted: max_execution_time exceeded (--oracle-timeout)",
    ),
    (1095, "not the owner of the thread (KILL refused)"),
];

/// `SQLSTATE 42501 (insufficient privilege …)`; with MySQL's error `number`,
/// `SQLSTATE 42000, error 1227 (access denied: …)`.
pub fn describe(code: &str, number: Option<u16>) -> String {
    if let Some(n) = number {
        let kind = MYSQL
            .iter()
            .find(|(m, _)| *m == n)
            .map_or("see the server's manual", |(_, k)| k);
        return format!("SQLSTATE {code}, error {n} ({kind})");
    }
    let kind = CONDITIONS
        .iter()
        .find(|(c, _)| c.eq_ignore_ascii_case(code))
        .map(|(_, k)| *k)
        .or_else(|| {
            CLASSES
                .iter()
                .find(|(c, _)| code.get(..2).is_some_and(|p| p.eq_ignore_ascii_case(c)))
                .map(|(_, k)| *k)
        })
        .unwrap_or("an unknown condition");
    format!("SQLSTATE {code} ({kind})")
}

/// A driver error as the user is told it: a server's by its SQLSTATE ([`describe`]), any other
/// (a broken connection, a protocol error) by the driver's words, which quote no row.
pub fn of(e: &sqlx::Error) -> String {
    match e.as_database_error() {
        Some(d) => {
            let number = d
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .map(|m| m.number());
            let code = d
                .code()
                .map(|c| c.into_owned())
                .unwrap_or_else(|| "?????".into());
            format!("the server refused it: {}", describe(&code, number))
        }
        None => match e {
            sqlx::Error::ColumnDecode { index, .. } => {
                format!("its column {index} could not be read as the type it declares")
            }
            other => other.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_condition_is_named_by_its_code_its_class_or_mysqls_number() {
        assert_eq!(
            describe("42501", None),
            "SQLSTATE 42501 (insufficient privilege (the server refused it to this role))"
        );
        assert_eq!(
            describe("22P05", None),
            "SQLSTATE 22P05 (data exception)",
            "by its class"
        );
        assert!(describe("42000", Some(1227)).contains("error 1227 (access denied"));
        assert!(describe("ZZ999", None).ends_with("(an unknown condition)"));
    }
}
