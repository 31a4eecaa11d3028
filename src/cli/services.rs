//! `--services` on the commands that need a database or Redis: [`ConnArgs::provide`] turns
//! the configured URLs into the ones the command uses (see [`crate::services::provide`]).

use super::ConnArgs;
use crate::services::managed::ServerKind;
use crate::services::provide::{provide, rebase, Provided};
use crate::store::Backend;

/// The kind of server a backend runs on.
fn kind(backend: Backend) -> ServerKind {
    match backend {
        Backend::Postgres => ServerKind::Postgres,
        Backend::Mysql => ServerKind::Mysql,
    }
}

impl ConnArgs {
    /// Applies `--services` for a command that uses `backends` (and Redis when `redis`):
    /// starts the managed servers it needs and points these URLs at them. Hold the result for
    /// the command's length (dropping it stops the servers).
    pub async fn provide(&mut self, backends: &[Backend], redis: bool) -> anyhow::Result<Provided> {
        // Every URL fits its role before anything is started or connected to.
        self.check_servers(backends, redis)?;
        // Several backends (`compare --backend postgres,mysql`): --database-url serves the one
        // it names and the others their own URLs, as `--help` says.
        let several = backends.len() > 1;
        let url_of = |conn: &Self, b: Backend| match several {
            true => conn.database_each(Some(b)),
            false => conn.database_for(Some(b)),
        };
        let mut wanted = Vec::new();
        for b in backends {
            let (b, url) = url_of(self, *b)?;
            wanted.push((kind(b), url));
        }
        if redis {
            wanted.push((ServerKind::Redis, self.redis_url.clone()));
        }
        let provided = provide(self.services, &wanted).await?;
        if let Some(base) = provided.base(ServerKind::Postgres) {
            let (_, url) = url_of(self, Backend::Postgres)?;
            let managed = rebase(&url, base);
            match self.database_url.as_deref().map(Backend::from_url) {
                Some(Ok(Backend::Mysql)) => self.managed_postgres = Some(managed),
                _ => self.database_url = Some(managed),
            }
        }
        if let Some(base) = provided.base(ServerKind::Mysql) {
            self.mysql_url = rebase(&self.mysql_url, base);
            if let Some(Ok(Backend::Mysql)) = self.database_url.as_deref().map(Backend::from_url) {
                self.database_url = self.database_url.as_deref().map(|u| rebase(u, base));
            }
        }
        if let Some(base) = provided.base(ServerKind::Redis) {
            self.redis_url = base.to_string();
        }
        Ok(provided)
    }
}
