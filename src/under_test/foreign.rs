//! A run against a foreign shop: no child process, no `/metrics` of ours, no audit endpoint.
//!
//! Nothing touches the shop until everything answers ([`crate::rehearsal::preflight`]: the
//! loopback guard again, the target, the oracle). Then the sale is set up, the oracle is read
//! once more (the baseline: this run's sold is counted from it), and the buyers are fired.
//! After the last buyer, the run settles ([`rehearsal::settle`]: the oracle's reading unchanged
//! for the settle window and the shop's backlog at 0 where it can be read, up to the drain
//! limit), and audits the difference. Without an
//! oracle the verdict rests on the clients' evidence alone.

mod login;
mod merge;

use crate::inventory::Strategy;
use crate::nemesis::BoxFuture;
use crate::oracle::{OracleView, StockSample, Truth};
use crate::probe::ProbeConfig;
use crate::rehearsal::{self, Foreign, Oracle, OracleSource, Row, Tally};
use crate::report::{OracleKind, RunReport, Shop};
use crate::runner::merge::Merged;
use crate::runner::subject::{Servers, ShopUnderTest, Subject};
use crate::runner::{
    control_client, finish, fire_traffic, setup_sale, target_for, RunPlan, ServerSide, Slot,
};
use crate::services::redact_url;
use crate::shard::file::{ShardFile, ShardTarget};
use crate::traffic::mapping::Mapping;
use crate::traffic::target::{Prepared, Target};
use crate::traffic::Scenario;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// Someone else's shop at a URL (`attack --target`, `gate --target`, `capacity --target`).
#[derive(Debug, Clone)]
struct ForeignShop(Foreign);

impl Subject {
    /// The user's own shop `f`.
    pub fn foreign(f: Foreign) -> Subject {
        Subject::new(ForeignShop(f))
    }
}

impl ServerSide {
    /// A foreign shop's server side: what its oracle read (`Truth::Unverified` without one),
    /// and its stock sampled during the sale; nothing of Redis, probes or reconciliation. The
    /// final reading is the settle's last, so its time is the settle's (`read_s` 0).
    pub(crate) fn foreign(
        truth: Truth,
        oracle: OracleView,
        stock_samples: Vec<StockSample>,
    ) -> Self {
        ServerSide {
            truth,
            oracle,
            redis_stock: None,
            redis_restocked_orders: None,
            dead_letters: None,
            stock_seen: None,
            reconcile: None,
            stock_samples,
            restocks: None,
            read_s: 0.0,
        }
    }
}

impl ShopUnderTest for ForeignShop {
    fn shops(&self) -> usize {
        1
    }

    fn label(&self, _: usize) -> String {
        self.0.label()
    }

    fn short_name(&self, _: usize) -> String {
        "target".into()
    }

    fn strategy(&self, _: usize) -> Option<Strategy> {
        None
    }

    fn describe(&self) -> String {
        crate::secret::url(&self.0.base_url)
    }

    fn remote_host(&self) -> Option<String> {
        let f = &self.0;
        reqwest::Url::parse(&f.base_url)
            .is_ok_and(|u| !crate::guard::is_loopback_host(&u))
            .then(|| f.host.clone())
    }

    fn check(&self, s: &Scenario) -> Result<(), String> {
        // The commands refuse this first, each in its own words; a plan built another way
        // meets it here.
        match s.faults.is_empty() {
            true => Ok(()),
            false => Err(
                "[[faults]] act only on the reference shop's own services, not on a \
                          foreign target"
                    .into(),
            ),
        }
    }

    fn lock(&self) -> BoxFuture<'_, anyhow::Result<Vec<crate::runner::Held>>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn servers(&self) -> Servers {
        Servers {
            databases: self.0.oracle.database_url().into_iter().collect(),
            redis: None,
        }
    }

    fn watch_database(&self) -> Option<String> {
        self.0.oracle.database_url()
    }

    fn allow_remote(&self) -> bool {
        self.0.allow_remote
    }

    fn sources(&self) -> BTreeMap<String, String> {
        crate::report::sources(
            "the user's oracle named in each run (`truth_source`: its SQL or URL, with what it can \
             and cannot see), read before and after the sale, compared with the clients' records",
        )
    }

    fn payment_window(&self, s: &Scenario) -> Option<Duration> {
        s.mapping().declared_payment_window()
    }

    fn levers(&self, s: &Scenario) -> crate::runner::Levers {
        use crate::traffic::recorder::{Answer, Kind};
        // What its `[target]` maps, and nothing of its insides.
        let m = s.mapping();
        let (order_rules, _) = m.rules_for(Kind::Order);
        crate::runner::Levers {
            knobs: false,
            pay: m.pay.is_some(),
            cancel: m.cancel.is_some(),
            payment_window: m.payment_window,
            limit_in_setup: format!("{:?}", m.setup).contains("{purchase_limit}"),
            buyer_in_order: m.login.is_some()
                || format!("{:?}{:?}", m.order, m.headers).contains("{user_id}"),
            answers_not_found: order_rules
                .iter()
                .any(|r| r.outcome.answer() == Answer::NotFound),
            counts_retries: false,
            audited_whole: false,
        }
    }

    fn run<'a>(
        &'a self,
        plan: &'a RunPlan,
        _: usize,
        _: &'a Path,
        slot: &'a Slot,
    ) -> BoxFuture<'a, anyhow::Result<RunReport>> {
        Box::pin(run(plan, &self.0, slot))
    }

    fn shard_mapping(&self, _: &Scenario) -> anyhow::Result<Mapping> {
        Ok(self.0.mapping.clone())
    }

    fn shard_setup(&self, target: &Target, _: Option<&str>) -> Vec<(String, Prepared)> {
        target.setup_requests()
    }

    fn item_url(&self, _base_url: &str, _item: i64) -> Option<String> {
        None
    }

    fn record(&self, base_url: &str, file: &mut ShardFile) {
        file.target = Some(ShardTarget {
            url: redact_url(base_url),
            host: self.0.host.clone(),
        });
    }

    fn merge<'a>(
        &'a self,
        merged: Merged<'a>,
    ) -> BoxFuture<'a, anyhow::Result<(crate::report::Report, std::path::PathBuf)>> {
        let subject = Subject::new(self.clone());
        Box::pin(merge::merge(merged, &self.0, subject))
    }
}

