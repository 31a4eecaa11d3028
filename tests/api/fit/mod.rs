//! `oversell fit`: access logs written inside the test from a known model (the scenario's own
//! seeded schedule, sent through a simulated shop that sells out), in both formats, fitted
//! by the binary; each recovered parameter is held to a stated tolerance, the trace to the
//! log's per-second counts exactly; bad logs get errors naming the line and the field;
//! `--scale` and `--compress`; a fitted scenario dry-runs and runs against the reference shop.

mod cases;
mod log;

use crate::helpers::oversell_cli;
use log::{flags, per_second, write_log, Form};
use oversell::testing::traffic::Scenario;
use std::path::Path;

/// The sale opens at 2026-12-06T01:05:28Z (epoch milliseconds).
pub const OPENED_MS: i64 = 1_796_519_128_000;
pub const OPENED: &str = "2026-12-06T01:05:28Z";

/// The known model: a burst, 40 % viewers, 8 % bots resubmitting 4 times, 75/10/15
/// pay/cancel/abandon, a stock that sells out.
const KNOWN: &str = r#"
name = "known"
[item]
stock = 1500
[buyers]
count = 4000
seed = 44
arrival = "burst"
window_s = 40
burst_s = 4
burst_share = 0.7
[browse]
view_share = 0.4
views = [1, 3]
think_ms = [500, 3000]
[bots]
share = 0.08
resubmits = 4
interval_ms = [200, 800]
[after_order]
pay = 0.75
cancel = 0.10
abandon = 0.15
think_ms = [2000, 10000]
"#;

/// Shares measured over n draws of the model: 4 standard deviations of a share near the
/// model's (0.08 over 4000 buyers: 0.0043; 0.4 over ~3680 people: 0.008; 0.75 over ~1650
/// ordering buyers: 0.011) is at most this.
const SHARE_TOLERANCE: f64 = 0.045;
/// Bots: 0.08 over 4000 buyers, 4 standard deviations.
const BOT_SHARE_TOLERANCE: f64 = 0.018;
/// The burst's share inside it: 0.7 over 4000 (sd 0.007), 4 sd.
const BURST_SHARE_TOLERANCE: f64 = 0.03;
/// A range's bounds, from the 10th and 90th percentiles of ≥ 1000 uniform gaps: within this
/// share of the range's width (sampling error of a decile ~1 %, widened ×1.25, plus
/// HdrHistogram's 3 significant digits).
const RANGE_TOLERANCE: f64 = 0.08;

/// `oversell fit LOG --out DIR/fitted.toml --sale-start OPENED` plus `extra`: the fitted
/// scenario (the run asserted to succeed).
pub async fn fit(log: &Path, dir: &Path, extra: &[&str]) -> (Scenario, String) {
    let out = dir.join("fitted.toml");
    let mut args = vec!["fit", log.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let run = oversell_cli(&args, &[]).await;
    assert_eq!(run.code, 0, "{}", run.both());
    let s = Scenario::load(&out).unwrap_or_else(|e| panic!("{e}"));
    (s, std::fs::read_to_string(&out).unwrap())
}

/// The scenario's comments joined back into lines of any length.
pub fn unfolded(text: &str) -> String {
    text.replace("\n# ", " ")
}

fn close(what: &str, got: f64, want: f64, tolerance: f64) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: fitted {got}, the model's {want}, tolerance {tolerance}"
    );
}

fn close_range(what: &str, got: [u64; 2], want: [u64; 2]) {
    let width = (want[1] - want[0]) as f64;
    for (g, w) in got.iter().zip(want) {
        close(what, *g as f64, w as f64, width * RANGE_TOLERANCE);
    }
}

