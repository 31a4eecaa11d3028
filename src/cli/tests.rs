//! The command line's spellings: every new name parses, every old one still does (hidden),
//! and they mean the same.

use super::*;
use crate::inventory::Strategy;
use crate::store::Backend;
use clap::CommandFactory;
use std::path::PathBuf;
use std::time::Duration;

fn parse(args: &[&str]) -> Command {
    let argv = std::iter::once("oversell").chain(args.iter().copied());
    match Cli::try_parse_from(argv) {
        Ok(cli) => cli.command,
        Err(e) => panic!("{args:?} should parse: {e}"),
    }
}

fn refused(args: &[&str]) -> String {
    let argv = std::iter::once("oversell").chain(args.iter().copied());
    match Cli::try_parse_from(argv) {
        Ok(_) => panic!("{args:?} should be refused"),
        Err(e) => e.to_string(),
    }
}

fn compare(args: &[&str]) -> CompareArgs {
    match parse(args) {
        Command::Compare(a) => a,
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_cli_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn compare_takes_strategy_and_backend_lists_and_the_old_plural_spellings() {
    for (s, b) in [
        ("--strategy", "--backend"),
        ("--strategies", "--backends"),
        ("-s", "-b"),
    ] {
        let a = compare(&["compare", s, "naive,redis-lua", b, "postgres,mysql"]);
        assert_eq!(
            a.strategies,
            vec![Strategy::Naive, Strategy::RedisLua],
            "{s}"
        );
        assert_eq!(a.backends, vec![Backend::Postgres, Backend::Mysql], "{b}");
    }
    assert_eq!(compare(&["compare"]).strategies, Strategy::all().to_vec());
}

#[test]
fn durations_take_units_and_the_old_seconds_flags_still_parse() {
    let new = compare(&["compare", "--drain-timeout", "1500ms"]);
    assert_eq!(
        new.scenario.output.drain_limit(),
        Duration::from_millis(1500)
    );
    let old = compare(&["compare", "--drain-timeout-s", "7"]);
    assert_eq!(old.scenario.output.drain_limit(), Duration::from_secs(7));
    let default = compare(&["compare"]);
    assert_eq!(
        default.scenario.output.drain_limit(),
        Duration::from_secs(60)
    );
    let e = refused(&["compare", "--drain-timeout", "10"]);
    assert!(e.contains("--drain-timeout") && e.contains("10s"), "{e}");
    let e = refused(&["compare", "--drain-timeout", "1s", "--drain-timeout-s", "1"]);
    assert!(e.contains("cannot be used with"), "{e}");
}

#[test]
fn attack_takes_settle_as_a_duration_or_the_old_seconds() {
    let window = |args: &[&str]| match parse(args) {
        Command::Attack(a) => a
            .oracle
            .settle
            .map(|d| d.as_secs_f64())
            .or(a.oracle.settle_s),
        other => panic!("{other:?}"),
    };
    let base = ["attack", "--target", "http://127.0.0.1:1"];
    let with = |extra: &[&'static str]| [&base[..], extra].concat();
    assert_eq!(window(&with(&["--settle", "500ms"])), Some(0.5));
    assert_eq!(window(&with(&["--settle-s", "2"])), Some(2.0));
    let e = refused(&with(&["--settle", "0s"]));
    assert!(e.contains("--settle"), "{e}");
}

#[test]
fn bench_takes_duration_and_concurrency_and_the_old_spellings() {
    // As the binary parses: bench's older `--json FILE` is read as `--json-file FILE`.
    let shop = |args: &[&str]| match output::parse_from(
        std::iter::once("oversell").chain(args.iter().copied()),
    )
    .map(|c| c.command)
    {
        Ok(Command::Bench(b)) => match b.what {
            bench::BenchCommand::Shop(s) => s,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    let new = shop(&[
        "bench",
        "shop",
        "-s",
        "naive",
        "--duration",
        "3s",
        "-c",
        "8",
        "--json",
    ]);
    assert_eq!((new.duration, new.seconds), (Duration::from_secs(3), None));
    assert_eq!(new.concurrency, 8);
    assert!(new.json.json && new.json.json_file.is_none());
    let old = shop(&[
        "bench",
        "shop",
        "--strategy",
        "naive",
        "--seconds",
        "3",
        "--connections",
        "8",
        "--json",
        "out.json",
    ]);
    assert_eq!((old.seconds, old.concurrency), (Some(3), 8));
    assert!(!old.json.json);
    assert_eq!(old.json.json_file, Some(PathBuf::from("out.json")));
    match parse(&["bench", "redis", "--seconds", "2", "--concurrency", "4"]) {
        Command::Bench(b) => match b.what {
            bench::BenchCommand::Redis(r) => assert_eq!((r.seconds, r.concurrency), (Some(2), 4)),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn diff_writes_markdown_with_markdown_or_the_old_out() {
    for flag in ["--markdown", "--out"] {
        match parse(&["diff", "a", "b", flag, "d.md"]) {
            Command::Diff(d) => assert_eq!(d.markdown, Some(PathBuf::from("d.md")), "{flag}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn listen_addresses_take_host_names_and_a_bare_port() {
    let listen = |args: &[&str]| match parse(args) {
        Command::Serve(s) => s.listen,
        other => panic!("{other:?}"),
    };
    let port = listen(&["serve", "-s", "naive", "--listen", ":9000"]);
    assert_eq!(port, "127.0.0.1:9000".parse().unwrap());
    assert!(listen(&["serve", "-s", "naive", "-l", "localhost:0"])
        .ip()
        .is_loopback());
    match parse(&["run", "--strategy", "naive", "--metrics-listen", ":0"]) {
        Command::Run(r) => assert_eq!(
            r.scenario.output.metrics_listen,
            Some("127.0.0.1:0".parse().unwrap())
        ),
        other => panic!("{other:?}"),
    }
    let e = refused(&["serve", "-s", "naive", "--listen", "8080"]);
    assert!(e.contains("HOST:PORT"), "{e}");
}

#[test]
fn old_spellings_are_hidden_from_help() {
    let help = |path: &[&str]| {
        let mut cmd = Cli::command();
        let mut sub = &mut cmd;
        for p in path {
            sub = sub.find_subcommand_mut(p).expect("a subcommand");
        }
        sub.render_long_help().to_string()
    };
    let compare = help(&["compare"]);
    for old in ["--strategies", "--backends", "--drain-timeout-s"] {
        assert!(!compare.contains(old), "{old} is hidden: {compare}");
    }
    assert!(compare.contains("--drain-timeout <DURATION>"), "{compare}");
    let bench = help(&["bench", "shop"]);
    assert!(
        !bench.contains("--seconds") && !bench.contains("--connections"),
        "{bench}"
    );
    let serve = help(&["serve"]);
    for heading in [
        values::SHOP,
        values::SECURITY,
        values::CONNECTIONS,
        values::KNOBS,
    ] {
        assert!(serve.contains(&format!("{heading}:")), "{heading}: {serve}");
    }
}

#[test]
fn json_is_found_before_a_double_dash_only() {
    let os = |v: &[&str]| v.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
    assert!(output::wanted_json(os(&["run", "--json", "--bogus"])).json);
    assert!(!output::wanted_json(os(&["run", "--", "--json"])).json);
    assert!(!output::wanted_json(os(&["run", "--jsonx"])).json);
    let file = output::wanted_json(os(&["run", "--json-file", "a.json", "--bogus"]));
    assert_eq!(file.json_file, Some(PathBuf::from("a.json")));
    let file = output::wanted_json(os(&["run", "--json-file=b.json"]));
    assert_eq!(file.json_file, Some(PathBuf::from("b.json")));
}

#[test]
fn a_database_url_of_another_backend_is_refused_when_one_backend_is_asked_for() {
    let conn = ConnArgs {
        database_url: Some("postgres://u:secret@127.0.0.1:5432/db".into()),
        mysql_url: "mysql://root@127.0.0.1:3306/oversell".into(),
        redis_url: "redis://127.0.0.1:6379".into(),
        services: crate::services::ServicesMode::External,
        managed_postgres: None,
        from_env: Vec::new(),
    };
    let e = conn
        .database_for(Some(Backend::Mysql))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--backend mysql") && e.contains("--database-url"),
        "{e}"
    );
    assert!(!e.contains("secret"), "the password is redacted: {e}");
    let (b, url) = conn.database_for(Some(Backend::Postgres)).unwrap();
    assert_eq!(
        (b, url.as_str()),
        (Backend::Postgres, "postgres://u:secret@127.0.0.1:5432/db")
    );
    // With several backends (compare postgres,mysql) the other one uses --mysql-url.
    let (b, url) = conn.database_each(Some(Backend::Mysql)).unwrap();
    assert_eq!(
        (b, url.as_str()),
        (Backend::Mysql, "mysql://root@127.0.0.1:3306/oversell")
    );
}

#[test]
fn the_send_lag_bound_takes_a_duration_or_the_old_milliseconds() {
    let ms = |args: &[&str]| match parse(args) {
        Command::Run(r) => r.scenario.send_lag.ms(),
        other => panic!("{other:?}"),
    };
    let run = ["run", "-s", "naive"];
    assert_eq!(
        ms(&[&run[..], &["--max-send-lag", "1500us"]].concat()),
        Some(1.5)
    );
    assert_eq!(
        ms(&[&run[..], &["--max-send-lag-ms", "20"]].concat()),
        Some(20.0)
    );
    assert_eq!(ms(&run), None);
}

#[test]
fn the_oracle_timeout_is_a_duration_with_a_unit_and_defaults_to_30s() {
    let sql = [
        "attack",
        "--target",
        "http://127.0.0.1:1",
        "--oracle-sql",
        "postgres://u@h/db",
        "--sold-query",
        "SELECT 1",
    ];
    let timeout = |extra: &[&str]| match parse(&[&sql[..], extra].concat()) {
        Command::Attack(a) => a.oracle.oracle_timeout,
        other => panic!("{other:?}"),
    };
    assert_eq!(timeout(&[]), Duration::from_secs(30));
    assert_eq!(
        timeout(&["--oracle-timeout", "500ms"]),
        Duration::from_millis(500)
    );
    let e = refused(&[&sql[..], &["--oracle-timeout", "0s"]].concat());
    assert!(e.contains("--oracle-timeout"), "{e}");
}

#[test]
fn a_flag_sits_under_the_same_help_heading_on_every_command() {
    let root = Cli::command();
    let mut commands: Vec<&clap::Command> = root.get_subcommands().collect();
    let mut i = 0;
    while i < commands.len() {
        commands.extend(commands[i].get_subcommands());
        i += 1;
    }
    for (flag, heading) in [
        ("scenario", values::SCENARIO),
        ("max-send-lag", values::SCENARIO),
        ("repeat", values::SCENARIO),
        ("strategy", values::SHOP),
        ("backend", values::SHOP),
    ] {
        let mut seen = 0;
        for cmd in &commands {
            let Some(arg) = cmd.get_arguments().find(|a| a.get_long() == Some(flag)) else {
                continue;
            };
            seen += 1;
            assert_eq!(
                arg.get_help_heading(),
                Some(heading),
                "`{} --{flag}` is under {:?}",
                cmd.get_name(),
                arg.get_help_heading()
            );
        }
        assert!(seen >= 3, "--{flag} is on {seen} commands");
    }
}

#[test]
fn capacity_spells_strategy_probe_and_budget_like_the_other_commands() {
    let cap = |args: &[&str]| match parse(&[&["capacity"], args].concat()) {
        Command::Capacity(a) => a,
        other => panic!("{other:?}"),
    };
    for s in ["--strategy", "--strategies", "-s"] {
        let a = cap(&[s, "naive,redis-lua"]);
        assert_eq!(
            a.strategies,
            vec![Strategy::Naive, Strategy::RedisLua],
            "{s}"
        );
    }
    assert_eq!(cap(&["--backend", "mysql"]).backends, vec![Backend::Mysql]);
    assert_eq!(cap(&["--backends", "mysql"]).backends, vec![Backend::Mysql]);
    let a = cap(&["--probe", "2.5s", "--budget", "10m"]);
    assert_eq!(a.probe, Duration::from_millis(2500), "the fraction is kept");
    assert_eq!(a.budget, Duration::from_secs(600));
    assert_eq!(cap(&["--probe-seconds", "2.5"]).probe_seconds, Some(2.5));
    assert_eq!(cap(&[]).probe, Duration::from_secs(10));
    let e = refused(&["capacity", "--budget", "600"]);
    assert!(e.contains("no unit") && e.contains("600s"), "{e}");
    let e = refused(&["capacity", "--probe", "10"]);
    assert!(e.contains("no unit"), "{e}");
    let e = refused(&["capacity", "--probe", "500ms"]);
    assert!(e.contains("from 1s to 1h"), "{e}");
    let e = refused(&["capacity", "--probe", "5s", "--probe-seconds", "5"]);
    assert!(e.contains("cannot be used with"), "{e}");
}

#[test]
fn run_and_compare_take_dry_run() {
    let Command::Run(a) = parse(&["run", "-s", "naive", "--dry-run"]) else {
        panic!("run")
    };
    assert!(a.scenario.dry_run);
    assert!(compare(&["compare", "--dry-run"]).scenario.dry_run);
}

#[test]
fn negative_numbers_reach_their_flag_and_are_refused_with_a_sentence() {
    let refused = |args: &[&str]| {
        let argv = std::iter::once("oversell").chain(args.iter().copied());
        match parse_from(argv) {
            Ok(_) => panic!("{args:?} should be refused"),
            Err(e) => e.to_string(),
        }
    };
    for (args, says) in [
        (
            &["run", "-s", "naive", "--repeat", "-3"][..],
            "must be at least 1 (got -3)",
        ),
        (&["compare", "--repeat", "0"], "must be at least 1 (got 0)"),
        (&["compare", "--drain-timeout", "-1s"], "negative"),
        (&["selftest", "--repeat", "-2"], "must be at least 1"),
        (
            &["bench", "redis", "--concurrency", "0"],
            "must be at least 1",
        ),
        (
            &["bench", "shop", "-s", "naive", "--concurrency", "-5"],
            "must be at least 1",
        ),
        (&["bench", "generator", "--rate", "0"], "must be at least 1"),
        (
            &["bench", "shop", "-s", "naive", "--stock", "0"],
            "must be at least 1",
        ),
        (&["capacity", "--budget", "-10m"], "negative"),
    ] {
        let e = refused(args);
        assert!(e.contains(says), "{args:?}: {e}");
        assert!(!e.contains("unexpected argument"), "{args:?}: {e}");
    }
    // A flag's value that is another flag is still an error, naming the flag.
    let e = refused(&["compare", "--repeat", "--quiet"]);
    assert!(e.contains("--repeat"), "{e}");
}

#[test]
fn bench_shop_takes_its_shop_knobs_from_serves_flags_with_its_own_defaults() {
    let knobs = |args: &[&str]| match parse(&[&["bench", "shop", "-s", "naive"], args].concat()) {
        Command::Bench(b) => match b.what {
            bench::BenchCommand::Shop(s) => s.shop.0,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    let defaults = knobs(&[]);
    assert_eq!(defaults, crate::bench::ShopBench::default_knobs());
    assert_eq!(
        (defaults.pool_size, defaults.consumers, defaults.buckets),
        (64, 2, 4)
    );
    assert_eq!(defaults.work, Duration::ZERO);
    let set = knobs(&[
        "--pool-size",
        "16",
        "--buckets",
        "3",
        "--worker-threads",
        "1",
    ]);
    assert_eq!((set.pool_size, set.buckets, set.worker_threads), (16, 3, 1));
    assert_eq!(set.consumers, 2);
    assert!(refused(&["bench", "shop", "-s", "naive", "--work", "1ms"]).contains("--work"));
}

#[test]
fn serve_leaves_a_core_to_the_servers_it_uses_on_its_machine_and_keeps_an_asked_count() {
    let workers = |strategy: &str, db: &str, redis: &str, extra: &[&str]| {
        let args = [
            &["serve", "--strategy", strategy, "--database-url", db][..],
            &["--redis-url", redis, "--services", "external"],
            extra,
        ]
        .concat();
        match parse(&args) {
            Command::Serve(s) => s.workers(),
            other => panic!("{other:?}"),
        }
    };
    if std::env::var_os("TOKIO_WORKER_THREADS").is_some() {
        // Then 0 leaves the count to tokio, as it says: `None` here, by design.
        assert_eq!(
            workers("naive", "postgres://127.0.0.1/x", "redis://h", &[]),
            None
        );
        return;
    }
    let cores = crate::shop::workers::cores();
    let (elsewhere_db, here_db) = ("postgres://10.0.0.5/shop", "postgres://127.0.0.1/shop");
    let (elsewhere_redis, here_redis) = ("redis://10.0.0.6:6379", "redis://localhost:6379");
    assert_eq!(
        workers("redis-lua", elsewhere_db, elsewhere_redis, &[]),
        Some(cores)
    );
    assert_eq!(
        workers("redis-lua", elsewhere_db, here_redis, &[]),
        Some(cores.saturating_sub(1).max(1)),
        "redis-lua uses its Redis"
    );
    assert_eq!(
        workers("for-update", elsewhere_db, here_redis, &[]),
        Some(cores),
        "for-update does not use Redis"
    );
    assert_eq!(
        workers("for-update", here_db, elsewhere_redis, &[]),
        Some(cores.saturating_sub(1).max(1))
    );
    assert_eq!(
        workers(
            "for-update",
            here_db,
            here_redis,
            &["--worker-threads", "3"]
        ),
        Some(3)
    );
}
