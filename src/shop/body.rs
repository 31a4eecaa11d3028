//! A JSON route's body, which must arrive within the body timeout (`serve --body-timeout`):
//! a client that sends its headers and then trickles its body, a byte now and then (faster than
//! the idle timeout), gets `408 request_timeout` instead of holding the request open.

use super::error::{ApiError, ErrorCode};
use super::AppState;
use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::response::{IntoResponse, Response};

/// The request's whole body, read within the shop's body timeout.
pub(super) struct TimedBody(pub Bytes);

impl FromRequest<AppState> for TimedBody {
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Response> {
        let limit = state.body_timeout;
        match tokio::time::timeout(limit, Bytes::from_request(req, state)).await {
            Ok(Ok(body)) => Ok(TimedBody(body)),
            Ok(Err(rejection)) => Err(rejection.into_response()),
            Err(_) => Err(ApiError::new(ErrorCode::RequestTimeout)
                .detail(format!(
                    "the body did not arrive within {} (--body-timeout)",
                    crate::duration::shown(limit)
                ))
                .into_response()),
        }
    }
}
