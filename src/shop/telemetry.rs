//! Prometheus metrics for `GET /metrics`: one process-wide recorder, labelled by strategy.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::sync::OnceLock;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the recorder once per process and returns its handle.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let buckets = [
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        ];
        let builder = PrometheusBuilder::new()
            .set_buckets(&buckets)
            .expect("non-empty buckets");
        match builder.install_recorder() {
            Ok(h) => h,
            // Another recorder is already installed (embedding); render our own private one.
            Err(_) => PrometheusBuilder::new().build_recorder().handle(),
        }
    })
}
