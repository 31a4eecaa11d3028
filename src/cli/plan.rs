//! Flags shared by `gate` and `attack` (the user's oracle, the plan and its output) and the
//! [`RunPlan`] built from them, checked before the first request is sent.

use super::values;
use crate::exit::Exit;
use crate::guard::{self, Use};
use crate::inventory::Strategy;
use crate::nemesis::FaultSpec;
use crate::rehearsal::{self, Foreign, OracleSource, OrdersQuery, PlanSummary};
use crate::runner::{self, RunPlan, ShardRun, Subject};
use crate::shard::ShardSpec;
use crate::store::Backend;
use crate::traffic::mapping::OracleFields;
use crate::traffic::session::Columns;
use crate::traffic::{buyers_csv, schedule, Scenario};
use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The user's oracle for a foreign target, and the remote-target opt-in.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = values::TARGET)]
pub struct OracleArgs {
    /// Oracle: the target's database (postgres://... or mysql://...), read-only queries
    /// (--sold-query, --orders-query or both).
    #[arg(long, requires = "target", conflicts_with = "oracle_http")]
    pub oracle_sql: Option<String>,
    /// With --oracle-sql: one SELECT returning the units sold (orders not cancelled/expired).
    /// Optional with --orders-query (sold is then the units of the rows that hold stock).
    #[arg(long, requires = "oracle_sql")]
    pub sold_query: Option<String>,
    /// With --oracle-sql: one SELECT returning the shop's order rows, columns
    /// `order_id, user_id[, qty, status[, idempotency_key]]` in that order (rename with AS).
    /// Read before the sale (those rows are not this run's) and after it settles: lost
    /// acknowledged orders by id, phantoms, duplicate buyers, status mismatches.
    #[arg(long, requires = "oracle_sql", value_name = "SELECT")]
    pub orders_query: Option<String>,
    /// With --orders-query: the statuses (comma-separated, any case) whose rows hold no stock.
    #[arg(long, requires = "orders_query", value_name = "LIST",
          default_value = crate::rehearsal::order_rows::RELEASED)]
    pub released_statuses: String,
    /// With --oracle-sql: one SELECT returning the stock left (checks conservation).
    #[arg(long, requires = "oracle_sql")]
    pub stock_query: Option<String>,
    /// Oracle: an HTTP endpoint (a URL, or a path on the target like /stock) answering JSON:
    /// {"sold": N, "stock": M} ("stock" optional), or the fields --sold-field/--stock-field
    /// name. Overrides the scenario's [target.oracle].
    #[arg(long, requires = "target")]
    pub oracle_http: Option<String>,
    /// With --oracle-http: dot path of units sold in its answer (e.g. data.sold).
    #[arg(long, requires = "oracle_http", value_name = "PATH")]
    pub sold_field: Option<String>,
    /// With --oracle-http: dot path of the stock left (e.g. current_stock). Alone, sold is
    /// derived: the stock before the sale minus the stock after (this under-counts when lost
    /// updates oversell; the clients' evidence catches that).
    #[arg(long, requires = "oracle_http", value_name = "PATH")]
    pub stock_field: Option<String>,
    /// How long the oracle's reading must stay unchanged after the last buyer before the shop
    /// counts as settled (3s, 500ms; overrides `[target.settle] settle_s`; default 3s). Up to
    /// --drain-timeout.
    #[arg(long, requires = "target", value_name = "DURATION", value_parser = settle_arg)]
    pub settle: Option<Duration>,
    /// The old spelling of --settle, in seconds.
    #[arg(long, requires = "target", value_name = "S", value_parser = settle_s_arg,
          hide = true, conflicts_with = "settle")]
    pub settle_s: Option<f64>,
    /// With --oracle-sql: one SELECT returning the shop's backlog (orders accepted and not yet
    /// written); the run settles only once it reads 0 (overrides `[target.settle] backlog`).
    #[arg(long, requires = "oracle_sql", value_name = "SELECT")]
    pub backlog_query: Option<String>,
    /// The shop's payment window: it never releases an unpaid order on its own sooner than
    /// this after the order was sent (90s, 1500ms, 15m; overrides `[target] payment_window`).
    /// Undeclared it is unknown: the clients' evidence then counts only paid orders as held,
    /// and the report says what declaring it would prove.
    #[arg(long, requires = "target", value_name = "DURATION", value_parser = payment_window_arg)]
    pub payment_window: Option<Duration>,
    /// With --oracle-sql: how long one oracle query may run (30s, 500ms); the database stops it
    /// then (PostgreSQL statement_timeout, MariaDB max_statement_time), so a slow query cannot
    /// hang the run or outlive it.
    #[arg(long, requires = "oracle_sql", value_name = "DURATION", default_value = "30s",
          value_parser = oracle_timeout_arg)]
    pub oracle_timeout: Duration,
    /// Allow a target that is not loopback; a banner names the host and peak rate first.
    #[arg(long, requires = "target")]
    pub allow_remote: bool,
}

