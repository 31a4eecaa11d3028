//! One line of an access log read into a [`Request`]: the combined format (nginx and Apache)
//! or JSON lines with named fields, the route it matched, its time, its status and its buyer.
//! A line that cannot be read is a [`LineError`] naming its field.

use super::route::{method_shape, shape, strip_query, Action, Routes};
use super::time::{self, Stamp};
use serde_json::Value;
use std::hash::{Hash, Hasher};

/// `--format`: how each line is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// nginx/Apache combined: `$remote_addr - $remote_user [$time_local] "$request" $status …`.
    Combined,
    /// One JSON object per line, fields named by `--time-field` and the others.
    Json,
}

impl Format {
    /// How the report names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Combined => "combined",
            Format::Json => "JSON lines",
        }
    }
}

/// Where a request's buyer is read from (`--buyer-field`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuyerSource {
    /// `remote_user` (HTTP basic auth's user; `-` means none).
    RemoteUser,
    /// A JSON field.
    Field(String),
    /// `query:NAME`: a query parameter of the request's path.
    Query(String),
    /// `cookie:NAME`: a cookie of the JSON field `http_cookie` (nginx's `$http_cookie`).
    Cookie(String),
    /// `remote_addr`: the client IP, always.
    ClientIp,
}

/// The JSON field of the client IP (nginx's `$remote_addr`).
pub const IP_FIELD: &str = "remote_addr";
/// The JSON field of the Cookie header (nginx's `$http_cookie`).
pub const COOKIE_FIELD: &str = "http_cookie";

impl BuyerSource {
    /// Reads `--buyer-field`: `remote_user`, `remote_addr`, `query:NAME`, `cookie:NAME`, or a
    /// JSON field.
    pub fn parse(v: &str, format: Format) -> Result<BuyerSource, String> {
        let named = |prefix: &str| {
            v.strip_prefix(prefix)
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(String::from)
        };
        let source = match v.trim() {
            "remote_user" => BuyerSource::RemoteUser,
            "remote_addr" => BuyerSource::ClientIp,
            _ if v.starts_with("query:") => BuyerSource::Query(
                named("query:").ok_or("--buyer-field query:NAME needs the parameter's NAME")?,
            ),
            _ if v.starts_with("cookie:") => BuyerSource::Cookie(
                named("cookie:").ok_or("--buyer-field cookie:NAME needs the cookie's NAME")?,
            ),
            "" => return Err("--buyer-field is empty".into()),
            f => BuyerSource::Field(f.to_string()),
        };
        match (&source, format) {
            (BuyerSource::Cookie(_), Format::Combined) => Err(format!(
                "--buyer-field {v}: the combined format logs no cookies; log the cookie in a \
                 JSON field (nginx `\"buyer\":\"$cookie_NAME\"` or \
                 `\"{COOKIE_FIELD}\":\"$http_cookie\"`) and use --format json"
            )),
            (BuyerSource::Field(f), Format::Combined) => Err(format!(
                "--buyer-field {f}: the combined format has remote_user and remote_addr \
                 (or query:NAME); a field of your own needs --format json"
            )),
            _ => Ok(source),
        }
    }

    /// How the report names it.
    pub fn describe(&self) -> String {
        match self {
            BuyerSource::RemoteUser => "remote_user".into(),
            BuyerSource::Field(f) => format!("the field `{f}`"),
            BuyerSource::Query(q) => format!("the query parameter `{q}`"),
            BuyerSource::Cookie(c) => format!("the cookie `{c}` (field `{COOKIE_FIELD}`)"),
            BuyerSource::ClientIp => "the client IP (remote_addr)".into(),
        }
    }
}

/// The JSON fields a line is read from (`--time-field` and the others).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    pub time: String,
    pub method: String,
    pub path: String,
    pub status: String,
}

impl Default for Fields {
    /// nginx's variable names: `time_iso8601`, `request_method`, `request_uri`, `status`.
    fn default() -> Self {
        Fields {
            time: "time_iso8601".into(),
            method: "request_method".into(),
            path: "request_uri".into(),
            status: "status".into(),
        }
    }
}

/// A line that matched a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub action: Action,
    pub at: Stamp,
    pub status: u16,
    /// The buyer, hashed (its text is never kept).
    pub buyer: u64,
    /// The buyer is its client IP (no buyer field on this line).
    pub by_ip: bool,
}

/// What one line was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// An empty line.
    Blank,
    /// A request no route matched: `METHOD /shape/{id}`.
    Other(String),
    Request(Request),
}

