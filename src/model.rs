//! The shop's data model: items on sale, orders and their state machine, purchase requests.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A sale's item as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Item {
    pub id: i64,
    pub name: String,
    pub price_cents: i64,
    pub initial_stock: i64,
    pub stock: i64,
    pub version: i64,
    pub purchase_limit: i64,
}

/// What `PUT /api/items/{id}` sets up: a fresh sale.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SaleSetup {
    pub stock: i64,
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default)]
    pub price_cents: i64,
    #[serde(default = "default_limit")]
    pub purchase_limit: i64,
}

fn default_name() -> String {
    "flash-sale item".into()
}

fn default_limit() -> i64 {
    1
}

/// Largest stock a sale may be set up with (keeps arithmetic far from overflow).
pub const MAX_STOCK: i64 = 1_000_000_000;
/// Longest user or device id accepted, in bytes (the `orders.user_id` and `device_id`
/// columns' length); also a text `[item] id` and a `--buyers-csv` id.
pub const MAX_ID_LEN: usize = 128;
/// Longest order id accepted in a path (the `orders.id` column's length).
pub const MAX_ORDER_ID_LEN: usize = 64;
/// Longest `Idempotency-Key` accepted (the `orders.idempotency_key` column's length).
pub const MAX_KEY_LEN: usize = 128;

impl SaleSetup {
    /// Checks the setup; the error names the field and what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        if !(0..=MAX_STOCK).contains(&self.stock) {
            return Err(format!("stock must be between 0 and {MAX_STOCK}"));
        }
        if !(1..=1000).contains(&self.purchase_limit) {
            return Err("purchase_limit must be between 1 and 1000".into());
        }
        if self.price_cents < 0 {
            return Err("price_cents must not be negative".into());
        }
        if self.name.trim().is_empty() || self.name.len() > 200 {
            return Err("name must be 1 to 200 characters".into());
        }
        Ok(())
    }
}

/// A request to buy `qty` units of `item_id`, already validated by the shop.
#[derive(Debug, Clone)]
pub struct Purchase {
    pub item_id: i64,
    pub user_id: String,
    pub device_id: Option<String>,
    pub qty: i64,
    /// The client's address (peer or `X-Forwarded-For`), used by the gateway.
    pub client_ip: String,
    /// The request's `Idempotency-Key`: a retry with the same key gets the order this key
    /// already bought, never a second one (see `inventory::idempotency`).
    pub idempotency_key: Option<String>,
}

/// The order state machine: `pending_payment → paid | cancelled | expired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    PendingPayment,
    Paid,
    Cancelled,
    Expired,
}

impl OrderStatus {
    /// All states, in display order.
    pub const ALL: [OrderStatus; 4] = [
        OrderStatus::PendingPayment,
        OrderStatus::Paid,
        OrderStatus::Cancelled,
        OrderStatus::Expired,
    ];

    /// The wire and database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::PendingPayment => "pending_payment",
            OrderStatus::Paid => "paid",
            OrderStatus::Cancelled => "cancelled",
            OrderStatus::Expired => "expired",
        }
    }

    /// Parses the wire spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Whether an order in this state counts as sold (holds its units).
    pub fn holds_stock(self) -> bool {
        matches!(self, OrderStatus::PendingPayment | OrderStatus::Paid)
    }
}

impl fmt::Display for OrderStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An order status as a report counts it (`orders_by_status`): one of ours, or a foreign
/// shop's own spelling (`REFUNDED`). Stored as its spelling; compared, ordered and looked up
/// by it too (so `counts["paid"]` finds ours).
#[derive(Debug, Clone)]
pub enum StatusKey {
    Ours(OrderStatus),
    Theirs(String),
}

impl StatusKey {
    /// Its spelling.
    pub fn as_str(&self) -> &str {
        match self {
            StatusKey::Ours(s) => s.as_str(),
            StatusKey::Theirs(s) => s,
        }
    }
}

