//! How a managed server's process is started so that it never outlives the harness: every
//! server binary is started directly as a child (never through a daemonising wrapper such as
//! `pg_ctl`), in a process group of its own (a ctrl-c on the terminal reaches the harness, which
//! then stops its servers in order), from one long-lived thread of this process with a
//! parent-death signal (Linux `PR_SET_PDEATHSIG`: SIGKILL when that thread, so this process,
//! dies), and under an unprivileged user of their own when the harness runs as root
//! (PostgreSQL refuses root; [`SERVICES_USER`], created if need be, so that no other service's
//! user, such as the machine's `postgres`, can read or write their files).
//!
//! The parent-death signal belongs to the thread that forked the child, not the process: a
//! server started from a worker thread that later exits (a test's runtime, tokio's blocking
//! pool) would be killed with it. So every spawn goes through [`spawn`], whose thread lives as
//! long as the process.
//!
//! A [`Root`] is the directory all of one set's data lives in, named
//! `oversell-services-<pid>-<unix seconds>-<random>` under the temp dir so that a later run can
//! tell whose it is and how old, and removes it when that process is gone (a harness killed
//! with -9 on a system without parent-death signals, or whose watchdog was killed too). The
//! root belongs to the harness's user (mode 0711 when the servers run as another user: they
//! reach their own data directory, 0700, but can create nothing beside it), so the logs the
//! harness writes there cannot be swapped for symlinks by the servers' user.
//!
//! Its watchdog is a `sh` reading a pipe from this process, which tells it each server it
//! starts (`add PID MARKER`) and stops (`del PID`): when the pipe closes without `done` (this
//! process exited, however) it SIGKILLs the process groups it was told of, and only those,
//! each only if its command line still holds its marker, then removes the root. It reads no
//! pid from any file, so nothing the servers' user writes can aim it at another process.

use anyhow::Context;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The name every root starts with.
const ROOT_PREFIX: &str = "oversell-services-";

/// How old a dead process's root must be before a later run removes it.
const STALE_AFTER: Duration = Duration::from_secs(60);

/// The unprivileged user the servers run as when the harness is root.
#[derive(Debug, Clone)]
pub struct RunAs {
    /// The user's name (for messages).
    pub name: String,
    uid: nix::unistd::Uid,
    gid: nix::unistd::Gid,
}

/// Environment variable naming the user the servers run as when the harness is root.
pub const USER_ENV: &str = "OVERSELL_SERVICES_USER";

/// The system user the servers run as when the harness is root and [`USER_ENV`] names none:
/// created on first use, shared with no other service (not the machine's `postgres` or `mysql`,
/// whose database superusers could otherwise read and rewrite the managed servers' files with
/// `pg_read_file` or `COPY … TO PROGRAM`).
pub const SERVICES_USER: &str = "oversell";

/// `None` when the harness is not root (the servers run as the harness's user); else the user
/// [`USER_ENV`] names, else [`SERVICES_USER`], created as a system user (no home, no login
/// shell, a group of its own) when it does not exist yet.
pub fn run_as() -> anyhow::Result<Option<RunAs>> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    let (name, create) = match std::env::var(USER_ENV) {
        Ok(u) if !u.is_empty() => (u, false),
        _ => (SERVICES_USER.to_string(), true),
    };
    let found = match lookup(&name) {
        Some(u) => u,
        None if create => create_user(&name)?,
        None => anyhow::bail!("{USER_ENV} names the user {name:?}, which does not exist"),
    };
    anyhow::ensure!(
        !found.uid.is_root(),
        "the managed servers cannot run as root (PostgreSQL refuses): {name:?} is uid 0"
    );
    Ok(Some(found))
}

/// The user called `name`, if it exists.
fn lookup(name: &str) -> Option<RunAs> {
    let u = nix::unistd::User::from_name(name).ok()??;
    Some(RunAs {
        name: u.name,
        uid: u.uid,
        gid: u.gid,
    })
}

