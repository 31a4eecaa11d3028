//! The persistence consumer: reads an item's stream through the consumer group, writes each
//! batch in one database transaction, and acknowledges only after the commit. A crash between
//! commit and XACK replays the batch, which the idempotent writes in [`crate::store`] absorb.
//! Entries left pending by a dead consumer are claimed after `claim_idle`.

use super::PipelineSettings;
use crate::inventory::redis_lua::{RedisLua, GROUP};
use crate::store::{stream_id, PersistEvent, PersistKind, Store};
use redis::streams::{StreamAutoClaimOptions, StreamId, StreamReadOptions, StreamReadReply};
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Decodes one entry; `None` for an entry that is not ours (logged and acknowledged).
pub fn decode(entry: &StreamId) -> Option<PersistEvent> {
    let text = |k: &str| entry.get::<String>(k);
    Some(PersistEvent {
        stream_id: entry.id.clone(),
        kind: PersistKind::parse(&text("type")?)?,
        order_id: text("order")?,
        user_id: text("user")?,
        device_id: text("device").filter(|d| !d.is_empty()),
        qty: text("qty")?.parse().ok()?,
        at_ms: text("at")?.parse().ok()?,
    })
}

/// Runs until `shutdown`.
pub async fn run(
    redis: RedisLua,
    store: Store,
    item: i64,
    settings: PipelineSettings,
    mut shutdown: watch::Receiver<bool>,
) {
    let name = format!(
        "shop-{}-{}",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    );
    let key = redis.keys(item).events;
    let mut conn = loop {
        match redis.dedicated_conn().await {
            Ok(c) => break c,
            Err(e) => {
                tracing::warn!(item, error = %e, "consumer cannot connect to Redis; retrying");
                if sleep_or_stop(&mut shutdown, Duration::from_secs(1)).await {
                    return;
                }
            }
        }
    };
    let mut applied = match store.reconcile_snapshot(item).await {
        Ok(Some((_, id))) => id,
        _ => "0-0".to_string(),
    };
    // After a failed batch, re-read our own pending entries ("0") before new ones (">").
    let mut retry_own = true;
    let mut last_claim = Instant::now();
    let mut last_gauge = Instant::now();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let start = if retry_own { "0" } else { ">" };
        let opts = StreamReadOptions::default()
            .group(GROUP, &name)
            .count(settings.batch)
            .block(200);
        let read: redis::RedisResult<StreamReadReply> =
            conn.xread_options(&[&key], &[start], &opts).await;
        let mut entries: Vec<StreamId> = match read {
            Ok(reply) => reply.keys.into_iter().flat_map(|k| k.ids).collect(),
            Err(e) => {
                // NOGROUP while a sale is being (re)warmed, or Redis restarting.
                tracing::debug!(item, error = %e, "stream read failed");
                if sleep_or_stop(&mut shutdown, Duration::from_millis(200)).await {
                    return;
                }
                continue;
            }
        };
        if retry_own && entries.is_empty() {
            retry_own = false;
        }
        if entries.is_empty() && last_claim.elapsed() >= settings.claim_idle {
            last_claim = Instant::now();
            let opts = StreamAutoClaimOptions::default().count(settings.batch);
            let claimed: redis::RedisResult<redis::streams::StreamAutoClaimReply> = conn
                .xautoclaim_options(
                    &key,
                    GROUP,
                    &name,
                    settings.claim_idle.as_millis() as u64,
                    "0-0",
                    opts,
                )
                .await;
            if let Ok(c) = claimed {
                if !c.claimed.is_empty() {
                    tracing::warn!(
                        item,
                        n = c.claimed.len(),
                        "claimed entries from a dead consumer"
                    );
                }
                entries = c.claimed;
            }
            prune_consumers(&mut conn, &key, &name, settings.claim_idle).await;
        }
        if last_gauge.elapsed() >= Duration::from_secs(1) {
            last_gauge = Instant::now();
            if let Ok((lag, pending)) = redis.backlog(item).await {
                let label = item.to_string();
                metrics::gauge!("oversell_stream_lag", "item" => label.clone()).set(lag as f64);
                metrics::gauge!("oversell_stream_pending", "item" => label).set(pending as f64);
            }
        }
        if entries.is_empty() {
            continue;
        }
        let ids: Vec<String> = entries.iter().map(|e| e.id.clone()).collect();
        let events: Vec<PersistEvent> = entries.iter().filter_map(decode).collect();
        if events.len() != entries.len() {
            tracing::error!(item, "skipping undecodable stream entries");
        }
        let newest = ids
            .iter()
            .max_by_key(|id| stream_id(id))
            .cloned()
            .unwrap_or_default();
        if stream_id(&newest) > stream_id(&applied) {
            applied = newest;
        }
        match store.apply_events(item, &events, &applied).await {
            Ok(stats) => {
                metrics::counter!("oversell_persisted_events_total").increment(events.len() as u64);
                metrics::counter!("oversell_persist_anomalies_total").increment(stats.anomalies);
                let acked: redis::RedisResult<i64> = conn.xack(&key, GROUP, &ids).await;
                if let Err(e) = acked {
                    tracing::warn!(item, error = %e, "XACK failed; the batch will be replayed");
                }
            }
            Err(e) => {
                tracing::warn!(item, error = %e, "persisting a batch failed; will retry");
                retry_own = true;
                if sleep_or_stop(&mut shutdown, Duration::from_millis(250)).await {
                    return;
                }
            }
        }
    }
}

/// Removes consumers of the group that hold nothing and have been idle longer than
/// `claim_idle` (earlier shop processes): otherwise every restart leaves one behind.
async fn prune_consumers(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
    me: &str,
    claim_idle: Duration,
) {
    let info: redis::RedisResult<redis::streams::StreamInfoConsumersReply> =
        conn.xinfo_consumers(key, GROUP).await;
    let Ok(info) = info else { return };
    for c in info.consumers {
        if c.name != me && c.pending == 0 && c.idle as u128 > claim_idle.as_millis() {
            let removed: redis::RedisResult<i64> =
                conn.xgroup_delconsumer(key, GROUP, &c.name).await;
            if removed.is_ok() {
                tracing::info!(consumer = %c.name, "removed an idle consumer with nothing pending");
            }
        }
    }
}

/// Sleeps; returns true if shutdown was requested meanwhile.
async fn sleep_or_stop(shutdown: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = shutdown.changed() => true,
        _ = tokio::time::sleep(d) => *shutdown.borrow(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_order_numerically() {
        assert!(stream_id("10-0") > stream_id("9-5"));
        assert!(stream_id("10-11") > stream_id("10-2"));
        assert_eq!(stream_id("0-0"), (0, 0));
    }
}
