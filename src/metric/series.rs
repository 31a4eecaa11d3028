//! The one table of the probes' series: each series' name (in `report.json`, the CSV, the
//! charts), the unit it is sampled in, and the gauge `--metrics-listen` publishes it as.

use crate::telemetry::shop_metrics;

/// A series the probes sample every second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeriesName {
    DbQps,
    DbTps,
    RedisOps,
    DbStock,
    RedisStock,
    PredeductSuccessRate,
    PredeductAttempts,
    Restocks,
    ReconcileResidual,
    StreamLag,
    StreamPending,
    PoolInUse,
    PoolWaiting,
    DbRowLockWaits,
    DbDeadlocks,
    /// optimistic: compare-and-swap updates that lost to a concurrent one and were retried,
    /// per second (the post-mortem's retry storm).
    CasRetries,
    /// Seconds the shop's callers waited for a pooled connection, per second (timed-out waits
    /// included): a drained pool.
    PoolWait,
    DbSold,
}

impl SeriesName {
    /// Every series, in the CSV's column order (`db_sold` last: it is no CSV column).
    pub const ALL: [SeriesName; 18] = [
        SeriesName::DbQps,
        SeriesName::DbTps,
        SeriesName::RedisOps,
        SeriesName::DbStock,
        SeriesName::RedisStock,
        SeriesName::PredeductSuccessRate,
        SeriesName::PredeductAttempts,
        SeriesName::Restocks,
        SeriesName::ReconcileResidual,
        SeriesName::StreamLag,
        SeriesName::StreamPending,
        SeriesName::PoolInUse,
        SeriesName::PoolWaiting,
        SeriesName::DbRowLockWaits,
        SeriesName::DbDeadlocks,
        SeriesName::CasRetries,
        SeriesName::PoolWait,
        SeriesName::DbSold,
    ];

    /// Its name: `db_qps`.
    pub const fn name(self) -> &'static str {
        match self {
            SeriesName::DbQps => "db_qps",
            SeriesName::DbTps => "db_tps",
            SeriesName::RedisOps => "redis_ops",
            SeriesName::DbStock => "db_stock",
            SeriesName::RedisStock => "redis_stock",
            SeriesName::PredeductSuccessRate => "prededuct_success_rate",
            SeriesName::PredeductAttempts => "prededuct_attempts",
            SeriesName::Restocks => "restocks",
            SeriesName::ReconcileResidual => "reconcile_residual",
            SeriesName::StreamLag => "stream_lag",
            SeriesName::StreamPending => "stream_pending",
            SeriesName::PoolInUse => "pool_in_use",
            SeriesName::PoolWaiting => "pool_waiting",
            SeriesName::DbRowLockWaits => "db_row_lock_waits",
            SeriesName::DbDeadlocks => "db_deadlocks",
            SeriesName::CasRetries => "cas_retries",
            SeriesName::PoolWait => "pool_wait",
            SeriesName::DbSold => "db_sold",
        }
    }

    /// The unit it is sampled in (`db_qps` is `transactions/s` instead on a PostgreSQL
    /// without pg_stat_statements: the probe says so where it samples).
    pub const fn unit(self) -> &'static str {
        match self {
            SeriesName::DbQps => "statements/s",
            SeriesName::DbTps => "transactions/s",
            SeriesName::RedisOps => "ops/s",
            SeriesName::DbStock | SeriesName::RedisStock | SeriesName::DbSold => "units",
            SeriesName::PredeductSuccessRate => "share",
            SeriesName::PredeductAttempts | SeriesName::Restocks | SeriesName::CasRetries => "1/s",
            SeriesName::PoolWait => "s/s",
            SeriesName::ReconcileResidual
            | SeriesName::StreamLag
            | SeriesName::StreamPending
            | SeriesName::PoolInUse
            | SeriesName::PoolWaiting => "count",
            SeriesName::DbRowLockWaits => "waits/s",
            SeriesName::DbDeadlocks => "deadlocks/s",
        }
    }

    /// The shop's own metric it is read from (`shop /metrics`), for the scraped series.
    pub const fn shop_metric(self) -> Option<&'static str> {
        match self {
            SeriesName::PredeductSuccessRate | SeriesName::PredeductAttempts => {
                Some(shop_metrics::PREDEDUCT)
            }
            SeriesName::Restocks => Some(shop_metrics::RESTOCKS),
            SeriesName::CasRetries => Some(shop_metrics::OPTIMISTIC_CONFLICTS),
            SeriesName::PoolWait => Some(shop_metrics::DB_POOL_ACQUIRE_SUM),
            SeriesName::ReconcileResidual => Some(shop_metrics::RECONCILE_RESIDUAL),
            SeriesName::StreamLag => Some(shop_metrics::STREAM_LAG),
            SeriesName::StreamPending => Some(shop_metrics::STREAM_PENDING),
            SeriesName::PoolInUse => Some(shop_metrics::DB_POOL_IN_USE),
            SeriesName::PoolWaiting => Some(shop_metrics::DB_POOL_WAITING),
            _ => None,
        }
    }

    /// The gauge `--metrics-listen` publishes it as, if it is published.
    pub const fn prometheus(self) -> Option<&'static str> {
        match self {
            SeriesName::DbStock => Some("oversell_harness_db_stock"),
            SeriesName::DbSold => Some("oversell_harness_db_sold"),
            SeriesName::RedisStock => Some("oversell_harness_redis_stock"),
            SeriesName::DbQps => Some("oversell_harness_db_qps"),
            SeriesName::DbTps => Some("oversell_harness_db_tps"),
            SeriesName::RedisOps => Some("oversell_harness_redis_ops"),
            SeriesName::StreamLag => Some("oversell_harness_stream_lag"),
            SeriesName::StreamPending => Some("oversell_harness_stream_pending"),
            SeriesName::ReconcileResidual => Some("oversell_harness_reconcile_residual"),
            SeriesName::DbRowLockWaits => Some("oversell_harness_db_row_lock_waits"),
            SeriesName::DbDeadlocks => Some("oversell_harness_db_deadlocks"),
            SeriesName::PredeductSuccessRate
            | SeriesName::PredeductAttempts
            | SeriesName::Restocks
            | SeriesName::CasRetries
            | SeriesName::PoolWait
            | SeriesName::PoolInUse
            | SeriesName::PoolWaiting => None,
        }
    }

    /// The series called `name`.
    pub fn named(name: &str) -> Option<SeriesName> {
        SeriesName::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl std::fmt::Display for SeriesName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_is_listed_once_and_found_by_its_name() {
        for (i, s) in SeriesName::ALL.into_iter().enumerate() {
            assert_eq!(s as usize, i, "{s} in enum order");
            assert_eq!(SeriesName::named(s.name()), Some(s));
            if let Some(p) = s.prometheus() {
                assert_eq!(p, format!("oversell_harness_{}", s.name()));
            }
        }
        assert_eq!(SeriesName::DbSold as usize, SeriesName::ALL.len() - 1);
        assert_eq!(SeriesName::named("db_qpss"), None);
    }
}
