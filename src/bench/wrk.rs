//! `wrk` against `POST /api/orders` at saturation: the one order script, `bench/order.lua`,
//! gives every request its own buyer (user, device) and `Idempotency-Key`, counts the
//! `201 Created` answers across wrk's threads, and wrk's `--latency` gives the percentiles.

use super::require_tool;
use crate::shop::routes::Route;
use anyhow::{bail, Context};
use serde::Serialize;
use std::time::Duration;

/// What one `wrk` run measured (from its own output).
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct WrkResult {
    /// Every answer wrk counted.
    pub requests: u64,
    /// `201 Created`: orders the shop took (counted by the script).
    pub created: u64,
    /// Answers other than 2xx/3xx (sold out, busy...).
    pub non_2xx: u64,
    /// wrk's socket errors (connect, read, write, timeout), summed.
    pub socket_errors: u64,
    pub seconds: f64,
    pub requests_per_s: f64,
    /// `created / seconds`: the figure compared with the ceiling.
    pub orders_per_s: f64,
    pub p50_ms: f64,
    pub p75_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub connections: usize,
    pub threads: usize,
    pub command: String,
    /// wrk's own peak resident set, MiB (`VmHWM` of `/proc/<pid>/status`, sampled every
    /// 100 ms while it runs).
    pub peak_rss_mib: f64,
}

/// The one order script (`bench/order.lua`, also run by `bench/hot-row.sh`): one buyer and
/// one `Idempotency-Key` per request, the 201s counted across wrk's threads.
pub const SCRIPT: &str = include_str!("../../bench/order.lua");

/// Runs `wrk` for `seconds` with `connections` connections on `threads` threads.
pub async fn run(
    base_url: &str,
    connections: usize,
    threads: usize,
    seconds: u64,
    tag: &str,
) -> anyhow::Result<WrkResult> {
    require_tool("wrk", "wrk")?;
    let script = std::env::temp_dir().join(format!("oversell-wrk-{tag}.lua"));
    std::fs::write(&script, SCRIPT).with_context(|| format!("writing {}", script.display()))?;
    let threads = threads.clamp(1, connections.max(1));
    let args: Vec<String> = vec![
        "-t".into(),
        threads.to_string(),
        "-c".into(),
        connections.max(1).to_string(),
        "-d".into(),
        format!("{}s", seconds.max(1)),
        "--timeout".into(),
        "10s".into(),
        "--latency".into(),
        "-s".into(),
        script.display().to_string(),
        Route::Orders.url(base_url),
        "--".into(),
        tag.into(),
    ];
    let child = tokio::process::Command::new("wrk")
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running wrk")?;
    let peak = child.id().map(|pid| {
        tokio::spawn(async move {
            let mut peak = 0.0f64;
            while let Some(kib) = vm_hwm_kib(pid) {
                peak = peak.max(kib);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            peak
        })
    });
    let out = tokio::time::timeout(Duration::from_secs(seconds + 60), child.wait_with_output())
        .await
        .context("wrk did not finish")?
        .context("running wrk")?;
    let peak_kib = match peak {
        Some(task) => task.await.unwrap_or(0.0),
        None => 0.0,
    };
    let _ = std::fs::remove_file(&script);
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "wrk failed ({}): {text} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut r = parse(&text).with_context(|| format!("unexpected wrk output: {text}"))?;
    r.connections = connections;
    r.threads = threads;
    r.command = format!("wrk {}", args.join(" "));
    r.peak_rss_mib = (peak_kib / 1024.0 * 10.0).round() / 10.0;
    Ok(r)
}

/// `VmHWM` of a live process, KiB (`None` once it is gone or a zombie).
fn vm_hwm_kib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// A wrk duration (`812.00us`, `3.41ms`, `1.20s`, `2.00m`) in milliseconds.
fn duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().ok()?;
    Some(match unit {
        "us" => v / 1000.0,
        "ms" => v,
        "s" => v * 1000.0,
        "m" => v * 60_000.0,
        "h" => v * 3_600_000.0,
        _ => return None,
    })
}

/// Parses wrk's `--latency` output and the script's `oversell-created:` line.
pub fn parse(text: &str) -> Option<WrkResult> {
    let mut r = WrkResult::default();
    let mut saw_total = false;
    let mut saw_created = false;
    for line in text.lines().map(str::trim) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["50%", v] => r.p50_ms = duration_ms(v)?,
            ["75%", v] => r.p75_ms = duration_ms(v)?,
            ["90%", v] => r.p90_ms = duration_ms(v)?,
            ["99%", v] => r.p99_ms = duration_ms(v)?,
            [n, "requests", "in", secs, ..] => {
                r.requests = n.parse().ok()?;
                r.seconds = duration_ms(secs.trim_end_matches(','))? / 1000.0;
                saw_total = true;
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => r.non_2xx = n.parse().ok()?,
            ["Requests/sec:", v] => r.requests_per_s = v.parse().ok()?,
            ["oversell-created:", n] => {
                r.created = n.parse().ok()?;
                saw_created = true;
            }
            ["Socket", "errors:", rest @ ..] => {
                r.socket_errors = rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                    .sum();
            }
            _ => {}
        }
    }
    if !saw_total || !saw_created || r.seconds <= 0.0 {
        return None;
    }
    r.orders_per_s = (r.created as f64 / r.seconds).round();
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUT: &str = "Running 2s test @ http://127.0.0.1:1/api/orders
  2 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     4.01ms    2.10ms  41.20ms   80.00%
    Req/Sec     8.10k   500.00     9.00k    70.00%
  Latency Distribution
     50%    3.41ms
     75%  812.00us
     90%    1.20s
     99%    2.00m
  32400 requests in 2.00s, 9.10MB read
  Socket errors: connect 0, read 2, write 0, timeout 3
  Non-2xx or 3xx responses: 400
Requests/sec:  16200.00
Transfer/sec:      4.55MB
oversell-created: 32000
";

    #[test]
    fn wrk_output_is_parsed() {
        let r = parse(OUT).unwrap();
        assert_eq!(r.requests, 32400);
        assert_eq!(r.created, 32000);
        assert_eq!(r.non_2xx, 400);
        assert_eq!(r.socket_errors, 5);
        assert_eq!(r.seconds, 2.0);
        assert_eq!(r.orders_per_s, 16000.0);
        assert_eq!(r.requests_per_s, 16200.0);
        assert_eq!(r.p50_ms, 3.41);
        assert_eq!(r.p75_ms, 0.812);
        assert_eq!(r.p90_ms, 1200.0);
        assert_eq!(r.p99_ms, 120_000.0);
    }

    #[test]
    fn output_without_the_created_count_is_refused() {
        assert!(parse(&OUT.replace("oversell-created: 32000", "")).is_none());
    }
}
