//! A scenario as reports and shard files store it: its shape kept, its secrets masked. Every
//! header value, the login's body, every form value and the value of every secret-named field
//! of a JSON body or a query becomes [`MASK`](crate::secret::MASK); the oracle's URL and every `[watch]` source URL go through [`url`](crate::secret::url).
//!
//! The masked `[target]` still reads back (a report is read by `diff`, a shard by `merge`):
//! a JSON body that masking would leave unreadable is masked whole (`"***"`, itself JSON).

use super::super::mapping::{Body, Mapping, RequestTemplate};
use super::Scenario;
use crate::secret::{mask_fields, mask_pairs, url, MASK};
use crate::template::{self, Encoding};
use std::borrow::Cow;

/// `s` with its `[target]`'s secrets masked.
pub fn scenario(s: &Scenario) -> Scenario {
    let mut s = s.clone();
    if let Some(m) = s.target.as_mut() {
        mapping(m);
    }
    for g in s.watch.0.values_mut() {
        for u in [
            &mut g.database,
            &mut g.prometheus,
            &mut g.redis,
            &mut g.http,
        ]
        .into_iter()
        .flatten()
        {
            *u = url(u);
        }
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
                .and_then(|b| b.endpoint_mut())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenarios_target_keeps_its_shape_and_no_secret_and_reads_back() {
        let text = r#"
    name = "s"
    [item]
    stock = 1
    [buyers]
    count = 1
    arrival = "uniform"
    window_s = 1
    [browse]
    view_share = 0.0
    [after_order]
    pay = 0
    cancel = 0
    abandon = 1
    [target]
    secret_fields = ["pin"]
    headers = { "X-Api-Key" = "hdr-secret-1", Accept = "application/json" }
    setup = { method = "POST", path = "/reset?api_key=query-secret-2&n=1", body = '{"stock": {stock}, "admin_password": "body-secret-3"}' }
    order = { method = "POST", path = "/buy", form = { user = "{user_id}", pin = "form-secret-4" } }
    outcomes = [{ status = ["2xx"], outcome = "created" }]
    [target.login]
    method = "POST"
    path = "/login"
    body = '{"user": "{user_id}", "pass": "login-secret-5"}'
    [target.oracle]
    url = "http://u:oracle-secret-6@127.0.0.1:9/stock?token=oracle-secret-7"
    "#;
        let s = Scenario::parse(text).unwrap();

        let masked = scenario(&s);

        let json = serde_json::to_string(&masked).unwrap();
        for secret in [
            "hdr-secret-1",
            "query-secret-2",
            "body-secret-3",
            "form-secret-4",
            "login-secret-5",
            "oracle-secret-6",
            "oracle-secret-7",
        ] {
            assert!(!json.contains(secret), "{secret} in {json}");
        }
        assert!(
            json.contains("/reset?api_key=***&n=1") && json.contains(r#"\"stock\": {stock}"#),
            "the shape is kept: {json}"
        );
        let back: Scenario = serde_json::from_str(&json).unwrap();
        assert_eq!(back.target.unwrap().secret_fields, vec!["pin".to_string()]);
        assert!(
            serde_json::to_string(&s).unwrap().contains("hdr-secret-1"),
            "the run itself keeps them"
        );
    }
}
