//! Managed servers shared a uid with the machine's database (#58): `run_as` picked `postgres`,
//! so a superuser of the machine's own PostgreSQL read the managed Redis's password with
//! `pg_read_file(<root>/redis.conf)` and rewrote the managed `pg_hba.conf` to trust with
//! `COPY … TO PROGRAM`, and a password-less login then worked. Run as root, the harness now
//! runs its servers as a system user of their own, whose files the machine's database users
//! cannot touch.

use crate::managed::installed;
use oversell::testing::services::managed::{process, ManagedSet, ServerKind, ServerOptions};
use sqlx::Connection;
use std::os::unix::fs::MetadataExt;

/// The machine's own PostgreSQL, as its superuser (the attacker of this test).
const MACHINE_PG: &str = "postgres://postgres:postgres@127.0.0.1:5432/postgres";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machines_postgres_superuser_cannot_read_or_rewrite_the_managed_servers_files() {
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    if !nix::unistd::geteuid().is_root() {
        assert!(
            !ci,
            "CI runs the tests as root: the servers' own user is not tested"
        );
        eprintln!("\n*** SKIPPED: not root (the servers run as the harness's user) ***\n");
        return;
    }
    let kinds = installed();
    if !kinds.contains(&ServerKind::Postgres) || !kinds.contains(&ServerKind::Redis) {
        return;
    }
    let Ok(mut machine) = sqlx::PgConnection::connect(MACHINE_PG).await else {
        assert!(!ci, "CI has the machine's PostgreSQL at {MACHINE_PG}");
        eprintln!("\n*** SKIPPED: no PostgreSQL of the machine at {MACHINE_PG} ***\n");
        return;
    };

    // Arrange: managed PostgreSQL and Redis.
    let set = ManagedSet::new().unwrap();
    let pg = set
        .start(ServerKind::Postgres, ServerOptions::default())
        .await
        .unwrap();
    set.start(ServerKind::Redis, ServerOptions::default())
        .await
        .unwrap();
    let redis_conf = set.root().join("redis.conf");
    let hba = pg.data_dir().join("pg_hba.conf");
    let hba_before = std::fs::read_to_string(&hba).unwrap();
    let machine_os_user: String = sqlx::query_scalar("SELECT current_setting('data_directory')")
        .fetch_one(&mut machine)
        .await
        .map(|dir: String| {
            let uid = std::fs::metadata(dir).unwrap().uid();
            nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
                .unwrap()
                .unwrap()
                .name
        })
        .unwrap();

    // Act: what the machine's superuser tried.
    let read = sqlx::query_scalar::<_, String>("SELECT pg_read_file($1)")
        .bind(redis_conf.display().to_string())
        .fetch_one(&mut machine)
        .await;
    let line = "host all all 127.0.0.1/32 trust";
    let rewrite = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "COPY (SELECT '{line}') TO PROGRAM 'cat >> {}'",
        hba.display()
    )))
    .execute(&mut machine)
    .await;
    let write = sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "COPY (SELECT 1) TO '{}'",
        pg.data_dir().join("planted").display()
    )))
    .execute(&mut machine)
    .await;
    let passwordless = format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port());
    let login = sqlx::PgConnection::connect(&passwordless).await;

    // Assert
    assert_eq!(set.run_as(), Some(process::SERVICES_USER));
    assert_ne!(set.run_as(), Some(machine_os_user.as_str()));
    let owner = std::fs::metadata(pg.data_dir()).unwrap().uid();
    let servers = nix::unistd::User::from_name(process::SERVICES_USER)
        .unwrap()
        .unwrap();
    assert_eq!(
        owner,
        servers.uid.as_raw(),
        "the data directory is the servers' user's"
    );
    assert!(
        read.is_err(),
        "pg_read_file read the managed Redis's configuration"
    );
    assert!(rewrite.is_err() || std::fs::read_to_string(&hba).unwrap() == hba_before);
    assert_eq!(
        std::fs::read_to_string(&hba).unwrap(),
        hba_before,
        "pg_hba.conf unchanged"
    );
    assert!(write.is_err(), "COPY wrote into the managed data directory");
    assert!(!pg.data_dir().join("planted").exists());
    assert!(login.is_err(), "a password-less login worked");
    let _ = machine.close().await;
    set.shutdown().await;
}