/// Creates system user `name` (one process at a time: another run may be creating it too,
/// and `useradd` refuses while `/etc/passwd` is locked).
fn create_user(name: &str) -> anyhow::Result<RunAs> {
    static CREATING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = CREATING.lock().unwrap_or_else(|e| e.into_inner());
    let shell = ["/usr/sbin/nologin", "/sbin/nologin", "/bin/false"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/bin/false");
    let tries: [Vec<&str>; 2] = [
        vec![
            "useradd",
            "--system",
            "--user-group",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            shell,
            name,
        ],
        // BusyBox (Alpine).
        vec![
            "adduser",
            "-S",
            "-D",
            "-H",
            "-h",
            "/nonexistent",
            "-s",
            shell,
            name,
        ],
    ];
    let mut why = Vec::new();
    for attempt in 0..20u64 {
        if let Some(u) = lookup(name) {
            return Ok(u);
        }
        for args in &tries {
            match Command::new(args[0]).args(&args[1..]).output() {
                Ok(out) if out.status.success() => break,
                Ok(out) => why.push(format!(
                    "{}: {}",
                    args[0],
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(e) => why.push(format!("{}: {e}", args[0])),
            }
        }
        if let Some(u) = lookup(name) {
            return Ok(u);
        }
        // Another process holds the password file's lock: try again shortly.
        std::thread::sleep(Duration::from_millis(50 * (attempt + 1)));
    }
    anyhow::bail!(
        "running as root, the managed servers need a user of their own, and creating the \
         system user {name:?} failed ({}): create it (useradd --system {name}), or name \
         another with {USER_ENV}",
        why.last().map_or("no tool", String::as_str)
    )
}

impl RunAs {
    /// Gives `path` (and, for a directory, nothing below it: call on each) to this user.
    pub fn chown(&self, path: &Path) -> anyhow::Result<()> {
        nix::unistd::chown(path, Some(self.uid), Some(self.gid))
            .with_context(|| format!("giving {} to user {}", path.display(), self.name))
    }
}

/// Sets up `cmd` as a managed server child: its own process group, the parent-death signal,
/// and the unprivileged user.
pub fn prepare(cmd: &mut Command, run_as: Option<&RunAs>) {
    cmd.process_group(0).stdin(Stdio::null());
    crate::placement::below_generator(cmd);
    let ids = run_as.map(|r| (r.uid, r.gid));
    if let Some(r) = run_as {
        cmd.env("USER", &r.name).env("LOGNAME", &r.name);
    }
    #[cfg(target_os = "linux")]
    let parent = nix::unistd::Pid::this();
    // SAFETY: between fork and exec the closure only makes system calls (prctl, getppid,
    // setgroups, setgid, setuid); it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            #[cfg(target_os = "linux")]
            {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
                // The harness died between fork and prctl: the signal will never come.
                if nix::unistd::getppid() != parent {
                    return Err(std::io::Error::other("the harness is gone"));
                }
            }
            if let Some((uid, gid)) = ids {
                #[cfg(not(target_os = "macos"))]
                nix::unistd::setgroups(&[gid])?;
                nix::unistd::setgid(gid)?;
                nix::unistd::setuid(uid)?;
            }
            Ok(())
        });
    }
}