/// `--payment-window`: a duration above 0, at most a week.
fn payment_window_arg(v: &str) -> Result<Duration, String> {
    let max = crate::traffic::mapping::MAX_PAYMENT_WINDOW_S;
    let d = values::duration(v)?;
    if d.is_zero() || d.as_secs() > max {
        return Err(format!(
            "--payment-window takes a duration above 0 and at most {max}s (got {v:?})"
        ));
    }
    Ok(d)
}

/// `--oracle-timeout`: a duration above 0, at most one hour.
fn oracle_timeout_arg(v: &str) -> Result<Duration, String> {
    let d = values::duration(v)?;
    if d.is_zero() || d > Duration::from_secs(3600) {
        return Err(format!(
            "--oracle-timeout takes a duration above 0 and at most 1h (got {v:?})"
        ));
    }
    Ok(d)
}

/// `--settle`: a duration above 0, at most ten minutes.
fn settle_arg(v: &str) -> Result<Duration, String> {
    let max = crate::traffic::mapping::MAX_SETTLE_S;
    let d = values::duration(v)?;
    if d.is_zero() || d.as_secs_f64() > max {
        return Err(format!(
            "--settle takes a duration above 0 and at most {max}s (got {v:?})"
        ));
    }
    Ok(d)
}

/// `--settle-s`: seconds above 0, at most ten minutes.
fn settle_s_arg(v: &str) -> Result<f64, String> {
    let max = crate::traffic::mapping::MAX_SETTLE_S;
    match v.trim().trim_end_matches('s').parse::<f64>() {
        Ok(s) if s > 0.0 && s <= max => Ok(s),
        _ => Err(format!(
            "--settle-s takes seconds above 0 and at most {max} (got {v:?})"
        )),
    }
}

impl OracleArgs {
    /// How the run settles: `--settle-s`, else `[target.settle] settle_s`, else 3 s; the
    /// backlog query when given.
    fn settle(&self, s: &Scenario) -> rehearsal::settle::SettlePlan {
        let window = self
            .settle
            .map(|d| d.as_secs_f64())
            .or(self.settle_s)
            .or_else(|| s.target.as_ref()?.settle.as_ref()?.settle_s)
            .unwrap_or(rehearsal::settle::DEFAULT_SETTLE_S);
        rehearsal::settle::SettlePlan {
            window: Duration::from_secs_f64(window),
            backlog_query: self.backlog_query.clone(),
        }
    }

