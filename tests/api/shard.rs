//! Sharded generation: N local `oversell run --shard i/N` processes against one reference shop
//! (`oversell serve`), merged with `oversell merge`, give the figures of one process that sent
//! the same seeded schedule; `--shard` and `--open-at` refuse bad values clearly; `merge`
//! refuses shards that are not one sale.

use crate::helpers::{delete_prefix, drop_database, fresh_db_url, oversell_cli, CliRun};
use clap::Parser;
use oversell::cli::Cli;
use oversell::testing::store::Backend;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// 200 buyers over 3 s for 20 units (bots re-submit); nobody cancels, so a correct strategy
/// sells exactly the stock whatever the timing. Gentle enough that neither side sees a timeout
/// or a busy shop while the whole suite runs beside it (those are indeterminate answers, whose
/// count follows the machine's load, not the split).
pub(crate) const SCENARIO: &str = r#"
name = "shard-check"
[item]
id = 1
stock = 20
purchase_limit = 1
[buyers]
count = 200
seed = 9
arrival = "uniform"
window_s = 3.0
[browse]
view_share = 0.3
views = [1, 1]
think_ms = [10, 50]
[bots]
share = 0.05
resubmits = 2
interval_ms = [5, 20]
[after_order]
pay = 0.8
cancel = 0.0
abandon = 0.2
think_ms = [20, 100]
"#;

fn report_in(out: &Path) -> Value {
    crate::helpers::only_report(out)
}

/// `oversell serve`, with the address it printed; killed when dropped.
pub(crate) struct Served {
    pub child: tokio::process::Child,
    pub url: String,
    _stdout: BufReader<tokio::process::ChildStdout>,
}

/// `oversell serve` on a free loopback port.
pub(crate) async fn serve(strategy: &str, db: &str, prefix: &str) -> Served {
    serve_on(
        strategy,
        db,
        prefix,
        "127.0.0.1",
        &["--trusted-proxy", "127.0.0.1"],
    )
    .await
}

