//! `oversell capacity` and `oversell sweep`: flags, the typed plans built from them (every bad
//! value refused before anything is sent), the search or the sweep, and their output.

use super::plan::{foreign, OracleArgs};
use super::{load_scenario, values, ConnArgs, OutputArgs};
use crate::capacity::{self, search::Settings, slo::Objective, CapacityPlan};
use crate::exit::Exit;
use crate::inventory::Strategy;
use crate::metric::Override;
use crate::runner::{Cell, Subject};
use crate::store::Backend;
use crate::sweep::{self, SweepPlan, Vary};
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `oversell capacity`.
#[derive(Debug, Args, Clone)]
pub struct CapacityArgs {
    /// Scenario: a TOML file or a bundled name. Its shape is kept; its arrival rate is scaled.
    #[arg(short = 'S', long, value_name = "FILE|NAME", default_value = "flash-100",
          help_heading = values::SCENARIO)]
    pub scenario: PathBuf,
    /// Reference-shop strategies to search, comma-separated (default: all of them).
    #[arg(short, long = "strategy", alias = "strategies", value_enum, value_delimiter = ',',
          value_name = "LIST", default_values_t = Strategy::all().to_vec(),
          conflicts_with = "target", help_heading = values::SHOP)]
    pub strategies: Vec<Strategy>,
    /// Backends, comma-separated: postgres, mysql (default: inferred from --database-url).
    #[arg(short, long = "backend", alias = "backends", value_enum, value_delimiter = ',',
          value_name = "LIST", conflicts_with = "target", help_heading = values::SHOP)]
    pub backends: Vec<Backend>,
    /// Search a foreign shop at this URL instead (its scenario's `[target]` must have set-up
    /// requests: every probe needs a fresh sale).
    #[arg(long, value_name = "URL", help_heading = values::TARGET)]
    pub target: Option<String>,
    /// The objective, replacing the scenario's `[thresholds]`: NAME=VALUE,... e.g.
    /// p99=200ms,error_rate=1%,oversell=0 (the names and values `gate --threshold` takes).
    #[arg(long, value_name = "NAME=VALUE,...", value_delimiter = ',', help_heading = SEARCH)]
    pub slo: Vec<Override>,
    /// How long each probe's buyers arrive over, a short sale on a fresh stock (10s, 2.5s,
    /// 1m; from 1s to 1h).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = probe_arg,
          help_heading = SEARCH)]
    pub probe: Duration,
    /// The old spelling of --probe, in seconds.
    #[arg(long, value_name = "S", hide = true, value_parser = probe_seconds_arg,
          conflicts_with = "probe")]
    pub probe_seconds: Option<f64>,
    /// Stop bisecting once the bracket is tighter than this, in percent of its lower end.
    #[arg(long, value_name = "PERCENT", default_value = "10", value_parser = precision_arg,
          help_heading = SEARCH)]
    pub precision: f64,
    /// Wall time for the whole search, shared out among the strategies (600s, 10m, 1h).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = budget_arg,
          help_heading = SEARCH)]
    pub budget: Duration,
    /// The first rate probed, buyers/s (default: the scenario's own rate).
    #[arg(long, value_name = "RATE", value_parser = rate_arg, help_heading = SEARCH)]
    pub start_rate: Option<f64>,
    /// The highest rate probed, buyers/s (default 20000; with --target, a foreign shop, the
    /// scenario's own rate ×4, so an unsized shop is not driven far past its planned rush).
    #[arg(long, value_name = "RATE", value_parser = rate_arg, help_heading = SEARCH)]
    pub max_rate: Option<f64>,
    #[command(flatten)]
    pub send_lag: super::plan::SendLagArgs,
    /// Print the probe plan (rates, buyers, requests, the worst-case total) and send nothing.
    #[arg(long, help_heading = values::SCENARIO)]
    pub dry_run: bool,
    #[command(flatten)]
    pub oracle: OracleArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `oversell sweep`.
