//! Unit tests of the `[target]` table: every check names its field.

use super::*;

#[test]
fn a_bad_mapping_names_the_field() {
    let mut m = RawMapping::from(Mapping::default());
    m.outcomes[0].outcome = "won".into();
    assert!(Mapping::try_from(m)
        .unwrap_err()
        .to_string()
        .contains("target.outcomes[0].outcome"));
    let mut m = RawMapping::from(Mapping::default());
    m.pay.as_mut().unwrap().method = "FETCH".into();
    assert!(Mapping::try_from(m)
        .unwrap_err()
        .to_string()
        .contains("target.pay.method"));
    let mut m = RawMapping::from(Mapping::default());
    m.outcomes[0].outcome = "unclassified".into();
    assert!(Mapping::try_from(m).is_err(), "the harness's own answer");
}

#[test]
fn the_reference_mapping_reads_back_from_its_written_form() {
    let raw = RawMapping::from(Mapping::default());
    assert_eq!(raw.outcomes[1].status, vec!["2xx".to_string()]);
    assert!(matches!(&raw.setup, Some(RawSetup::One(r)) if r.method == "PUT"));
    assert_eq!(Mapping::try_from(raw), Ok(Mapping::default()));
}

#[test]
fn status_patterns_and_methods_are_decided_when_read() {
    assert_eq!(StatusPattern::parse("4xx"), Some(StatusPattern::Class(4)));
    assert_eq!(StatusPattern::parse("409"), Some(StatusPattern::Code(409)));
    for bad in ["6xx", "0xx", "99", "600", "4XX", "abc"] {
        assert_eq!(StatusPattern::parse(bad), None, "{bad}");
    }
    assert!(StatusPattern::Class(4).matches(418) && !StatusPattern::Class(4).matches(500));
    assert_eq!(Method::parse("delete"), Some(Method::Delete));
    assert_eq!(Method::parse("FETCH"), None);
    assert_eq!(Outcome::parse("timeout"), None);
    let mut m = RawMapping::from(Mapping::default());
    m.outcomes[2].equals = None;
    assert_eq!(
        Mapping::try_from(m),
        Err(MappingError::FieldWithoutEquals {
            rules: "outcomes".into(),
            rule: 2
        })
    );
}

#[test]
fn the_idempotency_header_is_a_header_name_or_empty() {
    let mut m = RawMapping::from(Mapping::default());
    assert_eq!(m.idempotency_header, "Idempotency-Key");
    m.idempotency_header = String::new();
    assert_eq!(Mapping::try_from(m).unwrap().idempotency_header, "");
    let mut m = RawMapping::from(Mapping::default());
    m.idempotency_header = "Idem Key:".into();
    let e = Mapping::try_from(m).unwrap_err().to_string();
    assert!(e.contains("target.idempotency_header"), "{e}");
}

/// `[target]` text (with the reference order and rules) read into a mapping.
fn read(extra: &str) -> Result<Mapping, String> {
    let text = format!(
        "order = {{ method = \"POST\", path = \"/buy\" }}\n\
         outcomes = [{{ status = [\"201\"], outcome = \"created\" }}]\n{extra}"
    );
    toml::from_str::<Mapping>(&text).map_err(|e| e.to_string())
}

