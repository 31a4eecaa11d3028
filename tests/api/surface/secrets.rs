//! Secrets that still reached the output after wave 4 (#58), each seeded and looked for in
//! every file the run wrote and everything it printed: a target URL's lone user, a signed
//! oracle URL, `attack --probe`'s filled-in request line, a password holding a `/`, a `[watch]`
//! URL after `{env:}` expansion, an environment URL in `--help`, the password pgbench and
//! mysqlslap got on argv, fit.md's unmatched paths, and a login page echoing a password
//! HTML-escaped.

use super::{leaks, measured, seeded, stock_scenario, stock_shop, superuser_db};
use axum::routing::post;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_urls_lone_user_and_a_signed_oracle_url_reach_no_report_shard_log_or_terminal() {
    // Arrange: a user with no password in the target URL (a token, as GitHub takes them), an
    // oracle URL signed with a known name and with a name the scenario lists.
    let (base, shop) = stock_shop(axum::Router::new()).await;
    let (user, sig, k2) = (seeded("tokuser"), seeded("sig"), seeded("k2v"));
    let target = base.replacen("http://", &format!("http://{user}@"), 1);
    let tmp = tempfile::tempdir().unwrap();
    let file = stock_scenario(
        tmp.path(),
        &[
            (
                "url = \"/stock\"",
                &format!("url = \"/stock?sig={sig}&k2={k2}\""),
            ),
            (
                "ip_header = \"\"",
                "ip_header = \"\"\nsecret_fields = [\"k2\"]",
            ),
        ],
        "",
    );
    let (out, shard) = (tmp.path().join("out"), tmp.path().join("shard"));

    // Act: a run (not quiet: the terminal too), and a shard.
    let run = measured(
        "a run with a lone user in --target",
        &[
            "attack",
            "--target",
            &target,
            "--scenario",
            &file,
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    let open_at = (chrono::Utc::now() + chrono::Duration::seconds(3))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let sharded = measured(
        "a shard with a lone user in --target",
        &[
            "attack",
            "--target",
            &target,
            "--scenario",
            &file,
            "--shard",
            "0/1",
            "--open-at",
            &open_at,
            "--out",
            shard.to_str().unwrap(),
        ],
        &[],
    )
    .await;

    // Assert: both ran, and none of the three is anywhere.
    assert_eq!(run.run.code, 0, "{}", run.run.both());
    assert_eq!(sharded.run.code, 0, "{}", sharded.run.both());
    assert!(shop.seen() > 0);
    let report = crate::helpers::only_report(&out);
    assert!(
        report["runs"][0]["url"].as_str().unwrap().contains("***@"),
        "the URL keeps its shape: {}",
        report["runs"][0]["url"]
    );
    let written: Vec<_> = super::texts(&out).into_iter().map(|(p, _)| p).collect();
    assert!(written
        .iter()
        .any(|p| p.extension().is_some_and(|e| e == "hlog")));
    for (dir, m) in [(&out, &run), (&shard, &sharded)] {
        assert_eq!(
            leaks(dir, &m.run, &[&user, &sig, &k2]),
            Vec::<String>::new()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_lines_urls_with_a_slash_in_the_password_and_expanded_watch_urls_print_no_secret() {
    let (base, _shop) = stock_shop(axum::Router::new()).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let out = out.to_str().unwrap();
    let (sig, by_value, watch_pw) = (seeded("probe-sig-"), seeded("probe-v-"), seeded("w-pw-"));
    let pw = format!("{}/slash9", seeded("pw-"));

    // attack --probe: the order's path filled with environment values, one under a known
    // secret name, one under a name that says nothing (masked by value).
    let probe_file = stock_scenario(
        tmp.path(),
        &[(
            "path = \"/purchase\"",
            "path = \"/purchase?sig={env:SHOP_SIG}&s={env:SHOP_V}\"",
        )],
        "",
    );
    let probe = measured(
        "attack --probe",
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            &probe_file,
            "--probe",
        ],
        &[("SHOP_SIG", &sig), ("SHOP_V", &by_value)],
    )
    .await;
    assert!(
        probe.run.stdout.contains("POST /purchase?sig=***&s=***"),
        "{}",
        probe.run.both()
    );

    // --oracle-sql with a `/` in the password (not a valid URL).
    let plain = stock_scenario(tmp.path(), &[], "");
    let url = format!("postgres://postgres:{pw}@127.0.0.1:5432/db");
    let slash = measured(
        "--oracle-sql with a / in the password",
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            &plain,
            "--out",
            out,
            "--oracle-sql",
            &url,
            "--sold-query",
            "SELECT 1",
        ],
        &[],
    )
    .await;
    assert_ne!(slash.run.code, 0, "{}", slash.run.both());

    // A [watch] URL whose password comes from the environment, refused by the guard.
    let watch =
        "[watch.q]\nsql = \"SELECT 1\"\ndatabase = \"postgres://u:{env:WATCH_PW}@192.0.2.1/db\"\n";
    let watch_file = stock_scenario(tmp.path(), &[], watch);
    let guarded = measured(
        "a [watch] URL refused after {env:} expansion",
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            &watch_file,
            "--out",
            out,
        ],
        &[("WATCH_PW", &watch_pw)],
    )
    .await;
    assert_eq!(guarded.run.code, 2, "{}", guarded.run.both());
    assert!(
        guarded.run.stderr.contains("192.0.2.1"),
        "{}",
        guarded.run.both()
    );

    for m in [&probe, &slash, &guarded] {
        let secrets = [
            sig.as_str(),
            by_value.as_str(),
            pw.as_str(),
            watch_pw.as_str(),
        ];
        assert_eq!(leaks(tmp.path(), &m.run, &secrets), Vec::<String>::new());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_commands_help_shows_an_environment_urls_password_or_a_token() {
    // Arrange: every environment variable a flag reads, holding a secret.
    use clap::CommandFactory;
    let secret = seeded("envpw");
    let env = [
        (
            "DATABASE_URL",
            format!("postgres://u:{secret}@127.0.0.1/db"),
        ),
        ("MYSQL_URL", format!("mysql://root:{secret}@127.0.0.1/db")),
        ("REDIS_URL", format!("redis://:{secret}@127.0.0.1:6379")),
        (
            "REPLICA_DATABASE_URL",
            format!("postgres://u:{secret}@127.0.0.1/r"),
        ),
        ("OVERSELL_ADMIN_TOKEN", secret.clone()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut paths: Vec<Vec<String>> = Vec::new();
    let root = oversell::cli::Cli::command();
    for c in root.get_subcommands() {
        paths.push(vec![c.get_name().into()]);
        for s in c.get_subcommands() {
            paths.push(vec![c.get_name().into(), s.get_name().into()]);
        }
    }
    assert!(paths.iter().any(|p| p == &["bench", "redis"]), "{paths:?}");

    for p in paths {
        // Act
        let mut args: Vec<&str> = p.iter().map(String::as_str).collect();
        args.push("--help");
        let run = crate::helpers::oversell_cli(&args, &env).await;

        // Assert
        assert_eq!(run.code, 0, "{p:?}: {}", run.both());
        assert!(!run.both().contains(&secret), "{p:?}: {}", run.both());
    }
}

/// Every process's command line on this machine, `\0`s as spaces.
fn command_lines() -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(b) = std::fs::read(e.path().join("cmdline")) {
            out.push(String::from_utf8_lossy(&b).replace('\0', " "));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgbench_and_mysqlslap_get_the_password_through_their_environment_not_argv() {
    // Arrange: PostgreSQL (which trusts loopback: any password works) and a MariaDB user of
    // the test's own with a password, each reached by a URL holding it.
    use oversell::testing::bench::ceiling::{mysqlslap, pgbench, Length, Script};
    use sqlx::Connection;
    for tool in ["pgbench", "mysqlslap"] {
        if std::process::Command::new(tool)
            .arg("--version")
            .output()
            .is_err()
        {
            assert!(std::env::var_os("CI").is_none(), "CI needs {tool}");
            eprintln!("\n*** SKIPPED: no {tool} on this machine ***\n");
            return;
        }
    }
    let pw = seeded("argvpw");
    let pg = superuser_db().await;
    // The machine's server trusts loopback: its well-known password is swapped for a seeded one
    // (any works); a managed server's random one is looked for as it is.
    let mut u = reqwest::Url::parse(&pg).unwrap();
    let pg_pw = match u.password() {
        Some("postgres") | None => {
            u.set_password(Some(&pw)).unwrap();
            pw.clone()
        }
        Some(p) => p.to_string(),
    };
    let pg_url = u.to_string();
    let my_db = crate::helpers::fresh_db_url(oversell::testing::store::Backend::Mysql);
    let name = my_db.rsplit('/').next().unwrap().to_string();
    let user = format!("u{}", &pw[6..18]);
    let mut root = sqlx::MySqlConnection::connect(&crate::helpers::mysql_base())
        .await
        .unwrap();
    for host in ["localhost", "127.0.0.1"] {
        let sql = format!(
            "CREATE DATABASE IF NOT EXISTS `{name}`; \
             CREATE USER '{user}'@'{host}' IDENTIFIED BY '{pw}'; \
             GRANT ALL ON `{name}`.* TO '{user}'@'{host}'"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut root)
            .await
            .unwrap();
    }
    let my_url = format!("mysql://{user}:{pw}@127.0.0.1:3306/{name}");
    let sleepy = |line: &str| Script {
        label: "sleep",
        lines: vec![line.to_string()],
        defines: Vec::new(),
    };
    let mut seen_on_argv = Vec::new();
    let watch = async {
        for _ in 0..40 {
            seen_on_argv.extend(
                command_lines()
                    .into_iter()
                    .filter(|l| l.contains(&pw) || l.contains(&pg_pw)),
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };

    // Act: each tool runs a second or two while every command line is read.
    let script_pg = sleepy("SELECT pg_sleep(0.4)");
    let script_my = sleepy("SELECT SLEEP(0.4)");
    let ((pg_ran, my_ran), ()) = tokio::join!(
        async {
            let p = pgbench(&pg_url, &script_pg, 2, Length::Seconds(1), &seeded("t")).await;
            let m = mysqlslap(&my_url, &script_my, 2, 2).await;
            (p, m)
        },
        watch
    );

    // Assert: both logged in with the password, which no command line held.
    assert!(pg_ran.is_ok(), "{pg_ran:?}");
    assert!(my_ran.is_ok(), "{my_ran:?}");
    assert_eq!(seen_on_argv, Vec::<String>::new());
    for host in ["localhost", "127.0.0.1"] {
        let sql = format!("DROP USER IF EXISTS '{user}'@'{host}'");
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut root)
            .await;
    }
    let _ = root.close().await;
    crate::helpers::drop_database(&my_db).await;
    crate::helpers::drop_database(&pg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fit_md_shows_an_unmatched_requests_shape_never_its_token() {
    // Arrange: a sale's log with password-reset links (tokens of letters only, no digit).
    let tmp = tempfile::tempdir().unwrap();
    let token: String = (0..24)
        .map(|_| (b'a' + rand::random_range(0..26u8)) as char)
        .map(|c| {
            if rand::random::<bool>() {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    let mut lines = Vec::new();
    for i in 0..40 {
        let at = chrono::DateTime::from_timestamp(1_796_519_128 + i / 4, 0).unwrap();
        let time = at.format("%d/%b/%Y:%H:%M:%S %z");
        lines.push(format!(
            "10.0.0.{i} - buyer{i} [{time}] \"POST /api/orders HTTP/1.1\" 201 57 \"-\" \"ua\""
        ));
        lines.push(format!(
            "10.0.0.{i} - buyer{i} [{time}] \"GET /reset-password/{token} HTTP/1.1\" 200 57 \"-\" \"ua\""
        ));
    }
    let log = tmp.path().join("access.log");
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let dir = tmp.path().join("out");
    std::fs::create_dir(&dir).unwrap();
    let out = dir.join("fitted.toml");

    // Act
    let m = measured(
        "fit with tokens in unmatched paths",
        &["fit", log.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[],
    )
    .await;

    // Assert
    assert_eq!(m.run.code, 0, "{}", m.run.both());
    let md = std::fs::read_to_string(dir.join("fit.md")).unwrap();
    assert!(md.contains("/reset-password/{…}"), "{md}");
    assert_eq!(leaks(&dir, &m.run, &[&token]), Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_login_page_that_echoes_the_password_html_escaped_leaves_it_nowhere() {
    // Arrange: a login that refuses everyone with an HTML page quoting the password escaped.
    async fn login(body: String) -> (axum::http::StatusCode, String) {
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        let pw = v["password"].as_str().unwrap_or_default();
        let escaped = pw
            .replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('\'', "&#39;");
        let page = format!("<p>wrong password <b>{escaped}</b></p>");
        (axum::http::StatusCode::UNAUTHORIZED, page)
    }
    let (base, _shop) = stock_shop(axum::Router::new().route("/login", post(login))).await;
    let tmp = tempfile::tempdir().unwrap();
    let pw = format!("{}&'<x>", seeded("Pw"));
    let escaped = pw
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&#39;");
    let csv = tmp.path().join("buyers.csv");
    let mut rows = vec!["user_id,device_id,ip,password".to_string()];
    for i in 0..60 {
        rows.push(format!("buyer{i},d{i},10.1.0.{i},{pw}"));
    }
    std::fs::write(&csv, rows.join("\n") + "\n").unwrap();
    let login_table = "[target.login]\nmethod = \"POST\"\npath = \"/login\"\n\
                       body = '{\"user\": \"{user_id}\", \"password\": \"{password}\"}'\n";
    let file = stock_scenario(tmp.path(), &[], login_table);
    let out = tmp.path().join("out");

    // Act
    let m = measured(
        "a login page echoing the password",
        &[
            "attack",
            "--target",
            &base,
            "--scenario",
            &file,
            "--buyers-csv",
            csv.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ],
        &[],
    )
    .await;

    // Assert: the logins failed (the run says so), and the password is nowhere, in any form.
    let report =
        std::fs::read_to_string(crate::helpers::only_report_dir(&out).join("report.json")).unwrap();
    assert!(
        report.contains("wrong password"),
        "the failure's sample is kept: {}",
        m.run.both()
    );
    let secrets = [pw.as_str(), escaped.as_str(), &pw[..pw.len() - 5]];
    assert_eq!(leaks(&out, &m.run, &secrets), Vec::<String>::new());
}
