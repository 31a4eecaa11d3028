//! How each metric of the catalog ([`crate::metric`]) is read from a run's report (or why the
//! run has no value for it), and its unit in that run (a database rate's unit depends on the
//! counter the probe read); where a figure comes from is its spec's. `gate`, `diff`, the tables
//! and the charts all read metrics through here.

use super::summary::{LatencySummary, MetricSummary};
use super::RunReport;
use crate::metric::{Metric, Unit};
use crate::oracle::Findings;

/// Why a run has no value for a metric.
pub type Unmeasured = String;

impl Metric {
    /// A latency metric read with each request's send lag taken out: what the figure would
    /// be had the generator sent every request on time (`None`: not a latency metric, or a
    /// report that predates the figure).
    pub fn read_without_send_lag(self, run: &RunReport) -> Option<f64> {
        let s = run
            .requests
            .get(&crate::traffic::recorder::Kind::Order)?
            .shop_latency
            .as_ref()
            .filter(|l| l.count > 0)?;
        match self {
            Metric::MeanMs => Some(s.mean_ms),
            Metric::P50Ms => Some(s.p50_ms),
            Metric::P99Ms => Some(s.p99_ms),
            Metric::P999Ms => Some(s.p999_ms),
            _ => None,
        }
    }

    /// This metric's value in `run`, or why the run could not measure it.
    pub fn read(self, run: &RunReport) -> Result<f64, Unmeasured> {
        let r = Reading {
            run,
            f: &run.findings,
        };
        let f = r.f;
        match self {
            Metric::Oversell => r.oracle(f.oversell),
            Metric::OversoldAtEnd => r.oracle(f.oversold_at_end.or(f.oversell)),
            Metric::PeakOversell => r.peak_oversell(),
            Metric::DuplicateAcks => f.duplicate_acks.map(|v| v as f64).ok_or_else(|| {
                "the shop gives no order ids (target.order_id_field), or this report predates the figure"
                    .to_string()
            }),
            Metric::DuplicateOrdersPerKey => f.duplicate_orders_per_key.map(|v| v as f64).ok_or_else(|| {
                "the order attempts carried no Idempotency-Key (target.idempotency_header), or this report predates the figure"
                    .to_string()
            }),
            Metric::WrongAnswers => newer(f.wrong_answers),
            Metric::PhantomOrders => r.phantom_orders(),
            Metric::IndeterminateCommitted => r.oracle(f.indeterminate_committed),
            Metric::RefusedCommitted => r.oracle(f.refused_committed),
            Metric::DuplicateDevices => r.oracle(f.duplicate_devices),
            Metric::StatusMismatches => r.oracle(f.status_mismatches),
            Metric::ConservationDrift => r.conservation_drift(),
            Metric::RedisDrift => size(f.redis_drift, redis_only("Redis stock")),
            Metric::RestockMismatch => {
                size(f.restock_mismatch, redis_only("the restock idempotency set"))
            }
            Metric::ReconcileResidual => size(f.reconcile_residual, redis_only("reconciliation")),
            Metric::StockBelowZero => r.stock_below_zero(),
            Metric::StockAboveInitial => r.stock_above_initial(),
            Metric::NotSettled => r.not_settled(),
            Metric::NothingSold => Ok(if f.nothing_sold { 1.0 } else { 0.0 }),
            Metric::TurnedAwayBuyers => Ok(f.turned_away_buyers as f64),
            Metric::ClientOversell => newer(f.client_oversell),
            Metric::ClientPeakOversell => newer(f.client_peak_oversell),
            Metric::ClientDuplicateBuyers => newer(f.client_duplicate_buyers),
            Metric::ClientDuplicateDevices => newer(f.client_duplicate_devices),
            Metric::StockPeakOversell => r.stock_peak_oversell(),
            Metric::OracleDisagreement => r.oracle(f.oracle_disagreement),
            Metric::Unclassified => r.unclassified(),
            // No login section: no buyer logged in, so none failed.
            Metric::LoginFailures => Ok(run.login.as_ref().map_or(0.0, |l| l.failure_share())),
            Metric::LostAcks => r.oracle(f.lost_acks),
            Metric::DeadLetters => f
                .dead_letters
                .map(|v| v as f64)
                .ok_or_else(|| "dead letters exist only for redis-lua (its stream)".to_string()),
            Metric::DuplicateBuyers => r.oracle(f.duplicate_buyers),
            Metric::Undersell => newer(f.undersell),
            Metric::ErrorRate => r.orders(run.error_rate),
            Metric::MeanMs => r.latency(|l| l.mean_ms),
            Metric::P50Ms => r.latency(|l| l.p50_ms),
            Metric::P99Ms => r.latency(|l| l.p99_ms),
            Metric::P999Ms => r.latency(|l| l.p999_ms),
            Metric::ServiceP99Ms => r.service_p99(),
            Metric::SendLagP99Ms => r.send_lag_p99(),
            Metric::LateSends => r.late_sends(),
            Metric::DbQpsPeak => run
                .db_qps
                .as_ref()
                .map(|q| q.peak)
                .ok_or_else(|| "the database's counters were not sampled".to_string()),
            Metric::Throughput => r.orders(run.order_throughput_rps),
            Metric::CapacityRps => Err(
                "a capacity is found by `oversell capacity`, not by one run; `gate --threshold \
                 capacity_rps=R` runs the scenario at R buyers/s and checks its other thresholds \
                 there"
                    .to_string(),
            ),
            Metric::WatchMax | Metric::WatchDrainedWithinS => Err(
                "a watched gauge's figure is read by the gauge's name (watch.<name>.max)"
                    .to_string(),
            ),
        }
    }

