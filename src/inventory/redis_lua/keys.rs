//! The Redis key layout of a sale, how to clean a prefix, and the sweep of the prefixes a
//! killed run left ([`sweep_redis`]).
//!
//! Every key of one item shares the hash tag `{prefix:item}`, so the scripts stay valid on
//! Redis Cluster; the prefix isolates tests and parallel runs from each other. The strategy, the
//! runner's oracle reads, the probe and `bench` all name keys through [`ItemKeys`].

use crate::services::leftovers;
use std::time::Duration;

/// The keys of one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemKeys {
    /// Units left (a string holding an integer).
    pub stock: String,
    /// The sale's description: limit, initial stock, name, price (a hash).
    pub meta: String,
    /// Units held per user (a hash).
    pub holders: String,
    /// Units held per device (a hash).
    pub devices: String,
    /// Units held per client IP (a hash).
    pub ips: String,
    /// Every order as JSON, by order id (a hash).
    pub orders: String,
    /// The delayed queue of unpaid orders, scored by due time (a sorted set).
    pub expiry: String,
    /// Orders already restocked: the restock idempotency set.
    pub restocked: String,
    /// The item's event stream, read by the persistence consumer.
    pub events: String,
    /// Every `Idempotency-Key` that bought an order, with that order's id (a hash).
    pub idempotency: String,
    /// Entries the database refused N times, moved aside with its reason (a stream).
    pub dead_letters: String,
    /// Stream ids of dead-lettered entries not yet trimmed, scored by their millisecond part (a
    /// sorted set): reconciliation must not count them as in flight.
    pub dead_ids: String,
    /// The highest id the stream was trimmed to (`XTRIM MINID`): a reconciliation snapshot whose
    /// mark is older may be missing trimmed entries and is deferred.
    pub trimmed: String,
}

impl ItemKeys {
    /// The keys of `item` under `prefix`.
    pub fn new(prefix: &str, item: i64) -> Self {
        let tag = format!("{{{prefix}:{item}}}");
        let k = |name: &str| format!("{tag}:{name}");
        ItemKeys {
            stock: k("stock"),
            meta: k("meta"),
            holders: k("holders"),
            devices: k("devices"),
            ips: k("ips"),
            orders: k("orders"),
            expiry: k("expiry"),
            restocked: k("restocked"),
            events: k("events"),
            idempotency: k("idempotency"),
            dead_letters: k("dead-letters"),
            dead_ids: k("dead-ids"),
            trimmed: k("trimmed"),
        }
    }

    /// Every key of the item: the pre-deduct's first eight, the restock set, the stream's
    /// bookkeeping (dead letters, trim point), and the idempotency keys last (the order
    /// `lua/rewarm.lua` takes them in).
    pub fn all(&self) -> [&str; 13] {
        [
            &self.stock,
            &self.meta,
            &self.holders,
            &self.devices,
            &self.ips,
            &self.orders,
            &self.expiry,
            &self.events,
            &self.restocked,
            &self.dead_letters,
            &self.dead_ids,
            &self.trimmed,
            &self.idempotency,
        ]
    }

    /// The KEYS of `lua/deduct.lua`, in its order.
    pub fn deduct(&self) -> [&str; 9] {
        [
            &self.stock,
            &self.meta,
            &self.holders,
            &self.devices,
            &self.ips,
            &self.orders,
            &self.expiry,
            &self.events,
            &self.idempotency,
        ]
    }
}

/// The key prefix of bucket `bucket` under `prefix` (`redis-buckets`): `prefix:b<bucket>`, so
/// bucket `b` of item `i` has the hash tag `{prefix:b<b>:i}` (its own slot on a cluster), and
/// [`prefix_pattern`]`(prefix)` and [`delete_prefix`] still cover it. No redis-lua item id
/// (an integer) starts with `b`, so the two layouts never share a key.
pub fn bucket_prefix(prefix: &str, bucket: u32) -> String {
    format!("{prefix}:b{bucket}")
}

impl ItemKeys {
    /// The keys of bucket `bucket` of `item` under `prefix` (`redis-buckets`): a full
    /// redis-lua key set under [`bucket_prefix`].
    pub fn bucket(prefix: &str, item: i64, bucket: u32) -> Self {
        ItemKeys::new(&bucket_prefix(prefix, bucket), item)
    }

    /// Another key under the same hash tag as these (`name` after the tag).
    pub fn sibling(&self, name: &str) -> String {
        let tag_end = self.stock.rfind(':').unwrap_or(self.stock.len());
        format!("{}:{name}", &self.stock[..tag_end])
    }
}

impl ItemKeys {
    /// The KEYS of `lua/deadletter.lua`, in its order.
    pub fn dead_letter(&self) -> [&str; 9] {
        [
            &self.stock,
            &self.holders,
            &self.devices,
            &self.ips,
            &self.orders,
            &self.expiry,
            &self.events,
            &self.dead_letters,
            &self.dead_ids,
        ]
    }
}

/// The `SCAN MATCH` pattern of every key under `prefix` (glob characters in it escaped).
pub fn prefix_pattern(prefix: &str) -> String {
    let mut p = String::from("{");
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push_str(":*");
    p
}

/// Deletes every key under `prefix` (best effort), walking the keyspace with `SCAN` so a large
/// Redis is never blocked the way `KEYS` would block it. On a cluster every master is walked
/// (each holds its own slots), and each key deleted where it lives.
pub async fn delete_prefix(url: &str, prefix: &str) {
    let Ok(mut conn) = super::RedisConn::open(url).await else {
        return;
    };
    let Some(mut scan) = KeyScan::start(&mut conn, prefix_pattern(prefix)).await else {
        return;
    };
    while let Some(keys) = scan.next_page(&mut conn).await {
        if !keys.is_empty() {
            // On a cluster, DEL of keys in several slots is split per slot by the client.
            let _: redis::RedisResult<()> =
                redis::cmd("DEL").arg(keys).query_async(&mut conn).await;
        }
    }
}

