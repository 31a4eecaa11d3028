//! The raw results of one shard, `<out>/shard.json` (`oversell.shard/v1`), and the order
//! latency of each second as an HdrHistogram interval log (`latency-order.hlog`) for the usual
//! HdrHistogram tools.
//!
//! Every histogram is in HdrHistogram's own V2 deflate encoding (base64), so `merge` adds
//! them without loss; the clients' records (acknowledged orders, every order attempt's
//! idempotency key and answer class, what clients were told about paid and cancelled orders)
//! are kept whole, spelled out in the file and compact in memory ([`super::records`]).

use super::records::{self, FileAcks, FileAttempts};
use super::ShardSpec;
use crate::inventory::Strategy;
use crate::report::summary::{decode_histogram, encode_histogram};
use crate::store::Backend;
use crate::traffic::attack::{GeneratorStats, GooseCrossCheck};
use crate::traffic::recorder::{
    interval_histogram, Answer, BuyerResult, FollowUp, Intervals, Kind, Measurements, Told,
    UnclassifiedAnswer,
};
use crate::traffic::Scenario;
use anyhow::Context;
use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// The schema id of a shard file.
pub const SCHEMA: &str = "oversell.shard/v1";
/// The shard file's name in its folder.
pub const FILE: &str = "shard.json";
/// The interval log's name in its folder.
pub const HLOG: &str = "latency-order.hlog";

/// One shard's raw results.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardFile {
    pub schema: String,
    pub shard: ShardSpec,
    /// [`super::scenario_hash`] of the scenario: every shard of a sale has the same.
    pub scenario_hash: String,
    pub seed: u64,
    pub scenario: Scenario,
    /// Where the scenario came from (a file path or `bundled:NAME`).
    pub scenario_file: String,
    /// The shared opening instant (RFC 3339, UTC).
    pub open_at: String,
    /// The reference shop the shards fired at (`run`/`gate --shard`); absent for `attack`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shop: Option<ShardShop>,
    /// The user's own shop the shards fired at (`attack --shard`); absent for `run`/`gate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<ShardTarget>,
    /// Buyers in the whole schedule.
    pub buyers_total: usize,
    /// Buyers this shard sent.
    pub buyers: usize,
    pub generator: GeneratorStats,
    pub goose: Vec<GooseCrossCheck>,
    /// Requests by kind and answer (the histograms' counts, for people reading the file).
    pub counts: BTreeMap<Kind, BTreeMap<Answer, u64>>,
    pub clients: Clients,
}

/// The reference shop the shards fired at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardShop {
    pub url: String,
    pub strategy: Strategy,
    /// `postgres` or `mysql`.
    pub backend: Backend,
}

/// The user's shop an `attack --shard` fired at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardTarget {
    /// The target's URL (credentials redacted).
    pub url: String,
    /// Its host, as the report names it.
    pub host: String,
}

/// One histogram of one request kind and answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Encoded {
    pub kind: Kind,
    /// `None` for histograms of every answer (send lag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// V2 deflate, base64.
    pub histogram: String,
}

/// How many answers of one kind came in one second.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Count {
    pub kind: Kind,
    pub answer: Answer,
    pub n: u64,
}

/// One buyer's end result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuyerEnd {
    pub buyer: usize,
    #[serde(flatten)]
    pub result: BuyerResult,
}

/// The recorder's content ([`Measurements`]) in a file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Clients {
    pub histograms: Vec<Encoded>,
    pub send_lag: Vec<Encoded>,
    /// Sender wait (every sender held by an unanswered request) by kind.
    #[serde(default)]
    pub sender_wait: Vec<Encoded>,
    /// Service time (actual send to the full answer) by kind.
    #[serde(default)]
    pub service: Vec<Encoded>,
    /// Latency less send lag by kind (absent in older shard files).
    #[serde(default)]
    pub shop_latency: Vec<Encoded>,
    /// Order latency of the answers of each interval after the opening (empty ones: "").
    pub order_intervals: Vec<String>,
    /// Seconds per interval (1 unless the shard ran past five minutes; absent in older files).
    #[serde(default = "one_second")]
    pub order_interval_s: u64,
    /// Answers per second after the opening.
    pub timeline: Vec<Vec<Count>>,
    pub acks: FileAcks,
    pub attempts: FileAttempts,
    pub told: BTreeMap<String, Told>,
    pub cancels_ok: u64,
    /// Retries by kind and answer (`[client] retry`, resends with the same key).
    #[serde(default)]
    pub retries: Vec<Encoded>,
    /// Adversarial buyers' orders and what they sent after them.
    #[serde(default)]
    pub follow_ups: Vec<FollowUp>,
    pub unclassified: Vec<UnclassifiedAnswer>,
    pub first_sold_out_ms: Option<u64>,
    pub buyers: Vec<BuyerEnd>,
    /// First order answer after the opening (ms) and the span to the last one (µs).
    pub first_order_answer_ms: Option<u64>,
    pub order_answer_span_us: Option<u64>,
}

