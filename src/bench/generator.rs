//! `oversell bench generator`: what sending costs, one trivial endpoint, three clients in one
//! run, one after the other:
//! 1. **ours**: the traffic generator firing a real plan (`--rate` buyers a second, uniform
//!    over `--seconds`, each straight to the order button: journeys, the sender pool, goose's
//!    `user.request`, the recorder);
//! 2. **goose**: goose's bare request loop (`--connections` users, each posting an order as
//!    fast as answers come, for `--seconds`): the floor of any client built on goose;
//! 3. **goose, paced**: the same bare loop held to `--rate` requests a second by goose's own
//!    throttle (`throttle_requests`): the floor at our rate. A client's CPU per request
//!    depends on its rate (at 3,000/s every request wakes a parked worker; flat out, the
//!    wake-ups are shared), so the ratio target is read against this one;
//! 4. **wrk**: the one order script (`bench/order.lua`) for `--seconds`.
//!
//! The endpoint answers every `POST /api/orders` with a `201` and a fresh order id, in this
//! process on one thread of its own (a current-thread runtime), so its CPU is that thread's
//! (`/proc/self/task/<tid>/stat`) and is taken out of this process's for ours and goose's.
//! Per client: CPU per request, requests/s, send lag (ours only: goose and wrk are closed loops
//! with no intended send time) and peak RSS (ours and goose: `VmHWM` reset before each phase;
//! wrk: its own `VmHWM`).

use super::cpu::{self, CpuUse};
use super::saturation;
use super::{ratio, wrk};
use crate::report::table::{text, wrap, Align, TERMINAL_WIDTH};
use crate::shop::routes::Route;
use crate::traffic::attack;
use crate::traffic::mapping::Mapping;
use crate::traffic::recorder::{Kind, Recorder};
use crate::traffic::target::{Sale, Target, Targets};
use crate::traffic::{schedule, Scenario as Plan};
use anyhow::Context;
use goose::config::GooseConfiguration;
use goose::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::time::Instant;

/// What to measure.
#[derive(Debug, Clone)]
pub struct GeneratorBench {
    pub seconds: u64,
    /// Our plan's arrivals per second.
    pub rate: u64,
    /// goose's users and wrk's connections.
    pub connections: usize,
    /// Search for the highest rate the generator holds ([`super::saturation`]).
    pub saturation: bool,
}

/// One client's figures.
#[derive(Debug, Clone, Serialize)]
pub struct ClientRun {
    /// `ours`, `goose` or `wrk`.
    pub client: String,
    /// What it ran.
    pub what: String,
    pub requests: u64,
    pub seconds: f64,
    pub requests_per_s: f64,
    /// Its CPU per request (the endpoint's thread taken out for ours and goose).
    pub cpu: CpuUse,
    /// Send lag (intended → actual send) of its orders, ms; `None` for a closed loop.
    pub send_lag_p50_ms: Option<f64>,
    pub send_lag_p99_ms: Option<f64>,
    /// Where the send lag comes from, or why there is none.
    pub send_lag_source: String,
    /// Peak resident set during its phase, MiB (ours: the attack's, its clients' records
    /// kept compact, as a run's `generator.peak_rss_mib`).
    pub peak_rss_mib: f64,
    /// Ours: the peak once the records are also handed to the oracle (`Recorder::finish`, what
    /// a run does at its end: the records kept compact, every attempt's key spelled once into
    /// one text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_rss_with_spelled_records_mib: Option<f64>,
    /// Ours: what handing the records over takes, MiB: the peak during `Recorder::finish`
    /// above the resident set just before it (the attack's own end state, which moves run to
    /// run with what the allocator kept, taken out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spelling_out_mib: Option<f64>,
    /// Resident set when its phase began, MiB (ours and goose share this process, and the
    /// allocator keeps what an earlier phase freed).
    pub rss_at_start_mib: f64,
    pub rss_source: String,
    /// The endpoint's CPU per request during the phase (its thread).
    pub endpoint_us_per_request: f64,
}

