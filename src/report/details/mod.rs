//! What `report.md` and `report.html` both say about a run beyond the headline, written once:
//! the findings and measurements as sentences, the per-request latency table, goose's
//! cross-check; and about the report as a whole: its metadata and any run that failed.

use super::catalog::DbRate;
use super::summary::LatencySummary;
use super::{Report, RunReport};
use crate::traffic::recorder::{Answer, Kind};
use std::collections::BTreeMap;

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
    let f = &run.findings;
    let mut v: Vec<String> = vec![
        match run.defect {
            Some(d) => format!(
                "target: {} (backend {}) WITH DEFECT {d} BUILT IN ({}): a testing aid, not a \
                 clean run",
                run.shop.target(),
                run.backend_name(),
                d.what()
            ),
            None => format!(
                "target: {} (backend {})",
                run.shop.target(),
                run.backend_name()
            ),
        },
        format!(
            "sold {} of {}; database stock {}; Redis stock {}; conservation drift {}; Redis drift {}",
            opt(f.sold),
            f.initial_stock,
            opt(f.db_stock),
            opt(f.redis_stock),
            opt(f.conservation_drift),
            opt(f.redis_drift)
        ),
    ];
    v.extend([
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
    ]);
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
        v.push(format!(
            "oracle: {s:.2} s after the sale settled (the server side read, its order rows \
             checked as they streamed, and the audit; oracle_s)"
        ));
    }
    if let Some(d) = &run.decision {
        v.push(d.line());
    }
    // Each watched gauge: its peak against the rush, whether and when it drained, its source.
    v.extend(run.watch.iter().map(|(name, g)| g.line(name)));
    v.push(format!(
        "orders/s served: {:.1} (order answers over the span from the first to the last)",
        run.order_throughput_rps
    ));
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
    let g = &run.generator;
    v.push(format!(
        "load generator: {} buyers through {} goose senders, {:.2} cores used ({:.1} CPU s over {:.1} s), peak RSS {:.0} MiB, set-up {} ms",
        g.buyers, g.users, g.cores_used, g.cpu_seconds, g.wall_seconds, g.peak_rss_mib, g.lead_ms
    ));
    if let Some(l) = &run.send_lag {
        v.push(format!(
            "send lag (intended send to actual send with a free sender: the generator's own lateness) p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} requests",
            l.p50_ms, l.p99_ms, l.max_ms, l.count
        ));
    }
    v.extend(lateness_line(run));
    if let Some(l) = run.sender_wait.as_ref().filter(|l| l.max_ms >= 1.0) {
        let full = match g.senders_full_at_s {
            Some(t) => format!("every one of the {} senders was first held by an unanswered request {t:.1} s after the opening", g.users),
            None => format!("the {} senders were never all held at once", g.users),
        };
        v.push(format!(
            "sender wait (queued while every sender was held by an unanswered request: the shop's time, part of latency, not send lag) p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} requests; {full}",
            l.p50_ms, l.p99_ms, l.max_ms, l.count
        ));
    }
    if let Some(l) = &run.service_time {
        v.push(format!(
            "service time (actual send to the full answer: the shop's and the network's share) p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} requests",
            l.p50_ms, l.p99_ms, l.max_ms, l.count
        ));
    }
    v.extend(retries_line(run));
    v.extend(adversarial(&run.findings));
    let mut facts: Vec<Fact> = v.into_iter().map(Fact::from).collect();
    facts.splice(2..2, oracle_and_clients(f));
    facts.extend(login_facts(run));
    if let Some(bound) = generator_bound(run) {
        facts.insert(
            0,
            Fact {
                lead: Some("GENERATOR-BOUND: "),
                text: bound,
            },
        );
    }
    facts
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

/// Why the run is generator-bound (its lateness could change what it concludes:
/// [`super::lateness`]), or `None`.
pub fn generator_bound(run: &RunReport) -> Option<String> {
    if !run.generator_bound {
        return None;
    }
    if let Some(why) = &run.generator_lateness.bound {
        return Some(why.clone());
    }
    // A report from before the effect was judged: its send lag over the bound it was held to.
    let lag = run.send_lag.as_ref()?;
    Some(format!(
        "send lag p99 {:.3} ms exceeds the {} ms bound it was held to: the generator sent late, so this run's latency measures the generator as much as the shop",
        lag.p99_ms,
        run.max_send_lag_ms.map_or("(unknown)".into(), |b| format!("{b:.3}"))
    ))
}

/// What the generator's lateness added to the order latency, in one line (every run).
fn lateness_line(run: &RunReport) -> Option<String> {
    let l = &run.generator_lateness;
    let p99 = l.figures.iter().find(|f| f.figure == "p99")?;
    Some(format!(
        "generator lateness (latency with and without each request's send lag, HdrHistogram): order latency p99 {:.3} ms, {:.3} ms without send lag (+{:.3} ms); {} of {} requests sent {:.0} ms or more late by the generator; {}",
        p99.with_lag_ms,
        p99.without_lag_ms,
        p99.added_ms(),
        l.late_sends,
        l.sends,
        l.late_after_ms,
        if l.bound.is_some() {
            "it changes what this run concludes (generator-bound)"
        } else {
            "it changes no figure materially (not generator-bound)"
        }
    ))
}

