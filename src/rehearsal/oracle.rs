//! The user's own oracle for a foreign shop: SQL queries on its database, or an HTTP endpoint
//! whose JSON answer carries sold and/or stock at the field paths the user names.
//!
//! The oracle is read before the sale (after the set-up request) and after it settles, and the
//! run's sold is the difference, so sales already in the database are not this run's. With only
//! a stock field, sold is the stock before minus the stock after: the shop's own counter, which
//! under-counts exactly when lost updates oversell (the clients' evidence catches that).
//!
//! SQL runs as the run's reader ([`crate::guard::Reader`]: a role that can only read, created for the
//! run when the user's credentials can do more) in a read-only transaction (`START TRANSACTION
//! READ ONLY`, which PostgreSQL and MySQL both accept): the server itself refuses a query that
//! would write, read a file or signal a session. The scalar queries run as written, under
//! `--oracle-timeout`, each on a connection of its own ([`crate::guard::scalar`]).

use super::order_rows::{OrdersQuery, Row};
use crate::oracle::OracleView;
use crate::services::{redact_url, Service};
use crate::store::Backend;
use crate::traffic::mapping::OracleFields;
use std::fmt::Write;
use std::time::Duration;

/// Where the server-side truth of a foreign shop comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum OracleSource {
    /// No oracle: oversell is judged from the clients' evidence alone.
    None,
    /// The user's SQL: `sold_query` returns units sold, `stock_query` the stock left,
    /// `orders` the order rows (one of `sold_query` and `orders` at least).
    Sql {
        url: String,
        sold_query: Option<String>,
        stock_query: Option<String>,
        orders: Option<OrdersQuery>,
        /// How long one scalar query may run (`--oracle-timeout`).
        timeout: Duration,
    },
    /// An endpoint (absolute URL) answering JSON with sold and/or stock at `fields`;
    /// `secret_fields` (`[target] secret_fields`) masks more of its query wherever it is shown.
    Http {
        url: String,
        fields: OracleFields,
        secret_fields: Vec<String>,
    },
}

/// One reading of an oracle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub sold: Option<i64>,
    pub stock: Option<i64>,
}

/// This run's figures: sold during the run, and the stock after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub sold: i64,
    pub stock: Option<i64>,
}

/// A connected oracle.
pub enum Oracle {
    None,
    Sql {
        /// Who the queries run as: a role that can only read, created for the run, or the
        /// user's credentials ([`crate::guard::Reader`]).
        reader: std::sync::Arc<crate::guard::Reader>,
        url: String,
        sold_query: Option<String>,
        stock_query: Option<String>,
        orders: Option<OrdersQuery>,
        timeout: Duration,
    },
    Http {
        client: reqwest::Client,
        url: String,
        fields: OracleFields,
        secret_fields: Vec<String>,
    },
}

const BLIND_TO_ROWS: &str = "individual orders: lost acknowledged orders, duplicate buyers and \
    phantom orders cannot be checked one by one (the clients' acknowledgements are held \
    against its sold instead)";

impl OracleSource {
    /// Where the truth comes from, for the report.
    pub fn describe(&self) -> String {
        match self {
            OracleSource::None => {
                "none (no --oracle-sql, --oracle-http or [target.oracle] given)".into()
            }
            OracleSource::Sql {
                url,
                sold_query,
                stock_query,
                orders,
                ..
            } => {
                let mut s = format!("SQL on {}:", redact_url(url));
                if let Some(o) = orders {
                    let _ = write!(
                        s,
                        " order rows = `{}` (released statuses: {})",
                        o.query,
                        o.released.join(", ")
                    );
                }
                if let Some(q) = sold_query {
                    let _ = write!(
                        s,
                        "{} sold = `{q}`",
                        if orders.is_some() { "," } else { "" }
                    );
                }
                if let Some(q) = stock_query {
                    let _ = write!(s, ", stock = `{q}`");
                }
                s
            }
            OracleSource::Http {
                url,
                fields,
                secret_fields,
            } => {
                let mut s = format!("HTTP GET {}", crate::secret::url_with(url, secret_fields));
                match (&fields.sold, &fields.stock) {
                    (None, None) => s.push_str(": `sold` (and `stock` when present)"),
                    (Some(sold), stock) => {
                        let _ = write!(s, ": sold = `{sold}`");
                        if let Some(st) = stock {
                            let _ = write!(s, ", stock = `{st}`");
                        }
                    }
                    (None, Some(st)) => {
                        let _ = write!(s, ": stock = `{st}` (sold derived: stock before − after)");
                    }
                }
                s
            }
        }
    }