#[test]
fn headers_forms_and_bodies_are_checked_when_read() {
    let m = read(
        "headers = { Authorization = \"Bearer {token}\" }\n\
         [login]\nmethod = \"POST\"\npath = \"/login\"\n\
         form = { user = \"{email}\", pw = \"{password}\" }\n\
         headers = { \"X-Client\" = \"oversell\" }\n\
         extract = { token = \"data.token\", csrf = \"header:X-CSRF-Token\" }\n",
    )
    .unwrap();
    let login = m.login.as_ref().unwrap();
    assert_eq!(login.when, LoginWhen::BeforeSale);
    assert_eq!(login.concurrency, LOGIN_CONCURRENCY);
    assert!(matches!(&login.request.body, Some(Body::Form(p)) if p.len() == 2));
    assert_eq!(
        login.request.extract[0].from,
        ExtractFrom::Header("X-CSRF-Token".into())
    );
    assert!(m.check_names(&["email".into(), "password".into()]).is_ok());
    let e = m.check_names(&["email".into()]).unwrap_err().to_string();
    assert!(
        e.contains("target.login.form.pw") && e.contains("{password}"),
        "{e}"
    );
    let raw = RawMapping::from(m.clone());
    assert_eq!(Mapping::try_from(raw).unwrap(), m, "reads back");

    for (extra, field) in [
        ("headers = { \"Bad Name\" = \"x\" }", "target.headers.Bad Name"),
        ("headers = { A = \"x\\r\\nB: y\" }", "target.headers.A"),
        ("headers = { \"idempotency-key\" = \"x\" }", "target.headers.idempotency-key"),
        (
            "view = { method = \"GET\", path = \"/\", body = \"{}\", form = {} }",
            "target.view.form",
        ),
        (
            "cancel = { method = \"POST\", path = \"/c\", body = '{\"a\": {qty}' }",
            "target.cancel.body",
        ),
        (
            "login = { method = \"POST\", path = \"/l\", extract = { qty = \"a\" } }",
            "target.login.extract.qty",
        ),
        (
            "login = { method = \"POST\", path = \"/l\", extract = { t = \"a..b\" } }",
            "target.login.extract.t",
        ),
        (
            "login = { method = \"POST\", path = \"/l\", when = \"later\" }",
            "target.login.when",
        ),
        (
            "login = { method = \"POST\", path = \"/l\", concurrency = 0 }",
            "target.login.concurrency",
        ),
        (
            "setup = [{ method = \"PUT\", path = \"/a\" }, { method = \"FETCH\", path = \"/b\" }]",
            "target.setup[1].method",
        ),
        (
            "view = { method = \"GET\", path = \"/\", outcomes = [{ status = [\"2xx\"], outcome = \"won\" }] }",
            "target.view.outcomes[0].outcome",
        ),
    ] {
        let e = read(extra).unwrap_err();
        assert!(e.contains(field), "{extra}: {e}");
    }
    let e =
        read("cancel = { method = \"POST\", path = \"/c\", body = '{\"a\": {qty}' }").unwrap_err();
    assert!(e.contains(r#"{"a": 1"#), "shows the expansion: {e}");
    let e = read("setup = { methd = \"PUT\", path = \"/a\" }").unwrap_err();
    assert!(e.contains("unknown field `methd`"), "{e}");
    let m =
        read("setup = [{ method = \"PUT\", path = \"/a\" }, { method = \"POST\", path = \"/b\" }]")
            .unwrap();
    assert_eq!(m.setup.len(), 2);
    let m =
        read("login = { method = \"POST\", path = \"/l/{token}\", extract = { token = \"t\" } }")
            .unwrap();
    let e = m.check_names(&[]).unwrap_err().to_string();
    assert!(e.contains("target.login.path"), "its own extract: {e}");
    let m =
        read("login = { method = \"POST\", path = \"/l\", extract = { email = \"t\" } }").unwrap();
    let e = m.check_names(&["email".into()]).unwrap_err().to_string();
    assert!(e.contains("target.login.extract.email"), "{e}");
}

#[test]
fn paths_that_leave_the_target_are_refused_when_read() {
    for bad in [
        "//evil.example/x",
        "http://evil.example/x",
        "evil",
        "/\\evil.example",
    ] {
        let mut m = RawMapping::from(Mapping::default());
        m.order.path = bad.into();
        let e = Mapping::try_from(m).unwrap_err().to_string();
        assert!(e.contains("target.order.path"), "{bad}: {e}");
    }
}

fn setup_of(m: &mut RawMapping) -> &mut RawRequest {
    match m.setup.as_mut().unwrap() {
        RawSetup::One(r) => r,
        RawSetup::Many(list) => &mut list[0],
    }
}

#[test]
fn placeholders_are_checked_against_where_they_are_used() {
    // An unknown name is found when the plan is built (the CSV's columns known then).
    let mut m = RawMapping::from(Mapping::default());
    m.order.body = Some(r#"{"u": "{usr_id}"}"#.into());
    let read = Mapping::try_from(m).unwrap();
    let e = read.check_names(&["email".into()]).unwrap_err().to_string();
    assert!(
        e.contains("target.order.body")
            && e.contains("{usr_id}")
            && e.contains("{user_id}")
            && e.contains("--buyers-csv columns {email}"),
        "{e}"
    );
    assert!(read.check_names(&["usr_id".into()]).is_ok(), "a CSV column");
    let mut m = RawMapping::from(Mapping::default());
    setup_of(&mut m).path = "/reset/{user_id}".into();
    let e = Mapping::try_from(m).unwrap_err().to_string();
    assert!(e.contains("target.setup.path"), "{e}");
    let mut m = RawMapping::from(Mapping::default());
    setup_of(&mut m).path = "/reset/{email}".into();
    let e = Mapping::try_from(m).unwrap_err().to_string();
    assert!(
        e.contains("target.setup.path") && e.contains("{email}"),
        "{e}"
    );
    let mut m = RawMapping::from(Mapping::default());
    m.order_id_field = None;
    let e = Mapping::try_from(m).unwrap_err().to_string();
    assert!(
        e.contains("target.pay.path") && e.contains("target.order_id_field"),
        "{e}"
    );
}

fn with_poll(outcomes: &[(&str, &str)]) -> RawMapping {
    let mut m = RawMapping::from(Mapping::default());
    m.outcomes[0].outcome = "pending".into();
    m.poll = Some(RawPoll {
        method: "GET".into(),
        path: "/api/orders/{order_id}".into(),
        body: None,
        headers: Default::default(),
        interval_ms: Some(250),
        interval: None,
        max_wait_ms: Some(30_000),
        max_wait: None,
        outcomes: outcomes
            .iter()
            .map(|(status, outcome)| RawRule {
                status: vec![status.to_string()],
                field: None,
                equals: None,
                outcome: outcome.to_string(),
            })
            .collect(),
    });
    m
}

#[test]
fn a_pending_outcome_needs_a_poll_step_that_can_decide() {
    let mut m = with_poll(&[("200", "created")]);
    m.poll = None;
    let e = Mapping::try_from(m).unwrap_err().to_string();
    assert!(
        e.contains("target.outcomes[0].outcome") && e.contains("target.poll"),
        "{e}"
    );
    let e = Mapping::try_from(with_poll(&[("202", "pending")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("target.poll.outcomes"), "{e}");
    let e = Mapping::try_from(with_poll(&[("200", "won")]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("target.poll.outcomes[0].outcome"), "{e}");
    let mut m = with_poll(&[("200", "created")]);
    m.poll.as_mut().unwrap().interval_ms = Some(60_000);
    let e = Mapping::try_from(m).unwrap_err().to_string();
    assert!(e.contains("target.poll.interval_ms"), "{e}");
    let mut m = with_poll(&[("200", "created")]);
    m.order_id_field = None;
    m.pay = None;
    m.cancel = None;
    let e = Mapping::try_from(m).unwrap_err().to_string();
    assert!(
        e.contains("target.poll.path") && e.contains("target.order_id_field"),
        "{e}"
    );
    let ok = Mapping::try_from(with_poll(&[("202", "pending"), ("200", "created")])).unwrap();
    assert_eq!(
        RawMapping::from(ok.clone()),
        with_poll(&[("202", "pending"), ("200", "created")])
    );
    assert_eq!(
        ok.poll.unwrap().interval,
        std::time::Duration::from_millis(250)
    );
}

#[test]
fn the_settle_table_names_its_fields() {
    let settle = |settle_s, path: &str, field: &str| {
        let mut m = RawMapping::from(Mapping::default());
        m.settle = Some(RawSettle {
            settle_s,
            window: None,
            backlog: Some(RawBacklogSignal::Endpoint(RawBacklog {
                method: "GET".into(),
                path: path.into(),
                field: field.into(),
            })),
        });
        Mapping::try_from(m)
    };
    let ok = settle(Some(2.0), "/queue/{item_id}", "queue.depth").unwrap();
    assert_eq!(ok.settle.as_ref().unwrap().settle_s, Some(2.0));
    assert_eq!(Mapping::try_from(RawMapping::from(ok.clone())), Ok(ok));
    let e = settle(Some(0.0), "/q", "n").unwrap_err().to_string();
    assert!(e.contains("target.settle.settle_s"), "{e}");
    let e = settle(None, "/q/{user_id}", "n").unwrap_err().to_string();
    assert!(e.contains("target.settle.backlog.path"), "{e}");
    let e = settle(None, "/q", "a..b").unwrap_err().to_string();
    assert!(e.contains("target.settle.backlog.field"), "{e}");
    let e = settle(None, "http://x/q", "n").unwrap_err().to_string();
    assert!(e.contains("target.settle.backlog.path"), "{e}");
}
