//! The logs of `oversell fit`'s tests: a scenario's own seeded schedule sent through a
//! simulated shop that sells out (one unit a buyer, cancels put units back), written as a
//! combined log, JSON lines, or a combined log without users.

use super::OPENED_MS;
use oversell::testing::traffic::schedule::{self, AfterOrder, BuyerPlan};
use oversell::testing::traffic::Scenario;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    View,
    Order,
    Pay,
    Cancel,
}

/// One request the model sends: when (ms from the opening), whose, what.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub at_ms: i64,
    pub buyer: usize,
    pub kind: Kind,
}

/// Every request of every buyer, in time order (pay and cancel only if the buyer will have an
/// order: decided by [`answer`]).
pub fn events(plan: &[BuyerPlan]) -> Vec<Event> {
    let mut out = Vec::new();
    for (i, b) in plan.iter().enumerate() {
        let mut t = b.arrival.as_millis() as i64;
        for think in b.views.iter() {
            out.push(Event {
                at_ms: t,
                buyer: i,
                kind: Kind::View,
            });
            t += think.as_millis() as i64;
        }
        out.push(Event {
            at_ms: t,
            buyer: i,
            kind: Kind::Order,
        });
        for gap in b.resubmits.iter() {
            t += gap.as_millis() as i64;
            out.push(Event {
                at_ms: t,
                buyer: i,
                kind: Kind::Order,
            });
        }
        let follow = match b.after {
            AfterOrder::Pay { think } => Some((Kind::Pay, think)),
            AfterOrder::Cancel { think } => Some((Kind::Cancel, think)),
            AfterOrder::Abandon | AfterOrder::Script { .. } => None,
        };
        if let Some((kind, think)) = follow {
            out.push(Event {
                at_ms: t + think.as_millis() as i64,
                buyer: i,
                kind,
            });
        }
    }
    out.sort_by_key(|e| (e.at_ms, e.buyer));
    out
}

/// A shop selling `stock` units, one per buyer: each event's status, `None` for a pay or
/// cancel of a buyer who got no order (never sent).
fn answer(events: &[Event], buyers: usize, mut stock: i64) -> Vec<Option<u16>> {
    let mut holds = vec![false; buyers];
    events
        .iter()
        .map(|e| match e.kind {
            Kind::View => Some(200),
            Kind::Order if !holds[e.buyer] && stock > 0 => {
                holds[e.buyer] = true;
                stock -= 1;
                Some(201)
            }
            Kind::Order => Some(409),
            Kind::Pay => holds[e.buyer].then_some(200),
            Kind::Cancel => holds[e.buyer].then(|| {
                stock += 1;
                200
            }),
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Combined, times to the millisecond (Apache `%{msec_frac}t`), buyer in `$remote_user`.
    Combined,
    /// JSON lines: `msec`, `method`, `uri`, `code`; the buyer in the query parameter `uid`.
    Json,
    /// Combined with `-` for every user: buyers known by their client IP.
    CombinedNoUser,
}

fn request_of(e: &Event, b: &BuyerPlan) -> (&'static str, String) {
    match e.kind {
        Kind::View => ("GET", "/api/items/1".into()),
        Kind::Order => ("POST", "/api/orders".into()),
        Kind::Pay => ("POST", format!("/api/orders/o-{}/pay", b.index)),
        Kind::Cancel => ("POST", format!("/api/orders/o-{}/cancel", b.index)),
    }
}

fn line(form: Form, at_ms: i64, b: &BuyerPlan, method: &str, path: &str, status: u16) -> String {
    let when = chrono::DateTime::from_timestamp_millis(OPENED_MS + at_ms).unwrap();
    match form {
        Form::Combined | Form::CombinedNoUser => {
            let user = if form == Form::Combined {
                b.user_id.to_string()
            } else {
                "-".into()
            };
            format!(
                "{} - {user} [{}] \"{method} {path} HTTP/1.1\" {status} 57 \"-\" \"Mozilla/5.0 (X11)\"",
                b.ip,
                when.format("%d/%b/%Y:%H:%M:%S%.3f %z")
            )
        }
        Form::Json => {
            let sep = if path.contains('?') { '&' } else { '?' };
            serde_json::json!({
                "msec": format!("{}.{:03}", when.timestamp(), when.timestamp_subsec_millis()),
                "remote_addr": b.ip.to_string(),
                "method": method,
                "uri": format!("{path}{sep}uid={}", b.user_id),
                "code": status,
                "request_time": 0.002,
            })
            .to_string()
        }
    }
}

/// The model's sale as a log: its lines (with a static asset request every tenth line, which
/// no route matches) and the schedule that made them.
pub fn write_log(model: &str, form: Form, dir: &Path) -> (PathBuf, Vec<BuyerPlan>) {
    let s = Scenario::parse(model).unwrap();
    let plan: Vec<BuyerPlan> = schedule::build(&s).iter().collect();
    let evs = events(&plan);
    let statuses = answer(&evs, plan.len(), s.item.stock);
    let mut text = String::new();
    for (n, (e, st)) in evs.iter().zip(statuses).enumerate() {
        let Some(st) = st else { continue };
        let b = &plan[e.buyer];
        let (method, path) = request_of(e, b);
        text.push_str(&line(form, e.at_ms, b, method, &path, st));
        text.push('\n');
        if n % 10 == 0 {
            text.push_str(&line(form, e.at_ms, b, "GET", "/static/app.js", 200));
            text.push('\n');
        }
    }
    let path = dir.join(match form {
        Form::Json => "access.jsonl",
        _ => "access.log",
    });
    std::fs::write(&path, text).unwrap();
    (path, plan)
}

/// The log's buyers per second from the opening: each buyer's first request.
pub fn per_second(plan: &[BuyerPlan]) -> Vec<u32> {
    let mut v = Vec::new();
    for b in plan {
        let s = b.arrival.as_secs() as usize;
        if v.len() <= s {
            v.resize(s + 1, 0);
        }
        v[s] += 1;
    }
    v
}

pub fn flags(form: Form) -> Vec<&'static str> {
    match form {
        Form::Combined | Form::CombinedNoUser => vec![],
        Form::Json => vec![
            "--format",
            "json",
            "--time-field",
            "msec",
            "--method-field",
            "method",
            "--path-field",
            "uri",
            "--status-field",
            "code",
            "--buyer-field",
            "query:uid",
        ],
    }
}
