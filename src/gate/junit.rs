//! JUnit XML for CI systems: one `<testsuite>` per run (strategy or target), one `<testcase>`
//! per threshold. A breached threshold is a `<failure>` carrying limit and measured value; a
//! threshold that could not be measured is a failure too, or `<skipped>` when allowed.

use super::{Status, Verdict};
use crate::report::markup::escape;
use std::fmt::Write;

/// The whole JUnit document.
pub fn render(v: &Verdict) -> String {
    let mut runs: Vec<&str> = Vec::new();
    for c in &v.checks {
        if !runs.contains(&c.run.as_str()) {
            runs.push(&c.run);
        }
    }
    let failed = |s: &Status| {
        matches!(s, Status::Breached)
            || (matches!(s, Status::NotVerified(_)) && !v.allow_unverified)
    };
    let total_failures = v.checks.iter().filter(|c| failed(&c.status)).count();
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"oversell gate\" tests=\"{}\" failures=\"{total_failures}\" errors=\"0\">",
        v.checks.len()
    );
    for run in runs {
        let checks: Vec<_> = v.checks.iter().filter(|c| c.run == run).collect();
        let failures = checks.iter().filter(|c| failed(&c.status)).count();
        let skipped = checks
            .iter()
            .filter(|c| matches!(c.status, Status::NotVerified(_)) && v.allow_unverified)
            .count();
        let _ = writeln!(
            x,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\">",
            escape(&format!("oversell gate {}: {run}", v.scenario)),
            checks.len()
        );
        for c in checks {
            let _ = write!(
                x,
                "    <testcase classname=\"{}\" name=\"{}\"",
                escape(&format!("oversell.gate.{}.{run}", v.scenario)),
                escape(&c.title())
            );
            let limit = c.limit.metric.format(c.limit.value);
            match &c.status {
                Status::Passed => {
                    let _ = writeln!(x, "/>");
                }
                Status::Breached => {
                    let measured = c.measured_text();
                    let msg = format!(
                        "{} breached: measured {measured}, limit {limit}",
                        c.limit.metric.name()
                    );
                    let _ = writeln!(
                        x,
                        ">\n      <failure type=\"threshold_breached\" message=\"{}\">{}</failure>\n    </testcase>",
                        escape(&msg),
                        escape(&format!(
                            "{msg}\nthreshold: {}\nlimit: {limit} (from {})\nmeasured: {measured} (source: {})\nrun: {run}",
                            c.limit.metric.name(),
                            c.limit.origin.as_str(),
                            c.source
                        ))
                    );
                }
                Status::NotVerified(why) => {
                    let msg = format!(
                        "{} not verified (limit {limit}): {why}",
                        c.limit.metric.name()
                    );
                    if v.allow_unverified {
                        let _ = writeln!(
                            x,
                            ">\n      <skipped message=\"{}\"/>\n    </testcase>",
                            escape(&msg)
                        );
                    } else {
                        let _ = writeln!(
                            x,
                            ">\n      <failure type=\"not_verified\" message=\"{}\">{}</failure>\n    </testcase>",
                            escape(&msg),
                            escape(&format!("{msg}\npass --allow-unverified to accept unmeasured thresholds"))
                        );
                    }
                }
            }
        }
        let _ = writeln!(x, "  </testsuite>");
    }
    x.push_str("</testsuites>\n");
    x
}

/// A document for a gate that could not run (unreachable target, bad query): one test case
/// in error, so CI shows why instead of a missing file.
pub fn render_error(scenario: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <testsuites name=\"oversell gate\" tests=\"1\" failures=\"0\" errors=\"1\">\n  \
         <testsuite name=\"{suite}\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\">\n    \
         <testcase classname=\"{class}\" name=\"run\">\n      \
         <error type=\"gate_error\" message=\"{msg}\">{msg}</error>\n    </testcase>\n  </testsuite>\n</testsuites>\n",
        suite = escape(&format!("oversell gate {scenario}")),
        class = escape(&format!("oversell.gate.{scenario}")),
        msg = escape(message),
    )
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
            },
            measured,
            source: "oracle",
            status,
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
        assert!(x.contains(r#"tests="3" failures="2""#), "{x}");
        assert!(
            x.contains(r#"<failure type="threshold_breached" message="oversell breached: measured 3, limit 0">"#),
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
        assert!(x.contains(r#"tests="3" failures="1""#), "{x}");
        assert!(
            x.contains("<skipped message=\"lost_acks not verified"),
            "{x}"
        );
    }
}
