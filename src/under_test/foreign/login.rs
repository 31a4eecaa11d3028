//! The buyers' logins of a foreign run (`[target.login]`): before the sale (the default), every
//! buyer logs in after the set-up, `concurrency` at a time, on the harness's cookie-less client;
//! each buyer's session (extracted values, cookies) goes with its journey, and a buyer whose
//! login failed does not order. The time the logins took and their latency are the run's
//! `login` section, kept out of the sale's figures. On arrival, the journeys log in
//! themselves (`traffic::attack`); the section is then read from the recorder.

use crate::runner::RunPlan;
use crate::traffic::login::{self, LoginReport, LoginTally};
use crate::traffic::mapping::LoginWhen;
use crate::traffic::recorder::{Kind, Recorder};
use crate::traffic::session::{Buyers, Columns, Session};
use crate::traffic::target::{Action, Target};
use futures_util::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// `target` with the buyers' CSV `columns` and, when buyers log in before the sale, their
/// sessions after logging all of them in; the `login` section of a `before_sale` login.
pub(super) async fn before_sale(
    plan: &RunPlan,
    target: Target,
    columns: Arc<Columns>,
) -> anyhow::Result<(Arc<Target>, Option<LoginReport>)> {
    let mut buyers = Buyers {
        columns,
        logged_in: None,
    };
    let login = target
        .mapping
        .login
        .clone()
        .filter(|l| l.when == LoginWhen::BeforeSale);
    let Some(login) = login else {
        return Ok((Arc::new(target.with_buyers(Arc::new(buyers))), None));
    };
    let timeout = Duration::from_millis(plan.scenario.client.timeout_ms);
    let client = crate::guard::http::client(timeout)?;
    plan.say(&format!(
        "   logging {} buyers in before the sale, {} at a time",
        plan.buyers.len(),
        login.concurrency
    ));
    let started = Instant::now();
    let mut tally = LoginTally::default();
    let slots = plan.buyers.indexes().map(|i| i + 1).max().unwrap_or(0);
    let mut sessions: Vec<Option<Session>> = vec![None; slots];
    let (target_ref, columns, client) = (&target, &buyers.columns, &client);
    let mut answers = futures_util::stream::iter(plan.buyers.iter())
        .map(|b| async move {
            let i = b.index;
            let mut session = Session::with_values(columns.row(b.index));
            let Some(p) = target_ref.prepare(&Action::Login, &b, &session) else {
                let why = "not sent: it names a value this buyer does not have".to_string();
                return (i, Err(why), Duration::ZERO, String::new(), session);
            };
            let sent = Instant::now();
            let read = target_ref.send(client, Kind::Login, &p).await;
            session.learn(&read.classified.learned);
            let result = login::judge(&read.classified);
            let sample = read.classified.learned.sample.unwrap_or_default();
            (i, result, sent.elapsed(), sample, session)
        })
        .buffer_unordered(login.concurrency);
    while let Some((i, result, latency, body, session)) = answers.next().await {
        if result.is_ok() {
            sessions[i] = Some(session);
        }
        tally.add(result, latency, &body);
    }
    drop(answers);
    let report = tally.report(
        LoginWhen::BeforeSale.as_str(),
        Some(started.elapsed().as_secs_f64()),
    );
    plan.say(&format!("   {}", report.line()));
    buyers.logged_in = Some(sessions);
    let target = target.with_buyers(Arc::new(buyers));
    Ok((Arc::new(target), Some(report)))
}

/// The run's `login` section: the one before the sale, else the logins the journeys sent on
/// arrival (none when buyers do not log in).
pub(super) fn section(
    target: &Target,
    before: Option<LoginReport>,
    recorder: &Recorder,
) -> Option<LoginReport> {
    let on_arrival = target
        .mapping
        .login
        .as_ref()
        .is_some_and(|l| l.when == LoginWhen::OnArrival);
    before.or_else(|| {
        on_arrival.then(|| {
            recorder
                .logins()
                .report(LoginWhen::OnArrival.as_str(), None)
        })
    })
}
