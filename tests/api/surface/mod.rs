//! The second review's attacks on the surface added in wave 4 (#58), each reproduced and shown
//! to fail: `[watch]` and `--oracle-sql` reaching another address through the driver's own
//! parameters (`guard`), "read-only" SQL writing files, signalling backends and quoting what
//! it read (`read_only`), secrets reaching the output (`secrets`), memory the input controls
//! (`memory`), the admin routes taking cross-origin posts (`admin`), and the managed servers
//! sharing a uid with the machine's database (`managed_uid`).
//!
//! Every run of the binary here is measured ([`measured`]): none may take more than
//! [`MAX_RSS_MIB`]. On the release build (`cargo test --release --test api surface`) that is
//! the "run together on the release build" check.

mod admin;
mod guard;
mod managed_uid;
mod memory;
mod read_only;
mod secrets;

use crate::helpers::CliRun;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The most memory one run of the binary may take, in MiB (peak RSS).
pub const MAX_RSS_MIB: f64 = 300.0;

/// A run of the binary and its peak resident memory.
pub struct Measured {
    pub run: CliRun,
    pub peak_mib: f64,
}

/// Runs the `oversell` binary with `args` and extra `env` under GNU `time`, which reads the
/// kernel's own count of its peak resident memory (`wait4`'s `ru_maxrss`); asserts it stayed
/// under [`MAX_RSS_MIB`] and prints it (the report's figures: `--nocapture`). `time` stands
/// between the two because a child forked straight from this large test process would count
/// the test's own memory, which the fork copies, as its peak.
pub async fn measured(what: &str, args: &[&str], env: &[(&str, &str)]) -> Measured {
    let timer = std::path::Path::new(TIME);
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        timer.exists() || !ci,
        "CI needs GNU time at {TIME} to measure peak memory"
    );
    let rss = tempfile::NamedTempFile::new().unwrap();
    let rss_file = rss.path().to_str().unwrap().to_string();
    let mut all: Vec<&str> = Vec::new();
    if timer.exists() {
        all.extend([
            TIME,
            "-f",
            "%M",
            "-o",
            rss_file.as_str(),
            env!("CARGO_BIN_EXE_oversell"),
        ]);
    } else {
        eprintln!("\n*** no {TIME}: peak memory not measured ***\n");
        all.push(env!("CARGO_BIN_EXE_oversell"));
    }
    all.extend_from_slice(args);
    let out = tokio::process::Command::new(all[0])
        .args(&all[1..])
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("DATABASE_URL")
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("the oversell binary runs");
    let kib: f64 = std::fs::read_to_string(&rss_file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .unwrap_or(0.0);
    let m = Measured {
        run: CliRun {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        peak_mib: kib / 1024.0,
    };
    eprintln!(
        "peak RSS {what}: {:.1} MiB (exit {})",
        m.peak_mib, m.run.code
    );
    assert!(
        m.peak_mib < MAX_RSS_MIB,
        "{what} took {:.1} MiB, more than {MAX_RSS_MIB}: {}",
        m.peak_mib,
        m.run.both()
    );
    m
}

/// GNU time.
const TIME: &str = "/usr/bin/time";

/// Every file under `dir`, recursively, as text.
pub fn texts(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(texts(&p));
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((p, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    out
}

/// Where any of `secrets` appears: in a file under `dir`, or in what the run printed.
pub fn leaks(dir: &Path, run: &CliRun, secrets: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    let mut all = texts(dir);
    all.push((
        "the terminal".into(),
        format!("{}\n{}", run.stdout, run.stderr),
    ));
    for (at, text) in &all {
        for s in secrets {
            if text.contains(s) {
                found.push(format!("{s} in {}", at.display()));
            }
        }
    }
    found
}

/// A stand-in for `scenarios/rehearsal-stock-only.toml`'s shop: one stock counter; counts every
/// request it gets.
#[derive(Clone, Default)]
pub struct StockShop {
    stock: Arc<Mutex<i64>>,
    pub requests: Arc<AtomicUsize>,
}

impl StockShop {
    /// Requests it has answered.
    pub fn seen(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

async fn purchase(State(s): State<StockShop>) -> (StatusCode, Json<Value>) {
    let mut stock = s.stock.lock().unwrap();
    if *stock <= 0 {
        return (StatusCode::CONFLICT, Json(json!({"detail": "sold out"})));
    }
    *stock -= 1;
    (StatusCode::OK, Json(json!({"message": "purchased"})))
}

async fn stock(State(s): State<StockShop>) -> Json<Value> {
    Json(json!({"current_stock": *s.stock.lock().unwrap()}))
}

async fn reset(State(s): State<StockShop>, Query(q): Query<HashMap<String, i64>>) -> StatusCode {
    *s.stock.lock().unwrap() = q.get("amount").copied().unwrap_or(0);
    StatusCode::OK
}

/// Serves a [`StockShop`] (plus `extra` routes) on loopback; its base URL and state.
pub async fn stock_shop(extra: Router<StockShop>) -> (String, StockShop) {
    let state = StockShop::default();
    let counted = state.requests.clone();
    let app = Router::new()
        .route("/purchase", post(purchase))
        .route("/stock", get(stock))
        .route("/stock/reset", post(reset))
        .merge(extra)
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                counted.fetch_add(1, Ordering::SeqCst);
                next.run(req)
            },
        ))
        .with_state(state.clone());
    (crate::helpers::serve_stand_in(app).await, state)
}

/// `scenarios/rehearsal-stock-only.toml`, made small (60 buyers over 1 s), with `edits` made
/// and `extra` appended, written in `dir`.
pub fn stock_scenario(dir: &Path, edits: &[(&str, &str)], extra: &str) -> String {
    let mut text = std::fs::read_to_string("scenarios/rehearsal-stock-only.toml").unwrap();
    let mut all = vec![
        ("count = 300", "count = 60"),
        ("window_s = 3.0", "window_s = 1.0"),
    ];
    all.extend_from_slice(edits);
    for (from, to) in all {
        assert!(text.contains(from), "the scenario has {from:?}");
        text = text.replacen(from, to, 1);
    }
    // A name of its own: a test may write several before running them.
    let file = dir.join(format!("scenario-{:08x}.toml", rand::random::<u32>()));
    std::fs::write(&file, format!("{text}\n{extra}\n")).unwrap();
    file.to_str().unwrap().to_string()
}

/// A fresh PostgreSQL database on the machine's server (superuser `postgres`): its URL, with
/// `postgres`'s real password (the server trusts loopback, so any would do).
pub async fn superuser_db() -> String {
    use sqlx::migrate::MigrateDatabase;
    let url = crate::helpers::fresh_db_url(oversell::testing::store::Backend::Postgres);
    sqlx::Postgres::create_database(&url).await.unwrap();
    url
}

/// `n` random hexadecimal characters: a secret nobody else could write by chance.
pub fn seeded(tag: &str) -> String {
    format!("{tag}{:016x}", rand::random::<u64>())
}
