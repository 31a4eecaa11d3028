//! The fault engine: faults a run goes through, from a scenario's `[[faults]]` table or
//! `--fault KIND@AT[:DURATION]`, applied while the sale runs and always undone.
//!
//! - this file: [`FaultSpec`] and [`FaultKind`], the `--fault` syntax, the `[nemesis]` table
//!   (the private Redis's persistence mode) and their validation;
//! - `shop`: `shop-kill` (the runner's child shop, through [`ShopControl`]);
//! - `redis`: the private Redis child and `redis-restart`, `redis-pause`, `redis-conn-kill`,
//!   `redeliver`;
//! - `cluster`: `redis-failover` and `redis-takeover`, the sale's master handing its slot to
//!   its replica, on a run whose Redis is a cluster;
//! - `db`: `db-outage` and `db-lock` on the run's own database;
//! - `crash`: `db-crash` and `db-restart` of the run's managed database server;
//! - `replica`: `replica-lag`, replay paused on the run's managed read replica;
//! - `engine`: the schedule, the undo guard, and what was applied ([`Applied`]).
//!
//! Every fault acts only on what the run owns: its child shop, its private Redis (never the
//! shared one), its own database (never the server), its own stream's consumer group. The
//! cluster kinds are the exception: they move a master of the cluster the run was pointed at
//! (`--redis-cluster`), which every user of that cluster sees; point them at a cluster of
//! your own (the tests start one each). `db-crash`, `db-restart` and `replica-lag` act on a
//! server, but only on one the harness started itself (managed servers), never on one it was
//! pointed at.

pub mod cluster;
mod crash;
mod db;
mod engine;
mod hold;
mod redis;
mod replica;
mod shop;

pub use crash::refuse_unmanaged;
pub use engine::{Applied, Engine, Owned, RedisSale};
pub use hold::{BoxFuture, ShopControl};
pub use redis::PrivateRedis;

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// kill -9 the child shop, start it again on the same port after the window.
    ShopKill,
    /// The private Redis stops (losing what its persistence mode loses) and comes back.
    RedisRestart,
    /// The private Redis answers nothing for the window (`CLIENT PAUSE ... ALL`).
    RedisPause,
    /// The private Redis's client connections are killed, again and again for the window.
    RedisConnKill,
    /// The run's database refuses connections and its sessions are terminated.
    DbOutage,
    /// The items table is locked for the window.
    DbLock,
    /// The item stream's consumer group is rewound: processed entries are delivered again.
    Redeliver,
    /// A cluster: the sale's master hands its slot to its replica (`CLUSTER FAILOVER`).
    RedisFailover,
    /// A cluster: the replica takes the sale's slot without the master (`CLUSTER FAILOVER
    /// TAKEOVER`).
    RedisTakeover,
    /// The run's managed database server is SIGKILLed and started again after the window
    /// (crash recovery).
    DbCrash,
    /// The run's managed database server stops cleanly and starts again after the window.
    DbRestart,
    /// The run's managed replica stops replaying for the window (`pg_wal_replay_pause()`),
    /// then catches up.
    ReplicaLag,
}

impl FaultKind {
    pub const ALL: [FaultKind; 12] = [
        FaultKind::ShopKill,
        FaultKind::RedisRestart,
        FaultKind::RedisPause,
        FaultKind::RedisConnKill,
        FaultKind::DbOutage,
        FaultKind::DbLock,
        FaultKind::Redeliver,
        FaultKind::RedisFailover,
        FaultKind::RedisTakeover,
        FaultKind::DbCrash,
        FaultKind::DbRestart,
        FaultKind::ReplicaLag,
    ];

