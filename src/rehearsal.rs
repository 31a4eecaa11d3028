//! Rehearsal against someone else's shop: which URLs load may go to, the plan printed before
//! (or instead of) sending, and the user's own oracle (a SQL query or an HTTP endpoint).
//!
//! Safety first: a target whose host is not loopback (127.0.0.0/8, ::1, `localhost`) is refused
//! before any request unless the user passes `--allow-remote`, and then a banner names the host
//! and the planned peak rate before the first request goes out.

use crate::services::{redact_url, Service};
use crate::store::Backend;
use crate::traffic::mapping::Mapping;
use crate::traffic::schedule::{self, AfterOrder, BuyerPlan};
use crate::traffic::Scenario;
use reqwest::Url;
use sqlx::any::AnyPoolOptions;
use sqlx::AnyPool;
use std::fmt::Write;
use std::net::IpAddr;
use std::time::Duration;

/// A foreign shop: where it is, how its API looks, and how to audit it.
#[derive(Debug, Clone)]
pub struct Foreign {
    pub base_url: String,
    /// `host[:port]` of the target, for labels and banners.
    pub host: String,
    pub mapping: Mapping,
    pub oracle: OracleSource,
}

impl Foreign {
    /// The run's label in reports: the target's `host:port`.
    pub fn label(&self) -> String {
        self.host.clone()
    }
}

/// Where the server-side truth of a foreign shop comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum OracleSource {
    /// No oracle: oversell cannot be verified, only client-side figures are shown.
    None,
    /// The user's SQL: `sold_query` returns units sold, `stock_query` the stock left.
    Sql {
        url: String,
        sold_query: String,
        stock_query: Option<String>,
    },
    /// An endpoint answering `{"sold": N, "stock": M}` (`stock` optional).
    Http { url: String },
}

/// Totals an oracle reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
pub struct Totals {
    pub sold: i64,
    #[serde(default)]
    pub stock: Option<i64>,
}

/// A connected oracle.
pub enum Oracle {
    None,
    Sql {
        pool: AnyPool,
        backend: Backend,
        url: String,
        sold_query: String,
        stock_query: Option<String>,
    },
    Http {
        client: reqwest::Client,
        url: String,
    },
}

impl OracleSource {
    /// Where the truth comes from, for the report.
    pub fn describe(&self) -> String {
        match self {
            OracleSource::None => "none (no --oracle-sql or --oracle-http given)".into(),
            OracleSource::Sql {
                url,
                sold_query,
                stock_query,
            } => {
                let mut s = format!("SQL on {}: sold = `{sold_query}`", redact_url(url));
                if let Some(q) = stock_query {
                    let _ = write!(s, ", stock = `{q}`");
                }
                s
            }
            OracleSource::Http { url } => format!("HTTP GET {}", redact_url(url)),
        }
    }

    /// The database to sample for DB QPS (only with a SQL oracle).
    pub fn database_url(&self) -> Option<String> {
        match self {
            OracleSource::Sql { url, .. } => Some(url.clone()),
            _ => None,
        }
    }

    /// Short name of the oracle kind, used as the report's backend column.
    pub fn kind(&self) -> &'static str {
        match self {
            OracleSource::None => "no oracle",
            OracleSource::Sql { .. } => "sql oracle",
            OracleSource::Http { .. } => "http oracle",
        }
    }

    /// Connects (SQL) or builds a client (HTTP). An unreachable database is a typed
    /// [`crate::services::Unreachable`].
    pub async fn connect(&self) -> anyhow::Result<Oracle> {
        Ok(match self {
            OracleSource::None => Oracle::None,
            OracleSource::Sql {
                url,
                sold_query,
                stock_query,
            } => {
                sqlx::any::install_default_drivers();
                let backend = Backend::from_url(url)?;
                let service = match backend {
                    Backend::Postgres => Service::Postgres,
                    Backend::Mysql => Service::Mysql,
                };
                let pool = AnyPoolOptions::new()
                    .max_connections(2)
                    .acquire_timeout(Duration::from_secs(5))
                    .connect(url)
                    .await
                    .map_err(|e| service.unreachable_error(url, &e))?;
                Oracle::Sql {
                    pool,
                    backend,
                    url: url.clone(),
                    sold_query: sold_query.clone(),
                    stock_query: stock_query.clone(),
                }
            }
            OracleSource::Http { url } => Oracle::Http {
                client: reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()?,
                url: url.clone(),
            },
        })
    }
}

/// Wraps a user's scalar query so both backends return one BIGINT (or NULL).
fn scalar_sql(backend: Backend, query: &str, default_zero: bool) -> String {
    let q = query.trim().trim_end_matches(';').trim();
    let inner = if default_zero {
        format!("COALESCE(({q}), 0)")
    } else {
        format!("({q})")
    };
    match backend {
        Backend::Postgres => format!("SELECT CAST({inner} AS BIGINT)"),
        Backend::Mysql => format!("SELECT CAST({inner} AS SIGNED)"),
    }
}

