//! `oversell fit` on small sales: the default sale start, buyers known by their IP, bad logs,
//! and a fitted scenario run against the reference shop.

use super::log::{events, write_log, Form, Kind};
use super::{fit, unfolded, OPENED, OPENED_MS};
use crate::helpers::{drop_database, fresh_db_url, only_report, oversell_cli, redis_url};
use oversell::testing::store::Backend;
use oversell::testing::traffic::Scenario;
use std::path::{Path, PathBuf};

/// A small sale: 120 buyers over 3 s, for runs and the error cases.
const SMALL: &str = r#"
name = "small"
[item]
stock = 40
[buyers]
count = 120
seed = 3
arrival = "uniform"
window_s = 3
[browse]
view_share = 0.5
views = [1, 2]
think_ms = [100, 400]
[after_order]
pay = 0.5
cancel = 0.25
abandon = 0.25
think_ms = [100, 300]
"#;

#[tokio::test]
async fn the_default_sale_start_is_the_first_order_and_earlier_views_are_left_out() {
    let dir = tempfile::tempdir().unwrap();
    // Every person views first: the buyers who arrive before the first order only viewed yet.
    let model = SMALL.replace("view_share = 0.5", "view_share = 1.0");
    let (log, plan) = write_log(&model, Form::Combined, dir.path());
    let (s, text) = fit(&log, dir.path(), &[]).await;
    let text = unfolded(&text);
    let first_order = events(&plan)
        .iter()
        .filter(|e| e.kind == Kind::Order)
        .map(|e| e.at_ms)
        .min()
        .unwrap();
    let shown = chrono::DateTime::from_timestamp_millis(OPENED_MS + first_order)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    assert!(
        text.contains(&format!("({shown}, the first order attempt)")),
        "{shown}: {text}"
    );
    let views_before = events(&plan)
        .iter()
        .filter(|e| e.at_ms < first_order)
        .count();
    assert!(
        views_before > 0,
        "the model has views before the first order"
    );
    let md = std::fs::read_to_string(dir.path().join("fit.md")).unwrap();
    assert!(
        md.contains(&format!(
            "| matched a route, before the sale start (left out) | {views_before} |"
        )),
        "{md}"
    );
    assert_eq!(
        s.buyers.count, 120,
        "every buyer ordered after the first order"
    );
}

#[tokio::test]
async fn buyers_known_only_by_their_ip_are_counted_and_the_cost_is_said() {
    let dir = tempfile::tempdir().unwrap();
    let (log, plan) = write_log(SMALL, Form::CombinedNoUser, dir.path());
    let out = dir.path().join("fitted.toml");
    let run = oversell_cli(
        &[
            "fit",
            log.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--sale-start",
            OPENED,
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(
        run.stdout.contains("known only by their client IP"),
        "{}",
        run.both()
    );
    let md = std::fs::read_to_string(dir.path().join("fit.md")).unwrap();
    assert!(
        md.contains("are known only by their client IP, because remote_user was missing")
            && md.contains("bot share and resubmits read high"),
        "{md}"
    );
    // Buyers sharing an address (the model draws 120 from a pool of 1000) become one.
    let addresses: std::collections::HashSet<String> =
        plan.iter().map(|b| b.ip.to_string()).collect();
    assert!(
        addresses.len() < 120,
        "the seed gives some buyers one address"
    );
    let s = Scenario::load(&out).unwrap();
    assert_eq!(s.buyers.count as usize, addresses.len());
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

const ORDER: &str =
    "10.0.0.1 - alice [06/Dec/2026:01:05:28 +0000] \"POST /api/orders HTTP/1.1\" 201 9 \"-\" \"x\"";

#[tokio::test]
async fn bad_logs_get_errors_naming_the_line_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fitted.toml");
    let out = out.to_str().unwrap();
    let garbage = write(
        dir.path(),
        "garbage.log",
        &format!("{ORDER}\nthis is not a log line\n{ORDER}\n"),
    );
    let bad_status = write(
        dir.path(),
        "status.log",
        &format!("{ORDER}\n{}\n", ORDER.replace(" 201 ", " OK ")),
    );
    let json_time = write(
        dir.path(),
        "time.jsonl",
        "{\"time_iso8601\":\"yesterday\",\"request_method\":\"POST\",\"request_uri\":\"/api/orders\",\"status\":201,\"remote_addr\":\"10.0.0.1\"}\n",
    );
    let no_orders = write(
        dir.path(),
        "shop.log",
        &ORDER.replace("POST /api/orders", "POST /checkout/77"),
    );
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec![garbage.to_str().unwrap(), "--max-bad-lines", "0"],
            vec![
                "garbage.log",
                "line 2",
                "field `time_local`",
                "not the combined format",
                "--max-bad-lines 0",
            ],
        ),
        (
            vec![bad_status.to_str().unwrap(), "--max-bad-lines", "0"],
            vec!["line 2", "field `status`", "\"OK\" is not an HTTP status"],
        ),
        (
            vec![
                json_time.to_str().unwrap(),
                "--format",
                "json",
                "--max-bad-lines",
                "0",
            ],
            vec![
                "line 1",
                "field `time_iso8601`",
                "\"yesterday\"",
                "$time_local",
                "$msec",
            ],
        ),
        (
            vec![
                garbage.to_str().unwrap(),
                "--format",
                "json",
                "--max-bad-lines",
                "0",
            ],
            vec!["line 1", "not a JSON object", "give --format combined"],
        ),
        (
            vec![no_orders.to_str().unwrap()],
            vec![
                "no request matched the order route `POST /api/orders`",
                "POST /checkout/{id} ×1",
                "--route order=",
            ],
        ),
        (
            vec![no_orders.to_str().unwrap(), "--time-field", "ts"],
            vec!["--time-field names a JSON field", "--format json"],
        ),
        (
            vec![no_orders.to_str().unwrap(), "--buyer-field", "cookie:sid"],
            vec!["logs no cookies"],
        ),
        (
            vec![no_orders.to_str().unwrap(), "--route", "order=/checkout"],
            vec!["--route", "METHOD /path"],
        ),
        (
            vec![no_orders.to_str().unwrap(), "--sale-start", "noon"],
            vec!["noon", "is not a time"],
        ),
        (
            vec!["/no/such/access.log", "--sale-start", OPENED],
            vec!["/no/such/access.log", "cannot read the log"],
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["fit", "--out", out];
        all.extend(args.iter().copied());
        let run = oversell_cli(&all, &[]).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.both());
        for s in says {
            assert!(
                run.stderr.contains(s),
                "{args:?} should say {s:?}: {}",
                run.both()
            );
        }
        assert!(!run.stderr.contains("panicked"), "{}", run.both());
        assert!(!Path::new(out).exists(), "{args:?}: nothing written");
    }
    // Within the limit, a bad line is skipped and counted.
    let run = oversell_cli(&["fit", "--out", out, garbage.to_str().unwrap()], &[]).await;
    assert_eq!(run.code, 0, "{}", run.both());
    assert!(
        run.stdout
            .contains("lines that could not be read, skipped: 1 (the first: line 2"),
        "{}",
        run.both()
    );
    let md = std::fs::read_to_string(dir.path().join("fit.md")).unwrap();
    assert!(
        md.contains("| could not be read (limit: --max-bad-lines 100) | 1 |"),
        "{md}"
    );
}

