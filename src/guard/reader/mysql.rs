//! MariaDB's and MySQL's side of the reader: what the user may do, the run's user (created,
//! checked, dropped), and the sweep of users killed runs left behind.

use super::{login_url, notice, password, role_name, stale, Created, Powers, Reader};
use crate::guard::scalar::{server_error, ScalarError};
use crate::store::Backend;
use sqlx::{Connection, MySqlConnection};

/// Global privileges that do more than read, and what each allows.
const POWERS: [(&str, &str); 6] = [
    ("FILE", "reads and writes the server's files (FILE)"),
    (
        "SUPER",
        "ends other sessions and changes the server (SUPER)",
    ),
    ("CONNECTION ADMIN", "ends other sessions (CONNECTION ADMIN)"),
    ("SHUTDOWN", "stops the server (SHUTDOWN)"),
    ("CREATE USER", "creates users (CREATE USER)"),
    ("INSERT", "writes every table (INSERT, UPDATE, DELETE)"),
];

/// The privileges the current user holds globally and, apart, the schemas it writes.
async fn powers(c: &mut MySqlConnection) -> Result<(Powers, bool, String), sqlx::Error> {
    let grantee: String = sqlx::query_scalar(
        "SELECT CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', \
                SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')",
    )
    .fetch_one(&mut *c)
    .await?;
    let global: Vec<String> = sqlx::query_scalar(
        "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ?",
    )
    .bind(&grantee)
    .fetch_all(&mut *c)
    .await?;
    let schemas: i64 = sqlx::query_scalar(
        "SELECT COUNT(DISTINCT TABLE_SCHEMA) FROM information_schema.SCHEMA_PRIVILEGES \
         WHERE GRANTEE = ? AND PRIVILEGE_TYPE IN ('INSERT', 'UPDATE', 'DELETE')",
    )
    .bind(&grantee)
    .fetch_one(&mut *c)
    .await?;
    let has = |p: &str| global.iter().any(|g| g.eq_ignore_ascii_case(p));
    let mut p: Vec<String> = POWERS
        .iter()
        .filter(|(name, _)| has(name))
        .map(|(_, what)| what.to_string())
        .collect();
    if schemas > 0 && !has("INSERT") {
        p.push(format!("writes the tables of {schemas} database(s)"));
    }
    let client_host: String = sqlx::query_scalar("SELECT SUBSTRING_INDEX(USER(), '@', -1)")
        .fetch_one(&mut *c)
        .await?;
    Ok((Powers(p), has("CREATE USER"), client_host))
}

/// The reader for `url`, and what the user must be told.
pub(super) async fn open(url: &str) -> Result<(Reader, Option<String>), ScalarError> {
    let mut c = MySqlConnection::connect(url)
        .await
        .map_err(|e| ScalarError::Connect(e.to_string()))?;
    let (powers, can_create, host) = powers(&mut c).await.map_err(|e| server_error(&e))?;
    let given = || Reader::as_given(Backend::Mysql, url, "your credentials".into());
    if powers.0.is_empty() {
        let _ = c.close().await;
        return Ok((given(), None));
    }
    let made = match can_create {
        true => create(&mut c, url, &host).await,
        false => Err("they may not create a user".to_string()),
    };
    let _ = c.close().await;
    match made {
        Ok((name, login)) => {
            let text = notice(url, &powers, Ok(&name));
            Ok((
                Reader {
                    backend: Backend::Mysql,
                    login,
                    admin: url.to_string(),
                    runs_as: format!("{name} (created for this run)"),
                    role: Some(Created {
                        name,
                        host: Some(host),
                    }),
                },
                Some(text),
            ))
        }
        Err(why) => Ok((given(), Some(notice(url, &powers, Err(&why))))),
    }
}

/// `name` quoted as a MariaDB identifier.
fn ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// `text` quoted as a MariaDB string.
fn string(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

/// Creates the run's user at `host` with `SELECT` on every database but the system ones
/// and `PROCESS`, and checks its login; its name and login URL.
async fn create(
    c: &mut MySqlConnection,
    url: &str,
    host: &str,
) -> Result<(String, String), String> {
    sweep(c).await;
    let (name, pw) = (role_name(), password());
    let who = format!("{}@{}", string(&name), string(host));
    let dbs: Vec<String> = sqlx::query_scalar(
        "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN \
         ('mysql', 'information_schema', 'performance_schema', 'sys')",
    )
    .fetch_all(&mut *c)
    .await
    .map_err(|e| server_error(&e).to_string())?;
    let mut sql = vec![
        format!(
            "CREATE USER {who} IDENTIFIED BY {} WITH MAX_USER_CONNECTIONS 16",
            string(&pw)
        ),
        format!("GRANT PROCESS ON *.* TO {who}"),
    ];
    sql.extend(
        dbs.iter()
            .map(|d| format!("GRANT SELECT ON {}.* TO {who}", ident(d))),
    );
    let mut failed = None;
    for s in sql {
        if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(s)).execute(&mut *c).await {
            failed = Some(format!("creating it failed: {}", server_error(&e)));
            break;
        }
    }
    let login = login_url(Backend::Mysql, url, &name, &pw);
    let failed = match (failed, &login) {
        (Some(why), _) => Some(why),
        (None, Err(e)) => Some(e.clone()),
        (None, Ok(l)) => match MySqlConnection::connect(l).await {
            Ok(r) => {
                let _ = r.close().await;
                None
            }
            Err(e) => Some(format!("the server refused its login ({e})")),
        },
    };
    match (failed, login) {
        (None, Ok(login)) => Ok((name, login)),
        (Some(why), _) | (_, Err(why)) => {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP USER IF EXISTS {who}")))
                .execute(&mut *c)
                .await;
            Err(why)
        }
    }
}

/// Drops the users runs left behind more than a day ago (when the user may read them).
async fn sweep(c: &mut MySqlConnection) {
    let users: Vec<(String, String)> =
        sqlx::query_as("SELECT User, Host FROM mysql.user WHERE User LIKE 'oversell\\_ro\\_%'")
            .fetch_all(&mut *c)
            .await
            .unwrap_or_default();
    for (u, h) in users.into_iter().filter(|(u, _)| stale(u)) {
        let sql = format!("DROP USER IF EXISTS {}@{}", string(&u), string(&h));
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *c)
            .await;
    }
}

/// Drops user `name`@`host`.
pub(super) async fn remove(admin: &str, name: &str, host: &str) -> Result<(), String> {
    // A user is the server's: no database is needed, and the URL's may be gone by now.
    let mut server = reqwest::Url::parse(admin).map_err(|e| e.to_string())?;
    server.set_path("");
    let mut c = MySqlConnection::connect(server.as_str())
        .await
        .map_err(|e| e.to_string())?;
    let sql = format!("DROP USER IF EXISTS {}@{}", string(name), string(host));
    let done = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
        .execute(&mut c)
        .await
        .map(drop)
        .map_err(|e| server_error(&e).to_string());
    let _ = c.close().await;
    done
}
