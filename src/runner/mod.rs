//! Running a scenario and writing its report, for `run`, `compare`, `gate` and `attack`.
//!
//! A run fires at a [`Subject`]: either the reference shop, started as a child process on a free
//! loopback port for every strategy (and backend) in turn ([`shop_process`]), or a foreign shop
//! at a URL, mapped by the scenario's `[target]` table and audited by the user's own oracle
//! ([`foreign`]). Both share the traffic phase here: set up the sale, start the probes, fire the
//! seeded plan, then hand back the clients' records for the oracle.
//!
//! The report is written as each run finishes (JSON, Markdown, interval logs, CSV; the charts
//! and HTML once all are done), so a run that fails keeps the runs before it: the report then
//! lists the failed run and why.
//!
//! - `reference`: a run of the reference shop, from its start to the oracle's read.
//! - `shop_process`: the reference shop's child process, drain wait, final reconciliation.
//! - `shops`: several reference shops in one run (`--shops K`): the others' start, the drain
//!   of all, and what each answered.
//! - `foreign`: someone else's shop: oracle read before any load, settle wait, totals oracle.
//! - `login`: a foreign shop's buyers logging in before the sale (`[target.login]`), and the
//!   run's `login` section.
//! - `gauges`: the run's `[watch]` (checked before anything is sent, read during the sale).
//! - `faults`: the run's fault windows and when it recovered from each (the engine is
//!   [`crate::nemesis`]).
//! - `replica`: a run's managed read replica (reconciliation reads it; `replica-lag`).
//! - `lock`: one run at a time per database.
//! - `progress`: the progress bar (a terminal) or line (a log) while a run runs.
//! - `metadata`: the build, command line, server versions and start time of a report.

pub(crate) mod finish;
pub(crate) mod gauges;
pub(crate) mod merge;
mod metadata;
mod progress;
mod sharded;
pub(crate) mod subject;

pub use merge::MergePlan;
pub use metadata::GIT_COMMIT;
pub use progress::Slot;
pub use sharded::{fire_shard, ShardRun};
pub use subject::{Held, Levers, Servers, ShopUnderTest, Subject};

use crate::inventory::Strategy;
use crate::live::Live;
use crate::nemesis::{Engine, Owned};
use crate::oracle::Reading;
use crate::probe::{self, ProbeConfig, Probes};
use crate::report::{self, FailedRun, RunReport};
use crate::services::Service;
use crate::store::Backend;
use crate::traffic::attack::{self, GeneratorStats, GooseCrossCheck};
use crate::traffic::mapping::Mapping;
use crate::traffic::recorder::Recorder;
use crate::traffic::schedule::Schedule;
use crate::traffic::session::Columns;
use crate::traffic::target::{Prepared, Sale, Target, Targets};
use crate::traffic::Scenario;
use anyhow::Context;
pub(crate) use finish::{ask, finish, finish_measured, finish_with, Clients, ServerSide};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// One strategy on one backend.
#[derive(Debug, Clone)]
pub struct Cell {
    pub strategy: Strategy,
    pub backend: Backend,
    pub database_url: String,
}

/// The `oversell` binary a child shop runs: this one.
pub fn shop_exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("locating the oversell binary")
}

impl RunPlan {
    /// A plan with the scenario's own seeded buyers, run once, without progress or a live
    /// endpoint, draining for at most 60 s; the `with_*` methods change those.
    pub fn new(scenario: Scenario, scenario_file: PathBuf, subject: Subject, out: PathBuf) -> Self {
        RunPlan {
            buyers: crate::traffic::schedule::build(&scenario),
            columns: Arc::default(),
            scenario,
            scenario_file,
            subject,
            out,
            drain_limit: Duration::from_secs(60),
            progress: false,
            live: None,
            repeat: 1,
        }
    }

    /// Fires these buyers instead of the scenario's seeded ones (renamed from a CSV).
    pub fn with_buyers(self, buyers: Schedule) -> Self {
        RunPlan { buyers, ..self }
    }

    /// The buyers' CSV's extra columns (placeholders of a foreign shop's requests).
    pub fn with_columns(self, columns: Columns) -> Self {
        RunPlan {
            columns: Arc::new(columns),
            ..self
        }
    }

    /// Waits at most `drain_limit` for the drain (reference) or the settle (foreign).
    pub fn with_drain_limit(self, drain_limit: Duration) -> Self {
        RunPlan {
            drain_limit,
            ..self
        }
    }

