//! What differs per kind of managed server: the fresh data directory (`initdb`,
//! `mariadb-install-db`), the command line with its settings, when it is ready, how it stops
//! cleanly, and its URL.
//!
//! Every kind asks for the run's random password (no trust authentication, no empty root
//! password): PostgreSQL from `initdb --pwfile` (SCRAM), MariaDB/MySQL from an `--init-file`
//! read on its first start, Redis from its configuration file (`requirepass`). Each of those
//! files is the servers' user's own, mode 0600, in the harness's root; the password is never
//! on a command line. The URLs carry it, in memory only (reports redact it).

use super::binaries::Found;
use super::ServerKind;
use anyhow::Context;
use sqlx::Connection;
use std::path::Path;
use std::process::Command;

/// The settings a managed server of `kind` runs with unless the caller overrides them: the
/// servers' own defaults for durability (fsync and synchronous commit on), written out so the
/// report records them, and room for a test suite's connections.
pub fn default_settings(kind: ServerKind) -> Vec<(String, String)> {
    let pairs: &[(&str, &str)] = match kind {
        ServerKind::Postgres => &[
            ("listen_addresses", "127.0.0.1"),
            // No Unix socket: a long temp dir (macOS) would exceed the socket path limit.
            ("unix_socket_directories", ""),
            ("fsync", "on"),
            ("synchronous_commit", "on"),
            ("full_page_writes", "on"),
            ("shared_buffers", "128MB"),
            ("max_connections", "300"),
            ("logging_collector", "off"),
        ],
        ServerKind::Mysql => &[
            ("bind_address", "127.0.0.1"),
            ("innodb_flush_log_at_trx_commit", "1"),
            ("innodb_buffer_pool_size", "134217728"),
            ("sync_binlog", "1"),
            ("max_connections", "300"),
            // As Debian's packaged configuration (which --no-defaults skips).
            ("character_set_server", "utf8mb4"),
            ("collation_server", "utf8mb4_general_ci"),
        ],
        ServerKind::Redis => &[
            ("bind", "127.0.0.1"),
            ("save", ""),
            ("appendonly", "no"),
            ("appendfsync", "everysec"),
        ],
    };
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The file beside a server's data directory that hands it the password: `initdb`'s
/// `--pwfile` (removed after it), MariaDB's `--init-file` (removed after its first start),
/// Redis's configuration file.
pub fn secret_file(root: &Path, name: &str, kind: ServerKind) -> std::path::PathBuf {
    let ext = match kind {
        ServerKind::Postgres => "pw",
        ServerKind::Mysql => "init.sql",
        ServerKind::Redis => "conf",
    };
    root.join(format!("{name}.{ext}"))
}

/// What [`secret_file`] holds for `password`.
pub fn secret_file_text(kind: ServerKind, password: &str) -> String {
    match kind {
        ServerKind::Postgres => format!("{password}\n"),
        ServerKind::Mysql => {
            // Every root the installers make, whichever exist; anonymous users removed.
            let mut sql =
                String::from("DROP USER IF EXISTS ''@'localhost';\nDROP USER IF EXISTS ''@'%';\n");
            for host in ["localhost", "127.0.0.1", "::1", "%"] {
                sql.push_str(&format!(
                    "ALTER USER IF EXISTS 'root'@'{host}' IDENTIFIED BY '{password}';\n"
                ));
            }
            sql.push_str("FLUSH PRIVILEGES;\n");
            sql
        }
        ServerKind::Redis => format!("requirepass {password}\n"),
    }
}

/// The command that fills a fresh data directory, if the kind needs one (PostgreSQL: its
/// superuser's password read from `pwfile`, SCRAM authentication for every connection).
pub fn init_command(found: &Found, data: &Path, pwfile: &Path) -> Option<Command> {
    match found {
        Found::Postgres { initdb, .. } => {
            let mut c = Command::new(initdb);
            c.arg("-D")
                .arg(data)
                .args([
                    "-U",
                    "postgres",
                    "-A",
                    "scram-sha-256",
                    "-E",
                    "UTF8",
                    "--locale=C",
                    "--no-sync",
                ])
                .arg(format!("--pwfile={}", pwfile.display()));
            Some(c)
        }
        Found::Mysql {
            install: Some(install),
            ..
        } => {
            let mut c = Command::new(install);
            c.arg("--no-defaults")
                .arg(format!("--datadir={}", data.display()))
                .args([
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                ]);
            Some(c)
        }
        Found::Mysql {
            server,
            install: None,
        } => {
            let mut c = Command::new(server);
            c.arg("--no-defaults")
                .arg("--initialize-insecure")
                .arg(format!("--datadir={}", data.display()));
            Some(c)
        }
        Found::Redis { .. } => None,
    }
}

/// The server's command line: data directory, port, settings (and MariaDB's `--init-file`,
/// Redis's configuration file: [`secret_file`], while it exists).
pub fn server_command(
    found: &Found,
    data: &Path,
    root: &Path,
    name: &str,
    port: u16,
    settings: &[(String, String)],
) -> Command {
    let mut c = Command::new(found.server());
    let kind = match found {
        Found::Postgres { .. } => ServerKind::Postgres,
        Found::Mysql { .. } => ServerKind::Mysql,
        Found::Redis { .. } => ServerKind::Redis,
    };
    let secret = secret_file(root, name, kind);
    match found {
        Found::Postgres { .. } => {
            c.arg("-D").arg(data).args(["-p", &port.to_string()]);
            for (k, v) in settings {
                c.arg("-c").arg(format!("{k}={v}"));
            }
        }
        Found::Mysql { install, .. } => {
            c.arg("--no-defaults")
                .arg(format!("--datadir={}", data.display()))
                .arg(format!("--port={port}"))
                // In its own data directory: the server's user writes nothing in the root.
                .arg(format!("--socket={}", data.join("server.sock").display()))
                .arg(format!("--pid-file={}", data.join("server.pid").display()));
            if secret.exists() {
                c.arg(format!("--init-file={}", secret.display()));
            }
            // MariaDB's installer made root@127.0.0.1; Oracle MySQL's made root@localhost,
            // which 127.0.0.1 only matches with name resolution on.
            if install.is_some() {
                c.arg("--skip-name-resolve");
            }
            for (k, v) in settings {
                c.arg(format!("--{k}={v}"));
            }
        }
        Found::Redis { .. } => {
            // The configuration file first (the password), then the command line's.
            c.arg(&secret)
                .args(["--port", &port.to_string()])
                .arg("--dir")
                .arg(data)
                .args(["--daemonize", "no", "--logfile", ""]);
            for (k, v) in settings {
                c.arg(format!("--{k}")).arg(v);
            }
        }
    }
    c
}

/// A string the server's command line contains (the watchdog checks it before a kill):
/// PostgreSQL and MariaDB keep their arguments; Redis's title is `redis-server 127.0.0.1:PORT`.
pub fn marker(kind: ServerKind, data: &Path, port: u16) -> String {
    match kind {
        ServerKind::Redis => format!(":{port}"),
        _ => data.display().to_string(),
    }
}

/// The signal of a clean stop: PostgreSQL's fast shutdown (SIGINT), SIGTERM for the others.
pub fn stop_signal(kind: ServerKind) -> nix::sys::signal::Signal {
    match kind {
        ServerKind::Postgres => nix::sys::signal::Signal::SIGINT,
        _ => nix::sys::signal::Signal::SIGTERM,
    }
}

/// The URL of the server with its password, without a database: a database name is
/// appended as `/<name>`.
pub fn base_url(kind: ServerKind, port: u16, password: &str) -> String {
    match kind {
        ServerKind::Postgres => format!("postgres://postgres:{password}@127.0.0.1:{port}"),
        ServerKind::Mysql => format!("mysql://root:{password}@127.0.0.1:{port}"),
        ServerKind::Redis => format!("redis://:{password}@127.0.0.1:{port}"),
    }
}

/// A new random password (24 hex digits: safe in a URL, a config file and SQL).
pub fn new_password() -> String {
    rand::random::<[u8; 12]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One try at whether the server of `kind` at `base` (a URL without a database) answers: a
/// login and a trivial query, or PING.
pub async fn answers(kind: ServerKind, base: &str) -> anyhow::Result<()> {
    match kind {
        ServerKind::Postgres => {
            let mut c = sqlx::PgConnection::connect(&format!("{base}/postgres")).await?;
            sqlx::query("SELECT 1").execute(&mut c).await?;
            let _ = c.close().await;
        }
        ServerKind::Mysql => {
            let mut c = sqlx::MySqlConnection::connect(base).await?;
            sqlx::query("SELECT 1").execute(&mut c).await?;
            let _ = c.close().await;
        }
        ServerKind::Redis => {
            let client = redis::Client::open(base)?;
            let mut c = client.get_multiplexed_async_connection().await?;
            let _: String = redis::cmd("PING").query_async(&mut c).await?;
        }
    }
    Ok(())
}

/// What `<server> --version` prints, trimmed (`postgres (PostgreSQL) 16.4`).
pub fn version(found: &Found) -> anyhow::Result<String> {
    let out = Command::new(found.server())
        .arg("--version")
        .output()
        .with_context(|| format!("running {} --version", found.server().display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or("").trim();
    // `mariadbd --version` starts with its own path.
    let line = line
        .strip_prefix(&*found.server().to_string_lossy())
        .unwrap_or(line)
        .trim();
    anyhow::ensure!(
        !line.is_empty(),
        "{} --version printed nothing",
        found.server().display()
    );
    Ok(line.to_string())
}
