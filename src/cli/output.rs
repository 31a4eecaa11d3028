//! How `run`, `compare`, `gate` and `attack` talk back: the flags they share ([`OutputArgs`]),
//! the live metrics endpoint, and the end of a command. People get the table (and the gate's
//! verdict) on stdout; with `--json`, stdout carries one JSON summary for machines and nothing
//! else: the process's stdout is pointed at stderr for the whole command (goose prints to it),
//! and the summary goes to a duplicate of the original taken first.

use crate::exit::Exit;
use crate::gate::{Origin, Status, Verdict};
use crate::live::{self, Live};
use crate::metric::Metric;
use crate::report::Report;
use clap::Args;
use serde_json::{json, Value};
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::values;

/// Where the one JSON document goes: the original stdout once `--json` moved the process's
/// stdout to stderr, and the `--json-file`. Unset (no command claimed it, e.g. a usage error
/// clap finds first): stdout.
static JSON_OUT: Mutex<Option<Sink>> = Mutex::new(None);

/// The destinations `--json` and `--json-file` chose.
#[derive(Debug)]
struct Sink {
    stdout: Option<std::fs::File>,
    file: Option<PathBuf>,
}

/// `--json` and `--json-file`, on every command that has a result.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = values::OUTPUT)]
pub struct JsonArgs {
    /// Print the result as one JSON document on stdout, whatever happens (a command that
    /// stops: {schema, error, exit_code}); what is printed for people goes to stderr.
    #[arg(long)]
    pub json: bool,
    /// Write that JSON document to FILE (stdout keeps what is printed for people).
    #[arg(long, value_name = "FILE", value_parser = values::file)]
    pub json_file: Option<PathBuf>,
}

impl JsonArgs {
    /// Whether a JSON document is asked for, on stdout or in a file.
    pub fn wanted(&self) -> bool {
        self.json || self.json_file.is_some()
    }

    /// Sets where the document goes. With `--json`, keeps the original stdout for it and
    /// points the process's stdout at stderr, so nothing else can land in the JSON.
    pub fn claim(&self) -> anyhow::Result<()> {
        let stdout = if self.json {
            std::io::stdout().flush()?;
            let original = nix::unistd::dup(std::io::stdout().as_fd())?;
            nix::unistd::dup2_stdout(std::io::stderr().as_fd())?;
            Some(original.into())
        } else {
            None
        };
        *JSON_OUT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Sink {
            stdout,
            file: self.json_file.clone(),
        });
        Ok(())
    }
}

/// The schema id of the `--json` summary.
pub const SUMMARY_SCHEMA: &str = "oversell.summary/v1";

/// Where reports go, how a run ends and how it talks back: shared by `run`, `compare`, `gate`
/// and `attack`.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = values::OUTPUT)]
pub struct OutputArgs {
    /// Folder for reports (a `<UTC timestamp>-<scenario>/` folder is made inside).
    #[arg(short, long, value_name = "DIR", default_value = "reports")]
    pub out: PathBuf,
    /// Longest wait for the shop to drain / the oracle to settle after the last buyer (60s,
    /// 2m, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = values::duration)]
    pub drain_timeout: Duration,
    /// The old spelling of --drain-timeout, in whole seconds.
    #[arg(long, value_name = "S", hide = true, conflicts_with = "drain_timeout",
          value_parser = values::whole::<u64>(0, crate::duration::LONGEST.as_secs().into()))]
    pub drain_timeout_s: Option<u64>,
    /// No progress bar or lines: the global `-q`/`--quiet` ([`super::Verbosity`]), set by
    /// [`parse_from`].
    #[arg(skip)]
    pub quiet: bool,
    #[command(flatten)]
    pub json: JsonArgs,
    /// Show every column of the result table (by default the headline figures, in 100
    /// columns; report.md has them all).
    #[arg(long)]
    pub wide: bool,
    /// Serve live Prometheus metrics of the run at this address while it runs (default
    /// 127.0.0.1:9898; :PORT is loopback; port 0 picks one). `/targets` there names the current
    /// child shop, for Prometheus service discovery (see deploy/prometheus/prometheus.yml).
    #[arg(
        long,
        value_name = "ADDR",
        num_args = 0..=1,
        default_missing_value = "127.0.0.1:9898",
        value_parser = values::listen
    )]
    pub metrics_listen: Option<SocketAddr>,
}

