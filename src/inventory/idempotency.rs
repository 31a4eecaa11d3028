//! `Idempotency-Key`: a retry of an order with the same key gets the order that key already
//! bought, never a second one, on every strategy.
//!
//! A client that timed out (or got a 5xx) cannot know whether it bought; it retries with the
//! same key and the shop answers with the first attempt's order: `201`, the same body, and
//! `Idempotent-Replayed: true`. A key reused for another buyer or quantity is refused (`422`).
//! Only a purchase that reserved units binds its key: a refusal (sold out, duplicate) leaves
//! the key free, so a retry of it is a new attempt.
//!
//! The database strategies store the key with the order (`orders.idempotency_key`, unique per
//! item: [`crate::store::IDEMPOTENCY_INDEX`]); [`settle`] is the one rule they all share,
//! applied by [`super::Inventory::purchase`] after the strategy ran, so the successful path
//! costs nothing extra:
//! - a keyed request the strategy refused as a duplicate (what a retry of a purchase that went
//!   through meets first: its buyer now holds the limit) looks its key up and, when it bought
//!   an order, answers with that order. So does one refused as sold out when a buyer may hold
//!   more than one unit (the retry then passes the limit check and meets the stock check);
//!   with a limit of one, sold-out answers — most of a flash sale's — cost no extra read. A
//!   retry whose order was since cancelled or expired is then answered as a new attempt
//!   would be: sold out, or (while stock lasts) the old order, never a second one;
//! - a keyed request that raced another with the same key past every check loses at the
//!   unique index: its insert fails, its transaction rolls back (a strategy that deducted
//!   outside the insert's transaction gives the units back first, as `naive` does), and the
//!   answer is the winner's order. A strategy must let that error through as it is
//!   ([`crate::store::StoreError::is_idempotency_conflict`]).
//!
//! `redis-lua` keeps the rule inside `lua/deduct.lua`, atomically with the deduct: a hash of
//! key → order id under the item's hash tag, checked before anything else; the key rides the
//! order's stream entry into its database row. A request its gateway refuses looks the key up
//! the same way (`RedisLua::replay`).

use super::{InventoryError, Outcome};
use crate::model::{Order, Purchase};
use crate::store::Store;
use crate::telemetry::shop_metrics;

/// What a stored order says about a request that carries its key.
pub fn replay_of(order_id: &str, user_id: &str, qty: i64, p: &Purchase) -> Outcome {
    if user_id == p.user_id && qty == p.qty {
        Outcome::Replayed {
            order_id: order_id.to_string(),
        }
    } else {
        Outcome::KeyReused
    }
}

fn replay(order: &Order, p: &Purchase) -> Outcome {
    replay_of(&order.id, &order.user_id, order.qty, p)
}

/// The database strategies' rule: turns a strategy's answer to a keyed request into the
/// replay of the order its key bought, when it bought one (see the module's notes).
/// `limit`: the item's purchase limit.
pub async fn settle(
    store: &Store,
    p: &Purchase,
    limit: i64,
    answer: Result<Outcome, InventoryError>,
) -> Result<Outcome, InventoryError> {
    let Some(key) = p.idempotency_key.as_deref() else {
        return answer;
    };
    match answer {
        Ok(Outcome::Duplicate) | Err(_) => {}
        Ok(Outcome::SoldOut) if limit > 1 => {}
        other => return other,
    }
    let conflict = matches!(&answer, Err(InventoryError::Store(e)) if e.is_idempotency_conflict());
    if answer.is_err() && !conflict {
        return answer;
    }
    match store.order_by_key(p.item_id, key).await? {
        Some(order) => {
            metrics::counter!(shop_metrics::IDEMPOTENT_REPLAYS).increment(1);
            Ok(replay(&order, p))
        }
        // Lost the race at the index, yet no order holds the key: the winner's transaction
        // rolled back after all. Nothing of this one committed either: busy, retry.
        None if conflict => Ok(Outcome::Busy("idempotency_race")),
        None => answer,
    }
}

/// Checks a client's key: printable ASCII (space allowed inside), 1 to
/// [`crate::model::MAX_KEY_LEN`] bytes once trimmed.
pub fn valid_key(key: &str) -> Result<&str, String> {
    let key = key.trim();
    let printable = key.bytes().all(|b| (0x20..0x7f).contains(&b));
    if key.is_empty() || key.len() > crate::model::MAX_KEY_LEN || !printable {
        return Err(format!(
            "Idempotency-Key must be 1 to {} printable ASCII characters",
            crate::model::MAX_KEY_LEN
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn purchase(user: &str, qty: i64) -> Purchase {
        Purchase {
            item_id: 1,
            user_id: user.into(),
            device_id: None,
            qty,
            client_ip: String::new(),
            idempotency_key: Some("k".into()),
        }
    }

    #[test]
    fn a_key_replays_only_for_the_same_buyer_and_quantity() {
        assert_eq!(
            replay_of("1-a", "u", 1, &purchase("u", 1)),
            Outcome::Replayed {
                order_id: "1-a".into()
            }
        );
        assert_eq!(
            replay_of("1-a", "u", 1, &purchase("v", 1)),
            Outcome::KeyReused
        );
        assert_eq!(
            replay_of("1-a", "u", 1, &purchase("u", 2)),
            Outcome::KeyReused
        );
    }

    #[test]
    fn keys_are_printable_ascii_of_bounded_length() {
        assert_eq!(valid_key("  run-1-b7-a0 "), Ok("run-1-b7-a0"));
        assert!(valid_key("").is_err());
        assert!(valid_key("   ").is_err());
        assert!(valid_key("é").is_err());
        assert!(valid_key("a\tb").is_err());
        assert!(valid_key(&"k".repeat(129)).is_err());
        assert!(valid_key(&"k".repeat(128)).is_ok());
    }
}
