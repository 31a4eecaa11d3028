//! `oversell serve`: the reference shop's flags, grouped for `--help`, and the refusal of a
//! public listen address without an admin token of at least 16 characters.

use super::{defect_warning, values, ConnArgs};
use crate::exit::Exit;
use crate::inventory::Strategy;
use crate::shop::{Application, ShopKnobs, TrustedProxies};
use crate::store::Backend;
use clap::Args;
use std::net::SocketAddr;

/// `oversell serve`.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Inventory strategy.
    #[arg(short, long, value_enum, help_heading = values::SHOP)]
    pub strategy: Strategy,
    /// Address to listen on: IP:PORT, HOST:PORT or :PORT (loopback); port 0 picks a free port
    /// and the bound address is printed. Off loopback it needs --admin-token.
    #[arg(short, long, value_name = "ADDR", default_value = "127.0.0.1:8080",
          value_parser = values::listen, help_heading = values::SHOP)]
    pub listen: SocketAddr,
    /// Database backend (default: inferred from --database-url, else postgres).
    #[arg(short, long, value_enum, help_heading = values::SHOP)]
    pub backend: Option<Backend>,
    /// Prefix of every Redis key (isolates parallel runs).
    #[arg(long, default_value = "oversell", help_heading = values::SHOP)]
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
fn open_admin(args: &ServeArgs) -> anyhow::Result<()> {
    let token = args.admin_token.as_deref().filter(|t| !t.is_empty());
    if args.listen.ip().is_loopback() {
        return Ok(());
    }
    if let Some(t) = token {
        let n = t.chars().count();
        anyhow::ensure!(
            n >= MIN_TOKEN_CHARS,
            "--admin-token is {n} characters and --listen {} is reachable from other machines:              a token there needs at least {MIN_TOKEN_CHARS} (generate one: `openssl rand -hex              24`)",
            args.listen
        );
        return Ok(());
    }
    anyhow::ensure!(
        args.allow_open_admin,
        "--listen {} is reachable from other machines and --admin-token is not set: anyone who \
         can reach it could reset the sale (POST /admin/...). Set --admin-token (or \
         OVERSELL_ADMIN_TOKEN), listen on loopback (127.0.0.1:PORT or :PORT), or pass \
         --allow-open-admin to accept that",
        args.listen
    );
    eprintln!(
        "WARNING: --listen {} without --admin-token (--allow-open-admin): anyone who can reach \
         this port can reset the sale",
        args.listen
    );
    Ok(())
}

/// `oversell serve`: builds the shop, prints the address it bound, serves until a signal.
pub(super) async fn serve(mut args: ServeArgs) -> anyhow::Result<Exit> {
    open_admin(&args)?;
    let (backend, _) = args.conn.database_for(args.backend)?;
    let _services = args
        .conn
        .provide(&[backend], args.strategy.uses_redis())
        .await?;
    let (_, db) = args.conn.database_for(args.backend)?;
    args.knobs.validate()?;
    defect_warning(&args.knobs, [args.strategy])?;
    let mut config = args.knobs.config(
        args.strategy,
        args.listen,
        &db,
        &args.conn.redis_url,
        &args.redis_prefix,
    );
    config.pipeline.reconcile.webhook = args.alert_webhook;
    config.replica_database_url = args.replica_database_url;
    config.trusted_proxies = TrustedProxies::new(args.trusted_proxies);
    config.admin_token = args.admin_token.filter(|t| !t.is_empty());
    config.limits = crate::shop::listener::Limits {
        max_connections: args.max_connections,
        header_read_timeout: args.header_read_timeout,
        idle_timeout: args.idle_timeout,
        body_timeout: args.body_timeout,
    };
    let app = Application::build(config).await?;
    // The first stdout line is the contract with `oversell run`, which reads it.
    println!("oversell shop listening on http://{}", app.local_addr());
    tracing::info!(strategy = %args.strategy, addr = %app.local_addr(), "shop ready");
    app.run_until_stopped(crate::shop::shutdown_signal())
        .await?;
    Ok(Exit::Success)
}
