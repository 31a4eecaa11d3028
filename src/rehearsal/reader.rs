//! Who the user's SQL runs as (the oracle's queries, `--orders-query`, `--backlog-query`, a
//! `[watch]` gauge's): read-only by the server's own rules, never by a list of words.
//!
//! [`Reader::open`] logs in once with the user's URL and asks the server what those
//! credentials may do beyond reading ([`Powers`]): PostgreSQL's superuser, membership of
//! `pg_read_server_files`, `pg_write_server_files`, `pg_execute_server_program` or
//! `pg_signal_backend`, writes on tables; MariaDB's `FILE`, `SUPER`, `SHUTDOWN`, writes. When
//! they can do nothing more, the queries run as they are. When they can, and may create a
//! role, the run gets a role of its own and every query *logs in* as it:
//!
//! - PostgreSQL (14 or later): `LOGIN` with a random password, `NOSUPERUSER NOCREATEDB
//!   NOCREATEROLE NOREPLICATION NOBYPASSRLS`, member of `pg_read_all_data` and
//!   `pg_read_all_stats` only, `default_transaction_read_only` on. It cannot write, read or
//!   write a file (`pg_read_file`, `lo_export`, `COPY … TO PROGRAM` need roles it lacks),
//!   signal another role's session, or use `dblink` without a password the server asks for.
//!   It logs in rather than `SET ROLE`: a query leaves a role set that way with
//!   `set_config('role', …)` whenever the session's own user is a superuser.
//! - MariaDB/MySQL: a user at the harness's client host with a random password, `SELECT` on
//!   every database but the system ones and `PROCESS` (a pool gauge counts other users'
//!   connections): no `FILE` (no `INTO OUTFILE`, no `LOAD_FILE`), no `SUPER` (no `KILL` of
//!   another user's session), no write.
//!
//! The role is dropped when the last holder of the [`Reader`] is dropped; a run killed before
//! that leaves it behind, and a later run drops it once it is a day old (its name carries its
//! creation time). When the credentials can do more and no role could be made (no right to
//! create one, PostgreSQL before 14, a `pg_hba.conf` that refuses its login), the queries run
//! with them, and the run says so once, loudly, at its start.

use crate::store::Backend;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The prefix of every role a run creates (then its creation time, then a random part).
const ROLE_PREFIX: &str = "oversell_ro_";

/// How old a left-behind role must be before a later run drops it.
const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);

/// How long creating or dropping a role may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The readers open now, by the user's URL: the oracle, its stock sampler and the watch of
/// one run share one role.
static OPEN: LazyLock<Mutex<HashMap<String, Weak<Reader>>>> = LazyLock::new(Default::default);

/// The URLs whose credentials were already reported (said once per process).
static SAID: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Default::default);

/// The login the user's SQL runs as on one database. Its `Debug` shows no password.
pub struct Reader {
    backend: Backend,
    /// The URL every query logs in with: the run's own role's, or the user's.
    login: String,
    /// The user's URL (to drop the role with).
    admin: String,
    /// The role created for the run, if one was.
    role: Option<Created>,
    /// Who the queries run as, for messages: `oversell_ro_… (created for this run)`.
    pub runs_as: String,
}

/// A role (user) created for the run.
struct Created {
    name: String,
    /// MariaDB's host part.
    host: Option<String>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reader({})", self.runs_as)
    }
}

/// What the user's credentials may do beyond reading, in the user's words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Powers(pub Vec<String>);

impl Powers {
    fn text(&self) -> String {
        self.0.join(", ")
    }
}

