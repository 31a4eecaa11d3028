//! Managed servers: private PostgreSQL, MariaDB/MySQL and Redis servers the harness starts from
//! the binaries installed on the machine ([`binaries`]), each in its own data directory under
//! one [`process::Root`] in the temp dir, on a free loopback port, with a known configuration
//! ([`kinds::default_settings`], recorded in the report's metadata), stopped when the command
//! ends and killed with it if it dies (see [`process`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use oversell::testing::services::managed::{ManagedSet, ServerKind, ServerOptions};
//! let set = ManagedSet::new()?;
//! let pg = set.start(ServerKind::Postgres, ServerOptions::default()).await?;
//! let url = pg.database_url("oversell"); // postgres://postgres:<random>@127.0.0.1:PORT/oversell
//! pg.kill9(); // SIGKILL (a crash)
//! pg.start_again().await?; // crash recovery on the same port and data dir
//! pg.restart().await?; // a clean stop, then a start
//! # Ok(()) }
//! ```

pub mod binaries;
pub mod kinds;
pub mod process;
mod registry;
pub mod replica;

pub use registry::{lookup, server_at};
use registry::{register, remember, unregister};

use anyhow::{bail, Context};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use process::{Root, RunAs};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a server gets to answer after its start (crash recovery included).
const READY_WITHIN: Duration = Duration::from_secs(90);
/// How long a clean stop may take before SIGKILL.
const STOP_WITHIN: Duration = Duration::from_secs(30);

/// A kind of server the harness can manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServerKind {
    Postgres,
    /// MariaDB, or Oracle MySQL.
    Mysql,
    Redis,
}

impl ServerKind {
    /// Every kind.
    pub const ALL: [ServerKind; 3] = [ServerKind::Postgres, ServerKind::Mysql, ServerKind::Redis];

    /// Short name (the data directory's, the log's).
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Postgres => "postgres",
            ServerKind::Mysql => "mysql",
            ServerKind::Redis => "redis",
        }
    }

    /// The [`super::Service`] it is.
    pub fn service(self) -> super::Service {
        match self {
            ServerKind::Postgres => super::Service::Postgres,
            ServerKind::Mysql => super::Service::Mysql,
            ServerKind::Redis => super::Service::Redis,
        }
    }
}

/// How to start one server (the defaults: a fresh data directory named after the kind, the
/// kind's default settings, a free port).
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Its name in the root (data directory `<root>/<name>`, log `<root>/<name>.log`);
    /// default the kind's (`postgres`, `mysql`, `redis`). Two servers of a kind need two.
    pub name: Option<String>,
    /// Settings added to (or replacing, by name) the kind's defaults: `-c k=v` for
    /// PostgreSQL, `--k=v` for MariaDB, `--k v` for Redis.
    pub settings: Vec<(String, String)>,
    /// The data directory was already filled by the caller (e.g. `pg_basebackup` for a
    /// replica, into [`ManagedSet::data_dir_for`]): no `initdb`/install step.
    pub prepared: bool,
    /// A port to listen on (default: a free loopback port).
    pub port: Option<u16>,
    /// The superuser's password (default: a new random one; a replica: its primary's).
    pub password: Option<String>,
}

/// One running (or stopped, between [`ManagedServer::kill9`] and
/// [`ManagedServer::start_again`]) managed server.
#[derive(Debug)]
pub struct ManagedServer {
    kind: ServerKind,
    name: String,
    found: binaries::Found,
    root: Arc<Root>,
    data_dir: PathBuf,
    log: PathBuf,
    port: u16,
    run_as: Option<RunAs>,
    settings: Vec<(String, String)>,
    version: String,
    child: Arc<Mutex<Option<Child>>>,
    /// Its superuser's random password (in its URLs; never on a command line).
    password: Arc<str>,
}

/// One set of managed servers: their root directory, and the servers started in it. Dropping
/// it stops every server it started (cleanly, then SIGKILL) and removes the directory.
#[derive(Debug)]
pub struct ManagedSet {
    root: Arc<Root>,
    run_as: Option<RunAs>,
    servers: Mutex<Vec<Arc<ManagedServer>>>,
}

