//! An order attempt's idempotency key as the records hold it: most keys are an attempt's number
//! (`ovs-<run>-<buyer>-<n>`, spelled only when a person reads it), the rest their own text.
//! [`KeyRef`] compares, hashes and orders exactly as its spelled text does, so a key read back
//! from an order row (text) finds the attempt that sent it (a number) without the records ever
//! spelling ten million keys.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};

/// An idempotency key, borrowed from the records: attempt `n` of buyer `buyer` in run `run`,
/// or a text ("" for none).
#[derive(Debug, Clone, Copy)]
pub enum KeyRef<'a> {
    Attempt { run: &'a str, buyer: u32, n: u32 },
    Text(&'a str),
}

/// A decimal in canonical form (digits, no leading zero but "0" itself), within `u32`.
fn canonical(s: &str) -> Option<u32> {
    let b = s.as_bytes();
    let ok = !b.is_empty() && b.iter().all(u8::is_ascii_digit) && (b[0] != b'0' || b.len() == 1);
    ok.then(|| s.parse().ok()).flatten()
}

/// The longest spelling kept on the stack when a key is hashed or ordered.
const SPELLED_MAX: usize = 96;

impl<'a> KeyRef<'a> {
    /// `s`, if it is attempt `buyer`/`n` of run `run` spelled: `ovs-<run>-<buyer>-<n>`.
    pub fn spells(s: &str, run: &str, buyer: u32, n: u32) -> bool {
        let parse = || {
            let rest = s
                .strip_prefix("ovs-")?
                .strip_prefix(run)?
                .strip_prefix('-')?;
            let (b, m) = rest.split_once('-')?;
            Some((canonical(b)?, canonical(m)?))
        };
        parse() == Some((buyer, n))
    }

    /// The run, buyer and attempt number `s` spells, if it spells one: spelled again they give
    /// `s` exactly.
    pub fn parse(s: &str) -> Option<(&str, u32, u32)> {
        let (rest, n) = s.strip_prefix("ovs-")?.rsplit_once('-')?;
        let (run, buyer) = rest.rsplit_once('-')?;
        Some((run, canonical(buyer)?, canonical(n)?))
    }

    /// Whether this key is `s`, spelled.
    pub fn is(&self, s: &str) -> bool {
        match *self {
            KeyRef::Attempt { run, buyer, n } => KeyRef::spells(s, run, buyer, n),
            KeyRef::Text(t) => t == s,
        }
    }

    /// Whether this is no key ("").
    pub fn is_empty(&self) -> bool {
        matches!(self, KeyRef::Text(""))
    }

    /// `f` of the key spelled (on the stack when it fits).
    pub fn with_text<R>(&self, f: impl FnOnce(&str) -> R) -> R {
        match *self {
            KeyRef::Text(t) => f(t),
            KeyRef::Attempt { .. } => {
                let mut buf = StackText {
                    buf: [0; SPELLED_MAX],
                    len: 0,
                };
                if fmt::write(&mut buf, format_args!("{self}")).is_ok() {
                    f(std::str::from_utf8(&buf.buf[..buf.len]).expect("written as text"))
                } else {
                    f(&self.to_string())
                }
            }
        }
    }
}

/// A text written into a fixed buffer; writing past its end fails.
struct StackText {
    buf: [u8; SPELLED_MAX],
    len: usize,
}

impl fmt::Write for StackText {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        let room = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        room.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl fmt::Display for KeyRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            KeyRef::Attempt { run, buyer, n } => write!(f, "ovs-{run}-{buyer}-{n}"),
            KeyRef::Text(t) => f.write_str(t),
        }
    }
}

impl PartialEq for KeyRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        match (*self, *other) {
            // The last two parts of a spelling are its numbers: two runs never spell alike.
            (
                KeyRef::Attempt { run, buyer, n },
                KeyRef::Attempt {
                    run: r,
                    buyer: b,
                    n: m,
                },
            ) => (buyer, n) == (b, m) && run == r,
            (a @ KeyRef::Attempt { .. }, KeyRef::Text(t))
            | (KeyRef::Text(t), a @ KeyRef::Attempt { .. }) => a.is(t),
            (KeyRef::Text(a), KeyRef::Text(b)) => a == b,
        }
    }
}

