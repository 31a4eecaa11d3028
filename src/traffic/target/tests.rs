//! Unit tests of the target: classification, templates filled in, URLs kept on the target.

use super::*;
use crate::traffic::mapping::Method;
use std::time::Duration;

fn target() -> Target {
    Target::new(
        "http://127.0.0.1:1",
        Mapping::default(),
        Sale {
            item_id: "7".into(),
            stock: 10,
            purchase_limit: 1,
            name: "tea \"green\"".into(),
            price_cents: 5,
        },
    )
}

#[test]
fn the_reference_mapping_classifies_the_shop_contract() {
    let t = target();
    let c = t.classify(
        Kind::Order,
        201,
        r#"{"order_id":"7-abc","status":"pending_payment"}"#,
    );
    assert_eq!(
        (c.answer, c.order_id, c.why),
        (Answer::Created, Some("7-abc".into()), Why::Rule(0))
    );
    let answer = |kind, status, body| t.classify(kind, status, body).answer;
    assert_eq!(
        answer(Kind::Order, 409, r#"{"error":"sold_out"}"#),
        Answer::SoldOut
    );
    assert_eq!(
        answer(Kind::Order, 409, r#"{"error":"duplicate"}"#),
        Answer::Duplicate
    );
    assert_eq!(
        answer(Kind::Order, 503, r#"{"error":"busy"}"#),
        Answer::Busy
    );
    assert_eq!(
        answer(Kind::Order, 503, r#"{"error":"not_warmed"}"#),
        Answer::ServerError
    );
    assert_eq!(answer(Kind::Order, 429, ""), Answer::RateLimited);
    assert_eq!(
        answer(Kind::Pay, 409, r#"{"error":"invalid_state"}"#),
        Answer::Rejected
    );
    assert_eq!(answer(Kind::Pay, 200, "{}"), Answer::Ok);
    let c = t.classify(Kind::Order, 201, "not json");
    assert_eq!(
        (c.answer, c.order_id),
        (Answer::Created, None),
        "an acknowledgement without its id is still an acknowledgement"
    );
}

#[test]
fn answers_no_rule_classifies_are_never_invalid() {
    let mut t = target();
    t.mapping
        .outcomes
        .retain(|r| r.outcome.answer() == Answer::SoldOut);
    let answer = |status| t.classify(Kind::Order, status, "{}");
    assert_eq!(answer(200).answer, Answer::Unclassified);
    assert_eq!(answer(200).why, Why::NoRule);
    assert_eq!(answer(307).answer, Answer::Redirect);
    assert_eq!(answer(418).answer, Answer::Invalid);
    assert_eq!(answer(502).answer, Answer::ServerError);
    assert_eq!(answer(401).answer, Answer::Unauthorized);
}

#[test]
fn a_401_is_unauthorized_unless_a_rule_names_it_by_code() {
    let mut t = target();
    assert_eq!(
        t.classify(Kind::Order, 401, "{}").answer,
        Answer::Unauthorized,
        "the reference rules' 4xx does not cover it"
    );
    assert_eq!(
        t.classify(Kind::Order, 403, "").answer,
        Answer::Unauthorized
    );
    t.mapping.outcomes.insert(
        0,
        OutcomeRule {
            status: vec![crate::traffic::mapping::StatusPattern::Code(403)],
            field: None,
            outcome: crate::traffic::mapping::Outcome::parse("sold_out").unwrap(),
        },
    );
    assert_eq!(t.classify(Kind::Order, 403, "").answer, Answer::SoldOut);
}

#[test]
fn views_and_logins_are_classified_by_their_own_rules() {
    let mut t = target();
    let answer = |t: &Target, status| t.classify(Kind::View, status, "{}").answer;
    assert_eq!(
        answer(&t, 201),
        Answer::Ok,
        "never created: the order rules do not apply"
    );
    assert_eq!(answer(&t, 200), Answer::Ok);
    assert_eq!(answer(&t, 404), Answer::NotFound);
    assert_eq!(answer(&t, 401), Answer::Unauthorized);
    assert_eq!(answer(&t, 422), Answer::Invalid);
    assert_eq!(answer(&t, 500), Answer::ServerError);
    assert_eq!(t.classify(Kind::Login, 200, "").answer, Answer::Ok);
    t.mapping.view.as_mut().unwrap().outcomes = Some(vec![OutcomeRule {
        status: vec![crate::traffic::mapping::StatusPattern::Class(2)],
        field: None,
        outcome: crate::traffic::mapping::Outcome::parse("sold_out").unwrap(),
    }]);
    assert_eq!(answer(&t, 200), Answer::SoldOut);
    assert_eq!(t.classify(Kind::View, 200, "").why, Why::Rule(0));
}

#[test]
fn templates_fill_in_escaped_values_and_urls_stay_on_the_target() {
    let t = target();
    let setup = t.setup_request().unwrap();
    assert_eq!(setup.path, "/api/items/7");
    let body: serde_json::Value = serde_json::from_str(setup.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["name"], "tea \"green\"");
    assert_eq!(body["stock"], 10);
    let b = BuyerPlan {
        index: 0,
        user_id: "u/{order_id}".into(),
        device_id: "d".into(),
        ip: "10.0.0.1".into(),
        arrival: Duration::ZERO,
        views: Box::default(),
        bot: false,
        resubmits: Box::default(),
        after: crate::traffic::schedule::AfterOrder::Abandon,
        wave: 1,
    };
    let none = Session::default();
    let pay = t
        .prepare(&Action::Pay(Some("//evil.example/x".into())), &b, &none)
        .unwrap();
    assert_eq!(pay.path, "/api/orders/%2F%2Fevil.example%2Fx/pay");
    assert_eq!(
        t.url(&pay).unwrap().as_str(),
        "http://127.0.0.1:1/api/orders/%2F%2Fevil.example%2Fx/pay"
    );
    assert!(
        t.prepare(&Action::Pay(None), &b, &none).is_none(),
        "no id, no pay"
    );
    for (base, path) in [
        (
            "http://127.0.0.1:1",
            "/api/orders/%2F%2Fevil.example%2Fx/pay",
        ),
        ("http://127.0.0.1:1/", "/api/orders?x=1&y=%3F#top"),
        ("http://127.0.0.1:1/shop/", "/api/./a/../orders"),
        ("http://localhost:8080/shop", "//evil.example/x"),
    ] {
        let mut at = t.clone();
        at.base_url = base.into();
        let p = Prepared {
            path: path.into(),
            ..pay.clone()
        };
        let parsed = Url::parse(base).unwrap();
        assert_eq!(
            Target::url_on(&parsed, &p),
            at.url(&p).unwrap(),
            "{base} {path}"
        );
    }
    let order = t
        .prepare(&Action::Order(Some("k-1".into())), &b, &none)
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(order.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["user_id"], "u/{order_id}", "never expanded again");
    assert!(order
        .headers
        .contains(&("Idempotency-Key".into(), "k-1".into())));
    let mut quiet = target();
    quiet.mapping.idempotency_header.clear();
    let order = quiet
        .prepare(&Action::Order(Some("k-1".into())), &b, &none)
        .unwrap();
    assert!(
        order.headers.iter().all(|(h, _)| h != "Idempotency-Key"),
        "an empty header name sends none"
    );
}

fn buyer() -> BuyerPlan {
    BuyerPlan {
        index: 0,
        user_id: "u/{order_id}".into(),
        device_id: "d".into(),
        ip: "10.0.0.1".into(),
        arrival: Duration::ZERO,
        views: Box::default(),
        bot: false,
        resubmits: Box::default(),
        after: crate::traffic::schedule::AfterOrder::Abandon,
        wave: 1,
    }
}

#[test]
fn headers_merge_the_targets_and_the_requests_own_and_carry_the_buyers_session() {
    use crate::traffic::mapping::Body;
    let mut t = target();
    t.mapping.headers = vec![
        ("Authorization".into(), "Bearer {token}".into()),
        ("X-App".into(), "shop".into()),
    ];
    t.mapping.order.headers = vec![("x-app".into(), "own".into())];
    t.mapping.order.body = Some(Body::Form(vec![("u".into(), "{user_id} x".into())]));
    let b = buyer();
    let order = Action::Order(None);

    let p = t.prepare(&order, &b, &Session::default()).unwrap();
    assert_eq!(p.header("authorization"), None, "no token yet: left out");
    assert_eq!(
        p.header("X-App"),
        Some("own"),
        "the request's own header wins"
    );
    assert_eq!(p.body.as_deref(), Some("u=u%2F%7Border_id%7D+x"));
    assert_eq!(p.content_type, Some(FORM));
    let setup = t.setup_request().unwrap();
    assert_eq!(
        setup.header("X-App"),
        Some("shop"),
        "[target] headers go on the set-up"
    );
    assert_eq!(setup.header("Cookie"), None);

    let mut s = Session::default();
    s.learn(&Learned {
        set_cookies: vec!["sid=1; HttpOnly".into()],
        extracted: vec![("token".into(), "t\r\nX-Evil: 1".into())],
        ..Learned::default()
    });
    let p = t.prepare(&order, &b, &s).unwrap();
    assert_eq!(p.header("Authorization"), Some("Bearer t%0D%0AX-Evil: 1"));
    assert_eq!(p.header("Cookie"), Some("sid=1"));
    assert_eq!(p.header("X-Evil"), None);

    t.mapping
        .order
        .headers
        .push(("X-Csrf".into(), "{csrf}".into()));
    assert!(
        t.prepare(&order, &b, &s).is_none(),
        "a request's own header naming a value the buyer lacks: not sent"
    );
}

#[test]
fn an_answer_teaches_its_cookies_and_extracts_only_when_it_is_a_2xx() {
    use crate::traffic::mapping::{Extract, ExtractFrom, Login, LoginWhen, RequestTemplate};
    let mut t = target();
    let mut login = RequestTemplate::new(Method::Post, "/login");
    login.extract = vec![Extract {
        name: "token".into(),
        from: ExtractFrom::Json("data.token".into()),
    }];
    t.mapping.login = Some(Login {
        request: login,
        when: LoginWhen::BeforeSale,
        concurrency: 1,
    });
    let c = t.classify(Kind::Login, 200, r#"{"data": {"token": "abc"}}"#);
    assert_eq!(c.learned.extracted, vec![("token".into(), "abc".into())]);
    assert_eq!(c.learned.missing, None);
    let c = t.classify(Kind::Login, 200, r#"{"data": {}}"#);
    assert_eq!(
        c.learned.missing,
        Some(("token".into(), "data.token".into()))
    );
    let c = t.classify(Kind::Login, 401, r#"{"data": {"token": "abc"}}"#);
    assert!(c.learned.extracted.is_empty(), "a refusal teaches nothing");
    assert_eq!(c.answer, Answer::Unauthorized);
}

#[test]
fn a_sample_masks_the_values_the_request_carried_and_the_mappings_own_credentials() {
    let mut t = target();
    t.mapping.secret_fields = vec!["pin".into()];
    t.mapping
        .headers
        .push(("X-Shop-Key".into(), "literal-key-0001".into()));
    t.mapping.order.body = Some(Body::Json(
        r#"{"user": "{user_id}", "pin": "{pin}", "note": "{note}"}"#.into(),
    ));
    let t = Target::new(&t.base_url.clone(), t.mapping, t.sale);
    let session = Session::with_values(vec![
        ("pin".into(), "9876-5432".into()),
        ("note".into(), "not-a-secret".into()),
    ]);
    let p = t
        .prepare(&Action::Order(Some("k".into())), &buyer(), &session)
        .unwrap();
    // A shop that echoes the request under names that say nothing.
    let echo = r#"{"a": "9876-5432", "b": "literal-key-0001", "c": "not-a-secret"}"#;

    let s = t.sample(echo, &p, &Learned::default());

    assert!(!s.contains("9876-5432"), "a secret_fields column: {s}");
    assert!(
        !s.contains("literal-key-0001"),
        "a literal header value: {s}"
    );
    assert!(s.contains("not-a-secret"), "other columns are kept: {s}");
    // A target URL's password, and the Basic credential the client makes of it.
    let t = Target::new(
        "http://u:url-pass-1@127.0.0.1:1",
        Mapping::default(),
        t.sale,
    );
    let echo = "pw url-pass-1, basic dTp1cmwtcGFzcy0x";
    let s = t.sample(echo, &p, &Learned::default());
    assert_eq!(s, "pw ***, basic ***");
}
