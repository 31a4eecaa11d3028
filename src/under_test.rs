//! The shops under test, each kind in its own house: the reference shop (`reference`: its
//! child processes, its databases' run lock, its settle, its faults, its layout, its own
//! gauges, its read replica, its half of merge) and someone else's shop at a URL (`foreign`:
//! its logins, its half of merge). Each describes itself to the report (`report::Shop`) and to
//! the experiments (`runner::Levers`). Each
//! implements [`crate::runner::ShopUnderTest`]; the runner holds a [`crate::runner::Subject`]
//! and never asks which kind it is.

mod foreign;
mod reference;

pub(crate) use reference::ChildShop;

use crate::report;
use crate::runner::merge::{MergePlan, Merged};
use crate::runner::{now_rfc3339, Subject};
use crate::shard::combine::{combine, read_part};
use anyhow::Context;
use std::path::PathBuf;

/// Reads, checks and combines the shards, runs the oracle once and writes the report; returns
/// it and its folder.
pub async fn merge(plan: &MergePlan) -> anyhow::Result<(report::Report, PathBuf)> {
    let started_at = now_rfc3339();
    let mut parts = Vec::with_capacity(plan.dirs.len());
    for d in &plan.dirs {
        let (file, records) = read_part(d)?;
        parts.push((d.clone(), file, records));
    }
    let n = parts.len();
    let combined = combine(parts)?;
    let (subject, url) = recorded(&combined.lead, plan)?.with_context(|| {
        format!(
            "{}: shard.json names neither a shop (run/gate --shard) nor a target (attack --shard)",
            plan.dirs[0].display()
        )
    })?;
    let merged = Merged {
        plan,
        n,
        started_at,
        url,
        combined,
    };
    subject.merge(merged).await
}

/// The shop a shard file says its shard fired at, as each kind of shop reads its own record,
/// and the URL it recorded (`None`: no kind of shop finds its record).
fn recorded(
    file: &crate::shard::file::ShardFile,
    plan: &MergePlan,
) -> anyhow::Result<Option<(Subject, String)>> {
    if let Some(found) = reference::recorded(file, plan)? {
        return Ok(Some(found));
    }
    Ok(foreign::recorded(file))
}