    /// Shows progress on stderr (or not).
    pub fn with_progress(self, progress: bool) -> Self {
        RunPlan { progress, ..self }
    }

    /// Tells this live endpoint which run and shop are current.
    pub fn with_live(self, live: Option<Live>) -> Self {
        RunPlan { live, ..self }
    }

    /// Runs each strategy `repeat` times.
    pub fn with_repeat(self, repeat: u32) -> Self {
        RunPlan { repeat, ..self }
    }

    /// How many runs the plan makes: every cell (or the foreign target) `repeat` times.
    pub fn runs(&self) -> usize {
        self.subject.shops() * self.repeat.max(1) as usize
    }

    /// Run `i` (0-based): its cell's index and, when the plan repeats, its 1-based repeat.
    /// A strategy's repeats run back to back.
    pub(crate) fn cell_of(&self, i: usize) -> (usize, Option<u32>) {
        let n = self.repeat.max(1) as usize;
        (i / n, (n > 1).then_some((i % n) as u32 + 1))
    }

    /// Run `i`'s (0-based) slot: its 1-based index, the count and its label.
    fn slot(&self, i: usize) -> Slot {
        let (c, repeat) = self.cell_of(i);
        let label = self.subject.label(c);
        let label = match repeat {
            Some(r) => format!("{label} #{r}"),
            None => label,
        };
        Slot {
            index: i + 1,
            of: self.runs(),
            label,
        }
    }

    /// Prints a line to stderr unless the plan is quiet, folded at 100 columns with its
    /// continuation lines indented under it (a run's lines stay under its `==` header).
    pub(crate) fn say(&self, line: &str) {
        if self.progress {
            let folded = report::table::wrap(line, report::table::TERMINAL_WIDTH);
            crate::telemetry::stderr_line(&folded);
        }
    }
}

/// Why a run could not start or finish (exit 2: nothing was judged).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "another oversell run is using {url} right now (each run resets the sale, so one at a \
         time per database): wait for it, or give this run its own --database-url"
    )]
    DatabaseBusy { url: String },
    #[error("{field}: setting up the sale at {url} failed: {status} {body}")]
    SaleSetup {
        /// The request's field: `target.setup`, `target.setup[1]`, ...
        field: String,
        url: String,
        status: reqwest::StatusCode,
        body: String,
    },
}

/// Everything a run needs, decided before any work starts.
#[derive(Debug, Clone)]
pub struct RunPlan {
    pub scenario: Scenario,
    pub scenario_file: PathBuf,
    pub subject: Subject,
    /// The buyers to fire: `schedule::build(&scenario)`, possibly renamed from a CSV.
    pub buyers: Schedule,
    /// The `--buyers-csv` file's extra columns, placeholders of the buyers' requests.
    pub columns: Arc<Columns>,
    /// Reports go to `<out>/<UTC timestamp>-<scenario>/`.
    pub out: PathBuf,
    /// Longest wait for the shop to drain (reference) or the oracle to settle (foreign).
    pub drain_limit: Duration,
    /// Show progress on stderr: a bar on a terminal, else a line every second.
    pub progress: bool,
    /// The live metrics endpoint (`--metrics-listen`), told which run and shop are current.
    pub live: Option<Live>,
    /// `--repeat N`: each strategy runs this many times, each on a fresh sale (1: once).
    pub repeat: u32,
}

