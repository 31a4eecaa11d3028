//! `--route ACTION='METHOD /path/{id}'`: which requests of the log are a view, an order, a
//! pay or a cancel. A `{name}` segment matches any one segment; the query string is not part
//! of the match. The defaults are the reference shop's routes.

use crate::shop::routes::Route as ShopRoute;
use std::fmt;

/// What a request of the log was, for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// A product-page view.
    View,
    /// An order attempt.
    Order,
    /// Paying an order.
    Pay,
    /// Cancelling an order.
    Cancel,
}

impl Action {
    /// Every action, in the order routes are tried.
    pub const ALL: [Action; 4] = [Action::Order, Action::View, Action::Pay, Action::Cancel];

    /// Its name in `--route NAME=...`.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::View => "view",
            Action::Order => "order",
            Action::Pay => "pay",
            Action::Cancel => "cancel",
        }
    }

    /// The reference shop's route for it.
    fn default_route(self) -> Route {
        let (method, route) = match self {
            Action::View => ("GET", ShopRoute::Item),
            Action::Order => ("POST", ShopRoute::Orders),
            Action::Pay => ("POST", ShopRoute::Pay),
            Action::Cancel => ("POST", ShopRoute::Cancel),
        };
        Route::parse(&format!("{method} {}", route.path())).unwrap_or_else(|_| {
            // The shop's own paths are constants that parse; a failure is a build defect.
            panic!(
                "the reference shop's {} route does not parse",
                self.as_str()
            )
        })
    }

    fn parse(name: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.as_str() == name)
    }
}

/// One segment of a route's path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Literal(String),
    /// `{name}`: any one non-empty segment.
    Any,
}

/// A method and a path pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    method: String,
    segments: Vec<Segment>,
    text: String,
}

impl Route {
    /// Reads `METHOD /path/{id}`.
    pub fn parse(spec: &str) -> Result<Route, String> {
        let usage = "'METHOD /path', e.g. 'POST /api/orders' or 'POST /api/orders/{id}/pay'";
        let (method, path) = spec
            .trim()
            .split_once(char::is_whitespace)
            .ok_or_else(|| format!("{spec:?} is not {usage}"))?;
        let path = path.trim();
        if method.is_empty() || !method.chars().all(|c| c.is_ascii_alphabetic()) {
            return Err(format!("{method:?} is not an HTTP method in {usage}"));
        }
        if !path.starts_with('/') || path.contains(char::is_whitespace) || path.contains('?') {
            return Err(format!(
                "{path:?} is not a path of one leading '/' with no spaces and no query: {usage}"
            ));
        }
        let segments = split(path)
            .map(|s| {
                if s.starts_with('{') && s.ends_with('}') && s.len() > 2 {
                    Segment::Any
                } else {
                    Segment::Literal(s.to_string())
                }
            })
            .collect();
        Ok(Route {
            method: method.to_ascii_uppercase(),
            segments,
            text: format!("{} {path}", method.to_ascii_uppercase()),
        })
    }

    /// Whether a request's method and path (its query string ignored) match.
    pub fn matches(&self, method: &str, path: &str) -> bool {
        if !method.eq_ignore_ascii_case(&self.method) {
            return false;
        }
        let mut segs = split(strip_query(path));
        for want in &self.segments {
            match (want, segs.next()) {
                (Segment::Literal(l), Some(s)) if l == s => {}
                (Segment::Any, Some(s)) if !s.is_empty() => {}
                _ => return false,
            }
        }
        segs.next().is_none()
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The path without its query string or fragment.
pub fn strip_query(path: &str) -> &str {
    path.split(['?', '#']).next().unwrap_or(path)
}

/// A path's segments after the leading `/` (a trailing `/` is ignored).
fn split(path: &str) -> impl Iterator<Item = &str> {
    let p = path.strip_prefix('/').unwrap_or(path);
    p.strip_suffix('/').unwrap_or(p).split('/')
}

/// The four routes the log is read with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Routes {
    routes: Vec<(Action, Route)>,
}

impl Default for Routes {
    /// The reference shop's routes.
    fn default() -> Self {
        Routes {
            routes: Action::ALL
                .into_iter()
                .map(|a| (a, a.default_route()))
                .collect(),
        }
    }
}

impl Routes {
    /// The defaults with each `ACTION=METHOD /path` of `--route` in place of its action's.
    pub fn with(given: &[String]) -> Result<Routes, String> {
        let mut routes = Routes::default();
        let mut seen: Vec<Action> = Vec::new();
        for g in given {
            let (name, spec) = g.split_once('=').ok_or_else(|| {
                format!(
                    "--route {g:?}: give ACTION='METHOD /path' (ACTION: view, order, pay or \
                     cancel)"
                )
            })?;
            let action = Action::parse(name.trim()).ok_or_else(|| {
                format!("--route {g:?}: {name:?} is not an action: view, order, pay or cancel")
            })?;
            if seen.contains(&action) {
                return Err(format!("--route {}: given twice", action.as_str()));
            }
            seen.push(action);
            let route = Route::parse(spec).map_err(|e| format!("--route {g:?}: {e}"))?;
            for (a, r) in &mut routes.routes {
                if *a == action {
                    *r = route.clone();
                }
            }
        }
        Ok(routes)
    }

