//! A buyer's session: the values its requests fill in beyond the built-in placeholders (its
//! `--buyers-csv` row's extra columns, the values its answers gave through `extract`) and its
//! cookie jar, which keeps every `Set-Cookie` the buyer is answered and sends them back.
//!
//! The jar knows one site, the target: a cookie is kept by name (its `Path` and `Domain` are
//! not consulted), replaced by a later cookie of the same name, and removed by `Max-Age=0`
//! or an `Expires` in the past. The harness's shared HTTP client keeps no cookies: each buyer
//! carries its own.
//!
//! [`Columns`] holds the CSV's extra columns for every buyer in one flat table (a plan may
//! hold a million buyers; [`super::schedule::BuyerPlan`] stays small); [`Buyers`] is what a
//! run knows per buyer before it starts: the columns and, after a `before_sale` login, each
//! buyer's session (or that its login failed).

use std::time::{Duration, SystemTime};

/// One cookie the jar keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cookie {
    name: String,
    value: String,
    /// When it stops being sent (`None`: a session cookie, kept for the run).
    expires: Option<SystemTime>,
}

/// A `Set-Cookie` header, read: the name, the value, and when it expires (`Some(past)`:
/// delete it).
fn parse_set_cookie(header: &str, now: SystemTime) -> Option<Cookie> {
    let mut parts = header.split(';');
    let (name, value) = parts.next()?.split_once('=')?;
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    let value = value.trim().trim_matches('"').to_string();
    let mut max_age: Option<i64> = None;
    let mut expires: Option<SystemTime> = None;
    for attr in parts {
        let (k, v) = attr.split_once('=').unwrap_or((attr, ""));
        let (k, v) = (k.trim(), v.trim());
        if k.eq_ignore_ascii_case("max-age") {
            max_age = v.parse().ok();
        } else if k.eq_ignore_ascii_case("expires") {
            expires = http_date(v);
        }
    }
    // Max-Age wins over Expires (RFC 6265 §5.3).
    let expires = match max_age {
        Some(s) if s <= 0 => Some(SystemTime::UNIX_EPOCH),
        Some(s) => Some(now + Duration::from_secs(s as u64)),
        None => expires,
    };
    Some(Cookie {
        name: name.to_string(),
        value,
        expires,
    })
}

/// An HTTP date (`Wed, 21 Oct 2015 07:28:00 GMT`, or the older `21-Oct-2015` form).
fn http_date(v: &str) -> Option<SystemTime> {
    let utc = chrono::DateTime::parse_from_rfc2822(v)
        .map(|d| d.with_timezone(&chrono::Utc))
        .or_else(|_| {
            chrono::NaiveDateTime::parse_from_str(v, "%a, %d-%b-%Y %H:%M:%S GMT")
                .map(|d| d.and_utc())
        })
        .ok()?;
    let secs = utc.timestamp();
    Some(if secs <= 0 {
        SystemTime::UNIX_EPOCH
    } else {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
    })
}

/// A buyer's cookies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CookieJar(Vec<Cookie>);

impl CookieJar {
    /// Keeps (or, expired, removes) the cookie one `Set-Cookie` header sets.
    pub fn set(&mut self, header: &str, now: SystemTime) {
        let Some(c) = parse_set_cookie(header, now) else {
            return;
        };
        self.0.retain(|k| k.name != c.name);
        if c.expires.is_none_or(|e| e > now) {
            self.0.push(c);
        }
    }

    /// The `Cookie` header to send now (`None`: no cookie is live).
    pub fn header(&self, now: SystemTime) -> Option<String> {
        let live: Vec<String> = self
            .0
            .iter()
            .filter(|c| c.expires.is_none_or(|e| e > now))
            .map(|c| format!("{}={}", c.name, c.value))
            .collect();
        (!live.is_empty()).then(|| live.join("; "))
    }
}

/// What one answer teaches a buyer: the cookies it set and the values its request extracts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Learned {
    /// Every `Set-Cookie` header of the answer, as sent.
    pub set_cookies: Vec<String>,
    /// (name, value) for each `extract` entry the answer had.
    pub extracted: Vec<(String, String)>,
    /// The first `extract` entry a 2xx answer lacked: (name, where it was looked for).
    pub missing: Option<(String, String)>,
    /// A login's answer body, cut (a failed login is shown with it).
    pub sample: Option<String>,
}

/// A buyer's values and cookies, carried from request to request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Session {
    values: Vec<(String, String)>,
    cookies: CookieJar,
}

impl Session {
    /// A session that starts with `values` (the buyer's CSV columns).
    pub fn with_values(values: Vec<(String, String)>) -> Self {
        Session {
            values,
            cookies: CookieJar::default(),
        }
    }

