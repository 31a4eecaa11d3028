//! `merge`'s pure half: N shard files are checked to be one sale (same scenario hash, seed,
//! opening, shop and N; distinct shards covering 0..N; their buyers the whole schedule), then
//! combined without loss: histograms added, per-second counts added, records concatenated.

use super::file::ShardFile;
use crate::traffic::attack::{GeneratorStats, GooseCrossCheck};
use crate::traffic::recorder::{new_histogram, ClientRecords, Measurements, UnclassifiedAnswer};
use anyhow::{bail, ensure};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// N shards as one run.
#[derive(Debug)]
pub struct Combined {
    /// Shard 0's file (the sale's facts: scenario, opening, shop).
    pub lead: ShardFile,
    pub measurements: Measurements,
    pub generator: GeneratorStats,
    pub goose: Vec<GooseCrossCheck>,
    /// Buyers sent by all shards together.
    pub buyers: usize,
}

/// A shard folder read: its file, and its records taken out of it (compact as they were read:
/// [`super::records`]).
pub fn read_part(dir: &Path) -> anyhow::Result<(ShardFile, Measurements)> {
    let mut f = ShardFile::read(dir)?;
    // Buyers are kept by index, a byte each: an index past the schedule is a broken file.
    if let Some(b) = f.clients.buyers.iter().find(|b| b.buyer >= f.buyers_total) {
        bail!(
            "{}: clients.buyers names buyer {}, past the schedule's {} buyers (buyers_total)",
            dir.display(),
            b.buyer,
            f.buyers_total
        );
    }
    let part = f.clients.take_measurements(&dir.display().to_string())?;
    Ok((f, part))
}

/// A shard as `merge` holds it: its folder, its file, and its records ([`read_part`]).
pub type Part = (PathBuf, ShardFile, Measurements);

/// Checks that `parts` are the N shards of one sale, and combines them.
pub fn combine(mut parts: Vec<Part>) -> anyhow::Result<Combined> {
    parts.sort_by_key(|(_, f, _)| f.shard.index);
    let (mut shards, parts): (Vec<(PathBuf, ShardFile)>, Vec<Measurements>) =
        parts.into_iter().map(|(d, f, m)| ((d, f), m)).unzip();
    ensure!(!shards.is_empty(), "merge needs at least one shard folder");
    let (first_dir, first) = &shards[0];
    for (dir, f) in &shards {
        same_sale((first_dir, first), (dir, f))?;
    }
    every_shard_once(&shards)?;
    let buyers = whole_schedule(&shards)?;
    let measurements = merge_measurements(parts)?;
    let generator = merge_generators(shards.iter().map(|(_, f)| &f.generator));
    let goose = merge_goose(shards.iter().flat_map(|(_, f)| f.goose.iter()));
    let lead = shards.swap_remove(0).1;
    Ok(Combined {
        lead,
        measurements,
        generator,
        goose,
        buyers,
    })
}

/// Checks that shard file `f` (from `dir`) is of the same sale as the first: the same N,
/// scenario hash, seed, opening, shop and target.
fn same_sale(
    (first_dir, first): (&PathBuf, &ShardFile),
    (dir, f): (&PathBuf, &ShardFile),
) -> anyhow::Result<()> {
    let differs = |field: &str, a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| {
        anyhow::anyhow!(
            "{} and {} are not shards of the same sale: {field} is {a:?} in one and {b:?} in the other",
            first_dir.display(),
            dir.display()
        )
    };
    if f.shard.count != first.shard.count {
        return Err(differs(
            "N (shard.count)",
            &first.shard.count,
            &f.shard.count,
        ));
    }
    if f.scenario_hash != first.scenario_hash {
        return Err(differs(
            "scenario_hash",
            &first.scenario_hash,
            &f.scenario_hash,
        ));
    }
    if f.seed != first.seed {
        return Err(differs("seed", &first.seed, &f.seed));
    }
    if f.open_at != first.open_at {
        return Err(differs("open_at", &first.open_at, &f.open_at));
    }
    if f.shop != first.shop {
        return Err(differs("shop", &first.shop, &f.shop));
    }
    if f.target != first.target {
        return Err(differs("target", &first.target, &f.target));
    }
    Ok(())
}

