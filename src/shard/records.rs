//! A shard file's clients' records (`clients.acks`, `clients.attempts`): spelled out in the
//! file, as `oversell.shard/v1` has them, but compact in memory on both sides. Writing spells
//! one record at a time from the recorder's [`ClientRecords`]; reading keeps each record
//! compact as soon as it is parsed. Neither side ever holds a spelled-out copy of a shard's
//! millions of records (at 2,500,000 buyers a shard, that copy was larger than the records).

use crate::traffic::recorder::{Ack, Attempt, ClientRecords};
use serde::de::{DeserializeOwned, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// The order attempts of a shard's records (the file's `clients.attempts`).
#[derive(Debug, Clone, Default)]
pub struct FileAttempts(Arc<ClientRecords>);

/// The acknowledgements of a shard's records (the file's `clients.acks`).
#[derive(Debug, Clone, Default)]
pub struct FileAcks(Arc<ClientRecords>);

/// Both lists of `records`, to be written (one copy of the records, shared).
pub fn split(records: ClientRecords) -> (FileAttempts, FileAcks) {
    let records = Arc::new(records);
    (FileAttempts(records.clone()), FileAcks(records))
}

/// The records of the two lists read from a file, as one (the attempts' records, with the
/// acknowledgements' appended).
pub fn join(attempts: FileAttempts, acks: FileAcks) -> ClientRecords {
    let attempts = Arc::try_unwrap(attempts.0).unwrap_or_else(|shared| (*shared).clone());
    attempts.with_acks_of(&acks.0)
}

impl Serialize for FileAttempts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.attempts().map(|a| a.spelled()))
    }
}

impl Serialize for FileAcks {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.acks().map(|a| a.spelled()))
    }
}

/// A spelled-out record that is kept compact as soon as it is read.
trait Spelled: DeserializeOwned {
    const WHAT: &'static str;
    fn keep(self, into: &mut ClientRecords);
}

impl Spelled for Attempt {
    const WHAT: &'static str = "a list of order attempts";
    fn keep(self, into: &mut ClientRecords) {
        into.push_spelled_attempt(&self);
    }
}

impl Spelled for Ack {
    const WHAT: &'static str = "a list of acknowledged orders";
    fn keep(self, into: &mut ClientRecords) {
        into.push_spelled_ack(&self);
    }
}

/// Reads a list of `T`, one at a time, into compact records.
struct Keep<T>(PhantomData<T>);

impl<'de, T: Spelled> Visitor<'de> for Keep<T> {
    type Value = ClientRecords;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(T::WHAT)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ClientRecords, A::Error> {
        let mut records = ClientRecords::default();
        while let Some(r) = seq.next_element::<T>()? {
            r.keep(&mut records);
        }
        Ok(records)
    }
}

impl<'de> Deserialize<'de> for FileAttempts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(Keep::<Attempt>(PhantomData))
            .map(|r| FileAttempts(Arc::new(r)))
    }
}

impl<'de> Deserialize<'de> for FileAcks {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(Keep::<Ack>(PhantomData))
            .map(|r| FileAcks(Arc::new(r)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::recorder::{Answer, AnswerClass};

    fn attempt(key: &str, buyer: usize, order_id: Option<&str>, at_ms: u64) -> Attempt {
        Attempt {
            key: key.into(),
            buyer,
            answer: if order_id.is_some() {
                Answer::Created
            } else {
                Answer::SoldOut
            },
            class: if order_id.is_some() {
                AnswerClass::Acknowledged
            } else {
                AnswerClass::Refused
            },
            order_id: order_id.map(Into::into),
            at_ms,
            retry: false,
        }
    }

    #[test]
    fn records_written_one_at_a_time_read_back_as_they_were() {
        let attempts = vec![
            attempt("ovs-r1-0-0", 0, Some("o-1"), 3),
            attempt("ovs-r1-1-0", 1, None, 4),
            attempt("given-key", 2, Some("o-2"), 9),
        ];
        let acks: Vec<Ack> = [(0, "ovs-r1-0-0", "o-1", 3), (2, "given-key", "o-2", 9)]
            .into_iter()
            .map(|(buyer, key, id, at_ms)| Ack {
                key: Some(key.into()),
                order_id: Some(id.into()),
                buyer,
                user_id: "someone-else".into(),
                device_id: format!("d-{buyer}"),
                bot: false,
                at_ms,
                sent_ms: at_ms - 1,
                cancel_sent_ms: None,
                paid_ms: Some(at_ms + 5),
            })
            .collect();
        let (a, k) = split(ClientRecords::from_spelled(&attempts, &acks));
        let written = serde_json::to_string(&(a, k)).unwrap();
        let spelled: (Vec<Attempt>, Vec<Ack>) = serde_json::from_str(&written).unwrap();
        assert_eq!(
            spelled.0, attempts,
            "the file spells the attempts as they were"
        );
        let (a, k): (FileAttempts, FileAcks) = serde_json::from_str(&written).unwrap();
        let (back_attempts, back_acks) = join(a, k).to_spelled();
        assert_eq!(back_attempts, attempts);
        let json = |v: &Vec<Ack>| serde_json::to_value(v).unwrap();
        assert_eq!(json(&back_acks), json(&acks));
    }

    #[test]
    fn a_record_that_is_not_one_is_refused_naming_the_list() {
        let e = serde_json::from_str::<FileAttempts>("{}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a list of order attempts"), "{e}");
        let e = serde_json::from_str::<FileAcks>(r#"[{"buyer": 1}]"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing field"), "{e}");
    }
}
