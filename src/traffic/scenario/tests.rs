//! Unit tests of scenario files: defaults, every error naming its field, `[target]`,
//! `[adversarial]` and the payment window.

use super::*;

const MINIMAL: &str = r#"
name = "t"
[item]
stock = 10
[buyers]
count = 100
arrival = "uniform"
window_s = 2
"#;

#[test]
fn a_minimal_scenario_parses_with_defaults() {
    let s = Scenario::parse(MINIMAL).unwrap();
    assert_eq!(s.item.purchase_limit, 1);
    assert_eq!(s.after_order.pay, 1.0);
    assert_eq!(s.client.timeout_ms, 10_000);
}

#[test]
fn an_unknown_field_is_named() {
    let text = MINIMAL.replace("count = 100", "count = 100\ncuont = 3");
    let e = Scenario::parse(&text).unwrap_err().to_string();
    assert!(e.contains("cuont"), "{e}");
    assert!(e.contains("count"), "the allowed fields are listed: {e}");
}

#[test]
fn an_unknown_threshold_is_an_error() {
    let e = Scenario::parse(&format!("{MINIMAL}\n[thresholds]\np95_ms = 3\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("p95_ms") && e.contains("p99"), "{e}");
}

#[test]
fn a_target_table_is_validated_with_field_names() {
    let target = r#"
[target]
view = { method = "GET", path = "/p/{item_id}" }
order = { method = "POST", path = "/buy", body = '{"sku": {item_id}}' }
pay = { method = "POST", path = "/pay/{order_id}" }
cancel = { method = "DELETE", path = "/buy/{order_id}" }
order_id_field = "data.id"
outcomes = [{ status = ["200"], outcome = "created" }]
"#;
    let s = Scenario::parse(&format!("{MINIMAL}{target}")).unwrap();
    assert_eq!(s.mapping().order_id_field.as_deref(), Some("data.id"));
    assert!(s.mapping().setup.is_empty());
    let e = Scenario::parse(&format!(
        "{MINIMAL}{}",
        target.replace("\"DELETE\"", "\"ERASE\"")
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("target.cancel.method"), "{e}");
    let e = Scenario::parse(&format!("{MINIMAL}{target}verb = 1\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("verb"), "{e}");
    let window = Scenario::parse(&format!("{MINIMAL}{target}payment_window_s = 120\n"));
    assert_eq!(
        window.unwrap().mapping().declared_payment_window(),
        Some(std::time::Duration::from_secs(120))
    );
    let window = Scenario::parse(&format!("{MINIMAL}{target}payment_window = \"1500ms\"\n"));
    assert_eq!(
        window.unwrap().mapping().declared_payment_window(),
        Some(std::time::Duration::from_millis(1500))
    );
    assert_eq!(
        s.mapping().declared_payment_window(),
        None,
        "undeclared is unknown, never a default"
    );
    assert_eq!(
        s.payment_window(),
        std::time::Duration::from_secs(900),
        "at_timeout buyers still wait the post-mortem's 15 minutes"
    );
    let e = Scenario::parse(&format!(
        "{MINIMAL}{target}payment_window = \"2s\"\npayment_window_s = 2\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("keep one"), "{e}");
    let e = Scenario::parse(&format!("{MINIMAL}{target}payment_window_s = 0\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("target.payment_window_s") && e.contains("between 1 and 604800"),
        "{e}"
    );
    assert_eq!(
        Scenario::parse(MINIMAL).unwrap().mapping(),
        Default::default()
    );
}

#[test]
fn a_string_item_id_is_text_to_templates_and_refused_by_the_reference_shop() {
    let base = "name = \"t\"\n[buyers]\ncount = 1\narrival = \"uniform\"\nwindow_s = 1\n\
                [browse]\nview_share = 0\n[after_order]\npay = 0\ncancel = 0\nabandon = 1\n";
    let s = Scenario::parse(&format!(
        "{base}[item]\nid = \"0b7e-uuid\"\nstock = 1\n[target]\n\
         order = {{ method = \"POST\", path = \"/sales/{{item_id}}/buy\" }}\n\
         outcomes = [{{ status = [\"201\"], outcome = \"created\" }}]\n"
    ))
    .unwrap();
    assert_eq!(s.item.id, ItemId::Text("0b7e-uuid".into()));
    let t = crate::traffic::target::Target::new(
        "http://127.0.0.1:1",
        s.mapping(),
        crate::traffic::target::Sale::of(&s),
    );
    let b = &crate::traffic::schedule::build(&s).get(0);
    let order = crate::traffic::target::Action::Order(None);
    let p = t.prepare(&order, b, &Default::default()).unwrap();
    assert_eq!(p.path, "/sales/0b7e-uuid/buy");
    let e = s.item.reference_check().unwrap_err().to_string();
    assert!(e.contains("item.id") && e.contains("reference shop"), "{e}");
    let e = Scenario::parse(&format!("{base}[item]\nid = \"\"\nstock = 1\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("item.id"), "{e}");
    let n = Scenario::parse(&format!("{base}[item]\nid = 7\nstock = 1\n")).unwrap();
    assert_eq!(
        (n.item.number(), n.item.reference_check().is_ok()),
        (7, true)
    );
}

#[test]
fn a_mapping_needs_only_the_requests_the_scenario_sends() {
    let minimal = r#"
[after_order]
pay = 0
abandon = 1
[target]
setup = { method = "POST", path = "/stock/reset?amount={stock}" }
order = { method = "POST", path = "/purchase" }
outcomes = [{ status = ["200"], outcome = "created" }]
[target.oracle]
url = "/stock"
stock_field = "current_stock"
"#;
    let s = Scenario::parse(&format!("{MINIMAL}{minimal}")).unwrap();
    let m = s.mapping();
    assert!(m.pay.is_none() && m.cancel.is_none() && m.order_id_field.is_none());
    assert!(m.oracle.unwrap().fields.derives_sold());
    let e = Scenario::parse(&format!(
        "{MINIMAL}{}",
        minimal.replace("pay = 0\nabandon = 1", "pay = 0.5\nabandon = 0.5")
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("target.pay") && e.contains("after_order.pay is above 0"),
        "{e}"
    );
}

#[test]
fn a_bad_range_names_the_field_and_the_allowed_values() {
    let e = Scenario::parse(&MINIMAL.replace("count = 100", "count = 0"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("buyers.count") && e.contains("between 1 and 10000000"),
        "{e}"
    );
    let e = Scenario::parse(&MINIMAL.replace("\"uniform\"", "\"spike\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("burst") && e.contains("ramp"), "{e}");
    let e = Scenario::parse(&format!("{MINIMAL}\n[after_order]\npay = 0.5\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("after_order") && e.contains("add up to 1"),
        "{e}"
    );
}

#[test]
fn adversarial_and_retry_errors_name_their_fields() {
    let adv = "\n[adversarial]\npay_twice = 0.5\nat_timeout = 0.3\n";
    let s = Scenario::parse(&format!("{MINIMAL}{adv}")).unwrap();
    assert_eq!(s.adversarial.total(), 0.8);
    let e = Scenario::parse(&format!("{MINIMAL}{}", adv.replace("0.3", "0.6")))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`adversarial`") && e.contains("at most 1"),
        "{e}"
    );
    let e = Scenario::parse(&format!("{MINIMAL}\n[adversarial]\npay_twic = 0.5\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pay_twic") && e.contains("resend_same_key"),
        "{e}"
    );
    let retry =
        "\n[client]\nretry = { on = [\"timeout\", \"5xx\"], times = 2, backoff_ms = [50, 200] }\n";
    let s = Scenario::parse(&format!("{MINIMAL}{retry}")).unwrap();
    let p = crate::traffic::adversary::RetryPolicy::of(s.client.retry.as_ref().unwrap());
    assert_eq!(p.times, 2);
    let e = Scenario::parse(&format!("{MINIMAL}{}", retry.replace("\"5xx\"", "\"4xx\"")))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("client.retry.on") && e.contains("connect_error") && e.contains("\"4xx\""),
        "{e}"
    );
    let e = Scenario::parse(&format!(
        "{MINIMAL}{}",
        retry.replace("times = 2", "times = 0")
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("client.retry.times") && e.contains("between 1 and 10"),
        "{e}"
    );
    let e = Scenario::parse(&format!(
        "{MINIMAL}{}",
        retry.replace("[50, 200]", "[50, 200, 800]")
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("client.retry.backoff_ms"), "{e}");
    let e = Scenario::parse(&format!("{MINIMAL}{}", retry.replace("times", "tries")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("tries") && e.contains("backoff_ms"), "{e}");
}

#[test]
fn a_target_without_pay_cannot_take_scripts_that_pay() {
    let target = r#"
[after_order]
pay = 0
abandon = 1
[adversarial]
pay_twice = 0.2
[target]
order = { method = "POST", path = "/purchase" }
outcomes = [{ status = ["200"], outcome = "created" }]
"#;
    let e = Scenario::parse(&format!("{MINIMAL}{target}"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("target.pay") && e.contains("adversarial.pay_twice"),
        "{e}"
    );
    let e = Scenario::parse(&format!(
        "{MINIMAL}{}",
        target.replace("pay_twice", "at_timeout")
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("target.pay") && e.contains("adversarial.at_timeout"),
        "at_timeout pays at the end of the target's payment window: {e}"
    );
}

#[test]
fn a_trace_arrival_needs_its_counts_and_counts_need_a_trace_arrival() {
    let traced = MINIMAL.replace("\"uniform\"", "\"trace\"\ntrace = [40, 60]");
    let s = Scenario::parse(&traced).unwrap();
    assert_eq!(s.buyers.trace, vec![40, 60]);
    assert_eq!(s.late_send_after(), std::time::Duration::from_millis(100));
    let e = Scenario::parse(&MINIMAL.replace("\"uniform\"", "\"trace\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("buyers.trace") && e.contains("0 counts"), "{e}");
    let e = Scenario::parse(&MINIMAL.replace("\"uniform\"", "\"trace\"\ntrace = [0, 0]"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("buyers.trace") && e.contains("only zeros"),
        "{e}"
    );
    let e = Scenario::parse(&MINIMAL.replace("\"uniform\"", "\"uniform\"\ntrace = [1]"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("buyers.trace") && e.contains("arrival = \"uniform\""),
        "{e}"
    );
    let e = Scenario::parse(&MINIMAL.replace("\"uniform\"", "\"trace\"\ntrace = [-1]"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("trace"), "{e}");
    // A report's copy of a scenario without a trace keeps no `trace` key.
    let plain = toml::to_string(&Scenario::parse(MINIMAL).unwrap().buyers).unwrap();
    assert!(!plain.contains("trace"), "{plain}");
}

#[test]
fn a_stock_out_of_range_is_explained_for_its_side() {
    let base = "name = \"t\"\n[buyers]\ncount = 1\narrival = \"uniform\"\nwindow_s = 1\n\
                [browse]\nview_share = 0\n[after_order]\npay = 0\ncancel = 0\nabandon = 1\n";
    let zero = Scenario::parse(&format!("{base}[item]\nid = 1\nstock = 0\n"))
        .unwrap_err()
        .to_string();
    assert!(
        zero.contains("item.stock") && zero.contains("sells nothing"),
        "{zero}"
    );
    let big = Scenario::parse(&format!("{base}[item]\nid = 1\nstock = 2000000\n"))
        .unwrap_err()
        .to_string();
    assert!(
        big.contains("item.stock") && big.contains("buyers.count"),
        "{big}"
    );
    assert!(!big.contains("sells nothing"), "{big}");
}
