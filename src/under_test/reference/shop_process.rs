//! The reference shop as a child process: its settings from the scenario, start, graceful
//! stop, and the reference-only steps of a run: the sale's set-up, waiting for its queue to
//! drain, the final reconciliation, and what the oracle reads from Redis.
//!
//! The child is told everything as one typed document ([`ServeConfig`], JSON on its stdin:
//! `serve --config -`), so no URL or token is on its command line (`ps` shows argv to every
//! local user) or in a file; and it answers on a pipe made for that (`--ready-fd`,
//! [`crate::shop::ready`]): the address it bound, its version and workers, or why it stopped. Its
//! stdout and stderr go to its log. Each child gets a random admin token of its own for the
//! set-up and reconciliation calls, and trusts `X-Forwarded-For` from the harness's loopback
//! address only, so the traffic model's buyers keep their own addresses.
//!
//! The shop is a child process, not a task in this process: the load generator's CPU and
//! memory figures (getrusage of this process) then measure the generator alone, the shop gets
//! its own runtime and cannot be slowed by the generator's tasks sharing its scheduler, and a
//! shop that crashes cannot take the measurements with it. It gets SIGKILL when the harness
//! dies (Linux parent-death signal), so a killed run leaves no shop listening.

use crate::inventory::redis_lua::stream::{read_dead_letters, DeadLetter};
use crate::inventory::redis_lua::ItemKeys;
use crate::inventory::RedisKind;
use crate::nemesis::BoxFuture;
use crate::pipeline::reconcile::Pass;
use crate::report::Drain;
use crate::runner::Cell;
use crate::services::{Service, Unreachable};
use crate::shop::ready::{Readiness, ReadyPipe, Silence};
use crate::shop::routes::Route;
use crate::shop::{ServeConfig, ShopKnobs};
use crate::traffic::target::{Prepared, Target};
use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// How long a child shop may take to report on its readiness channel.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// The variables `serve`'s flags read: the child gets its settings from its document only.
const SERVE_ENV: &[&str] = &[
    "DATABASE_URL",
    "MYSQL_URL",
    "REDIS_URL",
    "REPLICA_DATABASE_URL",
    "OVERSELL_ADMIN_TOKEN",
    "OVERSELL_SERVICES",
];

/// A reference shop running as a child process.
pub(crate) struct ChildShop {
    /// The process; replaced when `shop-kill` restarts it.
    process: tokio::sync::Mutex<Child>,
    pub(crate) base_url: String,
    /// The version the shop reported on its readiness channel.
    pub(crate) version: String,
    /// The worker threads of its runtime, as it reported them (0: not said).
    pub(crate) workers: usize,
    /// `Authorization: Bearer` value of its admin routes.
    admin_token: String,
    /// How to start it again (`shop-kill`).
    launch: Launch,
}

/// Everything a start needs, kept for a restart on the same port.
struct Launch {
    exe: PathBuf,
    /// What the child is told (its `listen` is set at each start).
    config: ServeConfig,
    log: PathBuf,
    /// How long it may take to say it is ready.
    ready_within: Duration,
}

/// A child that said it is ready.
struct Started {
    child: Child,
    address: SocketAddr,
    version: String,
    workers: usize,
}