impl Clients {
    /// The file form of a recorder's content, its clients' records moved into it (compact:
    /// they are spelled out one at a time as the file is written).
    pub fn taken_from(m: &mut Measurements) -> Clients {
        let first_order_answer_ms = m.attempts().map(|a| a.at_ms).min();
        let (attempts, acks) = records::split(std::mem::take(&mut m.records));
        let by_kind = |hs: &BTreeMap<Kind, Histogram<u64>>| -> Vec<Encoded> {
            hs.iter()
                .map(|(kind, h)| Encoded {
                    kind: *kind,
                    answer: None,
                    histogram: encode_histogram(h),
                })
                .collect()
        };
        Clients {
            histograms: m
                .histograms
                .iter()
                .map(|((kind, answer), h)| Encoded {
                    kind: *kind,
                    answer: Some(*answer),
                    histogram: encode_histogram(h),
                })
                .collect(),
            send_lag: by_kind(&m.send_lag),
            sender_wait: by_kind(&m.sender_wait),
            service: by_kind(&m.service),
            shop_latency: by_kind(&m.shop_latency),
            order_interval_s: m.order_intervals.width_s(),
            order_intervals: m
                .order_intervals
                .histograms()
                .iter()
                .map(|h| {
                    if h.is_empty() {
                        String::new()
                    } else {
                        encode_histogram(h)
                    }
                })
                .collect(),
            timeline: m
                .timeline
                .iter()
                .map(|sec| {
                    sec.iter()
                        .map(|((kind, answer), n)| Count {
                            kind: *kind,
                            answer: *answer,
                            n: *n,
                        })
                        .collect()
                })
                .collect(),
            first_order_answer_ms,
            acks,
            attempts,
            told: m.told.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            cancels_ok: m.cancels_ok,
            retries: m
                .retries
                .iter()
                .map(|((kind, answer), h)| Encoded {
                    kind: *kind,
                    answer: Some(*answer),
                    histogram: encode_histogram(h),
                })
                .collect(),
            follow_ups: m.follow_ups.clone(),
            unclassified: m.unclassified.clone(),
            first_sold_out_ms: m.first_sold_out_ms,
            buyers: m
                .buyers
                .iter()
                .map(|(buyer, result)| BuyerEnd { buyer, result })
                .collect(),
            order_answer_span_us: m.order_answer_span.map(|d| d.as_micros() as u64),
        }
    }

    /// Back to the recorder's form (`what` names the file in errors), the clients' records
    /// moved out of the file's form.
    pub fn take_measurements(&mut self, what: &str) -> anyhow::Result<Measurements> {
        let decode = |h: &str, field: &str| {
            decode_histogram(h).with_context(|| format!("{what}: clients.{field}"))
        };
        let mut m = Measurements::default();
        for e in &self.histograms {
            let answer = e
                .answer
                .with_context(|| format!("{what}: clients.histograms: an entry has no answer"))?;
            m.histograms
                .insert((e.kind, answer), decode(&e.histogram, "histograms")?);
        }
        for e in &self.send_lag {
            m.send_lag.insert(e.kind, decode(&e.histogram, "send_lag")?);
        }
        for e in &self.sender_wait {
            m.sender_wait
                .insert(e.kind, decode(&e.histogram, "sender_wait")?);
        }
        for e in &self.retries {
            let answer = e
                .answer
                .with_context(|| format!("{what}: clients.retries: an entry has no answer"))?;
            m.retries
                .insert((e.kind, answer), decode(&e.histogram, "retries")?);
        }
        m.follow_ups = self.follow_ups.clone();
        for e in &self.service {
            m.service.insert(e.kind, decode(&e.histogram, "service")?);
        }
        for e in &self.shop_latency {
            m.shop_latency
                .insert(e.kind, decode(&e.histogram, "shop_latency")?);
        }
        let mut intervals = Vec::with_capacity(self.order_intervals.len());
        for h in &self.order_intervals {
            intervals.push(if h.is_empty() {
                interval_histogram()
            } else {
                decode(h, "order_intervals")?
            });
        }
        m.order_intervals = Intervals::from_parts(self.order_interval_s, intervals);
        m.timeline = self
            .timeline
            .iter()
            .map(|sec| sec.iter().map(|c| ((c.kind, c.answer), c.n)).collect())
            .collect();
        m.records = records::join(
            std::mem::take(&mut self.attempts),
            std::mem::take(&mut self.acks),
        );
        m.told = self.told.iter().map(|(k, v)| (k.clone(), *v)).collect();
        m.cancels_ok = self.cancels_ok;
        m.unclassified = self.unclassified.clone();
        m.first_sold_out_ms = self.first_sold_out_ms;
        m.buyers = std::mem::take(&mut self.buyers)
            .into_iter()
            .map(|b| (b.buyer, b.result))
            .collect();
        m.order_answer_span = self.order_answer_span_us.map(Duration::from_micros);
        Ok(m)
    }
}

fn one_second() -> u64 {
    1
}

