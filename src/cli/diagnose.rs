//! `oversell diagnose`: the flags, the shop they name (the reference strategy, or `--target`
//! with its mapping and oracle exactly as `gate` takes them), the battery planned within
//! `--budget`; the work is in [`crate::diagnose`].

use super::plan::{foreign, OracleArgs};
use super::{load_scenario, values, ConnArgs, OutputArgs};
use crate::capacity::slo::Objective;
use crate::diagnose::{self, battery, render, run, About, Battery};
use crate::exit::Exit;
use crate::inventory::Strategy;
use crate::metric::Override;
use crate::runner::{Cell, Subject};
use crate::store::Backend;
use crate::traffic::Scenario;
use clap::Args;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `oversell diagnose`.
#[derive(Debug, Args, Clone)]
pub struct DiagnoseArgs {
    /// Scenario: a TOML file or a bundled name (its rush, stock and buyers; with --target its
    /// `[target]` mapping, `[watch]` gauges and oracle).
    #[arg(short = 'S', long, value_name = "FILE|NAME", default_value = "diagnose",
          help_heading = values::SCENARIO)]
    pub scenario: PathBuf,
    /// Fit the rush from a real sale's access log first (`oversell fit`'s defaults: combined
    /// format, the reference shop's routes); the scenario keeps its mapping and gauges.
    #[arg(long, value_name = "FILE", value_parser = values::file, help_heading = values::SCENARIO)]
    pub access_log: Option<PathBuf>,
    /// The reference-shop strategy to diagnose (default: redis-lua).
    #[arg(short, long, value_enum, conflicts_with = "target", help_heading = values::SHOP)]
    pub strategy: Option<Strategy>,
    /// Database backend of the reference shop (default: from --database-url, else postgres).
    #[arg(short, long, value_enum, conflicts_with = "target", help_heading = values::SHOP)]
    pub backend: Option<Backend>,
    /// Diagnose your shop at this URL instead (mapped by the scenario's `[target]` table; its
    /// set-up requests reset the sale before every experiment).
    #[arg(long, value_name = "URL", help_heading = values::TARGET)]
    pub target: Option<String>,
    /// Wall time for the whole battery (5m, 10m, 1h): planned up front, the capacity search
    /// gets what the experiments leave.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = budget_arg,
          help_heading = BATTERY)]
    pub budget: Duration,
    /// The capacity search's objective: NAME=VALUE,... (the names `gate --threshold` takes).
    #[arg(long, value_name = "NAME=VALUE,...", value_delimiter = ',',
          default_value = "p99=500ms,error_rate=1%", help_heading = BATTERY)]
    pub slo: Vec<Override>,
    /// The capacity search's highest rate, buyers/s (default: 16× the scenario's own rate;
    /// with --target 4×, so a shop nobody has sized is not driven far past its rush).
    #[arg(long, value_name = "RATE", help_heading = BATTERY)]
    pub max_rate: Option<f64>,
    /// The experiments to run, comma-separated: rush (always), adversarial, cancel-after-pay,
    /// restock, capacity (default: all of them).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = experiment_arg,
          default_value = "rush,adversarial,cancel-after-pay,restock,capacity",
          help_heading = BATTERY)]
    pub experiments: Vec<battery::Kind>,
    /// Print the battery (experiments, buyers, stock, time; what is skipped and why) and send
    /// nothing.
    #[arg(long, help_heading = values::SCENARIO)]
    pub dry_run: bool,
    #[command(flatten)]
    pub oracle: OracleArgs,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--help` heading: the battery's budget and objective.
const BATTERY: &str = "Battery";

/// `--budget`: a duration above 0 and at most a day.
fn budget_arg(v: &str) -> Result<Duration, String> {
    let d = values::duration(v).map_err(|e| format!("--budget: {e}"))?;
    if d.is_zero() || d > Duration::from_secs(86_400) {
        return Err(format!(
            "--budget takes a duration above 0 and at most a day, e.g. 5m, 10m or 1h (got {v:?})"
        ));
    }
    Ok(d)
}

/// `--experiments`: one experiment's name.
fn experiment_arg(v: &str) -> Result<battery::Kind, String> {
    battery::Kind::parse(v).ok_or_else(|| {
        format!(
            "--experiments takes names from: {} (got {v:?})",
            battery::Kind::ALL.map(|k| k.as_str()).join(", ")
        )
    })
}

/// `oversell diagnose`: 0 nothing found, 1 found, 3 too little could be tested to say.
pub async fn diagnose(mut args: DiagnoseArgs) -> anyhow::Result<Exit> {
    anyhow::ensure!(
        args.output.metrics_listen.is_none(),
        "--metrics-listen is not available with diagnose (each experiment is its own run; read \
         their reports)"
    );
    if let Some(m) = args.max_rate {
        anyhow::ensure!(
            m > 0.0 && m <= 1_000_000.0,
            "--max-rate is buyers per second above 0 and at most 1000000 (got {m})"
        );
    }
    let (s, scenario_file, fitted_from) = scenario(&args)?;
    let subject_label = match &args.target {
        Some(url) => url.clone(),
        None => args.strategy.unwrap_or(Strategy::RedisLua).to_string(),
    };
    let strategy = args.strategy.unwrap_or(Strategy::RedisLua);
    // The target's URL and oracle checked before anything is sent (or the plan shown); what
    // the experiments may drive and read is the shop's to say.
    let subject = subject_maker(&args, strategy)?;
    let shop = subject(&mut s.clone())?.levers(&s);
    let battery = Battery::plan(&s, &shop, args.budget, &args.experiments)?;
    if args.dry_run {
        return dry_run(&args, &battery, &subject_label);
    }
    let _services = match &args.target {
        Some(_) => None,
        None => {
            let (backend, _) = args.conn.database_for(args.backend)?;
            Some(args.conn.provide(&[backend], strategy.uses_redis()).await?)
        }
    };
    let dir = crate::report::new_dir(&args.output.out, &format!("{}-diagnose", s.name));
    std::fs::create_dir_all(&dir)?;
    let own = crate::capacity::own_rate(&s);
    let max_rate = args
        .max_rate
        .unwrap_or(own * if args.target.is_some() { 4.0 } else { 16.0 });
    let objective = Objective::new(&s, &args.slo, false);
    let about = About {
        subject: subject_label,
        scenario_file: scenario_file.clone(),
        fitted_from,
        shop,
        objective: objective.describe(),
    };
    let setup = run::Setup {
        dir: dir.clone(),
        scenario_file,
        subject,
        drain_limit: args.output.drain_limit(),
        objective,
        max_rate,
        progress: !args.output.quiet,
    };
    let ran = run::execute(&battery, &setup).await?;
    let diagnosis = diagnose::diagnose(&battery, &ran, &about, &dir);
    render::write(&diagnosis, &dir)?;
    args.output.human(&render::terminal(&diagnosis, &dir));
    if args.output.json.wanted() {
        let mut v = serde_json::to_value(&diagnosis)?;
        v["diagnosis_dir"] = std::fs::canonicalize(&dir)
            .unwrap_or(dir)
            .display()
            .to_string()
            .into();
        super::output::json_line(&v);
    }
    Ok(diagnosis.exit_code)
}

/// The scenario (fitted from `--access-log` first, when given), checked for the shop it runs
/// at; its file; the fitted scenario's file.
fn scenario(args: &DiagnoseArgs) -> anyhow::Result<(Scenario, PathBuf, Option<PathBuf>)> {
    let (mut s, scenario_file) = load_scenario(&args.scenario)?;
    let fitted_from = match &args.access_log {
        Some(log) => Some(fit_first(&mut s, log, args)?),
        None => None,
    };
    anyhow::ensure!(
        s.shop.defect.is_none(),
        "{}: [shop] defect is a testing aid of the reference shop: diagnose one started with \
         `oversell serve --defect NAME` through --target instead",
        scenario_file.display()
    );
    if args.target.is_some() {
        check_target(&s, &scenario_file)?;
    } else {
        s.item
            .reference_check()
            .map_err(|e| anyhow::anyhow!("{}: {e}", scenario_file.display()))?;
    }
    Ok((s, scenario_file, fitted_from))
}

/// The plan printed, nothing sent.
fn dry_run(args: &DiagnoseArgs, battery: &Battery, subject: &str) -> anyhow::Result<Exit> {
    let text = crate::report::table::fit(&battery.render(subject), args.output.wide);
    args.output.human(&text);
    if args.output.json.wanted() {
        super::output::json_line(&serde_json::json!({
            "schema": super::SUMMARY_SCHEMA,
            "dry_run": true,
            "plan": text,
            "exit_code": Exit::Success,
        }));
    }
    Ok(Exit::Success)
}

/// A foreign shop's scenario must reset its sale before every experiment (a set-up request)
/// and name only placeholders it has.
fn check_target(s: &Scenario, scenario_file: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        s.target.is_some(),
        "--target: {} has no [target] table mapping your shop's requests (see \
         docs/src/rehearsal/overview.md)",
        scenario_file.display()
    );
    anyhow::ensure!(
        !s.mapping().setup.is_empty(),
        "--target: every experiment needs a fresh sale, and {}'s [target] has no set-up \
         request to reset it: add `setup = {{ method = \"POST\", path = \"...\" }}` to \
         [target] (or a list of them); nothing was sent",
        scenario_file.display()
    );
    super::plan::check_names(
        s,
        scenario_file,
        &crate::traffic::session::Columns::default(),
    )
}