impl Launch {
    /// Starts the process listening on `listen`, hands it its document and waits for its
    /// readiness report.
    async fn spawn(&self, listen: SocketAddr) -> anyhow::Result<Started> {
        let log = &self.log;
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("creating {}", log.display()))?;
        let stdout = log_file.try_clone().context("the shop's log")?;
        let mut cmd = Command::new(&self.exe);
        // Killed with the harness (kill -9 of `oversell run` leaves no shop listening).
        crate::services::managed::process::die_with_parent(cmd.as_std_mut());
        // Below the generator's CPU priority: the instrument must not compete with the shop.
        crate::placement::below_generator(cmd.as_std_mut());
        let ready = ReadyPipe::new().context("the shop's readiness channel")?;
        let fd = ready.hand_to(&mut cmd);
        for name in SERVE_ENV {
            cmd.env_remove(name);
        }
        let mut child = cmd
            .args(["serve", "--config", "-", "--ready-fd", &fd.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::from(stdout))
            .stderr(Stdio::from(log_file))
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the shop ({})", self.exe.display()))?;
        let config = ServeConfig {
            listen,
            ..self.config.clone()
        };
        if let Some(mut stdin) = child.stdin.take() {
            // A child that dies first closes it: its report (or its silence) says why.
            let _ = stdin.write_all(config.to_json().as_bytes()).await;
        }
        let strategy = self.config.strategy;
        match ready.wait(self.ready_within).await {
            Ok(Readiness::Ready {
                address,
                version,
                workers,
                ..
            }) => Ok(Started {
                child,
                address,
                version,
                workers,
            }),
            Ok(Readiness::Failed {
                error, exit_code, ..
            }) => {
                let _ = child.wait().await;
                if exit_code == crate::exit::Exit::Unreachable.code() {
                    return Err(Unreachable::relayed(error).into());
                }
                bail!(
                    "the {strategy} shop did not start (exit {exit_code}): {error} (its log: {})",
                    log.display()
                )
            }
            Err(silence) => {
                let _ = child.start_kill();
                let status = child.wait().await.ok();
                let last = last_error(log);
                let why = match silence {
                    Silence::Closed => {
                        format!("exited ({}) before it said it was ready", shown(status))
                    }
                    Silence::TimedOut(t) => format!(
                        "said nothing on its readiness channel within {} (killed)",
                        crate::duration::shown(t)
                    ),
                    Silence::Unreadable(e) => format!("answered on its readiness channel with {e}"),
                };
                bail!(
                    "the {strategy} shop did not start: it {why}; {last} (its log: {})",
                    log.display()
                )
            }
        }
    }
}

/// An exit status as a person reads it: `exit 1`, `killed by signal 9`.
fn shown(status: Option<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) if s.code().is_some() => format!("exit {}", s.code().unwrap_or_default()),
        Some(s) => format!("killed by signal {}", s.signal().unwrap_or_default()),
        None => "status unknown".into(),
    }
}

/// The last `error:` line of a shop's log, or that it printed none.
fn last_error(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| l.starts_with("error:"))
        .unwrap_or("no error printed")
        .to_string()
}

impl ChildShop {
    pub(crate) async fn start(
        exe: &Path,
        cell: &Cell,
        redis_url: &str,
        redis_prefix: &str,
        knobs: &ShopKnobs,
        log: PathBuf,
    ) -> anyhow::Result<ChildShop> {
        Self::start_with(exe, cell, redis_url, redis_prefix, knobs, None, log).await
    }

    /// [`Self::start`] reading its reconciliation snapshots from `replica` (a run's managed
    /// read replica).
    pub(crate) async fn start_with(
        exe: &Path,
        cell: &Cell,
        redis_url: &str,
        redis_prefix: &str,
        knobs: &ShopKnobs,
        replica: Option<&str>,
        log: PathBuf,
    ) -> anyhow::Result<ChildShop> {
        let _ = std::fs::remove_file(&log);
        let admin_token: String = rand::random::<[u8; 16]>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
        let config = ServeConfig {
            redis_prefix: redis_prefix.to_string(),
            replica_database_url: replica.map(str::to_string),
            admin_token: Some(admin_token.clone()),
            // The traffic model connects from here and names each buyer in X-Forwarded-For.
            trusted_proxies: vec![loopback.ip().into()],
            ..ServeConfig::new(
                cell.strategy,
                loopback,
                &cell.database_url,
                redis_url,
                knobs.clone(),
            )
        };
        let launch = Launch {
            exe: exe.to_path_buf(),
            config,
            log,
            ready_within: READY_WITHIN,
        };
        let started = launch.spawn(loopback).await?;
        Ok(ChildShop {
            process: tokio::sync::Mutex::new(started.child),
            base_url: format!("http://{}", started.address),
            version: started.version,
            workers: started.workers,
            admin_token,
            launch,
        })
    }

    /// The set-up of a fresh sale: the mapping's request as an explicit reset (`?reset=true`:
    /// the shop refuses to wipe an item's orders otherwise), with this shop's admin token.
    pub(super) fn setup_request(&self, target: &Target) -> Option<Prepared> {
        reset_request(target, Some(&self.admin_token))
    }

    /// One reconciliation pass after the drain (redis-lua).
    pub(super) async fn final_reconcile(&self, http: &reqwest::Client, item: i64) -> Option<Pass> {
        reconcile(http, &self.base_url, Some(&self.admin_token), item).await
    }

