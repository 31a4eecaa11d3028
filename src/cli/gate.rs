//! `oversell gate` and `oversell attack`: flags, the typed plan built from them, and the runs.
//!
//! Everything that can be wrong with the command line (scenario, CSV, a non-loopback target
//! without `--allow-remote`) is found before the first request is sent.

use super::{load_scenario, ConnArgs};
use crate::gate::{self, Override, Verdict};
use crate::inventory::Strategy;
use crate::rehearsal::{self, Foreign, OracleSource, PlanSummary};
use crate::report::Report;
use crate::runner::{self, Cell, RunPlan, Subject};
use crate::store::Backend;
use crate::traffic::{buyers_csv, schedule, Scenario};
use anyhow::Context;
use clap::Args;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The user's oracle for a foreign target, and the remote-target opt-in.
#[derive(Debug, Args, Clone)]
pub struct OracleArgs {
    /// Oracle: the target's database (postgres://... or mysql://...), read-only queries.
    #[arg(long, requires_all = ["target", "sold_query"], conflicts_with = "oracle_http")]
    pub oracle_sql: Option<String>,
    /// With --oracle-sql: one SELECT returning the units sold (orders not cancelled/expired).
    #[arg(long, requires = "oracle_sql")]
    pub sold_query: Option<String>,
    /// With --oracle-sql: one SELECT returning the stock left (checks conservation).
    #[arg(long, requires = "oracle_sql")]
    pub stock_query: Option<String>,
    /// Oracle: an HTTP endpoint answering JSON {"sold": N, "stock": M} ("stock" optional).
    #[arg(long, requires = "target")]
    pub oracle_http: Option<String>,
    /// Allow a target that is not loopback; a banner names the host and peak rate first.
    #[arg(long, requires = "target")]
    pub allow_remote: bool,
}

impl OracleArgs {
    fn source(&self) -> OracleSource {
        match (&self.oracle_sql, &self.sold_query, &self.oracle_http) {
            (Some(url), Some(q), _) => OracleSource::Sql {
                url: url.clone(),
                sold_query: q.clone(),
                stock_query: self.stock_query.clone(),
            },
            (_, _, Some(url)) => OracleSource::Http { url: url.clone() },
            _ => OracleSource::None,
        }
    }
}

/// Plan and output flags of `gate` and `attack`.
#[derive(Debug, Args, Clone)]
pub struct PlanArgs {
    /// Buyers' accounts from a CSV file (header user_id,device_id,ip), one row per buyer,
    /// given to the plan's buyers in arrival order.
    #[arg(long, value_name = "FILE")]
    pub buyers_csv: Option<PathBuf>,
    /// Print the plan (arrivals per second, request estimate, peak) and send nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub output: super::OutputArgs,
}

/// `oversell gate`.
#[derive(Debug, Args, Clone)]
pub struct GateArgs {
    /// Scenario file (TOML); its `[thresholds]` table sets the limits.
    #[arg(long, default_value = "scenarios/ci.toml")]
    pub scenario: PathBuf,
    /// Reference-shop strategies to gate, comma-separated (default: redis-lua).
    #[arg(long, value_enum, value_delimiter = ',', conflicts_with = "target")]
    pub strategy: Vec<Strategy>,
    /// Database backend of the reference shop (default: from --database-url, else postgres).
    #[arg(long, value_enum, conflicts_with = "target")]
    pub backend: Option<Backend>,
    /// Gate a foreign shop at this URL (mapped by the scenario's [target] table) instead.
    #[arg(long)]
    pub target: Option<String>,
    /// A limit, overriding the scenario: NAME=VALUE, repeatable. NAME is one of oversell,
    /// lost_acks, duplicate_buyers, undersell, error_rate, p99_ms, p999_ms.
    #[arg(long = "threshold", value_name = "NAME=VALUE")]
    pub thresholds: Vec<Override>,
    /// Write JUnit XML here: one test case per threshold per strategy.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Let thresholds that could not be measured (e.g. no oracle) pass as "not verified".
    #[arg(long)]
    pub allow_unverified: bool,
    #[command(flatten)]
    pub oracle: OracleArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
}

/// `oversell attack`.
#[derive(Debug, Args, Clone)]
pub struct AttackArgs {
    /// The shop to rehearse against (loopback only unless --allow-remote).
    #[arg(long)]
    pub target: String,
    /// Scenario file (TOML); its `[target]` table maps actions to the shop's API.
    #[arg(long, default_value = "scenarios/flash-100.toml")]
    pub scenario: PathBuf,
    #[command(flatten)]
    pub oracle: OracleArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
}

/// The buyers of `s`, renamed from a CSV when one is given.
fn buyers(s: &Scenario, csv: Option<&Path>) -> anyhow::Result<Arc<Vec<schedule::BuyerPlan>>> {
    let mut plan = schedule::build(s);
    if let Some(file) = csv {
        buyers_csv::apply(file, &mut plan)?;
    }
    Ok(Arc::new(plan))
}

