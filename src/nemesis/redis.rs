//! The private Redis a run with a Redis fault gets (a child `redis-server` on a free loopback
//! port, its own directory, `--save ""`, the persistence mode of `[nemesis]
//! redis_persistence`), the Redis faults on it, and `redeliver` on the run's own stream.
//!
//! The shared Redis is never touched: `redis-restart`, `redis-pause` and `redis-conn-kill`
//! act only on the private child; `redeliver` only on this run's stream key.

use super::hold::Hold;
use super::RedisSale;
use super::{FaultKind, Persistence};
use crate::store::redis_conn::RedisConn;
use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// A `redis-server` child this run owns.
pub struct PrivateRedis {
    port: u16,
    dir: PathBuf,
    persistence: Persistence,
    child: Mutex<Option<Child>>,
}

impl PrivateRedis {
    /// Starts one on a free loopback port, its files in `dir` (created); returns once it
    /// answers PING.
    pub async fn start(dir: &Path, persistence: Persistence) -> anyhow::Result<PrivateRedis> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("finding a free loopback port for the private Redis")?
            .port();
        let r = PrivateRedis {
            port,
            dir: dir.to_path_buf(),
            persistence,
            child: Mutex::new(None),
        };
        r.spawn().await?;
        Ok(r)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn persistence(&self) -> Persistence {
        self.persistence
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.lock().as_ref().map(Child::id)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn spawn(&self) -> anyhow::Result<()> {
        let (aof, fsync) = match self.persistence {
            Persistence::None => ("no", "everysec"),
            Persistence::AofEverysec => ("yes", "everysec"),
            Persistence::AofAlways => ("yes", "always"),
        };
        let mut cmd = Command::new("redis-server");
        crate::placement::below_generator(&mut cmd);
        let child = cmd
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", aof, "--appendfsync", fsync])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--logfile", "redis.log", "--daemonize", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting the private redis-server (is redis-server on PATH?)")?;
        *self.lock() = Some(child);
        let url = self.url();
        for _ in 0..100 {
            if let Ok(c) = redis::Client::open(url.as_str()) {
                if let Ok(mut conn) = c.get_multiplexed_async_connection().await {
                    let pong: redis::RedisResult<String> =
                        redis::cmd("PING").query_async(&mut conn).await;
                    if pong.is_ok() {
                        return Ok(());
                    }
                }
            }
            if let Some(status) = self
                .lock()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                bail!(
                    "the private redis-server exited ({status}); see {}",
                    self.dir.join("redis.log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("the private redis-server on {url} did not answer PING within 5 s")
    }

    fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid().and_then(|p| i32::try_from(p).ok()) {
            let _ = kill(Pid::from_raw(pid), sig);
        }
    }

    /// SIGKILL and reap (idempotent).
    pub fn stop(&self) {
        if let Some(mut c) = self.lock().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGCONT: a paused Redis answers again (idempotent).
    pub fn resume(&self) {
        self.signal(Signal::SIGCONT);
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.resume();
        self.stop();
    }
}

/// `redis-restart`, `redis-pause`, `redis-conn-kill` on the private Redis.
pub(super) async fn act(
    kind: FaultKind,
    r: &PrivateRedis,
    hold: &mut Hold,
) -> anyhow::Result<Option<String>> {
    match kind {
        FaultKind::RedisRestart => {
            if !hold.start().await {
                return Ok(None);
            }
            r.stop();
            hold.wait().await;
            r.spawn().await?;
            Ok(Some(format!(
                "SIGKILL, restarted with persistence {}",
                r.persistence.as_str()
            )))
        }
        FaultKind::RedisPause => {
            if !hold.start().await {
                return Ok(None);
            }
            r.signal(Signal::SIGSTOP);
            hold.wait().await;
            r.resume();
            Ok(Some("SIGSTOP, then SIGCONT".into()))
        }
        FaultKind::RedisConnKill => {
            let client = redis::Client::open(r.url())?;
            let mut conn = client.get_multiplexed_async_connection().await?;
            if !hold.start().await {
                return Ok(None);
            }
            let mut killed = 0u64;
            loop {
                let n: redis::RedisResult<u64> = redis::cmd("CLIENT")
                    .arg(&["KILL", "TYPE", "normal", "SKIPME", "yes"][..])
                    .query_async(&mut conn)
                    .await;
                killed += n.unwrap_or(0);
                if !hold.tick(Duration::from_millis(100)).await {
                    break;
                }
            }
            Ok(Some(format!("{killed} client connections killed")))
        }
        _ => bail!("{kind} is not a Redis fault"),
    }
}

/// `redeliver`: the consumer group of each of the sale's streams (redis-buckets has one per
/// bucket) rewound to `to` (default `0`).
pub(super) async fn redeliver(
    url: &str,
    sale: &RedisSale,
    to: Option<&str>,
    hold: &mut Hold,
) -> anyhow::Result<Option<String>> {
    let to = to.unwrap_or("0");
    let mut conn = RedisConn::open(url).await?;
    if !hold.start().await {
        return Ok(None);
    }
    let mut len = 0u64;
    for stream in &sale.streams {
        let n: u64 = redis::cmd("XLEN")
            .arg(stream)
            .query_async(&mut conn)
            .await?;
        len += n;
        let _: () = redis::cmd("XGROUP")
            .arg("SETID")
            .arg(stream)
            .arg(&sale.group)
            .arg(to)
            .query_async(&mut conn)
            .await
            .context("rewinding the consumer group")?;
    }
    let streams = match sale.streams.len() {
        1 => String::new(),
        n => format!(" on {n} streams"),
    };
    Ok(Some(format!(
        "group {} rewound to {to}{streams}: up to {len} entries delivered again",
        sale.group
    )))
}
