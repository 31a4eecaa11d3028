//! Secrets never leave the run (#43): a leaky stand-in shop (in process, its own loopback
//! port) that echoes every credential it is sent into its answers, driven with known secrets
//! in every place a scenario or a command line can hold one: an `{env:NAME}` header, a literal
//! header, the login body, a `--buyers-csv` password column, the extracted token, the session
//! cookie, the oracle URL's query and `--admin-token`. Every file the runs write (the report
//! folder, the shard folder) and what they print is searched for each one.

use crate::helpers::*;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

const ENV_KEY: &str = "ENVSECRET0001-k";
const HEADER_SECRET: &str = "HDRSECRET0002-h";
const LOGIN_SECRET: &str = "LOGINSECRET0003-l";
const CSV_SECRET: &str = "CSVSECRET0004";
const TOKEN_SECRET: &str = "TOKSECRET0005";
const COOKIE_SECRET: &str = "COOKIESECRET0006";
const QUERY_SECRET: &str = "QUERYSECRET0007-q";
const ADMIN_SECRET: &str = "ADMINSECRET0008-a";
/// Every secret a run is given: none may be found in anything it writes or prints.
const ALL: [&str; 8] = [
    ENV_KEY,
    HEADER_SECRET,
    LOGIN_SECRET,
    CSV_SECRET,
    TOKEN_SECRET,
    COOKIE_SECRET,
    QUERY_SECRET,
    ADMIN_SECRET,
];

/// What the shop saw: each count proves a secret was really sent (so finding none in the
/// output means it was masked, not missing).
#[derive(Default)]
struct Leaky {
    stock: i64,
    sold: i64,
    orders: u64,
    /// Set-ups and orders that carried the environment's key and the literal header.
    keyed: u64,
    /// Logins whose body held the CSV password and the literal login secret.
    logins_with_secrets: u64,
    failed_logins: u64,
    /// Orders that carried an issued token and its cookie.
    authorized: u64,
    /// Answers that echoed the credentials back (no rule reads them: unclassified).
    echoed: u64,
    /// Oracle reads with the query's key.
    oracle_reads: u64,
}

type Shared = Arc<Mutex<Leaky>>;

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

fn keyed(h: &HeaderMap) -> bool {
    header(h, "x-api-key") == ENV_KEY && header(h, "x-client-secret") == HEADER_SECRET
}

async fn reset(State(s): State<Shared>, h: HeaderMap, Json(b): Json<Value>) -> Response {
    let mut s = s.lock().unwrap();
    s.keyed += keyed(&h) as u64;
    s.stock = b["stock"].as_i64().unwrap_or(0);
    (StatusCode::OK, Json(json!({"ok": true}))).into_response()
}

/// A login: every fifth buyer is refused with its request echoed back; the others get a
/// token and a session cookie.
async fn login(State(s): State<Shared>, body: String) -> Response {
    let mut s = s.lock().unwrap();
    let b: Value = serde_json::from_str(&body).unwrap_or_default();
    let with_secrets = b["password"].as_str().unwrap_or("").starts_with(CSV_SECRET)
        && b["client_secret"] == LOGIN_SECRET;
    s.logins_with_secrets += with_secrets as u64;
    let n: u64 = b["user"]
        .as_str()
        .and_then(|u| u.trim_start_matches("buyer").parse().ok())
        .unwrap_or(0);
    if n.is_multiple_of(5) {
        s.failed_logins += 1;
        // An HTML error page, as many shops answer: report.md must not render it.
        let page = format!("<h1>denied</h1><script>x()</script> {body}");
        return (StatusCode::UNAUTHORIZED, page).into_response();
    }
    let token = format!("{TOKEN_SECRET}-{n}");
    let cookie = format!("sid={COOKIE_SECRET}-{n}; Path=/");
    (
        StatusCode::OK,
        [("set-cookie", cookie)],
        Json(json!({"access_token": token})),
    )
        .into_response()
}

