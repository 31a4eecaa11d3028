//! An answer's body. A buyer's answer ([`read_capped`]) is read to its end (latency is the
//! full response time, and the connection goes back to the pool clean), but kept only up to
//! [`MAX_BODY_BYTES`]; the rest is read and dropped. Classification and `extract` see the kept part (a JSON answer cut there does not
//! parse: only its status classifies it); samples keep their 200 bytes of it. An answer from
//! a source the harness reads a number from ([`read_limited`]: a `[watch]` gauge, an oracle
//! endpoint, a backlog signal) is read only up to [`MAX_SOURCE_BYTES`]; a larger one is an
//! error.

/// How much of an answer's body is kept: 1 MiB, far more than a shop's JSON answer.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The most the harness reads of an answer from a source it does not control (a `[watch]`
/// gauge, an oracle endpoint, a backlog signal): 4 MiB. A larger answer is an error.
pub const MAX_SOURCE_BYTES: usize = 4 << 20;

/// Why a source's answer was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Larger than the limit (by its `Content-Length`, or as it arrived): not read further.
    #[error("its answer is larger than {} MiB{}: oversell reads no more of it", .limit >> 20, declared(*.length))]
    TooLarge { limit: usize, length: Option<u64> },
    /// The connection failed while it was read (no URL in the message).
    #[error("reading its answer failed: {0}")]
    Read(String),
}

fn declared(length: Option<u64>) -> String {
    length.map_or(String::new(), |n| format!(" (Content-Length {n})"))
}

/// The body of `resp` when it is at most `limit` bytes (invalid UTF-8 replaced); a larger one
/// is refused by its `Content-Length` before a byte is read, or as soon as it passes the limit.
/// Memory is bounded by `limit`, never by the source.
pub async fn read_limited(mut resp: reqwest::Response, limit: usize) -> Result<String, BodyError> {
    let length = resp.content_length();
    if length.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge { limit, length });
    }
    let mut kept: Vec<u8> = Vec::with_capacity(length.unwrap_or(0) as usize);
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| BodyError::Read(e.without_url().to_string()))?
    {
        if kept.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge { limit, length });
        }
        kept.extend_from_slice(&chunk);
    }
    Ok(match String::from_utf8(kept) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// The body of `resp`, read whole, kept up to [`MAX_BODY_BYTES`] (invalid UTF-8 replaced).
pub async fn read_capped(mut resp: reqwest::Response) -> reqwest::Result<String> {
    let expected = resp.content_length().unwrap_or(0) as usize;
    let mut kept: Vec<u8> = Vec::with_capacity(expected.min(MAX_BODY_BYTES));
    while let Some(chunk) = resp.chunk().await? {
        let room = MAX_BODY_BYTES.saturating_sub(kept.len());
        kept.extend_from_slice(&chunk[..chunk.len().min(room)]);
    }
    Ok(match String::from_utf8(kept) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_huge_body_is_read_to_its_end_and_kept_to_the_cap() {
        let app = axum::Router::new().route(
            "/big",
            axum::routing::get(|| async { "x".repeat(3 * MAX_BODY_BYTES) }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::new();

        let big = read_capped(client.get(format!("{base}/big")).send().await.unwrap())
            .await
            .unwrap();
        // The connection was read to its end: the next request on it is answered.
        let again = client.get(format!("{base}/big")).send().await.unwrap();

        assert_eq!(big.len(), MAX_BODY_BYTES);
        assert!(again.status().is_success());
    }

    #[tokio::test]
    async fn a_source_larger_than_its_limit_is_an_error_by_its_length_or_as_it_streams() {
        use futures_util::stream;
        let app = axum::Router::new()
            .route("/sized", axum::routing::get(|| async { "x".repeat(5000) }))
            .route(
                "/streamed",
                axum::routing::get(|| async {
                    let chunks =
                        stream::iter((0..100).map(|_| Ok::<_, std::io::Error>(vec![b'y'; 1000])));
                    axum::body::Body::from_stream(chunks)
                }),
            )
            .route("/small", axum::routing::get(|| async { "{\"n\": 1}" }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::new();
        let get = |p: &str| client.get(format!("{base}{p}")).send();

        let sized = read_limited(get("/sized").await.unwrap(), 4096).await;
        let streamed = read_limited(get("/streamed").await.unwrap(), 4096).await;
        let small = read_limited(get("/small").await.unwrap(), 4096).await;

        assert_eq!(
            sized,
            Err(BodyError::TooLarge {
                limit: 4096,
                length: Some(5000)
            })
        );
        assert!(
            matches!(streamed, Err(BodyError::TooLarge { length: None, .. })),
            "{streamed:?}"
        );
        assert_eq!(small.unwrap(), "{\"n\": 1}");
    }
}
