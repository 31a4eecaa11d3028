//! A buyer's user id, device id and IP address: spelled from a number when the schedule seeded
//! them (`u-17`, `bot-dev-4`, `10.1.0.18`: nothing stored but the number, so a plan of a
//! million buyers holds no text), or the text a buyers CSV gave.

use std::borrow::Cow;
use std::fmt;

/// One of a buyer's identifiers, as a request and the clients' records spell it.
#[derive(Clone, PartialEq, Eq)]
pub struct Ident(Repr);

#[derive(Clone, PartialEq, Eq)]
enum Repr {
    /// Spelled from `n` in its form (16 bytes in all, like the text's pointer and length).
    Seeded {
        form: Form,
        n: u32,
    },
    Given(Box<str>),
}

/// How a seeded identifier is spelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    /// `u-<index>`.
    User,
    /// `dev-<index>`.
    Device,
    /// `bot-<index>`.
    Bot,
    /// `bot-dev-<index>`.
    BotDevice,
    /// A person's address from the client pool: `10.<1 + k/62500>.<(k/250)%250>.<k%250+1>`.
    PersonIp,
    /// A bot's address from the bots' pool: `10.66.<k/250>.<k%250+1>`.
    BotIp,
}

impl Ident {
    /// Buyer `index`'s user id (`u-<index>`, a bot's `bot-<index>`).
    pub fn user(index: usize, bot: bool) -> Self {
        Self::seeded(if bot { Form::Bot } else { Form::User }, index)
    }

    /// Buyer `index`'s device id (`dev-<index>`, a bot's `bot-dev-<index>`).
    pub fn device(index: usize, bot: bool) -> Self {
        Self::seeded(if bot { Form::BotDevice } else { Form::Device }, index)
    }

    /// Address `k` of the people's pool or, for a bot, of the bots' pool.
    pub fn ip(k: u32, bot: bool) -> Self {
        Ident(Repr::Seeded {
            form: if bot { Form::BotIp } else { Form::PersonIp },
            n: k,
        })
    }

    /// Text given as it is (a buyers CSV's column).
    pub fn given(text: impl Into<Box<str>>) -> Self {
        Ident(Repr::Given(text.into()))
    }

    /// Bytes of text this holds on the heap: none when seeded.
    pub fn stored_bytes(&self) -> usize {
        match &self.0 {
            Repr::Given(s) => s.len(),
            Repr::Seeded { .. } => 0,
        }
    }

    fn seeded(form: Form, index: usize) -> Self {
        match u32::try_from(index) {
            Ok(n) => Ident(Repr::Seeded { form, n }),
            // Beyond 4 billion buyers the number no longer fits: the text is kept instead.
            Err(_) => {
                let prefix = Ident(Repr::Seeded { form, n: 0 }).prefix();
                Ident::given(format!("{prefix}{index}"))
            }
        }
    }

    fn prefix(&self) -> &'static str {
        match self.0 {
            Repr::Seeded { form, .. } => match form {
                Form::User => "u-",
                Form::Device => "dev-",
                Form::Bot => "bot-",
                Form::BotDevice => "bot-dev-",
                Form::PersonIp | Form::BotIp => "",
            },
            Repr::Given(_) => "",
        }
    }

    /// This user or device id as a map key ([`IdRef`]): no text spelled.
    pub fn id_ref(&self) -> IdRef<'_> {
        match &self.0 {
            Repr::Seeded { form, n } => IdRef::Seeded(*form, u64::from(*n)),
            Repr::Given(s) => IdRef::of(s),
        }
    }

    /// The text (borrowed when it was given, spelled when it was seeded).
    pub fn as_cow(&self) -> Cow<'_, str> {
        match &self.0 {
            Repr::Given(s) => Cow::Borrowed(s),
            Repr::Seeded { .. } => Cow::Owned(self.to_string()),
        }
    }
}

/// The seeded user and device spellings, by form: `bot-dev-` before `bot-` so that neither
/// swallows the other.
const FORMS: [(&str, Form); 4] = [
    ("u-", Form::User),
    ("dev-", Form::Device),
    ("bot-dev-", Form::BotDevice),
    ("bot-", Form::Bot),
];

/// `s` as a seeded user or device id (its form's position in `u-`, `dev-`, `bot-dev-`,
/// `bot-`, and its number) when it is one in canonical form: digits, no leading zero, within
/// `u64`. Two texts are equal exactly when they are the same text or the same (form, number).
pub fn seeded_number(s: &str) -> Option<(usize, Form, u64)> {
    let (i, form, digits) = FORMS
        .iter()
        .enumerate()
        .find_map(|(i, (p, form))| s.strip_prefix(p).map(|d| (i, *form, d)))?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    canonical
        .then(|| digits.parse::<u64>().ok())
        .flatten()
        .map(|n| (i, form, n))
}

/// The text of seeded id `n` of form position `form` (as [`seeded_number`] numbers them).
pub fn seeded_spelling(form: usize, n: u64) -> String {
    format!("{}{n}", FORMS[form].0)
}

