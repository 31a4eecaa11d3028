//! PostgreSQL's side of the reader: what the user's role may do, the run's role (created,
//! checked, dropped), and the sweep of roles killed runs left behind.

use super::{login_url, notice, password, role_name, stale, Created, Powers, Reader};
use crate::guard::scalar::{server_error, ScalarError};
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
    let (powers, can_create, version, user) = powers(&mut c).await.map_err(|e| server_error(&e))?;
    let given = || Reader::as_given(Backend::Postgres, url, format!("{user} (your credentials)"));
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
        Some(code) => crate::guard::sqlstate::describe(&code, None),
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
    // A role is the cluster's: any database will do, and the URL's may be gone by now.
    let mut c = match PgConnection::connect(admin).await {
        Ok(c) => c,
        Err(e) => {
            let options: sqlx::postgres::PgConnectOptions =
                admin.parse().map_err(|_| e.to_string())?;
            PgConnection::connect_with(&options.database("postgres"))
                .await
                .map_err(|_| e.to_string())?
        }
    };
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