impl Reader {
    /// The reader for the database at `url` (the user's URL): one already open for it, or a
    /// new one. Says once per URL, on stderr, what the credentials can do beyond reading.
    pub async fn open(url: &str) -> Result<Arc<Reader>, super::ScalarError> {
        if let Some(r) = OPEN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(url)
            .and_then(Weak::upgrade)
        {
            return Ok(r);
        }
        let backend =
            Backend::from_url(url).map_err(|e| super::ScalarError::Connect(e.to_string()))?;
        let (reader, notice) = match backend {
            Backend::Postgres => postgres::open(url).await?,
            Backend::Mysql => mysql::open(url).await?,
        };
        if let Some(text) = notice {
            let first = SAID
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(url.to_string());
            if first {
                tracing::warn!("{text}");
            }
        }
        let reader = Arc::new(reader);
        OPEN.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(url.to_string(), Arc::downgrade(&reader));
        Ok(reader)
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The URL queries log in with (it holds a password: never shown, never logged).
    pub fn login_url(&self) -> &str {
        &self.login
    }

    /// Whether the queries run as a role created for the run.
    pub fn restricted(&self) -> bool {
        self.role.is_some()
    }

    /// A reader that runs as the user's own credentials (nothing created).
    fn as_given(backend: Backend, url: &str, runs_as: String) -> Reader {
        Reader {
            backend,
            login: url.to_string(),
            admin: url.to_string(),
            role: None,
            runs_as,
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let Some(role) = self.role.take() else {
            return;
        };
        let (backend, admin) = (self.backend, self.admin.clone());
        // Its own thread and runtime: a drop may happen inside or outside a runtime, and the
        // role must be gone before the process can end.
        let done = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async {
                    let drop = drop_role(backend, &admin, &role);
                    if let Err(e) = tokio::time::timeout(ADMIN_TIMEOUT, drop).await.unwrap_or_else(
                        |_| Err("no answer".into()),
                    ) {
                        tracing::warn!(role = %role.name, "the run's read-only role was not dropped: {e}");
                    }
                });
            }
        });
        let _ = done.join();
    }
}

/// Drops a role the run created.
async fn drop_role(backend: Backend, admin: &str, role: &Created) -> Result<(), String> {
    match backend {
        Backend::Postgres => postgres::remove(admin, &role.name).await,
        Backend::Mysql => {
            mysql::remove(admin, &role.name, role.host.as_deref().unwrap_or("%")).await
        }
    }
}

/// A new role's name: the prefix, the time, a random part.
fn role_name() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    format!("{ROLE_PREFIX}{secs}_{:08x}", rand::random::<u32>())
}

