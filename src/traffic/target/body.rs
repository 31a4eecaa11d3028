//! An answer's body: read to its end (latency is the full response time, and the connection
//! goes back to the pool clean), but kept only up to [`MAX_BODY_BYTES`]; the rest is read and
//! dropped. Classification and `extract` see the kept part (a JSON answer cut there does not
//! parse: only its status classifies it); samples keep their 200 bytes of it.

/// How much of an answer's body is kept: 1 MiB, far more than a shop's JSON answer.
pub const MAX_BODY_BYTES: usize = 1 << 20;

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
}