    /// `PUT /api/items/{item}?reset=true` with `setup` and this shop's admin token (the
    /// benchmarks' set-up, which has no scenario target).
    pub(crate) async fn put_sale(
        &self,
        http: &reqwest::Client,
        item: i64,
        setup: &crate::model::SaleSetup,
    ) -> anyhow::Result<()> {
        let resp = http
            .put(format!(
                "{}?reset=true",
                Route::Item.url_with(&self.base_url, item)
            ))
            .bearer_auth(&self.admin_token)
            .json(setup)
            .send()
            .await
            .context("setting up the sale")?;
        let status = resp.status();
        if !status.is_success() {
            let body = resp.text().await.unwrap_or_default();
            anyhow::bail!("setting up the sale: {status} {body}");
        }
        Ok(())
    }

    /// The process id of the shop as it runs now (a restart changes it).
    pub(crate) async fn pid(&self) -> Option<u32> {
        self.process.lock().await.id()
    }

    /// SIGTERM, then up to 10 s for a graceful stop, then SIGKILL.
    pub(crate) async fn stop(&self) {
        let mut child = self.process.lock().await;
        if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

/// `shop-kill` drives the child shop: SIGKILL, then a start on the same port.
impl crate::nemesis::ShopControl for ChildShop {
    fn kill(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            let mut p = self.process.lock().await;
            p.kill().await.context("killing the shop")?;
            Ok(())
        })
    }

    fn kill_now(&self) {
        if let Ok(mut p) = self.process.try_lock() {
            let _ = p.start_kill();
        }
    }

    fn restart(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async move {
            let listen: SocketAddr = self
                .base_url
                .trim_start_matches("http://")
                .parse()
                .context("the shop's address")?;
            let mut p = self.process.lock().await;
            // The port can linger for a moment after the kill: try for up to 5 s.
            let mut tries = 0;
            let started = loop {
                tries += 1;
                match self.launch.spawn(listen).await {
                    Ok(v) => break v,
                    Err(e) if tries >= 25 => return Err(e.context("restarting the shop")),
                    Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
                }
            };
            *p = started.child;
            Ok(())
        })
    }
}

/// The set-up of a fresh sale on a reference shop: the mapping's request as an explicit reset
/// (`?reset=true`: the shop refuses to wipe an item's orders otherwise), with the shop's admin
/// token when it has one.
pub(super) fn reset_request(target: &Target, admin_token: Option<&str>) -> Option<Prepared> {
    let mut req = target.setup_request()?;
    let sep = if req.path.contains('?') { '&' } else { '?' };
    req.path = format!("{}{sep}reset=true", req.path);
    if let Some(token) = admin_token {
        req.headers
            .push(("authorization".into(), format!("Bearer {token}")));
    }
    Some(req)
}

/// One reconciliation pass of a reference shop (redis-lua), with its admin token if any.
pub(super) async fn reconcile(
    http: &reqwest::Client,
    base_url: &str,
    admin_token: Option<&str>,
    item: i64,
) -> Option<Pass> {
    // JSON: without a token, the shop's admin routes take nothing else.
    let mut req = http
        .post(Route::Reconcile.url_with(base_url, item))
        .header(reqwest::header::CONTENT_TYPE, "application/json");
    if let Some(token) = admin_token {
        req = req.bearer_auth(token);
    }
    req.send().await.ok()?.json::<Pass>().await.ok()
}