impl OutputArgs {
    /// `--drain-timeout` (or the old `--drain-timeout-s`).
    pub fn drain_limit(&self) -> Duration {
        values::seconds_or(self.drain_timeout, self.drain_timeout_s)
    }

    /// Starts the live endpoint when `--metrics-listen` asks for one, and says where it is.
    pub async fn live(&self) -> anyhow::Result<Option<Live>> {
        let Some(addr) = self.metrics_listen else {
            return Ok(None);
        };
        let l = live::serve(addr).await?;
        crate::console::eoutln!(
            "live metrics: {} (Prometheus; the current shop for service discovery: http://{}/targets)",
            l.url(),
            l.addr()
        );
        Ok(Some(l))
    }

    /// Prints a line meant for people: stdout, or stderr when stdout carries JSON.
    pub fn human(&self, text: &str) {
        if self.json.json {
            crate::console::eout!("{text}");
        } else {
            crate::console::out!("{text}");
        }
    }

    /// Ends a command that wrote `report` into `dir`: the table (and `verdict`) for people,
    /// and with `--json` the summary on stdout.
    pub fn finish(&self, report: &Report, dir: &Path, verdict: Option<&Verdict>) {
        let mut text = crate::report::table::render_for(report, self.wide);
        let mb = report.multi_backend();
        // A note under the table, wrapped at the table's width unless --wide.
        let fit = |line: String| crate::report::table::fit(&line, self.wide);
        for run in &report.runs {
            let f = &run.findings;
            if !f.mapping_advice.is_empty() {
                text.push_str(&fit(format!(
                    "\n{}: answers no rule of [target] classified:",
                    run.run_label(mb)
                )));
                for a in &f.mapping_advice {
                    text.push_str(&fit(format!("\n  - {a}")));
                }
            }
            if let (Some(d), Some(strategy)) = (run.defect, run.shop.strategy) {
                text.push_str(&fit(format!(
                    "\n{}: {}",
                    run.run_label(mb),
                    d.warning(strategy)
                )));
            }
            for n in &f.client_notes {
                text.push_str(&fit(format!("\n{}: note: {n}", run.run_label(mb))));
            }
        }
        self.human(&format!(
            "{text}\nreport: {}\n",
            dir.join("report.md").display()
        ));
        if let Some(v) = verdict {
            self.human(&v.render_for(self.wide));
        }
        if self.json.wanted() {
            json_line(&summary(report, dir, verdict));
        }
    }
}

/// The `--json` document of a command that stopped with `e` (exit `code`).
pub(super) fn error(e: &anyhow::Error, code: Exit) -> Value {
    json!({
        "schema": SUMMARY_SCHEMA,
        "error": format!("{e:#}"),
        "exit_code": code,
    })
}

/// The `--json` document of a `--dry-run`: the plan `label` would be sent, nothing sent.
pub(super) fn dry_run(label: &str, p: &crate::rehearsal::PlanSummary) -> Value {
    json!({
        "schema": SUMMARY_SCHEMA,
        "dry_run": true,
        "target": label,
        "plan": {
            "buyers": p.buyers,
            "bots": p.bots,
            "planned_requests": p.planned_requests,
            "follow_ups_at_most": p.follow_ups_at_most,
            "peak_arrivals_per_s": p.peak_arrivals(),
            "peak_requests_per_s": p.peak_requests(),
            "arrivals_per_second": p.arrivals_per_second,
            "requests_per_second": p.requests_per_second,
            "login": p.login.map(|(when, concurrency)| json!({
                "when": when.as_str(),
                "concurrency": concurrency,
            })),
        },
        "exit_code": Exit::Success,
    })
}

/// Writes the JSON document, one line, where `--json` and `--json-file` chose (stdout when
/// no command claimed it). A `--json-file` that cannot be written is said on stderr.
pub(super) fn json_line(v: &Value) {
    let mut out = JSON_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let line = format!("{v}\n");
    let Some(sink) = out.as_mut() else {
        crate::console::write_stdout(line.as_bytes());
        return;
    };
    if let Some(f) = sink.stdout.as_mut() {
        // A reader that went away (`| head`) ends the document quietly.
        let _ = f.write_all(line.as_bytes()).and_then(|_| f.flush());
    }
    if let Some(path) = &sink.file {
        if let Err(e) = std::fs::write(path, &line) {
            crate::console::eoutln!("error: writing --json-file {}: {e}", path.display());
        }
    }
}

