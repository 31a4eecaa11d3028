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
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
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

/// Runs the `oversell` binary with `args` and extra `env`, waiting for its exit with `wait4`,
/// so the kernel's own count of its peak resident memory comes back; asserts it stayed under
/// [`MAX_RSS_MIB`] and prints it (the report's figures: `--nocapture`).
pub async fn measured(what: &str, args: &[&str], env: &[(&str, &str)]) -> Measured {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let m = tokio::task::spawn_blocking(move || run_blocking(&args, &env))
        .await
        .unwrap();
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

fn run_blocking(args: &[String], env: &[(String, String)]) -> Measured {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(args)
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("DATABASE_URL")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the oversell binary runs");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let mut stderr = String::new();
    let _ = err.read_to_string(&mut stderr);
    let stdout = reader.join().unwrap();
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, whose pid std gave us; `status` and `usage` outlive it.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert!(pid > 0, "wait4: {}", std::io::Error::last_os_error());
    let exit = std::process::ExitStatus::from_raw(status);
    Measured {
        run: CliRun {
            code: exit.code().unwrap_or(-1),
            stdout,
            stderr,
        },
        // Linux counts ru_maxrss in KiB.
        peak_mib: usage.ru_maxrss as f64 / 1024.0,
    }
}

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
    let file = dir.join("scenario.toml");
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
