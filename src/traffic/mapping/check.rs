//! The checks that turn a written request into a [`RequestTemplate`], when the scenario is
//! read: method, path (a path on the target, never a URL of its own), headers (names, one line
//! of text, never the harness's own), a body that is JSON once filled in, a form, extract
//! paths and names, and the placeholders available where they are used. Named placeholders (a
//! CSV column, an extracted value) are checked once the plan knows the CSV's columns
//! ([`Mapping::check_names`]). Every error names its field.

use super::{
    Body, Extract, ExtractFrom, FieldMatch, Mapping, MappingError, Method, OracleFields,
    OracleSpec, Outcome, OutcomeRule, RawOracle, RawRequest, RawRule, RequestTemplate,
    StatusPattern,
};
use crate::template::{self, Encoding, Name, Placeholder};
use crate::traffic::recorder::Kind;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// Where a request sits in the table, for its field names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// `view`, `order`, `pay`, `cancel`, `login`.
    Action(String),
    /// `setup` (one table) or `setup[i]` (a list).
    Setup(Option<usize>),
    /// `settle.backlog`: read for the whole sale, like the set-up.
    Backlog,
}

impl Step {
    fn name(&self) -> String {
        match self {
            Step::Action(a) => a.clone(),
            Step::Setup(None) => "setup".into(),
            Step::Setup(Some(i)) => format!("setup[{i}]"),
            Step::Backlog => "settle.backlog".into(),
        }
    }
}

/// What every request's checks need to know of the whole table.
pub(super) struct Context<'a> {
    /// Whether the mapping names an order id field.
    pub with_ids: bool,
    /// `ip_header` and `idempotency_header` (empty: none).
    pub harness_headers: [&'a str; 2],
}

/// Whether `p` stays on the target when appended to its base URL: one leading `/`, no `\`
/// (which URL parsers read as `/`), no scheme.
fn path_on_target(p: &str) -> bool {
    p.starts_with('/') && !p.starts_with("//") && !p.contains('\\') && !p.contains("://")
}

/// A dot path into a JSON answer: non-empty parts.
pub(super) fn dot_path(p: &str) -> bool {
    !p.trim().is_empty() && p.split('.').all(|k| !k.is_empty())
}