#[derive(Debug, Args, Clone)]
pub struct SweepArgs {
    /// Scenario: a TOML file or a bundled name.
    #[arg(short = 'S', long, value_name = "FILE|NAME", default_value = "flash-100",
          help_heading = values::SCENARIO)]
    pub scenario: PathBuf,
    /// The reference-shop strategy.
    #[arg(short, long, value_enum, help_heading = values::SHOP)]
    pub strategy: Strategy,
    /// Database backend (default: inferred from --database-url, else postgres).
    #[arg(short, long, value_enum, help_heading = values::SHOP)]
    pub backend: Option<Backend>,
    /// KNOB=v1,v2,...: a shop knob as its `serve` flag (pool-size, batch-max, consumers,
    /// buckets, work=1ms,5ms, ...) or `rate` (buyers/s, the scenario's shape kept).
    #[arg(long, value_name = "KNOB=v1,v2,...", help_heading = SEARCH)]
    pub vary: String,
    /// Runs per value (1 to 100), each on a fresh sale; the tables show the median.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = values::repeat,
          help_heading = values::SCENARIO)]
    pub repeat: u32,
    #[command(flatten)]
    pub send_lag: super::plan::SendLagArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--max-rate`'s default against the reference shop, buyers/s.
const DEFAULT_MAX_RATE: f64 = 20_000.0;

/// `--max-rate`'s default against a foreign `--target`: this many times the scenario's own
/// rate (a shop nobody has sized yet is not driven far past the rush it was planned for).
const FOREIGN_CAP: f64 = 4.0;

/// `--help` heading: what capacity searches and sweep varies.
const SEARCH: &str = "Search";

/// `--probe`: a duration from 1 s to 1 h, fractions kept.
fn probe_arg(v: &str) -> Result<Duration, String> {
    let d = values::duration(v).map_err(|e| format!("--probe: {e}"))?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(3600) {
        return Err(format!(
            "--probe takes a duration from 1s to 1h, e.g. 10s or 2.5s (got {v:?})"
        ));
    }
    Ok(d)
}

/// `--probe-seconds`, the old spelling: seconds from 1 to 3600, fractions kept.
fn probe_seconds_arg(v: &str) -> Result<f64, String> {
    match v.trim().trim_end_matches('s').parse::<f64>() {
        Ok(s) if (1.0..=3600.0).contains(&s) => Ok(s),
        _ => Err(format!(
            "--probe-seconds takes seconds from 1 to 3600 (got {v:?}); --probe 10s is its new \
             spelling"
        )),
    }
}

fn precision_arg(v: &str) -> Result<f64, String> {
    match v.trim().trim_end_matches('%').trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p <= 100.0 => Ok(p / 100.0),
        _ => Err(format!(
            "--precision takes a percentage above 0 and at most 100, e.g. 10 or 10% (got {v:?})"
        )),
    }
}

/// `--budget`: a duration with its unit, above 0 and at most a week.
fn budget_arg(v: &str) -> Result<Duration, String> {
    let d = values::duration(v).map_err(|e| format!("--budget: {e}"))?;
    if d.is_zero() || d > Duration::from_secs(7 * 86_400) {
        return Err(format!(
            "--budget takes a duration above 0 and at most a week, e.g. 600s, 10m or 1h (got \
             {v:?})"
        ));
    }
    Ok(d)
}

fn rate_arg(v: &str) -> Result<f64, String> {
    match v.trim().trim_end_matches("/s").parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1_000_000.0 => Ok(r),
        _ => Err(format!(
            "a rate is buyers per second above 0 and at most 1000000 (got {v:?})"
        )),
    }
}

/// `oversell capacity`: 0 once the report is written.
pub async fn capacity(mut args: CapacityArgs) -> anyhow::Result<Exit> {
    anyhow::ensure!(
        args.output.metrics_listen.is_none(),
        "--metrics-listen is not available with capacity (each probe is its own run; read the \
         probes' reports)"
    );
    let (mut s, scenario_file) = load_scenario(&args.scenario)?;
    anyhow::ensure!(
        s.faults.is_empty(),
        "{}: [[faults]] would act on every probe: capacity searches a scenario without faults",
        scenario_file.display()
    );
    super::plan::max_send_lag(&mut s, args.send_lag.ms())?;
    // One set of managed servers (`--services`) for every probe of every strategy.
    let _services = match &args.target {
        Some(_) => None,
        None => {
            let used = if args.backends.is_empty() {
                vec![args.conn.database_for(None)?.0]
            } else {
                args.backends.clone()
            };
            let redis = args.strategies.iter().any(|s| s.uses_redis());
            // A dry run checks the URLs and starts or contacts nothing.
            match args.dry_run {
                true => args.conn.check_servers(&used, redis).map(|_| None)?,
                false => Some(args.conn.provide(&used, redis).await?),
            }
        }
    };
    let who = match &args.target {
        Some(url) => vec![target(url, &args.oracle, &mut s, &scenario_file)?],
        None => reference_subjects(&args, &s, &scenario_file)?,
    };
    let (plan, capped) = capacity_plan(&args, s, scenario_file, who)?;
    plan.check_budget()?;
    if let Some(own) = capped {
        let line = format!(
            "--target: rates capped at {} buyers/s ({FOREIGN_CAP}× the scenario's own {} \
             buyers/s; --max-rate changes it): at most {} requests per probe",
            capacity::search::rate(plan.settings.max_rate),
            capacity::search::rate(own),
            plan.worst_probe_requests()
        );
        crate::console::eoutln!("{}", crate::report::table::fit(&line, args.output.wide));
    }
    if args.dry_run {
        let text = crate::report::table::fit(&plan.render_dry_run(), args.output.wide);
        args.output.human(&text);
        if args.output.json.wanted() {
            super::output::json_line(&serde_json::json!({
                "schema": super::SUMMARY_SCHEMA,
                "dry_run": true,
                "plan": text,
                "exit_code": Exit::Success,
            }));
        }
        return Ok(Exit::Success);
    }
    if let Some(host) = plan.who.first().and_then(|w| w.remote_host()) {
        crate::console::eoutln!(
            "WARNING: capacity sends load to {host} (not loopback, --allow-remote): up to {} \
             buyers/s",
            plan.settings.max_rate
        );
    }
    let (report, dir) = capacity::execute(&plan).await?;
    finish(
        &args.output,
        &capacity::report::render(&report, args.output.wide),
        &report,
        dir,
    )
}

/// `--target` as capacity's one subject: its sale must be reset before every probe, so its
/// `[target]` needs a set-up request.
fn target(
    url: &str,
    oracle: &OracleArgs,
    s: &mut crate::traffic::Scenario,
    scenario_file: &Path,
) -> anyhow::Result<Subject> {
    let has_setup = !s.mapping().setup.is_empty();
    anyhow::ensure!(
        has_setup,
        "--target: every probe needs a fresh sale, and {}'s [target] has no set-up \
         request to reset it: add `setup = {{ method = \"POST\", path = \"...\" }}` to \
         [target] (or a list of them); nothing was sent",
        scenario_file.display()
    );
    // No --buyers-csv here: the mapping's placeholders are the scenario's own.
    super::plan::check_names(
        s,
        scenario_file,
        &crate::traffic::session::Columns::default(),
    )?;
    Ok(Subject::foreign(foreign(url, oracle, s)?))
}