#[tokio::test]
async fn an_empty_or_unreadable_log_is_called_that_not_a_wrong_route() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fitted.toml");
    let out = out.to_str().unwrap();
    let empty = write(dir.path(), "empty.log", "");
    let blank = write(dir.path(), "blank.log", "\n\n");
    let base64 = write(
        dir.path(),
        "b64.log",
        "SGVsbG8sIHRoaXMgaXMgbm90IGFuIGFjY2VzcyBsb2cgYXQgYWxs\nc2Vjb25kIGxpbmU=\n",
    );
    let text = write(
        dir.path(),
        "notes.txt",
        "hello password=hunter2 world\nthis is plain text\n",
    );
    let cases: Vec<(&Path, Vec<&str>)> = vec![
        (&empty, vec!["empty.log: the log is empty (0 lines)"]),
        (&blank, vec!["the log is empty (2 blank lines, nothing else)"]),
        (
            &base64,
            vec![
                "no line reads as a combined access log (2 of 2 lines could not be read)",
                "the first bad line, line 1: `SGVsbG8sIHRoaXMgaXMgbm90IGFuIGFjY2VzcyBsb2cgYXQgYWxs`",
                "not an access log?",
            ],
        ),
        (
            &text,
            vec![
                "no line reads as a combined access log",
                "line 1: `hello password=",
                "not an access log?",
            ],
        ),
    ];
    for (log, says) in cases {
        let run = oversell_cli(&["fit", log.to_str().unwrap(), "--out", out], &[]).await;
        assert_eq!(run.code, 2, "{log:?}: {}", run.both());
        for s in says {
            assert!(
                run.stderr.contains(s),
                "{log:?} should say {s:?}: {}",
                run.both()
            );
        }
        assert!(
            !run.stderr.contains("order route"),
            "{log:?}: {}",
            run.both()
        );
        assert!(
            !run.stderr.contains("hunter2"),
            "the line is masked: {}",
            run.both()
        );
        assert!(!Path::new(out).exists(), "{log:?}: nothing written");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fitted_scenario_runs_against_the_reference_shop() {
    let dir = tempfile::tempdir().unwrap();
    let (log, _) = write_log(SMALL, Form::Combined, dir.path());
    let (s, _) = fit(&log, dir.path(), &["--sale-start", OPENED]).await;
    let db = fresh_db_url(Backend::Postgres);
    let reports = dir.path().join("reports");
    let run = oversell_cli(
        &[
            "run",
            "--services",
            "external",
            "--strategy",
            "conditional",
            "--scenario",
            dir.path().join("fitted.toml").to_str().unwrap(),
            "--database-url",
            &db,
            "--redis-url",
            &redis_url(),
            "--out",
            reports.to_str().unwrap(),
            "--quiet",
        ],
        &[],
    )
    .await;
    drop_database(&db).await;
    assert_eq!(run.code, 0, "{}", run.both());
    let report = only_report(&reports);
    let r = &report["runs"][0];
    assert_eq!(
        report["scenario"]["spec"]["buyers"]["arrival"], "trace",
        "{report}"
    );
    assert_eq!(r["oversell"], 0, "{r}");
    assert_eq!(r["initial_stock"], s.item.stock, "{r}");
    assert_eq!(r["buyers"], s.buyers.count, "{r}");
}
