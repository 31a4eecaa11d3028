//! The reference shop's knobs: one list, read by `serve`'s flags, a scenario's `[shop]` table
//! and the command line a run hands to the child shop.
//!
//! Each knob is written once in the `knobs!` list below: its type, default, allowed range and
//! help text. From that list come the clap flags (`--pool-size ...`), the serde form (the
//! `[shop]` table is an overlay: absent fields keep the defaults, unknown fields are refused),
//! [`Default`], the range checks, and [`ShopKnobs::command_line`]. The settings of the parts
//! ([`PoolSettings`], the strategies' [`Settings`], [`RedisSettings`] and its
//! [`GatewaySettings`], [`PipelineSettings`]) have no defaults of their own: they are built
//! from knobs ([`ShopKnobs::pool`] ...), so each default is written once, here.

use super::ShopConfig;
use crate::gateway::GatewaySettings;
use crate::inventory::{Defect, Durability, RedisSettings, Settings, Strategy};
use crate::pipeline::{reconcile::ReconcileSettings, PipelineSettings};
use crate::store::PoolSettings;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::time::Duration;

/// The most reference shop processes one run starts (`--shops`, `[shop] shops`).
pub const MAX_SHOPS: u32 = 16;

/// Declares [`ShopKnobs`] from five lists: choices first (`name: EnumType = Default::Variant;`,
/// a `clap::ValueEnum` spelled in kebab-case), then optional choices (`name: EnumType;`: absent
/// unless given), then switches (`name;`: a `bool`, off by default, the bare flag `--name`
/// turns it on), then the runner's own settings (never a `serve` flag), then numbers
/// (`name: type = default, min..=max;`).
macro_rules! knobs {
    (
        choices { $( $(#[doc = $cdoc:literal])* $cname:ident: $cty:ty = $cdefault:expr; )* }
        optional { $( $(#[doc = $odoc:literal])* $oname:ident: $oty:ty; )* }
        switches { $( $(#[doc = $sdoc:literal])* $sname:ident; )* }
        runner { $( $(#[doc = $rdoc:literal])* $rname:ident: $rty:ty = $rdefault:literal, $rmin:literal..=$rmax:expr; )* }
        $( $(#[doc = $doc:literal])* $name:ident: $ty:ty = $default:literal, $min:literal..=$max:literal; )*
    ) => {
        /// The reference shop's knobs (`serve` flags; `run`/`compare` take them from the
        /// scenario's `[shop]` table and hand them to the child shop).
        #[derive(Debug, Clone, PartialEq, clap::Args, Serialize, Deserialize)]
        #[serde(from = "Overlay")]
        pub struct ShopKnobs {
            $( $(#[doc = $doc])* #[arg(long, default_value_t = $default)] pub $name: $ty, )*
            $( $(#[doc = $cdoc])* #[arg(long, value_enum, default_value_t = $cdefault)] pub $cname: $cty, )*
            $( $(#[doc = $odoc])* #[arg(long, value_enum)] pub $oname: Option<$oty>, )*
            $( $(#[doc = $sdoc])* #[arg(long)] pub $sname: bool, )*
            $( $(#[doc = $rdoc])* #[arg(skip = $rdefault as $rty)] pub $rname: $rty, )*
        }

        impl Default for ShopKnobs {
            fn default() -> Self {
                ShopKnobs { $( $name: $default, )* $( $cname: $cdefault, )* $( $oname: None, )* $( $sname: false, )* $( $rname: $rdefault, )* }
            }
        }

        /// The knobs the runner reads itself: never handed to a shop's command line.
        const RUNNER_ONLY: &[&str] = &[ $( stringify!($rname), )* ];

        /// The `[shop]` table as written: every knob optional (`null`, as an older
        /// `report.json` spells an absent one, also keeps the default).
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Overlay {
            $( $name: Option<$ty>, )*
            $( $cname: Option<$cty>, )*
            $( $oname: Option<$oty>, )*
            $( $sname: Option<bool>, )*
            $( $rname: Option<$rty>, )*
        }

        impl From<Overlay> for ShopKnobs {
            fn from(o: Overlay) -> Self {
                ShopKnobs {
                    $( $name: o.$name.unwrap_or($default), )*
                    $( $cname: o.$cname.unwrap_or($cdefault), )*
                    $( $oname: o.$oname, )*
                    $( $sname: o.$sname.unwrap_or(false), )*
                    $( $rname: o.$rname.unwrap_or($rdefault), )*
                }
            }
        }

        impl ShopKnobs {
            /// Checks every number's range, in the order they are listed (a choice is valid by
            /// its type).
            pub fn validate(&self) -> Result<(), KnobError> {
                $( KnobError::check(stringify!($name), self.$name as f64, $min as f64, $max as f64)?; )*
                $( KnobError::check(stringify!($rname), self.$rname as f64, $rmin as f64, $rmax as f64)?; )*
                Ok(())
            }
        }
    };
}

knobs! {
    choices {
        /// redis-lua: what an acknowledged order survives on the Redis side (checked against
        /// the Redis configuration at start; see docs/src/shop/durability.md).
        redis_durability: Durability = Durability::None;
    }
    optional {
        /// A known defect built into the shop's own code path: a TESTING AID that makes this
        /// shop wrong on purpose, so you can see what the harness catches (`oversell
        /// selftest`; docs/src/gate/detection.md). Each applies to some strategies only.
        defect: Defect;
    }
    switches {
        /// redis-lua: Redis is a Redis Cluster reached through the node(s) of --redis-url
        /// (`redis://h:p` is read as `redis+cluster://h:p`; a `redis+cluster://` URL needs no
        /// flag).
        redis_cluster;
    }
    runner {
        /// `run`/`compare`/`gate` (`--shops`): how many reference shop processes the run starts
        /// on the one database and Redis, buyer i going to shop i mod K. Not a `serve` flag.
        shops: u32 = 1, 1..=MAX_SHOPS;
    }
    /// Database connection pool size.
    pool_size: u32 = 10, 1..=1000;
    /// How long a request waits for a pooled connection before answering 503 busy (ms).
    acquire_timeout_ms: u64 = 500, 1..=600_000;
    /// How long a statement waits for a row lock before giving up (ms).
    lock_timeout_ms: u64 = 1000, 1..=600_000;
    /// naive: business logic between the stock check and the write (ms): the race window.
    naive_gap_ms: u64 = 3, 0..=60_000;
    /// for-update/optimistic: business logic between the read and the write (ms).
    work_ms: u64 = 1, 0..=60_000;
    /// optimistic: retries after a lost compare-and-swap.
    optimistic_retries: u32 = 3, 0..=100;
    /// optimistic: base backoff between retries (ms, jittered, doubling; 0 = none).
    optimistic_backoff_ms: u64 = 2, 0..=10_000;
    /// batched: the longest a batch waits for more buyers after its first (ms; 0 = only those
    /// already queued).
    batch_window_ms: u64 = 2, 0..=10_000;
    /// batched: the most buyers applied in one transaction.
    batch_max: u32 = 128, 1..=4096;
    /// Payment window: an unpaid order is expired and restocked after this many seconds.
    payment_timeout_s: u64 = 900, 1..=604_800;
    /// redis-lua: seconds between reconciliation passes.
    reconcile_interval_s: u64 = 300, 1..=86_400;
    /// redis-lua: |residual| above this raises an alert.
    reconcile_alert_threshold: i64 = 0, 0..=1_000_000_000;
    /// redis-lua: how often the shop checks that Redis still holds its sales, and rebuilds one
    /// from the database when its keys vanished (ms; 0 = only when a purchase finds it gone).
    rewarm_check_ms: u64 = 1000, 0..=3_600_000;
    /// redis-lua `--redis-durability wait-replica`: longest wait for a replica to confirm an
    /// order before answering 503 (ms).
    replica_wait_ms: u64 = 100, 1..=60_000;
    /// redis-lua gateway: global order admissions per second (0 = unlimited).
    rate_limit: f64 = 0.0, 0..=10_000_000;
    /// redis-lua gateway: per-IP order admissions per second (0 = unlimited).
    ip_rate_limit: f64 = 20.0, 0..=10_000_000;
    /// redis-lua gateway: per-IP burst size.
    ip_burst: f64 = 20.0, 0..=10_000_000;
    /// redis-lua gateway: most units the buyers behind one IP may hold (0 = no cap).
    ip_unit_cap: i64 = 0, 0..=1_000_000_000;
    /// redis-lua: how long the product page cache serves a stock figure (ms).
    page_cache_ms: u64 = 1000, 0..=3_600_000;
    /// redis-lua: a stream entry the database refuses this many times is dead-lettered.
    dead_letter_after: u32 = 3, 1..=100;
    /// redis-lua: persistence consumers per item in this shop, all in the item's one consumer
    /// group (each entry is delivered to one of them; more overlap Redis reads with database
    /// writes). Two by default: one consumer fell behind at saturation and at 80 % of it, two
    /// kept up with the backlog near zero (docs/src/performance/overview.md, "redis-lua").
    consumers: u32 = 2, 1..=32;
    /// redis-buckets: how many buckets (hash slots) a sale's stock is split over.
    buckets: u32 = 4, 1..=64;
    /// Worker threads of the shop's tokio runtime (0 = tokio's default: one per core). On a
    /// machine whose cores the shop shares with Redis and the database, fewer workers wake
    /// each other less (docs/src/performance/overview.md, "redis-lua").
    worker_threads: u32 = 0, 0..=1024;
}

/// A knob outside its allowed range. Displays as the `serve` flag; [`KnobError::knob`] is the
/// field name a `[shop]` table uses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--{} {}", .knob.replace('_', "-"), self.range())]
pub struct KnobError {
    /// The knob's field name, e.g. `pool_size`.
    pub knob: &'static str,
    pub min: f64,
    pub max: f64,
    pub got: f64,
}

impl KnobError {
    fn check(knob: &'static str, got: f64, min: f64, max: f64) -> Result<(), KnobError> {
        if got.is_finite() && got >= min && got <= max {
            Ok(())
        } else {
            Err(KnobError {
                knob,
                min,
                max,
                got,
            })
        }
    }

    /// What is allowed and what was given, e.g. `must be between 1 and 1000 (got 0)`.
    pub fn range(&self) -> String {
        format!(
            "must be between {} and {} (got {})",
            self.min, self.max, self.got
        )
    }
}

impl ShopKnobs {
    /// The `serve` flags that reproduce these knobs, derived from their serialized form (a
    /// field `pool_size` is the flag `--pool-size`); the runner's own (`shops`) are left out.
    pub fn command_line(&self) -> Vec<String> {
        let fields = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(fields)) => fields,
            _ => unreachable!("ShopKnobs serializes to a map of plain values"),
        };
        let mut args = Vec::with_capacity(fields.len() * 2);
        for (name, value) in fields {
            if RUNNER_ONLY.contains(&name.as_str()) {
                continue;
            }
            let value = match value {
                serde_json::Value::Null | serde_json::Value::Bool(false) => continue,
                // A switch is a bare flag.
                serde_json::Value::Bool(true) => {
                    args.push(format!("--{}", name.replace('_', "-")));
                    continue;
                }
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            args.push(format!("--{}", name.replace('_', "-")));
            args.push(value);
        }
        args
    }

    /// Whether `strategy` has the defect these knobs ask for (none asked: yes).
    pub fn check_defect(
        &self,
        strategy: Strategy,
    ) -> Result<(), crate::inventory::defect::NotBuiltIn> {
        self.defect.map_or(Ok(()), |d| d.check(strategy))
    }

    /// The configuration of a shop with these knobs selling through `strategy`, its Redis keys
    /// under `redis_prefix`. No alert webhook, no replica, no trusted proxy and no admin token:
    /// set those on the result.
    pub fn config(
        &self,
        strategy: Strategy,
        listen: SocketAddr,
        database_url: &str,
        redis_url: &str,
        redis_prefix: &str,
    ) -> ShopConfig {
        ShopConfig {
            listen,
            strategy,
            database_url: database_url.to_string(),
            pool: self.pool(),
            inventory: self.strategies(),
            redis: self.redis(redis_url, redis_prefix),
            pipeline: self.pipeline(),
            replica_database_url: None,
            page_cache_ttl: Duration::from_millis(self.page_cache_ms),
            trusted_proxies: super::TrustedProxies::default(),
            admin_token: None,
            rewarm_check: (self.rewarm_check_ms > 0)
                .then(|| Duration::from_millis(self.rewarm_check_ms)),
        }
    }
}

impl ShopKnobs {
    /// The database pool (`ShopKnobs::default().pool()`: the pool a shop has by default, which
    /// the harness's own connections use too).
    pub fn pool(&self) -> PoolSettings {
        PoolSettings {
            max_connections: self.pool_size,
            acquire_timeout: Duration::from_millis(self.acquire_timeout_ms),
            lock_timeout: Duration::from_millis(self.lock_timeout_ms),
        }
    }

    /// The strategies' settings.
    pub fn strategies(&self) -> Settings {
        Settings {
            naive_gap: Duration::from_millis(self.naive_gap_ms),
            work: Duration::from_millis(self.work_ms),
            optimistic_retries: self.optimistic_retries,
            optimistic_backoff: Duration::from_millis(self.optimistic_backoff_ms),
            payment_timeout: Duration::from_secs(self.payment_timeout_s),
            batch_window: Duration::from_millis(self.batch_window_ms),
            batch_max: self.batch_max as usize,
            buckets: self.buckets,
            defect: self.defect,
        }
    }

    /// The gateway in front of the Redis strategies' pre-deduct.
    pub fn gateway(&self) -> GatewaySettings {
        GatewaySettings {
            rate_per_s: self.rate_limit,
            burst: self.rate_limit,
            ip_rate_per_s: self.ip_rate_limit,
            ip_burst: self.ip_burst,
            ip_unit_cap: self.ip_unit_cap,
        }
    }

    /// The Redis side at `redis_url` (a cluster with `redis_cluster`), keys under `prefix`.
    pub fn redis(&self, redis_url: &str, prefix: &str) -> RedisSettings {
        RedisSettings {
            url: crate::inventory::redis_lua::conn::with_cluster(redis_url, self.redis_cluster),
            prefix: prefix.to_string(),
            payment_timeout: Duration::from_secs(self.payment_timeout_s),
            gateway: self.gateway(),
            durability: self.redis_durability,
            replica_wait: Duration::from_millis(self.replica_wait_ms),
        }
    }

    /// The background pipeline (no alert webhook, no replica: set those on the result).
    pub fn pipeline(&self) -> PipelineSettings {
        PipelineSettings::new(
            ReconcileSettings {
                interval: Duration::from_secs(self.reconcile_interval_s.max(1)),
                alert_threshold: self.reconcile_alert_threshold,
                webhook: None,
                replica: None,
            },
            self.dead_letter_after,
            self.consumers as usize,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        knobs: ShopKnobs,
    }

    fn parse(args: &[String]) -> ShopKnobs {
        Flags::parse_from(std::iter::once("serve".to_string()).chain(args.iter().cloned())).knobs
    }

    #[test]
    fn the_flags_defaults_are_the_types_defaults() {
        assert_eq!(parse(&[]), ShopKnobs::default());
    }

    #[test]
    fn the_command_line_reproduces_every_knob() {
        let knobs = ShopKnobs {
            pool_size: 7,
            naive_gap_ms: 15,
            reconcile_alert_threshold: 4,
            ip_burst: 2.5,
            rate_limit: 100.0,
            page_cache_ms: 0,
            redis_durability: Durability::AofEverysec,
            redis_cluster: true,
            ..ShopKnobs::default()
        };
        let args = knobs.command_line();
        assert!(args.iter().any(|a| a == "--redis-cluster"), "{args:?}");
        assert!(!ShopKnobs::default()
            .command_line()
            .iter()
            .any(|a| a == "--redis-cluster"));
        assert!(
            args.windows(2).any(|w| w == ["--ip-burst", "2.5"]),
            "{args:?}"
        );
        assert!(
            args.windows(2)
                .any(|w| w == ["--redis-durability", "aof-everysec"]),
            "{args:?}"
        );
        assert_eq!(parse(&args), knobs);
    }

    #[test]
    fn a_shop_table_is_an_overlay_on_the_defaults() {
        let k: ShopKnobs = toml::from_str("work_ms = 9\nip_burst = 3.0").unwrap();
        assert_eq!(
            k,
            ShopKnobs {
                work_ms: 9,
                ip_burst: 3.0,
                ..ShopKnobs::default()
            }
        );
        let e = toml::from_str::<ShopKnobs>("wrok_ms = 9")
            .unwrap_err()
            .to_string();
        assert!(e.contains("wrok_ms") && e.contains("work_ms"), "{e}");
        let k: ShopKnobs = serde_json::from_str(r#"{"pool_size": 4, "work_ms": null}"#).unwrap();
        assert_eq!((k.pool_size, k.work_ms), (4, 1));
        let k: ShopKnobs = toml::from_str("redis_cluster = true").unwrap();
        assert!(k.redis_cluster);
        let k: ShopKnobs = toml::from_str("redis_durability = \"wait-replica\"").unwrap();
        assert_eq!(k.redis_durability, Durability::WaitReplica);
        let e = toml::from_str::<ShopKnobs>("redis_durability = \"fsync\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("aof-always"), "{e}");
    }

    #[test]
    fn a_defect_is_absent_unless_asked_and_reaches_the_shops_command_line() {
        assert_eq!(ShopKnobs::default().defect, None);
        assert!(!ShopKnobs::default()
            .command_line()
            .iter()
            .any(|a| a == "--defect"));
        let k: ShopKnobs = toml::from_str("defect = \"limit-race\"").unwrap();
        assert_eq!(k.defect, Some(Defect::LimitRace));
        let args = k.command_line();
        assert!(
            args.windows(2).any(|w| w == ["--defect", "limit-race"]),
            "{args:?}"
        );
        assert_eq!(parse(&args), k);
        assert!(k.check_defect(Strategy::Conditional).is_ok());
        assert!(k.check_defect(Strategy::RedisLua).is_err());
        let e = toml::from_str::<ShopKnobs>("defect = \"typo\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("key-reuse"), "{e}");
    }

    #[test]
    fn shops_is_the_runners_knob_never_a_shop_flag() {
        let knobs: ShopKnobs = toml::from_str("shops = 3").unwrap();
        assert_eq!(knobs.shops, 3);
        assert!(!knobs.command_line().iter().any(|a| a.contains("shops")));
        assert_eq!(
            parse(&knobs.command_line()).shops,
            1,
            "serve has no --shops"
        );
        let zero = ShopKnobs {
            shops: 0,
            ..ShopKnobs::default()
        };
        assert_eq!(
            zero.validate().unwrap_err().to_string(),
            format!("--shops must be between 1 and {MAX_SHOPS} (got 0)")
        );
    }

    #[test]
    fn a_knob_out_of_range_names_its_flag_and_the_range() {
        let k = ShopKnobs {
            pool_size: 0,
            ..ShopKnobs::default()
        };
        let e = k.validate().unwrap_err();
        assert_eq!(e.knob, "pool_size");
        assert_eq!(
            e.to_string(),
            "--pool-size must be between 1 and 1000 (got 0)"
        );
        let k = ShopKnobs {
            ip_rate_limit: f64::NAN,
            ..ShopKnobs::default()
        };
        assert_eq!(k.validate().unwrap_err().knob, "ip_rate_limit");
        assert_eq!(ShopKnobs::default().validate(), Ok(()));
    }
}
