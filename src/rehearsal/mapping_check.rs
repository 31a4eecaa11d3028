//! `oversell attack --probe`: one request of each kind (set-up, login, view, order, pay,
//! cancel) as the plan's first buyer (the first row of `--buyers-csv` when given), each printed
//! with how its answer was classified and why: which rule of `[target]` matched, or that none
//! did. The oracle is read before and after the order and the difference printed: the order
//! buys a real unit when the shop takes it, and the probe says so (and warns when the oracle's
//! reading did not move). Nothing else is sent; no report is written.
//!
//! The same checks as a run come first ([`super::preflight`]): nothing reaches the shop until
//! the target and the oracle answer.

use super::{preflight, Foreign, Oracle, Tally};
use crate::traffic::login;
use crate::traffic::recorder::{Answer, Kind};
use crate::traffic::schedule::BuyerPlan;
use crate::traffic::session::Session;
use crate::traffic::target::{self, Action, Prepared, Read, Sale, Target, Why};
use std::fmt::Write;
use std::time::Duration;

/// What the check saw.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The printout, one line per request.
    pub text: String,
    /// Whether no 2xx or 3xx answer went unclassified (and the set-up and the login, if any,
    /// succeeded).
    pub all_classified: bool,
}

/// Runs the check against `f` for the sale `sale`, as `buyer` with `session` (its CSV
/// columns) would; requests time out after `timeout`.
pub async fn run(
    f: &Foreign,
    sale: Sale,
    buyer: &BuyerPlan,
    mut session: Session,
    timeout: Duration,
) -> anyhow::Result<Checked> {
    let oracle = preflight(f).await?;
    let t = Target::new(&f.base_url, f.mapping.clone(), sale);
    let client = target::client(timeout)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "mapping check against {} as buyer {:?} (one request of each kind; the order buys a \
         real unit if the shop takes it)",
        crate::secret::url(&f.base_url),
        buyer.user_id
    );
    let mut ok = true;
    let setups = t.setup_requests();
    if setups.is_empty() {
        line(&mut out, "setup", "not sent: target.setup is not set");
    }
    for (field, p) in &setups {
        let read = t.send(&client, Kind::Order, p).await;
        let good = read.status.is_some_and(|s| (200..300).contains(&s));
        ok &= good;
        let verdict = if good {
            "set-up succeeded (a 2xx)".to_string()
        } else {
            format!(
                "FAILED ({field}): a run stops here (the set-up must answer 2xx; redirects \
                 are not followed)"
            )
        };
        line(
            &mut out,
            "setup",
            &format!("{} → {} → {verdict}", p.line(), answer_text(&t, p, &read)),
        );
        if !good {
            break;
        }
    }
    let before = oracle.read().await?;
    line(
        &mut out,
        "oracle",
        &format!(
            "before the order: {}",
            oracle_text(&oracle, &f.oracle.describe(), before)
        ),
    );
    if t.mapping.login.is_some() {
        let logged_in = login_step(&t, &client, &mut out, buyer, &mut session).await;
        ok &= logged_in;
    } else {
        line(&mut out, "login", "not sent: target.login is not set");
    }
    if t.mapping.view.is_some() {
        ok &= send(&t, &client, &mut out, &Action::View, buyer, &mut session).await;
    } else {
        line(&mut out, "view", "not sent: target.view is not set");
    }
    let key = format!("oversell-probe-{}", uuid::Uuid::now_v7().simple());
    let mut bought = false;
    let order_id = match t.prepare(&Action::Order(Some(key)), buyer, &session) {
        Some(p) => {
            let read = t.send(&client, Kind::Order, &p).await;
            session.learn(&read.classified.learned);
            ok &= print(&t, &mut out, Kind::Order, &p, &read);
            let c = &read.classified;
            if c.answer == Answer::Created {
                bought = true;
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
        None => {
            line(
                &mut out,
                "order",
                "not sent: it names a value this buyer does not have",
            );
            ok = false;
            None
        }
    };
    for (kind, action) in [
        (Kind::Pay, Action::Pay(order_id.clone())),
        (Kind::Cancel, Action::Cancel(order_id.clone())),
    ] {
        let name = kind.as_str();
        if t.mapping.request(kind).is_none() {
            line(
                &mut out,
                name,
                &format!("not sent: target.{name} is not set"),
            );
        } else if t.prepare(&action, buyer, &session).is_none() {
            line(
                &mut out,
                name,
                "not sent: it needs the order's id, and the order got none",
            );
        } else {
            ok &= send(&t, &client, &mut out, &action, buyer, &mut session).await;
        }
    }
    if order_id.is_some() && t.mapping.pay.is_some() && t.mapping.cancel.is_some() {
        line(
            &mut out,
            "",
            "(cancel went to the order just paid: a shop may refuse that by design)",
        );
    }
    let after = oracle.read().await?;
    line(
        &mut out,
        "oracle",
        &format!(
            "after the order: {}{}",
            oracle_text(&oracle, &f.oracle.describe(), after),
            difference(before, after)
        ),
    );
    if bought {
        let _ = writeln!(
            out,
            "NOTE: this probe bought a real unit of item {} at {} (set the sale up again before \
             a run, or cancel the order)",
            t.sale.item_id,
            crate::secret::url(&f.base_url)
        );
        if before.is_some() && before == after {
            let _ = writeln!(
                out,
                "WARNING: the oracle's reading did not move although the shop acknowledged the \
                 order: it may not count this item's orders (check --sold-query / the oracle \
                 endpoint), or the shop writes them later"
            );
        }
    }
    Ok(Checked {
        text: out,
        all_classified: ok,
    })
}

/// `(sold +1, stock −1)`, or nothing when either reading is missing.
fn difference(before: Option<Tally>, after: Option<Tally>) -> String {
    let (Some(b), Some(a)) = (before, after) else {
        return String::new();
    };
    let d = |x: Option<i64>, y: Option<i64>| x.zip(y).map(|(x, y)| y - x);
    let mut parts = Vec::new();
    if let Some(s) = d(b.sold, a.sold) {
        parts.push(format!("sold {s:+}"));
    }
    if let Some(s) = d(b.stock, a.stock) {
        parts.push(format!("stock {s:+}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({} since before the order)", parts.join(", "))
    }
}

/// Sends the login, prints it with what it extracted (or the extract that did not match, with
/// the body); whether it succeeded.
async fn login_step(
    t: &Target,
    client: &reqwest::Client,
    out: &mut String,
    buyer: &BuyerPlan,
    session: &mut Session,
) -> bool {
    let Some(p) = t.prepare(&Action::Login, buyer, session) else {
        line(
            out,
            "login",
            "not sent: it names a value this buyer does not have (a --buyers-csv column?)",
        );
        return false;
    };
    let read = t.send(client, Kind::Login, &p).await;
    session.learn(&read.classified.learned);
    print(t, out, Kind::Login, &p, &read);
    let l = &read.classified.learned;
    for (name, value) in &l.extracted {
        line(
            out,
            "",
            &format!(
                "extracted {{{name}}} = {} ({} characters; a secret: never printed)",
                crate::secret::MASK,
                value.chars().count()
            ),
        );
    }
    if !l.set_cookies.is_empty() {
        let names: Vec<&str> = l
            .set_cookies
            .iter()
            .filter_map(|c| c.split('=').next())
            .collect();
        line(out, "", &format!("cookies set: {}", names.join(", ")));
    }
    match login::judge(&read.classified) {
        Ok(()) => true,
        Err(why) => {
            line(
                out,
                "",
                &format!(
                    "LOGIN FAILED: {why}; the body: {}",
                    t.sample(read.body.trim(), &p, &read.classified.learned)
                ),
            );
            false
        }
    }
}

/// Sends one buyer request and prints it; whether a rule classified the answer.
async fn send(
    t: &Target,
    client: &reqwest::Client,
    out: &mut String,
    action: &Action,
    buyer: &BuyerPlan,
    session: &mut Session,
) -> bool {
    let Some(p) = t.prepare(action, buyer, session) else {
        line(
            out,
            action.kind().as_str(),
            "not sent: it names a value this buyer does not have",
        );
        return true;
    };
    let read = t.send(client, action.kind(), &p).await;
    session.learn(&read.classified.learned);
    print(t, out, action.kind(), &p, &read)
}

fn line(out: &mut String, what: &str, text: &str) {
    let _ = writeln!(out, "  {what:<7} {text}");
}

/// The answer's status and the start of its body, every secret masked.
fn answer_text(t: &Target, p: &Prepared, read: &Read) -> String {
    match read.status {
        Some(s) if read.body.trim().is_empty() => format!("{s} (empty body)"),
        Some(s) => format!(
            "{s} {}",
            t.sample_cut(read.body.trim(), p, &read.classified.learned, 120)
        ),
        None => format!("no answer ({})", read.classified.answer.as_str()),
    }
}

/// Prints a classified answer and why; false when no rule classified a 2xx or 3xx.
fn print(t: &Target, out: &mut String, kind: Kind, p: &Prepared, read: &Read) -> bool {
    let (m, request) = (&t.mapping, p.line());
    let c = &read.classified;
    let (rules, field) = m.rules_for(kind);
    let why = match (&c.why, read.status) {
        (Why::Rule(i), _) => format!("{} (rule {field}[{i}]: {})", c.answer.as_str(), rules[*i]),
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
            "{} (no rule matched {s}: the default for {})",
            c.answer.as_str(),
            match kind {
                Kind::View | Kind::Login => "a view or a login",
                _ if crate::traffic::mapping::is_unauthorized(s) => "401/403",
                _ => "its class",
            }
        ),
    };
    line(
        out,
        kind.as_str(),
        &format!("{request} → {} → {why}", answer_text(t, p, read)),
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
