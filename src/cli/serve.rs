//! `oversell serve`: the reference shop's flags, grouped for `--help`, or its whole
//! configuration as one document (`--config FILE|-`, a [`ServeConfig`]); its readiness report
//! on a channel of its own (`--ready-fd N`); and the refusal of a public listen address without
//! an admin token of at least 16 characters.

use super::{defect_warning, values, ConnArgs};
use crate::exit::Exit;
use crate::inventory::Strategy;
use crate::services::ServicesMode;
use crate::shop::ready::{Readiness, ReadySender};
use crate::shop::{workers, Application, ServeConfig, ShopKnobs, TrustedProxies};
use crate::store::Backend;
use clap::Args;
use std::net::SocketAddr;

/// `oversell serve`.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Inventory strategy (required unless --config).
    #[arg(short, long, value_enum, required_unless_present = "config",
          help_heading = values::SHOP)]
    pub strategy: Option<Strategy>,
    /// Every setting from this JSON document instead of flags (`-`: stdin), as `run` hands
    /// its child shop its settings; no other flag of `serve` goes with it, and the environment
    /// variables are not read. Fields: docs/src/running/cli.md.
    #[arg(long, value_name = "FILE|-", value_parser = read_config, help_heading = values::SHOP)]
    pub config: Option<Box<ServeConfig>>,
    /// Report readiness on this inherited file descriptor: one JSON line (the bound address and
    /// this version, or why it stopped), then it is closed.
    #[arg(long, value_name = "FD", value_parser = values::whole::<i32>(3, i32::MAX as i128),
          help_heading = values::SHOP)]
    pub ready_fd: Option<i32>,
    /// Address to listen on: IP:PORT, HOST:PORT or :PORT (loopback); port 0 picks a free port
    /// and the bound address is printed. Off loopback it needs --admin-token.
    #[arg(short, long, value_name = "ADDR", default_value = "127.0.0.1:8080",
          value_parser = values::listen, help_heading = values::SHOP)]
    pub listen: SocketAddr,
    /// Database backend (default: inferred from --database-url, else postgres).
    #[arg(short, long, value_enum, help_heading = values::SHOP)]
    pub backend: Option<Backend>,
    /// Prefix of every Redis key (isolates parallel runs).
    #[arg(long, default_value = crate::shop::serve_config::DEFAULT_REDIS_PREFIX,
          help_heading = values::SHOP)]
    pub redis_prefix: String,
    /// redis-lua: URL that receives reconciliation alerts as JSON POSTs.
    #[arg(long, value_name = "URL", help_heading = values::SHOP)]
    pub alert_webhook: Option<String>,
    /// The admin routes (set-up/reset, rewarm, reconcile) then need `Authorization: Bearer
    /// <token>`.
    #[arg(long, env = "OVERSELL_ADMIN_TOKEN", hide_env_values = true,
          help_heading = values::SECURITY)]
    pub admin_token: Option<String>,
    /// Listen off loopback without --admin-token: anyone who can reach the port may reset the
    /// sale. Without this flag such a --listen is refused.
    #[arg(long, help_heading = values::SECURITY)]
    pub allow_open_admin: bool,
    /// A proxy (address or network) whose X-Forwarded-For names the client; repeatable. From
    /// any other peer the header is ignored.
    #[arg(long = "trusted-proxy", value_name = "IP|CIDR", value_parser = TrustedProxies::parse,
          help_heading = values::SECURITY)]
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// At most this many connections at once; the next waits until one closes.
    #[arg(long, value_name = "N", default_value_t = crate::shop::listener::Limits::default().max_connections,
          value_parser = connections_arg,
          help_heading = values::SECURITY)]
    pub max_connections: usize,
    /// A request's headers must arrive within this (a slowloris is closed; so is a keep-alive
    /// connection idle this long between requests).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = limit_arg,
          help_heading = values::SECURITY)]
    pub header_read_timeout: std::time::Duration,
    /// A connection on which no byte moves either way for this long is closed (a stalled body).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = limit_arg,
          help_heading = values::SECURITY)]
    pub idle_timeout: std::time::Duration,
    /// A JSON route's body must arrive within this (a body trickled a byte at a time gets 408).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = limit_arg,
          help_heading = values::SECURITY)]
    pub body_timeout: std::time::Duration,
    /// redis-lua: read reconciliation snapshots from this replica instead of the primary.
    #[arg(long, value_name = "URL", env = "REPLICA_DATABASE_URL", hide_env_values = true, help_heading = values::CONNECTIONS)]
    pub replica_database_url: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten, next_help_heading = values::KNOBS)]
    pub knobs: ShopKnobs,
}

/// `--max-connections`: 1 to 1,000,000.
fn connections_arg(v: &str) -> Result<usize, String> {
    v.parse::<usize>()
        .ok()
        .filter(|n| (1..=1_000_000).contains(n))
        .ok_or_else(|| format!("takes a whole number from 1 to 1000000 (got {v:?})"))
}

