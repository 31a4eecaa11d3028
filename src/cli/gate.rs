//! `oversell gate`: flags, the typed plan built from them, the run, and the verdict for CI.
//!
//! Everything that can be wrong with the command line (scenario, CSV, a non-loopback target
//! without `--allow-remote`) is found before the first request is sent.

use super::plan::{foreign, plan, FaultArgs, OracleArgs, PlanArgs, ShardArgs};
use super::scenario::{load_scenario, Overrides};
use super::ConnArgs;
use crate::exit::Exit;
use crate::gate::{self, Override, Verdict};
use crate::inventory::{Defect, Strategy};
use crate::runner::{self, Cell, Subject};
use crate::store::Backend;
use anyhow::Context;
use clap::Args;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// `oversell gate`.
#[derive(Debug, Args, Clone)]
pub struct GateArgs {
    /// Scenario: a TOML file or a bundled name; its `[thresholds]` table sets the limits.
    #[arg(short = 'S', long, value_name = "FILE|NAME", default_value = "ci", help_heading = super::values::SCENARIO)]
    pub scenario: PathBuf,
    /// Reference-shop strategies to gate, comma-separated (default: redis-lua).
    #[arg(short, long, value_enum, value_delimiter = ',', conflicts_with = "target", help_heading = super::values::SHOP)]
    pub strategy: Vec<Strategy>,
    /// Database backend of the reference shop (default: from --database-url, else postgres).
    #[arg(short, long, value_enum, conflicts_with = "target", help_heading = super::values::SHOP)]
    pub backend: Option<Backend>,
    /// Gate a foreign shop at this URL (mapped by the scenario's `[target]` table) instead.
    #[arg(long, help_heading = super::values::TARGET)]
    pub target: Option<String>,
    /// A limit, overriding the scenario: NAME=VALUE, repeatable (the help lists every NAME,
    /// from the metric catalog). capacity_rps=R (at least) runs the scenario at R buyers/s, its
    /// shape kept, and passes when every other threshold holds there.
    #[arg(
        short = 't',
        long = "threshold",
        value_name = "NAME=VALUE",
        help_heading = super::values::THRESHOLDS,
        help = "A limit, overriding the scenario: NAME=VALUE, repeatable (oversell=0, \
                p99=500ms, error_rate=1%); every NAME: --help",
        long_help = crate::metric::threshold_help()
    )]
    pub thresholds: Vec<Override>,
    /// Write JUnit XML here: one test case per threshold per strategy.
    #[arg(long, value_name = "FILE", value_parser = super::values::file,
          help_heading = super::values::THRESHOLDS)]
    pub junit: Option<PathBuf>,
    /// Let thresholds you set that could not be measured (e.g. no oracle) pass as "not
    /// verified" (never when the clients' own evidence shows oversell). Default and bundled
    /// limits the oracle cannot measure never fail: they are listed as not required.
    #[arg(long, help_heading = super::values::THRESHOLDS)]
    pub allow_unverified: bool,
    /// Start K reference shop processes (1 to 16) on the one database and Redis, buyer i going
    /// to shop i mod K (overrides the scenario's `[shop] shops`).
    #[arg(long, value_name = "K", value_parser = super::plan::shops_arg, conflicts_with = "target", help_heading = super::values::SHOP)]
    pub shops: Option<u32>,
    /// redis-lua: the shop's Redis is a Redis Cluster reached through --redis-url's node(s)
    /// (sets the scenario's `[shop] redis_cluster`; a `redis+cluster://` URL needs no flag).
    #[arg(long, conflicts_with = "target", help_heading = super::values::SHOP)]
    pub redis_cluster: bool,
    /// TESTING AID: gate the reference shop with this known defect built in (sets the
    /// scenario's `[shop] defect`); refused without --allow-defect. See docs/src/gate/detection.md.
    #[arg(long, value_enum, value_name = "NAME", conflicts_with = "target", help_heading = super::values::SHOP)]
    pub defect: Option<Defect>,
    /// Let the gate run a reference shop with a defect (`--defect`, `[shop] defect`): its
    /// verdict is about a shop made wrong on purpose, never about yours.
    #[arg(long, help_heading = super::values::SHOP)]
    pub allow_defect: bool,
    #[command(flatten)]
    pub faults: FaultArgs,
    #[command(flatten)]
    pub oracle: OracleArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
    /// `--shard i/N --open-at T --shop-url URL`: send one shard of the gate's scenario at a
    /// serving reference shop; `oversell merge --gate` judges the thresholds once all are in.
    #[command(flatten)]
    pub shard: ShardArgs,
}

