//! `oversell merge` of the shards of `attack --shard`: the user's shop's half. Merge has no
//! oracle of the user's shop, and judges by the clients' evidence alone.

use crate::report;
use crate::runner::merge::{clients, write, Merged};
use crate::runner::{finish_with, reading_of, ServerSide, Subject};
use std::path::PathBuf;

/// The shards of `attack --shard` combined: the clients' records and histograms added as for
/// the reference shop, the verdict from the clients' evidence alone (merge has no oracle of
/// the user's shop: `attack` reads it, and its shards do not).
pub(super) async fn merge(
    merged: Merged<'_>,
    foreign: &crate::rehearsal::Foreign,
    subject: Subject,
) -> anyhow::Result<(report::Report, PathBuf)> {
    let url = merged.url.clone();
    let host = &foreign.host;
    let mapping = foreign.mapping.clone();
    let oracle = foreign.oracle.view();
    let run_plan = merged.run_plan(subject)?;
    let Merged {
        plan,
        n,
        started_at,
        combined,
        ..
    } = merged;
    let opened = combined.lead.open_at.clone();
    run_plan.say(&format!(
        "== merge: {n} attack shards of {} ({} buyers, opened {opened}) at {}; no oracle: \
         the clients' evidence alone",
        run_plan.scenario.name,
        combined.buyers,
        crate::secret::url(&url)
    ));
    let server = ServerSide::foreign(crate::oracle::Truth::Unverified, oracle, Vec::new());
    let shop = super::described(host.to_string(), url, report::OracleKind::None);
    // Nothing to drain: the user's shop is not ours to watch.
    let drain = report::Drain {
        drained: true,
        waited_ms: 0,
        limit_ms: 0,
        settle: None,
    };
    let clients = clients(combined, reading_of(&mapping));
    let run = finish_with(&run_plan, shop, clients, Vec::new(), drain, server);
    let shards = format!(
        "{n} attack shard folders (oversell.shard/v1) combined by `oversell merge`: \
         HdrHistograms added, per-second counts added, the clients' records concatenated; \
         the shards opened together at {opened}. The user's oracle is not read by merge: the \
         verdict rests on the clients' evidence"
    );
    write(plan, started_at, &run_plan, run, shards).await
}