impl From<OrderStatus> for StatusKey {
    fn from(s: OrderStatus) -> Self {
        StatusKey::Ours(s)
    }
}

impl From<String> for StatusKey {
    /// Ours when it is our spelling, else theirs as written.
    fn from(s: String) -> Self {
        OrderStatus::parse(&s).map_or(StatusKey::Theirs(s), StatusKey::Ours)
    }
}

impl PartialEq for StatusKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for StatusKey {}

impl PartialOrd for StatusKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StatusKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for StatusKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl std::borrow::Borrow<str> for StatusKey {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for StatusKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StatusKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StatusKey {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(StatusKey::from)
    }
}

/// An order row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    pub id: String,
    pub item_id: i64,
    pub user_id: String,
    pub device_id: Option<String>,
    pub qty: i64,
    pub status: OrderStatus,
    pub created_at_ms: i64,
    /// When the order last changed state (for a released order: when its units went back).
    pub updated_at_ms: i64,
    /// The `Idempotency-Key` of the request that bought it (`None`: sent without one).
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// The stock the purchase read before it decided, where its strategy reads one outside a
    /// single atomic step (naive, and the defects that read then write): what a proof of
    /// oversell shows ("both read 1"). `None` where the decision reads none of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stock_read: Option<i64>,
}

impl Order {
    /// A new `pending_payment` order for a purchase, with a fresh id.
    pub fn pending(p: &Purchase) -> Order {
        let now = now_ms();
        Order {
            id: new_order_id(p.item_id),
            item_id: p.item_id,
            user_id: p.user_id.clone(),
            device_id: p.device_id.clone(),
            qty: p.qty,
            status: OrderStatus::PendingPayment,
            created_at_ms: now,
            updated_at_ms: now,
            idempotency_key: p.idempotency_key.clone(),
            stock_read: None,
        }
    }
}

/// Builds a new order id. The item id leads so any part of the shop can find the item's keys
/// from the id alone (`pay`/`cancel` carry only the order id).
pub fn new_order_id(item_id: i64) -> String {
    format!("{item_id}-{}", order_uuid().simple())
}

/// An order id's UUID: version 7 (the millisecond it was made, then 74 random bits), the random
/// bits from the thread's own cryptographically secure generator (`rand::rng()`, seeded from the
/// system and reseeded) rather than `Uuid::now_v7`'s `getrandom` system call on every order.
/// Ids are unique, not ordered within a millisecond: nothing sorts by them.
fn order_uuid() -> uuid::Uuid {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let random: [u8; 10] = rand::random();
    uuid::Builder::from_unix_timestamp_millis(ms, &random).into_uuid()
}

/// The item id encoded in an order id, if it is one of ours.
pub fn item_of_order(order_id: &str) -> Option<i64> {
    let (item, rest) = order_id.split_once('-')?;
    if rest.is_empty() {
        return None;
    }
    item.parse().ok()
}

/// A new order id of `redis-buckets` bucket `bucket`: `<item>-b<bucket>-<uuid>`, so
/// [`item_of_order`] reads its item as for every other id and [`bucket_of_order`] its bucket.
pub fn new_bucket_order_id(item_id: i64, bucket: u32) -> String {
    format!("{item_id}-b{bucket}-{}", order_uuid().simple())
}

