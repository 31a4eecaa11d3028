//! The per-request tables of a report: where each kind of request's time went, its answers
//! and latency, and its retries apart from its first attempts.

use super::pct;
use crate::report::summary::LatencySummary;
use crate::report::RunReport;
use crate::traffic::recorder::{Answer, Kind};
use std::collections::BTreeMap;

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