/// A user or device id as a map key: equal (and hashed alike) exactly when the texts are, with
/// a seeded id kept as its number (a text that spells one in canonical form is that number).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdRef<'a> {
    Seeded(Form, u64),
    Text(&'a str),
}

impl IdRef<'static> {
    /// Buyer `index`'s seeded user id ([`Ident::user`]).
    pub fn user(index: usize, bot: bool) -> Self {
        IdRef::Seeded(if bot { Form::Bot } else { Form::User }, index as u64)
    }

    /// Buyer `index`'s seeded device id ([`Ident::device`]).
    pub fn device(index: usize, bot: bool) -> Self {
        let form = if bot { Form::BotDevice } else { Form::Device };
        IdRef::Seeded(form, index as u64)
    }
}

impl<'a> IdRef<'a> {
    /// `s` as a key.
    pub fn of(s: &'a str) -> Self {
        match seeded_number(s) {
            Some((_, form, n)) => IdRef::Seeded(form, n),
            None => IdRef::Text(s),
        }
    }
}

impl fmt::Display for IdRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdRef::Seeded(form @ (Form::PersonIp | Form::BotIp), n) => Ident(Repr::Seeded {
                form: *form,
                n: *n as u32,
            })
            .fmt(f),
            IdRef::Seeded(form, n) => {
                let prefix = Ident(Repr::Seeded { form: *form, n: 0 }).prefix();
                write!(f, "{prefix}{n}")
            }
            IdRef::Text(s) => f.write_str(s),
        }
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Given(s) => f.write_str(s),
            Repr::Seeded { form, n } => {
                let k = *n;
                match form {
                    Form::PersonIp => {
                        write!(
                            f,
                            "10.{}.{}.{}",
                            1 + k / 62500,
                            (k / 250) % 250,
                            k % 250 + 1
                        )
                    }
                    Form::BotIp => write!(f, "10.66.{}.{}", k / 250, k % 250 + 1),
                    _ => write!(f, "{}{k}", self.prefix()),
                }
            }
        }
    }
}

/// Spelled as its text's `Debug` (quoted), as a `String` id was.
impl fmt::Debug for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_cow().as_ref(), f)
    }
}

impl From<String> for Ident {
    fn from(s: String) -> Self {
        Ident::given(s)
    }
}

impl From<&str> for Ident {
    fn from(s: &str) -> Self {
        Ident::given(s)
    }
}

impl PartialEq<str> for Ident {
    fn eq(&self, other: &str) -> bool {
        match &self.0 {
            Repr::Given(s) => &**s == other,
            Repr::Seeded { .. } => self.as_cow() == other,
        }
    }
}

impl PartialEq<&str> for Ident {
    fn eq(&self, other: &&str) -> bool {
        self == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_ref_is_equal_exactly_when_the_text_is() {
        let ids = [
            Ident::user(17, false),
            Ident::given("u-17"),
            Ident::given("u-017"),
            Ident::device(17, true),
            Ident::given("bot-dev-17"),
            Ident::given("bot-17"),
            Ident::given("alice"),
        ];
        for a in &ids {
            for b in &ids {
                let same = a.to_string() == b.to_string();
                assert_eq!(a.id_ref() == b.id_ref(), same, "{a:?} {b:?}");
            }
            assert_eq!(a.id_ref().to_string(), a.to_string());
        }
        assert_eq!(IdRef::user(17, false), ids[0].id_ref());
        assert_eq!(IdRef::device(17, true), ids[4].id_ref());
    }

    #[test]
    fn seeded_ids_are_spelled_as_the_schedule_always_spelled_them_and_hold_no_text() {
        assert_eq!(Ident::user(17, false).to_string(), "u-17");
        assert_eq!(Ident::user(17, true).to_string(), "bot-17");
        assert_eq!(Ident::device(4, false).to_string(), "dev-4");
        assert_eq!(Ident::device(4, true).to_string(), "bot-dev-4");
        assert_eq!(Ident::ip(0, false).to_string(), "10.1.0.1");
        assert_eq!(Ident::ip(62_751, false).to_string(), "10.2.1.2");
        assert_eq!(Ident::ip(251, true).to_string(), "10.66.1.2");
        assert_eq!(Ident::given("alice").to_string(), "alice");
        assert_eq!(format!("{:?}", Ident::user(3, false)), "\"u-3\"");
        assert_eq!(Ident::user(3, false), "u-3");
        assert_eq!(std::mem::size_of::<Ident>(), 16, "a pointer and a length");
        let big = usize::try_from(u64::from(u32::MAX) + 5).unwrap();
        assert_eq!(Ident::user(big, false).id_ref(), IdRef::user(big, false));
        assert_eq!(IdRef::user(big, false).to_string(), format!("u-{big}"));
        assert_eq!(Ident::user(big, false).to_string(), format!("u-{big}"));
    }
}