/// An order: every fourth answer is a 202 echoing the request's credentials (no rule reads
/// it); the others buy a unit or are sold out.
async fn order(State(s): State<Shared>, h: HeaderMap) -> Response {
    let mut s = s.lock().unwrap();
    s.orders += 1;
    s.keyed += keyed(&h) as u64;
    let auth = header(&h, "authorization");
    let cookie = header(&h, "cookie");
    s.authorized += (auth.contains(TOKEN_SECRET) && cookie.contains(COOKIE_SECRET)) as u64;
    if s.orders % 4 == 1 {
        s.echoed += 1;
        // Names that say nothing: only masking by value can catch these.
        let echo = json!({
            "a": auth, "b": cookie, "c": header(&h, "x-api-key"),
            "d": header(&h, "x-client-secret"),
        });
        return (StatusCode::ACCEPTED, echo.to_string()).into_response();
    }
    if s.stock <= 0 {
        return (StatusCode::CONFLICT, Json(json!({"error": "sold_out"}))).into_response();
    }
    s.stock -= 1;
    s.sold += 1;
    let id = format!("o{}", s.orders);
    (StatusCode::CREATED, Json(json!({"order_id": id}))).into_response()
}

async fn oracle(State(s): State<Shared>, Query(q): Query<HashMap<String, String>>) -> Response {
    let mut s = s.lock().unwrap();
    if q.get("api_key").map(String::as_str) != Some(QUERY_SECRET) {
        return (StatusCode::FORBIDDEN, "no key").into_response();
    }
    s.oracle_reads += 1;
    Json(json!({"sold": s.sold, "stock": s.stock})).into_response()
}

async fn spawn_leaky() -> (String, Shared) {
    let shop = Shared::default();
    let app = Router::new()
        .route("/reset", post(reset))
        .route("/login", post(login))
        .route("/orders", post(order))
        .route("/stock", get(oracle))
        .with_state(shop.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, shop)
}

/// The scenario: `{env:SHOP_API_KEY}` and a literal secret header on every request, a login
/// with the CSV's password and a literal client secret, the token and the cookie on orders.
fn scenario(login: bool) -> String {
    let login_table = if login {
        r#"
headers = { "X-Api-Key" = "{env:SHOP_API_KEY}", "X-Client-Secret" = "HDRSECRET0002-h", Authorization = "Bearer {token}" }
[target.login]
method = "POST"
path = "/login"
body = '{"user": "{user_id}", "password": "{password}", "client_secret": "LOGINSECRET0003-l"}'
extract = { token = "access_token" }
"#
    } else {
        r#"
headers = { "X-Api-Key" = "{env:SHOP_API_KEY}", "X-Client-Secret" = "HDRSECRET0002-h" }
"#
    };
    format!(
        r#"
name = "secrets"
[item]
id = 1
stock = 10
[buyers]
count = 40
seed = 3
arrival = "burst"
window_s = 1.0
burst_s = 0.3
burst_share = 0.8
[browse]
view_share = 0.0
[after_order]
pay = 0
cancel = 0
abandon = 1
[client]
timeout_ms = 5000
[target]
ip_header = ""
max_unclassified = 1.0
setup = {{ method = "POST", path = "/reset", body = '{{"stock": {{stock}}}}' }}
order = {{ method = "POST", path = "/orders", body = '{{"user_id": "{{user_id}}"}}' }}
order_id_field = "order_id"
outcomes = [
  {{ status = ["201"], outcome = "created" }},
  {{ status = ["409"], outcome = "sold_out" }},
  {{ status = ["4xx"], outcome = "invalid" }},
]{login_table}"#
    )
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Every secret found in any file under `dir` or in `printed`, with where.
fn leaks(dir: &Path, printed: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut texts: Vec<(String, String)> = files(dir)
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (
                p.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            )
        })
        .collect();
    texts.push(("the terminal".into(), printed.into()));
    for (at, text) in &texts {
        for secret in ALL {
            if text.contains(secret) {
                found.push(format!("{secret} in {at}"));
            }
        }
    }
    found
}