/// The `redis-buckets` bucket encoded in an order id (`None` for any other id).
pub fn bucket_of_order(order_id: &str) -> Option<u32> {
    let (_, rest) = order_id.split_once('-')?;
    let (bucket, uuid) = rest.strip_prefix('b')?.split_once('-')?;
    if uuid.is_empty() {
        return None;
    }
    bucket.parse().ok()
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// What one reconciliation pass found and did (a redis-lua shop's `POST
/// /api/items/{id}/reconcile` answer, and a report's `reconcile`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReconcilePass {
    pub item_id: i64,
    pub db_stock: i64,
    pub redis_stock: i64,
    pub expected_redis_stock: i64,
    /// Redis stock minus what it should be: positive = phantom units in Redis (would oversell
    /// the database), negative = leaked units (would undersell).
    pub residual: i64,
    pub corrected: bool,
    /// The correction was held back: an entry the database counts as applied is still pending
    /// on a consumer (it will be claimed and persisted; the next pass corrects), or the stream
    /// was trimmed past the snapshot's mark (a lagging replica; the next pass corrects).
    #[serde(default)]
    pub deferred: bool,
    pub alerted: bool,
    /// Which database the snapshot came from.
    pub source: std::borrow::Cow<'static, str>,
    /// The snapshot's low-water mark: every stream entry at or below it was applied.
    #[serde(default)]
    pub low_water_mark: String,
    /// Stream entries after the mark counted as in flight.
    #[serde(default)]
    pub in_flight: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_carry_their_item() {
        let id = new_order_id(42);
        assert_eq!(item_of_order(&id), Some(42));
        assert_eq!(item_of_order("nope"), None);
        assert_eq!(item_of_order("7-"), None);
        assert_eq!(bucket_of_order(&id), None);
    }

    #[test]
    fn order_ids_are_version_7_uuids_of_now_and_never_repeat() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let ids: std::collections::HashSet<String> =
            (0..100_000).map(|_| new_order_id(3)).collect();
        assert_eq!(
            ids.len(),
            100_000,
            "100,000 ids made in a few milliseconds all differ"
        );
        let id = ids.iter().next().unwrap();
        let u = uuid::Uuid::parse_str(id.strip_prefix("3-").unwrap()).unwrap();
        assert_eq!(u.get_version(), Some(uuid::Version::SortRand));
        assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
        let (secs, nanos) = u.get_timestamp().unwrap().to_unix();
        let ms = secs * 1000 + u64::from(nanos) / 1_000_000;
        assert!(
            ms >= before && ms < before + 60_000,
            "{ms} is not now ({before})"
        );
    }

    #[test]
    fn a_status_key_keeps_its_json_spelling_and_is_ours_when_it_can_be() {
        use std::collections::BTreeMap;
        let old = r#"{"cancelled":10,"expired":0,"paid":128,"pending_payment":15,"REFUNDED":2}"#;
        let m: BTreeMap<StatusKey, i64> = serde_json::from_str(old).unwrap();
        assert!(matches!(
            m.keys().find(|k| k.as_str() == "pending_payment"),
            Some(StatusKey::Ours(OrderStatus::PendingPayment))
        ));
        assert!(matches!(
            m.keys().find(|k| k.as_str() == "REFUNDED"),
            Some(StatusKey::Theirs(_))
        ));
        assert_eq!(m["paid"], 128, "looked up by its spelling");
        let back = serde_json::to_string(&m).unwrap();
        assert_eq!(
            back,
            r#"{"REFUNDED":2,"cancelled":10,"expired":0,"paid":128,"pending_payment":15}"#
        );
        let again: BTreeMap<StatusKey, i64> = serde_json::from_str(&back).unwrap();
        assert_eq!(again, m);
    }

    #[test]
    fn bucket_order_ids_carry_item_and_bucket() {
        let id = new_bucket_order_id(42, 7);
        assert_eq!(item_of_order(&id), Some(42));
        assert_eq!(bucket_of_order(&id), Some(7));
        assert!(id.len() <= MAX_ORDER_ID_LEN, "fits orders.id: {id}");
        assert_eq!(bucket_of_order("42-bx-abc"), None);
        assert_eq!(bucket_of_order("42-b3-"), None);
    }

    #[test]
    fn status_round_trips() {
        for st in OrderStatus::ALL {
            assert_eq!(OrderStatus::parse(st.as_str()), Some(st));
        }
        assert!(OrderStatus::Paid.holds_stock());
        assert!(!OrderStatus::Expired.holds_stock());
    }
}
