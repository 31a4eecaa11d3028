//! Placeholders in request templates (the `[target]` mapping's requests, a `[watch]` gauge's
//! URL): the built-in `{item_id}`, `{user_id}`, ... and named
//! ones (a `--buyers-csv` column like `{email}`, a value a request extracts like `{token}`),
//! found when the scenario is read and expanded in one pass when a request is built. Named
//! ones are checked against the CSV's columns and the extracted names when the plan is built
//! ([`crate::traffic::mapping::Mapping::check_names`]). `{env:NAME}` is the environment variable `NAME`, read
//! once when the plan is built ([`crate::traffic::mapping::Mapping::env_values`]), so a scenario need carry no
//! literal secret; its value is a secret (masked in every sample).
//!
//! Expansion never rescans what it inserted, so a user id that reads `{order_id}` stays those
//! literal characters. Values going into a path are percent-encoded (everything but RFC 3986's
//! unreserved characters), so an order id like `../admin` or `//evil.example` stays one path
//! segment of the target; values going into a JSON body are JSON-escaped; values going into a
//! header have their control characters (CR, LF, ...) percent-encoded, so no value can end a
//! header line; form values are expanded as they are and the whole value form-encoded.

use std::borrow::Cow;

/// A value a template may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placeholder {
    ItemId,
    Stock,
    PurchaseLimit,
    Name,
    PriceCents,
    Qty,
    UserId,
    DeviceId,
    OrderId,
}

impl Placeholder {
    /// Every placeholder, in the order error messages list them.
    pub const ALL: [Placeholder; 9] = [
        Placeholder::ItemId,
        Placeholder::Stock,
        Placeholder::PurchaseLimit,
        Placeholder::Name,
        Placeholder::PriceCents,
        Placeholder::Qty,
        Placeholder::UserId,
        Placeholder::DeviceId,
        Placeholder::OrderId,
    ];

    /// The name between the braces.
    pub fn name(self) -> &'static str {
        match self {
            Placeholder::ItemId => "item_id",
            Placeholder::Stock => "stock",
            Placeholder::PurchaseLimit => "purchase_limit",
            Placeholder::Name => "name",
            Placeholder::PriceCents => "price_cents",
            Placeholder::Qty => "qty",
            Placeholder::UserId => "user_id",
            Placeholder::DeviceId => "device_id",
            Placeholder::OrderId => "order_id",
        }
    }

    /// Whether only a buyer's request has this value (not the sale's set-up).
    pub fn is_buyer(self) -> bool {
        matches!(
            self,
            Placeholder::UserId | Placeholder::DeviceId | Placeholder::OrderId
        )
    }

    fn named(name: &str) -> Option<Placeholder> {
        Placeholder::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// A `{name}` token: a built-in placeholder, a name the CSV or an extract provides, or an
/// environment variable (`{env:NAME}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Name<'a> {
    Builtin(Placeholder),
    Named(&'a str),
    /// `{env:NAME}`: the variable's name.
    Env(&'a str),
}

impl Name<'_> {
    /// The name between the braces (an environment variable's: `env:NAME`).
    pub fn as_str(&self) -> Cow<'_, str> {
        match self {
            Name::Builtin(p) => p.name().into(),
            Name::Named(n) => (*n).into(),
            Name::Env(n) => format!("{ENV_PREFIX}{n}").into(),
        }
    }
}

/// What starts an environment placeholder's name: `{env:NAME}`.
pub const ENV_PREFIX: &str = "env:";

/// Whether `name` may name an environment variable: `A-Z`, `0-9`, `_`, not starting with a
/// digit.
fn is_env_name(name: &[u8]) -> bool {
    !name.is_empty()
        && !name[0].is_ascii_digit()
        && name
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b'_')
}

/// Whether `name` may stand between braces: one or more of `a-z`, `0-9`, `_`.
pub fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// The built-in placeholder called `name`, if one is.
pub fn builtin(name: &str) -> Option<Placeholder> {
    Placeholder::named(name)
}