/// Whether `name` is a role a run created more than [`STALE_AFTER`] ago.
fn stale(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(ROLE_PREFIX) else {
        return false;
    };
    let Some((secs, _)) = rest.split_once('_') else {
        return false;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    secs.parse::<u64>()
        .is_ok_and(|t| now.saturating_sub(t) > STALE_AFTER.as_secs())
}

/// A random password of 32 hexadecimal digits (no character a URL or SQL must escape).
fn password() -> String {
    format!("{:032x}", rand::random::<u128>())
}

/// What the user is told: the powers, and what oversell did about them.
fn notice(url: &str, powers: &Powers, made: Result<&str, &str>) -> String {
    let shown = crate::secret::url(url);
    match made {
        Ok(role) => format!(
            "the SQL credentials of {shown} can do more than read ({}). Your queries run as \
             {role} instead, a role oversell created for this run (it reads every table and \
             writes none, reads no file on the server, signals no other session) and drops at \
             its end",
            powers.text()
        ),
        Err(why) => format!(
            "the SQL credentials of {shown} can do more than read ({}), and oversell could not \
             create a read-only role for the run ({why}). Your queries run with these \
             credentials: the read-only transaction refuses writes to tables, but not what \
             those powers allow. Give a user that can only read (docs/src/security.md)",
            powers.text()
        ),
    }
}

/// The user's URL with its login replaced by `user` and `password` (PostgreSQL: as
/// parameters, which work for a socket path too; MySQL: as the URL's userinfo).
fn login_url(backend: Backend, url: &str, user: &str, password: &str) -> Result<String, String> {
    let mut u = reqwest::Url::parse(url).map_err(|e| e.to_string())?;
    let kept: Vec<(String, String)> = u
        .query_pairs()
        .filter(|(k, _)| !matches!(k.as_ref(), "user" | "password" | "options"))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    u.set_query(None);
    let _ = u.set_password(None);
    let _ = u.set_username("");
    let mut pairs = kept;
    match backend {
        Backend::Postgres => {
            pairs.push(("user".into(), user.into()));
            pairs.push(("password".into(), password.into()));
        }
        Backend::Mysql => {
            u.set_username(user)
                .and_then(|()| u.set_password(Some(password)))
                .map_err(|()| "the URL has no host to log in at".to_string())?;
        }
    }
    if !pairs.is_empty() {
        u.query_pairs_mut().extend_pairs(pairs);
    }
    Ok(u.to_string())
}

/// PostgreSQL's side.
mod postgres {
    use super::{login_url, notice, password, role_name, stale, Created, Powers, Reader};
    use crate::rehearsal::scalar::{server_error, ScalarError};
    use crate::store::Backend;
    use sqlx::{Connection, PgConnection, Row};

    /// What the user's credentials may do beyond reading, and whether they may create roles.
    async fn powers(c: &mut PgConnection) -> Result<(Powers, bool, i32, String), sqlx::Error> {
        let r = sqlx::query(
            "SELECT r.rolsuper, r.rolcreaterole, \
                pg_has_role(current_user, 'pg_read_server_files', 'MEMBER'), \
                pg_has_role(current_user, 'pg_write_server_files', 'MEMBER'), \
                pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER'), \
                pg_has_role(current_user, 'pg_signal_backend', 'MEMBER'), \
                (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                  WHERE c.relkind IN ('r', 'p') \
                    AND n.nspname NOT IN ('pg_catalog', 'information_schema') \
                    AND n.nspname NOT LIKE 'pg\\_toast%' \
                    AND (has_table_privilege(c.oid, 'INSERT') \
                      OR has_table_privilege(c.oid, 'UPDATE') \
                      OR has_table_privilege(c.oid, 'DELETE') \
                      OR has_table_privilege(c.oid, 'TRUNCATE'))), \
                current_setting('server_version_num')::int, current_user::text, \
                (SELECT count(*) FROM pg_stat_activity \
                  WHERE usename = current_user AND pid <> pg_backend_pid()) \
             FROM pg_roles r WHERE r.rolname = current_user",
        )
        .fetch_one(&mut *c)
        .await?;
        let mut p = Vec::new();
        let (superuser, createrole): (bool, bool) = (r.try_get(0)?, r.try_get(1)?);
        if superuser {
            p.push(
                "a superuser: it writes every table, reads and writes the server's files, runs \
                 programs on it and ends other sessions"
                    .to_string(),
            );
        } else {
            let roles = [
                (2, "reads the server's files (pg_read_server_files)"),
                (3, "writes the server's files (pg_write_server_files)"),
                (4, "runs programs on the server (pg_execute_server_program)"),
                (5, "signals other roles' sessions (pg_signal_backend)"),
            ];
            for (i, what) in roles {
                if r.try_get::<bool, _>(i)? {
                    p.push(what.to_string());
                }
            }
            let writable: i64 = r.try_get(6)?;
            if writable > 0 {
                p.push(format!("writes {writable} table(s)"));
            }
            let others: i64 = r.try_get(9)?;
            if others > 0 {
                p.push(format!(
                    "ends the {others} other session(s) of its own role (the shop's, if it logs \
                     in as the same user)"
                ));
            }
            if createrole {
                p.push("creates roles".into());
            }
        }
        Ok((
            Powers(p),
            superuser || createrole,
            r.try_get(7)?,
            r.try_get(8)?,
        ))
    }

    /// The reader for `url`, and what the user must be told.
    pub(super) async fn open(url: &str) -> Result<(Reader, Option<String>), ScalarError> {
        let mut c = PgConnection::connect(url)
            .await
            .map_err(|e| ScalarError::Connect(e.to_string()))?;
        let (powers, can_create, version, user) =
            powers(&mut c).await.map_err(|e| server_error(&e))?;
        let given =
            || Reader::as_given(Backend::Postgres, url, format!("{user} (your credentials)"));
        if powers.0.is_empty() {
            let _ = c.close().await;
            return Ok((given(), None));
        }
        let made = if !can_create {
            Err("they may not create a role".to_string())
        } else if version < 140_000 {
            Err(format!(
                "PostgreSQL {} has no pg_read_all_data (14 or later has)",
                version / 10_000
            ))
        } else {
            create(&mut c, url).await
        };
        let _ = c.close().await;
        match made {
            Ok((name, login)) => {
                let text = notice(url, &powers, Ok(&name));
                Ok((
                    Reader {
                        backend: Backend::Postgres,
                        login,
                        admin: url.to_string(),
                        runs_as: format!("{name} (created for this run)"),
                        role: Some(Created { name, host: None }),
                    },
                    Some(text),
                ))
            }
            Err(why) => Ok((given(), Some(notice(url, &powers, Err(&why))))),
        }
    }

    /// Creates the run's role and checks that it can log in; its name and login URL.
    async fn create(c: &mut PgConnection, url: &str) -> Result<(String, String), String> {
        sweep(c).await;
        let (name, pw) = (role_name(), password());
        let until = (chrono::Utc::now() + chrono::Duration::days(2)).format("%Y-%m-%d %H:%M:%S+00");
        let sql = format!(
            "BEGIN; \
             CREATE ROLE \"{name}\" LOGIN PASSWORD '{pw}' NOSUPERUSER NOCREATEDB NOCREATEROLE \
               NOREPLICATION NOBYPASSRLS INHERIT CONNECTION LIMIT 16 VALID UNTIL '{until}'; \
             GRANT pg_read_all_data, pg_read_all_stats TO \"{name}\"; \
             ALTER ROLE \"{name}\" SET default_transaction_read_only = on; \
             COMMIT"
        );
        if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut *c)
            .await
        {
            let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *c).await;
            return Err(format!("creating it failed: {}", server_error(&e)));
        }
        let login = login_url(Backend::Postgres, url, &name, &pw);
        let works = match &login {
            Ok(l) => match PgConnection::connect(l).await {
                Ok(r) => {
                    let _ = r.close().await;
                    Ok(())
                }
                Err(e) => Err(format!("the server refused its login: {}", short(&e))),
            },
            Err(e) => Err(e.clone()),
        };
        match (works, login) {
            (Ok(()), Ok(login)) => Ok((name, login)),
            (Err(why), _) | (_, Err(why)) => {
                let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "DROP ROLE IF EXISTS \"{name}\""
                )))
                .execute(&mut *c)
                .await;
                Err(why)
            }
        }
    }

    /// A login error without the server's text (which may name the role).
    fn short(e: &sqlx::Error) -> String {
        match e.as_database_error().and_then(|d| d.code()) {
            Some(code) => super::super::sqlstate::describe(&code, None),
            None => e.to_string(),
        }
    }

    /// Drops the roles runs left behind more than a day ago.
    async fn sweep(c: &mut PgConnection) {
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT rolname::text FROM pg_roles WHERE rolname LIKE 'oversell\\_ro\\_%'",
        )
        .fetch_all(&mut *c)
        .await
        .unwrap_or_default();
        for n in names.into_iter().filter(|n| stale(n)) {
            let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP ROLE IF EXISTS \"{n}\"")))
                .execute(&mut *c)
                .await;
        }
    }

    /// Drops role `name`.
    pub(super) async fn remove(admin: &str, name: &str) -> Result<(), String> {
        let mut c = PgConnection::connect(admin)
            .await
            .map_err(|e| e.to_string())?;
        let done = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP ROLE IF EXISTS \"{name}\""
        )))
        .execute(&mut c)
        .await
        .map(drop)
        .map_err(|e| server_error(&e).to_string());
        let _ = c.close().await;
        done
    }
}

