//! Masking by field name in free text (a response sample, a template): one pass over the text
//! that finds each name and, when it names a secret, the value that follows it.
//!
//! A value follows a name as a JSON member (`"access_token": "…"` or a bare `"pin": 1234`), a
//! pair (`password=…` up to `&`, `;`, a quote or a space), a header line (`Authorization: …` at
//! the start of a line, to its end) or an authorization scheme (`Bearer …`, `Basic …`). A JSON
//! string cut short (a sample cut at 200 bytes) is masked to its end.

use super::{is_secret_name, MASK};

/// Whether `b` may be part of a name.
fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// `text` with the value of every secret-named field masked (see the module's doc), `extra`
/// naming more secret fields (`[target] secret_fields`).
pub fn mask_fields(text: &str, extra: &[String]) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        if !name_byte(b[i]) || (i > 0 && name_byte(b[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i;
        while end < b.len() && name_byte(b[end]) {
            end += 1;
        }
        let name = &text[start..end];
        let span = if is_scheme(name) {
            scheme_value(b, end)
        } else if is_secret_name(name, extra) {
            value_after(b, start, end)
        } else {
            None
        };
        match span {
            Some((from, to)) if to > from => {
                out.push_str(&text[copied..from]);
                out.push_str(MASK);
                copied = to;
                i = to;
            }
            _ => i = end,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// A query string or form body with the value of every secret-named pair masked.
pub fn mask_pairs(q: &str, extra: &[String]) -> String {
    q.split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if is_secret_name(k, extra) && !v.is_empty() => format!("{k}={MASK}"),
            _ => pair.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// An HTTP authorization scheme whose next word is a credential.
fn is_scheme(name: &str) -> bool {
    ["bearer", "basic", "digest"]
        .iter()
        .any(|s| name.eq_ignore_ascii_case(s))
}

/// The credential after `Bearer ` (base64 and token characters).
fn scheme_value(b: &[u8], end: usize) -> Option<(usize, usize)> {
    if b.get(end) != Some(&b' ') {
        return None;
    }
    let from = end + 1;
    let to = from
        + b[from..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || b"-._~+/=".contains(c))
            .count();
    Some((from, to))
}

/// Where the value of the name at `start..end` is, if one follows it.
fn value_after(b: &[u8], start: usize, end: usize) -> Option<(usize, usize)> {
    let skip_ws = |mut j: usize| {
        while j < b.len() && matches!(b[j], b' ' | b'\t') {
            j += 1;
        }
        j
    };
    // A JSON member: "name": value.
    if start > 0 && b[start - 1] == b'"' && b.get(end) == Some(&b'"') {
        let j = skip_ws(end + 1);
        if b.get(j) != Some(&b':') {
            return None;
        }
        let j = skip_ws(j + 1);
        return match b.get(j)? {
            b'"' => Some((j + 1, string_end(b, j + 1))),
            b'{' | b'[' => None,
            _ => {
                let len = b[j..]
                    .iter()
                    .take_while(|c| !b",}]\r\n".contains(c))
                    .count();
                Some((j, j + len))
            }
        };
    }
    match b.get(end)? {
        // A pair: name=value.
        b'=' => {
            let from = end + 1;
            let len = b[from..]
                .iter()
                .take_while(|c| !b"&;, \t\r\n\"'<>#".contains(c))
                .count();
            Some((from, from + len))
        }
        // A header line: `Name: value` at the start of a line.
        b':' if line_start(b, start) && matches!(b.get(end + 1), Some(b' ' | b'\t')) => {
            let from = skip_ws(end + 1);
            let len = b[from..]
                .iter()
                .take_while(|c| !b"\r\n".contains(c))
                .count();
            Some((from, from + len))
        }
        _ => None,
    }
}

/// Where a JSON string that starts at `from` ends (its closing quote), or the text's end.
fn string_end(b: &[u8], from: usize) -> usize {
    let mut k = from;
    while k < b.len() {
        match b[k] {
            b'\\' => k += 2,
            b'"' => return k,
            _ => k += 1,
        }
    }
    b.len()
}

/// Whether only spaces stand between the line's start and `i`.
fn line_start(b: &[u8], i: usize) -> bool {
    b[..i]
        .iter()
        .rev()
        .take_while(|c| **c != b'\n')
        .all(|c| matches!(c, b' ' | b'\t'))
}

/// The JSON string values (a string after a `:`) of a JSON text or template, as written.
pub fn json_string_values(text: &str) -> Vec<&str> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut after_colon = false;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let end = string_end(b, i + 1);
                if after_colon {
                    out.push(&text[i + 1..end]);
                }
                after_colon = false;
                i = end + 1;
            }
            b':' => {
                after_colon = true;
                i += 1;
            }
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            _ => {
                after_colon = false;
                i += 1;
            }
        }
    }
    out
}