    /// The oracle: the flags, else the scenario's `[target.oracle]`, else none. An endpoint
    /// given as a path is on the target; its host is checked by the loopback guard.
    pub(super) fn source(&self, target: &str, s: &Scenario) -> anyhow::Result<OracleSource> {
        let http = |url: &str, fields: OracleFields| -> anyhow::Result<OracleSource> {
            let url = if url.starts_with('/') {
                format!("{}{url}", target.trim_end_matches('/'))
            } else {
                url.to_string()
            };
            guard::check_url(Use::Oracle, &url, self.allow_remote)?;
            let secret_fields = s
                .target
                .as_ref()
                .map(|t| t.secret_fields.clone())
                .unwrap_or_default();
            Ok(OracleSource::Http {
                url,
                fields,
                secret_fields,
            })
        };
        let dot_path = |flag: &str, v: &Option<String>| -> anyhow::Result<()> {
            match v {
                Some(p) if p.trim().is_empty() || p.split('.').any(str::is_empty) => {
                    anyhow::bail!("{flag} must be a dot path like data.sold (got {p:?})")
                }
                _ => Ok(()),
            }
        };
        Ok(match (&self.oracle_sql, &self.oracle_http) {
            (Some(url), _) => {
                crate::store::Backend::from_url(url).map_err(|_| {
                    anyhow::anyhow!(
                        "--oracle-sql must be your shop's database, a postgres:// or mysql:// \
                         URL (got {})",
                        crate::services::redact_url(url)
                    )
                })?;
                anyhow::ensure!(
                    self.sold_query.is_some() || self.orders_query.is_some(),
                    "--oracle-sql needs --sold-query (one SELECT returning the units sold) \
                         or --orders-query (one SELECT returning order_id, user_id[, qty, \
                         status[, idempotency_key]]), or both"
                );
                guard::check_host(Use::Database, url, self.allow_remote)?;
                OracleSource::Sql {
                    url: url.clone(),
                    sold_query: self.sold_query.clone(),
                    stock_query: self.stock_query.clone(),
                    orders: self.orders_query.as_deref().map(|q| {
                        OrdersQuery::new(q, &self.released_statuses)
                            .with_timeout(self.oracle_timeout)
                    }),
                    timeout: self.oracle_timeout,
                }
            }
            (_, Some(url)) => {
                dot_path("--sold-field", &self.sold_field)?;
                dot_path("--stock-field", &self.stock_field)?;
                let fields = OracleFields {
                    sold: self.sold_field.clone(),
                    stock: self.stock_field.clone(),
                };
                http(url, fields)?
            }
            _ => match s.target.as_ref().and_then(|t| t.oracle.as_ref()) {
                Some(o) => http(&o.url, o.fields.clone())?,
                None => OracleSource::None,
            },
        })
    }
}

/// `--fault`, shared by `run`, `compare` and `gate`.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = values::FAULTS)]
pub struct FaultArgs {
    /// A fault during the sale: KIND@AT[:DURATION], repeatable. KIND is one of shop-kill,
    /// redis-restart, redis-pause, redis-conn-kill, db-outage, db-lock, redeliver, on a Redis
    /// Cluster redis-failover, redis-takeover, and on managed servers (--services managed)
    /// db-crash, db-restart and replica-lag (redis-lua, redis-buckets on PostgreSQL: a
    /// streaming replica reconciliation reads); AT is when, after the sale opens (1.5s,
    /// 500ms; a bare number is seconds); DURATION is how long, with its unit (500ms, 2s;
    /// default 1s). Adds to the scenario's [[faults]], replacing one of the same kind and time.
    #[arg(long = "fault", value_name = "KIND@AT[:DURATION]")]
    pub faults: Vec<FaultSpec>,
}

impl FaultArgs {
    /// The scenario's faults with the flags' added (a flag replaces a fault of the same kind
    /// and time).
    pub fn apply(&self, s: &mut Scenario) {
        for f in &self.faults {
            s.faults
                .retain(|g| !(g.kind == f.kind && g.at_ms() == f.at_ms()));
            s.faults.push(f.clone());
        }
    }
}

/// Plan and output flags of `gate` and `attack`.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = values::SCENARIO)]
pub struct PlanArgs {
    /// Buyers' accounts from a CSV file (header user_id,device_id,ip), one row per buyer,
    /// given to the plan's buyers in arrival order.
    #[arg(long, value_name = "FILE", value_parser = values::file)]
    pub buyers_csv: Option<PathBuf>,
    /// Print the plan (arrivals per second, request estimate, peak) and send nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub send_lag: SendLagArgs,
    #[command(flatten)]
    pub output: super::OutputArgs,
}