/// Every parameter of [`KNOWN`] recovered from its log in `form`.
async fn recovers_the_known_model(form: Form) {
    let dir = tempfile::tempdir().unwrap();
    let (log, plan) = write_log(KNOWN, form, dir.path());
    let mut extra = vec!["--sale-start", OPENED];
    extra.extend(flags(form));
    let (s, raw) = fit(&log, dir.path(), &extra).await;
    let k = Scenario::parse(KNOWN).unwrap();
    let text = unfolded(&raw);

    // The arrivals: the trace is the log's per-second counts, exactly.
    assert_eq!(s.buyers.count, k.buyers.count);
    assert_eq!(s.buyers.trace, per_second(&plan));
    assert_eq!(s.buyers.window_s, s.buyers.trace.len() as f64);
    // The closest burst, in comments: burst_s in whole seconds.
    assert!(
        raw.contains("#   arrival = \"burst\", burst_s = 4, burst_share = 0."),
        "{raw}"
    );
    let share: f64 = raw
        .split("burst_share = ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    close("buyers.burst_share", share, 0.7, BURST_SHARE_TOLERANCE);

    close(
        "browse.view_share",
        s.browse.view_share,
        0.4,
        SHARE_TOLERANCE,
    );
    assert_eq!(s.browse.views, [1, 3], "browse.views");
    close_range("browse.think_ms", s.browse.think_ms, [500, 3000]);
    close("bots.share", s.bots.share, 0.08, BOT_SHARE_TOLERANCE);
    assert_eq!(s.bots.resubmits, 4, "bots.resubmits");
    close_range("bots.interval_ms", s.bots.interval_ms, [200, 800]);
    close("after_order.pay", s.after_order.pay, 0.75, SHARE_TOLERANCE);
    close(
        "after_order.cancel",
        s.after_order.cancel,
        0.10,
        SHARE_TOLERANCE,
    );
    close(
        "after_order.abandon",
        s.after_order.abandon,
        0.15,
        SHARE_TOLERANCE,
    );
    close_range(
        "after_order.think_ms",
        s.after_order.think_ms,
        [2000, 10000],
    );
    assert_eq!(
        s.item.stock, 1500,
        "item.stock: the most units held at once"
    );

    // Every number says where it came from, and the report and chart are beside it.
    for says in [
        "buyers who are not bots viewed `GET /api/items/{id}` before their first order",
        "within 2s (--bot-window)",
        "Inferred: the most units held at once",
        "replays these counts exactly",
    ] {
        assert!(text.contains(says), "{says}: {text}");
    }
    let md = std::fs::read_to_string(dir.path().join("fit.md")).unwrap();
    assert!(
        md.contains("| bots.share |") && md.contains("fit-arrivals.png"),
        "{md}"
    );
    assert!(!md.contains("known only by their client IP"), "{md}");
    for chart in ["fit-arrivals.svg", "fit-arrivals.png"] {
        assert!(
            std::fs::metadata(dir.path().join(chart)).unwrap().len() > 1000,
            "{chart}"
        );
    }
}

#[tokio::test]
async fn fit_recovers_a_known_model_from_a_combined_log() {
    recovers_the_known_model(Form::Combined).await;
}

#[tokio::test]
async fn fit_recovers_a_known_model_from_json_lines() {
    recovers_the_known_model(Form::Json).await;
}

#[tokio::test]
async fn the_fitted_trace_replays_the_logs_seconds_exactly_under_the_same_seed() {
    let dir = tempfile::tempdir().unwrap();
    let (log, plan) = write_log(KNOWN, Form::Combined, dir.path());
    fit(&log, dir.path(), &["--sale-start", OPENED]).await;
    let fitted = dir.path().join("fitted.toml");
    let mut seen = Vec::new();
    for _ in 0..2 {
        let run = oversell_cli(
            &[
                "gate",
                "-S",
                fitted.to_str().unwrap(),
                "--dry-run",
                "--json",
            ],
            &[],
        )
        .await;
        assert_eq!(run.code, 0, "{}", run.both());
        let v: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
        let arrivals: Vec<u32> = v["plan"]["arrivals_per_second"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap() as u32)
            .collect();
        assert_eq!(
            arrivals,
            per_second(&plan),
            "each second of the log, replayed"
        );
        seen.push(v["plan"].clone());
    }
    assert_eq!(seen[0], seen[1], "the same seed plans the same sale");
}

#[tokio::test]
async fn scale_multiplies_every_second_and_compress_folds_the_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let (log, plan) = write_log(KNOWN, Form::Combined, dir.path());
    let logged = per_second(&plan);
    let (plain, _) = fit(&log, dir.path(), &["--sale-start", OPENED]).await;
    let (scaled, text) = fit(&log, dir.path(), &["--sale-start", OPENED, "--scale", "3"]).await;
    assert_eq!(scaled.buyers.count, 3 * plain.buyers.count);
    let tripled: Vec<u32> = logged.iter().map(|n| 3 * n).collect();
    assert_eq!(scaled.buyers.trace, tripled);
    assert_eq!(
        scaled.item.stock, plain.item.stock,
        "the same sale, more buyers"
    );
    assert!(unfolded(&text).contains("Scaled ×3 (--scale)"), "{text}");
    let (fast, text) = fit(
        &log,
        dir.path(),
        &["--sale-start", OPENED, "--compress", "2"],
    )
    .await;
    assert_eq!(fast.buyers.count, plain.buyers.count, "the same buyers");
    let folded: Vec<u32> = logged.chunks(2).map(|c| c.iter().sum()).collect();
    assert_eq!(fast.buyers.trace, folded);
    assert_eq!(fast.buyers.window_s, folded.len() as f64);
    assert!(
        unfolded(&text).contains("Compressed ×2 (--compress)"),
        "{text}"
    );
    // The buyers' own behaviour is the log's, whatever the arrival curve.
    for s in [&scaled, &fast] {
        assert_eq!(s.bots.share, plain.bots.share);
        assert_eq!(s.browse.think_ms, plain.browse.think_ms);
        assert_eq!(s.after_order.pay, plain.after_order.pay);
    }
    let md = std::fs::read_to_string(dir.path().join("fit.md")).unwrap();
    assert!(md.contains("--compress 2: the same buyers, faster"), "{md}");
}
