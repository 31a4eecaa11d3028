//! What differs per kind of managed server: the fresh data directory (`initdb`,
//! `mariadb-install-db`), the command line with its settings, when it is ready, how it stops
//! cleanly, and its URL.

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

/// The command that fills a fresh data directory, if the kind needs one.
pub fn init_command(found: &Found, data: &Path) -> Option<Command> {
    match found {
        Found::Postgres { initdb, .. } => {
            let mut c = Command::new(initdb);
            c.arg("-D").arg(data).args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ]);
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

/// The server's command line: data directory, port, settings.
pub fn server_command(
    found: &Found,
    data: &Path,
    root: &Path,
    name: &str,
    port: u16,
    settings: &[(String, String)],
) -> Command {
    let mut c = Command::new(found.server());
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
                .arg(format!(
                    "--socket={}",
                    root.join(format!("{name}.sock")).display()
                ))
                .arg(format!("--pid-file={}", data.join("server.pid").display()));
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
            c.args(["--port", &port.to_string()])
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

/// The URL of the server, without a database: a database name is appended as `/<name>`.
pub fn base_url(kind: ServerKind, port: u16) -> String {
    match kind {
        // trust authentication: the password is never asked, the URL has one for tools that
        // want one.
        ServerKind::Postgres => format!("postgres://postgres:postgres@127.0.0.1:{port}"),
        ServerKind::Mysql => format!("mysql://root@127.0.0.1:{port}"),
        ServerKind::Redis => format!("redis://127.0.0.1:{port}"),
    }
}

/// One try at whether the server answers (a login and a trivial query, or PING).
pub async fn answers(kind: ServerKind, port: u16) -> anyhow::Result<()> {
    let base = base_url(kind, port);
    match kind {
        ServerKind::Postgres => {
            let mut c = sqlx::PgConnection::connect(&format!("{base}/postgres")).await?;
            sqlx::query("SELECT 1").execute(&mut c).await?;
            let _ = c.close().await;
        }
        ServerKind::Mysql => {
            let mut c = sqlx::MySqlConnection::connect(&base).await?;
            sqlx::query("SELECT 1").execute(&mut c).await?;
            let _ = c.close().await;
        }
        ServerKind::Redis => {
            let client = redis::Client::open(base.as_str())?;
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
