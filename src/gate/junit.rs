//! JUnit XML for CI systems, written with `quick-junit`: one `<testsuite>` per run (strategy
//! or target), one `<testcase>` per threshold. A breached threshold is a `<failure>` carrying
//! limit and measured value; a threshold that could not be measured is a failure too, or
//! `<skipped>` when allowed.

use super::{Status, Verdict};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

/// The whole JUnit document.
pub fn render(v: &Verdict) -> String {
    let mut runs: Vec<&str> = Vec::new();
    for c in &v.checks {
        if !runs.contains(&c.run.as_str()) {
            runs.push(&c.run);
        }
    }
    let mut report = Report::new("oversell gate");
    for run in runs {
        let mut suite = TestSuite::new(format!("oversell gate {}: {run}", v.scenario));
        for c in v.checks.iter().filter(|c| c.run == run) {
            let limit = c.limit.metric.format(c.limit.value);
            let name = c.limit.name();
            let status = match &c.status {
                Status::Passed => TestCaseStatus::success(),
                Status::Breached => {
                    let measured = c.measured_text();
                    let mut msg = format!("{name} breached: measured {measured}, limit {limit}");
                    if let Some(why) = c.breach_reason() {
                        msg = format!("{msg}; {why}");
                    }
                    let mut text = format!(
                        "{msg}\nthreshold: {name}\nlimit: {limit} (from {})\nmeasured: {measured} (source: {})\nrun: {run}",
                        c.limit.origin.as_str(),
                        c.source
                    );
                    if let Some(p) = &c.proof {
                        text.push('\n');
                        text.push_str(&crate::oracle::proof::line(p));
                    }
                    non_success(
                        NonSuccessKind::Failure,
                        "threshold_breached",
                        msg,
                        Some(text),
                    )
                }
                Status::NotRequired(why) => {
                    let mut s = TestCaseStatus::skipped();
                    s.set_message(format!(
                        "{name} {} (limit {limit}, from the {} limit): {why}",
                        super::NOT_REQUIRED,
                        c.limit.origin.as_str()
                    ));
                    s
                }
                Status::NotVerified(why) => {
                    let msg = format!("{name} not verified (limit {limit}): {why}");
                    if v.allow_unverified {
                        let mut s = TestCaseStatus::skipped();
                        s.set_message(msg);
                        s
                    } else {
                        let text = format!(
                            "{msg}\npass --allow-unverified to accept unmeasured thresholds"
                        );
                        non_success(NonSuccessKind::Failure, "not_verified", msg, Some(text))
                    }
                }
            };
            let mut case = TestCase::new(c.title(), status);
            case.set_classname(format!("oversell.gate.{}.{run}", v.scenario));
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    to_xml(&report)
}

/// A document for a gate that could not run (unreachable target, bad query): one test case
/// in error, so CI shows why instead of a missing file.
pub fn render_error(scenario: &str, message: &str) -> String {
    let mut case = TestCase::new(
        "run",
        non_success(NonSuccessKind::Error, "gate_error", message, Some(message)),
    );
    case.set_classname(format!("oversell.gate.{scenario}"));
    let mut suite = TestSuite::new(format!("oversell gate {scenario}"));
    suite.add_test_case(case);
    let mut report = Report::new("oversell gate");
    report.add_test_suite(suite);
    to_xml(&report)
}

fn non_success(
    kind: NonSuccessKind,
    ty: &str,
    message: impl Into<String>,
    text: Option<impl Into<String>>,
) -> TestCaseStatus {
    let mut s = TestCaseStatus::non_success(kind);
    s.set_type(ty).set_message(message.into());
    if let Some(t) = text {
        s.set_description(t.into());
    }
    s
}

fn to_xml(report: &Report) -> String {
    // Serializing owned strings into memory cannot fail; keep a readable document if it did.
    report.to_string().unwrap_or_else(|e| {
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- JUnit serialization failed: {e} -->\n")
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Check, Limit, Metric, Origin};
    use super::*;

    fn check(run: &str, metric: Metric, measured: Option<f64>, status: Status) -> Check {
        Check {
            run: run.into(),
            limit: Limit {
                metric,
                value: 0.0,
                origin: Origin::Default,
                gauge: None,
            },
            measured,
            source: "oracle",
            status,
            proof: None,
        }
    }

    fn verdict(allow: bool) -> Verdict {
        Verdict {
            scenario: "ci".into(),
            checks: vec![
                check("redis-lua", Metric::Oversell, Some(0.0), Status::Passed),
                check("naive <&>", Metric::Oversell, Some(3.0), Status::Breached),
                check(
                    "naive <&>",
                    Metric::LostAcks,
                    None,
                    Status::NotVerified("no \"oracle\"\u{1}".into()),
                ),
            ],
            allow_unverified: allow,
        }
    }

    #[test]
    fn failures_carry_the_numbers_and_text_is_escaped() {
        let x = render(&verdict(false));
        let doc = roxmltree::Document::parse(&x).expect("well-formed XML");
        let root = doc.root_element();
        assert_eq!(
            (root.attribute("tests"), root.attribute("failures")),
            (Some("3"), Some("2")),
            "{x}"
        );
        assert!(
            doc.descendants().any(|n| n.has_tag_name("failure")
                && n.attribute("type") == Some("threshold_breached")
                && n.attribute("message") == Some("oversell breached: measured 3, limit 0")),
            "{x}"
        );
        assert!(x.contains("naive &lt;&amp;&gt;"), "{x}");
        assert!(x.contains("no &quot;oracle&quot;"), "{x}");
        assert!(!x.contains('\u{1}'), "control characters are dropped");
        assert_eq!(x.matches("<testcase ").count(), 3);
        assert_eq!(x.matches("<testsuite ").count(), 2);
        assert_eq!(x.matches("</testsuite>").count(), 2);
    }

    #[test]
    fn a_gate_that_could_not_run_is_one_error() {
        let x = render_error("ci", "cannot reach <shop>");
        assert!(
            x.contains(r#"errors="1""#) && x.contains("cannot reach &lt;shop&gt;"),
            "{x}"
        );
    }

    #[test]
    fn allowed_unverified_thresholds_are_skipped_not_failed() {
        let x = render(&verdict(true));
        let doc = roxmltree::Document::parse(&x).expect("well-formed XML");
        let root = doc.root_element();
        assert_eq!(
            (root.attribute("tests"), root.attribute("failures")),
            (Some("3"), Some("1")),
            "{x}"
        );
        assert!(
            x.contains("<skipped message=\"lost_acks not verified"),
            "{x}"
        );
    }

    #[test]
    fn a_check_not_required_is_listed_as_skipped_with_its_reason() {
        let mut v = verdict(false);
        v.checks.push(check(
            "redis-lua",
            Metric::PhantomOrders,
            None,
            Status::NotRequired("the oracle reports totals only".into()),
        ));
        let x = render(&v);
        let doc = roxmltree::Document::parse(&x).expect("well-formed XML");
        let case = doc
            .descendants()
            .find(|n| n.attribute("name") == Some("phantom_orders <= 0"))
            .unwrap_or_else(|| panic!("listed: {x}"));
        let skipped = case
            .children()
            .find(|n| n.has_tag_name("skipped"))
            .unwrap_or_else(|| panic!("skipped, not failed: {x}"));
        assert_eq!(
            skipped.attribute("message"),
            Some(
                "phantom_orders not verified (not required: the oracle cannot measure it) \
                 (limit 0, from the default limit): the oracle reports totals only"
            ),
            "{x}"
        );
        assert_eq!(doc.root_element().attribute("failures"), Some("2"), "{x}");
    }
}
