//! A report's metadata: the build (version and git commit), the command line (passwords
//! redacted), when the command started, and the version every server of the run reported
//! (PostgreSQL `SHOW server_version`, MySQL/MariaDB `SELECT VERSION()`, Redis `INFO server`).
//! and the settings that decide its durability and size (see [`ServerVersion::settings`]),
//! and whether the harness manages it (`--services`).
//! A server that does not say is recorded as such; it never stops the run.

use super::RunPlan;
use crate::report::{Metadata, ServerVersion};
use crate::services::redact_url;
use crate::store::redis_conn::RedisConn;
use crate::store::Backend;
use sqlx::Connection;
use std::time::Duration;

/// The commit this binary was built from (set by `build.rs`), or `unknown`.
pub const GIT_COMMIT: &str = match option_env!("OVERSELL_GIT_COMMIT") {
    Some(c) => c,
    None => "unknown",
};

/// How long a server gets to tell its version.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// The metadata of a run of `plan` that started at `started_at`.
pub(super) async fn gather(plan: &RunPlan, started_at: String) -> Metadata {
    let mut servers = Vec::new();
    let super::Servers {
        mut databases,
        redis,
    } = plan.subject.servers();
    databases.sort();
    databases.dedup();
    for url in databases {
        servers.push(database_version(&url).await);
    }
    if let Some(url) = redis {
        servers.push(redis_version(&url).await);
    }
    Metadata {
        git_commit: GIT_COMMIT.to_string(),
        command_line: crate::secret::command_line(std::env::args()),
        started_at,
        servers,
    }
}

async fn database_version(url: &str) -> ServerVersion {
    let (service, question) = match Backend::from_url(url) {
        Ok(Backend::Postgres) => ("PostgreSQL", "SHOW server_version"),
        Ok(Backend::Mysql) => ("MySQL", "SELECT VERSION()"),
        Err(e) => {
            return ServerVersion {
                service: "database".into(),
                url: redact_url(url),
                version: format!("unknown ({e})"),
                managed: false,
                settings: Default::default(),
            }
        }
    };
    let settings_query = match service {
        "PostgreSQL" => {
            "SELECT name, current_setting(name) FROM pg_settings WHERE name IN ('fsync', \
             'synchronous_commit', 'full_page_writes', 'shared_buffers', 'wal_level', \
             'max_connections')"
        }
        _ => {
            "SHOW VARIABLES WHERE Variable_name IN ('innodb_flush_log_at_trx_commit', \
             'sync_binlog', 'innodb_buffer_pool_size', 'innodb_doublewrite', 'log_bin', \
             'max_connections')"
        }
    };
    let mut settings = std::collections::BTreeMap::new();
    let version = ask(async {
        sqlx::any::install_default_drivers();
        let mut conn = sqlx::AnyConnection::connect(url).await?;
        let v: String = sqlx::query_scalar(question).fetch_one(&mut conn).await?;
        // The settings are a bonus: a server that will not tell keeps its version.
        if let Ok(rows) = sqlx::query_as::<_, (String, String)>(settings_query)
            .fetch_all(&mut conn)
            .await
        {
            settings.extend(rows);
        }
        let _ = conn.close().await;
        Ok::<_, sqlx::Error>(v)
    })
    .await;
    ServerVersion {
        service: service.into(),
        url: redact_url(url),
        version,
        managed: crate::services::managed::lookup(url).is_some(),
        settings,
    }
}

/// Redis's persistence and memory settings (`CONFIG GET`; a cluster: its first node's).
async fn redis_settings(conn: &mut RedisConn) -> std::collections::BTreeMap<String, String> {
    let mut settings = std::collections::BTreeMap::new();
    for name in ["appendonly", "appendfsync", "save", "maxmemory"] {
        let mut cmd = redis::cmd("CONFIG");
        cmd.arg("GET").arg(name);
        let Ok(answers) = conn.on_each_master(&cmd).await else {
            continue;
        };
        let pair = answers
            .into_iter()
            .find_map(|(_, v)| v.ok())
            .and_then(|v| redis::from_redis_value::<Vec<String>>(v).ok());
        if let Some([_, value]) = pair.as_deref() {
            settings.insert(name.to_string(), value.clone());
        }
    }
    settings
}

async fn redis_version(url: &str) -> ServerVersion {
    let mut settings = std::collections::BTreeMap::new();
    let version = ask(async {
        let mut conn = RedisConn::open(url).await?;
        // A cluster: every master's version, the distinct ones joined (`7.0.15`, or
        // `7.0.15, 7.2.4` in the middle of an upgrade).
        let mut versions: Vec<String> = Vec::new();
        let mut cmd = redis::cmd("INFO");
        cmd.arg("server");
        for (node, info) in conn.on_each_master(&cmd).await? {
            let info: String = redis::from_redis_value(info?)?;
            let v = info
                .lines()
                .find_map(|l| l.strip_prefix("redis_version:"))
                .map(|v| v.trim().to_string())
                .ok_or_else(|| anyhow::anyhow!("INFO server of {node:?} has no redis_version"))?;
            if !versions.contains(&v) {
                versions.push(v);
            }
        }
        settings = redis_settings(&mut conn).await;
        Ok::<_, anyhow::Error>(versions.join(", "))
    })
    .await;
    ServerVersion {
        service: "Redis".into(),
        url: redact_url(url),
        version,
        managed: crate::services::managed::lookup(url).is_some(),
        settings,
    }
}

/// The answer, or `unknown (why)`.
async fn ask<E: std::fmt::Display>(
    question: impl std::future::Future<Output = Result<String, E>>,
) -> String {
    match tokio::time::timeout(ASK_TIMEOUT, question).await {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => format!("unknown ({e})"),
        Err(_) => format!("unknown (no answer within {} s)", ASK_TIMEOUT.as_secs()),
    }
}
