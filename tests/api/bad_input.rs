//! Every bad request gets its 4xx with a reason and moves no stock.

use crate::helpers::*;
use oversell::testing::inventory::Strategy;
use oversell::testing::store::Backend;
use serde_json::{json, Value};

async fn bad_requests_move_nothing(strategy: Strategy, backend: Backend) {
    let app = spawn_app(strategy, backend).await;
    app.setup_sale(1, 5, 2).await;
    let cases: Vec<(serde_json::Value, u16, &str)> = vec![
        (
            json!({"item_id": 1, "user_id": "u", "qty": 0}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "u", "qty": -3}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "u", "qty": 3}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "u", "qty": 1e30}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "u"}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "", "qty": 1}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "   ", "qty": 1}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "x".repeat(500), "qty": 1}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "u", "qty": "one"}),
            400,
            "invalid_request",
        ),
        (
            json!({"item_id": 1, "user_id": "u", "qty": 1, "coupon": "free"}),
            400,
            "invalid_request",
        ),
        (json!({"user_id": "u", "qty": 1}), 400, "invalid_request"),
        (
            json!({"item_id": 999, "user_id": "u", "qty": 1}),
            404,
            "unknown_item",
        ),
    ];
    for (body, status, code) in cases {
        let (s, resp) = app.order(body.clone()).await;
        assert_eq!(s, status, "{strategy}: {body} -> {resp}");
        assert_eq!(resp["error"], code, "{strategy}: {body} -> {resp}");
        if status == 400 {
            assert!(resp["detail"].is_string(), "a 400 carries a reason: {resp}");
        }
    }
    for raw in ["not json", "{\"item_id\": 1,", "[]", ""] {
        let (s, resp) = app.order_raw(raw).await;
        assert_eq!(
            (s, resp["error"].as_str()),
            (400, Some("invalid_request")),
            "{raw:?} -> {resp}"
        );
    }
    // A page of another origin may post text/plain or a form without asking the browser first:
    // a well-formed order in either is refused (415), as is one without a content type.
    let order = r#"{"item_id": 1, "user_id": "cross-origin", "qty": 1}"#;
    for ct in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut rb = app.client.post(format!("{}/api/orders", app.address));
        if let Some(ct) = ct {
            rb = rb.header("content-type", ct);
        }
        let r = rb.body(order).send().await.unwrap();
        let status = r.status().as_u16();
        let resp: Value = r.json().await.unwrap_or(Value::Null);
        assert_eq!(
            (status, resp["error"].as_str()),
            (415, Some("unsupported_media_type")),
            "{ct:?} -> {resp}"
        );
    }
    let r = app
        .client
        .put(format!("{}/api/items/1", app.address))
        .header("content-type", "text/plain")
        .body(r#"{"stock": 0}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 415, "a set-up needs application/json too");
    // Bad set-ups are refused too.
    for body in [
        json!({"stock": -1}),
        json!({"stock": 5, "purchase_limit": 0}),
        json!({"stok": 5}),
    ] {
        let r = app
            .client
            .put(format!("{}/api/items/1", app.address))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{body}");
    }
    let r = app
        .client
        .put(format!("{}/api/items/abc", app.address))
        .json(&json!({"stock": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    let audit = app.drained_audit(1).await;
    assert_eq!(audit["db_stock"], 5, "{strategy}: stock moved: {audit}");
    assert_eq!(audit["sold"], 0, "{audit}");
    if strategy.uses_redis() {
        assert_eq!(audit["redis_stock"], 5, "{audit}");
    }
    app.teardown().await;
}

#[tokio::test]
async fn bad_requests_move_no_stock_naive() {
    bad_requests_move_nothing(Strategy::Naive, Backend::Postgres).await;
}

#[tokio::test]
async fn bad_requests_move_no_stock_for_update_on_mysql() {
    bad_requests_move_nothing(Strategy::ForUpdate, Backend::Mysql).await;
}

#[tokio::test]
async fn bad_requests_move_no_stock_optimistic() {
    bad_requests_move_nothing(Strategy::Optimistic, Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_move_no_stock_redis_lua() {
    bad_requests_move_nothing(Strategy::RedisLua, Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_move_no_stock_redis_buckets() {
    bad_requests_move_nothing(Strategy::RedisBuckets, Backend::Mysql).await;
}

#[tokio::test]
async fn an_unreachable_database_is_named_with_how_to_start_it() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["serve", "--strategy", "naive", "--listen", "127.0.0.1:0"])
        .args([
            "--database-url",
            "postgres://postgres:hunter2@127.0.0.1:1/oversell",
        ])
        // auto would start a managed server in its place (tests/api/services.rs).
        .args(["--services", "external"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("cannot reach PostgreSQL at postgres://postgres:***@127.0.0.1:1/oversell"),
        "{err}"
    );
    assert!(err.contains("start it"), "{err}");
    assert!(!err.contains("hunter2"), "the password must not be printed");
    assert!(!err.contains("panicked"), "{err}");
}

#[tokio::test]
async fn an_unreachable_redis_is_named_with_how_to_start_it() {
    let db = fresh_db_url(Backend::Postgres);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args([
            "serve",
            "--strategy",
            "redis-lua",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--database-url", &db])
        .args(["--redis-url", "redis://127.0.0.1:1"])
        .args(["--services", "external"])
        .output()
        .unwrap();
    // The shop created and migrated its database before it found Redis missing.
    drop_database(&db).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("cannot reach Redis at redis://127.0.0.1:1"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[tokio::test]
async fn a_tokenless_shop_on_loopback_answers_no_other_host_name_and_one_with_a_token_does() {
    // Arrange: the test shop listens on 127.0.0.1 without --admin-token.
    let app = spawn_app(Strategy::Naive, Backend::Postgres).await;
    app.setup_sale(1, 5, 1).await;
    let put = |host: &'static str| {
        app.client
            .put(format!("{}/api/items/1?reset=true", app.address))
            .header("host", host)
            .json(&json!({"stock": 0}))
            .send()
    };

    // Act: a DNS-rebinding page names its own host; a local tool names the loopback.
    let rebound = put("evil.example:8080").await.unwrap();
    let rebound_status = rebound.status().as_u16();
    let rebound_body: Value = rebound.json().await.unwrap();
    let order = app
        .client
        .post(format!("{}/api/orders", app.address))
        .header("host", "evil.example")
        .json(&json!({"item_id": 1, "user_id": "u", "qty": 1}))
        .send()
        .await
        .unwrap()
        .status();
    let local = put("localhost:8080").await.unwrap().status();

    // Assert
    assert_eq!(rebound_status, 421, "{rebound_body}");
    assert_eq!(rebound_body["error"], "unknown_host", "{rebound_body}");
    assert_eq!(order, 421);
    assert_eq!(local, 200, "a loopback name is served");
    let audit = app.drained_audit(1).await;
    assert_eq!(audit["sold"], 0, "{audit}");
    app.teardown().await;

    // A shop with a token answers any name (it is meant to be reached): the guard is off.
    let mut config = test_config(Strategy::Naive, Backend::Postgres);
    config.admin_token = Some("0123456789abcdef-token".into());
    let app = spawn_with(config).await;
    let r = app
        .client
        .get(format!("{}/api/items/1", app.address))
        .header("host", "shop.example")
        .send()
        .await
        .unwrap();
    assert_ne!(r.status().as_u16(), 421);
    app.teardown().await;
}

/// The command line's bad input: each refused with exit 2 and a sentence saying what was
/// expected, before anything is started or sent.
mod command_line {
    use crate::helpers::{bundled_with, oversell_cli};

    #[tokio::test]
    async fn a_sale_of_zero_units_is_refused_naming_the_field() {
        let tmp = tempfile::tempdir().unwrap();
        let file = bundled_with("smoke", tmp.path(), &[("stock = 10", "stock = 0")]);
        let run = oversell_cli(
            &[
                "run",
                "--strategy",
                "naive",
                "--scenario",
                &file,
                "--dry-run",
            ],
            &[],
        )
        .await;
        assert_eq!(run.code, 2, "{}", run.both());
        assert!(
            run.stderr.contains("item.stock") && run.stderr.contains("between 1 and 1000000"),
            "{}",
            run.both()
        );
    }

    #[tokio::test]
    async fn a_target_without_a_scheme_gets_a_did_you_mean() {
        for target in ["127.0.0.1:8000", "localhost:8000"] {
            let run = oversell_cli(&["attack", "--target", target, "--dry-run"], &[]).await;
            assert_eq!(run.code, 2, "{}", run.both());
            assert!(
                run.stderr
                    .contains(&format!("did you mean http://{target}?")),
                "{}",
                run.both()
            );
            assert!(!run.stderr.contains("relative URL"), "{}", run.both());
        }
    }

    #[tokio::test]
    async fn diff_of_a_file_that_is_no_report_says_what_it_expected() {
        let tmp = tempfile::tempdir().unwrap();
        let notes = tmp.path().join("notes.txt");
        std::fs::write(&notes, "hello").unwrap();
        let other = tmp.path().join("other.json");
        std::fs::write(&other, "[1, 2]").unwrap();
        for (a, b) in [(&notes, &notes), (&other, &notes)] {
            let run = oversell_cli(&["diff", a.to_str().unwrap(), b.to_str().unwrap()], &[]).await;
            assert_eq!(run.code, 2, "{}", run.both());
            assert!(
                run.stderr
                    .contains("is not an oversell report: expected the report.json"),
                "{}",
                run.both()
            );
            assert!(
                !run.stderr.contains("line 1 column"),
                "no parser position: {}",
                run.both()
            );
        }
    }

    #[tokio::test]
    async fn a_fault_duration_without_a_unit_is_refused_naming_it() {
        let run = oversell_cli(
            &[
                "run",
                "--strategy",
                "naive",
                "--fault",
                "db-outage@1:500",
                "--dry-run",
            ],
            &[],
        )
        .await;
        assert_eq!(run.code, 2, "{}", run.both());
        assert!(
            run.stderr.contains("no unit") && run.stderr.contains("500ms"),
            "{}",
            run.both()
        );
        let ok = oversell_cli(
            &[
                "run",
                "--strategy",
                "naive",
                "--scenario",
                "smoke",
                "--fault",
                "db-outage@1.5s:1.5s",
                "--dry-run",
            ],
            &[],
        )
        .await;
        assert_eq!(ok.code, 0, "{}", ok.both());
        assert!(ok.stdout.contains("db-outage@1.5:1500ms"), "{}", ok.both());
    }

    #[tokio::test]
    async fn negative_numbers_are_refused_with_a_sentence_not_taken_for_flags() {
        for (args, says) in [
            (
                &["run", "--strategy", "naive", "--repeat", "-3"][..],
                "must be at least 1 (got -3)",
            ),
            (
                &["run", "--strategy", "naive", "--drain-timeout", "-1s"],
                "negative",
            ),
            (
                &["bench", "redis", "--concurrency", "0"],
                "must be at least 1 (got 0)",
            ),
            (&["capacity", "--budget", "600"], "no unit"),
        ] {
            let run = oversell_cli(args, &[]).await;
            assert_eq!(run.code, 2, "{args:?}: {}", run.both());
            assert!(run.stderr.contains(says), "{args:?}: {}", run.both());
            assert!(
                !run.stderr.contains("unexpected argument"),
                "{args:?}: {}",
                run.both()
            );
        }
    }
}