impl Eq for KeyRef<'_> {}

impl PartialEq<str> for KeyRef<'_> {
    fn eq(&self, other: &str) -> bool {
        self.is(other)
    }
}

impl PartialEq<String> for KeyRef<'_> {
    fn eq(&self, other: &String) -> bool {
        self.is(other)
    }
}

impl PartialEq<&str> for KeyRef<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

/// As the spelled text hashes (`str`'s hash): a key found as text finds it as a number.
impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.with_text(|t| t.hash(state));
    }
}

/// As the spelled texts order.
impl Ord for KeyRef<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.with_text(|a| other.with_text(|b| a.cmp(b)))
    }
}

impl PartialOrd for KeyRef<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashbrown::DefaultHashBuilder;
    use std::hash::BuildHasher;

    fn attempt(run: &str, buyer: u32, n: u32) -> KeyRef<'_> {
        KeyRef::Attempt { run, buyer, n }
    }

    #[test]
    fn a_number_equals_hashes_and_orders_as_its_spelling() {
        let h = DefaultHashBuilder::default();
        let cases = [
            (attempt("ab12", 0, 0), "ovs-ab12-0-0"),
            (attempt("ab12", 17, 3), "ovs-ab12-17-3"),
            (
                attempt("a-b", u32::MAX, u32::MAX),
                "ovs-a-b-4294967295-4294967295",
            ),
        ];
        for (k, s) in cases {
            assert_eq!(k.to_string(), s);
            assert_eq!(k, KeyRef::Text(s));
            assert_eq!(KeyRef::Text(s), k);
            assert!(k == *s);
            assert_eq!(h.hash_one(k), h.hash_one(s), "{s}");
            assert_eq!(h.hash_one(k), h.hash_one(KeyRef::Text(s)), "{s}");
        }
        let mut keys = [
            attempt("r", 10, 0),
            KeyRef::Text("ovs-r-9-0"),
            attempt("r", 1, 2),
            KeyRef::Text("x"),
        ];
        keys.sort();
        let spelled: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let mut sorted = spelled.clone();
        sorted.sort();
        assert_eq!(spelled, sorted);
    }

    #[test]
    fn a_text_that_only_looks_like_a_number_is_not_it() {
        let k = attempt("r", 7, 0);
        for s in [
            "ovs-r-07-0",
            "ovs-r-7-00",
            "ovs-r-7-",
            "ovs-r--0",
            "ovs-r-7-0-1",
            "ovs-r-7-0 ",
            "ovs-rr-7-0",
            "ovs-7-0",
            "ovs-r-4294967303-0",
            "ovs-r-+7-0",
            "",
        ] {
            assert_ne!(k, KeyRef::Text(s), "{s:?}");
        }
        assert_ne!(attempt("r", 7, 0), attempt("r", 7, 1));
        assert_ne!(attempt("r", 7, 0), attempt("s", 7, 0));
        assert!(KeyRef::Text("").is_empty());
        assert!(!k.is_empty());
    }

    #[test]
    fn a_spelling_parses_back_to_its_numbers_and_nothing_else_does() {
        for s in ["ovs-ab12-17-3", "ovs-a-b-0-0", "ovs--1-2"] {
            let (run, buyer, n) = KeyRef::parse(s).expect(s);
            assert_eq!(attempt(run, buyer, n).to_string(), s);
        }
        assert_eq!(KeyRef::parse("ovs-a-b-0-0"), Some(("a-b", 0, 0)));
        for s in [
            "ovs-r-07-0",
            "ovs-r-7",
            "ovs-7-0",
            "r-7-0",
            "ovs-r-7-x",
            "ovs-r-99999999999-0",
        ] {
            assert_eq!(KeyRef::parse(s), None, "{s}");
        }
    }

    #[test]
    fn a_run_key_too_long_for_the_stack_still_hashes_as_its_spelling() {
        let run = "r".repeat(200);
        let k = attempt(&run, 1, 2);
        let s = format!("ovs-{run}-1-2");
        let h = DefaultHashBuilder::default();
        assert_eq!(h.hash_one(k), h.hash_one(s.as_str()));
        assert_eq!(k, KeyRef::Text(&s));
    }
}
