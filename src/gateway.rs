//! The anti-abuse gateway that runs before redis-lua's pre-deduct.
//!
//! "Limit first, deduct second": a token bucket (global and per client IP) and dedup by user,
//! device and IP turn scripts away before they reach the Lua script, so they cannot take real
//! buyers' units. Dedup here is two things:
//! - in flight: a second request from a user or device that already has one in progress is a
//!   duplicate (bots fire the same order many times at once);
//! - already holding: a user, device or IP this shop instance has already reserved for is
//!   refused without a Redis round trip. The Lua script still checks holdings atomically (the
//!   authority across instances); this cache only saves it work. Releases clear it.
//!
//! The per-IP buckets are a bounded map: a bucket idle long enough to have refilled is the same
//! as a new one, so it is dropped (every [`PRUNE_EVERY`], or when the map has doubled since the
//! last pass); past [`MAX_IP_BUCKETS`] live buckets a new address is refused as rate limited
//! rather than given a fresh bucket by evicting a live one.
//!
//! Its maps use hashbrown's default hasher (foldhash, seeded at random per map) rather than
//! std's SipHash: the keys are clients' ids, so a seed an outsider cannot know still matters,
//! but every order hashes five to eight of them and SipHash was ~2 % of the shop's CPU per
//! redis-lua order (docs/lab/lab-log.md). Its dedup keys are typed ([`Key`]: item, who, id) and
//! looked up borrowed ([`KeyRef`]): an order's checks name no key in text and copy an id only
//! into a map that keeps it (formatting them was ~2 % of the shop's CPU per order).

use hashbrown::hash_map::EntryRef;
use hashbrown::{Equivalent, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most per-IP buckets held at once (about 100 bytes each).
pub const MAX_IP_BUCKETS: usize = 100_000;
/// Longest time between two passes that drop refilled per-IP buckets.
pub const PRUNE_EVERY: Duration = Duration::from_secs(10);

/// Gateway limits (shop flags, overridable per scenario).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatewaySettings {
    /// Global order admissions per second (0 = unlimited).
    pub rate_per_s: f64,
    /// Global bucket size.
    pub burst: f64,
    /// Per-IP order admissions per second (0 = unlimited).
    pub ip_rate_per_s: f64,
    /// Per-IP bucket size.
    pub ip_burst: f64,
    /// Most units all users behind one IP may hold (0 = no cap).
    pub ip_unit_cap: i64,
}

/// Why the gateway refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    RateLimited,
    Duplicate,
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn full(burst: f64) -> Self {
        Bucket {
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// Whether the bucket has refilled to `burst` by `now` (then it is as good as new).
    fn refilled(&self, rate: f64, burst: f64, now: Instant) -> bool {
        self.tokens + now.saturating_duration_since(self.last).as_secs_f64() * rate >= burst
    }

    fn take(&mut self, rate: f64, burst: f64, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate).min(burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Debug)]
struct State {
    global: Option<Bucket>,
    per_ip: HashMap<String, Bucket>,
    /// When the per-IP map was last pruned, and the size that triggers the next pass.
    pruned_at: Instant,
    prune_at_len: usize,
    in_flight: HashMap<Key, u32>,
    holding: HashMap<Key, i64>,
}

/// What a dedup key counts within an item: a buyer, a device or a client address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Who {
    User,
    Device,
    Ip,
}

/// A dedup key as the maps keep it.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Key {
    item: i64,
    who: Who,
    id: Box<str>,
}

/// A dedup key borrowed from the request: what the maps are searched by. It hashes as the
/// [`Key`] it names (the same fields in the same order; `&str` hashes as `Box<str>`).
#[derive(Debug, Clone, Copy, Hash)]
struct KeyRef<'a> {
    item: i64,
    who: Who,
    id: &'a str,
}

impl Equivalent<Key> for KeyRef<'_> {
    fn equivalent(&self, key: &Key) -> bool {
        self.item == key.item && self.who == key.who && self.id == &*key.id
    }
}

/// The key a map keeps for a borrowed one it did not hold yet (hashbrown's `entry_ref`).
impl From<&KeyRef<'_>> for Key {
    fn from(k: &KeyRef<'_>) -> Key {
        Key {
            item: k.item,
            who: k.who,
            id: k.id.into(),
        }
    }
}

