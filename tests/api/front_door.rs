//! What a new user meets first, each a finding of issue #60 turned into a test: the
//! environment table's promises, dry runs that check what they can without connecting, errors
//! that name the real cause, and a closed pipe.

use crate::helpers::{oversell_cli, CliRun};

/// `oversell ARGS` with `env` added to (and `DATABASE_URL` removed from) the environment.
async fn cli(args: &[&str], env: &[(&str, &str)]) -> CliRun {
    oversell_cli(args, env).await
}

#[tokio::test]
async fn backend_mysql_uses_mysql_url_when_database_url_in_the_environment_is_postgres() {
    let env = [
        (
            "DATABASE_URL",
            "postgres://postgres:secret@127.0.0.1:5432/oversell",
        ),
        ("MYSQL_URL", "mysql://root@127.0.0.1:3306/from_env"),
    ];
    for args in [
        &[
            "compare",
            "--backend",
            "mysql",
            "--scenario",
            "smoke",
            "--dry-run",
        ][..],
        &[
            "run",
            "--strategy",
            "naive",
            "--backend",
            "mysql",
            "--scenario",
            "smoke",
            "--dry-run",
        ],
    ] {
        let run = cli(args, &env).await;
        assert_eq!(run.code, 0, "{args:?}: {}", run.both());
        assert!(
            run.stdout.contains(
                "mysql: mysql://***@127.0.0.1:3306/from_env (the environment variable MYSQL_URL)"
            ),
            "{args:?}: {}",
            run.both()
        );
        assert!(!run.both().contains("secret"), "{}", run.both());
    }
    // The flag of another backend is still refused: the command line names one database.
    let flag = cli(
        &[
            "run",
            "--strategy",
            "naive",
            "--backend",
            "mysql",
            "--scenario",
            "smoke",
            "--database-url",
            "postgres://127.0.0.1:5432/x",
            "--dry-run",
        ],
        &[],
    )
    .await;
    assert_eq!(flag.code, 2, "{}", flag.both());
    assert!(
        flag.stderr.contains("--backend mysql but --database-url"),
        "{}",
        flag.both()
    );
}

#[tokio::test]
async fn a_dry_run_checks_every_url_against_its_role_without_connecting() {
    let cases: [(&[&str], &str); 4] = [
        (
            &[
                "gate",
                "--target",
                "http://127.0.0.1:9",
                "--oracle-sql",
                "redis://127.0.0.1",
                "--sold-query",
                "SELECT 1",
                "--dry-run",
            ],
            "--oracle-sql must be your shop's database, a postgres:// or mysql:// URL",
        ),
        (
            &[
                "run",
                "--strategy",
                "redis-lua",
                "--scenario",
                "smoke",
                "--redis-url",
                "postgres://x",
                "--dry-run",
            ],
            "--redis-url must be a redis://",
        ),
        (
            &[
                "run",
                "--strategy",
                "naive",
                "--backend",
                "mysql",
                "--mysql-url",
                "redis://x",
                "--scenario",
                "smoke",
                "--dry-run",
            ],
            "--mysql-url must be a mysql:// URL",
        ),
        (
            &[
                "gate",
                "--scenario",
                "ci",
                "--database-url",
                "postgres://[::1",
                "--dry-run",
            ],
            "--database-url must be a postgres:// URL for the postgres database (it does not parse",
        ),
    ];
    for (args, says) in cases {
        let run = cli(args, &[]).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.both());
        assert!(run.stderr.contains(says), "{args:?}: {}", run.both());
    }
    // A URL from the environment is named as the environment variable.
    let env = cli(
        &["gate", "--dry-run"],
        &[("REDIS_URL", "http://127.0.0.1:6379")],
    )
    .await;
    assert_eq!(env.code, 2, "{}", env.both());
    assert!(
        env.stderr
            .contains("the environment variable REDIS_URL must be a redis://"),
        "{}",
        env.both()
    );
}