/// The three clients and their ratios.
#[derive(Debug, Clone, Serialize)]
pub struct GeneratorBenchResult {
    pub seconds: u64,
    pub rate: u64,
    pub connections: usize,
    pub build: String,
    pub cores: usize,
    /// `/proc/loadavg` when the run started.
    pub load_average: String,
    pub endpoint: String,
    pub ours: ClientRun,
    pub goose: ClientRun,
    /// goose's bare loop held to our rate by its throttle.
    pub goose_paced: ClientRun,
    pub wrk: ClientRun,
    /// Our CPU per request over goose's bare loop's, flat out.
    pub ours_over_goose: f64,
    /// Our CPU per request over goose's bare loop's at our rate (target ≤ 1.0).
    pub ours_over_goose_paced: f64,
    /// Our CPU per request over wrk's.
    pub ours_over_wrk: f64,
    pub goose_over_wrk: f64,
    /// The highest rate our generator holds on this machine (`None`: `--no-saturation`).
    pub saturation: Option<saturation::Saturation>,
}

/// The trivial endpoint, on a thread of its own.
struct Endpoint {
    base_url: String,
    tid: u32,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Endpoint {
    fn start() -> anyhow::Result<Endpoint> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("bench-endpoint".into())
            .spawn(move || {
                let failed = tx.clone();
                let run = || -> anyhow::Result<()> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    rt.block_on(async move {
                        let next = Arc::new(AtomicU64::new(1));
                        let app = axum::Router::new().route(
                            Route::Orders.path(),
                            axum::routing::post(move || {
                                let id = next.fetch_add(1, Ordering::Relaxed);
                                async move {
                                    (
                                        axum::http::StatusCode::CREATED,
                                        [(axum::http::header::CONTENT_TYPE, "application/json")],
                                        format!(r#"{{"order_id":"o-{id}"}}"#),
                                    )
                                }
                            }),
                        );
                        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                        let addr = listener.local_addr()?;
                        let _ = tx.send(Ok((addr, cpu::current_tid().unwrap_or(0))));
                        axum::serve(listener, app)
                            .with_graceful_shutdown(async move {
                                let _ = stopped.await;
                            })
                            .await?;
                        anyhow::Ok(())
                    })
                };
                if let Err(e) = run() {
                    let _ = failed.send(Err(e));
                }
            })
            .context("starting the endpoint's thread")?;
        let (addr, tid) = rx.recv().context("the endpoint's thread died")??;
        Ok(Endpoint {
            base_url: format!("http://{addr}"),
            tid,
            stop: Some(stop),
        })
    }