    /// Which oracle judges, what it can and cannot see, and its caveat.
    pub fn view(&self) -> OracleView {
        let (sees, blind_to, warning) = match self {
            OracleSource::None => (
                "nothing on the server side".to_string(),
                "the shop's own records: oversell is judged from the clients' evidence alone"
                    .to_string(),
                None,
            ),
            OracleSource::Sql {
                orders: Some(_), ..
            } => (
                "the shop's order rows its query returns (by id, user, quantity and status), read \
                 in a read-only transaction before and after the sale: the rows present before \
                 are not this run's; sold is the units of this run's rows that hold stock"
                    .to_string(),
                "the rows' times (they carry no timestamps): the units held at each moment \
                 (peak oversell) cannot be replayed"
                    .to_string(),
                None,
            ),
            OracleSource::Sql { .. } => (
                "the totals its queries return (units sold; stock left when a stock query is \
                 given), read in a read-only transaction before and after the sale: this run's \
                 sold is the difference"
                    .to_string(),
                BLIND_TO_ROWS.to_string(),
                None,
            ),
            OracleSource::Http { fields, .. } if fields.derives_sold() => (
                "the shop's own stock counter, before and after the sale: sold is the difference"
                    .to_string(),
                format!("{BLIND_TO_ROWS}; and a counter corrupted by lost updates"),
                Some(
                    "the oracle derives sold from the shop's own stock counter, which \
                     under-counts exactly when lost updates oversell: the clients' evidence is \
                     what catches that"
                        .to_string(),
                ),
            ),
            OracleSource::Http { .. } => (
                "the totals its endpoint reports, before and after the sale: this run's sold \
                 is the difference"
                    .to_string(),
                BLIND_TO_ROWS.to_string(),
                None,
            ),
        };
        OracleView {
            source: self.describe(),
            sees,
            blind_to,
            warning,
        }
    }

    /// The database to sample for DB QPS (only with a SQL oracle).
    pub fn database_url(&self) -> Option<String> {
        match self {
            OracleSource::Sql { url, .. } => Some(url.clone()),
            _ => None,
        }
    }

    /// Connects (SQL) or builds a client (HTTP, no redirects). An unreachable database is a
    /// typed [`crate::services::Unreachable`].
    pub async fn connect(&self) -> anyhow::Result<Oracle> {
        Ok(match self {
            OracleSource::None => Oracle::None,
            OracleSource::Sql {
                url,
                sold_query,
                stock_query,
                orders,
                timeout,
            } => {
                let backend = Backend::from_url(url)?;
                let service = match backend {
                    Backend::Postgres => Service::Postgres,
                    Backend::Mysql => Service::Mysql,
                };
                let reader = crate::guard::Reader::open(url)
                    .await
                    .map_err(|e| service.unreachable_error(url, &e))?;
                Oracle::Sql {
                    reader,
                    url: url.clone(),
                    sold_query: sold_query.clone(),
                    stock_query: stock_query.clone(),
                    orders: orders.clone(),
                    timeout: *timeout,
                }
            }
            OracleSource::Http {
                url,
                fields,
                secret_fields,
            } => Oracle::Http {
                client: crate::guard::http::client(Duration::from_secs(10))?,
                url: url.clone(),
                fields: fields.clone(),
                secret_fields: secret_fields.clone(),
            },
        })
    }
}