/// `--max-send-lag`: the send-lag p99 above which a run is flagged generator-bound.
#[derive(Debug, Args, Clone, Default)]
pub struct SendLagArgs {
    /// The send-lag p99 above which a run is flagged generator-bound (5ms, 1.5ms; overrides
    /// the scenario's `[thresholds] send_lag_p99_ms`). Undeclared, a run is generator-bound
    /// only when its send lag could change what it concludes.
    #[arg(long, value_name = "DURATION", value_parser = values::duration,
          help_heading = values::SCENARIO)]
    pub max_send_lag: Option<Duration>,
    /// The old spelling of --max-send-lag, in milliseconds.
    #[arg(long, value_name = "MS", hide = true, conflicts_with = "max_send_lag")]
    pub max_send_lag_ms: Option<f64>,
}

impl SendLagArgs {
    /// The bound in milliseconds, when one was given.
    pub fn ms(&self) -> Option<f64> {
        self.max_send_lag
            .map(|d| d.as_secs_f64() * 1000.0)
            .or(self.max_send_lag_ms)
    }
}

/// `--max-send-lag`: the scenario's `send_lag_p99_ms` bound, checked like a threshold.
pub(super) fn max_send_lag(s: &mut Scenario, ms: Option<f64>) -> anyhow::Result<()> {
    if let Some(ms) = ms {
        s.thresholds
            .set("send_lag_p99_ms", ms)
            .map_err(|e| anyhow::anyhow!("--max-send-lag: {e}"))?;
    }
    Ok(())
}

/// The buyers of `s`, renamed from a CSV when one is given, and the CSV's extra columns; the
/// mapping's named placeholders are checked against those columns and the extracted names
/// here, before anything is sent (`scenario_file` is named in the error).
pub(super) fn buyers(
    s: &Scenario,
    scenario_file: &Path,
    csv: Option<&Path>,
) -> anyhow::Result<(schedule::Schedule, Columns)> {
    let mut plan = schedule::build(s);
    let columns = match csv {
        Some(file) => buyers_csv::apply(file, &mut plan)?,
        None => Columns::default(),
    };
    check_names(s, scenario_file, &columns)?;
    Ok((plan, columns))
}

/// The scenario's named placeholders against `columns` and the extracted names.
pub(super) fn check_names(
    s: &Scenario,
    scenario_file: &Path,
    columns: &Columns,
) -> anyhow::Result<()> {
    if let Some(m) = &s.target {
        m.check_names(columns.names())
            .and_then(|()| m.env_values().map(drop))
            .map_err(|e| anyhow::anyhow!("{}: {e}", scenario_file.display()))?;
    }
    Ok(())
}

/// A foreign target, checked before anything is sent; prints the banner for a remote one.
/// `--payment-window` is declared on the scenario's mapping here.
pub(super) fn foreign(url: &str, oracle: &OracleArgs, s: &mut Scenario) -> anyhow::Result<Foreign> {
    let host = guard::check_target(url, oracle.allow_remote)?;
    if let Some(w) = oracle.payment_window {
        s.target.get_or_insert_with(Default::default).payment_window = Some(w);
    }
    let base_url = url.trim_end_matches('/').to_string();
    Ok(Foreign {
        oracle: oracle.source(&base_url, s)?,
        base_url,
        host,
        allow_remote: oracle.allow_remote,
        mapping: s.mapping(),
        settle: oracle.settle(s),
    })
}