/// The `--json` summary: where the report is (absolute paths), each run's headline metrics (null when the run
/// could not measure one) and verdict, a run that failed, and the gate's checks.
pub fn summary(report: &Report, dir: &Path, verdict: Option<&Verdict>) -> Value {
    let mb = report.multi_backend();
    let runs: Vec<Value> = report
        .runs
        .iter()
        .map(|run| {
            let metrics: serde_json::Map<String, Value> = Metric::RUN
                .iter()
                .map(|m| (m.key(), m.read(run).ok().into()))
                .collect();
            let mut v = json!({
                "run": run.run_label(mb),
                "repeat": run.repeat,
                "verdict": run.findings.verdict,
                "metrics": metrics,
            });
            // The shop's own fields: `shop` (reference or foreign), strategy and backend, ...
            if let (Some(v), Ok(Value::Object(shop))) =
                (v.as_object_mut(), serde_json::to_value(&run.shop))
            {
                v.extend(shop);
            }
            v
        })
        .collect();
    // Absolute, so a machine reading the summary need not know our working directory.
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut v = json!({
        "schema": SUMMARY_SCHEMA,
        "scenario": report.scenario.name,
        "report_dir": dir.display().to_string(),
        "report": dir.join("report.json").display().to_string(),
        "runs": runs,
        "failed": report.failed,
    });
    if let Some(verdict) = verdict {
        v["gate"] = gate_json(verdict);
        v["exit_code"] = verdict.exit_code().into();
    }
    v
}

fn gate_json(v: &Verdict) -> Value {
    let checks: Vec<Value> = v
        .checks
        .iter()
        .map(|c| {
            let (status, reason) = match &c.status {
                Status::Passed => ("passed", None),
                Status::Breached => ("breached", c.breach_reason().map(str::to_string)),
                Status::NotVerified(why) => ("not_verified", Some(why.clone())),
                Status::NotRequired(why) => ("not_required", Some(why.clone())),
            };
            json!({
                "run": c.run,
                "threshold": c.limit.name(),
                "limit": c.limit.value,
                "limit_from": match c.limit.origin {
                    Origin::Default => "default",
                    Origin::Bundled => "bundled_scenario",
                    Origin::Scenario => "scenario",
                    Origin::Flag => "flag",
                },
                "measured": c.measured,
                "source": c.source,
                "status": status,
                "reason": reason,
            })
        })
        .collect();
    json!({
        "passed": v.passed(),
        "breached": v.breached(),
        "not_verified": v.unverified(),
        "not_required": v.not_required(),
        "allow_unverified": v.allow_unverified,
        "checks": checks,
    })
}

/// Parses the process's arguments; on a usage error exits 2 with clap's message on stderr and,
/// when `--json` was asked for, `{schema, error, exit_code}` on stdout (help and version print
/// as usual).
pub fn parse() -> super::Cli {
    match parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => {
            let json = wanted_json(std::env::args_os().skip(1));
            if e.use_stderr() && json.wanted() {
                // Claiming only sets where the document goes; clap's message goes to stderr.
                let _ = json.claim();
                json_line(&usage_error(&e));
            }
            e.exit()
        }
    }
}

/// Parses a command line as the binary does: with [`values::dash_values`], so a negative
/// number reaches its flag's own check (`--repeat -3`: "must be at least 1").
pub fn parse_from<I, T>(args: I) -> Result<super::Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::FromArgMatches;
    let mut command = super::command();
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    let args = bench_json_file(args);
    let matches = command
        .try_get_matches_from_mut(args.clone())
        .map_err(|e| from_environment(&command, e, &args))?;
    super::serve::config_alone(&mut command, &matches)?;
    let mut cli = super::Cli::from_arg_matches(&matches).map_err(|e| e.format(&mut command))?;
    let quiet = cli.verbosity.quiet;
    if let Some(o) = cli.command.output_mut() {
        o.quiet = quiet;
    }
    if let Some(conn) = cli.command.conn_mut() {
        let m = leaf(&matches);
        conn.from_env = super::ConnArgs::ENV
            .iter()
            .map(|(id, _, _)| *id)
            .filter(|id| m.value_source(id) == Some(clap::parser::ValueSource::EnvVariable))
            .collect();
    }
    Ok(cli)
}