/// A number at a dot path of a JSON answer (an integer, or a string holding one).
pub(super) fn number_at(v: &serde_json::Value, path: &str) -> Option<i64> {
    let v = path.split('.').try_fold(v, |v, k| v.get(k))?;
    v.as_i64()
        .or_else(|| v.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
}

/// Reads `fields` from an oracle endpoint's JSON answer; a named field that is missing is an
/// error naming it.
fn tally(fields: &OracleFields, json: &serde_json::Value) -> Result<Tally, String> {
    let need =
        |path: &str| number_at(json, path).ok_or_else(|| format!("it has no number at `{path}`"));
    Ok(match (&fields.sold, &fields.stock) {
        (None, None) => Tally {
            sold: Some(need("sold")?),
            stock: number_at(json, "stock"),
        },
        (sold, stock) => Tally {
            sold: sold.as_deref().map(need).transpose()?,
            stock: stock.as_deref().map(need).transpose()?,
        },
    })
}

impl Oracle {
    /// Checks that the oracle answers before the shop is touched: SQL queries are run (they
    /// must work before the sale too); an endpoint must give any HTTP answer (the item it
    /// describes may only exist once the sale is set up; its answer is checked by the reading
    /// taken right after the set-up, before the first buyer).
    pub async fn check(&self) -> anyhow::Result<()> {
        match self {
            Oracle::None => Ok(()),
            Oracle::Sql { .. } => {
                self.read().await?;
                self.rows().await.map(drop)
            }
            Oracle::Http {
                client,
                url,
                secret_fields,
                ..
            } => {
                client.get(url).send().await.map_err(|e| {
                    let shown = crate::secret::url_with(url, secret_fields);
                    Service::Oracle.unreachable_error(&shown, &e.without_url())
                })?;
                Ok(())
            }
        }
    }

    /// The current reading (`None` without an oracle). A failing query names the flag, the
    /// query and the database; a bad answer names the URL, the field and the body.
    pub async fn read(&self) -> anyhow::Result<Option<Tally>> {
        match self {
            Oracle::None => Ok(None),
            Oracle::Sql {
                reader,
                url,
                sold_query,
                stock_query,
                timeout,
                ..
            } => {
                let run = |flag: &'static str, q: &str, zero: bool| {
                    let q = q.to_string();
                    async move {
                        let read = crate::guard::scalar::read(reader, &q, *timeout).await;
                        read.map(|v| v.or(zero.then_some(0))).map_err(|e| match e {
                            crate::guard::scalar::ScalarError::Refused(why) => {
                                anyhow::anyhow!("{flag} `{q}` was not sent: {why}")
                            }
                            e => anyhow::anyhow!(
                                "{flag} `{q}` failed on {}: {e} (it must be one SELECT returning one number; it runs in a read-only transaction)",
                                redact_url(url)
                            ),
                        })
                    }
                };
                let sold = match sold_query {
                    Some(q) => run("--sold-query", q, true).await?,
                    None => None,
                };
                let stock = match stock_query {
                    Some(q) => run("--stock-query", q, false).await?,
                    None => None,
                };
                Ok(Some(Tally { sold, stock }))
            }
            Oracle::Http {
                client,
                url,
                fields,
                secret_fields,
            } => read_http(client, url, fields, secret_fields)
                .await
                .map(Some),
        }
    }
}

/// One reading of an oracle endpoint. Its answer is read up to
/// [`crate::guard::body::MAX_SOURCE_BYTES`] (a larger one is an error naming the endpoint); an error
/// quotes 200 bytes of it, secret fields masked, and shows the URL masked.
async fn read_http(
    client: &reqwest::Client,
    url: &str,
    fields: &OracleFields,
    secret_fields: &[String],
) -> anyhow::Result<Tally> {
    let shown_url = crate::secret::url_with(url, secret_fields);
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| Service::Oracle.unreachable_error(&shown_url, &e.without_url()))?;
    let status = resp.status();
    let body = crate::guard::body::read_limited(resp, crate::guard::body::MAX_SOURCE_BYTES)
        .await
        .map_err(|e| anyhow::anyhow!("the oracle endpoint {shown_url}: {e}"))?;
    let shown = crate::secret::sample(&body, &Default::default(), secret_fields, 200);
    anyhow::ensure!(
        status.is_success(),
        "the oracle endpoint {shown_url} answered {status}: {shown} (redirects are not followed)",
    );
    let shape = || match (&fields.sold, &fields.stock) {
        (None, None) => "{\"sold\": N, \"stock\": M}".to_string(),
        _ => "the --sold-field/--stock-field paths".to_string(),
    };
    let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
        anyhow::anyhow!(
            "the oracle endpoint {shown_url} must answer JSON with {}: {e} (got {shown:?})",
            shape()
        )
    })?;
    tally(fields, &json)
        .map_err(|why| anyhow::anyhow!("the oracle endpoint {shown_url} answered {shown:?}: {why}"))
}

