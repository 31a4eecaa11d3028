//! Alerts to a person: the webhook side (a JSON POST). The log line and the metric are raised
//! where the alert happens.

use std::time::Duration;

/// POSTs `body` to `url` (5 s timeout); failures are logged, never fatal.
pub async fn post(url: String, body: serde_json::Value) {
    let sent = async {
        reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()?
            .post(&url)
            .json(&body)
            .send()
            .await?
            .error_for_status()?;
        Ok::<_, reqwest::Error>(())
    }
    .await;
    if let Err(e) = sent {
        tracing::error!(url = %url, error = %e, "alert webhook failed");
    }
}