/// `{item_id}, {stock}, ...`, for error messages.
pub fn names() -> String {
    Placeholder::ALL
        .iter()
        .map(|p| format!("{{{}}}", p.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One piece of a template: literal text, or a `{name}` token (known or not).
enum Piece<'a> {
    Text(&'a str),
    Token(Name<'a>),
}

/// Splits a template into literal text and `{name}` tokens, where a name is one or more of
/// `a-z`, `0-9`, `_` (or `env:` and an environment variable's name). Any other brace (a JSON
/// object's) is text.
fn pieces(t: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut text_from = 0;
    let mut i = 0;
    let bytes = t.as_bytes();
    while i < bytes.len() {
        if bytes[i] == b'{' && bytes[i + 1..].starts_with(ENV_PREFIX.as_bytes()) {
            let from = i + 1 + ENV_PREFIX.len();
            let len = bytes[from..].iter().take_while(|b| **b != b'}').count();
            if bytes.get(from + len) == Some(&b'}') && is_env_name(&bytes[from..from + len]) {
                if text_from < i {
                    out.push(Piece::Text(&t[text_from..i]));
                }
                out.push(Piece::Token(Name::Env(&t[from..from + len])));
                i = from + len + 1;
                text_from = i;
                continue;
            }
        }
        if bytes[i] == b'{' {
            let name_len = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || **b == b'_')
                .count();
            let close = i + 1 + name_len;
            if name_len > 0 && bytes.get(close) == Some(&b'}') {
                if text_from < i {
                    out.push(Piece::Text(&t[text_from..i]));
                }
                let name = &t[i + 1..close];
                let token = Placeholder::named(name).map_or(Name::Named(name), Name::Builtin);
                out.push(Piece::Token(token));
                i = close + 1;
                text_from = i;
                continue;
            }
        }
        i += 1;
    }
    if text_from < t.len() {
        out.push(Piece::Text(&t[text_from..]));
    }
    out
}

/// The tokens a template uses, in order.
pub fn used(t: &str) -> Vec<Name<'_>> {
    pieces(t)
        .into_iter()
        .filter_map(|p| match p {
            Piece::Token(n) => Some(n),
            Piece::Text(_) => None,
        })
        .collect()
}

/// Where an expanded value goes, which decides how it is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// A URL path or query: percent-encoded.
    Path,
    /// A JSON body (inside the quotes the template writes): JSON-escaped.
    Json,
    /// A header value: control characters (CR, LF, NUL, ...) percent-encoded, the rest as is.
    Header,
    /// As it is (a form value, form-encoded as a whole afterwards).
    Raw,
}

/// Expands every token `value` has a value for, in one pass; tokens without a value are left
/// as written.
pub fn expand<'v>(
    t: &str,
    into: Encoding,
    value: impl Fn(Name<'_>) -> Option<Cow<'v, str>>,
) -> String {
    expand_with(t, into, |n| Some(value(n))).unwrap_or_default()
}

/// Expands every token, or `None` when `value` has none for one of them (the request cannot
/// be sent as written).
pub fn try_expand<'v>(
    t: &str,
    into: Encoding,
    value: impl Fn(Name<'_>) -> Option<Cow<'v, str>>,
) -> Option<String> {
    expand_with(t, into, |n| value(n).map(Some))
}

/// One pass: `value` gives `Some(Some(v))` to insert `v`, `Some(None)` to keep the token as
/// written, `None` to give up.
fn expand_with<'v>(
    t: &str,
    into: Encoding,
    value: impl Fn(Name<'_>) -> Option<Option<Cow<'v, str>>>,
) -> Option<String> {
    let mut out = String::with_capacity(t.len() + 16);
    for piece in pieces(t) {
        match piece {
            Piece::Text(s) => out.push_str(s),
            Piece::Token(n) => match value(n)? {
                Some(v) => match into {
                    Encoding::Path => percent_encode(&v, &mut out),
                    Encoding::Json => json_escape(&v, &mut out),
                    Encoding::Header => header_escape(&v, &mut out),
                    Encoding::Raw => out.push_str(&v),
                },
                None => {
                    out.push('{');
                    out.push_str(&n.as_str());
                    out.push('}');
                }
            },
        }
    }
    Some(out)
}

/// `v` into a header value: a control character (one that could end the header line or that
/// no header may hold) becomes `%XX`, everything else stays.
fn header_escape(v: &str, out: &mut String) {
    for c in v.chars() {
        if (c as u32) < 0x20 && c != '\t' || c == '\u{7f}' {
            push_hex(c as u8, out);
        } else {
            out.push(c);
        }
    }
}

/// `%XX` for one byte.
fn push_hex(b: u8, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(HEX[(b >> 4) as usize] as char);
    out.push(HEX[(b & 0xf) as usize] as char);
}

/// `application/x-www-form-urlencoded` pairs: each key and value form-encoded (`*-._` and
/// alphanumerics as they are, a space as `+`, every other byte `%XX`), joined by `&`.
pub fn form_encode<'a>(pairs: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        if !out.is_empty() {
            out.push('&');
        }
        form_byte_encode(k, &mut out);
        out.push('=');
        form_byte_encode(&v, &mut out);
    }
    out
}

