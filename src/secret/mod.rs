//! Secrets: what oversell treats as a credential, and the one place that keeps them out of
//! every report, log, shard file, terminal line and child process's argv.
//!
//! A *secret* is any credential a run handles: header values, login and form bodies, extracted
//! values, cookies, `--buyers-csv` columns named as secret, `{env:NAME}` values, and tokens and
//! passwords in URLs or flags. They are recognised two ways:
//!
//! - **by name** ([`is_secret_name`]): `Authorization`, `Cookie`, `Set-Cookie`, and any name
//!   containing `token`, `key`, `secret` or `password` (any case), plus a scenario's
//!   `[target] secret_fields`;
//! - **by value** ([`Values`]): the values a request actually carried (extracted values, secret
//!   CSV columns, environment values, cookies, the literal text of header values and of the
//!   login body), masked wherever they appear in a sample.
//!
//! What is written is then masked: a sample ([`sample`]) by value and by field name
//! ([`mask_fields`]: JSON `"access_token": "…"`, `password=…` pairs, `Authorization: …` lines,
//! `Bearer …`); a URL ([`url`]) loses its password and secret query values; a command line
//! ([`command_line`]) loses the values of secret flags; a scenario
//! (`traffic::scenario::masked`, with these rules) keeps its shape with every header value,
//! login and form body and secret field masked. This module depends on nothing else of the
//! crate.

mod scan;

pub use scan::{json_string_values, mask_fields, mask_pairs};

/// What a masked value reads as.
pub const MASK: &str = "***";

/// Values shorter than this are not masked by value (a `1` would mask every digit of a sample);
/// they are still masked by field name.
pub const MIN_MASKED_LEN: usize = 4;

/// Names that hold a secret as a whole word: headers, and the query parameters signed URLs
/// and sessions carry.
const EXACT_NAMES: [&str; 12] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "sig",
    "signature",
    "session",
    "sessionid",
    "session_id",
    "sid",
    "auth",
    "otp",
];

/// Whether a header, field, column, flag or query parameter called `name` holds a secret:
/// `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`, `sig`, `signature`,
/// `session`, `sid`, `auth`, `otp`, any name containing `token`, `key`, `secret` or `password`
/// (any case, `-` or `_`), or one of `extra` (any case).
pub fn is_secret_name(name: &str, extra: &[String]) -> bool {
    // Asked for every header of every request a buyer sends: no allocation.
    let n = name.trim().trim_start_matches('-');
    let has = |w: &str| {
        n.as_bytes()
            .windows(w.len())
            .any(|x| x.eq_ignore_ascii_case(w.as_bytes()))
    };
    EXACT_NAMES.iter().any(|e| n.eq_ignore_ascii_case(e))
        || ["token", "key", "secret", "password", "passwd"]
            .iter()
            .any(|w| has(w))
        || extra.iter().any(|e| e.eq_ignore_ascii_case(name.trim()))
}

/// Known secret values, masked by value wherever they appear in a text. Adding one is a push
/// (a request's values are collected as it is built); the forms a shop may echo a value in are
/// worked out only when a text is masked. Its `Debug` shows how many, never what.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Values(Vec<String>);

impl std::fmt::Debug for Values {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Values({} secret)", self.0.len())
    }
}

impl Values {
    /// Adds `v` when it is long enough to mask ([`MIN_MASKED_LEN`]).
    pub fn add(&mut self, v: &str) {
        let v = v.trim();
        if v.len() >= MIN_MASKED_LEN && !self.0.iter().any(|k| k == v) {
            self.0.push(v.to_string());
        }
    }

    /// Adds each of `vs`.
    pub fn extend<'a>(&mut self, vs: impl IntoIterator<Item = &'a str>) {
        for v in vs {
            self.add(v);
        }
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &Values) {
        self.extend(other.0.iter().map(String::as_str));
    }

    /// Each value and the forms a shop may echo it in (percent-, form-, JSON- and
    /// HTML-escaped), longest first, so a value that holds another is masked whole.
    fn forms(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for v in &self.0 {
            let pct = percent_encoded(v);
            let json = serde_json::to_string(v)
                .map(|j| j[1..j.len() - 1].to_string())
                .unwrap_or_default();
            let html = html_escaped(v, false);
            let html_numeric = html_escaped(v, true);
            for form in [
                v.clone(),
                pct.replace("%20", "+"),
                pct,
                json,
                html,
                html_numeric,
            ] {
                if form.len() >= MIN_MASKED_LEN && !out.contains(&form) {
                    out.push(form);
                }
            }
        }
        out.sort_by_key(|v| std::cmp::Reverse(v.len()));
        out
    }

    /// The longest value's length, encoded (a text is cut no closer than this to its kept part
    /// before it is masked, so a value across the cut is masked whole).
    pub fn longest(&self) -> usize {
        self.0.iter().map(|v| v.len() * 3).max().unwrap_or(0)
    }

    /// `text` with every known value (in every form) replaced by [`MASK`].
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        if self.0.is_empty() {
            return out;
        }
        for v in self.forms() {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        out
    }
}