/// The flags most gates use, first in `--help` and alone in `-h` (argument ids).
pub(super) const COMMON: &[&str] = &[
    "scenario",
    "strategy",
    "backend",
    "target",
    "oracle_sql",
    "sold_query",
    "thresholds",
    "junit",
    "dry_run",
    "json",
    "out",
    "database_url",
    "redis_url",
];

/// `oversell gate`: 0 every threshold held, 1 breached or not verified (see [`crate::gate`]).
pub async fn gate(mut args: GateArgs) -> anyhow::Result<Exit> {
    if args.shard.shard.is_some() {
        return gate_shard(&args).await;
    }
    let (mut s, scenario_file, limits) = scenario_and_limits(&args)?;
    let _services = match &args.target {
        Some(_) => None,
        None => {
            let (backend, _) = args.conn.database_for(args.backend)?;
            let redis = args.strategy.is_empty() || args.strategy.iter().any(|s| s.uses_redis());
            // A dry run checks the URLs and starts or contacts nothing.
            match args.plan.dry_run {
                true => args.conn.check_servers(&[backend], redis).map(|_| None)?,
                false => Some(args.conn.provide(&[backend], redis).await?),
            }
        }
    };
    let capacity = crate::capacity::gate::required(&limits);
    if let Some(rate) = capacity {
        s = crate::capacity::gate::at_rate(&s, rate);
    }
    let subject = subject(&args, &mut s)?;
    // What the shop takes (a foreign shop: no fault) is its own to say, before anything runs.
    subject
        .check(&s)
        .map_err(|e| anyhow::anyhow!("{}: {e}", scenario_file.display()))?;
    let scenario_name = s.name.clone();
    let Some(plan) = plan(&scenario_file, s, subject, &args.plan).await? else {
        return Ok(Exit::Success);
    };
    let (report, dir) = match runner::execute(&plan).await {
        Ok(v) => v,
        Err(e) => return Err(could_not_complete(&args, &scenario_name, e)),
    };
    let mut verdict = Verdict::judge(&report, &limits, args.allow_unverified);
    if let Some(rate) = capacity {
        crate::capacity::gate::judge(&mut verdict, &report, rate);
    }
    args.plan.output.finish(&report, &dir, Some(&verdict));
    write_verdict(&verdict, &report, &dir, args.junit.as_deref())
}

/// `gate --shard i/N`: one shard of the gate's scenario at the serving reference shop;
/// `merge --gate` judges.
async fn gate_shard(args: &GateArgs) -> anyhow::Result<Exit> {
    anyhow::ensure!(
        args.conn.services != crate::services::ServicesMode::Managed,
        "--services managed: a shard fires at the shop serving at --shop-url, on that \
         shop's servers; start it with `oversell serve --services managed`"
    );
    anyhow::ensure!(
        args.target.is_none(),
        "--shard fires at the reference shop at --shop-url; a foreign --target cannot be \
         sharded yet"
    );
    super::plan::refuse_with_shard(
        &args.faults,
        1,
        &args.plan.output,
        super::plan::Refused {
            dry_run: args.plan.dry_run,
            buyers_csv: args.plan.buyers_csv.is_some(),
            shops: args.shops.is_some(),
        },
    )?;
    let strategy = match args.strategy.as_slice() {
        [] => Strategy::RedisLua,
        [one] => *one,
        more => anyhow::bail!(
            "--shard sends one shard at one shop: give one --strategy (got {})",
            more.len()
        ),
    };
    let (backend, _) = args.conn.database_for(args.backend)?;
    super::plan::shard(
        &args.scenario,
        &args.shard,
        strategy,
        (Some(backend), &args.conn),
        &args.plan.output,
        args.plan.send_lag.ms(),
    )
    .await
}

/// The scenario with the flags applied, its file, and the limits the gate judges it by.
fn scenario_and_limits(
    args: &GateArgs,
) -> anyhow::Result<(crate::traffic::Scenario, PathBuf, Vec<gate::Limit>)> {
    let (mut s, scenario_file) = load_scenario(&args.scenario)?;
    Overrides {
        faults: &args.faults,
        shops: args.shops,
        redis_cluster: args.redis_cluster,
        defect: args.defect,
    }
    .apply(&mut s);
    refuse_defect(&s, args)?;
    super::plan::max_send_lag(&mut s, args.plan.send_lag.ms())?;
    watch_flags_name_gauges(&s, &args.thresholds, &scenario_file)?;
    let bound = s.target.as_ref().and_then(|t| t.max_unclassified);
    let bundled = crate::scenarios::is_bundled(&args.scenario);
    let limits = gate::limits(&s.thresholds, bound, &args.thresholds, bundled);
    // The report flags a generator-bound run by the same bound the gate checks.
    if let Some(l) = limits
        .iter()
        .find(|l| l.metric == gate::Metric::SendLagP99Ms)
    {
        s.thresholds.set(l.metric.name(), l.value)?;
    }
    Ok((s, scenario_file, limits))
}