/// The command line with bench's older `--json FILE` (and `--json=FILE`) written as
/// `--json-file FILE`: `--json` is a switch on every command now, and scripts that wrote
/// the file keep working.
fn bench_json_file(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let is_bench = args
        .iter()
        .skip(1)
        .find(|a| !a.to_string_lossy().starts_with('-'));
    if is_bench.is_none_or(|a| a != "bench") {
        return args;
    }
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.into_iter().peekable();
    while let Some(a) = it.next() {
        let text = a.to_string_lossy().into_owned();
        if let Some(file) = text.strip_prefix("--json=") {
            out.push("--json-file".into());
            out.push(file.into());
        } else if text == "--json"
            && it
                .peek()
                .is_some_and(|n| !n.to_string_lossy().starts_with('-'))
        {
            out.push("--json-file".into());
        } else {
            out.push(a);
        }
    }
    out
}

/// A bad value clap read from an environment variable (`OVERSELL_SERVICES=bogus`), said as
/// such: clap's own message names only the flag, which the command line does not have.
fn from_environment(
    command: &clap::Command,
    e: clap::Error,
    args: &[std::ffi::OsString],
) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let flag = arg
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string();
    let given = args.iter().filter_map(|a| a.to_str()).any(|a| {
        a == flag
            || a.strip_prefix(flag.as_str())
                .is_some_and(|r| r.starts_with('='))
    });
    let Some(var) = env_of(command, flag.trim_start_matches("--")).filter(|_| !given) else {
        return e;
    };
    let value = std::env::var(&var).unwrap_or_default();
    let text = e.render().to_string();
    // A value parser's reason follows clap's first line: "… for '--flag <V>': reason".
    let reason = text
        .lines()
        .next()
        .and_then(|l| l.split_once(&format!("'{arg}': ")))
        .map(|(_, r)| format!(": {r}"))
        .unwrap_or_default();
    let detail: Vec<&str> = text
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
        .collect();
    let mut message = format!(
        "invalid value {value:?} in the environment variable {var} (read for {flag}){reason}; \
         unset it or give {flag} on the command line"
    );
    for l in detail {
        message.push('\n');
        message.push_str(l);
    }
    clap::Error::raw(e.kind(), message + "\n")
}

/// The environment variable the flag `--long` reads, in any subcommand.
fn env_of(command: &clap::Command, long: &str) -> Option<String> {
    command
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .and_then(|a| a.get_env())
        .map(|v| v.to_string_lossy().into_owned())
        .or_else(|| command.get_subcommands().find_map(|c| env_of(c, long)))
}

/// The matches of the subcommand that runs (`bench shop`'s, not `bench`'s).
fn leaf(m: &clap::ArgMatches) -> &clap::ArgMatches {
    match m.subcommand() {
        Some((_, sub)) => leaf(sub),
        None => m,
    }
}

/// `--json` and `--json-file FILE` as a command line asks for them (before any `--`), read
/// without clap: for a usage error clap found first.
pub(super) fn wanted_json(args: impl IntoIterator<Item = std::ffi::OsString>) -> JsonArgs {
    let words: Vec<String> = args
        .into_iter()
        .map_while(|a| a.into_string().ok().filter(|a| a != "--"))
        .collect();
    let json = words
        .iter()
        .any(|a| a == "--json" || a.starts_with("--json="));
    let json_file = words
        .iter()
        .enumerate()
        .find_map(|(i, a)| match a.as_str() {
            "--json-file" => words.get(i + 1).map(PathBuf::from),
            a => a.strip_prefix("--json-file=").map(PathBuf::from),
        });
    JsonArgs { json, json_file }
}

/// The `--json` document of a usage error: clap's message without its colours or the `--help`
/// hint, and exit code 2.
fn usage_error(e: &clap::Error) -> serde_json::Value {
    let text = e.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .map(|l| l.strip_prefix("error: ").unwrap_or(l))
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
        .collect();
    serde_json::json!({
        "schema": SUMMARY_SCHEMA,
        "error": message.join("\n"),
        "exit_code": Exit::Error,
    })
}