    /// Where the figure comes from (its [`crate::metric::Spec::source`]).
    pub fn source(self) -> &'static str {
        self.spec().source
    }

    /// The unit of this metric in `run`, when it has one of its own (a database rate).
    pub fn unit_in(self, run: &RunReport) -> Option<DbRate> {
        match self.spec().unit {
            Unit::DbRate => run.db_qps.as_ref().map(DbRate::of),
            _ => None,
        }
    }

    /// A value of this metric in `run` for people, with its unit (`n/a` when not measured).
    pub fn show(self, run: &RunReport) -> String {
        match (self.read(run), self.unit_in(run)) {
            (Ok(v), Some(u)) => format!("{} {}", self.number(v), u.counter),
            (Ok(v), None) => self.format(v),
            (Err(_), _) => "n/a".into(),
        }
    }
}

/// A figure the findings hold as a whole number (a count, or units of stock).
trait Whole: Copy {
    fn figure(self) -> f64;
}

impl Whole for u64 {
    fn figure(self) -> f64 {
        self as f64
    }
}

impl Whole for i64 {
    fn figure(self) -> f64 {
        self as f64
    }
}

/// A figure the report gained in a later version: missing from an older report.
fn newer(v: Option<impl Whole>) -> Result<f64, Unmeasured> {
    v.map(Whole::figure).ok_or_else(predates)
}

/// Why a report written before a figure existed has none.
fn predates() -> Unmeasured {
    "this report predates the figure".to_string()
}

/// Why a figure of the redis-lua pipeline is missing from another strategy's run.
fn redis_only(what: &str) -> Unmeasured {
    format!("{what} exists only for redis-lua")
}

/// Drifts and residuals are signed (leaked or phantom units): limited by their size.
fn size(v: Option<i64>, why: Unmeasured) -> Result<f64, Unmeasured> {
    v.map(|v| v.abs() as f64).ok_or(why)
}

/// One run as [`Metric::read`] reads it: the figures that take more than a field, and why a
/// figure is missing.
struct Reading<'a> {
    run: &'a RunReport,
    f: &'a Findings,
}