impl Oracle {
    /// The current totals (`None` without an oracle). A failing query names the flag, the
    /// query and the database.
    pub async fn read(&self) -> anyhow::Result<Option<Totals>> {
        match self {
            Oracle::None => Ok(None),
            Oracle::Sql {
                pool,
                backend,
                url,
                sold_query,
                stock_query,
            } => {
                let run = |flag: &'static str, q: &str, zero: bool| {
                    let sql = scalar_sql(*backend, q, zero);
                    let q = q.to_string();
                    async move {
                        sqlx::query_scalar::<_, Option<i64>>(sqlx::AssertSqlSafe(sql))
                            .fetch_one(pool)
                            .await
                            .map_err(|e| {
                                anyhow::anyhow!(
                                    "{flag} `{q}` failed on {}: {e} (it must be one SELECT returning one number)",
                                    redact_url(url)
                                )
                            })
                    }
                };
                let sold = run("--sold-query", sold_query, true).await?.unwrap_or(0);
                let stock = match stock_query {
                    Some(q) => run("--stock-query", q, false).await?,
                    None => None,
                };
                Ok(Some(Totals { sold, stock }))
            }
            Oracle::Http { client, url } => {
                let resp = client
                    .get(url)
                    .send()
                    .await
                    .map_err(|e| Service::Oracle.unreachable_error(url, &e))?;
                let status = resp.status();
                let body = resp.text().await.unwrap_or_default();
                anyhow::ensure!(
                    status.is_success(),
                    "the oracle endpoint {} answered {status}: {body}",
                    redact_url(url)
                );
                let t: Totals = serde_json::from_str(&body).map_err(|e| {
                    anyhow::anyhow!(
                        "the oracle endpoint {} must answer JSON {{\"sold\": N, \"stock\": M}}: {e} (got {body:?})",
                        redact_url(url)
                    )
                })?;
                Ok(Some(t))
            }
        }
    }
}

/// A target URL that may not be used.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("--target {url:?} is not a usable URL: {why}")]
    BadUrl { url: String, why: String },
    #[error(
        "refusing to send load to {host}: it is not a loopback address (127.0.0.0/8, ::1, localhost). \
         Load goes to other machines only when you say so: pass --allow-remote if {host} is your own \
         staging system"
    )]
    Remote { host: String },
}

/// Whether a URL host is loopback: 127.0.0.0/8, ::1 (or v4-mapped 127.x), or `localhost`.
pub fn is_loopback_host(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => {
            let d = bare.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    }
}

