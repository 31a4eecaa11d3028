//! The one Prometheus text scraper: a `/metrics` page read as `name{labels}` → value (the
//! probes' per-second shop samples, the `--shops` run's per-shop shares, the tests).

use std::collections::BTreeMap;

/// A scraped page: every sample's `name{labels}` → value.
pub type Page = BTreeMap<String, f64>;

/// Reads a Prometheus text page: comments and blank lines skipped, a line that does not end
/// in a number left out.
pub fn parse(text: &str) -> Page {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (k, v) = l.rsplit_once(' ')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// GETs `url` and reads its page; `None` when it did not answer 2xx.
pub async fn scrape(http: &reqwest::Client, url: &str) -> Option<Page> {
    let resp = http.get(url).send().await.ok()?;
    if !resp.status().is_success() {
        return None;
    }
    Some(parse(&resp.text().await.ok()?))
}

/// The metric's name of a sample's key: `oversell_orders_total` of
/// `oversell_orders_total{outcome="reserved"}`.
pub fn name_of(key: &str) -> &str {
    key.split('{').next().unwrap_or(key)
}

/// The value of a sample key's label `name`: `reserved` of `outcome` in
/// `oversell_orders_total{outcome="reserved"}` (label values with no `"` or `,` in them).
pub fn label<'a>(key: &'a str, name: &str) -> Option<&'a str> {
    let labels = key.split_once('{')?.1.strip_suffix('}')?;
    labels.split(',').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k.trim() == name).then(|| v.trim().trim_matches('"'))
    })
}

/// Whether the page has a sample of the metric `name`.
pub fn has(page: &Page, name: &str) -> bool {
    page.keys().any(|k| name_of(k) == name)
}

/// The sum of every sample of the metric `name` whose key contains `label` (every sample,
/// with `None`).
pub fn sum(page: &Page, name: &str, label: Option<&str>) -> f64 {
    page.iter()
        .filter(|(k, _)| name_of(k) == name && label.is_none_or(|l| k.contains(l)))
        .map(|(_, v)| v)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_is_read_into_samples_and_summed_by_name_and_label() {
        let page = parse(
            "# HELP oversell_orders_total orders\n\
             # TYPE oversell_orders_total counter\n\
             oversell_orders_total{outcome=\"reserved\"} 3\n\
             oversell_orders_total{outcome=\"sold_out\"} 4.5\n\
             oversell_orders_total_extra 100\n\
             \n\
             broken line\n\
             oversell_stream_lag 2\n",
        );
        assert_eq!(page.len(), 4, "{page:?}");
        assert_eq!(sum(&page, "oversell_orders_total", None), 7.5);
        assert_eq!(sum(&page, "oversell_orders_total", Some("sold_out")), 4.5);
        assert!(has(&page, "oversell_stream_lag"));
        assert!(!has(&page, "oversell_stream"));
        assert_eq!(name_of("a{b=\"c\"}"), "a");
        let key = r#"x{route="/api/orders/{id}/pay",method="POST"}"#;
        assert_eq!(label(key, "route"), Some("/api/orders/{id}/pay"));
        assert_eq!(label(key, "method"), Some("POST"));
        assert_eq!(label(key, "status"), None);
        assert_eq!(label("x", "route"), None);
    }
}
