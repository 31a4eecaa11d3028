//! Turning measurements into the report's figures.

use super::{Drain, KindReport, RunReport, Shop, Timeline};
use crate::metric::SeriesName;
use crate::model::ReconcilePass as Pass;
use crate::oracle::Findings;
use crate::probe::Series;
use crate::traffic::attack::{GeneratorStats, GooseCrossCheck};
use crate::traffic::recorder::{Answer, Kind, Measurements};
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Latency figures in milliseconds with microsecond precision.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

fn ms(us: f64) -> f64 {
    (us).round() / 1000.0
}

impl LatencySummary {
    /// From a microsecond histogram.
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return LatencySummary {
                count: 0,
                mean_ms: 0.0,
                p50_ms: 0.0,
                p90_ms: 0.0,
                p99_ms: 0.0,
                p999_ms: 0.0,
                max_ms: 0.0,
            };
        }
        LatencySummary {
            count: h.len(),
            mean_ms: ms(h.mean()),
            p50_ms: ms(h.value_at_quantile(0.5) as f64),
            p90_ms: ms(h.value_at_quantile(0.9) as f64),
            p99_ms: ms(h.value_at_quantile(0.99) as f64),
            p999_ms: ms(h.value_at_quantile(0.999) as f64),
            max_ms: ms(h.max() as f64),
        }
    }
}

/// Asynchronous orders: order attempts the shop answered `pending`, how many it then decided
/// (found by polling, `[target.poll]`) and how many it never did, and the time from acceptance
/// (the pending answer) to the decision (HdrHistogram, µs).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DecisionSummary {
    pub pending: u64,
    pub decided: u64,
    /// Not decided within `target.poll.max_wait_ms`: indeterminate.
    pub undecided: u64,
    /// Pending answers without the order id the poll request needs (never polled, undecided).
    #[serde(default)]
    pub without_id: u64,
    /// Acceptance to decision, decided orders only.
    pub latency: LatencySummary,
}

impl DecisionSummary {
    /// From the recorder's decisions; `None` when no order was pending.
    pub fn of(d: &crate::traffic::recorder::Decisions) -> Option<Self> {
        (d.pending > 0).then(|| DecisionSummary {
            pending: d.pending,
            decided: d.decided,
            undecided: d.undecided,
            without_id: d.without_id,
            latency: d.latency.as_ref().map_or_else(
                || LatencySummary::of(&Histogram::new(3).expect("valid")),
                LatencySummary::of,
            ),
        })
    }

    /// `12 pending, 11 decided, 1 undecided; acceptance to decision p50 ..., p99 ..., max ...`.
    pub fn line(&self) -> String {
        let l = &self.latency;
        let unpolled = if self.without_id > 0 {
            format!(
                " ({} of them carried no order id to poll with: check target.order_id_field)",
                self.without_id
            )
        } else {
            String::new()
        };
        format!(
            "asynchronous orders: {} answered pending, {} decided, {} undecided (indeterminate){unpolled}; acceptance to decision p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (oversell HdrHistogram, found by polling)",
            self.pending, self.decided, self.undecided, l.p50_ms, l.p99_ms, l.max_ms
        )
    }
}

/// Peak and mean of a sampled series, with its source.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricSummary {
    pub peak: f64,
    pub mean: f64,
    pub unit: String,
    pub source: String,
}

impl MetricSummary {
    fn of(s: &Series, until: f64) -> Self {
        MetricSummary {
            peak: (s.peak() * 10.0).round() / 10.0,
            mean: (s.mean_until(until) * 10.0).round() / 10.0,
            unit: s.unit.clone(),
            source: s.source.clone(),
        }
    }
}

/// Base64 of a histogram in HdrHistogram's V2 deflate format.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    let mut buf = Vec::new();
    if V2DeflateSerializer::new().serialize(h, &mut buf).is_err() {
        return String::new();
    }
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// Decodes a histogram written by [`encode_histogram`].
pub fn decode_histogram(b64: &str) -> anyhow::Result<Histogram<u64>> {
    use base64::Engine as _;
    use hdrhistogram::serialization::Deserializer;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64.trim())?;
    Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| anyhow::anyhow!("not an HdrHistogram V2 histogram: {e:?}"))
}