/// Makes the child get SIGKILL when this process dies (Linux `PR_SET_PDEATHSIG`; elsewhere
/// nothing). For a child spawned from a thread that lives as long as the process (the main
/// thread, a runtime's worker): see the module's note.
pub fn die_with_parent(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = nix::unistd::Pid::this();
        // SAFETY: only system calls between fork and exec (prctl, getppid).
        unsafe {
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
                if nix::unistd::getppid() != parent {
                    return Err(std::io::Error::other("the harness is gone"));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

type Job = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from the one long-lived spawner thread (see the module's note on the
/// parent-death signal).
pub fn spawn(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    let tx = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("oversell-services-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("starting the managed servers' spawner thread");
        tx
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    tx.send((cmd, reply_tx))
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

/// The directory one set's data lives in, and its watchdog.
#[derive(Debug)]
pub struct Root {
    path: PathBuf,
    /// The write end of the watchdog's pipe (closing it sets the watchdog off).
    watchdog_pipe: std::sync::Mutex<Option<ChildStdin>>,
    watchdog: std::sync::Mutex<Option<Child>>,
    /// The pid the watchdog was told of for each server name.
    told: std::sync::Mutex<std::collections::HashMap<String, u32>>,
}

impl Root {
    /// Removes stale roots of dead processes, then makes a new one with its watchdog: only
    /// this process's user may write in it (`shared`: servers of another user may traverse
    /// it to their data directory, mode 0711; else 0700).
    pub fn create(shared: bool) -> anyhow::Result<Root> {
        let tmp = std::env::temp_dir();
        sweep_stale(&tmp);
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let path = tmp.join(format!(
            "{ROOT_PREFIX}{}-{secs}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(if shared { 0o711 } else { 0o700 })
                .create(&path)
                .with_context(|| {
                    format!("creating the managed servers' directory {}", path.display())
                })?;
        }
        let (pipe, watchdog) = match start_watchdog(&path) {
            Ok((pipe, child)) => (Some(pipe), Some(child)),
            Err(e) => {
                tracing::warn!(error = %e, "no watchdog for {}: a kill -9 leaves it for the next run", path.display());
                (None, None)
            }
        };
        Ok(Root {
            path,
            watchdog_pipe: std::sync::Mutex::new(pipe),
            watchdog: std::sync::Mutex::new(watchdog),
            told: Default::default(),
        })
    }

    /// One line to the watchdog (a watchdog that is gone: nothing to tell).
    fn tell(&self, line: &str) {
        if let Ok(mut pipe) = self.watchdog_pipe.lock() {
            if let Some(p) = pipe.as_mut() {
                let _ = p.write_all(line.as_bytes()).and_then(|()| p.flush());
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tells the watchdog of a server's pid (with a string its command line contains, so a
    /// reused pid is never killed).
    pub fn register(&self, name: &str, pid: u32, marker: &str) {
        let marker = marker.replace(['\n', '\r'], " ");
        self.tell(&format!("add {pid} {marker}\n"));
        let old = self.lock_told().insert(name.to_string(), pid);
        if let Some(old) = old.filter(|o| *o != pid) {
            self.tell(&format!("del {old}\n"));
        }
    }

    /// Tells the watchdog to forget a server that stopped.
    pub fn unregister(&self, name: &str) {
        if let Some(pid) = self.lock_told().remove(name) {
            self.tell(&format!("del {pid}\n"));
        }
    }

    fn lock_told(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, u32>> {
        self.told.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(error = %e, "removing {}", self.path.display());
            }
        }
        let pipe = self.watchdog_pipe.get_mut().map(Option::take);
        if let Ok(Some(mut pipe)) = pipe {
            let _ = pipe.write_all(b"done\n");
        }
        if let Ok(Some(mut w)) = self.watchdog.get_mut().map(Option::take) {
            let _ = w.wait();
        }
    }
}

/// The watchdog: keeps the servers it is told of (`add PID MARKER`, `del PID`) until `done`
/// (the harness stopped them itself) or the end of its stdin (the harness is gone); then it
/// SIGKILLs the process group of each server it still holds whose command line still holds
/// its marker, and removes the root (a few tries: a dying server may still write).
const WATCHDOG: &str = r#"
trap '' INT TERM HUP
list=""
while read -r cmd pid marker; do
  case "$cmd" in
    done) exit 0 ;;
    add|del) case "$pid" in *[!0-9]*|"") continue ;; esac ;;
    *) continue ;;
  esac
  if [ "$cmd" = add ]; then
    list="$list
$pid $marker"
  else
    list=$(printf '%s\n' "$list" | grep -v "^$pid ")
  fi
done
printf '%s\n' "$list" | while read -r pid marker; do
  [ -n "$pid" ] || continue
  if [ -r "/proc/$pid/cmdline" ]; then
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -qF -- "$marker" && kill -9 "-$pid"
  else
    ps -o args= -p "$pid" 2>/dev/null | grep -qF -- "$marker" && kill -9 "-$pid"
  fi
done 2>/dev/null
for _ in 1 2 3 4 5 6 7 8 9 10; do
  rm -rf "$1" 2>/dev/null
  [ -e "$1" ] || exit 0
  sleep 0.3
done
"#;

fn start_watchdog(root: &Path) -> anyhow::Result<(ChildStdin, Child)> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(WATCHDOG)
        .arg("oversell-services-watchdog")
        .arg(root)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .context("starting the watchdog (sh)")?;
    let pipe = child.stdin.take().context("the watchdog's stdin")?;
    Ok((pipe, child))
}

/// The owner pid and creation time (unix seconds) in a root's name.
pub fn parse_root_name(name: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix(ROOT_PREFIX)?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    let secs = parts.next()?.parse().ok()?;
    Some((pid, secs))
}

/// Whether a process `pid` exists on this machine.
pub fn alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// The state letter and parent of `pid` from `/proc/<pid>/stat` (Linux; `None` elsewhere or
/// when it is gone).
fn stat(pid: u32) -> Option<(char, u32)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name in parentheses may hold spaces; the fields after its last ')' do not.
    let mut fields = s.rsplit(')').next()?.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let parent = fields.next()?.parse().ok()?;
    Some((state, parent))
}

/// Every process below `pid` (its children, theirs, ...), read from `/proc`. PostgreSQL's
/// backends each lead a session of their own, so a signal to the postmaster's process group
/// does not reach them: a crash kills these too.
pub fn descendants(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: Vec<(u32, u32)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| stat(p).map(|(_, parent)| (p, parent)))
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parents.iter().filter(|(_, q)| *q == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// Whether `pid` has exited (gone, or a zombie waiting to be reaped: it holds nothing).
pub fn exited(pid: u32) -> bool {
    !alive(pid) || stat(pid).is_some_and(|(state, _)| state == 'Z')
}

/// Removes roots under `tmp` whose owner is gone and that are older than [`STALE_AFTER`].
pub fn sweep_stale(tmp: &Path) {
    let Ok(rd) = std::fs::read_dir(tmp) else {
        return;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for entry in rd.filter_map(|e| e.ok()) {
        let name = entry.file_name();
        let Some((pid, secs)) = name.to_str().and_then(parse_root_name) else {
            continue;
        };
        if now.saturating_sub(secs) < STALE_AFTER.as_secs() || alive(pid) {
            continue;
        }
        match std::fs::remove_dir_all(entry.path()) {
            Ok(()) => tracing::info!(
                "removed {} (left by process {pid}, which is gone)",
                entry.path().display()
            ),
            Err(e) => tracing::warn!(error = %e, "removing stale {}", entry.path().display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_name_tells_its_owner_and_age() {
        assert_eq!(
            parse_root_name("oversell-services-4242-1764600000-0a1b2c3d"),
            Some((4242, 1_764_600_000))
        );
        assert_eq!(parse_root_name("oversell-run-x"), None);
        assert_eq!(parse_root_name("oversell-services-x-1"), None);
    }

    #[test]
    fn this_process_is_alive() {
        assert!(alive(std::process::id()));
    }

    #[test]
    fn a_dead_owners_old_root_is_swept_and_a_live_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid that cannot exist (above the kernel's pid_max limit).
        let dead = tmp
            .path()
            .join("oversell-services-2147483000-1000-00000000");
        let live = tmp.path().join(format!(
            "oversell-services-{}-1000-00000000",
            std::process::id()
        ));
        let young = tmp.path().join(format!(
            "oversell-services-2147483000-{}-00000000",
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_secs()
        ));
        for d in [&dead, &live, &young] {
            std::fs::create_dir(d).unwrap();
        }
        sweep_stale(tmp.path());
        assert!(!dead.exists());
        assert!(live.exists());
        assert!(young.exists());
    }
}