async fn run(plan: &RunPlan, f: &Foreign, slot: &Slot) -> anyhow::Result<RunReport> {
    let s = &plan.scenario;
    let oracle = rehearsal::preflight(f).await?;
    let target = target_for(s, &f.base_url, f.mapping.clone());
    let http = control_client()?;
    setup_sale(&http, &target).await?;
    let (target, logins) = login::before_sale(plan, target, plan.columns.clone()).await?;
    // The baseline, after the set-up and before the first buyer.
    let before = oracle.read().await?;
    let rows_before = oracle.rows().await?;
    let gives_stock = before.is_some_and(|t| t.stock.is_some());
    let ctx = crate::runner::gauges::context(plan, f.oracle.database_url());
    let gauge = |name: &str| -> anyhow::Result<crate::watch::Reader> {
        let reader = crate::watch::readers(&s.watch, &ctx)?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "field `target.settle.backlog` names watch.{name}, but the scenario's \
                     [watch] has no gauge {name:?} (it has: {})",
                    crate::watch::gauge_names(&s.watch)
                )
            })?;
        Ok(reader)
    };
    let backlog =
        rehearsal::backlog::BacklogSource::of(f.settle.backlog_query.as_deref(), &target, gauge)?
            .map(std::sync::Arc::new);
    let sampler = rehearsal::stock_sampler::start(&f.oracle, gives_stock, backlog.clone()).await;
    let targets = crate::traffic::target::Targets::one(target.clone());
    let fired = fire_traffic(plan, targets, probes(f), slot, None).await?;
    let logins = login::section(&target, logins, &fired.traffic.recorder);
    let settled =
        rehearsal::settle::settle(&oracle, backlog.as_deref(), &f.settle, plan.drain_limit).await;
    let watched = fired
        .watch
        .stop(crate::runner::gauges::rush_at_s(plan))
        .await;
    let mut series = fired.probes.stop().await;
    let (stock_samples, failed_reads) = match sampler {
        Some(sampler) => {
            let sampled = sampler.stop(fired.traffic.recorder.opened()).await;
            series.push(sampled.series);
            (sampled.samples, sampled.failed)
        }
        None => (Vec::new(), 0),
    };
    let rehearsal::settle::Settled {
        drain,
        tally: after,
        rows: rows_after,
    } = settled?;
    let mut view = view(f, &oracle, failed_reads, &drain);
    let (truth, notes) = truth(
        &oracle,
        s.item.stock,
        (before, rows_before),
        (after, rows_after),
    );
    warn(&mut view, notes);
    let server = ServerSide::foreign(truth, view, stock_samples);
    let run = finish(plan, shop(f), fired.traffic, series, drain, server);
    Ok(RunReport {
        login: logins,
        watch: watched,
        ..run
    })
}

/// What the probes read of a foreign shop: its oracle's database, when the oracle is SQL.
fn probes(f: &Foreign) -> ProbeConfig {
    ProbeConfig {
        database_url: f.oracle.database_url(),
        may_create_on_database: false,
        db_stock: None,
        redis: None,
        shop_metrics_urls: Vec::new(),
        opened: Instant::now(),
    }
}

/// What the oracle can see, with the caveats of this run: failed stock readings, and how it
/// settled.
fn view(
    f: &Foreign,
    oracle: &Oracle,
    failed_reads: u64,
    drain: &crate::report::Drain,
) -> OracleView {
    let mut view = f.oracle.view();
    if failed_reads > 0 {
        let note = format!("{failed_reads} of the stock's 1 s readings failed (skipped)");
        warn(&mut view, vec![note]);
    }
    if let Some(st) = &drain.settle {
        let audited = !matches!(oracle, Oracle::None);
        warn(&mut view, settle_notes(st, drain.limit_ms, audited));
    }
    view
}