/// `SCAN <cursor> MATCH <pattern> COUNT 1000` on every master, a page at a time: the walk
/// [`delete_prefix`] and [`sweep_prefixes`] share. A page that fails ends its node's walk
/// (best effort), not the others'.
struct KeyScan {
    pattern: String,
    /// The masters not walked yet, each with its first page.
    nodes: std::vec::IntoIter<(String, redis::RedisResult<redis::Value>)>,
    /// The node being walked and its page to read next.
    at: Option<(String, redis::RedisResult<redis::Value>)>,
}

impl KeyScan {
    /// Asks every master for its first page; `None` when Redis does not answer.
    async fn start(conn: &mut super::RedisConn, pattern: String) -> Option<KeyScan> {
        let masters = conn.on_each_master(&scan_cmd(&pattern, 0)).await.ok()?;
        let mut nodes = masters.into_iter();
        let at = nodes.next();
        Some(KeyScan { pattern, nodes, at })
    }

    /// The keys of the next page (possibly none), `None` once every master is walked.
    async fn next_page(&mut self, conn: &mut super::RedisConn) -> Option<Vec<String>> {
        loop {
            let (node, page) = self.at.take()?;
            match page.and_then(|v| Ok(redis::from_redis_value::<(u64, Vec<String>)>(v)?)) {
                Ok((next, keys)) => {
                    self.at = if next == 0 {
                        self.nodes.next()
                    } else {
                        let page = conn.on_node(&node, &scan_cmd(&self.pattern, next)).await;
                        Some((node, page))
                    };
                    return Some(keys);
                }
                Err(_) => self.at = self.nodes.next(),
            }
        }
    }
}

fn scan_cmd(pattern: &str, cursor: u64) -> redis::Cmd {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(1000);
    cmd
}

/// Deletes the keys of every stale run prefix on the Redis at `url` (best effort, bounded to
/// 20 s; once per URL per process). Returns the prefixes removed.
pub async fn sweep_redis(url: &str) -> Vec<String> {
    sweep_prefixes(url, leftovers::RUN_PREFIX).await
}

/// [`sweep_redis`] for the prefixes [`leftovers::owned_name`] made with `start` and `-`.
pub async fn sweep_prefixes(url: &str, start: &str) -> Vec<String> {
    static DONE: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    {
        let mut done = DONE.lock().unwrap_or_else(|e| e.into_inner());
        if done.iter().any(|u| *u == format!("{start} {url}")) {
            return Vec::new();
        }
        done.push(format!("{start} {url}"));
    }
    tokio::time::timeout(Duration::from_secs(20), sweep_redis_now(url, start))
        .await
        .unwrap_or_default()
}

async fn sweep_redis_now(url: &str, start: &str) -> Vec<String> {
    let Ok(mut conn) = super::RedisConn::open(url).await else {
        return Vec::new();
    };
    let Some(mut scan) = KeyScan::start(&mut conn, format!("{{{start}*")).await else {
        return Vec::new();
    };
    let mut prefixes: Vec<String> = Vec::new();
    while let Some(keys) = scan.next_page(&mut conn).await {
        for key in keys {
            // `{<prefix>:<item>}:<name>`
            let prefix = key
                .strip_prefix('{')
                .and_then(|k| k.split_once(':'))
                .map(|(p, _)| p.to_string());
            if let Some(p) = prefix {
                if !prefixes.contains(&p) {
                    prefixes.push(p);
                }
            }
        }
    }
    let mut removed = Vec::new();
    for p in prefixes {
        if leftovers::owner_of(&p, start, '-').is_some_and(|o| o.is_stale()) {
            delete_prefix(url, &p).await;
            tracing::info!("removed the keys of {p} (left by a run that is gone)");
            removed.push(p);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_an_item_shares_its_hash_tag() {
        let k = ItemKeys::new("run-1", 42);
        assert_eq!(k.stock, "{run-1:42}:stock");
        assert!(k.all().iter().all(|key| key.starts_with("{run-1:42}:")));
        assert_eq!(k.deduct().len(), 9);
        assert!(k.all().contains(&k.idempotency.as_str()));
        assert!(k.all().contains(&k.restocked.as_str()));
        assert!(k.all().contains(&k.dead_letters.as_str()));
    }

    #[test]
    fn bucket_keys_have_their_own_tag_under_the_prefix() {
        let b = ItemKeys::bucket("run-1", 42, 3);
        assert_eq!(b.stock, "{run-1:b3:42}:stock");
        assert_eq!(b.sibling("transfers"), "{run-1:b3:42}:transfers");
        assert!(b.all().iter().all(|key| key.starts_with("{run-1:b3:42}:")));
        assert_ne!(b.stock, ItemKeys::bucket("run-1", 42, 2).stock);
        assert_ne!(b.stock, ItemKeys::new("run-1", 42).stock);
        let pattern = prefix_pattern("run-1");
        assert!(b.stock.starts_with(pattern.trim_end_matches('*')));
    }

    #[test]
    fn a_prefix_pattern_matches_only_that_prefix() {
        assert_eq!(prefix_pattern("t-1"), "{t-1:*");
        assert_eq!(prefix_pattern("a*b?[c]"), "{a\\*b\\?\\[c\\]:*");
    }
}