impl ManagedSet {
    /// A new, empty set: its root directory (stale roots of dead processes removed first) and
    /// its watchdog.
    pub fn new() -> anyhow::Result<ManagedSet> {
        let run_as = process::run_as()?;
        // The harness's own: the servers' user reaches its data directory and writes nothing
        // else here (the logs, the pid list).
        let root = Root::create(run_as.is_some())?;
        Ok(ManagedSet {
            root: Arc::new(root),
            run_as,
            servers: Mutex::new(Vec::new()),
        })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// The user the servers run as (`None`: the harness's own).
    pub fn run_as(&self) -> Option<&str> {
        self.run_as.as_ref().map(|r| r.name.as_str())
    }

    /// Where a server named `name` keeps its data (created, owned by the servers' user, mode
    /// 0700), for a caller that fills it itself ([`ServerOptions::prepared`]).
    pub fn data_dir_for(&self, name: &str) -> anyhow::Result<PathBuf> {
        let dir = self.root.path().join(name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        if let Some(r) = &self.run_as {
            r.chown(&dir)?;
        }
        Ok(dir)
    }

    /// Writes `text` to `path`, readable by the servers' user alone (mode 0600, theirs), never
    /// through a symlink.
    fn write_private(&self, path: &Path, text: &str) -> anyhow::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(path);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        std::io::Write::write_all(&mut f, text.as_bytes())?;
        if let Some(r) = &self.run_as {
            r.chown(path)?;
        }
        Ok(())
    }

    /// Starts a server of `kind`; returns once it answers.
    pub async fn start(
        &self,
        kind: ServerKind,
        options: ServerOptions,
    ) -> anyhow::Result<Arc<ManagedServer>> {
        let found = binaries::find(kind).ok_or_else(|| missing(&[kind]))?;
        let name = options.name.unwrap_or_else(|| kind.as_str().to_string());
        let data_dir = if options.prepared {
            self.root.path().join(&name)
        } else {
            self.data_dir_for(&name)?
        };
        let log = self.root.path().join(format!("{name}.log"));
        let version = kinds::version(&found).unwrap_or_else(|e| format!("unknown ({e:#})"));
        let password: Arc<str> = options.password.unwrap_or_else(kinds::new_password).into();
        let secret = kinds::secret_file(self.root.path(), &name, kind);
        if !options.prepared || kind == ServerKind::Redis {
            self.write_private(&secret, &kinds::secret_file_text(kind, &password))?;
        }
        if !options.prepared {
            if let Some(mut init) = kinds::init_command(&found, &data_dir, &secret) {
                init.current_dir(self.root.path());
                let what = format!("preparing {}'s data directory", kind.service().name());
                let done = run_to_end(init, self.run_as.as_ref(), &log, &what).await;
                if kind == ServerKind::Postgres {
                    let _ = std::fs::remove_file(&secret);
                }
                done?;
            }
        }
        let mut settings = kinds::default_settings(kind);
        for (k, v) in options.settings {
            settings.retain(|(k2, _)| *k2 != k);
            settings.push((k, v));
        }
        let port = match options.port {
            Some(p) => p,
            None => free_port()?,
        };
        let server = Arc::new(ManagedServer {
            kind,
            name,
            found,
            root: self.root.clone(),
            data_dir,
            log,
            port,
            run_as: self.run_as.clone(),
            settings,
            version,
            child: Arc::new(Mutex::new(None)),
            password,
        });
        let started = server.start_again().await;
        if kind == ServerKind::Mysql {
            // Read on the first start only: the password is in the data directory now.
            let _ = std::fs::remove_file(&secret);
        }
        started?;
        tracing::debug!(kind = kind.as_str(), url = %super::redact_url(&server.url()), version = %server.version, "managed server ready");
        register(&server);
        remember(&server);
        self.servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(server.clone());
        Ok(server)
    }

    /// Every server started in this set, in start order.
    pub fn servers(&self) -> Vec<Arc<ManagedServer>> {
        self.servers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The first server of `kind` started in this set.
    pub fn get(&self, kind: ServerKind) -> Option<Arc<ManagedServer>> {
        self.servers().into_iter().find(|s| s.kind == kind)
    }

    /// Stops every server (cleanly, newest first) and removes the directory.
    pub async fn shutdown(self) {
        let servers = self.servers();
        for s in servers.iter().rev() {
            s.stop().await;
        }
        // Drop removes the root.
    }
}

impl Drop for ManagedSet {
    fn drop(&mut self) {
        let servers = std::mem::take(&mut *self.servers.lock().unwrap_or_else(|e| e.into_inner()));
        for s in servers.iter().rev() {
            s.stop_blocking();
            unregister(&s.url());
        }
    }
}

impl ManagedServer {
    /// Its kind.
    pub fn kind(&self) -> ServerKind {
        self.kind
    }

    /// Its name in the set (data directory and log file names).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The URL without a database, with the server's random password
    /// (`postgres://postgres:PW@127.0.0.1:PORT`, `mysql://root:PW@127.0.0.1:PORT`,
    /// `redis://:PW@127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        kinds::base_url(self.kind, self.port, &self.password)
    }

    /// The superuser's password (a replica's tools log in with it, through their
    /// environment).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The URL of database `name` on it (created on first connect by the store).
    pub fn database_url(&self, name: &str) -> String {
        format!("{}/{name}", self.url())
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server process's id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.lock().as_ref().map(Child::id)
    }

    /// Its data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Its log (stdout and stderr of every start, appended).
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The directory of its binary (the same version's tools: `pg_basebackup`, `pg_ctl`).
    pub fn bin_dir(&self) -> &Path {
        self.found.bin_dir()
    }

    /// What `--version` said.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The settings it runs with (the command line's, in order).
    pub fn config(&self) -> &[(String, String)] {
        &self.settings
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        self.child.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts the server process again on its port and data directory (after
    /// [`Self::kill9`]: crash recovery) and waits until it answers. Does nothing if it runs.
    pub async fn start_again(&self) -> anyhow::Result<()> {
        if self
            .lock()
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
        {
            return Ok(());
        }
        let log = open_log(&self.log)?;
        let mut cmd = kinds::server_command(
            &self.found,
            &self.data_dir,
            self.root.path(),
            &self.name,
            self.port,
            &self.settings,
        );
        cmd.current_dir(self.root.path())
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log));
        process::prepare(&mut cmd, self.run_as.as_ref());
        let child = process::spawn(cmd)
            .with_context(|| format!("starting {}", self.found.server().display()))?;
        self.root.register(
            &self.name,
            child.id(),
            &kinds::marker(self.kind, &self.data_dir, self.port),
        );
        *self.lock() = Some(child);
        let started = Instant::now();
        loop {
            let tried = tokio::time::timeout(
                Duration::from_secs(5),
                kinds::answers(self.kind, &self.url()),
            )
            .await;
            if matches!(tried, Ok(Ok(()))) {
                return Ok(());
            }
            if let Some(status) = self
                .lock()
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.root.unregister(&self.name);
                bail!(
                    "the managed {} exited during its start ({status}): {}",
                    self.kind.service().name(),
                    log_tail(&self.log)
                );
            }
            if started.elapsed() > READY_WITHIN {
                self.kill9();
                bail!(
                    "the managed {} on port {} did not answer within {} s: {}",
                    self.kind.service().name(),
                    self.port,
                    READY_WITHIN.as_secs(),
                    log_tail(&self.log)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL the server and every process of its group (PostgreSQL's backends too), reap
    /// it and wait (up to 10 s) until none of the group is left: a crash, no shutdown, no
    /// final fsync. Idempotent.
    pub fn kill9(&self) {
        if let Some(mut c) = self.lock().take() {
            kill_group(&mut c);
        }
        self.root.unregister(&self.name);
    }

    /// A clean stop (PostgreSQL's fast shutdown, SIGTERM for the others), SIGKILL after
    /// 30 s. Idempotent.
    pub async fn stop(&self) {
        let child = self.child.clone();
        let kind = self.kind;
        let _ = tokio::task::spawn_blocking(move || stop_child(&child, kind)).await;
        self.root.unregister(&self.name);
    }

    fn stop_blocking(&self) {
        stop_child(&self.child, self.kind);
        self.root.unregister(&self.name);
    }

    /// A clean stop, then a start on the same port and data directory.
    pub async fn restart(&self) -> anyhow::Result<()> {
        self.stop().await;
        self.start_again().await
    }

    /// Sends `signal` to the server process (e.g. SIGSTOP/SIGCONT to freeze it).
    pub fn signal(&self, signal: Signal) -> anyhow::Result<()> {
        let pid = self.pid().context("the server is not running")?;
        kill(Pid::from_raw(pid as i32), signal)?;
        Ok(())
    }
}

fn stop_child(child: &Mutex<Option<Child>>, kind: ServerKind) {
    let mut guard = child.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut c) = guard.take() else {
        return;
    };
    if c.try_wait().ok().flatten().is_some() {
        return;
    }
    let _ = kill(Pid::from_raw(c.id() as i32), Signal::SIGCONT);
    let _ = kill(Pid::from_raw(c.id() as i32), kinds::stop_signal(kind));
    let deadline = Instant::now() + STOP_WITHIN;
    while Instant::now() < deadline {
        if c.try_wait().ok().flatten().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    kill_group(&mut c);
}

/// SIGKILL the process group `c` leads (the server and its children), reap `c`, then wait up
/// to 10 s for the rest of the group to go (a new PostgreSQL refuses to start while an old
/// backend still holds the shared memory).
fn kill_group(c: &mut Child) {
    let group = Pid::from_raw(c.id() as i32);
    // Found before the kill: once the server is gone its children belong to init.
    let below = process::descendants(c.id());
    let _ = nix::sys::signal::killpg(group, Signal::SIGKILL);
    for &p in &below {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
    let _ = c.kill();
    let _ = c.wait();
    // Until every one has exited: a PostgreSQL started again while an old backend still holds
    // the shared memory refuses to start ("pre-existing shared memory block is still in use").
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && (nix::sys::signal::killpg(group, None).is_ok()
            || below.iter().any(|&p| !process::exited(p)))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` (a data directory's set-up) to its end as `run_as`, output to `log`.
async fn run_to_end(
    mut cmd: std::process::Command,
    run_as: Option<&RunAs>,
    log: &Path,
    what: &str,
) -> anyhow::Result<()> {
    let file = open_log(log)?;
    cmd.stdout(Stdio::from(file.try_clone()?))
        .stderr(Stdio::from(file));
    process::prepare(&mut cmd, run_as);
    let mut child = process::spawn(cmd).with_context(|| format!("{what}: starting"))?;
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .context("waiting")??;
    if !status.success() {
        bail!("{what} failed ({status}): {}", log_tail(log));
    }
    Ok(())
}

/// A log in the root, appended to; never opened through a symlink.
fn open_log(path: &Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))
}

/// The last lines of a log, for an error message.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(5)..].join(" | ");
    format!("{} (log {})", tail, path.display())
}

/// A free loopback port (bound, then released for the server).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("finding a free loopback port")?
        .port())
}

/// The error for server kinds whose binaries are not installed: what was looked for, the
/// packages to install, and the compose alternative (exit 3).
pub fn missing(kinds: &[ServerKind]) -> super::Unreachable {
    let parts: Vec<String> = kinds
        .iter()
        .map(|k| {
            format!(
                "{} ({} not found on PATH or in the usual places; install it: {})",
                k.service().name(),
                binaries::looked_for(*k),
                binaries::packages(*k)
            )
        })
        .collect();
    super::Unreachable {
        service: kinds.first().map(|k| k.service()),
        message: format!(
            "no server binaries to start managed servers for {}; or start the servers in \
             containers with `docker compose up -d --wait` and pass --services external",
            parts.join("; ")
        ),
    }
}