/// A foreign target, checked before anything is sent; prints the banner for a remote one.
fn foreign(url: &str, oracle: &OracleArgs, s: &Scenario) -> anyhow::Result<Foreign> {
    let host = rehearsal::check_target(url, oracle.allow_remote)?;
    Ok(Foreign {
        base_url: url.trim_end_matches('/').to_string(),
        host,
        mapping: s.mapping(),
        oracle: oracle.source(),
    })
}

/// Builds the plan; `None` after a dry run (printed, nothing sent).
fn plan(
    scenario_file: &Path,
    s: Scenario,
    subject: Subject,
    pa: &PlanArgs,
) -> anyhow::Result<Option<RunPlan>> {
    let buyers = buyers(&s, pa.buyers_csv.as_deref())?;
    let summary = PlanSummary::of(&s, &buyers);
    let (label, remote) = match &subject {
        Subject::Foreign(f) => (
            f.base_url.clone(),
            Some(&f.host).filter(|_| {
                reqwest::Url::parse(&f.base_url).is_ok_and(|u| !rehearsal::is_loopback_host(&u))
            }),
        ),
        Subject::Reference { cells, .. } => (
            format!(
                "the reference shop ({})",
                cells
                    .iter()
                    .map(|c| c.strategy.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None,
        ),
    };
    if pa.dry_run {
        print!("{}", summary.render(&label));
        return Ok(None);
    }
    if let Some(host) = remote {
        eprintln!("{}", summary.banner(host));
    }
    Ok(Some(RunPlan {
        scenario: s,
        scenario_file: scenario_file.to_path_buf(),
        subject,
        buyers,
        out: pa.output.out.clone(),
        drain_limit: Duration::from_secs(pa.output.drain_timeout_s),
        progress: !pa.output.quiet,
    }))
}

fn print_report(report: &Report, dir: &Path) {
    println!("{}", crate::report::table::render(report));
    println!("report: {}", dir.join("report.md").display());
}

/// `oversell attack`: exit 0 once the report is written (the verdict is in it).
pub async fn attack(args: AttackArgs) -> anyhow::Result<i32> {
    let s = load_scenario(&args.scenario)?;
    let subject = Subject::Foreign(Box::new(foreign(&args.target, &args.oracle, &s)?));
    let Some(plan) = plan(&args.scenario, s, subject, &args.plan)? else {
        return Ok(0);
    };
    let (report, dir) = runner::execute(&plan).await?;
    print_report(&report, &dir);
    Ok(0)
}

/// `oversell gate`: 0 every threshold held, 1 breached or not verified (see [`crate::gate`]).
pub async fn gate(args: GateArgs) -> anyhow::Result<i32> {
    let s = load_scenario(&args.scenario)?;
    let limits = gate::limits(&s.thresholds, &args.thresholds);
    let subject = match &args.target {
        Some(url) => Subject::Foreign(Box::new(foreign(url, &args.oracle, &s)?)),
        None => {
            let (backend, url) = args.conn.database_for(args.backend)?;
            let strategies = if args.strategy.is_empty() {
                vec![Strategy::RedisLua]
            } else {
                args.strategy.clone()
            };
            Subject::Reference {
                cells: strategies
                    .into_iter()
                    .map(|strategy| Cell {
                        strategy,
                        backend,
                        database_url: url.clone(),
                    })
                    .collect(),
                redis_url: args.conn.redis_url.clone(),
                shop_exe: std::env::current_exe().context("locating the oversell binary")?,
            }
        }
    };
    let scenario_name = s.name.clone();
    let Some(plan) = plan(&args.scenario, s, subject, &args.plan)? else {
        return Ok(0);
    };
    let (report, dir) = match runner::execute(&plan).await {
        Ok(v) => v,
        Err(e) => {
            if let Some(path) = &args.junit {
                let doc = gate::junit::render_error(&scenario_name, &format!("{e:#}"));
                write_file(path, &doc)?;
            }
            append_step_summary(&format!(
                "## oversell gate: {scenario_name}\n\n**The run could not complete:** {e:#}\n"
            ))?;
            return Err(e);
        }
    };
    let verdict = Verdict::judge(&report, &limits, args.allow_unverified);
    print_report(&report, &dir);
    print!("{}", verdict.render());
    let md = verdict.markdown(&report, &dir);
    write_file(&dir.join("gate.md"), &md)?;
    if let Some(path) = &args.junit {
        write_file(path, &gate::junit::render(&verdict))?;
    }
    append_step_summary(&md)?;
    Ok(verdict.exit_code())
}

/// Appends Markdown to `$GITHUB_STEP_SUMMARY` when that variable names a file.
fn append_step_summary(md: &str) -> anyhow::Result<()> {
    let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let path = PathBuf::from(summary);
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("opening $GITHUB_STEP_SUMMARY ({})", path.display()))?;
    f.write_all(md.as_bytes())
        .with_context(|| format!("appending to $GITHUB_STEP_SUMMARY ({})", path.display()))
}

fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}