    /// The action of the first route a request matches (order, view, pay, cancel).
    pub fn action(&self, method: &str, path: &str) -> Option<Action> {
        self.routes
            .iter()
            .find(|(_, r)| r.matches(method, path))
            .map(|(a, _)| *a)
    }

    /// The route of `action`.
    pub fn of(&self, action: Action) -> &Route {
        self.routes
            .iter()
            .find(|(a, _)| *a == action)
            .map(|(_, r)| r)
            .unwrap_or_else(|| panic!("every action has a route"))
    }
}

/// A request's path as a route would spell it: the query dropped, segments holding a digit
/// (ids, UUIDs) as `{id}`, any other segment that is not a word ([`is_word`]: a token, a name)
/// as `{…}`. What the "no order route matched" error and fit.md list: a log's values never
/// reach them.
pub fn shape(path: &str) -> String {
    let mut out = String::new();
    for s in split(strip_query(path)) {
        out.push('/');
        if s.chars().any(|c| c.is_ascii_digit()) {
            out.push_str("{id}");
        } else if is_word(s) {
            out.push_str(s);
        } else {
            // A token, a name, an e-mail: a value, never shown.
            out.push_str("{…}");
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

/// Whether a path segment reads as a word of a route (`reset-password`, `api`, `v2.json` but
/// digits): lower-case letters, `-`, `_` and `.`, at most 24 of them.
fn is_word(s: &str) -> bool {
    s.len() <= 24
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || matches!(b, b'-' | b'_' | b'.'))
}

/// A request's method as a report shows it: an HTTP method's letters, else `{…}`.
pub fn method_shape(m: &str) -> &str {
    if (1..=10).contains(&m.len()) && m.bytes().all(|b| b.is_ascii_alphabetic()) {
        m
    } else {
        "{…}"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_method_segments_and_ids_but_not_the_query() {
        let r = Routes::default();
        assert_eq!(r.action("POST", "/api/orders"), Some(Action::Order));
        assert_eq!(r.action("POST", "/api/orders?src=app"), Some(Action::Order));
        assert_eq!(r.action("post", "/api/orders/"), Some(Action::Order));
        assert_eq!(r.action("GET", "/api/items/7"), Some(Action::View));
        assert_eq!(r.action("POST", "/api/orders/o-9/pay"), Some(Action::Pay));
        assert_eq!(
            r.action("POST", "/api/orders/o-9/cancel"),
            Some(Action::Cancel)
        );
        assert_eq!(r.action("GET", "/api/orders"), None);
        assert_eq!(r.action("POST", "/api/orders/o-9"), None);
        assert_eq!(r.action("GET", "/api/items//"), None);
        let mine = Routes::with(&["order=POST /checkout/{sku}".into()]).unwrap();
        assert_eq!(mine.action("POST", "/checkout/A1"), Some(Action::Order));
        assert_eq!(mine.action("POST", "/api/orders"), None);
        assert_eq!(mine.of(Action::Order).to_string(), "POST /checkout/{sku}");
    }

    #[test]
    fn a_bad_route_flag_names_what_is_allowed() {
        for (given, says) in [
            ("order", "ACTION='METHOD /path'"),
            ("buy=POST /x", "view, order, pay or cancel"),
            ("order=/x", "METHOD /path"),
            ("order=POST x", "leading '/'"),
            ("order=POST /x?a=1", "no query"),
            ("order=P0ST /x", "HTTP method"),
        ] {
            let e = Routes::with(&[given.into()]).unwrap_err();
            assert!(e.contains(says), "{given}: {e}");
        }
        let e = Routes::with(&["order=POST /a".into(), "order=POST /b".into()]).unwrap_err();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn shapes_spell_ids_as_placeholders() {
        assert_eq!(shape("/api/items/17?x=1"), "/api/items/{id}");
        assert_eq!(shape("/checkout"), "/checkout");
        assert_eq!(shape("/"), "/");
        // A value is never shown, with or without a digit.
        assert_eq!(
            shape("/reset-password/qWeRtYuIoPaSdFgHjKlZ"),
            "/reset-password/{…}"
        );
        assert_eq!(shape("/u/alice@example.org/x"), "/u/{…}/x");
        assert_eq!(shape("/confirm/abcdefghijklmnopqrstuvwxyz"), "/confirm/{…}");
        assert_eq!(method_shape("POST"), "POST");
        assert_eq!(method_shape("tok=abc"), "{…}");
    }
}