#[tokio::test]
async fn a_dry_run_refuses_absurd_durations_and_folders_given_as_files() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().to_str().unwrap();
    let cases: [(&[&str], &str); 5] = [
        (
            &[
                "run",
                "--strategy",
                "naive",
                "--scenario",
                "smoke",
                "--drain-timeout",
                "99999999999999h",
                "--dry-run",
            ],
            "longer than a week",
        ),
        (
            &[
                "run",
                "--strategy",
                "naive",
                "--scenario",
                "smoke",
                "--drain-timeout-s",
                "99999999999999",
                "--dry-run",
            ],
            "must be at most 604800",
        ),
        (
            &[
                "run",
                "--strategy",
                "naive",
                "--scenario",
                folder,
                "--dry-run",
            ],
            "is a folder, not a scenario file",
        ),
        (
            &["gate", "--scenario", "ci", "--junit", folder, "--dry-run"],
            "is a folder: give a file",
        ),
        (
            &[
                "attack",
                "--target",
                "http://127.0.0.1:9",
                "--scenario",
                "smoke",
                "--buyers-csv",
                folder,
                "--dry-run",
            ],
            "is a folder: give a file",
        ),
    ];
    for (args, says) in cases {
        let run = cli(args, &[]).await;
        assert_eq!(run.code, 2, "{args:?}: {}", run.both());
        assert!(run.stderr.contains(says), "{args:?}: {}", run.both());
        assert!(
            !run.stderr.contains("no such file"),
            "{args:?}: {}",
            run.both()
        );
    }
}