/// Builds the plan (and starts the live endpoint it asks for); `None` after a dry run
/// (printed, nothing sent).
pub(super) async fn plan(
    scenario_file: &Path,
    s: Scenario,
    subject: Subject,
    pa: &PlanArgs,
) -> anyhow::Result<Option<RunPlan>> {
    let (buyers, columns) = buyers(&s, scenario_file, pa.buyers_csv.as_deref())?;
    let summary = PlanSummary::of(&s, &buyers);
    let (label, remote) = (subject.describe(), subject.remote_host());
    if pa.dry_run {
        let text = crate::report::table::fit(&summary.render(&label), pa.output.wide);
        pa.output.human(&text);
        if pa.output.json.wanted() {
            super::output::json_line(&super::output::dry_run(&label, &summary));
        }
        return Ok(None);
    }
    if let Some(host) = remote {
        crate::console::eoutln!("{}", summary.banner(&host));
    }
    let live = pa.output.live().await?;
    Ok(Some(
        RunPlan::new(
            s,
            scenario_file.to_path_buf(),
            subject,
            pa.output.out.clone(),
        )
        .with_buyers(buyers)
        .with_columns(columns)
        .with_drain_limit(pa.output.drain_limit())
        .with_progress(!pa.output.quiet)
        .with_live(live),
    ))
}

/// `--shard`, `--open-at` and the running shop the shards fire at: shared by `run`, `gate`
/// and `attack`.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = values::SHARDING)]
pub struct ShardArgs {
    /// Send only shard i of N of the seeded schedule (the buyers whose index is i modulo N;
    /// the N shards together send exactly the whole schedule) at the reference shop serving at
    /// --shop-url, and write the raw results (shard.json, latency-order.hlog) into --out for
    /// `oversell merge`. Shard 0 sets the sale up. Needs --open-at and --shop-url.
    #[arg(long, value_name = "i/N", requires_all = ["open_at", "shop_url"])]
    pub shard: Option<ShardSpec>,
    /// With --shard: the UTC instant every shard opens the sale at (RFC 3339, e.g.
    /// 2026-11-30T17:00:00Z); ahead of now and at most 24 h ahead.
    #[arg(long, value_name = "RFC3339", value_parser = crate::shard::open_at_arg, requires = "shard")]
    pub open_at: Option<DateTime<Utc>>,
    /// With --shard: the reference shop every shard fires at (`oversell serve`).
    #[arg(long, value_name = "URL", requires = "shard")]
    pub shop_url: Option<String>,
    /// With --shard: allow a --shop-url that is not loopback (a shop inside your cluster,
    /// e.g. http://oversell-shop:8080); without it a shard fires at loopback only.
    #[arg(long, requires = "shard")]
    pub allow_remote_shop: bool,
    /// The shop's --admin-token (shard 0's set-up, merge's reconciliation need it when set).
    #[arg(long, env = "OVERSELL_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
}

/// `--shops K`: 1 to 16 reference shop processes, refused with the range otherwise.
pub(super) fn shops_arg(v: &str) -> Result<u32, String> {
    let max = crate::shop::MAX_SHOPS;
    match v.trim().parse::<u32>() {
        Ok(k) if (1..=max).contains(&k) => Ok(k),
        _ => Err(format!(
            "--shops takes how many shop processes to start: a whole number from 1 to {max} \
             (got {v:?})"
        )),
    }
}

/// Flags a sharded command refuses besides `--fault`, `--repeat`, `--json` and
/// `--metrics-listen` (each true when given).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Refused {
    pub dry_run: bool,
    pub buyers_csv: bool,
    pub shops: bool,
}

/// What a sharded command cannot do, refused before anything is sent: a shard fires its part
/// of the scenario's schedule at a shop it does not own and writes shard.json for `merge`.
pub(super) fn refuse_with_shard(
    faults: &FaultArgs,
    repeat: u32,
    output: &super::OutputArgs,
    refused: Refused,
) -> anyhow::Result<()> {
    let Refused {
        dry_run,
        buyers_csv,
        shops,
    } = refused;
    let mut bad = Vec::new();
    if !faults.faults.is_empty() {
        bad.push("--fault (faults act on a run's own services)");
    }
    if repeat > 1 {
        bad.push("--repeat");
    }
    if output.json.wanted() {
        bad.push("--json (the merge's report is the result)");
    }
    if output.metrics_listen.is_some() {
        bad.push("--metrics-listen");
    }
    if dry_run {
        bad.push("--dry-run");
    }
    if buyers_csv {
        bad.push("--buyers-csv (shards split the scenario's seeded schedule)");
    }
    if shops {
        bad.push("--shops (a shard fires at the shops serving at --shop-url)");
    }
    anyhow::ensure!(
        bad.is_empty(),
        "--shard cannot be combined with {}: a shard fires its part of the scenario's schedule \
         at one shop (--shop-url, or attack's --target) and writes shard.json for `oversell \
         merge`",
        bad.join(", ")
    );
    Ok(())
}