/// Runs every cell (or the foreign target) of the plan, writing the report as each run
/// finishes; returns it and its folder. A failed run ends the command: the report keeps the
/// runs before it and names the failure (a folder with nothing in it is removed).
pub async fn execute(plan: &RunPlan) -> anyhow::Result<(report::Report, PathBuf)> {
    let started_at = now_rfc3339();
    // The drivers' own lines (sqlx's slow statements, ...) go to the run's log, not onto the
    // terminal: held until the report's folder exists.
    let log = crate::telemetry::hold_driver_lines();
    let s = &plan.scenario;
    plan.subject
        .check(s)
        .map_err(|e| anyhow::anyhow!("{}: {e}", plan.scenario_file.display()))?;
    gauges::check(plan)?;
    let _locks = plan.subject.lock().await?;
    let metadata = metadata::gather(plan, started_at).await;
    let dir = report::new_dir(&plan.out, &s.name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    log.open(&dir.join("run.log"))
        .with_context(|| format!("creating {}", dir.join("run.log").display()))?;
    crate::traffic::goose_output::log_in(&dir);
    let mut report = empty_report(plan, metadata);
    for i in 0..plan.runs() {
        let slot = plan.slot(i);
        announce(plan, &slot);
        let (c, repeat) = plan.cell_of(i);
        let run = plan
            .subject
            .run(plan, c, &dir, &slot)
            .await
            .map(|run| RunReport { repeat, ..run });
        if let Some(live) = &plan.live {
            live.shop(None);
        }
        match run {
            Ok(run) => {
                report.runs.push(run);
                report.repeats = report::repeats::summarise(&report);
                report.generated_at = now_rfc3339();
                report::write_data(&dir, &report)?;
            }
            Err(e) => return Err(keep_what_finished(&dir, report, &slot, e)),
        }
    }
    report::write(&dir, &report)?;
    Ok((report, dir))
}

/// A report of `plan` with no run yet.
fn empty_report(plan: &RunPlan, metadata: report::Metadata) -> report::Report {
    let s = &plan.scenario;
    report::Report {
        schema: report::SCHEMA.into(),
        generated_at: now_rfc3339(),
        tool_version: env!("CARGO_PKG_VERSION").into(),
        scenario: report::ScenarioSummary {
            name: s.name.clone(),
            file: plan.scenario_file.display().to_string(),
            description: s.description.clone(),
            buyers: plan.buyers.len() as u32,
            // Its secrets masked: the report is an artifact (docs/src/security.md).
            spec: crate::traffic::scenario::masked::scenario(s),
        },
        machine: report::Machine::this(),
        metadata,
        sources: plan.subject.sources(),
        runs: Vec::new(),
        failed: Vec::new(),
        repeats: Vec::new(),
        law: Vec::new(),
    }
}

pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// After run `slot` failed: the report lists it next to the runs that finished (and the shop's
/// log); a folder with nothing in it is removed. Returns the error, saying where the report is.
fn keep_what_finished(
    dir: &Path,
    mut report: report::Report,
    slot: &Slot,
    e: anyhow::Error,
) -> anyhow::Error {
    report.failed.push(FailedRun {
        run: slot.label.clone(),
        error: format!("{e:#}"),
    });
    // The run's log, empty, is nothing to keep either.
    let log = dir.join("run.log");
    let empty = std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten()
            .all(|e| e.path() == log && e.metadata().is_ok_and(|m| m.len() == 0))
    });
    if empty {
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_dir(dir);
        return e;
    }
    let written = if report.runs.is_empty() {
        report::write_data(dir, &report)
    } else {
        report::write(dir, &report)
    };
    match written {
        Ok(()) => e.context(format!(
            "{slot} failed; the report of the {} run(s) before it, and the failure, is in {}",
            report.runs.len(),
            dir.display()
        )),
        Err(w) => e.context(format!(
            "{slot} failed, and its report could not be written: {w:#}"
        )),
    }
}

fn announce(plan: &RunPlan, slot: &Slot) {
    if let Some(live) = &plan.live {
        live.run_started(
            slot.index,
            slot.of,
            &slot.label,
            plan.scenario.item.stock,
            plan.buyers.len(),
        );
    }
    plan.say(&format!(
        "== {slot} ({} buyers, {} units)",
        plan.buyers.len(),
        plan.scenario.item.stock
    ));
}

/// The shop at `base_url` as the traffic model sees it, selling the scenario's item.
pub(crate) fn target_for(s: &Scenario, base_url: &str, mapping: Mapping) -> Target {
    Target::new(base_url, mapping, Sale::of(s))
}

/// How the clients' answers are read under `mapping` (its order id field, its bound on
/// answers no rule classified, whether it sends idempotency keys), for the oracle.
pub(crate) fn reading_of(mapping: &Mapping) -> Reading {
    Reading {
        order_id_field: mapping.order_id_field.clone(),
        max_unclassified: mapping.unclassified_bound(),
        keys_sent: !mapping.idempotency_header.is_empty(),
    }
}

/// A client for set-up and drain requests (not the load itself); it follows no redirect.
pub(crate) fn control_client() -> anyhow::Result<reqwest::Client> {
    Ok(crate::guard::http::client(Duration::from_secs(30))?)
}