/// The timing table's header: per kind, the three figures of every request.
pub const TIMING_HEADER: [&str; 11] = [
    "request",
    "count",
    "send lag p50",
    "send lag p99",
    "send lag max",
    "sender wait p99",
    "service p50",
    "service p99",
    "service max",
    "latency p50",
    "latency p99",
];

/// Where each kind's time went (ms): send lag (intended → actual send, the generator), sender
/// wait (every sender held: the shop), service time (actual send → full answer, the shop) and
/// latency (intended → full answer, all three).
pub fn timing(run: &RunReport) -> Vec<[String; 11]> {
    let ms = |v: Option<f64>| v.map_or_else(|| "n/a".into(), |v| format!("{v:.3}"));
    Kind::ALL
        .into_iter()
        .filter_map(|kind| {
            let k = run.requests.get(&kind)?;
            let lag = k.send_lag.as_ref();
            let service = k.service_time.as_ref();
            Some([
                kind.as_str().to_string(),
                k.total.to_string(),
                ms(lag.map(|l| l.p50_ms)),
                ms(lag.map(|l| l.p99_ms)),
                ms(lag.map(|l| l.max_ms)),
                ms(k.sender_wait.as_ref().map(|l| l.p99_ms)),
                ms(service.map(|l| l.p50_ms)),
                ms(service.map(|l| l.p99_ms)),
                ms(service.map(|l| l.max_ms)),
                ms(Some(k.latency.p50_ms)),
                ms(Some(k.latency.p99_ms)),
            ])
        })
        .collect()
}

/// What the timing table says.
pub const TIMING_INTRO: &str = "Where the time went (ms): send lag is the generator's lateness (intended to actual send, with a free sender), sender wait the shop's (every sender was held by an unanswered request), service time the shop's (actual send to the full answer), latency all three (intended send to the full answer).";

/// The per-request table's header.
pub const REQUEST_HEADER: [&str; 9] = [
    "request", "count", "outcomes", "mean", "p50", "p90", "p99", "p99.9", "max",
];

/// The per-request table: one row per kind of request (latency in ms from the intended send),
/// each kind's retries in a row of their own after it (`order (retries)`): first attempts and
/// retries are never counted together.
pub fn requests(run: &RunReport) -> Vec<[String; 9]> {
    let row = |name: String, total: u64, outcomes: &BTreeMap<Answer, u64>, l: &LatencySummary| {
        let outcomes = outcomes
            .iter()
            .map(|(a, n)| format!("{} {n}", a.as_str()))
            .collect::<Vec<_>>()
            .join(", ");
        let ms = |v: f64| format!("{v:.3}");
        [
            name,
            total.to_string(),
            outcomes,
            ms(l.mean_ms),
            ms(l.p50_ms),
            ms(l.p90_ms),
            ms(l.p99_ms),
            ms(l.p999_ms),
            ms(l.max_ms),
        ]
    };
    let mut rows = Vec::new();
    for kind in Kind::ALL {
        let Some(k) = run.requests.get(&kind) else {
            continue;
        };
        rows.push(row(
            kind.as_str().to_string(),
            k.total,
            &k.outcomes,
            &k.latency,
        ));
        if let Some(r) = &k.retries {
            rows.push(row(
                format!("{} (retries)", kind.as_str()),
                r.total,
                &r.outcomes,
                &r.latency,
            ));
        }
    }
    rows
}

/// Retries and what the error rate counts, for the terminal (`None`: no retries were sent).
pub fn retries_line(run: &RunReport) -> Option<String> {
    let parts: Vec<String> = Kind::ALL
        .into_iter()
        .filter_map(|kind| {
            let r = run.requests.get(&kind)?.retries.as_ref()?;
            let outcomes = r
                .outcomes
                .iter()
                .map(|(a, n)| format!("{} {n}", a.as_str()))
                .collect::<Vec<_>>()
                .join(", ");
            Some(format!("{} {} ({outcomes})", kind.as_str(), r.total))
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "retries (same request, same Idempotency-Key; apart from first attempts): {}; the error rate {} counts first attempts only ({} order retries, {} of them errors)",
            parts.join("; "),
            pct(run.error_rate),
            run.order_retries,
            run.order_retry_errors
        )
    })
}