/// Everything a run produced, before it becomes a [`RunReport`].
pub struct RunInputs {
    pub shop: Shop,
    pub scenario: String,
    pub buyers: u32,
    pub findings: Findings,
    pub measurements: Measurements,
    pub series: Vec<Series>,
    pub generator: GeneratorStats,
    pub drain: Drain,
    pub reconcile: Option<Pass>,
    pub goose: Vec<GooseCrossCheck>,
    /// The send-lag p99 bound the user declared, if any.
    pub max_send_lag_ms: Option<f64>,
    /// A request sent this long after its intended send was sent late (the scenario's).
    pub late_after: std::time::Duration,
}

/// Order answers per second over the real span of the answers (first to last). A span too
/// short to measure (one answer, or all in the same millisecond) falls back to the whole
/// seconds the run was active.
fn served_rate(answers: u64, span: Option<std::time::Duration>, active_s: f64) -> f64 {
    match span {
        Some(s) if answers > 1 && s.as_secs_f64() >= 0.001 => answers as f64 / s.as_secs_f64(),
        _ => answers as f64 / active_s.max(1.0),
    }
}

/// The retries of one kind, apart from its first attempts (`None`: none were sent).
fn retries(m: &crate::traffic::recorder::Measurements, kind: Kind) -> Option<super::RetriesReport> {
    let all = m.retries_by_kind(kind);
    (!all.is_empty()).then(|| super::RetriesReport {
        total: all.len(),
        outcomes: m.retry_counts(kind),
        latency: LatencySummary::of(&all),
    })
}

/// How many of `counts` were errors.
fn errors_in(counts: &BTreeMap<Answer, u64>) -> u64 {
    counts
        .iter()
        .filter(|(a, _)| a.is_error())
        .map(|(_, n)| n)
        .sum()
}

/// Every kind of request sent: its counts and latencies, and its HdrHistogram encoded.
fn by_kind(m: &Measurements) -> (BTreeMap<Kind, KindReport>, BTreeMap<Kind, String>) {
    let mut requests = BTreeMap::new();
    let mut histograms = BTreeMap::new();
    for kind in Kind::ALL {
        let all = m.by_kind(kind);
        if all.is_empty() {
            continue;
        }
        let by_outcome = m
            .histograms
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, a), h)| (*a, LatencySummary::of(h)))
            .collect();
        histograms.insert(kind, encode_histogram(&all));
        requests.insert(
            kind,
            KindReport {
                total: all.len(),
                outcomes: m.counts(kind),
                latency: LatencySummary::of(&all),
                send_lag: m.send_lag.get(&kind).map(LatencySummary::of),
                sender_wait: m.sender_wait.get(&kind).map(LatencySummary::of),
                service_time: m.service.get(&kind).map(LatencySummary::of),
                shop_latency: m.shop_latency.get(&kind).map(LatencySummary::of),
                latency_by_outcome: by_outcome,
                retries: retries(m, kind),
            },
        );
    }
    (requests, histograms)
}

/// Second by second: requests, order answers by outcome, order latency p99.
fn timeline(m: &Measurements) -> Timeline {
    let mut timeline = Timeline {
        seconds: (0..m.timeline.len() as u64).collect(),
        ..Timeline::default()
    };
    for (s, bucket) in m.timeline.iter().enumerate() {
        timeline.requests.push(bucket.values().sum());
        for a in Answer::ALL {
            let n = bucket.get(&(Kind::Order, a)).copied().unwrap_or(0);
            let v = timeline.orders.entry(a).or_default();
            v.resize(s, 0);
            v.push(n);
        }
    }
    timeline.orders.retain(|_, v| v.iter().any(|n| *n > 0));
    timeline.order_p99_ms = m.order_intervals.p99_ms_per_second(m.timeline.len());
    timeline
}

/// Whether the generator sent late, judged from the send lag and the order latencies (ours
/// against the shop's own, where it reports them).
fn lateness(input: &RunInputs, order: Option<&KindReport>) -> super::lateness::Lateness {
    let four = |l: &LatencySummary| [l.mean_ms, l.p50_ms, l.p90_ms, l.p99_ms];
    let figures = match order.map(|k| (&k.latency, k.shop_latency.as_ref())) {
        Some((l, Some(s))) if l.count > 0 => super::lateness::figures(four(l), four(s)),
        _ => Vec::new(),
    };
    super::lateness::Lateness::judge(
        &input.measurements.send_lag_all(),
        input.late_after,
        figures,
        input.max_send_lag_ms,
    )
}