    /// Its name in scenarios, flags and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::ShopKill => "shop-kill",
            FaultKind::RedisRestart => "redis-restart",
            FaultKind::RedisPause => "redis-pause",
            FaultKind::RedisConnKill => "redis-conn-kill",
            FaultKind::DbOutage => "db-outage",
            FaultKind::DbLock => "db-lock",
            FaultKind::Redeliver => "redeliver",
            FaultKind::RedisFailover => "redis-failover",
            FaultKind::RedisTakeover => "redis-takeover",
            FaultKind::DbCrash => "db-crash",
            FaultKind::DbRestart => "db-restart",
            FaultKind::ReplicaLag => "replica-lag",
        }
    }

    /// Acts on the private Redis (the run then starts one).
    pub fn needs_private_redis(self) -> bool {
        matches!(
            self,
            FaultKind::RedisRestart | FaultKind::RedisPause | FaultKind::RedisConnKill
        )
    }

    /// Acts on a Redis Cluster (the run's Redis must be one).
    pub fn needs_cluster(self) -> bool {
        matches!(self, FaultKind::RedisFailover | FaultKind::RedisTakeover)
    }

    /// Concerns only strategies that use Redis (redis-lua, redis-buckets).
    pub fn redis_only(self) -> bool {
        self.needs_private_redis() || self.needs_cluster() || self == FaultKind::Redeliver
    }

    /// Acts on the run's database server, which must be a managed one.
    pub fn needs_managed_db(self) -> bool {
        matches!(self, FaultKind::DbCrash | FaultKind::DbRestart)
    }

    /// Acts on the run's read replica (the run then gets one: `[nemesis] replica`).
    pub fn needs_replica(self) -> bool {
        self == FaultKind::ReplicaLag
    }

    fn parse(s: &str) -> Result<Self, SpecError> {
        FaultKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| SpecError::new("kind", ALLOWED_KINDS, format!("{s:?}")))
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const ALLOWED_KINDS: &str = "one of shop-kill, redis-restart, redis-pause, redis-conn-kill, \
     db-outage, db-lock, redeliver, redis-failover, redis-takeover, db-crash, db-restart, \
     replica-lag";

/// The longest a fault may start after the sale opens, seconds.
pub const MAX_AT_S: f64 = 3600.0;
/// The longest window, ms.
pub const MAX_DURATION_MS: u64 = 600_000;
/// The window when none is given, ms.
pub const DEFAULT_DURATION_MS: u64 = 1000;

/// One fault: `[[faults]]` in a scenario, or `--fault`.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// Seconds after the sale opens (or `at = "1.5s"`).
    #[serde(default = "unset_at")]
    pub at_s: f64,
    /// `at = "1.5s"`: [`FaultSpec::at_s`] with its unit (one of the two).
    #[serde(default, skip_serializing)]
    pub at: Option<crate::duration::Written>,
    /// How long it lasts before it is undone, ms (`redeliver`, `redis-failover`,
    /// `redis-takeover`: instantaneous, ignored; or `duration = "500ms"`).
    #[serde(default = "unset_duration")]
    pub duration_ms: u64,
    /// `duration = "500ms"`: [`FaultSpec::duration_ms`] with its unit (one of the two).
    #[serde(default, skip_serializing)]
    pub duration: Option<crate::duration::Written>,
    /// `redeliver`: the id the group is rewound to (default `0`: every entry still in the
    /// stream is delivered again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewind_to: Option<String>,
}

/// `at_s` when the file does not give it (filled in by [`FaultSpec::resolve_units`]).
fn unset_at() -> f64 {
    f64::NAN
}

/// `duration_ms` when the file does not give it.
fn unset_duration() -> u64 {
    u64::MAX
}