/// What the adversarial buyers found: wrong answers and keys that bought twice, with examples.
fn adversarial(f: &crate::oracle::Findings) -> Vec<String> {
    let mut v = Vec::new();
    if let (Some(n), Some(wrong)) = (f.follow_ups.filter(|n| *n > 0), f.wrong_answers) {
        v.push(format!(
            "adversarial buyers: {n} orders followed a script; {wrong} answered as no correct shop answers (wrong answers, clients' records)"
        ));
    }
    for w in f.wrong_answer_examples.iter().take(5) {
        v.push(format!(
            "wrong answer: {} order {} (key {}): {}: {}",
            w.script.as_str(),
            w.order_id.as_deref().unwrap_or("without id"),
            w.key,
            w.sequence,
            w.why.as_str()
        ));
    }
    if let Some(n) = f.duplicate_orders_per_key.filter(|n| *n > 0) {
        v.push(format!(
            "{n} orders beyond the first bought under one Idempotency-Key (duplicate orders per key)"
        ));
    }
    for d in f.duplicate_key_examples.iter().take(5) {
        v.push(format!(
            "key {} bought {} ({})",
            d.key,
            d.order_ids.join(", "),
            d.seen_in
        ));
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

/// Which oracle judged, what it can and cannot see, and the clients' own evidence beside it.
/// `**…**` marks what a reader must not miss (bold in Markdown and HTML).
fn oracle_and_clients(f: &crate::oracle::Findings) -> Vec<Fact> {
    let mut v: Vec<Fact> = vec![format!("oracle: {}", f.truth_source).into()];
    if !f.oracle_sees.is_empty() {
        v.push(format!("the oracle sees: {}", f.oracle_sees).into());
        v.push(format!("the oracle cannot see: {}", f.oracle_blind_to).into());
    }
    if let Some(w) = &f.oracle_warning {
        v.push(Fact {
            lead: Some("warning: "),
            text: w.clone(),
        });
    }
    if let Some(c) = f.client_oversell {
        v.push(format!(
            "client evidence: {} acknowledged, {} restocked as the run saw it, {} units held for {}: client-observed oversell {c}",
            f.acknowledged,
            opt(f.restocks_seen),
            f.client_net_acks,
            f.initial_stock
        ).into());
    }
    if let (Some(held), Some(p)) = (f.client_peak_held, f.client_peak_oversell) {
        let held_as = match f.payment_window_s {
            Some(w) if w >= crate::oracle::NEVER_RELEASED_S => "from each acknowledgement until its cancel was sent: the shop has no payment step, so no order is released unpaid".into(),
            Some(w) => format!("from each acknowledgement until its cancel was sent, or {w} s after an unpaid order's send"),
            None => "paid orders only, from the payment's answer until a cancel was sent: no payment window declared".into(),
        };
        let text = format!(
            "at most {held} units provably held at once ({held_as}) for {}: client-observed peak oversell {p}",
            f.initial_stock
        );
        v.push(if p > 0 {
            Fact {
                lead: Some("client-observed peak oversell: "),
                text,
            }
        } else {
            format!("client-observed peak: {text}").into()
        });
    }
    if let (Some(b), Some(d)) = (f.client_duplicate_buyers, f.client_duplicate_devices) {
        let text = format!(
            "{b} users and {d} devices held more distinct orders at once than the purchase limit (clients' records)"
        );
        v.push(if b + d > 0 {
            Fact {
                lead: Some("client-observed duplicate buyers: "),
                text,
            }
        } else {
            format!("client-observed duplicates: {text}").into()
        });
    }
    if let (Some(n), Some(s)) = (f.stock_samples, f.stock_peak_oversell) {
        let text = format!(
            "{n} readings of the stock during the sale (lowest {}, highest {}); held + stock above the initial {}: stock-side peak oversell {s}",
            opt(f.min_stock_seen),
            opt(f.max_stock_seen),
            f.initial_stock
        );
        v.push(if s > 0 {
            Fact {
                lead: Some("stock-side peak oversell: "),
                text,
            }
        } else {
            format!("stock sampled: {text}").into()
        });
    }
    if let Some(n) = f.shop_released_acks.filter(|n| *n > 0) {
        v.push(format!(
            "the shop cancelled {n} acknowledged orders itself: its rows show them cancelled or expired and no client cancelled them (not lost orders)"
        ).into());
    }
    match (f.oracle_disagreement, f.sold) {
        (Some(d), Some(sold)) if d > 0 => v.push(Fact {
            lead: Some("the oracle disagrees with the clients"),
            text: format!(
                ": it counts {sold} sold, clients were told {}: at least {d} acknowledged orders are missing from its count (a lower bound on lost acknowledged orders)",
                f.client_net_acks
            ),
        }),
        (Some(_), Some(_)) => v.push(
            String::from("the oracle agrees with the clients (it counts at least what they were told)")
                .into(),
        ),
        _ => {}
    }
    if f.unclassified > 0 {
        v.push(Fact {
            lead: Some("answers no rule of [target] classified: "),
            text: format!(
                "{} of {} ({}, bound {}): {}",
                f.unclassified,
                f.answers,
                f.unclassified_share.map_or("n/a".into(), pct),
                f.max_unclassified.map_or("n/a".into(), pct),
                f.mapping_advice.join("; ")
            ),
        });
    }
    for n in &f.client_notes {
        v.push(format!("note: {n}").into());
    }
    v
}
