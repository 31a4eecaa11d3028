use super::*;

#[test]
fn secret_names_are_known_by_their_words_and_by_the_scenarios_list() {
    for n in [
        "Authorization",
        "cookie",
        "Set-Cookie",
        "access_token",
        "X-Api-Key",
        "client_secret",
        "PASSWORD",
        "--admin-token",
    ] {
        assert!(is_secret_name(n, &[]), "{n}");
    }
    for n in ["user_id", "email", "Content-Type", "--strategy"] {
        assert!(!is_secret_name(n, &[]), "{n}");
    }
    assert!(is_secret_name("pin", &["PIN".into()]));
}

#[test]
fn a_url_loses_its_password_and_its_secret_query_values() {
    assert_eq!(
        url("postgres://u:secret@h:5432/db"),
        "postgres://u:***@h:5432/db"
    );
    assert_eq!(url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    // A user alone may be a token (`https://TOKEN@host`): masked whole.
    assert_eq!(url("mysql://root@h/db"), "mysql://***@h/db");
    assert_eq!(
        url("http://tok3n-as-user@127.0.0.1:9/x"),
        "http://***@127.0.0.1:9/x"
    );
    // Not a valid URL (a password with an unencoded `/`): masked up to the last `@`.
    assert_eq!(
        url("postgres://postgres:PW/slash9@127.0.0.1:5432/db"),
        "postgres://postgres:***@127.0.0.1:5432/db"
    );
    assert_eq!(
        url("postgres://u@127.0.0.1/db?host=/tmp&password=pw9#frag"),
        "postgres://***@127.0.0.1/db?host=/tmp&password=***#frag"
    );
    // An `@` in a valid URL's path is not userinfo.
    assert_eq!(url("http://h:1/users/@me"), "http://h:1/users/@me");
    // Named by the scenario, or known: signatures and sessions.
    assert_eq!(
        url_with("/stock?sig=abc123&pin=9999&item=1", &["pin".into()]),
        "/stock?sig=***&pin=***&item=1"
    );
    assert_eq!(url("/o?session=s3ss1on&x=1"), "/o?session=***&x=1");
    assert_eq!(
        url("mysql://u:p@w@h/db?password=x1&ssl-mode=required"),
        "mysql://u:***@h/db?password=***&ssl-mode=required"
    );
    assert_eq!(
        url("http://127.0.0.1:9/stock?api_key=k3y&item=1"),
        "http://127.0.0.1:9/stock?api_key=***&item=1"
    );
    assert_eq!(
        url("/orders?access_token=t&a=1"),
        "/orders?access_token=***&a=1"
    );
    assert_eq!(url("a plain word"), "a plain word");
}

#[test]
fn the_command_line_keeps_no_secret_flag_value_and_no_url_password() {
    let args = [
        "oversell",
        "gate",
        "--target",
        "http://127.0.0.1:8/?token=abc",
        "--admin-token",
        "s3cr3t-admin",
        "--api-key=k3y",
        "--oracle-sql",
        "postgres://u:pw@h/db?password=pw2",
        "--database-url=mysql://root:pw@h/db",
        "--strategy",
        "naive",
    ]
    .map(String::from);
    let line = command_line(args).join(" ");
    for secret in ["abc", "s3cr3t-admin", "k3y", ":pw@", "pw2"] {
        assert!(!line.contains(secret), "{secret}: {line}");
    }
    assert!(
        line.contains("--admin-token *** --api-key=***")
            && line.contains("--strategy naive")
            && line.contains("--database-url=mysql://root:***@h/db"),
        "{line}"
    );
}

#[test]
fn a_sample_masks_known_values_in_every_form_and_secret_fields_by_name() {
    let mut v = Values::default();
    v.add("tok-12345");
    v.add("p@ss word");
    v.add("abc"); // too short to mask by value
    let body = r#"{"echo":"tok-12345","form":"pw=p%40ss+word","access_token":"other","n":"abc","pin":42,
Authorization: Bearer zzzz
note: password=hunter2&user=a"#;
    let s = sample(body, &v, &["pin".into()], 1000);
    for secret in ["tok-12345", "p%40ss+word", "other", "zzzz", "hunter2", "42"] {
        assert!(!s.contains(secret), "{secret}: {s}");
    }
    assert!(s.contains(r#""n":"abc""#) && s.contains("user=a"), "{s}");
    assert!(format!("{v:?}").contains("3 secret") || format!("{v:?}").contains("2 secret"));
    assert!(
        !format!("{v:?}").contains("tok"),
        "Debug never shows a value"
    );
}

#[test]
fn a_value_across_the_cut_is_masked_whole_and_a_cut_json_string_to_its_end() {
    let mut v = Values::default();
    v.add("ABCDEFGHIJ");
    let body = format!("{}ABCDEFGHIJ tail", "x".repeat(195));
    let s = sample(&body, &v, &[], 200);
    assert!(!s.contains("ABCDE"), "{s}");
    let s = sample(
        r#"{"refresh_token":"0123456789"#,
        &Values::default(),
        &[],
        25,
    );
    assert!(!s.contains("0123"), "{s}");
}

#[test]
fn a_value_an_html_page_escapes_is_masked_too() {
    let mut v = Values::default();
    v.add("p<w>&\"d'9");
    for page in [
        "<p>wrong password p&lt;w&gt;&amp;&quot;d&#39;9</p>",
        "<p>p&#60;w&#62;&#38;&#34;d&#39;9</p>",
    ] {
        let masked = v.mask(page);
        assert!(
            masked.contains(MASK) && !masked.contains("d&#39;9"),
            "{masked}"
        );
    }
}
