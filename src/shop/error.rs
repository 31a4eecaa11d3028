//! The shop's error body: `{"error": "<stable machine code>", "detail": "..."}`.
//!
//! Clients get a clean code and message; infrastructure details go to the log, never the body.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::fmt;

/// Declares [`ErrorCode`]: each code's variant, wire spelling and HTTP status, in one table.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident = $wire:literal, $status:ident;)*) => {
        /// The shop's stable machine codes: the `error` field of every error body.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ErrorCode {
            $($(#[$doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in the table's order.
            #[cfg(test)]
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant),*];

            /// The code as the body spells it: `sold_out`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)*
                }
            }

            /// The HTTP status the shop answers it with.
            pub const fn status(self) -> StatusCode {
                match self {
                    $(ErrorCode::$variant => StatusCode::$status,)*
                }
            }
        }
    };
}

error_codes! {
    /// A malformed or out-of-range request (the detail names the field).
    InvalidRequest = "invalid_request", BAD_REQUEST;
    /// The action does not apply to this strategy.
    NotApplicable = "not_applicable", BAD_REQUEST;
    /// An admin route without the right `--admin-token`.
    Unauthorized = "unauthorized", UNAUTHORIZED;
    /// No such route.
    NotFound = "not_found", NOT_FOUND;
    /// No sale of that item.
    UnknownItem = "unknown_item", NOT_FOUND;
    /// No such order.
    UnknownOrder = "unknown_order", NOT_FOUND;
    /// Sold out.
    SoldOut = "sold_out", CONFLICT;
    /// The buyer already holds the purchase limit or has an order in flight.
    Duplicate = "duplicate", CONFLICT;
    /// The order is already in a state the action cannot leave.
    InvalidState = "invalid_state", CONFLICT;
    /// A sale cannot be reset with orders of it still in flight.
    InFlight = "in_flight", CONFLICT;
    /// A sale cannot be set up again while it has orders.
    HasOrders = "has_orders", CONFLICT;
    /// A JSON route's body sent without `Content-Type: application/json` (a form a page of
    /// another origin could post without asking the browser first).
    UnsupportedMediaType = "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE;
    /// An admin route asked, without the admin token, by a page of another origin (an `Origin`
    /// or `Sec-Fetch-Site` that is not the shop's own).
    CrossOrigin = "cross_origin", FORBIDDEN;
    /// A JSON route's body that did not arrive within `--body-timeout`.
    RequestTimeout = "request_timeout", REQUEST_TIMEOUT;
    /// A shop on loopback without an admin token asked by a name that is not loopback's (a
    /// DNS-rebinding page in the user's browser).
    UnknownHost = "unknown_host", MISDIRECTED_REQUEST;
    /// An `Idempotency-Key` reused for another buyer or quantity.
    IdempotencyKeyReused = "idempotency_key_reused", UNPROCESSABLE_ENTITY;
    /// Refused by the rate limit.
    RateLimited = "rate_limited", TOO_MANY_REQUESTS;
    /// Infrastructure failure (the cause is in the log, never the body).
    Internal = "internal", INTERNAL_SERVER_ERROR;
    /// The database is saturated.
    Busy = "busy", SERVICE_UNAVAILABLE;
    /// No Redis replica confirmed it in time (`--redis-durability wait-replica`).
    NotReplicated = "not_replicated", SERVICE_UNAVAILABLE;
    /// Redis does not hold this sale (being rebuilt, or never set up).
    NotWarmed = "not_warmed", SERVICE_UNAVAILABLE;
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An HTTP error answer.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub detail: Option<String>,
}

impl ApiError {
    /// An error with a machine code, answered with the code's status.
    pub fn new(code: ErrorCode) -> Self {
        ApiError {
            status: code.status(),
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
        Self::new(ErrorCode::InvalidRequest).detail(detail)
    }

    /// `500 internal`, logging the real cause.
    pub fn internal(err: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %err, "request failed");
        Self::new(ErrorCode::Internal)
    }
}

impl From<crate::inventory::InventoryError> for ApiError {
    fn from(e: crate::inventory::InventoryError) -> Self {
        match &e {
            crate::inventory::InventoryError::Store(s) if s.is_busy() => {
                Self::new(ErrorCode::Busy).detail("the database is saturated")
            }
            crate::inventory::InventoryError::NotReplicated { what, waited_ms } => {
                Self::new(ErrorCode::NotReplicated).detail(format!(
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
            Some(d) => serde_json::json!({ "error": self.code.as_str(), "detail": d }),
            None => serde_json::json!({ "error": self.code.as_str() }),
        };
        (self.status, Json(body)).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_one_spelling_and_an_error_status() {
        let mut wire: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        let n = wire.len();
        wire.sort_unstable();
        wire.dedup();
        assert_eq!(wire.len(), n, "unique spellings");
        assert!(n >= 17);
        for c in ErrorCode::ALL {
            assert!(
                c.status().is_client_error() || c.status().is_server_error(),
                "{c}"
            );
            assert!(c
                .as_str()
                .chars()
                .all(|ch| ch.is_ascii_lowercase() || ch == '_'));
        }
        assert_eq!(ErrorCode::SoldOut.as_str(), "sold_out");
        assert_eq!(ErrorCode::SoldOut.status(), StatusCode::CONFLICT);
        assert_eq!(ApiError::invalid("x").status, StatusCode::BAD_REQUEST);
    }
}
