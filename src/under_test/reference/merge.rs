//! `oversell merge` of the shards of `run --shard`/`gate --shard`: the reference shop's half.
//! The drain wait, the final reconciliation (redis-lua) and the database and Redis reads are
//! a run's own ([`super::settle`]).

use super::{settle, shop_process};
use crate::report::{self, Shop};
use crate::runner::merge::{clients, write, Merged};
use crate::runner::{ask, control_client, finish_with, reading_of, Cell, Subject};
use crate::traffic::mapping::Mapping;
use std::path::PathBuf;

/// The shards of `run --shard`/`gate --shard` combined, and the oracle run once against the
/// reference shop they fired at (`subject`: `cell`'s strategy on its backend, serving at the
/// URL they recorded unless `--shop-url` says otherwise).
pub(super) async fn merge(
    merged: Merged<'_>,
    cell: &Cell,
    subject: Subject,
) -> anyhow::Result<(report::Report, PathBuf)> {
    let (strategy, backend) = (cell.strategy, cell.backend);
    let base_url = merged
        .plan
        .shop_url
        .as_deref()
        .unwrap_or(&merged.url)
        .trim_end_matches('/')
        .to_string();
    let run_plan = merged.run_plan(subject)?;
    let Merged {
        plan,
        n,
        started_at,
        combined,
        ..
    } = merged;
    run_plan.say(&format!(
        "== merge: {n} shards of {} ({} buyers, opened {}), {strategy} on {} at {base_url}",
        run_plan.scenario.name,
        combined.buyers,
        combined.lead.open_at,
        backend.as_str()
    ));
    let shards = format!(
        "{n} shard folders (oversell.shard/v1) combined by `oversell merge`: HdrHistograms \
         added, per-second counts added, the clients' records concatenated; the shards \
         opened together at {}",
        combined.lead.open_at
    );
    let item = run_plan.scenario.item.number();
    let http = control_client()?;
    let drain = shop_process::wait_drained(&http, &base_url, item, plan.drain_limit).await;
    let reconcile = match strategy.reconciles() {
        true => shop_process::reconcile(&http, &base_url, plan.admin_token.as_deref(), item).await,
        false => None,
    };
    let reading = reading_of(&Mapping::default());
    let server = settle::reference(
        &http,
        &base_url,
        item,
        cell,
        (&plan.redis_url, &plan.redis_prefix),
        reconcile,
        &[],
        ask(&run_plan, &combined.measurements, &reading),
    )
    .await?;
    let shop = Shop::strategy_on(strategy, backend);
    let clients = clients(combined, reading);
    let run = finish_with(&run_plan, shop, clients, Vec::new(), drain, server);
    write(plan, started_at, &run_plan, run, shards).await
}