/// Checks that the shards (sorted by index) are distinct, cover 0..N, and include shard 0.
fn every_shard_once(shards: &[(PathBuf, ShardFile)]) -> anyhow::Result<()> {
    for w in shards.windows(2) {
        if w[0].1.shard.index == w[1].1.shard.index {
            bail!(
                "{} and {} are both shard {}",
                w[0].0.display(),
                w[1].0.display(),
                w[0].1.shard
            );
        }
    }
    let first = &shards[0].1;
    let n = first.shard.count as usize;
    let have: Vec<u32> = shards.iter().map(|(_, f)| f.shard.index).collect();
    let missing: Vec<String> = (0..n as u32)
        .filter(|i| !have.contains(i))
        .map(|i| format!("{i}/{n}"))
        .collect();
    ensure!(
        missing.is_empty(),
        "the sale has {n} shards and shard(s) {} are missing: give every shard's folder",
        missing.join(", ")
    );
    ensure!(
        first.shard.index == 0,
        "shard 0/{n} is missing: it sets the sale up, and merge needs it"
    );
    Ok(())
}

/// The buyers all shards sent, checked to be the whole schedule's.
fn whole_schedule(shards: &[(PathBuf, ShardFile)]) -> anyhow::Result<usize> {
    let first = &shards[0].1;
    let buyers: usize = shards.iter().map(|(_, f)| f.buyers).sum();
    ensure!(
        buyers == first.buyers_total,
        "the shards sent {buyers} buyers together, the schedule has {}: a shard did not send its \
         whole part",
        first.buyers_total
    );
    Ok(buyers)
}

/// Adds the recorders' contents of the shards (which share one opening instant).
pub fn merge_measurements(parts: Vec<Measurements>) -> anyhow::Result<Measurements> {
    let add = |into: &mut hdrhistogram::Histogram<u64>, h: &hdrhistogram::Histogram<u64>| {
        into.add(h)
            .map_err(|e| anyhow::anyhow!("adding histograms: {e:?}"))
    };
    let mut m = Measurements::default();
    let mut window: Option<(u64, u64)> = None;
    let mut records = Vec::with_capacity(parts.len());
    let mut unclassified: BTreeMap<(crate::traffic::recorder::Kind, u16), UnclassifiedAnswer> =
        BTreeMap::new();
    for p in parts {
        for (k, h) in &p.histograms {
            add(m.histograms.entry(*k).or_insert_with(new_histogram), h)?;
        }
        for (k, h) in &p.send_lag {
            add(m.send_lag.entry(*k).or_insert_with(new_histogram), h)?;
        }
        for (k, h) in &p.sender_wait {
            add(m.sender_wait.entry(*k).or_insert_with(new_histogram), h)?;
        }
        for (k, h) in &p.service {
            add(m.service.entry(*k).or_insert_with(new_histogram), h)?;
        }
        for (k, h) in &p.shop_latency {
            add(m.shop_latency.entry(*k).or_insert_with(new_histogram), h)?;
        }
        for (k, h) in &p.retries {
            add(m.retries.entry(*k).or_insert_with(new_histogram), h)?;
        }
        m.order_intervals
            .add(&p.order_intervals)
            .map_err(|e| anyhow::anyhow!("a shard's order intervals: {e:?}"))?;
        if m.timeline.len() < p.timeline.len() {
            m.timeline.resize_with(p.timeline.len(), BTreeMap::new);
        }
        for (s, sec) in p.timeline.iter().enumerate() {
            for (k, n) in sec {
                *m.timeline[s].entry(*k).or_default() += n;
            }
        }
        let first_ms = p.attempts().map(|a| a.at_ms).min();
        if let (Some(first), Some(span)) = (first_ms, p.order_answer_span) {
            let (a, b) = (first * 1000, first * 1000 + span.as_micros() as u64);
            window = Some(match window {
                Some((x, y)) => (x.min(a), y.max(b)),
                None => (a, b),
            });
        }
        records.push(p.records);
        m.told.extend(p.told);
        m.cancels_ok += p.cancels_ok;
        m.follow_ups.extend(p.follow_ups);
        for u in p.unclassified {
            unclassified
                .entry((u.kind, u.status))
                .and_modify(|e| e.count += u.count)
                .or_insert(u);
        }
        m.first_sold_out_ms = match (m.first_sold_out_ms, p.first_sold_out_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (b, r) in p.buyers.iter() {
            ensure!(m.buyers.insert(b, r), "buyer {b} was sent by two shards");
        }
    }
    // Compact to compact: no spelled-out copy of every shard's records.
    m.records = ClientRecords::merge(&records);
    drop(records);
    m.unclassified = unclassified.into_values().collect();
    m.order_answer_span = window.map(|(a, b)| Duration::from_micros(b - a));
    Ok(m)
}

/// The generators together: CPU and memory add up (N processes); the lead is the longest, and
/// the wall time runs from that lead to the last buyer done in any shard (the shards open at
/// one instant, so `wall_seconds - lead_ms` is the time from the opening to the last buyer).
fn merge_generators<'a>(gs: impl Iterator<Item = &'a GeneratorStats>) -> GeneratorStats {
    let mut out = GeneratorStats::idle();
    let mut after_opening: f64 = 0.0;
    for g in gs {
        out.cpu_seconds += g.cpu_seconds;
        out.peak_rss_mib += g.peak_rss_mib;
        out.users += g.users;
        out.buyers += g.buyers;
        out.lead_ms = out.lead_ms.max(g.lead_ms);
        out.senders_full_at_s = match (out.senders_full_at_s, g.senders_full_at_s) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        after_opening = after_opening.max(g.wall_seconds - g.lead_ms as f64 / 1000.0);
    }
    out.wall_seconds = after_opening.max(0.0) + out.lead_ms as f64 / 1000.0;
    out.cores_used = if out.wall_seconds > 0.0 {
        out.cpu_seconds / out.wall_seconds
    } else {
        0.0
    };
    out
}