    /// The value of a named placeholder.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Takes in what an answer taught: its cookies and extracted values (a later value of a
    /// name replaces the earlier).
    pub fn learn(&mut self, l: &Learned) {
        if !l.set_cookies.is_empty() {
            let now = SystemTime::now();
            for c in &l.set_cookies {
                self.cookies.set(c, now);
            }
        }
        for (name, value) in &l.extracted {
            match self.values.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = value.clone(),
                None => self.values.push((name.clone(), value.clone())),
            }
        }
    }

    /// The `Cookie` header this buyer sends now.
    pub fn cookie_header(&self) -> Option<String> {
        if self.cookies.0.is_empty() {
            return None;
        }
        self.cookies.header(SystemTime::now())
    }
}

/// A `--buyers-csv` file's extra columns (beyond user_id, device_id, ip), for every buyer:
/// one flat table, row i for buyer i.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Columns {
    names: Vec<String>,
    cells: Vec<Box<str>>,
}

impl Columns {
    /// Columns `names` with `rows` (each as long as `names`).
    pub fn new(names: Vec<String>, rows: impl IntoIterator<Item = Vec<String>>) -> Self {
        let cells = rows
            .into_iter()
            .flat_map(|r| r.into_iter().map(String::into_boxed_str))
            .collect();
        Columns { names, cells }
    }

    /// The extra columns' names (placeholders).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Buyer `i`'s (name, value) pairs (none when the file has no extra columns).
    pub fn row(&self, i: usize) -> Vec<(String, String)> {
        let n = self.names.len();
        if n == 0 {
            return Vec::new();
        }
        let Some(cells) = self.cells.get(i * n..(i + 1) * n) else {
            return Vec::new();
        };
        self.names
            .iter()
            .cloned()
            .zip(cells.iter().map(|c| c.to_string()))
            .collect()
    }

    /// Keeps the first `n` rows (the plan's buyers).
    pub fn truncate(&mut self, n: usize) {
        self.cells.truncate(n * self.names.len());
    }
}

/// What a run knows of each buyer before the sale: its CSV columns and, after a
/// `before_sale` login, its session or that its login failed.
#[derive(Debug, Clone, Default)]
pub struct Buyers {
    pub columns: std::sync::Arc<Columns>,
    /// Buyer i's session after its login (`None`: it failed); absent: no login before the
    /// sale.
    pub logged_in: Option<Vec<Option<Session>>>,
}

impl Buyers {
    /// Buyer `i`'s session as its journey starts; `None` when its login before the sale
    /// failed (it does not go on to order).
    pub fn session(&self, i: usize) -> Option<Session> {
        match &self.logged_in {
            Some(all) => all.get(i).cloned().flatten(),
            None => Some(Session::with_values(self.columns.row(i))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jar_keeps_replaces_and_deletes_cookies_by_name() {
        let now = SystemTime::now();
        let mut jar = CookieJar::default();
        jar.set("sid=abc; Path=/; HttpOnly", now);
        jar.set("theme=\"dark\"; Max-Age=3600", now);
        assert_eq!(jar.header(now).as_deref(), Some("sid=abc; theme=dark"));
        jar.set("sid=def; Path=/", now);
        assert_eq!(jar.header(now).as_deref(), Some("theme=dark; sid=def"));
        jar.set("theme=; Max-Age=0", now);
        assert_eq!(jar.header(now).as_deref(), Some("sid=def"));
        jar.set("sid=x; Expires=Thu, 01 Jan 1970 00:00:00 GMT", now);
        assert_eq!(jar.header(now), None, "an Expires in the past deletes it");
        jar.set("short=1; Max-Age=10", now);
        assert_eq!(jar.header(now + Duration::from_secs(11)), None, "expired");
        jar.set("old=1; Expires=Wed, 21-Oct-2099 07:28:00 GMT", now);
        assert!(jar.header(now).unwrap().contains("old=1"));
        jar.set("garbage", now);
        jar.set("=nameless", now);
        assert_eq!(jar.0.len(), 2);
    }

    #[test]
    fn a_session_learns_cookies_and_values_and_columns_stay_per_buyer() {
        let cols = Columns::new(
            vec!["email".into(), "password".into()],
            vec![
                vec!["a@x".into(), "pa".into()],
                vec!["b@x".into(), "pb".into()],
            ],
        );
        let buyers = Buyers {
            columns: cols.into(),
            logged_in: None,
        };
        let mut s = buyers.session(1).unwrap();
        assert_eq!(s.value("email"), Some("b@x"));
        assert_eq!(buyers.session(5).unwrap().value("email"), None);
        s.learn(&Learned {
            set_cookies: vec!["sid=1".into()],
            extracted: vec![("token".into(), "t1".into())],
            ..Learned::default()
        });
        assert_eq!(s.value("token"), Some("t1"));
        assert_eq!(s.cookie_header().as_deref(), Some("sid=1"));
        let failed = Buyers {
            logged_in: Some(vec![Some(s.clone()), None]),
            ..buyers
        };
        assert_eq!(failed.session(0), Some(s));
        assert_eq!(
            failed.session(1),
            None,
            "its login failed: it does not order"
        );
    }
}