impl Default for State {
    fn default() -> Self {
        State {
            global: None,
            per_ip: HashMap::new(),
            pruned_at: Instant::now(),
            prune_at_len: 1024,
            in_flight: HashMap::new(),
            holding: HashMap::new(),
        }
    }
}

impl State {
    /// The bucket of `ip`, created full; `None` when the map is full of live buckets.
    fn ip_bucket(&mut self, ip: &str, rate: f64, burst: f64, now: Instant) -> Option<&mut Bucket> {
        if !self.per_ip.contains_key(ip) {
            // A pass costs O(map): at most every PRUNE_EVERY, when the map doubled, or once a
            // second while it is full.
            let since = now.saturating_duration_since(self.pruned_at);
            let len = self.per_ip.len();
            let full = len >= MAX_IP_BUCKETS && since >= Duration::from_secs(1);
            if since >= PRUNE_EVERY || len >= self.prune_at_len || full {
                self.per_ip.retain(|_, b| !b.refilled(rate, burst, now));
                self.pruned_at = now;
                self.prune_at_len = (self.per_ip.len() * 2).max(1024);
            }
            if self.per_ip.len() >= MAX_IP_BUCKETS {
                return None;
            }
            self.per_ip.insert(ip.to_string(), Bucket::full(burst));
        }
        self.per_ip.get_mut(ip)
    }
}

/// The gateway of one shop instance.
#[derive(Debug)]
pub struct Gateway {
    settings: GatewaySettings,
    state: Mutex<State>,
}

/// Proof that a request was admitted; dropping it ends the in-flight dedup for its keys (the
/// request's own ids, borrowed).
pub struct Admission<'a> {
    gateway: &'a Gateway,
    item: i64,
    user: &'a str,
    device: Option<&'a str>,
}

impl Drop for Admission<'_> {
    fn drop(&mut self) {
        let mut st = self.gateway.state.lock().expect("gateway poisoned");
        for k in dedup_keys(self.item, self.user, self.device) {
            if let EntryRef::Occupied(mut n) = st.in_flight.entry_ref(&k) {
                *n.get_mut() -= 1;
                if *n.get() == 0 {
                    n.remove();
                }
            }
        }
    }
}

/// The in-flight and holding keys of a buyer (and its device) for `item`.
fn dedup_keys<'a>(
    item: i64,
    user: &'a str,
    device: Option<&'a str>,
) -> impl Iterator<Item = KeyRef<'a>> {
    let user = KeyRef {
        item,
        who: Who::User,
        id: user,
    };
    let device = device.map(|id| KeyRef {
        item,
        who: Who::Device,
        id,
    });
    std::iter::once(user).chain(device)
}

/// The holding key of client address `ip` for `item` (kept under an IP cap only).
fn ip_key(item: i64, ip: &str) -> KeyRef<'_> {
    KeyRef {
        item,
        who: Who::Ip,
        id: ip,
    }
}

impl Gateway {
    /// A gateway with these limits.
    pub fn new(settings: GatewaySettings) -> Self {
        Gateway {
            settings,
            state: Mutex::default(),
        }
    }

    /// The limits in force.
    pub fn settings(&self) -> &GatewaySettings {
        &self.settings
    }

