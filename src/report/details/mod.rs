//! What `report.md` and `report.html` both say about a run beyond the headline, written once:
//! the findings and measurements as sentences (the oracle and the clients' evidence in
//! `evidence`, the generator's own figures in `generator`), the per-request tables
//! (`per_request`), goose's cross-check; and about the report as a whole: its metadata and
//! any run that failed.

mod evidence;
mod generator;
mod per_request;

pub use generator::generator_bound;
pub use per_request::{
    requests, retries_line, timing, REQUEST_HEADER, TIMING_HEADER, TIMING_INTRO,
};

use super::catalog::DbRate;
use super::{Report, RunReport};
use crate::oracle::Findings;

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "n/a".into(), |v| v.to_string())
}

fn pct(x: f64) -> String {
    format!("{:.2} %", x * 100.0)
}

/// One sentence about a run; `lead`, when present, opens it and must not be missed (bold in
/// Markdown and HTML).
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub lead: Option<&'static str>,
    pub text: String,
}

impl From<String> for Fact {
    fn from(text: String) -> Self {
        Fact { lead: None, text }
    }
}

impl std::fmt::Display for Fact {
    /// The Markdown form (the text never read as HTML: [`super::markup::md_text`]).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = super::markup::md_text(&self.text);
        match self.lead {
            Some(l) => write!(f, "**{l}**{text}"),
            None => f.write_str(&text),
        }
    }
}

impl Fact {
    /// The HTML form (escaped).
    pub fn html(&self) -> String {
        let text = super::markup::escape(&self.text);
        match self.lead {
            Some(l) => format!("<strong>{}</strong>{text}", super::markup::escape(l)),
            None => text,
        }
    }
}

/// The run's findings and measurements, one sentence each.
pub fn facts(run: &RunReport) -> Vec<Fact> {
    let mut facts = Vec::new();
    if let Some(bound) = generator_bound(run) {
        facts.push(Fact {
            lead: Some("GENERATOR-BOUND: "),
            text: bound,
        });
    }
    facts.extend(stock(run).map(Fact::from));
    facts.extend(evidence::oracle_and_clients(&run.findings));
    let lines = [
        orders(&run.findings),
        after_the_sale(run),
        load(run),
        generator::lines(run),
        retries_line(run).into_iter().collect(),
        evidence::adversarial(&run.findings),
    ];
    facts.extend(lines.into_iter().flatten().map(Fact::from));
    facts.extend(login_facts(run));
    facts
}

/// What ran (and any defect built in), and the stock at the end.
fn stock(run: &RunReport) -> [String; 2] {
    let f = &run.findings;
    let target = match run.defect {
        Some(d) => format!(
            "target: {} (backend {}) WITH DEFECT {d} BUILT IN ({}): a testing aid, not a \
             clean run",
            run.shop.target.as_str(),
            run.backend_name(),
            d.what()
        ),
        None => format!(
            "target: {} (backend {})",
            run.shop.target.as_str(),
            run.backend_name()
        ),
    };
    let stock = format!(
        "sold {} of {}; database stock {}; Redis stock {}; conservation drift {}; Redis drift {}",
        opt(f.sold),
        f.initial_stock,
        opt(f.db_stock),
        opt(f.redis_stock),
        opt(f.conservation_drift),
        opt(f.redis_drift)
    );
    [target, stock]
}

/// The orders: acknowledged and lost, by the attempt that asked for them, by status.
fn orders(f: &Findings) -> Vec<String> {
    vec![
        format!(
            "acknowledged {}; lost acknowledged {} (dead-lettered {}); dead letters {}; duplicate buyers {} (devices {}); status mismatches {}; order ids acknowledged to more than one attempt {}",
            f.acknowledged,
            opt(f.lost_acks),
            opt(f.lost_acks_dead_lettered),
            opt(f.dead_letters),
            opt(f.duplicate_buyers),
            opt(f.duplicate_devices),
            opt(f.status_mismatches),
            opt(f.duplicate_acks)
        ),
        format!(
            "orders by the attempt that asked for them (id, then Idempotency-Key): acknowledged {}; indeterminate and committed {} (of {} indeterminate attempts: timeouts, broken connections, 5xx); refused and committed {}; phantom {}",
            opt(f.orders_acknowledged),
            opt(f.indeterminate_committed),
            f.indeterminate,
            opt(f.refused_committed),
            opt(f.phantom_orders)
        ),
        format!(
            "orders by status: {}; bots hold {} units ({}); people turned away {}",
            f.orders_by_status
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            opt(f.bot_units),
            f.bot_share_of_units.map_or("n/a".into(), pct),
            f.turned_away_buyers
        ),
    ]
}