impl Context<'_> {
    /// A headers table (`field` is `headers` or `order.headers`), checked: names, values
    /// without control characters, and none of the harness's own headers.
    pub(super) fn headers(
        &self,
        field: &str,
        h: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, String)>, MappingError> {
        for (name, value) in h {
            let at = format!("{field}.{name}");
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                return Err(MappingError::HeaderName {
                    field: at,
                    got: name.clone(),
                });
            }
            let harness = self
                .harness_headers
                .iter()
                .any(|s| !s.is_empty() && s.eq_ignore_ascii_case(name));
            if harness {
                return Err(MappingError::HarnessHeader { field: at });
            }
            if value.chars().any(|c| c.is_control() && c != '\t') {
                return Err(MappingError::HeaderValue {
                    field: at,
                    got: value.clone(),
                });
            }
        }
        Ok(h.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
    }

    /// The typed request at `step`.
    pub(super) fn request(
        &self,
        step: Step,
        r: RawRequest,
    ) -> Result<RequestTemplate, MappingError> {
        let action = step.name();
        let method = Method::parse(&r.method).ok_or_else(|| MappingError::Method {
            action: action.clone(),
            got: r.method.clone(),
        })?;
        if !path_on_target(&r.path) {
            return Err(MappingError::Path {
                action,
                got: r.path,
            });
        }
        let body = match (r.body, r.form) {
            (Some(_), Some(_)) => return Err(MappingError::BodyAndForm { action }),
            (Some(b), None) => {
                json_when_filled(&action, &b)?;
                Some(Body::Json(b))
            }
            (None, Some(form)) => Some(Body::Form(form.into_iter().collect())),
            (None, None) => None,
        };
        let headers = self.headers(&format!("{action}.headers"), &r.headers)?;
        let outcomes = r
            .outcomes
            .map(|rules| self::rules(&format!("{action}.outcomes"), rules))
            .transpose()?;
        let setup = matches!(step, Step::Setup(_) | Step::Backlog);
        if setup && !r.extract.is_empty() {
            return Err(MappingError::SetupExtract { action });
        }
        let extract = r
            .extract
            .into_iter()
            .map(|(name, from)| extract(&action, name, from))
            .collect::<Result<_, _>>()?;
        let t = RequestTemplate {
            method,
            path: r.path,
            body,
            headers,
            outcomes,
            extract,
        };
        for (part, text) in parts(&t) {
            for n in template::used(text) {
                let field = format!("{action}.{part}");
                match n {
                    Name::Named(name) if setup => {
                        return Err(sale_wide(&step, field, name.into()));
                    }
                    Name::Builtin(p) if setup && p.is_buyer() => {
                        return Err(sale_wide(&step, field, p.name().into()));
                    }
                    Name::Builtin(Placeholder::OrderId) => {
                        let follow_up = matches!(action.as_str(), "pay" | "cancel" | "poll");
                        if !(follow_up && self.with_ids) {
                            return Err(MappingError::OrderId {
                                action,
                                part: part.clone(),
                            });
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(t)
    }
}

/// A buyer's value named in a request sent once for the whole sale (the set-up, the backlog).
fn sale_wide(step: &Step, field: String, name: String) -> MappingError {
    match step {
        Step::Backlog => MappingError::BacklogPlaceholder { field, name },
        _ => MappingError::BuyerPlaceholder { field, name },
    }
}

/// Every templated part of a request: (field after the action, text).
pub(super) fn parts(t: &RequestTemplate) -> Vec<(String, &str)> {
    let mut out = vec![("path".to_string(), t.path.as_str())];
    match &t.body {
        Some(Body::Json(b)) => out.push(("body".into(), b)),
        Some(Body::Form(pairs)) => {
            out.extend(pairs.iter().map(|(k, v)| (format!("form.{k}"), v.as_str())))
        }
        None => {}
    }
    out.extend(
        t.headers
            .iter()
            .map(|(k, v)| (format!("headers.{k}"), v.as_str())),
    );
    out
}

/// A JSON body template that can never be JSON is refused: filled in with `1` for every
/// placeholder (a number bare, a string in the quotes the template writes), it must parse.
fn json_when_filled(action: &str, body: &str) -> Result<(), MappingError> {
    let expanded = template::expand(body, Encoding::Json, |_| Some(Cow::Borrowed("1")));
    match serde_json::from_str::<serde_json::Value>(&expanded) {
        Ok(_) => Ok(()),
        Err(e) => Err(MappingError::BodyNotJson {
            action: action.into(),
            expanded,
            error: e.to_string(),
        }),
    }
}

/// One `extract` entry, checked: a placeholder name that is not a built-in, and a dot path or
/// `header:NAME`.
fn extract(action: &str, name: String, from: String) -> Result<Extract, MappingError> {
    let why = if !template::is_name(&name) {
        Some("is not a placeholder name")
    } else if template::builtin(&name).is_some() {
        Some("is a built-in placeholder")
    } else {
        None
    };
    if let Some(why) = why {
        return Err(MappingError::ExtractName {
            action: action.into(),
            name,
            why,
        });
    }
    let bad = || MappingError::ExtractPath {
        action: action.into(),
        name: name.clone(),
        got: from.clone(),
    };
    let from = match from.strip_prefix(ExtractFrom::HEADER) {
        Some(h) if reqwest::header::HeaderName::from_bytes(h.trim().as_bytes()).is_ok() => {
            ExtractFrom::Header(h.trim().to_string())
        }
        Some(_) => return Err(bad()),
        None if dot_path(&from) => ExtractFrom::Json(from.clone()),
        None => return Err(bad()),
    };
    Ok(Extract { name, from })
}

/// Rules at `field` (`outcomes`, `view.outcomes`), checked.
pub(super) fn rules(field: &str, rules: Vec<RawRule>) -> Result<Vec<OutcomeRule>, MappingError> {
    rules
        .into_iter()
        .enumerate()
        .map(|(i, r)| rule(field, i, r))
        .collect()
}

fn rule(field: &str, rule: usize, r: RawRule) -> Result<OutcomeRule, MappingError> {
    let outcome = Outcome::parse(&r.outcome).ok_or_else(|| MappingError::Outcome {
        rules: field.into(),
        rule,
        got: r.outcome.clone(),
    })?;
    let status = r
        .status
        .iter()
        .map(|s| {
            StatusPattern::parse(s).ok_or_else(|| MappingError::Status {
                rules: field.into(),
                rule,
                got: s.clone(),
            })
        })
        .collect::<Result<_, _>>()?;
    let field_match = match (r.field, r.equals) {
        (Some(path), Some(equals)) => Some(FieldMatch { path, equals }),
        (None, None) => None,
        _ => {
            return Err(MappingError::FieldWithoutEquals {
                rules: field.into(),
                rule,
            })
        }
    };
    Ok(OutcomeRule {
        status,
        field: field_match,
        outcome,
    })
}

/// `[target.oracle]`, checked.
pub(super) fn oracle(o: RawOracle) -> Result<OracleSpec, MappingError> {
    let url_ok = path_on_target(&o.url)
        || ((o.url.starts_with("http://") || o.url.starts_with("https://"))
            && reqwest::Url::parse(&o.url).is_ok());
    if !url_ok {
        return Err(MappingError::OracleUrl { got: o.url });
    }
    for (field, v) in [
        ("sold_field", &o.sold_field),
        ("stock_field", &o.stock_field),
    ] {
        if let Some(v) = v.as_ref().filter(|v| !dot_path(v)) {
            return Err(MappingError::OracleField {
                field,
                got: v.clone(),
            });
        }
    }
    Ok(OracleSpec {
        url: o.url,
        fields: OracleFields {
            sold: o.sold_field,
            stock: o.stock_field,
        },
    })
}

/// No name is extracted twice (two requests giving `{token}` would leave it ambiguous).
pub(super) fn extract_names(m: &Mapping) -> Result<(), MappingError> {
    let mut seen: Vec<&str> = Vec::new();
    for kind in Kind::ALL {
        let Some(t) = m.request(kind) else { continue };
        for e in &t.extract {
            if seen.contains(&e.name.as_str()) {
                return Err(MappingError::ExtractName {
                    action: kind.as_str().into(),
                    name: e.name.clone(),
                    why: "is extracted by another request too",
                });
            }
            seen.push(&e.name);
        }
    }
    Ok(())
}

impl Mapping {
    /// Every templated part of every request, with its field (after `target.`): the shared
    /// headers, each action's request, the set-up and the backlog.
    fn all_parts(&self) -> Vec<(String, &str)> {
        let mut out: Vec<(String, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (format!("headers.{k}"), v.as_str()))
            .collect();
        let mut requests: Vec<(String, &RequestTemplate)> = Kind::ALL
            .iter()
            .filter_map(|k| Some((k.as_str().to_string(), self.request(*k)?)))
            .collect();
        let many = self.setup.len() > 1;
        requests.extend(self.setup.iter().enumerate().map(|(i, t)| {
            let step = if many {
                format!("setup[{i}]")
            } else {
                "setup".into()
            };
            (step, t)
        }));
        let backlog = self.settle.as_ref().and_then(|s| s.backlog.as_ref());
        if let Some(b) = backlog.and_then(|b| b.endpoint()) {
            requests.push(("settle.backlog".into(), &b.request));
        }
        for (action, t) in requests {
            out.extend(
                parts(t)
                    .into_iter()
                    .map(|(part, text)| (format!("{action}.{part}"), text)),
            );
        }
        out
    }

    /// The values of the `{env:NAME}` placeholders, read from the environment once, when the
    /// plan is built; an unset variable (or one that is not UTF-8) is an error naming the field.
    pub fn env_values(&self) -> Result<BTreeMap<String, String>, MappingError> {
        let mut values = BTreeMap::new();
        for (field, text) in self.all_parts() {
            for n in template::used(text) {
                let Name::Env(var) = n else { continue };
                if values.contains_key(var) {
                    continue;
                }
                match std::env::var(var) {
                    Ok(v) => values.insert(var.to_string(), v),
                    Err(_) => {
                        return Err(MappingError::EnvUnset {
                            field,
                            name: var.into(),
                        })
                    }
                };
            }
        }
        Ok(values)
    }

    /// Checks every named placeholder (not a built-in) against what the plan provides: the
    /// `--buyers-csv` file's extra `columns` and the names the requests extract (the login
    /// itself has only the columns). Run when the plan is built, before anything is sent.
    pub fn check_names(&self, columns: &[String]) -> Result<(), MappingError> {
        let extracted: Vec<String> = self
            .extracted_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        let unknown = |field: String, name: &str| MappingError::UnknownPlaceholder {
            field,
            name: name.into(),
            extracted: extracted.clone(),
            columns: columns.to_vec(),
        };
        if let Some(both) = extracted.iter().find(|e| columns.contains(e)) {
            let action = Kind::ALL
                .into_iter()
                .find(|k| {
                    self.request(*k)
                        .is_some_and(|t| t.extract.iter().any(|e| &e.name == both))
                })
                .map_or("login", Kind::as_str);
            return Err(MappingError::ExtractName {
                action: action.into(),
                name: both.clone(),
                why: "is also a --buyers-csv column",
            });
        }
        let known = |name: &str| columns.iter().chain(&extracted).any(|c| c == name);
        for (name, value) in &self.headers {
            for n in template::used(value) {
                if let Name::Named(x) = n {
                    if !known(x) {
                        return Err(unknown(format!("headers.{name}"), x));
                    }
                }
            }
        }
        for kind in Kind::ALL {
            let Some(t) = self.request(kind) else {
                continue;
            };
            for (part, text) in parts(t) {
                for n in template::used(text) {
                    let Name::Named(x) = n else { continue };
                    let field = format!("{}.{part}", kind.as_str());
                    if !known(x) {
                        return Err(unknown(field, x));
                    }
                    let own = kind == Kind::Login && !columns.iter().any(|c| c == x);
                    if own {
                        return Err(MappingError::OwnExtract {
                            field,
                            name: x.into(),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}