/// The reference shop's subjects: every `--strategy` on every `--backend`, one shop each.
fn reference_subjects(
    args: &CapacityArgs,
    s: &crate::traffic::Scenario,
    scenario_file: &Path,
) -> anyhow::Result<Vec<Subject>> {
    s.item
        .reference_check()
        .map_err(|e| anyhow::anyhow!("{}: {e}", scenario_file.display()))?;
    super::defect_warning(&s.shop, args.strategies.iter().copied())?;
    let shop_exe = crate::runner::shop_exe()?;
    let redis_url =
        crate::store::redis_conn::with_cluster(&args.conn.redis_url, s.shop.redis_cluster);
    let cells = args.conn.cells(&args.strategies, &args.backends)?;
    Ok(cells
        .into_iter()
        .map(|cell| Subject::reference_served_by(vec![cell], redis_url.clone(), shop_exe.clone()))
        .collect())
}

/// The search's plan from the flags; with the scenario's own rate when `--target`'s rates
/// were capped by default (no `--max-rate`).
fn capacity_plan(
    args: &CapacityArgs,
    s: crate::traffic::Scenario,
    scenario_file: PathBuf,
    who: Vec<Subject>,
) -> anyhow::Result<(CapacityPlan, Option<f64>)> {
    let own = capacity::own_rate(&s);
    let (max_rate, capped) = match (args.max_rate, &args.target) {
        (Some(m), _) => (m, false),
        (None, Some(_)) => ((own * FOREIGN_CAP).max(1.0), true),
        (None, None) => (DEFAULT_MAX_RATE, false),
    };
    let start = args.start_rate.unwrap_or(own.min(max_rate));
    anyhow::ensure!(
        start <= max_rate,
        "--start-rate {start} is above --max-rate {max_rate}: allowed: a start rate at most the \
         max rate"
    );
    let probe_seconds = args.probe_seconds.unwrap_or(args.probe.as_secs_f64());
    let bundled = crate::scenarios::is_bundled(&args.scenario);
    let plan = CapacityPlan {
        objective: Objective::new(&s, &args.slo, bundled),
        scenario: s,
        scenario_file,
        who,
        settings: Settings {
            start,
            precision: args.precision,
            max_rate,
            min_rate: (1.0 / probe_seconds).min(start),
        },
        probe_seconds,
        budget: args.budget,
        out: args.output.out.clone(),
        drain_limit: args.output.drain_limit(),
        progress: !args.output.quiet,
    };
    Ok((plan, capped.then_some(own)))
}

