//! A foreign shop's backlog signal, ready to read: `--backlog-query` (one SELECT on the
//! oracle's database), `[target.settle] backlog` as an endpoint on the target, as a `[watch]`
//! gauge of the scenario (`"watch.NAME"`), or the owner's word that there is none (`"none"`).
//! The run settles on it ([`super::settle`]), and the stock sampler reads it around every stock
//! reading ([`super::stock_sampler`]): a sample is held against what the clients held only when
//! nothing was waiting to be written, before its send and after its answer.

use super::Oracle;
use crate::traffic::mapping::Backlog;
use crate::traffic::target::{Prepared, Target};
use std::time::Duration;

/// Where the backlog is read.
pub enum BacklogSource {
    Sql(String),
    Http {
        target: Box<Target>,
        request: Prepared,
        field: String,
        client: reqwest::Client,
    },
    Gauge {
        name: String,
        reader: tokio::sync::Mutex<crate::watch::Reader>,
    },
    /// Declared: the shop writes what its oracle reads before it acknowledges.
    None,
}

impl BacklogSource {
    /// The signal a run reads: `query` (`--backlog-query`) over the mapping's; for a gauge,
    /// `gauge` makes its reader from its name (the run's `[watch]`); `None` when the shop gives
    /// none.
    pub fn of(
        query: Option<&str>,
        target: &Target,
        gauge: impl FnOnce(&str) -> anyhow::Result<crate::watch::Reader>,
    ) -> anyhow::Result<Option<BacklogSource>> {
        if let Some(q) = query {
            return Ok(Some(BacklogSource::Sql(q.to_string())));
        }
        let declared = target
            .mapping
            .settle
            .as_ref()
            .and_then(|s| s.backlog.as_ref());
        Ok(match declared {
            None => None,
            Some(Backlog::None) => Some(BacklogSource::None),
            Some(Backlog::Endpoint(e)) => match target.backlog_request() {
                Some(request) => Some(BacklogSource::Http {
                    target: Box::new(target.clone()),
                    request,
                    field: e.field.clone(),
                    client: crate::guard::http::client(Duration::from_secs(10))?,
                }),
                None => None,
            },
            Some(Backlog::Gauge(name)) => Some(BacklogSource::Gauge {
                name: name.clone(),
                reader: tokio::sync::Mutex::new(gauge(name)?),
            }),
        })
    }

    /// The signal, for the report.
    pub fn describe(&self) -> String {
        match self {
            BacklogSource::Sql(q) => format!("`{q}` (--backlog-query)"),
            BacklogSource::Http {
                target,
                request,
                field,
                ..
            } => format!(
                "{} at `{field}` ([target.settle] backlog)",
                target.line(request)
            ),
            BacklogSource::Gauge { name, .. } => {
                format!("the [watch] gauge `{name}` ([target.settle] backlog)")
            }
            BacklogSource::None => {
                "none: the shop writes what its oracle reads before it acknowledges ([target.settle] backlog = \"none\")".into()
            }
        }
    }

    /// The backlog now; `None` when it could not be read (an error, not a number). A shop
    /// declared to have none reads 0.
    pub async fn read(&self, oracle: &Oracle) -> Option<i64> {
        match self {
            BacklogSource::Sql(q) => oracle.backlog(q).await.ok().flatten(),
            BacklogSource::Http {
                target,
                request,
                field,
                client,
            } => {
                let url = target.url(request).ok()?;
                let resp = request
                    .apply(client.request(request.reqwest_method(), url))
                    .send()
                    .await
                    .ok()?;
                let limit = crate::guard::body::MAX_SOURCE_BYTES;
                let body = crate::guard::body::read_limited(resp, limit).await.ok()?;
                let json: serde_json::Value = serde_json::from_str(&body).ok()?;
                super::oracle::number_at(&json, field)
            }
            BacklogSource::Gauge { reader, .. } => {
                let v = reader.lock().await.read().await.ok()?;
                // Anything above 0 waits: a fraction of an order is still one.
                v.is_finite().then(|| v.max(0.0).ceil() as i64)
            }
            BacklogSource::None => Some(0),
        }
    }
}