/// A line that could not be read: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: field `{field}`: {problem}")]
pub struct LineError {
    pub line: u64,
    pub field: String,
    pub problem: String,
    /// The line's start as it reads, secret-named values masked ([`shown_text`]).
    pub text: String,
}

/// How much of a bad line an error shows.
const SHOWN_BYTES: usize = 100;

/// A bad line as an error shows it: its first [`SHOWN_BYTES`], every secret-named value
/// masked (a token in a query or a cookie), control characters escaped.
pub fn shown_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4 * SHOWN_BYTES)]);
    let masked = crate::secret::mask_fields(text.trim(), &[]);
    let escaped: String = masked
        .chars()
        .flat_map(|c| match c.is_control() {
            true => c.escape_default().collect::<Vec<_>>(),
            false => vec![c],
        })
        .collect();
    crate::secret::cut(&escaped, SHOWN_BYTES)
}

/// How the lines of one log are read.
#[derive(Debug, Clone)]
pub struct Reader {
    pub format: Format,
    pub fields: Fields,
    pub buyer: BuyerSource,
    pub routes: Routes,
}

type Bad = (String, String);

fn bad(field: &str, problem: impl Into<String>) -> Bad {
    (field.to_string(), problem.into())
}

impl Reader {
    /// Reads line number `n`.
    pub fn line(&self, n: u64, bytes: &[u8]) -> Result<Parsed, LineError> {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim();
        if text.is_empty() {
            return Ok(Parsed::Blank);
        }
        let read = match self.format {
            Format::Combined => self.combined(text),
            Format::Json => self.json(text),
        };
        read.map_err(|(field, problem)| LineError {
            line: n,
            field,
            problem,
            text: shown_text(bytes),
        })
    }

    fn combined(&self, line: &str) -> Result<Parsed, Bad> {
        let c = Combined::split(line)?;
        let mut parts = c.request.split_whitespace();
        let (Some(method), Some(path)) = (parts.next(), parts.next()) else {
            return Ok(Parsed::Other("(a request that is not METHOD /path)".into()));
        };
        let Some(action) = self.routes.action(method, path) else {
            return Ok(Parsed::Other(format!(
                "{} {}",
                method_shape(method),
                shape(path)
            )));
        };
        let at = time::parse(c.time_local).ok_or_else(|| {
            bad(
                "time_local",
                format!("{:?} is not {}", c.time_local, time::FORMS),
            )
        })?;
        let status = status(c.status).ok_or_else(|| bad("status", not_status(c.status)))?;
        let user = (c.remote_user != "-").then_some(c.remote_user);
        let named = match &self.buyer {
            BuyerSource::RemoteUser => user.map(String::from),
            BuyerSource::Query(q) => query(path, q),
            BuyerSource::ClientIp | BuyerSource::Field(_) | BuyerSource::Cookie(_) => None,
        };
        request(action, at, status, named, Some(c.remote_addr))
    }

    fn json(&self, line: &str) -> Result<Parsed, Bad> {
        let v: Value = serde_json::from_str(line)
            .map_err(|e| bad("(line)", format!("not a JSON object ({e})")))?;
        if !v.is_object() {
            return Err(bad("(line)", "not a JSON object"));
        }
        let f = &self.fields;
        let method = text(&v, &f.method).ok_or_else(|| missing(&f.method, "--method-field"))?;
        let path = text(&v, &f.path).ok_or_else(|| missing(&f.path, "--path-field"))?;
        let Some(action) = self.routes.action(&method, &path) else {
            return Ok(Parsed::Other(format!(
                "{} {}",
                method_shape(&method),
                shape(&path)
            )));
        };
        let when = text(&v, &f.time).ok_or_else(|| missing(&f.time, "--time-field"))?;
        let at = time::parse(&when)
            .ok_or_else(|| bad(&f.time, format!("{when:?} is not {}", time::FORMS)))?;
        let code = text(&v, &f.status).ok_or_else(|| missing(&f.status, "--status-field"))?;
        let status = status(&code).ok_or_else(|| bad(&f.status, not_status(&code)))?;
        let present = |s: Option<String>| s.filter(|s| !s.is_empty() && s != "-");
        let named = match &self.buyer {
            BuyerSource::RemoteUser => present(text(&v, "remote_user")),
            BuyerSource::Field(name) => present(text(&v, name)),
            BuyerSource::Query(q) => query(&path, q),
            BuyerSource::Cookie(c) => text(&v, COOKIE_FIELD).and_then(|h| cookie(&h, c)),
            BuyerSource::ClientIp => None,
        };
        let ip = present(text(&v, IP_FIELD));
        request(action, at, status, named, ip.as_deref())
    }
}