/// Builds each experiment's subject: the reference shop's cell, or the target.
fn subject_maker(args: &DiagnoseArgs, strategy: Strategy) -> anyhow::Result<run::SubjectFor> {
    if let Some(url) = args.target.clone() {
        let oracle = args.oracle.clone();
        return Ok(Box::new(move |s: &mut Scenario| {
            Ok(Subject::foreign(foreign(&url, &oracle, s)?))
        }));
    }
    let (backend, database_url) = args.conn.database_for(args.backend)?;
    let redis_url = args.conn.redis_url.clone();
    let shop_exe = crate::runner::shop_exe()?;
    Ok(Box::new(move |s: &mut Scenario| {
        let cell = Cell {
            strategy,
            backend,
            database_url: database_url.clone(),
        };
        let redis = crate::store::redis_conn::with_cluster(&redis_url, s.shop.redis_cluster);
        Ok(Subject::reference_served_by(
            vec![cell],
            redis,
            shop_exe.clone(),
        ))
    }))
}

/// `--access-log`: fits the rush from the log into the output folder (a temporary file on a
/// dry run) and takes its traffic (arrivals, browsing, bots, pay and cancel, stock) into `s`,
/// keeping `s`'s item, mapping, gauges, shop and client.
fn fit_first(s: &mut Scenario, log: &Path, args: &DiagnoseArgs) -> anyhow::Result<PathBuf> {
    let out = if args.dry_run {
        std::env::temp_dir().join(format!("oversell-diagnose-fit-{}.toml", std::process::id()))
    } else {
        std::fs::create_dir_all(&args.output.out)?;
        args.output.out.join(format!("{}-fitted.toml", s.name))
    };
    let plan = crate::fit::FitPlan {
        log: log.to_path_buf(),
        out: out.clone(),
        reader: crate::fit::Reader {
            format: crate::fit::Format::Combined,
            fields: Default::default(),
            buyer: crate::fit::BuyerSource::RemoteUser,
            routes: crate::fit::route::Routes::with(&[]).map_err(anyhow::Error::msg)?,
        },
        sale_start: None,
        sale_end: None,
        max_bad_lines: 100,
        bot_window: Duration::from_secs(2),
        shaping: crate::fit::Shaping {
            scale: 1.0,
            compress: 1.0,
            stock: None,
        },
    };
    let fitted = crate::fit::run(&plan)?;
    crate::console::eoutln!("{}", fitted.summary);
    let f = fitted.scenario;
    s.buyers = f.buyers;
    s.browse = f.browse;
    s.bots = f.bots;
    s.after_order = f.after_order;
    s.second_wave = f.second_wave;
    s.item.stock = f.item.stock;
    s.validate()
        .map_err(|e| anyhow::anyhow!("the scenario fitted from {}: {e}", log.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_is_a_duration_above_zero_and_at_most_a_day() {
        assert_eq!(budget_arg("5m").unwrap(), Duration::from_secs(300));
        assert!(budget_arg("0s").unwrap_err().contains("above 0"));
        assert!(budget_arg("2d").is_err());
        assert!(budget_arg("ten").is_err());
    }
}