impl FaultSpec {
    /// Parses `KIND@AT[:DURATION]`: AT in seconds after the sale opens (`1.5`, `1.5s` or
    /// `500ms`), DURATION with its unit (`500ms`, `2s`, `1.5s`).
    pub fn parse_flag(text: &str) -> Result<Self, SpecError> {
        let (kind, rest) = text.split_once('@').ok_or_else(|| {
            SpecError::new(
                "--fault",
                "KIND@AT[:DURATION], e.g. redis-restart@1.5:2s",
                format!("{text:?}"),
            )
        })?;
        let kind = FaultKind::parse(kind.trim())?;
        let (at, duration) = match rest.split_once(':') {
            Some((a, d)) => (a, Some(d)),
            None => (rest, None),
        };
        let at_s = parse_at_s(at.trim())?;
        let duration_ms = match duration {
            Some(d) => parse_duration_ms(d.trim())?,
            None => DEFAULT_DURATION_MS,
        };
        let spec = FaultSpec {
            kind,
            at_s,
            at: None,
            duration_ms,
            duration: None,
            rewind_to: None,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// `at = "1.5s"` and `duration = "500ms"` (a scenario's spelling with units) into `at_s` and
    /// `duration_ms`, the default duration filled in; both spellings of one is refused.
    pub fn resolve_units(&mut self) -> Result<(), SpecError> {
        let twice = |field: &str| {
            SpecError::new(
                field,
                "given once: with its unit (at = \"1.5s\", duration = \"500ms\") or in the older \
                 field (at_s, duration_ms), not both",
                "both",
            )
        };
        match (self.at_s.is_nan(), self.at) {
            (false, Some(_)) => return Err(twice("at")),
            (true, Some(w)) => self.at_s = w.0.as_secs_f64(),
            (true, None) => {
                return Err(SpecError::new(
                    "at",
                    "given: when, e.g. at = \"1.5s\"",
                    "nothing",
                ))
            }
            (false, None) => {}
        }
        match (self.duration_ms == u64::MAX, self.duration) {
            (false, Some(_)) => return Err(twice("duration")),
            (true, Some(w)) => self.duration_ms = (w.0.as_secs_f64() * 1000.0).round() as u64,
            (true, None) => self.duration_ms = DEFAULT_DURATION_MS,
            (false, None) => {}
        }
        Ok(())
    }

    /// The limits of each field.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !self.at_s.is_finite() || !(0.0..=MAX_AT_S).contains(&self.at_s) {
            return Err(SpecError::new(
                "at_s",
                "between 0 and 3600 seconds",
                self.at_s,
            ));
        }
        if self.duration_ms > MAX_DURATION_MS {
            return Err(SpecError::new(
                "duration_ms",
                "at most 600000 ms",
                self.duration_ms,
            ));
        }
        if let Some(id) = &self.rewind_to {
            if self.kind != FaultKind::Redeliver {
                return Err(SpecError::new(
                    "rewind_to",
                    "given only with kind = \"redeliver\"",
                    self.kind,
                ));
            }
            let ok = id
                .split_once('-')
                .map_or(id.parse::<u64>().is_ok(), |(a, b)| {
                    a.parse::<u64>().is_ok() && b.parse::<u64>().is_ok()
                });
            if !ok {
                return Err(SpecError::new(
                    "rewind_to",
                    "a stream id: MS or MS-SEQ, e.g. 0",
                    format!("{id:?}"),
                ));
            }
        }
        Ok(())
    }

    /// When it is due, ms after the sale opened.
    pub fn at_ms(&self) -> u64 {
        (self.at_s * 1000.0).round() as u64
    }

    /// `redis-restart@1.5:2000ms`.
    pub fn label(&self) -> String {
        format!("{}@{}:{}ms", self.kind, self.at_s, self.duration_ms)
    }
}

impl std::str::FromStr for FaultSpec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultSpec::parse_flag(s)
    }
}

/// `500ms`, `2s`, `1.5s` → ms. A bare number is refused: its unit would be a guess.
fn parse_duration_ms(d: &str) -> Result<u64, SpecError> {
    let allowed = "a duration with its unit: 500ms, 2s or 1.5s";
    let d = crate::duration::parse(d).map_err(|why| SpecError::new("duration", allowed, why))?;
    Ok((d.as_secs_f64() * 1000.0).round() as u64)
}

/// `1.5` (seconds), `1.5s` or `500ms` → seconds after the sale opens.
fn parse_at_s(at: &str) -> Result<f64, SpecError> {
    let bad = || {
        SpecError::new(
            "at",
            "seconds after the sale opens: 1.5, 1.5s or 500ms",
            format!("{at:?}"),
        )
    };
    match at.parse::<f64>() {
        Ok(s) => Ok(s),
        Err(_) => crate::duration::parse(at)
            .map(|d| d.as_secs_f64())
            .map_err(|_| bad()),
    }
}

/// What the private Redis keeps across a `redis-restart`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Persistence {
    /// Nothing: a restart comes back empty.
    #[default]
    None,
    /// The append-only file, fsynced once a second.
    AofEverysec,
    /// The append-only file, fsynced before every write is answered.
    AofAlways,
}

impl Persistence {
    pub fn as_str(self) -> &'static str {
        match self {
            Persistence::None => "none",
            Persistence::AofEverysec => "aof-everysec",
            Persistence::AofAlways => "aof-always",
        }
    }
}

/// `[nemesis]`: how the faults' private services are set up.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NemesisSpec {
    /// The private Redis's persistence: `none`, `aof-everysec` or `aof-always`.
    pub redis_persistence: Persistence,
    /// redis-lua and redis-buckets on a managed PostgreSQL: reconciliation reads a managed
    /// streaming replica of the run's database server (`--replica-database-url`), started for
    /// the run. A `replica-lag` fault implies it.
    pub replica: bool,
}