fn form_byte_encode(v: &str, out: &mut String) {
    for b in v.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => push_hex(b, out),
        }
    }
}

/// Percent-encodes every byte but RFC 3986's unreserved characters.
fn percent_encode(v: &str, out: &mut String) {
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            push_hex(b, out);
        }
    }
}

/// `v` escaped into `out` for the inside of a JSON string, as serde_json writes it.
fn json_escape(v: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4] as char);
                out.push(HEX[(c as usize) & 0xf] as char);
            }
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_values_are_escaped_as_serde_json_escapes_them() {
        let v: String = (0u8..0x80)
            .map(char::from)
            .chain("é\u{2028}😀".chars())
            .collect();
        let mut out = String::new();
        json_escape(&v, &mut out);
        assert_eq!(format!("\"{out}\""), serde_json::to_string(&v).unwrap());
    }

    fn values(n: Name<'_>) -> Option<Cow<'static, str>> {
        match n {
            Name::Builtin(Placeholder::UserId) => Some("{order_id}/../x y".into()),
            Name::Builtin(Placeholder::OrderId) => Some("o-1".into()),
            Name::Builtin(Placeholder::ItemId) => Some("7".into()),
            Name::Named("token") => Some("a\r\nX-Evil: 1".into()),
            _ => None,
        }
    }

    #[test]
    fn values_are_expanded_once_and_encoded_for_where_they_go() {
        assert_eq!(
            expand(
                "/u/{user_id}/o/{order_id}?i={item_id}",
                Encoding::Path,
                values
            ),
            "/u/%7Border_id%7D%2F..%2Fx%20y/o/o-1?i=7",
            "a user id naming a placeholder stays literal, and stays one segment"
        );
        assert_eq!(
            expand(
                r#"{"u": "{user_id}", "i": {item_id}}"#,
                Encoding::Json,
                values
            ),
            r#"{"u": "{order_id}/../x y", "i": 7}"#
        );
        assert_eq!(expand("/s/{stock}", Encoding::Path, values), "/s/{stock}");
        assert_eq!(try_expand("/s/{stock}", Encoding::Path, values), None);
        assert_eq!(
            expand("Bearer {token}", Encoding::Header, values),
            "Bearer a%0D%0AX-Evil: 1",
            "a value can never end the header line"
        );
    }

    #[test]
    fn form_pairs_are_form_encoded() {
        assert_eq!(
            form_encode([("user", "a b&c=d".to_string()), ("q", "é".to_string())]),
            "user=a+b%26c%3Dd&q=%C3%A9"
        );
    }

    #[test]
    fn json_braces_are_text_and_unknown_names_are_found() {
        assert_eq!(
            used(r#"{"q": {stock}, "l": {purchase_limit}}"#),
            vec![
                Name::Builtin(Placeholder::Stock),
                Name::Builtin(Placeholder::PurchaseLimit)
            ]
        );
        assert_eq!(used("/p/{usr_id}"), vec![Name::Named("usr_id")]);
        assert_eq!(used("{}{ x }"), vec![]);
        assert_eq!(
            used("Bearer {env:SHOP_KEY_2} {env:lower} {env:}"),
            vec![Name::Env("SHOP_KEY_2")],
            "an environment variable's name is upper case"
        );
        assert_eq!(
            expand("k={env:K}", Encoding::Path, |_| None),
            "k={env:K}",
            "a token without a value is kept as written"
        );
    }
}
