//! The load generator's own figures about a run: its cores and memory, how late it sent (send
//! lag, lateness), how long requests queued for a sender, the shop's service time, and whether
//! the run is generator-bound.

use crate::report::RunReport;

/// The generator's lines, in the order a report prints them.
pub(super) fn lines(run: &RunReport) -> Vec<String> {
    let mut v = vec![resources(run)];
    if let Some(l) = &run.send_lag {
        v.push(format!(
            "send lag (intended send to actual send with a free sender: the generator's own lateness) p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} requests",
            l.p50_ms, l.p99_ms, l.max_ms, l.count
        ));
    }
    v.extend(lateness_line(run));
    v.extend(sender_wait(run));
    if let Some(l) = &run.service_time {
        v.push(format!(
            "service time (actual send to the full answer: the shop's and the network's share) p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} requests",
            l.p50_ms, l.p99_ms, l.max_ms, l.count
        ));
    }
    v
}

/// Buyers, senders, cores, memory and set-up time.
fn resources(run: &RunReport) -> String {
    let g = &run.generator;
    format!(
        "load generator: {} buyers through {} goose senders, {:.2} cores used ({:.1} CPU s over {:.1} s), peak RSS {:.0} MiB, set-up {} ms",
        g.buyers, g.users, g.cores_used, g.cpu_seconds, g.wall_seconds, g.peak_rss_mib, g.lead_ms
    )
}

/// How long requests queued while every sender was held (`None`: never a millisecond).
fn sender_wait(run: &RunReport) -> Option<String> {
    let l = run.sender_wait.as_ref().filter(|l| l.max_ms >= 1.0)?;
    let g = &run.generator;
    let full = match g.senders_full_at_s {
        Some(t) => format!("every one of the {} senders was first held by an unanswered request {t:.1} s after the opening", g.users),
        None => format!("the {} senders were never all held at once", g.users),
    };
    Some(format!(
        "sender wait (queued while every sender was held by an unanswered request: the shop's time, part of latency, not send lag) p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms over {} requests; {full}",
        l.p50_ms, l.p99_ms, l.max_ms, l.count
    ))
}

/// Why the run is generator-bound (its lateness could change what it concludes:
/// [`crate::report::lateness`]), or `None`.
pub fn generator_bound(run: &RunReport) -> Option<String> {
    if !run.generator_bound {
        return None;
    }
    if let Some(why) = &run.generator_lateness.bound {
        return Some(why.clone());
    }
    // A report from before the effect was judged: its send lag over the bound it was held to.
    let lag = run.send_lag.as_ref()?;
    Some(format!(
        "send lag p99 {:.3} ms exceeds the {} ms bound it was held to: the generator sent late, so this run's latency measures the generator as much as the shop",
        lag.p99_ms,
        run.max_send_lag_ms.map_or("(unknown)".into(), |b| format!("{b:.3}"))
    ))
}

/// What the generator's lateness added to the order latency, in one line (every run).
fn lateness_line(run: &RunReport) -> Option<String> {
    let l = &run.generator_lateness;
    let p99 = l.figures.iter().find(|f| f.figure == "p99")?;
    Some(format!(
        "generator lateness (latency with and without each request's send lag, HdrHistogram): order latency p99 {:.3} ms, {:.3} ms without send lag (+{:.3} ms); {} of {} requests sent {:.0} ms or more late by the generator; {}",
        p99.with_lag_ms,
        p99.without_lag_ms,
        p99.added_ms(),
        l.late_sends,
        l.sends,
        l.late_after_ms,
        if l.bound.is_some() {
            "it changes what this run concludes (generator-bound)"
        } else {
            "it changes no figure materially (not generator-bound)"
        }
    ))
}