impl NemesisSpec {
    /// Whether a run of `faults` gets a read replica.
    pub fn wants_replica(&self, faults: &[FaultSpec]) -> bool {
        self.replica || faults.iter().any(|f| f.kind.needs_replica())
    }
}

/// A fault spec outside its allowed values: the field (or flag), what is allowed, what was
/// given.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("field `{field}` must be {allowed} (got {got})")]
pub struct SpecError {
    pub field: String,
    pub allowed: String,
    pub got: String,
}

impl SpecError {
    fn new(field: &str, allowed: &str, got: impl fmt::Display) -> Self {
        SpecError {
            field: field.into(),
            allowed: allowed.into(),
            got: got.to_string(),
        }
    }

    /// The same error, its field under `prefix` (`faults[2]`).
    pub fn under(mut self, prefix: &str) -> Self {
        self.field = format!("{prefix}.{}", self.field);
        self
    }
}

/// Validates a scenario's faults: each one's fields, named `faults[i].field`.
pub fn validate_all(faults: &[FaultSpec]) -> Result<(), SpecError> {
    for (i, f) in faults.iter().enumerate() {
        f.validate().map_err(|e| e.under(&format!("faults[{i}]")))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_parses_kind_time_and_duration_in_every_unit() {
        let f = FaultSpec::parse_flag("redis-restart@1.5:2s").unwrap();
        assert_eq!(f.kind, FaultKind::RedisRestart);
        assert_eq!(f.at_s, 1.5);
        assert_eq!(f.duration_ms, 2000);
        assert_eq!(f.at_ms(), 1500);
        assert_eq!(
            FaultSpec::parse_flag("db-outage@2:500ms")
                .unwrap()
                .duration_ms,
            500
        );
        assert_eq!(
            FaultSpec::parse_flag("db-lock@0s:750ms")
                .unwrap()
                .duration_ms,
            750
        );
        assert_eq!(
            FaultSpec::parse_flag("db-lock@500ms:1m").unwrap().at_ms(),
            500
        );
        let d = FaultSpec::parse_flag("shop-kill@3").unwrap();
        assert_eq!((d.at_s, d.duration_ms), (3.0, DEFAULT_DURATION_MS));
        for k in FaultKind::ALL {
            let f: FaultSpec = format!("{k}@1:1.5s").parse().unwrap();
            assert_eq!((f.kind, f.duration_ms), (k, 1500));
        }
    }

    #[test]
    fn a_bad_flag_names_the_part_and_what_is_allowed() {
        let e = FaultSpec::parse_flag("redis-reboot@1").unwrap_err();
        assert_eq!(e.field, "kind");
        assert!(e.to_string().contains("redis-restart"), "{e}");
        let e = FaultSpec::parse_flag("redis-restart").unwrap_err();
        assert!(e.to_string().contains("KIND@AT[:DURATION]"), "{e}");
        let e = FaultSpec::parse_flag("db-lock@soon").unwrap_err();
        assert_eq!(e.field, "at");
        let e = FaultSpec::parse_flag("db-lock@1:750").unwrap_err();
        assert_eq!(e.field, "duration");
        assert!(e.to_string().contains("no unit"), "{e}");
        assert!(e.to_string().contains("500ms"), "{e}");
        let e = FaultSpec::parse_flag("db-lock@-1").unwrap_err();
        assert_eq!(e.field, "at_s");
        let e = FaultSpec::parse_flag("db-lock@1:601s").unwrap_err();
        assert_eq!(e.field, "duration_ms");
    }

    #[test]
    fn a_scenario_fault_is_validated_under_its_index() {
        let mut f = FaultSpec::parse_flag("redeliver@1").unwrap();
        f.rewind_to = Some("12-x".into());
        let e = validate_all(&[FaultSpec::parse_flag("db-lock@1").unwrap(), f]).unwrap_err();
        assert_eq!(e.field, "faults[1].rewind_to");
        let mut g = FaultSpec::parse_flag("db-lock@1").unwrap();
        g.rewind_to = Some("0".into());
        assert!(g.validate().is_err(), "rewind_to belongs to redeliver");
    }
}