/// MariaDB's and MySQL's side.
mod mysql {
    use super::{login_url, notice, password, role_name, stale, Created, Powers, Reader};
    use crate::rehearsal::scalar::{server_error, ScalarError};
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
        let mut c = MySqlConnection::connect(admin)
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roles_name_carries_its_time_and_only_old_ones_are_stale() {
        let fresh = role_name();
        assert!(fresh.starts_with(ROLE_PREFIX), "{fresh}");
        assert!(!stale(&fresh));
        assert!(stale("oversell_ro_1000_deadbeef"));
        assert!(!stale("oversell_ro_x_1"));
        assert!(!stale("someone_else_1000_1"));
    }

    #[test]
    fn the_login_url_keeps_the_address_and_replaces_only_the_login() {
        let pg = login_url(
            Backend::Postgres,
            "postgres://postgres:pw@127.0.0.1:5432/db?sslmode=disable&password=x&options=-c%20role%3Dpostgres",
            "r",
            "p1",
        )
        .unwrap();
        assert_eq!(
            pg,
            "postgres://127.0.0.1:5432/db?sslmode=disable&user=r&password=p1"
        );
        let my = login_url(Backend::Mysql, "mysql://root@127.0.0.1:3306/db", "r", "p1").unwrap();
        assert_eq!(my, "mysql://r:p1@127.0.0.1:3306/db");
        let socket = login_url(Backend::Postgres, "postgres:///db?host=/tmp", "r", "p1").unwrap();
        assert_eq!(socket, "postgres:///db?host=%2Ftmp&user=r&password=p1");
    }
}