/// `--header-read-timeout`, `--idle-timeout`: a duration from 100ms to 1h.
fn limit_arg(v: &str) -> Result<std::time::Duration, String> {
    let d = values::duration(v)?;
    if d < std::time::Duration::from_millis(100) || d > std::time::Duration::from_secs(3600) {
        return Err(format!("takes a duration from 100ms to 1h (got {v:?})"));
    }
    Ok(d)
}

/// The shortest admin token a shop reachable from other machines takes.
pub const MIN_TOKEN_CHARS: usize = 16;

/// `serve --listen` off loopback without `--admin-token` (or with one shorter than
/// [`MIN_TOKEN_CHARS`]): refused (anyone reaching the port
/// could reset the sale) unless `--allow-open-admin`, which is announced on stderr.
fn open_admin(
    listen: SocketAddr,
    token: Option<&str>,
    allow_open_admin: bool,
) -> anyhow::Result<()> {
    let token = token.filter(|t| !t.is_empty());
    if listen.ip().is_loopback() {
        return Ok(());
    }
    if let Some(t) = token {
        let n = t.chars().count();
        anyhow::ensure!(
            n >= MIN_TOKEN_CHARS,
            "--admin-token is {n} characters and --listen {listen} is reachable from other \
             machines: a token there needs at least {MIN_TOKEN_CHARS} (generate one: `openssl \
             rand -hex 24`)"
        );
        return Ok(());
    }
    anyhow::ensure!(
        allow_open_admin,
        "--listen {listen} is reachable from other machines and --admin-token is not set: anyone \
         who can reach it could reset the sale (POST /admin/...). Set --admin-token (or \
         OVERSELL_ADMIN_TOKEN), listen on loopback (127.0.0.1:PORT or :PORT), or pass \
         --allow-open-admin to accept that"
    );
    crate::console::eoutln!(
        "WARNING: --listen {listen} without --admin-token (--allow-open-admin): anyone who can \
         reach this port can reset the sale"
    );
    Ok(())
}

/// `--config`: the document at this path, or on stdin (`-`), read whole before the runtime
/// starts (its knobs size the runtime).
fn read_config(v: &str) -> Result<Box<ServeConfig>, String> {
    use std::io::Read;
    let (text, source) = if v == "-" {
        let mut text = String::new();
        let read = std::io::stdin().read_to_string(&mut text);
        (read.map(|_| text), "stdin".to_string())
    } else {
        (std::fs::read_to_string(v), v.to_string())
    };
    let text = text.map_err(|e| format!("reading {source}: {e}"))?;
    ServeConfig::from_json(&text)
        .map(Box::new)
        .map_err(|e| format!("{source}: {e}"))
}

/// The flags most shops are started with, first in `--help` and alone in `-h` (argument ids).
pub(super) const COMMON: &[&str] = &[
    "strategy",
    "listen",
    "backend",
    "database_url",
    "redis_url",
    "services",
    "admin_token",
    "pool_size",
];

/// With `--config`, a flag given beside it is refused (the document is whole, so the flag
/// would be ignored); a value from the environment is not read.
pub(super) fn config_alone(
    command: &mut clap::Command,
    matches: &clap::ArgMatches,
) -> Result<(), clap::Error> {
    let Some(("serve", m)) = matches.subcommand() else {
        return Ok(());
    };
    if m.value_source("config") != Some(clap::parser::ValueSource::CommandLine) {
        return Ok(());
    }
    let serve = command
        .find_subcommand_mut("serve")
        .expect("serve is a subcommand");
    let beside: Vec<String> = serve
        .get_arguments()
        .filter(|a| !["config", "ready_fd"].contains(&a.get_id().as_str()))
        .filter(|a| {
            m.value_source(a.get_id().as_str()) == Some(clap::parser::ValueSource::CommandLine)
        })
        .map(|a| format!("--{}", a.get_long().unwrap_or(a.get_id().as_str())))
        .collect();
    if beside.is_empty() {
        return Ok(());
    }
    Err(serve.error(
        clap::error::ErrorKind::ArgumentConflict,
        format!(
            "--config holds every setting of the shop: {} cannot go with it (write it in the \
             document instead)",
            beside.join(", ")
        ),
    ))
}

impl ServeArgs {
    /// The shop's runtime workers as asked (0: chosen, [`crate::shop::workers`]), from the
    /// document or the flag.
    pub fn worker_threads(&self) -> u32 {
        self.config
            .as_ref()
            .map_or(self.knobs.worker_threads, |c| c.knobs.worker_threads)
    }