/// `v` as an HTML page quotes it: `&`, `<`, `>`, `"` and `'` as entities (`&amp;`, `&#39;`),
/// or with `numeric` as `&#NN;` every one (`&#38;`), the two ways templates escape.
fn html_escaped(v: &str, numeric: bool) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        let named = match c {
            '&' => Some("&amp;"),
            '<' => Some("&lt;"),
            '>' => Some("&gt;"),
            '"' => Some("&quot;"),
            '\'' => Some("&#39;"),
            _ => None,
        };
        match named {
            Some(_) if numeric => out.push_str(&format!("&#{};", c as u32)),
            Some(e) => out.push_str(e),
            None => out.push(c),
        }
    }
    out
}

/// Every byte but RFC 3986's unreserved characters as `%XX`.
fn percent_encoded(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A response body as a sample: every known value and every secret-named field masked, cut to
/// `max` bytes (with `…` when cut). The body is cut to `max` plus the longest value before it
/// is masked, so a value the cut would split is still masked whole.
pub fn sample(body: &str, values: &Values, extra: &[String], max: usize) -> String {
    let window = cut(body, max + values.longest());
    let masked = mask_fields(&values.mask(&window), extra);
    cut(&masked, max)
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A URL (or a path with a query) as oversell stores or prints it, masked by its structure:
/// its userinfo (`user:pw@` becomes `user:***@`; a user alone, which may be a token, becomes
/// `***@`) and the value of every query parameter that names a secret ([`is_secret_name`]:
/// `?password=…`, `?api_key=…`, `?sig=…`). Text that is not a valid URL is masked more, never
/// less: a password holding an unencoded `/` (`postgres://u:p/w@h`) still ends at the last `@`.
pub fn url(u: &str) -> String {
    url_with(u, &[])
}

/// [`url`], with `extra` naming more secret query parameters (`[target] secret_fields`).
pub fn url_with(u: &str, extra: &[String]) -> String {
    let (before_fragment, fragment) = match u.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (u, None),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (before_fragment, None),
    };
    let mut out = match scheme_len(before_query) {
        Some(n) => {
            let (scheme, rest) = before_query.split_at(n + 3);
            format!("{scheme}{}", masked_authority(rest, u))
        }
        None => before_query.to_string(),
    };
    if let Some(q) = query {
        out.push('?');
        out.push_str(&scan::mask_pairs(q, extra));
    }
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

/// The length of `text`'s scheme when it starts with `scheme://` (RFC 3986's letters).
fn scheme_len(text: &str) -> Option<usize> {
    let n = text.find("://")?;
    let scheme = &text[..n];
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(n)
}

/// `rest` (what follows `scheme://`, before any query) with its userinfo masked. A URL that
/// parses has its userinfo before the first `/`; one that does not (a password with an
/// unencoded `/`) is masked up to its last `@`.
fn masked_authority(rest: &str, whole: &str) -> String {
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let at = match rest[..authority_end].rfind('@') {
        Some(at) => Some(at),
        None if reqwest::Url::parse(whole).is_err() => rest.rfind('@'),
        None => None,
    };
    let Some(at) = at else {
        return rest.to_string();
    };
    let (userinfo, after) = (&rest[..at], &rest[at..]);
    match userinfo.split_once(':') {
        Some((user, _)) if !user.contains('/') => format!("{user}:{MASK}{after}"),
        _ => format!("{MASK}{after}"),
    }
}

/// The command line as a report stores it: the value of every secret-named flag
/// (`--admin-token X`, `--admin-token=X`, `--api-key X`) masked, and every URL through [`url`].
pub fn command_line(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut mask_next = false;
    for arg in args {
        if mask_next && !arg.starts_with("--") {
            out.push(MASK.into());
            mask_next = false;
            continue;
        }
        mask_next = false;
        let flag = arg.starts_with("--") || (arg.starts_with('-') && arg.len() == 2);
        match arg.split_once('=') {
            Some((name, _)) if flag && is_secret_name(name, &[]) => {
                out.push(format!("{name}={MASK}"));
            }
            Some((name, value)) if flag => out.push(format!("{name}={}", url(value))),
            _ if flag && is_secret_name(&arg, &[]) => {
                mask_next = true;
                out.push(arg);
            }
            _ => out.push(url(&arg)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