impl Reading<'_> {
    /// Why an oracle's figure is missing: no oracle, or one that gives totals only.
    fn oracle_gap(&self) -> Unmeasured {
        if self.f.verified {
            "the oracle reports totals only, not order rows (add --orders-query to read them)"
                .to_string()
        } else {
            "no server-side oracle (pass --oracle-sql or --oracle-http, or set [target.oracle])"
                .to_string()
        }
    }

    /// An oracle's figure: a count, or units of stock.
    fn oracle(&self, v: Option<impl Whole>) -> Result<f64, Unmeasured> {
        v.map(Whole::figure).ok_or_else(|| self.oracle_gap())
    }

    /// A figure of the order latency.
    fn latency(&self, q: fn(&LatencySummary) -> f64) -> Result<f64, Unmeasured> {
        self.run
            .order_latency()
            .filter(|l| l.count > 0)
            .map(q)
            .ok_or_else(|| "no order requests were answered or timed out".to_string())
    }

    /// A figure over the order attempts.
    fn orders(&self, v: f64) -> Result<f64, Unmeasured> {
        if self.run.order_attempts == 0 {
            Err("no order attempts".to_string())
        } else {
            Ok(v)
        }
    }

    fn peak_oversell(&self) -> Result<f64, Unmeasured> {
        self.f.peak_oversell.map(|v| v as f64).ok_or_else(|| {
            if self.f.orders_acknowledged.is_some() {
                "the shop's order rows carry no timestamps: units held at each moment cannot be replayed".to_string()
            } else {
                self.oracle_gap()
            }
        })
    }

    fn phantom_orders(&self) -> Result<f64, Unmeasured> {
        self.f.phantom_orders.map(|v| v as f64).ok_or_else(|| {
            if self.f.orders_acknowledged.is_some() {
                "order rows no id or key of this run names carry user ids that are not this \
                 run's buyers': who asked for them cannot be told"
                    .to_string()
            } else {
                self.oracle_gap()
            }
        })
    }

    fn conservation_drift(&self) -> Result<f64, Unmeasured> {
        let why = if self.f.verified {
            "the oracle gives no stock".to_string()
        } else {
            self.oracle_gap()
        };
        size(self.f.conservation_drift, why)
    }

    fn stock_below_zero(&self) -> Result<f64, Unmeasured> {
        let f = self.f;
        let lowest = [f.db_stock, f.min_stock_seen].into_iter().flatten().min();
        lowest
            .map(|s| (-s).max(0) as f64)
            .ok_or_else(|| "the database stock was neither read nor sampled".to_string())
    }

    fn stock_above_initial(&self) -> Result<f64, Unmeasured> {
        self.f
            .max_stock_seen
            .map(|s| (s - self.f.initial_stock).max(0) as f64)
            .ok_or_else(|| {
                "the stock was not sampled during the run (a foreign shop's oracle gives no \
                 stock: pass --stock-query or --stock-field)"
                    .to_string()
            })
    }

    fn stock_peak_oversell(&self) -> Result<f64, Unmeasured> {
        let f = self.f;
        f.stock_peak_oversell.map(|v| v as f64).ok_or_else(|| {
            if f.stock_samples > Some(0) {
                format!(
                    "the stock was sampled {} times, never while the shop's backlog was known to \
                     be empty: an asynchronous shop's stock lags what it acknowledged, so no \
                     sample is held against the clients' records; declare the backlog \
                     (--backlog-query, or [target.settle] backlog = an endpoint, \
                     \"watch.NAME\" or \"none\" for a shop that writes before it acknowledges)",
                    f.stock_samples.unwrap_or(0)
                )
            } else {
                "the stock was not sampled during the sale (a foreign shop's oracle gives no \
                 stock: pass --stock-query or --stock-field; the reference shop's order rows \
                 give peak_oversell instead)"
                    .to_string()
            }
        })
    }

    fn not_settled(&self) -> Result<f64, Unmeasured> {
        let drain = &self.run.drain;
        match &drain.settle {
            Some(s) if s.state == super::SettleState::Unknown => Err(
                "could not tell whether the shop settled: no oracle and no backlog signal (--backlog-query or [target.settle] backlog)".to_string(),
            ),
            _ => Ok(if drain.drained { 0.0 } else { 1.0 }),
        }
    }

    fn unclassified(&self) -> Result<f64, Unmeasured> {
        let f = self.f;
        f.unclassified_share.ok_or_else(|| {
            if f.answers == 0 && f.max_unclassified.is_some() {
                "no answers were recorded".to_string()
            } else {
                predates()
            }
        })
    }

    fn service_p99(&self) -> Result<f64, Unmeasured> {
        self.run
            .requests
            .get(&crate::traffic::recorder::Kind::Order)
            .and_then(|k| k.service_time.as_ref())
            .filter(|l| l.count > 0)
            .map(|l| l.p99_ms)
            .ok_or_else(|| "no order was sent, or this report predates service time".to_string())
    }

    fn send_lag_p99(&self) -> Result<f64, Unmeasured> {
        self.run
            .send_lag
            .as_ref()
            .filter(|l| l.count > 0)
            .map(|l| l.p99_ms)
            .ok_or_else(|| "no request was sent, or this report predates send lag".to_string())
    }

    fn late_sends(&self) -> Result<f64, Unmeasured> {
        let l = &self.run.generator_lateness;
        (l.sends > 0)
            .then(|| l.late_sends as f64 / l.sends as f64)
            .ok_or_else(|| "no request was sent, or this report predates the figure".to_string())
    }
}

/// Which database counter a rate counts: the server and the counter per second.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct DbRate {
    /// `PostgreSQL` or `MySQL` (as the probe's source names it).
    pub server: String,
    /// `transactions/s`, `statements/s` (pg_stat_statements) or `Questions/s`.
    pub counter: String,
}

impl DbRate {
    /// The counter behind a sampled database rate.
    pub fn of(q: &MetricSummary) -> Self {
        DbRate::new(&q.unit, &q.source)
    }

    /// The counter behind a rate with this unit and source (as the probe wrote them).
    pub fn new(unit: &str, source: &str) -> Self {
        let server = source.split_whitespace().next().unwrap_or("database");
        let counter = if source.contains("Questions") {
            "Questions/s"
        } else {
            unit
        };
        DbRate {
            server: server.to_string(),
            counter: counter.to_string(),
        }
    }

    /// `PostgreSQL transactions/s`.
    pub fn label(&self) -> String {
        format!("{} {}", self.server, self.counter)
    }
}