    /// The workers the shop's runtime is built with ([`crate::shop::workers::choose`]):
    /// `None` leaves them to tokio (0 asked and `TOKIO_WORKER_THREADS` set).
    pub fn workers(&self) -> Option<usize> {
        let asked = self.worker_threads();
        if asked == 0 && std::env::var_os("TOKIO_WORKER_THREADS").is_some() {
            return None;
        }
        let here = match (&self.config, self.strategy) {
            (Some(c), _) => workers::servers_here(
                c.strategy,
                Some(&c.database_url),
                &c.redis_url,
                ServicesMode::External,
            ),
            // A refused --database-url is reported when the shop starts; here it counts as a
            // server elsewhere.
            (None, Some(strategy)) => workers::servers_here(
                strategy,
                self.conn
                    .database_for(self.backend)
                    .ok()
                    .map(|(_, url)| url)
                    .as_deref(),
                &self.conn.redis_url,
                self.conn.services,
            ),
            // Not parsed: clap requires --strategy without --config.
            (None, None) => false,
        };
        Some(workers::choose(asked, workers::cores(), here))
    }
}

/// `oversell serve`: builds the shop, reports the address it bound (on the readiness channel
/// when asked, and on stdout), serves until a signal. A start that fails is reported on the
/// readiness channel too.
pub(super) async fn serve(mut args: ServeArgs) -> anyhow::Result<Exit> {
    let ready = args.ready_fd.take().map(ReadySender::take).transpose()?;
    let started = match args.config.take() {
        Some(config) => start(*config, None).await,
        None => from_flags(args).await,
    };
    let (app, strategy, _services) = match started {
        Ok(v) => v,
        Err(e) => {
            if let Some(ready) = ready {
                let code = super::exit_code_for(&e).code();
                ready.send(&Readiness::failed(format!("{e:#}"), code));
            }
            return Err(e);
        }
    };
    if let Some(ready) = ready {
        ready.send(&Readiness::ready(app.local_addr()));
    }
    // The first stdout line: for a person, or a script without --ready-fd.
    crate::console::outln!("oversell shop listening on http://{}", app.local_addr());
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    tracing::info!(%strategy, addr = %app.local_addr(), workers, "shop ready");
    app.run_until_stopped(crate::shop::shutdown_signal())
        .await?;
    Ok(Exit::Success)
}

/// The servers a shop's start provided (kept until it stops).
type Services = crate::services::provide::Provided;

/// `serve`'s flags: refuses an open admin first, then provides the servers (`--services`),
/// then builds the document they describe and starts it.
async fn from_flags(mut args: ServeArgs) -> anyhow::Result<(Application, Strategy, Services)> {
    let strategy = args
        .strategy
        .expect("clap requires --strategy without --config");
    open_admin(
        args.listen,
        args.admin_token.as_deref(),
        args.allow_open_admin,
    )?;
    let (backend, _) = args.conn.database_for(args.backend)?;
    let services = args.conn.provide(&[backend], strategy.uses_redis()).await?;
    let (_, db) = args.conn.database_for(args.backend)?;
    let config = ServeConfig {
        redis_prefix: args.redis_prefix,
        replica_database_url: args.replica_database_url,
        alert_webhook: args.alert_webhook,
        admin_token: args.admin_token,
        allow_open_admin: args.allow_open_admin,
        trusted_proxies: args.trusted_proxies,
        limits: crate::shop::listener::Limits {
            max_connections: args.max_connections,
            header_read_timeout: args.header_read_timeout,
            idle_timeout: args.idle_timeout,
            body_timeout: args.body_timeout,
        },
        ..ServeConfig::new(strategy, args.listen, &db, &args.conn.redis_url, args.knobs)
    };
    start(config, Some(services)).await
}

/// Starts the shop `config` describes. A document read whole (`provided` none) is checked
/// here: the open-admin refusal, then its servers, used as they are (`--services external`);
/// `serve`'s flags did both before the servers were provided. Then its knobs and defect are
/// checked and it is built and bound.
async fn start(
    config: ServeConfig,
    provided: Option<Services>,
) -> anyhow::Result<(Application, Strategy, Services)> {
    let services = match provided {
        Some(p) => p,
        None => {
            let token = config.admin_token.as_deref();
            open_admin(config.listen, token, config.allow_open_admin)?;
            let mut conn = ConnArgs {
                database_url: Some(config.database_url.clone()),
                mysql_url: config.database_url.clone(),
                redis_url: config.redis_url.clone(),
                services: ServicesMode::External,
                managed_postgres: None,
                from_env: Vec::new(),
            };
            let (backend, _) = conn.database_for(None)?;
            conn.provide(&[backend], config.strategy.uses_redis())
                .await?
        }
    };
    config.knobs.validate()?;
    defect_warning(&config.knobs, [config.strategy])?;
    let app = Application::build(config.shop_config()).await?;
    Ok((app, config.strategy, services))
}
