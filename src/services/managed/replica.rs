//! A managed PostgreSQL streaming replica of a managed primary: `pg_basebackup -R -X stream`
//! from the primary (the same version's tool, from the primary's binary directory) into a data
//! directory of the same root, then the same server binary and settings on a port of its own,
//! in hot standby (read-only queries while it replays). initdb's `pg_hba.conf` lets
//! replication connections from 127.0.0.1 log in with the superuser's password (given to
//! `pg_basebackup` in `PGPASSWORD`, never on its command line; `-R` writes it into the
//! replica's own 0700 data directory), and the default `wal_level` (`replica`) and
//! `max_wal_senders` (10) let the primary stream, so the primary needs no restart.
//!
//! MariaDB gets no replica here: a MariaDB replica needs the primary started with a binary log
//! and a `server_id` (a restart with other settings) and a consistent snapshot copied across
//! (`mariadb-dump --master-data` or `mariabackup`), which is more than the time this had.

use super::{free_port, run_to_end, ManagedServer, ServerKind};
use anyhow::{bail, Context};
use std::sync::{Arc, Mutex};

/// A running replica; dropping it stops it and removes its data directory.
#[derive(Debug)]
pub struct Replica {
    server: ManagedServer,
}

impl std::ops::Deref for Replica {
    type Target = ManagedServer;
    fn deref(&self) -> &ManagedServer {
        &self.server
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.server.stop_blocking();
        let _ = std::fs::remove_dir_all(&self.server.data_dir);
    }
}

impl ManagedServer {
    /// Starts a streaming replica of this PostgreSQL server, named `name` in the same root;
    /// returns once it answers (it holds everything the primary had committed at the backup).
    pub async fn start_replica(&self, name: &str) -> anyhow::Result<Replica> {
        if self.kind != ServerKind::Postgres {
            bail!(
                "a managed replica is PostgreSQL only (asked of {})",
                self.kind.service().name()
            );
        }
        let data_dir = self.root.path().join(name);
        // Made here (0700, the servers' user's): that user may not create it in the root.
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&data_dir)
                .with_context(|| format!("creating {}", data_dir.display()))?;
            if let Some(r) = &self.run_as {
                r.chown(&data_dir)?;
            }
        }
        let log = self.root.path().join(format!("{name}.log"));
        // Beside the server binary, or beside what it links to (`/usr/local/bin/postgres ->
        // /usr/lib/postgresql/15/bin/postgres`): the same version's tool.
        let canonical = std::fs::canonicalize(self.found.server()).ok();
        let tool = std::iter::once(self.bin_dir().to_path_buf())
            .chain(
                canonical
                    .as_deref()
                    .and_then(|p| p.parent())
                    .map(|p| p.to_path_buf()),
            )
            .map(|d| d.join("pg_basebackup"))
            .find(|t| t.exists())
            .unwrap_or_else(|| self.bin_dir().join("pg_basebackup"));
        if !tool.exists() {
            bail!(
                "{} is not installed beside {} (the PostgreSQL client tools: Debian \
                 `apt-get install postgresql-client`)",
                tool.display(),
                self.found.server().display()
            );
        }
        let mut cmd = std::process::Command::new(&tool);
        cmd.arg("-D")
            .arg(&data_dir)
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-R", "-X", "stream", "-c", "fast"])
            .args(["--no-sync", "--no-password"])
            .env("PGPASSWORD", &*self.password)
            .current_dir(self.root.path());
        let what = format!(
            "pg_basebackup of the managed PostgreSQL on port {}",
            self.port
        );
        run_to_end(cmd, self.run_as.as_ref(), &log, &what).await?;
        let mut settings = self.settings.clone();
        settings.retain(|(k, _)| k != "hot_standby");
        settings.push(("hot_standby".into(), "on".into()));
        let replica = ManagedServer {
            kind: self.kind,
            name: name.to_string(),
            found: self.found.clone(),
            root: self.root.clone(),
            data_dir,
            log,
            port: free_port()?,
            run_as: self.run_as.clone(),
            settings,
            version: self.version.clone(),
            child: Arc::new(Mutex::new(None)),
            password: self.password.clone(),
        };
        let replica = Replica { server: replica };
        replica
            .start_again()
            .await
            .context("starting the replica")?;
        Ok(replica)
    }
}
