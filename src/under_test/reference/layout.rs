//! The reference shop's layout, as the harness's probes and faults see it: the statement that
//! reads the item's stock per backend, where its Redis strategies keep the stock (one key, or B
//! buckets and the units travelling between them), and the sale's streams and consumer group.
//! Part of the reference implementation: the probe and the nemesis know none of it.

use crate::inventory::redis_lua::{ItemKeys, GROUP};
use crate::inventory::RedisKind;
use crate::nemesis::RedisSale;
use crate::probe::{ReadStock, RedisStock, StockStatement};
use crate::store::dialect::Statements;
use crate::store::redis_conn::RedisConn;
use crate::store::Backend;
use futures_util::future::BoxFuture;
use std::sync::{Arc, OnceLock};

/// The statement reading the item's `(stock, sold)` from the reference shop's tables.
pub(super) fn statement(backend: Backend, item: i64) -> StockStatement {
    StockStatement {
        sql: Statements::for_backend(backend).read_stock,
        item,
        stock_source: "SELECT stock FROM items",
        sold_source: "SELECT SUM(qty) FROM orders WHERE status IN ('pending_payment', 'paid')",
    }
}

/// The item's Redis stock under the run's key `prefix`, as `kind` lays it out.
pub(super) fn redis(url: &str, prefix: &str, item: i64, kind: RedisKind) -> RedisStock {
    RedisStock {
        url: url.to_string(),
        read: Arc::new(Keys {
            prefix: prefix.to_string(),
            item,
            kind,
            layout: OnceLock::new(),
        }),
    }
}

/// The sale in Redis under the run's key `prefix` as `kind` lays it out with `buckets`: its
/// streams (redis-lua one; redis-buckets one per bucket), their consumer group, and bucket 0's
/// stock key for the slot a failover moves (the other buckets' slots move only if they share its
/// master).
pub(super) fn sale(prefix: &str, item: i64, kind: RedisKind, buckets: u32) -> RedisSale {
    let sets: Vec<ItemKeys> = kind
        .prefixes(prefix, buckets)
        .iter()
        .map(|p| ItemKeys::new(p, item))
        .collect();
    RedisSale {
        streams: sets.iter().map(|k| k.events.clone()).collect(),
        group: GROUP.to_string(),
        slot_key: sets
            .first()
            .map(|k| k.stock.clone())
            .unwrap_or_else(|| ItemKeys::new(prefix, item).stock),
    }
}

struct Keys {
    prefix: String,
    item: i64,
    kind: RedisKind,
    /// The stock keys and the transfer hashes, once known (redis-buckets: once the sale's
    /// first bucket says how many there are; the sale is set up before the probes start).
    layout: OnceLock<(Vec<String>, Vec<String>)>,
}

impl ReadStock for Keys {
    fn read<'a>(&'a self, conn: &'a mut RedisConn) -> BoxFuture<'a, (Option<i64>, u64)> {
        Box::pin(async move {
            let mut sent = 0;
            let total = self.total(conn, &mut sent).await;
            (total, sent)
        })
    }

    fn source(&self) -> &'static str {
        match self.kind {
            RedisKind::Lua => "Redis GET of the item's stock key",
            RedisKind::Buckets => {
                "Redis: GET of every bucket's stock key plus the units travelling between buckets (HVALS of each bucket's transfers), summed; read one bucket at a time, so not atomic while units move"
            }
        }
    }
}

impl Keys {
    /// The item's stock key, or for redis-buckets every bucket's and its transfers (their
    /// number in the first bucket's meta), read once.
    async fn layout(
        &self,
        conn: &mut RedisConn,
        sent: &mut u64,
    ) -> Option<&(Vec<String>, Vec<String>)> {
        if let Some(known) = self.layout.get() {
            return Some(known);
        }
        let found = match self.kind {
            RedisKind::Lua => (vec![ItemKeys::new(&self.prefix, self.item).stock], vec![]),
            RedisKind::Buckets => {
                *sent += 1;
                let n: Option<u32> = redis::cmd("HGET")
                    .arg(ItemKeys::bucket(&self.prefix, self.item, 0).meta)
                    .arg("buckets")
                    .query_async(conn)
                    .await
                    .ok()?;
                (0..n?)
                    .map(|b| {
                        let keys = ItemKeys::bucket(&self.prefix, self.item, b);
                        (keys.stock.clone(), keys.sibling("transfers"))
                    })
                    .unzip()
            }
        };
        Some(self.layout.get_or_init(|| found))
    }

    /// The item's stock key, or for redis-buckets the sum over its buckets plus the units lent
    /// and not yet taken in (`id → "to:units"`).
    async fn total(&self, conn: &mut RedisConn, sent: &mut u64) -> Option<i64> {
        let (stock_keys, transfer_keys) = self.layout(conn, sent).await?;
        let mut total = 0;
        for key in stock_keys {
            *sent += 1;
            let one: Option<i64> = redis::cmd("GET").arg(key).query_async(conn).await.ok()?;
            total += one?;
        }
        for key in transfer_keys {
            *sent += 1;
            let lent: Vec<String> = redis::cmd("HVALS").arg(key).query_async(conn).await.ok()?;
            total += lent
                .iter()
                .filter_map(|r| r.split_once(':')?.1.parse::<i64>().ok())
                .sum::<i64>();
        }
        Some(total)
    }
}