/// `oversell serve` on a free port of `ip`, with `extra` flags (`--trusted-proxy`, ...).
pub(crate) async fn serve_on(
    strategy: &str,
    db: &str,
    prefix: &str,
    ip: &str,
    extra: &[&str],
) -> Served {
    let listen = format!("{ip}:0");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(["serve", "--strategy", strategy, "--listen", &listen])
        .args(["--database-url", db])
        .args(extra)
        .args(["--redis-url", &crate::helpers::redis_url()])
        .args(["--redis-prefix", prefix])
        .env_remove("OVERSELL_ADMIN_TOKEN")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("oversell serve starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(60), stdout.read_line(&mut line))
        .await
        .expect("the shop prints its address")
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_string();
    assert!(url.starts_with("http://"), "{line}");
    Served {
        child,
        url,
        _stdout: stdout,
    }
}

/// The figures that must not depend on how the schedule was split. (Not among them: which
/// buyers won, so how many people rather than bots were turned away, or who paid: those follow
/// the race, in one process as in four.)
const ORACLE_FIGURES: &[&str] = &[
    "verified",
    "initial_stock",
    "sold",
    "oversell",
    "undersell",
    "negative_stock",
    "db_stock",
    "conservation_drift",
    "acknowledged",
    "lost_acks",
    "phantom_orders",
    "orders_acknowledged",
    "indeterminate",
    "indeterminate_committed",
    "refused_committed",
    "duplicate_acks",
    "duplicate_buyers",
    "client_oversell",
    "oracle_disagreement",
    "peak_oversell",
];

/// `command` sends the shards: `run`, or `gate` (then `merge --gate` judges the thresholds).
async fn shards_merge_to_one_process(command: &'static str, strategy: &'static str) {
    let tmp = tempfile::tempdir().unwrap();
    let scenario = tmp.path().join("shard-check.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let scenario = scenario.to_str().unwrap().to_string();
    let out = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();

    // One process sends the whole schedule.
    let single_db = fresh_db_url(Backend::Postgres);
    let single = oversell_cli(
        &[
            "run",
            "--strategy",
            strategy,
            "--scenario",
            &scenario,
            "--database-url",
            &single_db,
            "--out",
            &out("single"),
            "--quiet",
        ],
        &[],
    )
    .await;
    assert_eq!(single.code, 0, "{}", single.both());

    // Four processes send a quarter each at one shop, opening together.
    let db = fresh_db_url(Backend::Postgres);
    let prefix = format!("oversell-shard-{}", uuid::Uuid::now_v7().simple());
    let mut shop = serve(strategy, &db, &prefix).await;
    let open_at = (chrono::Utc::now() + chrono::Duration::seconds(8))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let shards: Vec<CliRun> = futures_util::future::join_all((0..4).map(|i| {
        let (scenario, open_at, url, dir) = (
            scenario.clone(),
            open_at.clone(),
            shop.url.clone(),
            out(&format!("shard-{i}")),
        );
        async move {
            let spec = format!("{i}/4");
            oversell_cli(
                &[
                    command,
                    "--strategy",
                    strategy,
                    "--scenario",
                    &scenario,
                    "--shard",
                    &spec,
                    "--open-at",
                    &open_at,
                    "--shop-url",
                    &url,
                    "--out",
                    &dir,
                    "--quiet",
                ],
                &[],
            )
            .await
        }
    }))
    .await;
    for s in &shards {
        assert_eq!(s.code, 0, "{}", s.both());
    }
    let dirs: Vec<String> = (0..4).map(|i| out(&format!("shard-{i}"))).collect();
    let merge = |dirs: Vec<String>, to: String| {
        let (db, prefix) = (db.clone(), prefix.clone());
        async move {
            let mut args = vec!["merge".to_string()];
            args.extend(dirs);
            args.extend(
                [
                    "--database-url",
                    &db,
                    "--redis-prefix",
                    &prefix,
                    "--out",
                    &to,
                    "--quiet",
                ]
                .map(String::from),
            );
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            oversell_cli(&args, &[]).await
        }
    };
    let merged = merge(dirs.clone(), out("merged")).await;
    assert_eq!(merged.code, 0, "{}", merged.both());
    if command == "gate" {
        // The shards of a gate are judged once merged: held, then breached. Four debug
        // processes beside the shop may send late on a busy machine: the send-lag bound is
        // not what this checks.
        let mut with_gate = dirs.clone();
        with_gate.extend(
            [
                "--gate",
                "--threshold",
                "oversell=0",
                "--threshold",
                "send_lag_p99_ms=10000",
            ]
            .map(String::from),
        );
        let held = merge(with_gate.clone(), out("gated")).await;
        assert_eq!(held.code, 0, "{}", held.both());
        with_gate.extend(["--threshold", "p99_ms=0.001"].map(String::from));
        let breached = merge(with_gate, out("gated-tight")).await;
        assert_eq!(breached.code, 1, "{}", breached.both());
        let p99_failed = breached
            .stdout
            .lines()
            .any(|l| l.trim_start().starts_with("p99 ") && l.ends_with("FAIL"));
        assert!(p99_failed, "{}", breached.both());
    }

    // Not one sale: a shard missing, or one given twice.
    let missing = merge(dirs[..3].to_vec(), out("bad")).await;
    assert_eq!(missing.code, 2, "{}", missing.both());
    assert!(
        missing.stderr.contains("3/4") && missing.stderr.contains("missing"),
        "{}",
        missing.both()
    );
    let twice = merge(
        vec![
            dirs[0].clone(),
            dirs[1].clone(),
            dirs[1].clone(),
            dirs[3].clone(),
        ],
        out("bad"),
    )
    .await;
    assert_eq!(twice.code, 2, "{}", twice.both());
    assert!(twice.stderr.contains("both shard 1/4"), "{}", twice.both());
    // A shard file naming a buyer past the schedule (kept a byte a buyer, by index): refused
    // by name, nothing allocated for it.
    let broken = format!("{}-broken", dirs[3]);
    std::fs::create_dir_all(&broken).unwrap();
    let mut f: Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(&dirs[3]).join("shard.json")).unwrap(),
    )
    .unwrap();
    f["clients"]["buyers"][0]["buyer"] = 4_000_000_000u64.into();
    std::fs::write(Path::new(&broken).join("shard.json"), f.to_string()).unwrap();
    let past = merge(
        vec![dirs[0].clone(), dirs[1].clone(), dirs[2].clone(), broken],
        out("bad"),
    )
    .await;
    assert_eq!(past.code, 2, "{}", past.both());
    assert!(
        past.stderr.contains("buyer 4000000000") && past.stderr.contains("buyers_total"),
        "{}",
        past.both()
    );

    let one = report_in(Path::new(&out("single")));
    let many = report_in(Path::new(&out("merged")));
    let (one, many) = (&one["runs"][0], &many["runs"][0]);
    // Same arrivals: every buyer of the schedule, each sent by exactly one shard.
    assert_eq!(one["buyers"], 200);
    assert_eq!(many["buyers"], one["buyers"]);
    assert_eq!(many["generator"]["buyers"], one["generator"]["buyers"]);
    let mut sent: Vec<usize> = Vec::new();
    let mut order_requests = 0;
    for d in &dirs {
        let f: Value = serde_json::from_str(
            &std::fs::read_to_string(Path::new(d).join("shard.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(f["schema"], "oversell.shard/v1");
        for b in f["clients"]["buyers"].as_array().unwrap() {
            sent.push(b["buyer"].as_u64().unwrap() as usize);
        }
        order_requests += f["counts"]["order"]
            .as_object()
            .map(|o| o.values().map(|n| n.as_u64().unwrap()).sum::<u64>())
            .unwrap_or(0);
    }
    sent.sort();
    assert_eq!(
        sent,
        (0..200).collect::<Vec<_>>(),
        "the shards partition the schedule"
    );
    // Same order count: each buyer's order and a bot's re-submissions are in the schedule.
    assert_eq!(many["order_attempts"], one["order_attempts"]);
    assert_eq!(many["order_attempts"].as_u64().unwrap(), order_requests);
    assert_eq!(
        many["requests"]["order"]["total"],
        one["requests"]["order"]["total"]
    );
    assert_eq!(
        many["requests"]["view"]["total"],
        one["requests"]["view"]["total"]
    );
    // The merged order histogram holds every shard's answers (lossless), as one process's does.
    let hist = |r: &Value| {
        oversell::report::summary::decode_histogram(r["histograms"]["order"].as_str().unwrap())
            .unwrap()
    };
    assert_eq!(hist(many).len(), hist(one).len());
    assert_eq!(hist(many).len(), order_requests);
    // Identical oracle figures on a correct strategy.
    assert_eq!(
        (one["order_errors"].as_u64(), many["order_errors"].as_u64()),
        (Some(0), Some(0)),
        "no order error on either side (else indeterminate answers follow the load)"
    );
    for f in ORACLE_FIGURES {
        assert_eq!(
            many[f], one[f],
            "{f}: merged {} vs one process {}",
            many[f], one[f]
        );
    }
    assert_eq!(many["sold"], 20);
    assert_eq!(many["oversell"], 0);

    let _ = shop.child.kill().await;
    drop_database(&single_db).await;
    drop_database(&db).await;
    delete_prefix(&prefix).await;
}

#[tokio::test]
async fn four_shards_of_for_update_merge_to_the_single_process_figures() {
    shards_merge_to_one_process("run", "for-update").await;
}

#[tokio::test]
async fn four_gate_shards_of_redis_lua_merge_to_the_single_process_figures_and_gate() {
    shards_merge_to_one_process("gate", "redis-lua").await;
}

#[test]
fn shard_and_open_at_refuse_bad_values_clearly() {
    let parse = |extra: &[&str]| {
        let mut args = vec!["oversell", "run", "--strategy", "for-update"];
        args.extend_from_slice(extra);
        Cli::try_parse_from(args)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let soon = (chrono::Utc::now() + chrono::Duration::minutes(5))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let url = ["--shop-url", "http://127.0.0.1:1"];
    let with = |shard: &str, at: &str| {
        let mut a = vec!["--shard", shard, "--open-at", at];
        a.extend_from_slice(&url);
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| parse(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(run(with("3/4", &soon)).is_ok());
    for (shard, why) in [
        ("4/4", "i must be below N"),
        ("0/0", "N must be at least 1"),
        ("2", "no '/'"),
        ("x/4", "not a whole number"),
    ] {
        let e = run(with(shard, &soon)).unwrap_err();
        assert!(e.contains("--shard") && e.contains(why), "{shard}: {e}");
    }
    let past = run(with("0/2", "2020-01-01T00:00:00Z")).unwrap_err();
    assert!(past.contains("in the past"), "{past}");
    let far = (chrono::Utc::now() + chrono::Duration::hours(25))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let far = run(with("0/2", &far)).unwrap_err();
    assert!(far.contains("more than 24 h"), "{far}");
    let garbled = run(with("0/2", "5pm")).unwrap_err();
    assert!(garbled.contains("RFC 3339"), "{garbled}");
    // --shard needs the opening instant and the shop.
    let alone = parse(&["--shard", "0/2"]).unwrap_err();
    assert!(
        alone.contains("--open-at") || alone.contains("--shop-url"),
        "{alone}"
    );
}

/// What a shard cannot do is refused before anything is sent (exit 2, naming the flag), and a
/// shop that is not loopback needs --allow-remote-shop.
#[test]
fn a_shard_refuses_what_it_cannot_do_before_sending_anything() {
    let soon = (chrono::Utc::now() + chrono::Duration::minutes(5))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let shard = |cmd: &str, shop: &str, extra: &[&str]| {
        let mut args = vec![
            cmd,
            "--strategy",
            "for-update",
            "--scenario",
            "smoke",
            "--shard",
            "0/2",
            "--open-at",
            &soon,
            "--shop-url",
            shop,
            "--out",
        ];
        let out =
            std::env::temp_dir().join(format!("oversell-shard-refusal-{}", std::process::id()));
        let out = out.display().to_string();
        args.push(&out);
        args.extend_from_slice(extra);
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
            .args(&args)
            .output()
            .expect("running oversell");
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let loopback = "http://127.0.0.1:1";
    for (cmd, extra, named) in [
        ("run", vec!["--fault", "db-outage@0"], "--fault"),
        ("run", vec!["--repeat", "2"], "--repeat"),
        ("run", vec!["--json"], "--json"),
        ("gate", vec!["--dry-run"], "--dry-run"),
        ("gate", vec!["--fault", "shop-kill@1"], "--fault"),
    ] {
        let (code, err) = shard(cmd, loopback, &extra);
        assert_eq!(code, Some(2), "{cmd} {extra:?}: {err}");
        assert!(
            err.contains("--shard cannot be combined with") && err.contains(named),
            "{cmd} {extra:?}: {err}"
        );
    }
    let (code, err) = shard("run", "http://10.11.12.13:8080", &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--allow-remote-shop"), "{err}");
}