impl Oracle {
    /// The order rows `--orders-query` returns now (`None` without one).
    pub async fn rows(&self) -> anyhow::Result<Option<Vec<Row>>> {
        match self {
            Oracle::Sql {
                reader,
                orders: Some(q),
                ..
            } => Ok(Some(q.read(reader).await?)),
            _ => Ok(None),
        }
    }

    /// The backlog `query` reads now (`--backlog-query`, on the oracle's database; `None`
    /// without a SQL oracle, or a NULL).
    pub async fn backlog(&self, query: &str) -> anyhow::Result<Option<i64>> {
        match self {
            Oracle::Sql {
                reader,
                url,
                timeout,
                ..
            } => crate::guard::scalar::read(reader, query, *timeout)
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "--backlog-query `{query}` failed on {}: {e} (it must be one SELECT returning one number)",
                        redact_url(url)
                    )
                }),
            _ => Ok(None),
        }
    }

    /// The orders query, when the oracle has one.
    pub fn orders_query(&self) -> Option<&OrdersQuery> {
        match self {
            Oracle::Sql { orders, .. } => orders.as_ref(),
            _ => None,
        }
    }
}

/// This run's totals from the readings before and after the sale: sold is the difference of
/// the sold readings or, with stock alone, stock before minus stock after.
pub fn run_totals(before: Tally, after: Tally) -> Option<Totals> {
    let sold = match (after.sold, before.stock, after.stock) {
        (Some(s), _, _) => s - before.sold.unwrap_or(0),
        (None, Some(b), Some(a)) => b - a,
        _ => return None,
    };
    Some(Totals {
        sold,
        stock: after.stock,
    })
}

/// What the reading before the sale says about this run's figures, for the report.
pub fn baseline_notes(before: Tally, initial_stock: i64) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(s) = before.sold.filter(|s| *s != 0) {
        notes.push(format!(
            "the oracle counted {s} sold before the sale began: this run's sold is counted from that reading"
        ));
    }
    if let Some(s) = before.stock.filter(|s| *s != initial_stock) {
        notes.push(format!(
            "the oracle read stock {s} before the sale, not the scenario's {initial_stock}: check the set-up request"
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_paths_read_what_the_shop_exposes() {
        let json: serde_json::Value =
            serde_json::from_str(r#"{"data": {"sold": "7"}, "current_stock": 43}"#).unwrap();
        let fields = |sold: Option<&str>, stock: Option<&str>| OracleFields {
            sold: sold.map(Into::into),
            stock: stock.map(Into::into),
        };
        assert_eq!(
            tally(&fields(Some("data.sold"), Some("current_stock")), &json),
            Ok(Tally {
                sold: Some(7),
                stock: Some(43)
            })
        );
        assert_eq!(
            tally(&fields(None, Some("current_stock")), &json),
            Ok(Tally {
                sold: None,
                stock: Some(43)
            })
        );
        assert!(tally(&fields(None, None), &json)
            .unwrap_err()
            .contains("`sold`"));
    }

    #[test]
    fn the_run_counts_from_the_reading_before_the_sale() {
        let t = |sold, stock| Tally { sold, stock };
        assert_eq!(
            run_totals(t(Some(7), Some(50)), t(Some(57), Some(0))),
            Some(Totals {
                sold: 50,
                stock: Some(0)
            })
        );
        assert_eq!(
            run_totals(t(None, Some(50)), t(None, Some(26))),
            Some(Totals {
                sold: 24,
                stock: Some(26)
            }),
            "derived from stock"
        );
        assert_eq!(baseline_notes(t(Some(7), Some(50)), 50).len(), 1);
    }
}
