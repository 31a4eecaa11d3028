//! A scenario as reports and shard files store it: its shape kept, its secrets masked. Every
//! header value, the login's body, every form value and the value of every secret-named field
//! of a JSON body or a query becomes [`MASK`]; the oracle's URL goes through [`url`].
//!
//! The masked `[target]` still reads back (a report is read by `diff`, a shard by `merge`):
//! a JSON body that masking would leave unreadable is masked whole (`"***"`, itself JSON).

use super::{mask_fields, scan::mask_pairs, url, MASK};
use crate::traffic::mapping::template::{self, Encoding};
use crate::traffic::mapping::{Body, Mapping, RequestTemplate};
use crate::traffic::Scenario;
use std::borrow::Cow;

/// `s` with its `[target]`'s secrets masked.
pub fn scenario(s: &Scenario) -> Scenario {
    let mut s = s.clone();
    if let Some(m) = s.target.as_mut() {
        mapping(m);
    }
    s
}

/// Masks `m`'s secrets in place.
pub fn mapping(m: &mut Mapping) {
    let extra = m.secret_fields.clone();
    for (_, v) in &mut m.headers {
        *v = MASK.into();
    }
    if let Some(l) = &mut m.login {
        request(&mut l.request, &extra, true);
    }
    let others = m
        .setup
        .iter_mut()
        .chain(m.view.as_mut())
        .chain(Some(&mut m.order))
        .chain(m.pay.as_mut())
        .chain(m.cancel.as_mut())
        .chain(m.poll.as_mut().map(|p| &mut p.request))
        .chain(
            m.settle
                .as_mut()
                .and_then(|s| s.backlog.as_mut())
                .map(|b| &mut b.request),
        );
    for t in others {
        request(t, &extra, false);
    }
    if let Some(o) = &mut m.oracle {
        o.url = match o.url.split_once('?') {
            _ if o.url.contains("://") => url(&o.url),
            Some((path, q)) => format!("{path}?{}", mask_pairs(q, &extra)),
            None => o.url.clone(),
        };
    }
}

/// Masks one request: its header values, its body (a login's whole, a form's values, another
/// JSON body's secret fields) and its query's secret values.
fn request(t: &mut RequestTemplate, extra: &[String], login: bool) {
    for (_, v) in &mut t.headers {
        *v = MASK.into();
    }
    if let Some((path, q)) = t.path.split_once('?') {
        t.path = format!("{path}?{}", mask_pairs(q, extra));
    }
    t.body = match t.body.take() {
        None => None,
        Some(Body::Form(pairs)) => Some(Body::Form(
            pairs.into_iter().map(|(k, _)| (k, MASK.into())).collect(),
        )),
        Some(Body::Json(_)) if login => Some(Body::Json(format!("\"{MASK}\""))),
        Some(Body::Json(b)) => {
            let masked = mask_fields(&b, extra);
            let filled = template::expand(&masked, Encoding::Json, |_| Some(Cow::Borrowed("1")));
            match serde_json::from_str::<serde_json::Value>(&filled) {
                Ok(_) => Some(Body::Json(masked)),
                Err(_) => Some(Body::Json(format!("\"{MASK}\""))),
            }
        }
    };
}