    /// Admits or refuses one order request. `limit` is the item's purchase limit.
    pub fn admit<'a>(
        &'a self,
        item: i64,
        user: &'a str,
        device: Option<&'a str>,
        ip: &str,
        qty: i64,
        limit: i64,
    ) -> Result<Admission<'a>, Refusal> {
        self.admit_at(item, user, device, ip, qty, limit, Instant::now())
    }

    #[allow(clippy::too_many_arguments)]
    fn admit_at<'a>(
        &'a self,
        item: i64,
        user: &'a str,
        device: Option<&'a str>,
        ip: &str,
        qty: i64,
        limit: i64,
        now: Instant,
    ) -> Result<Admission<'a>, Refusal> {
        let s = &self.settings;
        let mut st = self.state.lock().expect("gateway poisoned");
        // Dedup first: a duplicate should not spend anyone's rate budget.
        for k in dedup_keys(item, user, device) {
            if st.in_flight.contains_key(&k)
                || st.holding.get(&k).copied().unwrap_or(0) + qty > limit
            {
                return Err(Refusal::Duplicate);
            }
        }
        if s.ip_unit_cap > 0
            && st.holding.get(&ip_key(item, ip)).copied().unwrap_or(0) + qty > s.ip_unit_cap
        {
            return Err(Refusal::Duplicate);
        }
        if s.rate_per_s > 0.0 {
            let burst = s.burst.max(1.0);
            let bucket = st.global.get_or_insert_with(|| Bucket::full(burst));
            if !bucket.take(s.rate_per_s, burst, now) {
                return Err(Refusal::RateLimited);
            }
        }
        if s.ip_rate_per_s > 0.0 {
            let burst = s.ip_burst.max(1.0);
            let admitted = st
                .ip_bucket(ip, s.ip_rate_per_s, burst, now)
                .is_some_and(|bucket| bucket.take(s.ip_rate_per_s, burst, now));
            if !admitted {
                return Err(Refusal::RateLimited);
            }
        }
        for k in dedup_keys(item, user, device) {
            *st.in_flight.entry_ref(&k).or_insert(0) += 1;
        }
        Ok(Admission {
            gateway: self,
            item,
            user,
            device,
        })
    }

    /// Records units now held (after a reservation) or given back (negative, after a release).
    /// An IP's units are kept only under an IP cap (`ip_unit_cap`), the one check that reads
    /// them.
    pub fn record_holding(&self, item: i64, user: &str, device: Option<&str>, ip: &str, qty: i64) {
        let ip = (self.settings.ip_unit_cap > 0).then(|| ip_key(item, ip));
        let mut st = self.state.lock().expect("gateway poisoned");
        for k in dedup_keys(item, user, device).chain(ip) {
            match st.holding.entry_ref(&k) {
                EntryRef::Occupied(mut held) => {
                    *held.get_mut() += qty;
                    if *held.get() <= 0 {
                        held.remove();
                    }
                }
                EntryRef::Vacant(none) => {
                    if qty > 0 {
                        none.insert(qty);
                    }
                }
            }
        }
    }

    /// How many per-IP buckets are held.
    #[cfg(test)]
    pub fn ip_buckets(&self) -> usize {
        self.state.lock().expect("gateway poisoned").per_ip.len()
    }

    /// Forgets everything about an item (a new sale was set up).
    pub fn reset_item(&self, item: i64) {
        let mut st = self.state.lock().expect("gateway poisoned");
        st.holding.retain(|k, _| k.item != item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No limit at all.
    fn open() -> GatewaySettings {
        GatewaySettings {
            rate_per_s: 0.0,
            burst: 0.0,
            ip_rate_per_s: 0.0,
            ip_burst: 0.0,
            ip_unit_cap: 0,
        }
    }

    #[test]
    fn a_second_request_in_flight_is_a_duplicate_until_the_first_ends() {
        let g = Gateway::new(open());
        let first = g.admit(1, "u", Some("d"), "ip", 1, 1).unwrap();
        assert_eq!(
            g.admit(1, "u", None, "ip", 1, 1).err(),
            Some(Refusal::Duplicate)
        );
        assert_eq!(
            g.admit(1, "other", Some("d"), "ip", 1, 1).err(),
            Some(Refusal::Duplicate)
        );
        drop(first);
        assert!(g.admit(1, "u", None, "ip", 1, 1).is_ok());
    }

    #[test]
    fn holders_are_refused_until_they_release() {
        let g = Gateway::new(open());
        g.record_holding(1, "u", None, "ip", 1);
        assert_eq!(
            g.admit(1, "u", None, "ip", 1, 1).err(),
            Some(Refusal::Duplicate)
        );
        assert!(
            g.admit(2, "u", None, "ip", 1, 1).is_ok(),
            "other items are not affected"
        );
        g.record_holding(1, "u", None, "ip", -1);
        assert!(g.admit(1, "u", None, "ip", 1, 1).is_ok());
    }

    #[test]
    fn a_user_a_device_and_an_address_are_counted_apart_per_item() {
        let g = Gateway::new(GatewaySettings {
            ip_unit_cap: 2,
            ..open()
        });
        // A device held under one user refuses another user on it; the same text as a user
        // id is another key.
        g.record_holding(1, "u", Some("d"), "10.0.0.1", 1);
        let refused = |user, device, ip| g.admit(1, user, device, ip, 1, 1).err();
        assert_eq!(
            refused("v", Some("d"), "10.0.0.2"),
            Some(Refusal::Duplicate)
        );
        assert_eq!(refused("d", None, "10.0.0.2"), None);
        // The address holds one unit of its cap of two: one more is admitted, then none.
        assert_eq!(refused("w", None, "10.0.0.1"), None);
        g.record_holding(1, "w", None, "10.0.0.1", 1);
        assert_eq!(refused("x", None, "10.0.0.1"), Some(Refusal::Duplicate));
        // A new sale of item 1 forgets its holdings, not item 2's.
        g.record_holding(2, "u", None, "10.0.0.1", 1);
        g.reset_item(1);
        assert_eq!(refused("x", None, "10.0.0.1"), None);
        assert_eq!(refused("u", Some("d"), "10.0.0.1"), None);
        assert_eq!(
            g.admit(2, "u", None, "10.0.0.3", 1, 1).err(),
            Some(Refusal::Duplicate)
        );
    }

    #[test]
    fn the_per_ip_bucket_refuses_a_burst_beyond_its_size() {
        let g = Gateway::new(GatewaySettings {
            ip_rate_per_s: 0.001,
            ip_burst: 3.0,
            ..open()
        });
        let admitted = (0..10)
            .filter(|i| g.admit(1, &format!("u{i}"), None, "1.2.3.4", 1, 1).is_ok())
            .count();
        assert_eq!(admitted, 3);
        assert!(
            g.admit(1, "x", None, "5.6.7.8", 1, 1).is_ok(),
            "other IPs have their own bucket"
        );
    }

    fn per_ip(rate: f64, burst: f64) -> Gateway {
        Gateway::new(GatewaySettings {
            ip_rate_per_s: rate,
            ip_burst: burst,
            ..open()
        })
    }

    #[test]
    fn idle_per_ip_buckets_are_dropped_once_they_have_refilled() {
        // 1 token/s, burst 2: a bucket idle for 2 s is full again.
        let g = per_ip(1.0, 2.0);
        let t0 = Instant::now();
        for i in 0..5000 {
            let ip = format!("10.0.{}.{}", i / 256, i % 256);
            assert!(g.admit_at(1, &format!("u{i}"), None, &ip, 1, 1, t0).is_ok());
        }
        assert_eq!(g.ip_buckets(), 5000, "all still draining: none may go");
        let _ = g.admit_at(1, "late", None, "10.9.9.9", 1, 1, t0 + PRUNE_EVERY);
        assert_eq!(
            g.ip_buckets(),
            1,
            "every bucket had refilled after PRUNE_EVERY"
        );
        // One IP that is still busy keeps its (drained) bucket across a pass.
        let g = per_ip(0.001, 1.0);
        assert!(g.admit_at(1, "a", None, "busy", 1, 1, t0).is_ok());
        let later = t0 + PRUNE_EVERY;
        let _ = g.admit_at(1, "b", None, "other", 1, 1, later);
        assert_eq!(g.ip_buckets(), 2);
        assert_eq!(
            g.admit_at(1, "c", None, "busy", 1, 1, later).err(),
            Some(Refusal::RateLimited),
            "pruning never hands a busy address a fresh bucket"
        );
    }

    #[test]
    fn the_per_ip_map_is_bounded_and_a_full_map_refuses_new_addresses() {
        // Buckets that refill only after ~11 days: none is ever idle enough to drop.
        let g = per_ip(0.000_001, 1.0);
        let t0 = Instant::now();
        for i in 0..MAX_IP_BUCKETS {
            let _ = g.admit_at(1, &format!("u{i}"), None, &format!("ip{i}"), 1, 1, t0);
        }
        assert_eq!(g.ip_buckets(), MAX_IP_BUCKETS);
        assert_eq!(
            g.admit_at(1, "new", None, "one-too-many", 1, 1, t0).err(),
            Some(Refusal::RateLimited)
        );
        assert_eq!(g.ip_buckets(), MAX_IP_BUCKETS);
    }
}