/// Polls the shop's drained route until its queue is drained, up to `limit` (the audit,
/// which reads every order row, is not polled: at 1,000,000 orders one audit took 1.6 s).
pub(super) async fn wait_drained(
    http: &reqwest::Client,
    base: &str,
    item: i64,
    limit: Duration,
) -> Drain {
    let start = Instant::now();
    let url = Route::Drained.url_with(base, item);
    loop {
        let drained = match http.get(&url).send().await {
            Ok(r) => r
                .json::<serde_json::Value>()
                .await
                .ok()
                .and_then(|v| v["queue_drained"].as_bool())
                .unwrap_or(false),
            Err(_) => false,
        };
        let waited = start.elapsed();
        if drained || waited >= limit {
            return Drain {
                drained,
                waited_ms: waited.as_millis() as u64,
                limit_ms: limit.as_millis() as u64,
                settle: None,
            };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the oracle reads from Redis: stock, the restock idempotency set's size, and the
/// stream's last entry id (it changes whenever anything happens to the item).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct RedisState {
    pub stock: Option<i64>,
    pub restocked: Option<i64>,
    pub last_event: Option<String>,
    /// The item's dead-letter stream (up to 100 000 entries).
    pub dead_letters: Option<Vec<DeadLetter>>,
}

/// Reads [`RedisState`] for one item: redis-lua's keys, or for redis-buckets the sum over
/// every bucket (stock plus the units travelling between buckets, every bucket's restocks,
/// last stream ids and dead letters).
pub(super) async fn redis_state(
    url: &str,
    prefix: &str,
    item: i64,
    kind: RedisKind,
) -> anyhow::Result<RedisState> {
    let mut conn = crate::store::redis_conn::RedisConn::open(url)
        .await
        .map_err(|e| Service::Redis.unreachable_error(url, &e))?;
    match kind {
        RedisKind::Buckets => buckets_state(&mut conn, prefix, item).await,
        RedisKind::Lua => key_set_state(&mut conn, &ItemKeys::new(prefix, item)).await,
    }
}

/// [`RedisState`] of one redis-lua key set (an item's, or one bucket's).
async fn key_set_state(
    conn: &mut crate::store::redis_conn::RedisConn,
    keys: &ItemKeys,
) -> anyhow::Result<RedisState> {
    let mut conn = conn.clone();
    let stock: Option<i64> = redis::cmd("GET")
        .arg(&keys.stock)
        .query_async(&mut conn)
        .await?;
    let restocked: i64 = redis::cmd("SCARD")
        .arg(&keys.restocked)
        .query_async(&mut conn)
        .await?;
    let last: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
        .arg(&keys.events)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut conn)
        .await?;
    let dead_letters = read_dead_letters(&mut conn, &keys.dead_letters, 100_000).await?;
    Ok(RedisState {
        stock,
        restocked: Some(restocked),
        last_event: last.ids.first().map(|e| e.id.clone()),
        dead_letters: Some(dead_letters),
    })
}

/// redis-buckets: the bucket count written at warm-up into bucket 0's `meta`, then every
/// bucket's state summed, plus the units lent and not yet received.
async fn buckets_state(
    conn: &mut crate::store::redis_conn::RedisConn,
    prefix: &str,
    item: i64,
) -> anyhow::Result<RedisState> {
    let first = ItemKeys::bucket(prefix, item, 0);
    let n: Option<u32> = redis::cmd("HGET")
        .arg(&first.meta)
        .arg("buckets")
        .query_async(conn)
        .await?;
    let Some(n) = n else {
        return Ok(RedisState::default());
    };
    let mut total = RedisState {
        stock: Some(0),
        restocked: Some(0),
        last_event: None,
        dead_letters: Some(Vec::new()),
    };
    let mut last = Vec::new();
    for b in 0..n {
        let keys = ItemKeys::bucket(prefix, item, b);
        let one = key_set_state(conn, &keys).await?;
        let add = |a: Option<i64>, b: Option<i64>| Some(a.unwrap_or(0) + b.unwrap_or(0));
        total.stock = add(total.stock, one.stock);
        total.restocked = add(total.restocked, one.restocked);
        last.push(one.last_event.unwrap_or_default());
        if let (Some(all), Some(more)) = (total.dead_letters.as_mut(), one.dead_letters) {
            all.extend(more);
        }
        // Transfers this bucket lent that the receiving bucket has not taken in yet.
        let lent: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
            .arg(keys.sibling("transfers"))
            .query_async(conn)
            .await?;
        for (id, record) in lent {
            let Some((to, units)) = record.split_once(':') else {
                anyhow::bail!(
                    "unreadable transfer record {id} = {record:?} in {}",
                    keys.sibling("transfers")
                );
            };
            let to: u32 = to
                .parse()
                .with_context(|| format!("transfer record {id} = {record:?}"))?;
            let units: i64 = units
                .parse()
                .with_context(|| format!("transfer record {id} = {record:?}"))?;
            let received: bool = redis::cmd("SISMEMBER")
                .arg(ItemKeys::bucket(prefix, item, to).sibling("received"))
                .arg(&id)
                .query_async(conn)
                .await?;
            if !received {
                total.stock = total.stock.map(|s| s + units);
            }
        }
    }
    total.last_event = Some(last.join(","));
    Ok(total)
}

#[cfg(test)]
mod tests;