#[tokio::test]
async fn no_secret_given_to_a_run_is_in_any_file_it_writes_or_anything_it_prints() {
    // Arrange: the shop, the scenario, a CSV with a password column.
    let (base, shop) = spawn_leaky().await;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("secrets.toml");
    std::fs::write(&file, scenario(true)).unwrap();
    let csv = tmp.path().join("buyers.csv");
    let rows: String = (0..40)
        .map(|i| format!("buyer{i},dev{i},10.0.0.{},{CSV_SECRET}-{i}\n", i + 1))
        .collect();
    std::fs::write(&csv, format!("user_id,device_id,ip,password\n{rows}")).unwrap();
    let out = tmp.path().join("reports");
    let oracle = format!("{base}/stock?api_key={QUERY_SECRET}");
    let env = [("SHOP_API_KEY", ENV_KEY)];

    // Act: a gate with the oracle and the admin token, the probe, and a shard (no login).
    let gate = oversell_cli(
        &[
            "gate",
            "--target",
            &base,
            "--scenario",
            file.to_str().unwrap(),
            "--buyers-csv",
            csv.to_str().unwrap(),
            "--oracle-http",
            &oracle,
            "--admin-token",
            ADMIN_SECRET,
            "--max-send-lag-ms",
            "10000",
            "--out",
            out.to_str().unwrap(),
        ],
        &env,
    )
    .await;
    let probe = oversell_cli(
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            file.to_str().unwrap(),
            "--buyers-csv",
            csv.to_str().unwrap(),
            "--oracle-http",
            &oracle,
            "--probe",
        ],
        &env,
    )
    .await;
    let shard_file = tmp.path().join("shard.toml");
    std::fs::write(&shard_file, scenario(false)).unwrap();
    let shard_out = tmp.path().join("shard");
    let open_at = (chrono::Utc::now() + chrono::Duration::seconds(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let shard = oversell_cli(
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            shard_file.to_str().unwrap(),
            "--shard",
            "0/1",
            "--open-at",
            &open_at,
            "--out",
            shard_out.to_str().unwrap(),
        ],
        &env,
    )
    .await;

    // Assert: the runs ran, and every secret really reached the shop ...
    assert!(gate.code == 0 || gate.code == 1, "{}", gate.both());
    assert!(probe.code == 0 || probe.code == 1, "{}", probe.both());
    assert_eq!(shard.code, 0, "{}", shard.both());
    let report_dir = only_report_dir(&out);
    assert!(shard_out.join("shard.json").exists(), "{}", shard.both());
    {
        let s = shop.lock().unwrap();
        assert!(s.keyed > 40, "the env key and the literal header were sent");
        assert!(
            s.logins_with_secrets > 30,
            "logins carried the CSV and literal secrets"
        );
        assert!(
            s.failed_logins > 0 && s.echoed > 0,
            "the shop echoed them back"
        );
        assert!(
            s.authorized > 0,
            "orders carried the extracted token and cookie"
        );
        assert!(
            s.oracle_reads > 0,
            "the oracle was read with the query's key"
        );
    }
    // ... and the samples that held them were kept, masked.
    let report = std::fs::read_to_string(report_dir.join("report.json")).unwrap();
    assert!(
        report.contains("<h1>denied</h1>") && report.contains(r#"\"a\":\"***\""#),
        "the failed logins' and the echoed orders' samples are in the report: {report}"
    );
    let md = std::fs::read_to_string(report_dir.join("report.md")).unwrap();
    assert!(
        md.contains("&lt;h1>denied&lt;/h1>&lt;script>") && !md.contains("<script>"),
        "report.md quotes the shop's HTML as text: {md}"
    );
    let shard_json = std::fs::read_to_string(shard_out.join("shard.json")).unwrap();
    assert!(shard_json.contains(r#"\"c\":\"***\""#), "{shard_json}");

    // Nothing the runs wrote or printed holds a secret.
    let printed = format!("{}{}{}", gate.both(), probe.both(), shard.both());
    let mut found = leaks(&report_dir, &printed);
    found.extend(leaks(&shard_out, ""));
    assert!(found.is_empty(), "secrets leaked: {found:#?}");
}

#[tokio::test]
async fn an_unset_environment_placeholder_is_refused_naming_the_file_and_the_field() {
    let (base, shop) = spawn_leaky().await;
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("secrets.toml");
    std::fs::write(&file, scenario(false)).unwrap();

    let run = against(
        "attack",
        &base,
        file.to_str().unwrap(),
        &tmp.path().join("out"),
        &[],
    )
    .await;

    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains("secrets.toml")
            && run.stderr.contains("target.headers.X-Api-Key")
            && run.stderr.contains("SHOP_API_KEY"),
        "{}",
        run.both()
    );
    assert_eq!(shop.lock().unwrap().orders, 0, "nothing was sent");
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    s.rsplit(')')
                        .next()?
                        .split_whitespace()
                        .nth(1)?
                        .parse()
                        .ok()
                })
                == Some(pid)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_child_shop_gets_its_database_and_redis_urls_on_its_stdin_not_its_argv_or_environment()
{
    // Arrange: a run on the test servers, in the middle of a long sale.
    let url = fresh_db_url(oversell::testing::store::Backend::Postgres);
    let dir = tempfile::tempdir().unwrap();
    let scenario = long_smoke(dir.path());
    let mut harness = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["run", "--services", "external", "--strategy", "redis-lua"])
        .args(["--backend", "postgres", "--database-url", &url])
        .args(["--redis-url", &redis_url(), "--scenario"])
        .arg(&scenario)
        .arg("--out")
        .arg(dir.path().join("out"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(harness.stderr.take().unwrap()).lines();
    let started = tokio::time::timeout(std::time::Duration::from_secs(180), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim_start().starts_with("shop http://") {
                return true;
            }
        }
        false
    })
    .await;

    // Act: read the shop's command line and environment, as any local user reads argv.
    let shops: Vec<(String, String)> = children(harness.id().unwrap())
        .into_iter()
        .filter_map(|p| {
            let argv = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let env = std::fs::read(format!("/proc/{p}/environ")).ok()?;
            let text = |b: Vec<u8>| String::from_utf8_lossy(&b).replace('\0', " ");
            Some((text(argv), text(env)))
        })
        .filter(|(argv, _)| argv.contains(" serve "))
        .collect();
    harness.start_kill().unwrap();
    let _ = harness.wait().await;
    drop(lines);
    drop_database(&url).await;

    // Assert
    assert_eq!(started, Ok(true), "the run started its shop");
    assert_eq!(shops.len(), 1, "one child shop: {shops:?}");
    let (argv, env) = &shops[0];
    for secret in [url.as_str(), "postgres://", "redis://"] {
        assert!(
            !argv.contains(secret),
            "{secret} in the shop's argv: {argv}"
        );
    }
    assert!(
        argv.contains(" serve --config - --ready-fd "),
        "the shop reads its settings from stdin: {argv}"
    );
    for secret in [url.as_str(), "REDIS_URL=", "OVERSELL_ADMIN_TOKEN="] {
        assert!(!env.contains(secret), "{secret} in the shop's environment");
    }
}

#[tokio::test]
async fn an_http_oracles_error_quotes_200_bytes_of_its_answer_with_no_secret() {
    // Arrange: an endpoint that fails with a huge page holding a token.
    let page = format!("access_token=ZZSECRET99 {}", "<p>x</p>".repeat(400_000));
    let app = Router::new().route(
        "/stock",
        get(move || {
            let page = page.clone();
            async move { (StatusCode::INTERNAL_SERVER_ERROR, page) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let source = oversell::testing::rehearsal::OracleSource::Http {
        url: format!("{base}/stock"),
        fields: Default::default(),
        secret_fields: Vec::new(),
    };

    // Act
    let e = source
        .connect()
        .await
        .unwrap()
        .read()
        .await
        .unwrap_err()
        .to_string();

    // Assert
    assert!(e.contains("answered 500"), "{e}");
    assert!(!e.contains("ZZSECRET99"), "{e}");
    assert!(
        e.len() < 600,
        "the error quotes a sample, not the page: {} bytes",
        e.len()
    );
}