impl ShardFile {
    /// Writes `shard.json` and `latency-order.hlog` into `dir` (created if missing).
    pub fn write(&self, dir: &Path, m: &Measurements) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        // Streamed to the file: a shard of 250,000 buyers writes ~150 MiB of JSON, which a
        // string of it would hold in memory twice over at the shard's end.
        let path = dir.join(FILE);
        let writing = || format!("writing {}", path.display());
        let file = std::fs::File::create(&path).with_context(writing)?;
        let mut out = std::io::BufWriter::new(file);
        serde_json::to_writer_pretty(&mut out, self).with_context(writing)?;
        std::io::Write::flush(&mut out).with_context(writing)?;
        std::fs::write(dir.join(HLOG), self.interval_log(m)?)
            .with_context(|| format!("writing {}", dir.join(HLOG).display()))?;
        Ok(())
    }

    /// Reads `<dir>/shard.json` (or the file itself), checking its schema.
    pub fn read(path: &Path) -> anyhow::Result<ShardFile> {
        let file = if path.is_dir() {
            path.join(FILE)
        } else {
            path.to_path_buf()
        };
        // Streamed from the file, twice: its schema first (a file of another version is named
        // as such, not as a field it lacks), then the whole; never a string or a
        // `serde_json::Value` of all of it.
        let open = || {
            std::fs::File::open(&file)
                .map(std::io::BufReader::new)
                .with_context(|| {
                    format!(
                        "reading {} (a shard folder holds the {FILE} that `run --shard` writes)",
                        file.display()
                    )
                })
        };
        /// Only the schema of a shard file (every other field skipped as it streams by).
        #[derive(serde::Deserialize)]
        struct Head {
            schema: Option<serde_json::Value>,
        }
        let head: Head = serde_json::from_reader(open()?)
            .with_context(|| format!("{} is not JSON", file.display()))?;
        let schema = head
            .schema
            .as_ref()
            .and_then(|v| v.as_str())
            .unwrap_or("(none)");
        anyhow::ensure!(
            schema == SCHEMA,
            "{}: schema is {schema:?}, this oversell reads {SCHEMA:?}",
            file.display()
        );
        serde_json::from_reader(open()?).with_context(|| format!("reading {}", file.display()))
    }

    /// The order latency of each second as an interval log (µs; max column in ms).
    fn interval_log(&self, m: &Measurements) -> anyhow::Result<Vec<u8>> {
        let mut buf = Vec::new();
        let mut serializer = V2DeflateSerializer::new();
        {
            let mut w = IntervalLogWriterBuilder::new()
                .add_comment(&format!(
                    "oversell order latency: shard {} of scenario {}, {}, opening {}",
                    self.shard,
                    self.scenario.name,
                    match (&self.shop, &self.target) {
                        (Some(shop), _) => format!("strategy {}", shop.strategy),
                        (None, Some(t)) => format!("target {}", t.url),
                        (None, None) => "no shop named".into(),
                    },
                    self.open_at
                ))
                .add_comment("values in microseconds from each request's intended send time")
                .add_comment("interval timestamps are seconds after the sale opened")
                .with_max_value_divisor(1000.0)
                .begin_log_with(&mut buf, &mut serializer)?;
            let tag = Tag::new(crate::report::hlog::TAG);
            for (at, len, h) in m.order_intervals.iter() {
                w.write_histogram(h, at, len, tag)
                    .map_err(|e| anyhow::anyhow!("writing an interval: {e:?}"))?;
            }
        }
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_another_schema_or_not_json_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let other = dir.path().join("other.json");
        std::fs::write(&other, r#"{"schema": "oversell.shard/v0", "shard": 3}"#).unwrap();
        let e = ShardFile::read(&other).unwrap_err().to_string();
        assert!(e.contains(r#"schema is "oversell.shard/v0""#), "{e}");
        let none = dir.path().join("none.json");
        std::fs::write(&none, r#"{"shard": 3}"#).unwrap();
        let e = ShardFile::read(&none).unwrap_err().to_string();
        assert!(e.contains(r#"schema is "(none)""#), "{e}");
        let text = dir.path().join("text.json");
        std::fs::write(&text, "shard 3 of 4").unwrap();
        let e = ShardFile::read(&text).unwrap_err().to_string();
        assert!(e.ends_with("is not JSON"), "{e}");
        let e = format!("{:#}", ShardFile::read(dir.path()).unwrap_err());
        assert!(e.contains("a shard folder holds the shard.json"), "{e}");
    }

    #[test]
    fn a_shard_shop_reads_and_writes_the_backend_as_older_shard_files_spell_it() {
        let old = r#"{"url":"http://127.0.0.1:8080","strategy":"redis-lua","backend":"mysql"}"#;
        let shop: ShardShop = serde_json::from_str(old).unwrap();
        assert_eq!(shop.backend, Backend::Mysql);
        assert_eq!(shop.strategy, Strategy::RedisLua);
        assert_eq!(serde_json::to_string(&shop).unwrap(), old);
        let e = serde_json::from_str::<ShardShop>(&old.replace("mysql", "oracle"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("postgres") && e.contains("mysql"), "{e}");
    }
}