/// A sharded command (`run`, or `gate` without --target) against the reference shop: fires
/// this process's shard and writes its folder; prints one line.
pub(super) async fn shard(
    scenario: &Path,
    shard: &ShardArgs,
    strategy: Strategy,
    (backend, conn): (Option<Backend>, &super::ConnArgs),
    output: &super::OutputArgs,
    max_send_lag_ms: Option<f64>,
) -> anyhow::Result<Exit> {
    let spec = shard.shard.context("--shard is required here")?;
    let open_at = shard
        .open_at
        .context("--shard needs --open-at: the instant every shard opens the sale at")?;
    let shop_url = shard
        .shop_url
        .clone()
        .context("--shard needs --shop-url: the reference shop every shard fires at")?;
    crate::guard::check_url(crate::guard::Use::Shop, &shop_url, shard.allow_remote_shop)?;
    let (mut s, scenario_file) = super::load_scenario(scenario)?;
    // Every shard must be given the same bound: it is part of the scenario the merge checks.
    max_send_lag(&mut s, max_send_lag_ms)?;
    anyhow::ensure!(
        s.faults.is_empty(),
        "{}: [[faults]] act on a run's own services; a shard fires at a shop it does not own: \
         use a scenario without faults for a sharded run",
        scenario_file.display()
    );
    let knobs = s.shop.command_line();
    if !knobs.is_empty() && spec.sets_up() {
        crate::console::eoutln!(
            "note: the scenario's [shop] table is not applied by a shard: the shop at {shop_url} \
             runs with its own flags (start it with `oversell serve ... {}` for the same sale)",
            knobs.join(" ")
        );
    }
    let whole = schedule::build(&s);
    let buyers_total = whole.len();
    let buyers = spec.take(&whole);
    let run = ShardRun {
        scenario: s,
        scenario_file,
        shard: spec,
        open_at,
        shop_url,
        admin_token: shard.admin_token.clone().filter(|t| !t.is_empty()),
        subject: reference_at(strategy, backend, conn)?,
        buyers,
        buyers_total,
        out: output.out.clone(),
        progress: !output.quiet,
    };
    fire_shard("shard", &run).await
}

/// The reference shop serving `strategy` on `backend` (default: the one `--database-url`
/// names) that a shard fires at, as `merge` will judge it.
fn reference_at(
    strategy: Strategy,
    backend: Option<Backend>,
    conn: &super::ConnArgs,
) -> anyhow::Result<Subject> {
    let (backend, database_url) = conn.database_for(backend)?;
    let cell = runner::Cell {
        strategy,
        backend,
        database_url,
    };
    Subject::reference(vec![cell], conn.redis_url.clone())
}

/// Fires this process's shard (`run`, `gate` or `attack --shard`) and prints one line:
/// `{command} i/N: b of B buyers, r requests; raw results in DIR`.
pub(super) async fn fire_shard(command: &str, run: &ShardRun) -> anyhow::Result<Exit> {
    let file = runner::fire_shard(run).await?;
    let requests: u64 = file.counts.values().flat_map(|c| c.values()).sum();
    crate::console::outln!(
        "{command} {}: {} of {} buyers, {} requests; raw results in {}",
        file.shard,
        file.buyers,
        file.buyers_total,
        requests,
        run.out.display()
    );
    Ok(Exit::Success)
}
