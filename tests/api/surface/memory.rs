//! Memory the input controlled (#58): `fit` on a 330-byte log spanning eight years took 4.97 GB
//! before its "span too long" error, and a timestamp near the year 11000 aborted it; a `[watch]`
//! HTTP gauge answering 300 MB took 1.04 GB, a 100 MB Prometheus page 681 MB. Now fit refuses
//! the span before it allocates, and every body read from a source the harness does not
//! control stops at 4 MiB with an error naming the source. Each run is held under
//! [`super::MAX_RSS_MIB`] by [`super::measured`].

use super::{measured, stock_scenario, stock_shop};
use axum::body::Body;
use axum::routing::get;

/// A JSON log of order attempts at `times` (`time_iso8601` or `msec` values).
fn log(dir: &std::path::Path, field: &str, times: &[&str]) -> String {
    let lines: Vec<String> = times
        .iter()
        .enumerate()
        .map(|(i, t)| {
            serde_json::json!({
                field: t, "request_method": "POST", "request_uri": "/api/orders",
                "status": 201, "remote_user": format!("b{i}"),
            })
            .to_string()
        })
        .collect();
    let file = dir.join(format!("{field}.log"));
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    file.to_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fit_refuses_a_log_spanning_years_or_reaching_the_year_11000_before_it_allocates() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("fitted.toml");
    let years = log(
        tmp.path(),
        "time_iso8601",
        &[
            "2018-03-01T10:00:00Z",
            "2022-03-01T10:00:00Z",
            "2026-03-01T10:00:00Z",
        ],
    );
    let far = log(tmp.path(), "msec", &["1796519128.000", "284958432000.000"]);
    assert!(
        std::fs::metadata(&years).unwrap().len() < 400,
        "a log of a few hundred bytes"
    );
    let cases = [
        ("fit: three lines eight years apart", years, vec![]),
        (
            "fit: a timestamp near the year 11000",
            far,
            vec!["--time-field", "msec"],
        ),
    ];

    for (what, file, extra) in cases {
        // Act
        let mut args = vec![
            "fit",
            file.as_str(),
            "--format",
            "json",
            "--out",
            out.to_str().unwrap(),
        ];
        args.extend(extra);
        let m = measured(what, &args, &[]).await;

        // Assert: a clear refusal (no abort), the span named, nothing written.
        assert_eq!(m.run.code, 2, "{what}: {}", m.run.both());
        assert!(
            m.run.stderr.contains("the sale's arrivals span"),
            "{what}: {}",
            m.run.both()
        );
        assert!(
            !m.run.stderr.contains("memory allocation"),
            "{}",
            m.run.both()
        );
        assert!(!out.exists());
    }
}

/// A body of `mib` MiB, streamed in 64 KiB chunks with no `Content-Length` (a source that does
/// not say how much it sends), starting with `prefix`.
fn endless(prefix: &'static str, mib: usize) -> Body {
    let chunk = vec![b'7'; 64 * 1024];
    let chunks = (0..mib * 16).map(move |i| {
        let mut c = chunk.clone();
        if i == 0 {
            c[..prefix.len()].copy_from_slice(prefix.as_bytes());
        }
        Ok::<_, std::io::Error>(c)
    });
    Body::from_stream(futures_util::stream::iter(chunks))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_gauges_and_an_oracle_answering_hundreds_of_megabytes_are_read_to_4_mib_and_named() {
    // Arrange: a shop whose gauge endpoints answer 300 MB of JSON and a 100 MB Prometheus page.
    let extra = axum::Router::new()
        .route("/huge.json", get(|| async { endless("{\"n\": ", 300) }))
        .route("/huge.metrics", get(|| async { endless("m 1\n# ", 100) }))
        .route(
            "/huge-oracle",
            get(|| async { endless("{\"current_stock\": ", 300) }),
        );
    let (base, _shop) = stock_shop(extra).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let watch = format!(
        "[watch.big]\nhttp = \"{base}/huge.json\"\nfield = \"n\"\n\
         [watch.prom]\nprometheus = \"{base}/huge.metrics\"\nmetric = \"m\"\n"
    );
    let file = stock_scenario(tmp.path(), &[], &watch);
    let huge_oracle = stock_scenario(
        tmp.path(),
        &[("url = \"/stock\"", "url = \"/huge-oracle\"")],
        "",
    );

    // Act
    let watched = measured(
        "[watch] gauges answering 300 MB and 100 MB",
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            &file,
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let out2 = tmp.path().join("out2");
    let oracle = measured(
        "an oracle endpoint answering 300 MB",
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            &huge_oracle,
            "--out",
            out2.to_str().unwrap(),
        ],
        &[],
    )
    .await;

    // Assert: the run went on; each gauge says its answer was too large; the oracle's error
    // names the endpoint.
    assert_eq!(watched.run.code, 0, "{}", watched.run.both());
    let report = crate::helpers::only_report(&out);
    for g in ["big", "prom"] {
        let e = report["runs"][0]["watch"][g]["last_error"]
            .as_str()
            .unwrap_or_default();
        assert!(
            e.contains("larger than 4 MiB"),
            "{g}: {}",
            report["runs"][0]["watch"]
        );
    }
    assert_ne!(oracle.run.code, 0, "{}", oracle.run.both());
    assert!(
        oracle.run.stderr.contains("oracle endpoint")
            && oracle.run.stderr.contains("larger than 4 MiB"),
        "{}",
        oracle.run.both()
    );
}
