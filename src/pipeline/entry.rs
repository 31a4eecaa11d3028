//! The events stream's entry, as the consumer reads it: one field, `event`, holding the type,
//! the order id, the user, the device, the quantity, the time (ms) and the Idempotency-Key,
//! joined by the ASCII unit separator ([`SEP`]). `lua/event.lua` writes it (its `event`) and
//! reads it back inside Redis (`event_fields`, for reconciliation and dead-lettering).
//!
//! One field rather than seven: every entry the consumer reads is three values to parse
//! instead of fifteen, and one map key instead of seven (the parse was ~9 % of the shop's CPU
//! per redis-lua order, docs/lab/lab-log.md). No id can hold the separator: the
//! shop refuses user and device ids with control characters, and keys that are not printable
//! ASCII. Entries with the seven named fields (`type`, `order`, `user`, `device`, `qty`, `at`,
//! `key`: what shops before this format wrote) are still read.

use crate::store::{PersistEvent, PersistKind};
use redis::streams::StreamId;
use redis::Value;

/// The one field of an entry.
pub const FIELD: &str = "event";
/// Between the parts of [`FIELD`]'s value.
pub const SEP: char = '\u{1f}';

/// A text value of an entry, borrowed.
fn text(v: &Value) -> Option<&str> {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        _ => None,
    }
}

/// An entry's field `name` (either form).
fn field<'a>(entry: &'a StreamId, name: &str) -> Option<&'a str> {
    match entry.map.get(FIELD) {
        Some(packed) => {
            let at = NAMES.iter().position(|n| *n == name)?;
            text(packed)?.split(SEP).nth(at)
        }
        None => text(entry.map.get(name)?),
    }
}

/// The parts of [`FIELD`], in order.
const NAMES: [&str; 7] = ["type", "order", "user", "device", "qty", "at", "key"];

/// The order id an entry names, if any (what a dead letter records of an entry it could not
/// decode).
pub fn order_of(entry: &StreamId) -> Option<String> {
    field(entry, "order").map(str::to_string)
}

/// Decodes one entry; `None` for an entry that is not an oversell event (dead-lettered).
pub fn decode(entry: &StreamId) -> Option<PersistEvent> {
    let parts: [&str; 7] = match entry.map.get(FIELD) {
        Some(packed) => {
            let mut split = text(packed)?.split(SEP);
            let mut parts = [""; 7];
            for p in &mut parts {
                *p = split.next()?;
            }
            if split.next().is_some() {
                return None;
            }
            parts
        }
        None => {
            let mut parts = [""; 7];
            for (i, name) in NAMES.iter().enumerate() {
                // `device` and `key` may be absent (an older release or pay: no key).
                match entry.map.get(*name).and_then(text) {
                    Some(v) => parts[i] = v,
                    None if matches!(*name, "device" | "key") => {}
                    None => return None,
                }
            }
            parts
        }
    };
    let [kind, order, user, device, qty, at, key] = parts;
    let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
    Some(PersistEvent {
        stream_id: entry.id.clone(),
        kind: PersistKind::parse(kind)?,
        order_id: order.to_string(),
        user_id: user.to_string(),
        device_id: some(device),
        qty: qty.parse().ok()?,
        at_ms: at.parse().ok()?,
        idempotency_key: some(key),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn entry(fields: &[(&str, &str)]) -> StreamId {
        let map: HashMap<String, Value> = fields
            .iter()
            .map(|(k, v)| (k.to_string(), Value::BulkString(v.as_bytes().to_vec())))
            .collect();
        StreamId {
            id: "5-1".into(),
            map,
            ..StreamId::default()
        }
    }

    fn packed(parts: &[&str]) -> StreamId {
        entry(&[(FIELD, &parts.join(&SEP.to_string()))])
    }

    #[test]
    fn a_packed_entry_and_its_named_fields_decode_the_same() {
        let p = packed(&["order", "1-ab", "u 1", "d-1", "2", "1700000000123", "k-1"]);
        let n = entry(&[
            ("type", "order"),
            ("order", "1-ab"),
            ("user", "u 1"),
            ("device", "d-1"),
            ("qty", "2"),
            ("at", "1700000000123"),
            ("key", "k-1"),
        ]);
        let (a, b) = (decode(&p).unwrap(), decode(&n).unwrap());
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_eq!(a.kind, PersistKind::Order);
        assert_eq!((a.qty, a.at_ms), (2, 1_700_000_000_123));
        assert_eq!(a.device_id.as_deref(), Some("d-1"));
        assert_eq!(a.idempotency_key.as_deref(), Some("k-1"));
        assert_eq!(a.stream_id, "5-1");
        assert_eq!(order_of(&p).as_deref(), Some("1-ab"));
        assert_eq!(order_of(&n).as_deref(), Some("1-ab"));
    }

    #[test]
    fn empty_device_and_key_are_none_and_an_old_release_without_a_key_decodes() {
        let p = decode(&packed(&["cancel", "1-ab", "u", "", "1", "7", ""])).unwrap();
        assert_eq!(p.kind, PersistKind::Cancel);
        assert_eq!((p.device_id, p.idempotency_key), (None, None));
        let old = entry(&[
            ("type", "pay"),
            ("order", "1-ab"),
            ("user", "u"),
            ("device", ""),
            ("qty", "1"),
            ("at", "7"),
        ]);
        let o = decode(&old).unwrap();
        assert_eq!((o.kind, o.idempotency_key), (PersistKind::Pay, None));
    }

    #[test]
    fn an_entry_that_is_not_an_event_is_refused() {
        let ok = ["order", "1-ab", "u", "", "1", "7", ""];
        assert!(decode(&packed(&ok)).is_some());
        assert!(decode(&packed(&ok[..6])).is_none(), "a part missing");
        let mut more = ok.to_vec();
        more.push("x");
        assert!(decode(&packed(&more)).is_none(), "a part too many");
        let mut kind = ok;
        kind[0] = "refund";
        assert!(decode(&packed(&kind)).is_none(), "an unknown type");
        let mut qty = ok;
        qty[4] = "one";
        assert!(
            decode(&packed(&qty)).is_none(),
            "a quantity that is not a number"
        );
        assert!(decode(&entry(&[("type", "order"), ("qty", "1")])).is_none());
        assert!(decode(&entry(&[])).is_none(), "a deleted entry (no fields)");
        assert_eq!(order_of(&entry(&[("junk", "1")])), None);
    }
}