/// Checks a target URL before anything is sent; returns its `host[:port]`.
pub fn check_target(url: &str, allow_remote: bool) -> Result<String, TargetError> {
    let bad = |why: &str| TargetError::BadUrl {
        url: url.to_string(),
        why: why.to_string(),
    };
    let parsed = Url::parse(url).map_err(|e| bad(&e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    let host = parsed.host_str().ok_or_else(|| bad("it has no host"))?;
    let host_port = match parsed.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    if !allow_remote && !is_loopback_host(&parsed) {
        return Err(TargetError::Remote { host: host_port });
    }
    // A name like `localhost` is only as loopback as what it resolves to here.
    if !allow_remote && host.parse::<IpAddr>().is_err() && !host.starts_with('[') {
        use std::net::ToSocketAddrs;
        let port = parsed.port_or_known_default().unwrap_or(80);
        if let Ok(addrs) = (host, port).to_socket_addrs() {
            if addrs.into_iter().any(|a| !a.ip().is_loopback()) {
                return Err(TargetError::Remote { host: host_port });
            }
        }
    }
    Ok(host_port)
}

/// The plan as numbers, for `--dry-run` and the remote banner.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSummary {
    pub buyers: usize,
    pub bots: usize,
    /// Buyers arriving in each whole second after the sale opens.
    pub arrivals_per_second: Vec<u32>,
    /// Requests due in each second if every answer were instant (views, orders, bot repeats).
    pub requests_per_second: Vec<u32>,
    /// Views + orders + bot repeats.
    pub planned_requests: u64,
    /// Pay/cancel requests, at most one per unit sold.
    pub follow_ups_at_most: u64,
}

impl PlanSummary {
    /// Summarizes a plan of buyers for a scenario's sale.
    pub fn of(s: &Scenario, plan: &[BuyerPlan]) -> Self {
        let mut per: Vec<u32> = Vec::new();
        let mut bump = |at: Duration| {
            let i = at.as_secs() as usize;
            if per.len() <= i {
                per.resize(i + 1, 0);
            }
            per[i] += 1;
        };
        let mut follow = 0u64;
        for b in plan {
            let mut t = b.arrival;
            for think in &b.views {
                bump(t);
                t += *think;
            }
            bump(t);
            for gap in &b.resubmits {
                t += *gap;
                bump(t);
            }
            if !matches!(b.after, AfterOrder::Abandon) {
                follow += 1;
            }
        }
        let planned = per.iter().map(|n| *n as u64).sum();
        let units = (s.item.stock.max(0) as u64).saturating_mul(s.item.purchase_limit as u64);
        PlanSummary {
            buyers: plan.len(),
            bots: plan.iter().filter(|b| b.bot).count(),
            arrivals_per_second: schedule::per_second(plan),
            requests_per_second: per,
            planned_requests: planned,
            follow_ups_at_most: follow.min(units),
        }
    }

    /// Most arrivals in one second.
    pub fn peak_arrivals(&self) -> u32 {
        self.arrivals_per_second.iter().copied().max().unwrap_or(0)
    }

    /// Most requests due in one second (answers taken as instant).
    pub fn peak_requests(&self) -> u32 {
        self.requests_per_second.iter().copied().max().unwrap_or(0)
    }

    /// The `--dry-run` printout.
    pub fn render(&self, target: &str) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "dry run: nothing is sent. Plan against {target}:");
        let _ = writeln!(
            s,
            "  {} buyers ({} bots) over {} s; ~{} requests (views, orders, bot repeats) plus at most {} pay/cancel",
            self.buyers,
            self.bots,
            self.arrivals_per_second.len(),
            self.planned_requests,
            self.follow_ups_at_most
        );
        let _ = writeln!(
            s,
            "  peak: {} arrivals/s, ~{} requests/s",
            self.peak_arrivals(),
            self.peak_requests()
        );
        let _ = writeln!(s, "  second  arrivals  requests");
        for (i, a) in self.arrivals_per_second.iter().enumerate() {
            let r = self.requests_per_second.get(i).copied().unwrap_or(0);
            let _ = writeln!(s, "  {i:>6}  {a:>8}  {r:>8}");
        }
        s
    }

    /// The banner printed before load goes to a remote host.
    pub fn banner(&self, host: &str) -> String {
        format!(
            "WARNING: --allow-remote: sending load to {host} (not loopback): {} buyers, ~{} requests, peak ~{} requests/s ({} arrivals/s)",
            self.buyers,
            self.planned_requests + self.follow_ups_at_most,
            self.peak_requests(),
            self.peak_arrivals()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_targets_pass_without_allow_remote() {
        for ok in [
            "http://127.0.0.1:8080",
            "http://127.9.9.9/",
            "http://[::1]:80",
            "http://localhost:3000/api",
            "http://LOCALHOST",
        ] {
            assert!(check_target(ok, false).is_ok(), "{ok}");
        }
        for remote in [
            "http://10.0.0.1",
            "http://example.com",
            "http://128.0.0.1",
            "http://[::2]",
            "http://localhost.example.com",
        ] {
            let e = check_target(remote, false).unwrap_err();
            assert!(
                matches!(e, TargetError::Remote { .. }) && e.to_string().contains("--allow-remote"),
                "{remote}: {e}"
            );
            assert!(check_target(remote, true).is_ok(), "{remote}");
        }
        assert!(matches!(
            check_target("ftp://127.0.0.1", false),
            Err(TargetError::BadUrl { .. })
        ));
        assert_eq!(
            check_target("http://127.0.0.1:9/x", false).unwrap(),
            "127.0.0.1:9"
        );
    }

    #[test]
    fn user_queries_are_wrapped_into_one_bigint() {
        assert_eq!(
            scalar_sql(Backend::Postgres, "SELECT count(*) FROM o;  ", true),
            "SELECT CAST(COALESCE((SELECT count(*) FROM o), 0) AS BIGINT)"
        );
        assert_eq!(
            scalar_sql(Backend::Mysql, "SELECT stock FROM s", false),
            "SELECT CAST((SELECT stock FROM s) AS SIGNED)"
        );
    }

    #[test]
    fn the_plan_summary_counts_every_planned_request() {
        let s = Scenario::parse(
            r#"
name = "t"
[item]
stock = 5
[buyers]
count = 100
arrival = "uniform"
window_s = 2
[bots]
share = 0.5
resubmits = 2
"#,
        )
        .unwrap();
        let plan = schedule::build(&s);
        let p = PlanSummary::of(&s, &plan);
        let bots = plan.iter().filter(|b| b.bot).count() as u64;
        assert_eq!(p.planned_requests, 100 + 2 * bots);
        assert_eq!(p.follow_ups_at_most, 5, "pay/cancel only for sold units");
        assert_eq!(p.arrivals_per_second.iter().sum::<u32>(), 100);
        assert!(p.peak_requests() >= p.peak_arrivals());
        assert!(p.render("http://127.0.0.1:1").contains("nothing is sent"));
    }
}
