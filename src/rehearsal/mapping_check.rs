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
use crate::traffic::target::{Action, Prepared, Read, Sale, Target, Why};
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
    session: Session,
    timeout: Duration,
) -> anyhow::Result<Checked> {
    let oracle = preflight(f).await?;
    let mut p = Probe {
        t: Target::new(&f.base_url, f.mapping.clone(), sale),
        client: crate::guard::http::client(timeout)?,
        out: String::new(),
        buyer,
        session,
        ok: true,
    };
    let _ = writeln!(
        p.out,
        "mapping check against {} as buyer {:?} (one request of each kind; the order buys a \
         real unit if the shop takes it)",
        crate::secret::url(&f.base_url),
        buyer.user_id
    );
    p.setup().await;
    let source = f.oracle.describe();
    let before = oracle.read().await?;
    let reading = oracle_text(&oracle, &source, before);
    line(
        &mut p.out,
        "oracle",
        &format!("before the order: {reading}"),
    );
    p.login().await;
    p.view().await;
    let (order_id, bought) = p.order().await;
    p.pay_and_cancel(order_id).await;
    let after = oracle.read().await?;
    let reading = oracle_text(&oracle, &source, after);
    let moved = difference(before, after);
    line(
        &mut p.out,
        "oracle",
        &format!("after the order: {reading}{moved}"),
    );
    if bought {
        bought_note(&mut p.out, &p.t, &f.base_url, before, after);
    }
    Ok(Checked {
        text: p.out,
        all_classified: p.ok,
    })
}

/// One probe in progress: the target, one buyer and its session, the printout so far, and
/// whether every request so far was sent and classified.
struct Probe<'a> {
    t: Target,
    client: reqwest::Client,
    out: String,
    buyer: &'a BuyerPlan,
    session: Session,
    ok: bool,
}

impl Probe<'_> {
    /// Sends the set-up requests in turn, stopping at the first that fails.
    async fn setup(&mut self) {
        let setups = self.t.setup_requests();
        if setups.is_empty() {
            line(&mut self.out, "setup", "not sent: target.setup is not set");
        }
        for (field, p) in &setups {
            let read = self.t.send(&self.client, Kind::Order, p).await;
            let good = read.status.is_some_and(|s| (200..300).contains(&s));
            self.ok &= good;
            let verdict = if good {
                "set-up succeeded (a 2xx)".to_string()
            } else {
                format!(
                    "FAILED ({field}): a run stops here (the set-up must answer 2xx; redirects \
                     are not followed)"
                )
            };
            let answer = answer_text(&self.t, p, &read);
            line(
                &mut self.out,
                "setup",
                &format!("{} → {answer} → {verdict}", self.t.line(p)),
            );
            if !good {
                break;
            }
        }
    }

    async fn login(&mut self) {
        if self.t.mapping.login.is_none() {
            return line(&mut self.out, "login", "not sent: target.login is not set");
        }
        let (t, client, out) = (&self.t, &self.client, &mut self.out);
        self.ok &= login_step(t, client, out, self.buyer, &mut self.session).await;
    }

    async fn view(&mut self) {
        if self.t.mapping.view.is_none() {
            return line(&mut self.out, "view", "not sent: target.view is not set");
        }
        self.ok &= self.send(&Action::View).await;
    }

    /// Sends the order (with a fresh Idempotency-Key); its id, and whether the shop took it.
    async fn order(&mut self) -> (Option<String>, bool) {
        let key = format!("oversell-probe-{}", uuid::Uuid::now_v7().simple());
        let (t, out) = (&self.t, &mut self.out);
        let Some(p) = t.prepare(&Action::Order(Some(key)), self.buyer, &self.session) else {
            let why = "not sent: it names a value this buyer does not have";
            line(out, "order", why);
            self.ok = false;
            return (None, false);
        };
        let read = t.send(&self.client, Kind::Order, &p).await;
        self.session.learn(&read.classified.learned);
        self.ok &= print(t, out, Kind::Order, &p, &read);
        let c = &read.classified;
        let bought = c.answer == Answer::Created;
        if bought {
            let id = match (&c.order_id, &t.mapping.order_id_field) {
                (Some(id), Some(f)) => format!("order id {id:?} (from `{f}`)"),
                (None, Some(f)) => format!("NO order id: the answer has no `{f}`"),
                (_, None) => {
                    "no order id (target.order_id_field is not set): counted by answer".into()
                }
            };
            line(out, "", &id);
        }
        (c.order_id.clone(), bought)
    }

    /// Pays the order, then cancels it, each when the mapping has the request.
    async fn pay_and_cancel(&mut self, order_id: Option<String>) {
        let paid_then_cancelled =
            order_id.is_some() && self.t.mapping.pay.is_some() && self.t.mapping.cancel.is_some();
        for (kind, action) in [
            (Kind::Pay, Action::Pay(order_id.clone())),
            (Kind::Cancel, Action::Cancel(order_id)),
        ] {
            let name = kind.as_str();
            if self.t.mapping.request(kind).is_none() {
                let why = format!("not sent: target.{name} is not set");
                line(&mut self.out, name, &why);
            } else if self.t.prepare(&action, self.buyer, &self.session).is_none() {
                let why = "not sent: it needs the order's id, and the order got none";
                line(&mut self.out, name, why);
            } else {
                self.ok &= self.send(&action).await;
            }
        }
        if paid_then_cancelled {
            let why = "(cancel went to the order just paid: a shop may refuse that by design)";
            line(&mut self.out, "", why);
        }
    }

    async fn send(&mut self, action: &Action) -> bool {
        let (t, client, out) = (&self.t, &self.client, &mut self.out);
        send(t, client, out, action, self.buyer, &mut self.session).await
    }
}

/// The note that the probe bought a real unit, and the warning when the oracle did not see it.
fn bought_note(
    out: &mut String,
    t: &Target,
    base_url: &str,
    before: Option<Tally>,
    after: Option<Tally>,
) {
    let _ = writeln!(
        out,
        "NOTE: this probe bought a real unit of item {} at {} (set the sale up again before \
         a run, or cancel the order)",
        t.sale.item_id,
        crate::secret::url(base_url)
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
    let (m, request) = (&t.mapping, t.line(p));
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