#[tokio::test]
async fn a_bad_value_from_the_environment_names_the_variable() {
    let run = cli(
        &[
            "run",
            "--strategy",
            "naive",
            "--scenario",
            "smoke",
            "--dry-run",
        ],
        &[("OVERSELL_SERVICES", "bogus")],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(
        run.stderr.contains(
            "invalid value \"bogus\" in the environment variable OVERSELL_SERVICES (read for --services)"
        ),
        "{}",
        run.both()
    );
    assert!(
        run.stderr.contains("auto, managed, external"),
        "{}",
        run.both()
    );
    // Given on the command line, the flag is named as clap names it.
    let flag = cli(
        &[
            "run",
            "--strategy",
            "naive",
            "--scenario",
            "smoke",
            "--services",
            "bogus",
            "--dry-run",
        ],
        &[],
    )
    .await;
    assert_eq!(flag.code, 2, "{}", flag.both());
    assert!(
        flag.stderr.contains("'--services <SERVICES>'"),
        "{}",
        flag.both()
    );
    assert!(!flag.stderr.contains("environment"), "{}", flag.both());
}

/// `oversell ARGS` whose stdout (and, with `close_stderr`, stderr) reader went away before it
/// wrote anything: as `oversell ARGS | head -0`.
fn closed_pipe(args: &[&str], close_stderr: bool) -> (Option<i32>, String) {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_oversell"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("DATABASE_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    if close_stderr {
        drop(child.stderr.take());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn no_command_panics_on_a_closed_pipe() {
    let v1 = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report-v1.json");
    let tmp = tempfile::tempdir().unwrap();
    let scenario_out = tmp.path().join("fitted.toml");
    let log = tmp.path().join("access.log");
    std::fs::write(
        &log,
        (0..40)
            .map(|i| {
                format!(
                    "127.0.0.1 - u{i} [01/Dec/2026:10:00:{:02} +0000] \"POST /api/orders HTTP/1.1\" 201 57 \"-\" \"curl\"\n",
                    i % 10
                )
            })
            .collect::<String>(),
    )
    .unwrap();
    let mut commands: Vec<Vec<&str>> = vec![
        vec!["--help"],
        vec!["--version"],
        vec!["scenarios"],
        vec!["completions", "bash"],
        vec!["completions", "zsh"],
        vec!["completions", "fish"],
        vec![
            "run",
            "--strategy",
            "naive",
            "--scenario",
            "smoke",
            "--dry-run",
        ],
        vec!["compare", "--scenario", "smoke", "--dry-run"],
        vec!["compare", "--scenario", "smoke", "--dry-run", "--json"],
        vec!["gate", "--dry-run"],
        vec!["attack", "--target", "http://127.0.0.1:9", "--dry-run"],
        vec![
            "capacity",
            "--scenario",
            "smoke",
            "--strategy",
            "naive",
            "--dry-run",
        ],
        vec!["diff", v1, v1, "--fail-on", "oversell"],
        vec!["diff", v1, v1, "--json"],
        vec![
            "fit",
            log.to_str().unwrap(),
            "--out",
            scenario_out.to_str().unwrap(),
        ],
    ];
    let subcommands = [
        "serve",
        "run",
        "compare",
        "gate",
        "attack",
        "capacity",
        "sweep",
        "diff",
        "fit",
        "merge",
        "bench",
        "selftest",
        "scenarios",
        "completions",
    ];
    commands.extend(subcommands.iter().map(|c| vec![*c, "--help"]));
    for args in &commands {
        for close_stderr in [false, true] {
            let (code, stderr) = closed_pipe(args, close_stderr);
            assert_ne!(code, Some(101), "{args:?}: {stderr}");
            assert!(code.is_some(), "{args:?} was killed by a signal: {stderr}");
            assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
            assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        }
    }
}

/// The one JSON document a command printed on stdout.
fn document(run: &CliRun) -> serde_json::Value {
    let lines: Vec<&str> = run
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "one document on stdout: {}", run.both());
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {}", run.both()))
}

#[tokio::test]
async fn json_is_a_plain_switch_on_every_command_with_a_result_and_json_file_writes_it() {
    let v1 = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/report-v1.json");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("out.json");
    let file = file.to_str().unwrap();
    let commands: [&[&str]; 7] = [
        &["diff", v1, v1, "--fail-on", "oversell"],
        &["scenarios"],
        &[
            "run",
            "--strategy",
            "naive",
            "--scenario",
            "smoke",
            "--dry-run",
        ],
        &["compare", "--scenario", "smoke", "--dry-run"],
        &["gate", "--dry-run"],
        &["attack", "--target", "http://127.0.0.1:9", "--dry-run"],
        &[
            "capacity",
            "--scenario",
            "smoke",
            "--strategy",
            "naive",
            "--dry-run",
        ],
    ];
    for args in commands {
        let mut with_json = args.to_vec();
        with_json.push("--json");
        let run = cli(&with_json, &[]).await;
        assert_eq!(run.code, 0, "{args:?}: {}", run.both());
        let doc = document(&run);
        assert_eq!(doc["exit_code"], 0, "{args:?}: {doc}");

        // --json-file: the same document in the file, stdout for people.
        let mut with_file = args.to_vec();
        with_file.extend(["--json-file", file]);
        let run = cli(&with_file, &[]).await;
        assert_eq!(run.code, 0, "{args:?}: {}", run.both());
        assert!(
            !run.stdout.trim_start().starts_with('{'),
            "{args:?}: {}",
            run.both()
        );
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        assert_eq!(written["exit_code"], 0, "{args:?}: {written}");
        std::fs::remove_file(file).unwrap();
    }
    // An error is a document too, in the file as on stdout.
    let run = cli(
        &["diff", v1, "/no/such/report.json", "--json-file", file],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.both());
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    assert_eq!(written["exit_code"], 2, "{written}");
    assert!(
        written["error"]
            .as_str()
            .unwrap()
            .contains("/no/such/report.json"),
        "{written}"
    );
    // diff's document: the runs, the verdicts, --fail-on's.
    let run = cli(
        &["diff", v1, v1, "--fail-on", "oversell,p99", "--json"],
        &[],
    )
    .await;
    let doc = document(&run);
    assert_eq!(doc["schema"], "oversell.diff/v1", "{doc}");
    assert_eq!(doc["fail_on"]["passed"], true, "{doc}");
    assert_eq!(
        doc["fail_on"]["metrics"],
        serde_json::json!(["oversell", "p99_ms"]),
        "{doc}"
    );
    assert!(
        doc["runs"][0]["metrics"].as_array().unwrap().len() > 30,
        "{doc}"
    );
}

#[tokio::test]
async fn every_command_takes_v_and_q_and_help_says_no_dry_run_where_there_is_none() {
    let quiet = cli(
        &[
            "-q",
            "run",
            "--strategy",
            "naive",
            "--scenario",
            "smoke",
            "--dry-run",
        ],
        &[],
    )
    .await;
    assert_eq!(quiet.code, 0, "{}", quiet.both());
    let verbose = cli(&["scenarios", "-vv"], &[]).await;
    assert_eq!(verbose.code, 0, "{}", verbose.both());
    let both = cli(&["scenarios", "-v", "-q"], &[]).await;
    assert_eq!(both.code, 2, "-v and -q conflict: {}", both.both());
    for command in [
        "sweep",
        "merge",
        "selftest",
        "diff",
        "fit",
        "bench",
        "scenarios",
    ] {
        let help = cli(&[command, "--help"], &[]).await;
        assert_eq!(help.code, 0, "{command}: {}", help.both());
        assert!(
            help.stdout.contains("-v, --verbose"),
            "{command}: {}",
            help.stdout
        );
        assert!(
            help.stdout.contains("-q, --quiet"),
            "{command}: {}",
            help.stdout
        );
        if command != "bench" {
            assert!(
                !help.stdout.contains("dry-run"),
                "{command} has no --dry-run: {}",
                help.stdout
            );
        }
    }
    let sweep = cli(&["sweep", "--help"], &[]).await;
    assert!(!sweep.stdout.contains("default 5ms"), "{}", sweep.stdout);
}

#[tokio::test]
async fn serve_and_gate_show_their_common_flags_first_and_h_shows_only_those() {
    for (command, first, rare) in [
        ("serve", "--strategy", "--row-lock-waiters"),
        ("gate", "--scenario", "--released-statuses"),
    ] {
        let long = cli(&[command, "--help"], &[]).await;
        let headings: Vec<&str> = long
            .stdout
            .lines()
            .filter(|l| l.ends_with(':') && !l.starts_with(' '))
            .collect();
        assert_eq!(headings.get(1), Some(&"Common:"), "{command}: {headings:?}");
        let common = long.stdout.split("Common:").nth(1).unwrap();
        let common = common.split("\n\n").next().unwrap();
        assert!(common.contains(first), "{command}: {common}");
        assert!(long.stdout.contains(rare), "--help has every flag");
        let short = cli(&[command, "-h"], &[]).await;
        assert!(
            !short.stdout.contains(rare),
            "{command} -h: {}",
            short.stdout
        );
        assert!(
            short.stdout.contains(&format!("oversell {command} --help")),
            "{}",
            short.stdout
        );
        assert!(
            short.stdout.lines().count() < 70,
            "{command} -h: {}",
            short.stdout
        );
    }
}

#[tokio::test]
async fn bench_keeps_its_older_json_file_spelling() {
    // `bench … --json FILE` parses as `--json-file FILE` (unlisted): a bad value of another
    // flag shows it got past the parser's own check of --json.
    let run = cli(
        &["bench", "generator", "--json", "x.json", "--rate", "0"],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}", run.both());
    assert!(run.stderr.contains("--rate"), "{}", run.both());
    assert!(
        !run.stderr.contains("unexpected argument 'x.json'"),
        "{}",
        run.both()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rehearsal_worked_example_maps_the_reference_shop_and_its_gate_passes_on_redis_lua() {
    use oversell::testing::inventory::Strategy;
    use oversell::testing::store::Backend;
    // Arrange: "your shop" (docs/src/examples/rehearsal.md), in the test binary.
    let app = crate::helpers::spawn_app(Strategy::RedisLua, Backend::Postgres).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().to_str().unwrap();
    let target = [
        "--target",
        app.address.as_str(),
        "--scenario",
        "rehearsal-reference",
    ];

    // Act: the probe, then the gate, as the page runs them.
    let mut probe = vec!["attack"];
    probe.extend(target);
    probe.push("--probe");
    let probe = cli(&probe, &[]).await;
    let mut gate = vec!["gate"];
    gate.extend(target);
    gate.extend(["--payment-window", "15m", "--out", out, "-q"]);
    let gate = cli(&gate, &[]).await;

    // Assert: every answer classified, the oracle read, the gate passed.
    assert_eq!(probe.code, 0, "{}", probe.both());
    // The oracle answers (redis-lua writes the database behind the answer, so the probe's
    // second reading may not have moved yet: the gate's settled one counts).
    assert!(
        probe
            .stdout
            .contains("stock = `db_stock` → sold 0, stock 20"),
        "{}",
        probe.both()
    );
    assert!(!probe.stdout.contains("unclassified"), "{}", probe.both());
    assert_eq!(gate.code, 0, "{}", gate.both());
    assert!(
        gate.stdout.contains("oversell gate: PASS"),
        "{}",
        gate.both()
    );
    assert!(
        gate.stdout.contains("sold 20 of 20: no oversell"),
        "{}",
        gate.both()
    );
}