/// Builds a run's report section.
pub fn build(input: RunInputs) -> RunReport {
    let m = &input.measurements;
    let (requests, histograms) = by_kind(m);
    let order_counts = m.counts(Kind::Order);
    let attempts: u64 = order_counts.values().sum();
    let errors = errors_in(&order_counts);
    let duration = m.timeline.len().max(1) as f64;
    let total: u64 = requests.values().map(|k: &KindReport| k.total).sum();
    let timeline = timeline(m);
    let find = |name: &str| input.series.iter().find(|s| s.name == name);
    let summary = |name: &str| find(name).map(|s| MetricSummary::of(s, duration));
    let total_of =
        |name: &str| find(name).map(|s| s.points.iter().map(|p| p.1).sum::<f64>().round());
    let send_lag = Some(m.send_lag_all())
        .filter(|h| !h.is_empty())
        .map(|h| LatencySummary::of(&h));
    let lateness = lateness(&input, requests.get(&Kind::Order));
    RunReport {
        shop: input.shop,
        repeat: None,
        defect: None,
        login: None,
        scenario: input.scenario,
        buyers: input.buyers,
        findings: input.findings,
        requests,
        order_attempts: attempts,
        order_errors: errors,
        order_retries: m.retry_counts(Kind::Order).values().sum(),
        order_retry_errors: errors_in(&m.retry_counts(Kind::Order)),
        error_rate: if attempts > 0 {
            errors as f64 / attempts as f64
        } else {
            0.0
        },
        throughput_rps: total as f64 / duration,
        order_throughput_rps: served_rate(attempts, m.order_answer_span, duration),
        time_to_sell_out_s: m.first_sold_out_ms.map(|ms| ms as f64 / 1000.0),
        duration_s: duration,
        send_lag,
        sender_wait: Some(m.sender_wait_all())
            .filter(|h| !h.is_empty())
            .map(|h| LatencySummary::of(&h)),
        service_time: Some(m.service_all())
            .filter(|h| !h.is_empty())
            .map(|h| LatencySummary::of(&h)),
        max_send_lag_ms: input.max_send_lag_ms,
        generator_bound: lateness.bound.is_some(),
        generator_lateness: lateness,
        db_qps: summary(SeriesName::DbQps.name()),
        db_tps: summary(SeriesName::DbTps.name()),
        redis_ops: summary(SeriesName::RedisOps.name()),
        db_row_lock_waits: total_of(SeriesName::DbRowLockWaits.name()),
        db_deadlocks: total_of(SeriesName::DbDeadlocks.name()),
        generator: input.generator,
        drain: input.drain,
        oracle_s: None,
        oracle_read_s: None,
        oracle_audit_s: None,
        reconcile: input.reconcile,
        shops: None,
        faults: Vec::new(),
        decision: DecisionSummary::of(&m.decisions),
        goose_crosscheck: input.goose,
        timeline,
        series: input.series,
        watch: BTreeMap::new(),
        histograms,
        measurements: Some(Arc::new(input.measurements)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_reported_in_ms_with_microsecond_precision() {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in [1_234u64, 2_000, 3_000] {
            h.record(v).unwrap();
        }
        let s = LatencySummary::of(&h);
        assert_eq!(s.count, 3);
        assert_eq!(s.p50_ms, 2.0);
        assert!((s.max_ms - 3.0).abs() < 0.01);
        assert!(s.mean_ms > 2.0 && s.mean_ms < 2.1);
    }

    #[test]
    fn the_served_rate_counts_the_real_span_of_answers() {
        use std::time::Duration;
        // 300 answers over 2 s are 150/s, whichever whole second the last one fell in.
        assert_eq!(served_rate(300, Some(Duration::from_secs(2)), 3.0), 150.0);
        assert_eq!(served_rate(1, Some(Duration::ZERO), 1.0), 1.0);
        assert_eq!(served_rate(0, None, 1.0), 0.0);
    }

    #[test]
    fn histograms_round_trip_through_base64() {
        use base64::Engine as _;
        use hdrhistogram::serialization::Deserializer;
        let mut h = Histogram::<u64>::new(3).unwrap();
        h.record(4242).unwrap();
        let b = base64::engine::general_purpose::STANDARD
            .decode(encode_histogram(&h))
            .unwrap();
        let back: Histogram<u64> = Deserializer::new().deserialize(&mut &b[..]).unwrap();
        assert_eq!(back.max(), h.max());
        assert_eq!(
            decode_histogram(&encode_histogram(&h)).unwrap().max(),
            h.max()
        );
        assert!(decode_histogram("not base64!").is_err());
    }
}