/// The request of a matched line, its buyer the named one or else its client IP.
fn request(
    action: Action,
    at: Stamp,
    status: u16,
    named: Option<String>,
    ip: Option<&str>,
) -> Result<Parsed, Bad> {
    let (key, by_ip) = match (&named, ip) {
        (Some(n), _) => (n.as_str(), false),
        (None, Some(ip)) => (ip, true),
        (None, None) => {
            return Err(bad(
                IP_FIELD,
                "missing, and no buyer field on the line either: nothing tells the buyer",
            ))
        }
    };
    Ok(Parsed::Request(Request {
        action,
        at,
        status,
        buyer: hash(key, by_ip),
        by_ip,
    }))
}

/// A buyer's key, hashed with fixed keys (the same buyer, the same hash, throughout a fit).
fn hash(key: &str, by_ip: bool) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    by_ip.hash(&mut h);
    key.hash(&mut h);
    h.finish()
}

fn missing(field: &str, flag: &str) -> Bad {
    bad(
        field,
        format!("missing (name the field holding it with {flag})"),
    )
}

fn not_status(v: &str) -> String {
    format!("{v:?} is not an HTTP status (100 to 599)")
}

fn status(v: &str) -> Option<u16> {
    v.trim().parse().ok().filter(|s| (100..=599).contains(s))
}

/// A field's value as text (a string, or a number's digits); a dotted name reaches into
/// objects when no field has the whole name.
fn text(v: &Value, name: &str) -> Option<String> {
    let found = v.get(name).or_else(|| {
        name.split('.')
            .try_fold(v, |at, part| at.get(part))
            .filter(|_| name.contains('.'))
    })?;
    match found {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The value of query parameter `name` in `path`, when present and not empty.
fn query(path: &str, name: &str) -> Option<String> {
    let q = path.get(strip_query(path).len()..)?.strip_prefix('?')?;
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, v)| *k == name && !v.is_empty())
        .map(|(_, v)| v.to_string())
}

/// The value of cookie `name` in a Cookie header.
fn cookie(header: &str, name: &str) -> Option<String> {
    header
        .split(';')
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, v)| *k == name && !v.is_empty())
        .map(|(_, v)| v.to_string())
}

/// The fields of a combined-format line that the fit reads.
struct Combined<'a> {
    remote_addr: &'a str,
    remote_user: &'a str,
    time_local: &'a str,
    request: &'a str,
    status: &'a str,
}

impl<'a> Combined<'a> {
    /// `$remote_addr - $remote_user [$time_local] "$request" $status …`.
    fn split(line: &'a str) -> Result<Combined<'a>, Bad> {
        let shape = "not the combined format ($remote_addr - $remote_user [$time_local] \
                     \"$request\" $status …)";
        let (remote_addr, rest) = line
            .split_once(' ')
            .ok_or_else(|| bad("remote_addr", shape))?;
        let (_ident, rest) = rest
            .split_once(' ')
            .ok_or_else(|| bad("remote_user", shape))?;
        let (remote_user, rest) = rest
            .split_once(' ')
            .ok_or_else(|| bad("remote_user", shape))?;
        let rest = rest
            .strip_prefix('[')
            .ok_or_else(|| bad("time_local", format!("{shape}: no '[' before the time")))?;
        let (time_local, rest) = rest
            .split_once(']')
            .ok_or_else(|| bad("time_local", format!("{shape}: no ']' after the time")))?;
        let rest = rest
            .trim_start()
            .strip_prefix('"')
            .ok_or_else(|| bad("request", format!("{shape}: no '\"' before the request")))?;
        let end = closing_quote(rest)
            .ok_or_else(|| bad("request", format!("{shape}: no '\"' after the request")))?;
        let request = &rest[..end];
        let status = rest[end + 1..]
            .split_whitespace()
            .next()
            .ok_or_else(|| bad("status", format!("{shape}: no status after the request")))?;
        Ok(Combined {
            remote_addr,
            remote_user,
            time_local,
            request,
            status,
        })
    }
}

/// Where the quoted field starting `s` ends: the first `"` not escaped by a backslash.
fn closing_quote(s: &str) -> Option<usize> {
    let mut escaped = false;
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'\\' if !escaped => escaped = true,
            b'"' if !escaped => return Some(i),
            _ => escaped = false,
        }
    }
    None
}