/// What the gate runs at: `--target`, or the reference shop on each `--strategy` (default
/// redis-lua).
fn subject(args: &GateArgs, s: &mut crate::traffic::Scenario) -> anyhow::Result<Subject> {
    if let Some(url) = &args.target {
        return Ok(Subject::foreign(foreign(url, &args.oracle, s)?));
    }
    let (backend, url) = args.conn.database_for(args.backend)?;
    let cells = strategies(args)
        .into_iter()
        .map(|strategy| Cell {
            strategy,
            backend,
            database_url: url.clone(),
        })
        .collect();
    Subject::reference(cells, args.conn.redis_url.clone())
}

/// `--strategy`, or redis-lua when none is given.
fn strategies(args: &GateArgs) -> Vec<Strategy> {
    if args.strategy.is_empty() {
        vec![Strategy::RedisLua]
    } else {
        args.strategy.clone()
    }
}

/// A run that could not complete: its JUnit error and step summary written, the error
/// returned.
fn could_not_complete(args: &GateArgs, scenario_name: &str, e: anyhow::Error) -> anyhow::Error {
    if let Some(path) = &args.junit {
        let doc = gate::junit::render_error(scenario_name, &format!("{e:#}"));
        if let Err(w) = write_file(path, &doc) {
            return e.context(format!("(and the JUnit file could not be written: {w:#})"));
        }
    }
    if let Err(w) = append_step_summary(&format!(
        "## oversell gate: {scenario_name}\n\n**The run could not complete:** {e:#}\n"
    )) {
        return e.context(format!(
            "(and the step summary could not be written: {w:#})"
        ));
    }
    e
}

/// The verdict as `gate.md` in the report's folder, JUnit (`--junit`) and the step summary;
/// returns its exit code.
fn write_verdict(
    verdict: &Verdict,
    report: &crate::report::Report,
    dir: &Path,
    junit: Option<&Path>,
) -> anyhow::Result<Exit> {
    let md = verdict.markdown(report, dir);
    write_file(&dir.join("gate.md"), &md)?;
    if let Some(path) = junit {
        write_file(path, &gate::junit::render(verdict))?;
    }
    append_step_summary(&md)?;
    Ok(verdict.exit_code())
}

/// A defect (`--defect`, the scenario's `[shop] defect`) is a testing aid: refused without
/// `--allow-defect`, refused with `--target` (it is built into the reference shop), refused on
/// a strategy that lacks it; allowed, it is announced on stderr.
fn refuse_defect(s: &crate::traffic::Scenario, args: &GateArgs) -> anyhow::Result<()> {
    let Some(defect) = s.shop.defect else {
        return Ok(());
    };
    anyhow::ensure!(
        args.target.is_none(),
        "defect {defect} is built into the reference shop: it cannot apply to --target (your \
         own shop); drop `[shop] defect` from the scenario"
    );
    anyhow::ensure!(
        args.allow_defect,
        "refusing to gate a shop with defect {defect} ({}): a defect is a testing aid that \
         makes the reference shop wrong on purpose, so this gate's verdict would say nothing \
         about a real shop; pass --allow-defect to run it anyway (or use `oversell selftest`)",
        defect.what()
    );
    super::defect_warning(&s.shop, strategies(args))
}

/// Refuses a `--threshold watch.<name>.…` whose gauge the scenario does not watch.
fn watch_flags_name_gauges(
    s: &crate::traffic::Scenario,
    flags: &[Override],
    file: &Path,
) -> anyhow::Result<()> {
    for key in flags.iter().filter_map(|o| o.watch.as_ref()) {
        anyhow::ensure!(
            s.watch.0.contains_key(&key.gauge),
            "--threshold {}: must name {} (got no [watch.{}] table in {})",
            key.name(),
            crate::watch::gauge_names(&s.watch),
            key.gauge,
            file.display()
        );
    }
    Ok(())
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

/// `merge --gate`: the merged report judged against its scenario's `[thresholds]` (and
/// `--threshold` overrides), as `gate` judges a run: `gate.md`, JUnit, the step summary, the
/// exit code.
pub(super) fn judge_merged(
    report: &crate::report::Report,
    dir: &Path,
    overrides: &[Override],
    allow_unverified: bool,
    junit: Option<&Path>,
    output: &super::OutputArgs,
) -> anyhow::Result<Exit> {
    let bundled = crate::scenarios::is_bundled_origin(&report.scenario.file);
    let limits = gate::limits(&report.scenario.spec.thresholds, None, overrides, bundled);
    let verdict = Verdict::judge(report, &limits, allow_unverified);
    output.finish(report, dir, Some(&verdict));
    write_verdict(&verdict, report, dir, junit)
}
