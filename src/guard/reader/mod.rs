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

mod mysql;
mod postgres;

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
