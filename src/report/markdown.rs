//! `report.md`: the headline table (the post-mortem's four metrics first), the oracle's
//! verdicts, and the details per run.

use super::catalog::DbRate;
use super::markup::md_cell;
use super::table::{Column, HEADLINE};
use super::{Report, RunReport};
use crate::metric::Metric;
use crate::traffic::recorder::Kind;
use std::fmt::Write;

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "n/a".into(), |v| v.to_string())
}

fn pct(x: f64) -> String {
    format!("{:.2} %", x * 100.0)
}

/// The headline table alone (also used for `$GITHUB_STEP_SUMMARY`).
pub fn headline(r: &Report) -> String {
    let mb = r.multi_backend();
    let mut s = String::new();
    let headers: Vec<&str> = HEADLINE.iter().map(|c| c.header()).collect();
    let _ = writeln!(s, "| strategy | {} |", headers.join(" | "));
    let _ = writeln!(s, "|---|{}", "---:|".repeat(HEADLINE.len()));
    for run in &r.runs {
        let cells: Vec<String> = HEADLINE
            .iter()
            .map(|c| match c {
                Column::Metric(Metric::Oversell) => format!("**{}**", md_cell(&c.cell(run))),
                _ => md_cell(&c.cell(run)),
            })
            .collect();
        let _ = writeln!(s, "| {} | {} |", md_cell(&run.label(mb)), cells.join(" | "));
    }
    s
}

fn details(s: &mut String, run: &RunReport, mb: bool) {
    let _ = writeln!(s, "\n### {}\n", run.label(mb));
    let _ = writeln!(s, "**Verdict:** {}\n", run.findings.verdict);
    let f = &run.findings;
    let _ = writeln!(
        s,
        "- target: {} (backend {})",
        run.shop.target(),
        run.backend_name()
    );
    let _ = writeln!(
        s,
        "- sold {} of {}; database stock {}; Redis stock {}; conservation drift {}; Redis drift {}",
        opt(f.sold),
        f.initial_stock,
        opt(f.db_stock),
        opt(f.redis_stock),
        opt(f.conservation_drift),
        opt(f.redis_drift)
    );
    let _ = writeln!(
        s,
        "- acknowledged {}; lost acknowledged {} (dead-lettered {}); dead letters {}; phantom orders {}; duplicate buyers {} (devices {}); status mismatches {}",
        f.acknowledged,
        opt(f.lost_acks),
        opt(f.lost_acks_dead_lettered),
        opt(f.dead_letters),
        opt(f.phantom_orders),
        opt(f.duplicate_buyers),
        opt(f.duplicate_devices),
        opt(f.status_mismatches)
    );
    let _ = writeln!(
        s,
        "- orders by status: {}; bots hold {} units ({}); people turned away {}",
        f.orders_by_status
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", "),
        opt(f.bot_units),
        f.bot_share_of_units.map_or("n/a".into(), pct),
        f.turned_away_buyers
    );
    if let Some(p) = &run.reconcile {
        let _ = writeln!(
            s,
            "- final reconciliation ({}): Redis {} vs expected {}, residual {}{}",
            p.source,
            p.redis_stock,
            p.expected_redis_stock,
            p.residual,
            if p.corrected { " (corrected)" } else { "" }
        );
    }
    let _ = writeln!(
        s,
        "- drained: {} after {} ms (limit {} ms)",
        run.drain.drained, run.drain.waited_ms, run.drain.limit_ms
    );
    if let Some(q) = &run.db_qps {
        let _ = writeln!(
            s,
            "- DB QPS peak {:.0}, mean {:.0} {} — {}",
            q.peak,
            q.mean,
            DbRate::of(q).counter,
            q.source
        );
    }
    if let (Some(w), Some(d)) = (run.db_row_lock_waits, run.db_deadlocks) {
        let _ = writeln!(s, "- InnoDB row lock waits {w:.0}, deadlocks {d:.0}");
    }
    if let Some(q) = &run.redis_ops {
        let _ = writeln!(
            s,
            "- Redis ops/s peak {:.0}, mean {:.0} — {}",
            q.peak, q.mean, q.source
        );
    }
    let g = &run.generator;
    let _ = writeln!(
        s,
        "- load generator: {} goose users, {:.2} cores used ({:.1} CPU s over {:.1} s), peak RSS {:.0} MiB",
        g.users, g.cores_used, g.cpu_seconds, g.wall_seconds, g.peak_rss_mib
    );
    let _ = writeln!(
        s,
        "\n| request | count | outcomes | mean | p50 | p90 | p99 | p99.9 | max |"
    );
    let _ = writeln!(s, "|---|---:|---|---:|---:|---:|---:|---:|---:|");
    for kind in Kind::ALL {
        if let Some(k) = run.requests.get(&kind) {
            let l = &k.latency;
            let outcomes = k
                .outcomes
                .iter()
                .map(|(a, n)| format!("{} {n}", a.as_str()))
                .collect::<Vec<_>>()
                .join(", ");
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} |",
                kind.as_str(),
                k.total,
                outcomes,
                l.mean_ms,
                l.p50_ms,
                l.p90_ms,
                l.p99_ms,
                l.p999_ms,
                l.max_ms
            );
        }
    }
    if !run.goose_crosscheck.is_empty() {
        let _ = writeln!(s, "\nGoose cross-check (time to first byte from the actual send; bots' extra submissions are not in it):");
        for g in &run.goose_crosscheck {
            let _ = writeln!(
                s,
                "- `{}`: {} requests, mean {:.3} ms, max {:.3} ms",
                g.name, g.count, g.mean_ms, g.max_ms
            );
        }
    }
}

/// The whole `report.md`.
pub fn render(r: &Report) -> String {
    let mb = r.multi_backend();
    let mut s = String::new();
    let _ = writeln!(s, "# oversell report: {}\n", r.scenario.name);
    let _ = writeln!(
        s,
        "{} buyers, {} units, purchase limit {} — scenario `{}`, generated {} by oversell {} on {} cores.\n",
        r.scenario.buyers, r.scenario.spec.item.stock, r.scenario.spec.item.purchase_limit, r.scenario.file, r.generated_at, r.tool_version, r.machine.cores
    );
    if !r.scenario.description.is_empty() {
        let _ = writeln!(s, "> {}\n", r.scenario.description.trim());
    }
    s.push_str(&headline(r));
    let _ = writeln!(s, "\n## Verdicts\n");
    for run in &r.runs {
        let _ = writeln!(s, "- **{}**: {}", run.label(mb), run.findings.verdict);
    }
    let _ = writeln!(s, "\n## Details");
    for run in &r.runs {
        details(&mut s, run, mb);
    }
    let _ = writeln!(s, "\n## Where the figures come from\n");
    for (k, v) in &r.sources {
        let _ = writeln!(s, "- **{k}**: {v}");
    }
    s
}