/// The report's description of the shop: its host, its URL (credentials masked), and which
/// oracle audited it.
fn shop(f: &Foreign) -> Shop {
    let oracle = match f.oracle {
        OracleSource::None => OracleKind::None,
        OracleSource::Sql { .. } => OracleKind::Sql,
        OracleSource::Http { .. } => OracleKind::Http,
    };
    described(f.label(), redact_url(&f.base_url), oracle)
}

/// A foreign shop as the report describes it: named by its host, audited by `oracle`, fired
/// at `url` (credentials masked), no strategy of ours.
fn described(host: String, url: String, oracle: OracleKind) -> Shop {
    Shop {
        name: host,
        detail: oracle.as_str().into(),
        target: url,
        strategy: None,
    }
}

/// Adds `notes` to the oracle's caveat (the verdict repeats it).
fn warn(view: &mut OracleView, notes: Vec<String>) {
    let all: Vec<String> = view.warning.take().into_iter().chain(notes).collect();
    view.warning = (!all.is_empty()).then(|| all.join("; "));
}

/// One reading of the oracle: its totals and, with `--orders-query`, its order rows.
type Reading = (Option<Tally>, Option<Vec<Row>>);

/// The server-side truth from the reading before the sale and the one it settled on: this run's
/// order rows (`--orders-query`), else this run's totals, else none; and what the report must
/// say about the readings.
fn truth(oracle: &Oracle, initial: i64, before: Reading, after: Reading) -> (Truth, Vec<String>) {
    let ((tally_before, rows_before), (tally_after, rows_after)) = (before, after);
    let mut notes = Vec::new();
    let totals = match (tally_before, tally_after) {
        (Some(b), Some(a)) => {
            notes.extend(rehearsal::baseline_notes(b, initial));
            rehearsal::run_totals(b, a)
        }
        _ => None,
    };
    let truth = match (oracle.orders_query(), rows_before, rows_after) {
        (Some(q), Some(before), Some(after)) => {
            let rows = q.this_run(&before, after, tally_after.and_then(|a| a.stock));
            let by_query = match (tally_before, tally_after) {
                (Some(b), Some(a)) => a.sold.map(|s| s - b.sold.unwrap_or(0)),
                _ => None,
            };
            notes.extend(rows_notes(&rows, by_query));
            Truth::Rows(rows)
        }
        _ => match totals {
            Some(t) => Truth::Totals {
                sold: t.sold,
                stock: t.stock,
            },
            None => Truth::Unverified,
        },
    };
    (truth, notes)
}

/// What the order rows say beside the totals: rows present before the sale, and a sold query
/// that disagrees with the rows.
fn rows_notes(rows: &crate::oracle::ForeignRows, sold_query: Option<i64>) -> Vec<String> {
    let mut notes = Vec::new();
    if rows.present_before > 0 {
        notes.push(format!(
            "{} order rows were present before the sale: they are not this run's",
            rows.present_before
        ));
    }
    let held: i64 = rows
        .orders
        .iter()
        .filter(|o| o.status.holds_stock())
        .map(|o| o.qty)
        .sum();
    if let Some(sold) = sold_query.filter(|s| *s != held) {
        notes.push(format!(
            "--sold-query counts {sold} sold, this run's order rows hold {held}: the verdict uses the rows"
        ));
    }
    notes
}

/// What the verdict must say about settling: a shop that did not settle, one whose settling
/// nothing could tell, and (with an oracle) one that gives no backlog signal.
fn settle_notes(s: &crate::report::Settling, limit_ms: u64, has_oracle: bool) -> Vec<String> {
    use crate::report::SettleState;
    let mut notes = Vec::new();
    match s.state {
        SettleState::Settled => {}
        SettleState::NotSettled => notes.push(format!(
            "the shop had not settled within {limit_ms} ms{}: these figures are of an unsettled state",
            match s.backlog_last {
                Some(n) if n > 0 && s.backlog.is_some() => format!(" (its backlog last read {n})"),
                _ => String::new(),
            }
        )),
        SettleState::Unknown => notes.push(
            "nothing could tell whether the shop had settled (no oracle, no backlog signal)".into(),
        ),
    }
    if has_oracle && s.backlog.is_none() {
        notes.push(
            "the shop gives no backlog signal (--backlog-query or [target.settle] backlog): \
             orders missing after settling may be late rather than lost"
                .into(),
        );
    }
    notes
}

/// The user's own shop a shard file says its shard fired at (`attack --shard`), read by the
/// mapping the shards ran with, without an oracle (merge reads none), and the URL it
/// recorded; `None`: the shards fired at another kind of shop.
pub(super) fn recorded(file: &ShardFile) -> Option<(Subject, String)> {
    let t = file.target.as_ref()?;
    let f = Foreign {
        base_url: t.url.clone(),
        host: t.host.clone(),
        allow_remote: false,
        mapping: file.scenario.mapping(),
        oracle: OracleSource::None,
        settle: Default::default(),
    };
    Some((Subject::foreign(f), t.url.clone()))
}
