//! The shop's error body: `{"error": "<stable machine code>", "detail": "..."}`.
//!
//! Clients get a clean code and message; infrastructure details go to the log, never the body.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

/// An HTTP error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub detail: Option<String>,
}

impl ApiError {
    /// An error with a status and a machine code.
    pub fn new(status: StatusCode, code: &'static str) -> Self {
        ApiError {
            status,
            code,
            detail: None,
        }
    }

    /// Adds a human explanation.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// `400 invalid_request` with a reason.
    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request").detail(detail)
    }

    /// `500 internal`, logging the real cause.
    pub fn internal(err: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %err, "request failed");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal")
    }
}

impl From<crate::inventory::InventoryError> for ApiError {
    fn from(e: crate::inventory::InventoryError) -> Self {
        match &e {
            crate::inventory::InventoryError::Store(s) if s.is_busy() => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "busy")
                    .detail("the database is saturated")
            }
            crate::inventory::InventoryError::NotReplicated { what, waited_ms } => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, "not_replicated").detail(format!(
                    "no Redis replica confirmed the {what} within {waited_ms} ms \
                     (--redis-durability wait-replica): Redis's primary holds it, but a failover \
                     now could lose it, so it is not acknowledged; retry (it is idempotent)"
                ))
            }
            _ => Self::internal(&e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = match self.detail {
            Some(d) => serde_json::json!({ "error": self.code, "detail": d }),
            None => serde_json::json!({ "error": self.code }),
        };
        (self.status, Json(body)).into_response()
    }
}