    fn cpu(&self) -> f64 {
        cpu::thread_seconds(self.tid).unwrap_or(0.0)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Runs the three phases.
pub async fn generator(b: &GeneratorBench) -> anyhow::Result<GeneratorBenchResult> {
    super::require_tool("wrk", "wrk")?;
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    let endpoint = Endpoint::start()?;
    let ours = ours(b, &endpoint).await?;
    let goose = goose_loop(b, &endpoint, None).await?;
    let goose_paced = goose_loop(b, &endpoint, Some(b.rate)).await?;
    let wrk = wrk_run(b, &endpoint).await?;
    let saturation = if b.saturation {
        Some(saturation::search(b.rate, |rate| probe(b, &endpoint, rate)).await?)
    } else {
        None
    };
    let per = |c: &ClientRun| c.cpu.us_per_op;
    Ok(GeneratorBenchResult {
        seconds: b.seconds,
        rate: b.rate,
        connections: b.connections,
        build: if cfg!(debug_assertions) {
            "debug".into()
        } else {
            "release".into()
        },
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        load_average,
        endpoint: format!(
            "POST {}: 201 and an order id, one current-thread runtime on a thread of this process",
            Route::Orders.url(&endpoint.base_url)
        ),
        ours_over_goose: ratio(per(&ours), per(&goose)),
        ours_over_goose_paced: ratio(per(&ours), per(&goose_paced)),
        ours_over_wrk: ratio(per(&ours), per(&wrk)),
        goose_over_wrk: ratio(per(&goose), per(&wrk)),
        ours,
        goose,
        goose_paced,
        wrk,
        saturation,
    })
}

const OWN_CPU: &str =
    "getrusage(RUSAGE_SELF) of this process less the endpoint thread's /proc/self/task/<tid>/stat";
const OWN_RSS: &str =
    "VmHWM of this process (reset through /proc/self/clear_refs before the phase; \
                       the endpoint's few MiB included)";

/// One probe of the saturation search: ours at `rate` for [`saturation::PROBE_S`] seconds.
async fn probe(b: &GeneratorBench, e: &Endpoint, rate: u64) -> anyhow::Result<saturation::Probe> {
    let at = GeneratorBench {
        seconds: saturation::PROBE_S,
        rate,
        connections: b.connections,
        saturation: false,
    };
    let run = ours(&at, e).await?;
    Ok(saturation::Probe {
        rate,
        requests_per_s: run.requests_per_s,
        send_lag_p99_ms: run.send_lag_p99_ms,
        cpu_us_per_request: run.cpu.us_per_op,
        held: saturation::held(rate, run.requests, run.send_lag_p99_ms),
    })
}

/// Our generator firing a real plan at the endpoint.
async fn ours(b: &GeneratorBench, e: &Endpoint) -> anyhow::Result<ClientRun> {
    let buyers = (b.rate * b.seconds).max(1);
    let s = Plan::parse(&format!(
        r#"
name = "bench-generator"
[item]
stock = 1000000
[buyers]
count = {buyers}
arrival = "uniform"
window_s = {}
seed = 7
[after_order]
pay = 0.0
cancel = 0.0
abandon = 1.0
"#,
        b.seconds.max(1)
    ))
    .map_err(|p| anyhow::anyhow!("the bench's own scenario: {p}"))?;
    cpu::reset_peak_rss();
    let rss_at_start_mib = cpu::rss_mib();
    let plan = schedule::build(&s);
    let target = Arc::new(Target::new(&e.base_url, Mapping::default(), Sale::of(&s)));
    let sending = attack::Sending::of(&s.client);
    let (own0, ep0, t0) = (attack::cpu_seconds(), e.cpu(), Instant::now());
    let recorder = Arc::new(Recorder::new(
        Instant::now() + sending.launch_lead(plan.len()),
    ));
    let (_, stats) = attack::fire(plan, Targets::one(target), recorder.clone(), &s.client).await?;
    let attack_peak = cpu::peak_rss_mib();
    let before_finish = cpu::rss_mib();
    cpu::reset_peak_rss();
    let m = recorder.finish();
    let finish_peak = cpu::peak_rss_mib();
    let (own, ep, wall) = (
        attack::cpu_seconds() - own0,
        e.cpu() - ep0,
        t0.elapsed().as_secs_f64(),
    );
    let requests = m.attempts().len() as u64;
    let lag = m.send_lag.get(&Kind::Order);
    let q = |p: f64| lag.map(|h| h.value_at_quantile(p) as f64 / 1000.0);
    Ok(ClientRun {
        client: "ours".into(),
        what: format!(
            "the generator firing {buyers} buyers uniform over {} s, straight to the order \
             button ({} goose senders)",
            b.seconds, stats.users
        ),
        requests,
        seconds: round3(wall),
        requests_per_s: (requests as f64 / wall.max(1e-9)).round(),
        cpu: CpuUse::of((own - ep).max(0.0), requests, "request", OWN_CPU.into()),
        send_lag_p50_ms: q(0.5),
        send_lag_p99_ms: q(0.99),
        send_lag_source: "the recorder's send lag of the orders (intended → actual send)".into(),
        peak_rss_mib: attack_peak,
        peak_rss_with_spelled_records_mib: Some(attack_peak.max(finish_peak)),
        spelling_out_mib: Some((finish_peak - before_finish).max(0.0)),
        rss_at_start_mib,
        rss_source: OWN_RSS.into(),
        endpoint_us_per_request: per_us(ep, requests),
    })
}

/// Goose's bare request loop: every user posts an order, waits for its answer, posts again;
/// with `paced`, no more than that many requests a second (goose's throttle).
async fn goose_loop(
    b: &GeneratorBench,
    e: &Endpoint,
    paced: Option<u64>,
) -> anyhow::Result<ClientRun> {
    let config = goose_config(b, e, paced);
    cpu::reset_peak_rss();
    let rss_at_start_mib = cpu::rss_mib();
    let (own0, ep0, t0) = (attack::cpu_seconds(), e.cpu(), Instant::now());
    let diverted = crate::traffic::goose_output::divert();
    let order = Transaction::new(order_transaction()).set_name("order");
    let metrics = GooseAttack::initialize_with_config(config)?
        .register_scenario(scenario!("bare").register_transaction(order))
        .execute()
        .await
        .context("goose's bare loop")?;
    drop(diverted);
    let (own, ep, wall) = (
        attack::cpu_seconds() - own0,
        e.cpu() - ep0,
        t0.elapsed().as_secs_f64(),
    );
    let requests: u64 = metrics
        .requests
        .values()
        .map(|a| a.raw_data.counter as u64)
        .sum();
    let (client, what) = goose_labels(b, paced);
    Ok(ClientRun {
        client,
        what,
        requests,
        seconds: round3(wall),
        requests_per_s: (requests as f64 / wall.max(1e-9)).round(),
        cpu: CpuUse::of((own - ep).max(0.0), requests, "request", OWN_CPU.into()),
        send_lag_p50_ms: None,
        send_lag_p99_ms: None,
        send_lag_source: "none: a closed loop sends each request when the previous answer \
                          arrives, with no intended send time"
            .into(),
        peak_rss_mib: cpu::peak_rss_mib(),
        peak_rss_with_spelled_records_mib: None,
        spelling_out_mib: None,
        rss_at_start_mib,
        rss_source: OWN_RSS.into(),
        endpoint_us_per_request: per_us(ep, requests),
    })
}

/// Goose's one transaction: post an order as a new buyer (`u-g-{n}`, key `k-g-{n}`).
fn order_transaction() -> TransactionFunction {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    Arc::new(|user| {
        Box::pin(async move {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let body =
                format!(r#"{{"item_id":1,"qty":1,"user_id":"u-g-{n}","device_id":"d-g-{n}"}}"#);
            let rb = user
                .get_request_builder(&GooseMethod::Post, Route::Orders.path())?
                .header("content-type", "application/json")
                .header("idempotency-key", format!("k-g-{n}"))
                .body(body);
            let req = GooseRequest::builder()
                .method(GooseMethod::Post)
                .path(Route::Orders.path())
                .set_request_builder(rb)
                .build();
            user.request(req).await?;
            Ok(())
        })
    })
}

/// Goose configured from the bench (never from the process's arguments): `b.connections`
/// users started at once for `b.seconds`, throttled to `paced` requests a second, silent.
fn goose_config(b: &GeneratorBench, e: &Endpoint, paced: Option<u64>) -> GooseConfiguration {
    let mut config = GooseConfiguration::default();
    config.host = Some(e.base_url.clone());
    config.users = Some(b.connections);
    config.increase_rate = Some("100000".into());
    config.run_time = Some(b.seconds.to_string());
    config.throttle_requests = paced.map(|r| r.min(1_000_000) as usize);
    config.no_telnet = true;
    config.no_print_metrics = true;
    config.no_error_summary = true;
    config.quiet = 1;
    config
}

/// The goose row's client name and what it ran.
fn goose_labels(b: &GeneratorBench, paced: Option<u64>) -> (String, String) {
    let client = if paced.is_some() {
        "goose paced"
    } else {
        "goose"
    };
    let what = format!(
        "goose {} users, one transaction posting an order in a loop, {} s{}",
        b.connections,
        b.seconds,
        paced.map_or(String::new(), |r| format!(
            ", at most {r} requests/s (goose's throttle_requests)"
        ))
    );
    (client.into(), what)
}

/// wrk with the one order script.
async fn wrk_run(b: &GeneratorBench, e: &Endpoint) -> anyhow::Result<ClientRun> {
    let (kids0, ep0) = (cpu::children_seconds(), e.cpu());
    let tag = format!("gen-{}", std::process::id());
    let r = wrk::run(&e.base_url, b.connections, 2, b.seconds, &tag).await?;
    let (kids, ep) = (cpu::children_seconds() - kids0, e.cpu() - ep0);
    Ok(ClientRun {
        client: "wrk".into(),
        what: r.command.clone(),
        requests: r.requests,
        seconds: r.seconds,
        requests_per_s: r.requests_per_s.round(),
        cpu: CpuUse::of(
            kids,
            r.requests,
            "request",
            "getrusage(RUSAGE_CHILDREN) before and after wrk".into(),
        ),
        send_lag_p50_ms: None,
        send_lag_p99_ms: None,
        send_lag_source: "none: wrk is a closed loop (a connection sends when its previous \
                          answer arrived)"
            .into(),
        peak_rss_mib: r.peak_rss_mib,
        peak_rss_with_spelled_records_mib: None,
        spelling_out_mib: None,
        rss_at_start_mib: 0.0,
        rss_source: "VmHWM of wrk's /proc/<pid>/status, sampled every 100 ms".into(),
        endpoint_us_per_request: per_us(ep, r.requests),
    })
}

fn per_us(seconds: f64, ops: u64) -> f64 {
    CpuUse::of(seconds, ops, "request", String::new()).us_per_op
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The terminal summary.
pub fn render(r: &GeneratorBenchResult) -> String {
    let mut out = wrap(
        &format!(
            "bench generator (load {}): {} s per client, our plan at {}/s, {} connections, {} \
             build, {} cores",
            r.load_average, r.seconds, r.rate, r.connections, r.build, r.cores
        ),
        TERMINAL_WIDTH,
    );
    out.push('\n');
    let header = [
        "client",
        "requests",
        "req/s",
        "CPU µs/req",
        "send lag p50",
        "send lag p99",
        "peak RSS (start)",
        "endpoint µs/req",
    ]
    .map(String::from);
    let ms = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.2} ms"));
    let rows: Vec<Vec<String>> = [&r.ours, &r.goose, &r.goose_paced, &r.wrk]
        .iter()
        .map(|c| {
            vec![
                // "goose paced" shortened: the table stays within the terminal's width.
                c.client.replace("goose paced", "paced"),
                c.requests.to_string(),
                format!("{:.0}", c.requests_per_s),
                format!("{:.1}", c.cpu.us_per_op),
                ms(c.send_lag_p50_ms),
                ms(c.send_lag_p99_ms),
                format!("{:.1} MiB ({:.1})", c.peak_rss_mib, c.rss_at_start_mib),
                format!("{:.1}", c.endpoint_us_per_request),
            ]
        })
        .collect();
    let mut align = [Align::Right; 8];
    align[0] = Align::Left;
    out.push_str(&text(&header, &rows, &align));
    out.push_str("send lag n/a: a closed loop (it sends when the last answer came back)\n");
    out.push_str(&wrap(
        &format!(
            "paced: goose's bare loop held to {}/s by its throttle (our rate: CPU per request \
             depends on the rate, so the 1.0x target is read against this row)",
            r.rate
        ),
        TERMINAL_WIDTH,
    ));
    out.push('\n');
    if let Some(spelled) = r.ours.peak_rss_with_spelled_records_mib {
        let adds = r.ours.spelling_out_mib.unwrap_or_default();
        out.push_str(&wrap(
            &format!(
                "ours' peak RSS is the attack's, its records kept compact; with them handed to \
                 the oracle (a run's end, the attempts' keys spelled once): {spelled:.1} MiB, \
                 the handing over {adds:.1} MiB over the resident set before it"
            ),
            TERMINAL_WIDTH,
        ));
        out.push('\n');
    }
    out.push_str(&format!(
        "CPU per request: ours / goose paced {:.2}  ours / goose {:.2}  ours / wrk {:.2}  \
         goose / wrk {:.2}\n",
        r.ours_over_goose_paced, r.ours_over_goose, r.ours_over_wrk, r.goose_over_wrk
    ));
    if let Some(s) = &r.saturation {
        out.push_str(&wrap(&saturation::render(s), TERMINAL_WIDTH));
        out.push('\n');
    }
    out
}
