//! `oversell attack --probe`: one request of each kind (set-up, view, order, pay, cancel) and
//! one oracle reading, each printed with how its answer was classified and why: which rule of
//! `[target]` matched, or that none did. Nothing else is sent; no report is written.
//!
//! The same checks as a run come first ([`super::preflight`]): nothing reaches the shop until
//! the target and the oracle answer.

use super::{preflight, Foreign, Oracle, Tally};
use crate::traffic::mapping::Mapping;
use crate::traffic::recorder::{cut, Answer, Kind};
use crate::traffic::schedule::BuyerPlan;
use crate::traffic::target::{self, Action, Read, Sale, Target, Why};
use std::fmt::Write;
use std::time::Duration;

/// What the check saw.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The printout, one line per request.
    pub text: String,
    /// Whether no 2xx or 3xx answer went unclassified (and the set-up, if any, succeeded).
    pub all_classified: bool,
}

/// Runs the check against `f` for the sale `sale`, as `buyer` would; requests time out after
/// `timeout`.
pub async fn run(
    f: &Foreign,
    sale: Sale,
    buyer: &BuyerPlan,
    timeout: Duration,
) -> anyhow::Result<Checked> {
    let oracle = preflight(f).await?;
    let t = Target {
        base_url: f.base_url.clone(),
        mapping: f.mapping.clone(),
        sale,
    };
    let client = target::client(timeout)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mapping check against {} (one request of each kind; nothing else is sent)",
        f.base_url
    );
    let mut ok = true;
    match t.setup_request() {
        None => line(&mut out, "setup", "not sent: target.setup is not set"),
        Some(p) => {
            let read = t.send(&client, Kind::Order, &p).await;
            let good = read.status.is_some_and(|s| (200..300).contains(&s));
            ok &= good;
            let verdict = if good {
                "set-up succeeded (a 2xx)"
            } else {
                "FAILED: a run stops here (the set-up must answer 2xx; redirects are not followed)"
            };
            line(
                &mut out,
                "setup",
                &format!("{} → {} → {verdict}", p.line(), answer_text(&read)),
            );
        }
    }
    if t.mapping.view.is_some() {
        ok &= send(&t, &client, &mut out, Kind::View, &Action::View, buyer).await;
    } else {
        line(&mut out, "view", "not sent: target.view is not set");
    }
    let key = format!("oversell-probe-{}", uuid::Uuid::now_v7().simple());
    let order_id = match t.prepare(&Action::Order(Some(key)), buyer) {
        Some(p) => {
            let read = t.send(&client, Kind::Order, &p).await;
            ok &= print(&t.mapping, &mut out, "order", &p.line(), &read);
            let c = &read.classified;
            if c.answer == Answer::Created {
                let id = match (&c.order_id, &t.mapping.order_id_field) {
                    (Some(id), Some(f)) => format!("order id {id:?} (from `{f}`)"),
                    (None, Some(f)) => format!("NO order id: the answer has no `{f}`"),
                    (_, None) => {
                        "no order id (target.order_id_field is not set): counted by answer".into()
                    }
                };
                line(&mut out, "", &id);
            }
            c.order_id.clone()
        }
        None => None,
    };
    for (kind, name, action) in [
        (Kind::Pay, "pay", Action::Pay(order_id.clone())),
        (Kind::Cancel, "cancel", Action::Cancel(order_id.clone())),
    ] {
        let set = match kind {
            Kind::Pay => t.mapping.pay.is_some(),
            _ => t.mapping.cancel.is_some(),
        };
        if !set {
            line(
                &mut out,
                name,
                &format!("not sent: target.{name} is not set"),
            );
        } else if t.prepare(&action, buyer).is_none() {
            line(
                &mut out,
                name,
                "not sent: it needs the order's id, and the order got none",
            );
        } else {
            ok &= send(&t, &client, &mut out, kind, &action, buyer).await;
        }
    }
    if order_id.is_some() && t.mapping.pay.is_some() && t.mapping.cancel.is_some() {
        line(
            &mut out,
            "",
            "(cancel went to the order just paid: a shop may refuse that by design)",
        );
    }
    let reading = oracle.read().await?;
    line(
        &mut out,
        "oracle",
        &oracle_text(&oracle, &f.oracle.describe(), reading),
    );
    Ok(Checked {
        text: out,
        all_classified: ok,
    })
}

/// Sends one buyer request and prints it; whether a rule classified the answer.
async fn send(
    t: &Target,
    client: &reqwest::Client,
    out: &mut String,
    kind: Kind,
    action: &Action,
    buyer: &BuyerPlan,
) -> bool {
    let Some(p) = t.prepare(action, buyer) else {
        return true;
    };
    let read = t.send(client, kind, &p).await;
    print(&t.mapping, out, kind.as_str(), &p.line(), &read)
}

fn line(out: &mut String, what: &str, text: &str) {
    let _ = writeln!(out, "  {what:<7} {text}");
}

fn answer_text(read: &Read) -> String {
    match read.status {
        Some(s) if read.body.trim().is_empty() => format!("{s} (empty body)"),
        Some(s) => format!("{s} {}", cut(read.body.trim(), 120)),
        None => format!("no answer ({})", read.classified.answer.as_str()),
    }
}

/// Prints a classified answer and why; false when no rule classified a 2xx or 3xx.
fn print(m: &Mapping, out: &mut String, what: &str, request: &str, read: &Read) -> bool {
    let c = &read.classified;
    let why = match (&c.why, read.status) {
        (Why::Rule(i), _) => format!(
            "{} (rule target.outcomes[{i}]: {})",
            c.answer.as_str(),
            m.outcomes[*i]
        ),
        (Why::NoRule, None) => c.answer.as_str().to_string(),
        (Why::NoRule, Some(s)) if c.answer.is_unclassified() => format!(
            "{} (NO RULE matched {s}: add one to target.outcomes{})",
            c.answer.as_str().to_uppercase(),
            if c.answer == Answer::Redirect {
                "; redirects are not followed"
            } else {
                ""
            }
        ),
        (Why::NoRule, Some(s)) => format!(
            "{} (no rule matched {s}: the default for its class)",
            c.answer.as_str()
        ),
    };
    line(
        out,
        what,
        &format!("{request} → {} → {why}", answer_text(read)),
    );
    !c.answer.is_unclassified()
}

fn oracle_text(oracle: &Oracle, source: &str, t: Option<Tally>) -> String {
    match (oracle, t) {
        (Oracle::None, _) | (_, None) => {
            "none given: oversell would be judged from the clients' evidence alone".into()
        }
        (_, Some(t)) => {
            let n = |v: Option<i64>| v.map_or_else(|| "—".to_string(), |v| v.to_string());
            format!("{source} → sold {}, stock {}", n(t.sold), n(t.stock))
        }
    }
}