/// What the traffic phase produced; the probes and the watch are still sampling.
pub(crate) struct Fired {
    pub(crate) traffic: Traffic,
    pub(crate) probes: Probes,
    /// The `[watch]` gauges, read every second until the run stops them.
    pub(crate) watch: crate::watch::Watcher,
    /// The run's faults, scheduled from the sale's opening (dropped: undone).
    pub(crate) engine: Option<Engine>,
}

/// The clients' side of a run: their records (and how the mapping read the answers), goose's
/// cross-check, the generator's cost.
pub(crate) struct Traffic {
    pub(crate) goose: Vec<GooseCrossCheck>,
    pub(crate) generator: GeneratorStats,
    pub(crate) recorder: Arc<Recorder>,
    pub(crate) reading: Reading,
}

/// Starts the probes (`probe.opened` is replaced by the sale's opening), fires the plan, and
/// returns once the last buyer is done.
pub(crate) async fn fire_traffic(
    plan: &RunPlan,
    targets: Targets,
    probe: ProbeConfig,
    slot: &Slot,
    faults: Option<Owned>,
) -> anyhow::Result<Fired> {
    let buyers = plan.buyers.clone();
    let mapping = &targets.first().mapping;
    let reading = reading_of(mapping);
    let sending = attack::Sending::of(&plan.scenario.client);
    let recorder = Arc::new(Recorder::new(
        Instant::now() + sending.launch_lead(buyers.len()),
    ));
    let ctx = gauges::context(plan, probe.database_url.clone());
    let watcher = crate::watch::start(&plan.scenario.watch, &ctx, recorder.opened())
        .map_err(|e| anyhow::anyhow!("{}: {e}", plan.scenario_file.display()))?;
    let probes = probe::start(ProbeConfig {
        opened: recorder.opened(),
        ..probe
    })
    .await;
    let engine = faults.map(|owned| Engine::start(&plan.scenario.faults, owned, recorder.opened()));
    let watch = plan.progress.then(|| {
        progress::start(
            slot,
            progress::Sources {
                recorder: recorder.clone(),
                latest: probes.latest(),
                buyers: buyers.len(),
                stock: plan.scenario.item.stock,
                last_arrival: buyers.iter().map(|b| b.arrival).max().unwrap_or_default(),
            },
        )
    });
    let fired = attack::fire(buyers, targets, recorder.clone(), &plan.scenario.client).await;
    if let Some(w) = watch {
        w.stop();
    }
    match fired {
        Ok((goose, generator)) => Ok(Fired {
            traffic: Traffic {
                goose,
                generator,
                recorder,
                reading,
            },
            probes,
            watch: watcher,
            engine,
        }),
        Err(e) => {
            probes.stop().await;
            Err(e.context("firing the traffic"))
        }
    }
}

/// Sends the mapping's set-up requests in order, each of which must answer 2xx.
pub(crate) async fn setup_sale(http: &reqwest::Client, target: &Target) -> anyhow::Result<()> {
    for (field, req) in target.setup_requests() {
        send_setup(http, target, &field, &req).await?;
    }
    Ok(())
}

/// Sends one set-up request (`field` names it); an answer other than 2xx is
/// [`RunError::SaleSetup`].
pub(crate) async fn send_setup(
    http: &reqwest::Client,
    target: &Target,
    field: &str,
    req: &Prepared,
) -> anyhow::Result<()> {
    let url = target
        .url(req)
        .map_err(|e| anyhow::anyhow!("{field}: {e}"))?;
    // Shown with its secrets masked; the answer as a sample (cut, masked).
    let shown = target.shown_url(req);
    let resp = req
        .apply(http.request(req.reqwest_method(), url.clone()))
        .send()
        .await
        .map_err(|e| Service::Shop.unreachable_error(&shown, &e.without_url()))?;
    let status = resp.status();
    if !status.is_success() {
        let location = resp.headers().get(reqwest::header::LOCATION).map(|l| {
            format!(
                "(redirects are not followed: Location {})",
                crate::secret::url(&String::from_utf8_lossy(l.as_bytes()))
            )
        });
        let body = crate::guard::body::read_capped(resp)
            .await
            .unwrap_or_default();
        let body = target.sample(&body, req, &Default::default());
        let body = location.unwrap_or(body);
        let url = shown;
        let field = field.to_string();
        return Err(RunError::SaleSetup {
            field,
            url,
            status,
            body,
        }
        .into());
    }
    Ok(())
}