/// The result on the terminal with where its report is, and with `--json` as one document
/// naming its folder.
fn finish(
    output: &OutputArgs,
    text: &str,
    report: &impl serde::Serialize,
    dir: PathBuf,
) -> anyhow::Result<Exit> {
    output.human(&format!(
        "{text}report: {}\n",
        dir.join("report.md").display()
    ));
    if output.json.wanted() {
        let mut v = serde_json::to_value(report)?;
        v["report_dir"] = std::fs::canonicalize(&dir)
            .unwrap_or(dir)
            .display()
            .to_string()
            .into();
        super::output::json_line(&v);
    }
    Ok(Exit::Success)
}

/// `oversell sweep`: 0 once the sweep is written.
pub async fn sweep(mut args: SweepArgs) -> anyhow::Result<Exit> {
    anyhow::ensure!(
        args.output.metrics_listen.is_none(),
        "--metrics-listen is not available with sweep (each value is its own run)"
    );
    let vary = Vary::parse(&args.vary, args.strategy)?;
    let (mut s, scenario_file) = load_scenario(&args.scenario)?;
    super::plan::max_send_lag(&mut s, args.send_lag.ms())?;
    s.item
        .reference_check()
        .map_err(|e| anyhow::anyhow!("{}: {e}", scenario_file.display()))?;
    super::defect_warning(&s.shop, [args.strategy])?;
    let (backend, _) = args.conn.database_for(args.backend)?;
    let _services = args
        .conn
        .provide(&[backend], args.strategy.uses_redis())
        .await?;
    let (backend, database_url) = args.conn.database_for(args.backend)?;
    let plan = SweepPlan {
        redis_url: crate::store::redis_conn::with_cluster(
            &args.conn.redis_url,
            s.shop.redis_cluster,
        ),
        scenario: s,
        scenario_file,
        cell: Cell {
            strategy: args.strategy,
            backend,
            database_url,
        },
        shop_exe: crate::runner::shop_exe()?,
        vary,
        repeat: args.repeat,
        out: args.output.out.clone(),
        drain_limit: args.output.drain_limit(),
        progress: !args.output.quiet,
    };
    // Every value is checked before the first run.
    plan.scenarios()?;
    let (report, dir) = sweep::execute(&plan).await?;
    finish(
        &args.output,
        &sweep::render(&report, args.output.wide),
        &report,
        dir,
    )
}
