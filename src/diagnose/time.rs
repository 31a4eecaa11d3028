//! Where the time goes: the order path's latency at the rush split into the generator's send
//! lag and the shop's time, what the watched gauges said (pool waits, queue backlog, conflict
//! retries, lock waits where readable), and the capacity at the objective with its bracket.

use super::battery::Kind;
use super::run::{CapacityDone, Done};
use crate::report::LatencySummary;
use crate::traffic::recorder::Kind as Request;
use serde::Serialize;
use std::path::Path;

/// One watched gauge at the rush.
#[derive(Debug, Clone, Serialize)]
pub struct GaugeLine {
    pub name: String,
    pub peak: Option<f64>,
    pub peak_at_s: Option<f64>,
    /// Back at its baseline this many seconds after the opening (absent: not while watched).
    pub drained_at_s: Option<f64>,
    pub source: String,
}

/// The rush's order latency, split.
#[derive(Debug, Clone, Serialize)]
pub struct TimeSplit {
    /// The rush's report, relative to the diagnosis's folder.
    pub report: String,
    pub order_p50_ms: Option<f64>,
    pub order_p99_ms: Option<f64>,
    /// The generator's own lateness: intended send to actual send (p99).
    pub send_lag_p99_ms: Option<f64>,
    /// The shop's time: latency less send lag (p99), sender waits included.
    pub shop_p99_ms: Option<f64>,
    /// Of the shop's time: waits for a free sender while every one was held (p99).
    pub sender_wait_p99_ms: Option<f64>,
    /// The send lag's share of the order p99 (0 to 1).
    pub send_lag_share: Option<f64>,
    /// The run was generator-bound: its figures measure the generator, not the shop.
    pub generator_bound: bool,
    pub gauges: Vec<GaugeLine>,
    /// Row-lock waits per second, peak (PostgreSQL and MySQL, where readable).
    pub db_row_lock_waits: Option<f64>,
    pub db_deadlocks: Option<f64>,
}

/// The capacity at the objective.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    pub objective: String,
    /// The highest rate at which the objective held (buyers/s).
    pub capacity_rps: Option<f64>,
    /// `[held, broke]`.
    pub bracket: [Option<f64>; 2],
    pub answer: String,
    pub broke_first: Option<String>,
    pub probes: usize,
    pub report: String,
}

fn p99(l: Option<&LatencySummary>) -> Option<f64> {
    l.map(|l| l.p99_ms)
}

/// The rush's split; `None` when the rush did not run.
pub fn split(done: &[Done], dir: &Path) -> Option<TimeSplit> {
    let d = done.iter().find(|d| d.kind == Kind::Rush)?;
    let run = d.report.runs.first()?;
    let order = run.requests.get(&Request::Order);
    let lat = run.order_latency();
    let send_lag = p99(order.and_then(|o| o.send_lag.as_ref()));
    let order_p99 = lat.map(|l| l.p99_ms);
    Some(TimeSplit {
        report: super::row::report_link(d, dir),
        order_p50_ms: lat.map(|l| l.p50_ms),
        order_p99_ms: order_p99,
        send_lag_p99_ms: send_lag,
        shop_p99_ms: p99(order.and_then(|o| o.shop_latency.as_ref())),
        sender_wait_p99_ms: p99(order.and_then(|o| o.sender_wait.as_ref())),
        send_lag_share: match (send_lag, order_p99) {
            (Some(s), Some(p)) if p > 0.0 => Some((s / p).min(1.0)),
            _ => None,
        },
        generator_bound: run.generator_bound,
        gauges: run
            .watch
            .iter()
            .map(|(name, g)| GaugeLine {
                name: name.clone(),
                peak: g.peak,
                peak_at_s: g.peak_at_s,
                drained_at_s: g.drained_at_s,
                source: g.source.clone(),
            })
            .collect(),
        db_row_lock_waits: run.db_row_lock_waits,
        db_deadlocks: run.db_deadlocks,
    })
}

/// The capacity search's answer for the one subject.
pub fn capacity(c: &CapacityDone, objective: &str, dir: &Path) -> Capacity {
    let md = c.dir.join("report.md");
    let o = c.report.outcomes.first();
    Capacity {
        objective: objective.to_string(),
        capacity_rps: o.and_then(|o| o.capacity_rps),
        bracket: o.map_or([None, None], |o| o.bracket),
        answer: o.map_or("no search ran".into(), |o| o.answer.describe()),
        broke_first: o.and_then(|o| o.broke_first.clone()),
        probes: o.map_or(0, |o| o.probes_used),
        report: md.strip_prefix(dir).unwrap_or(&md).display().to_string(),
    }
}

/// The split in a few lines, for the terminal and the Markdown.
pub fn lines(t: &TimeSplit, c: Option<&Capacity>) -> Vec<String> {
    let ms = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} ms"));
    let mut out = vec![format!(
        "order p99 at the rush {} = send lag {} (the generator's) + shop time {} (sender waits \
         {}){}",
        ms(t.order_p99_ms),
        ms(t.send_lag_p99_ms),
        ms(t.shop_p99_ms),
        ms(t.sender_wait_p99_ms),
        if t.generator_bound {
            "; generator-bound: the figures measure the generator, not the shop"
        } else {
            ""
        }
    )];
    let gauges: Vec<String> = t
        .gauges
        .iter()
        .map(|g| {
            format!(
                "{} peak {}{}",
                g.name,
                g.peak.map_or("-".into(), |p| format!("{p:.0}")),
                g.peak_at_s
                    .map_or(String::new(), |s| format!(" at {s:.1}s"))
            )
        })
        .collect();
    if !gauges.is_empty() {
        out.push(format!("watched: {}", gauges.join(", ")));
    }
    if let Some(w) = t.db_row_lock_waits {
        out.push(format!(
            "row-lock waits peak {w:.0}/s{}",
            t.db_deadlocks
                .map_or(String::new(), |d| format!(", deadlocks {d:.0}/s"))
        ));
    }
    if let Some(c) = c {
        out.push(format!(
            "capacity at the objective ({}): {}",
            c.objective, c.answer
        ));
    }
    out
}