/// After the sale: the final reconciliation, the shops' spread, how it drained and settled, the
/// oracle's time, the decision and each watched gauge.
fn after_the_sale(run: &RunReport) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(p) = &run.reconcile {
        v.push(format!(
            "final reconciliation ({}): Redis {} vs expected {}, residual {}{}",
            p.source,
            p.redis_stock,
            p.expected_redis_stock,
            p.residual,
            if p.corrected { " (corrected)" } else { "" }
        ));
    }
    if let Some(spread) = &run.shops {
        v.push(spread.line());
    }
    v.push(match &run.drain.settle {
        Some(s) => s.line(run.drain.waited_ms, run.drain.limit_ms),
        None => format!(
            "drained: {} after {} ms (limit {} ms)",
            run.drain.drained, run.drain.waited_ms, run.drain.limit_ms
        ),
    });
    if let Some(s) = run.oracle_s {
        let parts = match (run.oracle_read_s, run.oracle_audit_s) {
            (Some(r), Some(a)) => format!(
                "the server side read, its order rows checked as they streamed, {r:.2} s; the \
                 audit {a:.2} s"
            ),
            _ => "the server side read, its order rows checked as they streamed, and the audit"
                .into(),
        };
        v.push(format!(
            "oracle: {s:.2} s after the sale settled ({parts}; oracle_s)"
        ));
    }
    if let Some(d) = &run.decision {
        v.push(d.line());
    }
    // Each watched gauge: its peak against the rush, whether and when it drained, its source.
    v.extend(run.watch.iter().map(|(name, g)| g.line(name)));
    v
}

/// The load the sale put on the shop: orders served, database and Redis rates.
fn load(run: &RunReport) -> Vec<String> {
    let mut v = vec![format!(
        "orders/s served: {:.1} (order answers over the span from the first to the last)",
        run.order_throughput_rps
    )];
    if let Some(q) = &run.db_qps {
        v.push(format!(
            "DB QPS peak {:.0}, mean {:.0} {} — {}",
            q.peak,
            q.mean,
            DbRate::of(q).counter,
            q.source
        ));
    }
    if let (Some(w), Some(d)) = (run.db_row_lock_waits, run.db_deadlocks) {
        v.push(format!("InnoDB row lock waits {w:.0}, deadlocks {d:.0}"));
    }
    if let Some(q) = &run.redis_ops {
        v.push(format!(
            "Redis ops/s peak {:.0}, mean {:.0} — {}",
            q.peak, q.mean, q.source
        ));
    }
    v
}

/// The buyers' logins (`[target.login]`): one line, and each reason logins failed with a
/// sample body.
fn login_facts(run: &RunReport) -> Vec<Fact> {
    let Some(l) = &run.login else {
        return Vec::new();
    };
    let mut v = vec![Fact::from(format!(
        "{} (kept out of the sale's figures)",
        l.line()
    ))];
    for f in &l.failures {
        v.push(Fact {
            lead: Some("LOGIN FAILED: "),
            text: format!("{} logins: {} (e.g. {:?})", f.count, f.reason, f.sample),
        });
    }
    v
}

/// What the goose cross-check says, if anything.
pub const GOOSE_INTRO: &str = "Goose cross-check (time to first byte from the actual send; bots' extra submissions are not in it):";

/// Goose's own view of each request name, one sentence each.
pub fn goose(run: &RunReport) -> Vec<String> {
    run.goose_crosscheck
        .iter()
        .map(|g| {
            format!(
                "{}: {} requests, mean {:.3} ms, max {:.3} ms",
                g.name, g.count, g.mean_ms, g.max_ms
            )
        })
        .collect()
}

/// The report's metadata as (label, value) pairs.
pub fn metadata(r: &Report) -> Vec<(&'static str, String)> {
    let m = &r.metadata;
    let or_unknown = |s: &str| {
        if s.is_empty() {
            "unknown".to_string()
        } else {
            s.to_string()
        }
    };
    let mut v = vec![
        (
            "oversell",
            format!(
                "{} (git commit {})",
                r.tool_version,
                or_unknown(&m.git_commit)
            ),
        ),
        ("command line", or_unknown(&m.command_line.join(" "))),
        ("started", or_unknown(&m.started_at)),
        ("finished", r.generated_at.clone()),
        (
            "host",
            format!("{} cores, {}", r.machine.cores, r.machine.os),
        ),
    ];
    for s in &m.servers {
        let managed = if s.managed { " (managed)" } else { "" };
        let settings: Vec<String> = s.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let settings = if settings.is_empty() {
            String::new()
        } else {
            format!("; {}", settings.join(", "))
        };
        v.push((
            "server",
            format!(
                "{} {} at {}{managed}{settings}",
                s.service, s.version, s.url
            ),
        ));
    }
    v
}

/// The runs that failed, one sentence each.
pub fn failures(r: &Report) -> Vec<String> {
    r.failed
        .iter()
        .map(|f| {
            format!(
                "{} did not finish: {} (the runs above finished before it; the command stopped here)",
                f.run, f.error
            )
        })
        .collect()
}
