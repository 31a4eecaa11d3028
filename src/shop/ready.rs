//! The readiness channel of a shop another process starts: the child (`serve --ready-fd N`)
//! writes one JSON line, [`Readiness`], on an inherited pipe made for it and closes it: the
//! address it bound, its version, pid and runtime workers, or why it stopped before serving.
//! Nothing else is on that pipe, and stdout stays the user's.
//!
//! The parent ([`ReadyPipe`]) makes the pipe close-on-exec, clears that flag on the write end
//! in the child only (between fork and exec, so no other child of the parent inherits it),
//! closes its own write end once the child is started, and waits: a line is the answer, an end
//! of file without one means the child died (or closed it) before saying anything.

use serde::{Deserialize, Serialize};
use std::io::Write;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// The child's one message on its readiness channel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Readiness {
    /// Listening at `address` and serving.
    Ready {
        address: SocketAddr,
        version: String,
        pid: u32,
        /// Its runtime's worker threads (0: a shop that did not say).
        #[serde(default)]
        workers: usize,
    },
    /// Stopped before serving: the error it printed and the exit code it leaves with.
    Failed {
        error: String,
        exit_code: i32,
        version: String,
        pid: u32,
    },
}

/// This binary's version, as a child reports it.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

impl Readiness {
    /// Ready at `address` (this process, this version, the runtime it runs on).
    pub fn ready(address: SocketAddr) -> Readiness {
        Readiness::Ready {
            address,
            version: VERSION.into(),
            pid: std::process::id(),
            workers: tokio::runtime::Handle::try_current().map_or(0, |h| h.metrics().num_workers()),
        }
    }

    /// Stopped with `error` and `exit_code` (this process, this version).
    pub fn failed(error: String, exit_code: i32) -> Readiness {
        Readiness::Failed {
            error,
            exit_code,
            version: VERSION.into(),
            pid: std::process::id(),
        }
    }
}

/// The child's end: the descriptor `serve --ready-fd N` names.
#[derive(Debug)]
pub struct ReadySender(std::fs::File);

impl ReadySender {
    /// Takes descriptor `fd`, which this process inherited open; it is closed on exec from
    /// now on (a server this process starts does not hold the channel open).
    pub fn take(fd: RawFd) -> anyhow::Result<ReadySender> {
        anyhow::ensure!(
            fd > 2,
            "--ready-fd {fd}: 0, 1 and 2 are stdin, stdout and stderr; give the number of a \
             descriptor of its own (3 or more)"
        );
        // SAFETY: fcntl on a number only reads and sets its flags; an unknown one fails.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        anyhow::ensure!(
            flags >= 0,
            "--ready-fd {fd}: not an open file descriptor of this process"
        );
        // SAFETY: as above, on a descriptor just seen open.
        unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
        // SAFETY: the descriptor is open and handed to this process for this use only; nothing
        // else in the process owns it.
        Ok(ReadySender(unsafe { std::fs::File::from_raw_fd(fd) }))
    }

    /// Writes `readiness` as one line and closes the channel (a parent gone is no error here).
    pub fn send(mut self, readiness: &Readiness) {
        let line = serde_json::to_string(readiness).expect("a Readiness always serializes");
        let _ = writeln!(self.0, "{line}");
    }
}

/// Why no [`Readiness`] came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Silence {
    /// The channel closed with nothing on it: the child exited (or closed it) first.
    Closed,
    /// Nothing within the wait.
    TimedOut(Duration),
    /// Something that is no [`Readiness`] (the reason, never the text).
    Unreadable(String),
}

/// The parent's end of a child's readiness channel.
#[derive(Debug)]
pub struct ReadyPipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl ReadyPipe {
    /// A new pipe, both ends close-on-exec.
    pub fn new() -> std::io::Result<ReadyPipe> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array it is given.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both were just opened by pipe2 and are owned here only.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok(ReadyPipe { read, write })
    }

    /// Lets the child `cmd` starts inherit the write end; returns its number there (the value
    /// of `--ready-fd`).
    pub fn hand_to(&self, cmd: &mut tokio::process::Command) -> RawFd {
        let fd = self.write.as_raw_fd();
        // SAFETY: between fork and exec only fcntl, a system call, on a number copied before.
        unsafe {
            cmd.pre_exec(move || {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                if flags < 0 || libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        fd
    }

    /// After the child started: closes this process's write end and waits up to `within` for
    /// the child's one line (the line is the answer: the channel need not close after it).
    pub async fn wait(self, within: Duration) -> Result<Readiness, Silence> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt};
        let ReadyPipe { read, write } = self;
        drop(write);
        let unreadable = |e: std::io::Error| Silence::Unreadable(e.to_string());
        let receiver = tokio::net::unix::pipe::Receiver::from_owned_fd(read).map_err(unreadable)?;
        let mut line = Vec::new();
        let mut limited = tokio::io::BufReader::new(receiver.take(64 * 1024));
        match tokio::time::timeout(within, limited.read_until(b'\n', &mut line)).await {
            Err(_) => return Err(Silence::TimedOut(within)),
            Ok(Err(e)) => return Err(unreadable(e)),
            Ok(Ok(_)) => {}
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Err(Silence::Closed);
        }
        serde_json::from_slice(&line).map_err(|e| {
            Silence::Unreadable(format!("not a readiness report ({:?})", e.classify()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readiness_report_reads_back_with_its_state_named() {
        let ready = Readiness::ready("127.0.0.1:4242".parse().unwrap());
        let text = serde_json::to_string(&ready).unwrap();
        assert!(
            text.starts_with(r#"{"state":"ready","address":"127.0.0.1:4242","#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Readiness>(&text).unwrap(), ready);
        let failed = Readiness::failed("no database".into(), 3);
        let text = serde_json::to_string(&failed).unwrap();
        assert_eq!(serde_json::from_str::<Readiness>(&text).unwrap(), failed);
    }

    #[tokio::test]
    async fn a_channel_closed_without_a_word_is_silence_not_a_report() {
        let pipe = ReadyPipe::new().unwrap();
        let copy = pipe.write.try_clone().unwrap();
        let waiting = tokio::spawn(pipe.wait(Duration::from_secs(30)));
        drop(copy);
        assert_eq!(waiting.await.unwrap(), Err(Silence::Closed));
    }

    #[tokio::test]
    async fn a_sender_writes_one_line_the_pipe_reads() {
        let pipe = ReadyPipe::new().unwrap();
        let fd = pipe.write.try_clone().unwrap();
        let sender = ReadySender::take(std::os::fd::IntoRawFd::into_raw_fd(fd)).unwrap();
        let waiting = tokio::spawn(pipe.wait(Duration::from_secs(30)));
        let sent = Readiness::ready("127.0.0.1:1".parse().unwrap());
        sender.send(&sent);
        assert_eq!(waiting.await.unwrap(), Ok(sent));
        assert!(
            ReadySender::take(1).is_err(),
            "stdout is not a readiness channel"
        );
    }
}
