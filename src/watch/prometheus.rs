//! A `[watch]` gauge read from a Prometheus text endpoint: every sample of the metric whose
//! labels hold the given matchers (each label equal to its value; other labels free), summed.
//! Summing is deliberate: a metric split by a label the user did not name (a queue on several
//! nodes, a pool per host) is one backlog. A metric with no matching sample is a failed
//! sample naming the label sets the page has, never a 0.
//!
//! The text format: `name{label="value",...} value [timestamp]`, `#` lines skipped, label
//! values with `\\`, `\"` and `\n` escapes, values `NaN`, `+Inf`, `-Inf` (a NaN sample is
//! left out).

use std::collections::BTreeMap;

/// One sample of a page.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Whether `s` is a metric name: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub fn is_metric_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}

/// Whether `s` is a label name: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn is_label_name(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The samples of a text page named `metric` (lines that do not parse are left out).
pub fn samples_of(text: &str, metric: &str) -> Vec<Sample> {
    text.lines()
        .map(str::trim)
        .filter(|l| l.starts_with(metric) && !l.starts_with('#'))
        .filter_map(parse_line)
        .filter(|s| s.name == metric)
        .collect()
}

/// The sum of the samples of `metric` whose labels hold every matcher; `Err` says why none
/// did.
pub fn read(text: &str, metric: &str, matchers: &BTreeMap<String, String>) -> Result<f64, String> {
    let all = samples_of(text, metric);
    let matching: Vec<&Sample> = all
        .iter()
        .filter(|s| matchers.iter().all(|(k, v)| s.labels.get(k) == Some(v)))
        .filter(|s| !s.value.is_nan())
        .collect();
    if matching.is_empty() {
        let seen: Vec<String> = all.iter().take(3).map(|s| labels_text(&s.labels)).collect();
        return Err(if all.is_empty() {
            format!("the page has no sample of {metric}")
        } else {
            format!(
                "no sample of {metric} has the labels {}; the page has {} (e.g. {})",
                labels_text(matchers),
                all.len(),
                seen.join(", ")
            )
        });
    }
    Ok(matching.iter().map(|s| s.value).sum())
}

/// `{queue="orders"}`.
pub fn labels_text(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", pairs.join(","))
}

/// One sample line.
fn parse_line(line: &str) -> Option<Sample> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if rest.starts_with('{') {
        let (parsed, after) = parse_labels(&rest[1..])?;
        labels = parsed;
        rest = after;
    }
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

/// Labels up to the closing `}`; the labels and the text after it.
fn parse_labels(mut s: &str) -> Option<(BTreeMap<String, String>, &str)> {
    let mut labels = BTreeMap::new();
    loop {
        s = s.trim_start_matches([' ', ',']);
        if let Some(after) = s.strip_prefix('}') {
            return Some((labels, after));
        }
        let eq = s.find('=')?;
        let key = s[..eq].trim().to_string();
        s = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '"' => break i,
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                c => value.push(c),
            }
        };
        labels.insert(key, value);
        s = &s[end + 1..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"# HELP rabbitmq_queue_messages_ready Messages ready
# TYPE rabbitmq_queue_messages_ready gauge
rabbitmq_queue_messages_ready{vhost="/",queue="orders"} 42
rabbitmq_queue_messages_ready{vhost="/",queue="orders-dlq"} 3
rabbitmq_queue_messages_ready{vhost="b",queue="orders"} 8 1700000000000
rabbitmq_queue_messages_ready_total 100
odd{q="a \"quoted\", comma\\",n="x"} 5
pool_pending 2.5
broken{q="x" 1
nan_one NaN
"#;

    fn m(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn matching_series_are_summed_and_others_left_out() {
        let metric = "rabbitmq_queue_messages_ready";
        assert_eq!(read(PAGE, metric, &m(&[("queue", "orders")])), Ok(50.0));
        assert_eq!(
            read(PAGE, metric, &m(&[("queue", "orders"), ("vhost", "/")])),
            Ok(42.0)
        );
        assert_eq!(read(PAGE, metric, &m(&[])), Ok(53.0), "every series");
        assert_eq!(read(PAGE, "pool_pending", &m(&[])), Ok(2.5));
        assert_eq!(
            read(PAGE, "odd", &m(&[("q", "a \"quoted\", comma\\")])),
            Ok(5.0),
            "escapes and commas in a label value"
        );
    }

    #[test]
    fn a_metric_with_no_matching_sample_says_what_the_page_has() {
        let e = read(
            PAGE,
            "rabbitmq_queue_messages_ready",
            &m(&[("queue", "nope")]),
        )
        .unwrap_err();
        assert!(
            e.contains("the page has 3") && e.contains("queue=\"orders\""),
            "{e}"
        );
        assert!(read(PAGE, "absent", &m(&[]))
            .unwrap_err()
            .contains("no sample"));
        assert!(
            read(PAGE, "broken", &m(&[])).is_err(),
            "an unclosed label set"
        );
        assert!(read(PAGE, "nan_one", &m(&[])).is_err(), "NaN is no reading");
    }

    #[test]
    fn names_follow_the_exposition_format() {
        assert!(is_metric_name("rabbitmq_queue_messages_ready"));
        assert!(is_metric_name("ns:metric_1"));
        assert!(!is_metric_name("1abc") && !is_metric_name("") && !is_metric_name("a-b"));
        assert!(is_label_name("queue") && !is_label_name("q:x"));
    }
}