/// Goose's own counts by request name, added.
fn merge_goose<'a>(gs: impl Iterator<Item = &'a GooseCrossCheck>) -> Vec<GooseCrossCheck> {
    let mut by: BTreeMap<String, GooseCrossCheck> = BTreeMap::new();
    for g in gs {
        let e = by.entry(g.name.clone()).or_insert_with(|| GooseCrossCheck {
            name: g.name.clone(),
            count: 0,
            mean_ms: 0.0,
            max_ms: 0.0,
            success: 0,
            fail: 0,
        });
        let total = e.count + g.count;
        if total > 0 {
            e.mean_ms = (e.mean_ms * e.count as f64 + g.mean_ms * g.count as f64) / total as f64;
        }
        e.count = total;
        e.max_ms = e.max_ms.max(g.max_ms);
        e.success += g.success;
        e.fail += g.fail;
    }
    by.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::recorder::{Answer, Kind, Recorder};
    use tokio::time::Instant;

    fn recorded(latencies_ms: &[u64]) -> Measurements {
        let opened = Instant::now();
        let rec = Recorder::new(opened);
        for (i, ms) in latencies_ms.iter().enumerate() {
            let at = opened + Duration::from_millis(i as u64 * 400);
            rec.record(
                Kind::Order,
                Answer::Created,
                at,
                at,
                at + Duration::from_millis(*ms),
            );
            rec.attempt(
                "k",
                i,
                Answer::Created,
                None,
                at + Duration::from_millis(*ms),
            );
        }
        rec.finish()
    }

    #[tokio::test(start_paused = true)]
    async fn merged_histograms_equal_one_recorder_that_saw_everything() {
        let mut a = recorded(&[1, 5, 9]);
        let mut b = recorded(&[2, 70]);
        // Through the file form and back: nothing is lost.
        let a2 = super::super::file::Clients::taken_from(&mut a)
            .take_measurements("a")
            .unwrap();
        let b2 = super::super::file::Clients::taken_from(&mut b)
            .take_measurements("b")
            .unwrap();
        let m = merge_measurements(vec![a2, b2]).unwrap();
        let h = m.by_kind(Kind::Order);
        let mut want = new_histogram();
        want.add(a.by_kind(Kind::Order)).unwrap();
        want.add(b.by_kind(Kind::Order)).unwrap();
        assert_eq!(h, want);
        assert_eq!(h.len(), 5);
        assert_eq!(m.attempts().len(), 5);
        let per_second: u64 = m.order_intervals.histograms().iter().map(|h| h.len()).sum();
        assert_eq!(per_second, 5);
        assert_eq!(m.timeline[0][&(Kind::Order, Answer::Created)], 5);
    }
}
