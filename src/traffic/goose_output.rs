//! Goose's own prints kept off the terminal. Goose 0.19 writes some lines with `println!`
//! whatever its configuration says (`N users launched.` once every sender has started, with
//! `quiet` and `no_print_metrics` set), so they would land on stdout above the result table and
//! break a progress bar's redraw. While the binary runs a goose attack, the process's stdout
//! (fd 1) points at the run's log instead — `goose.log` in the report folder, or `/dev/null`
//! when there is none — and is put back when the last attack ends.
//!
//! Only the binary turns this on ([`enable`]): a test binary's stdout carries the test
//! harness's own lines, which must not move.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// What the diversion needs to know and undo.
struct State {
    enabled: bool,
    /// Where goose's lines go: the current run's `goose.log`.
    log: Option<PathBuf>,
    /// Attacks running now (the first points fd 1 away, the last puts it back).
    active: usize,
    /// The real stdout while it is pointed away.
    saved: Option<OwnedFd>,
}

static STATE: Mutex<State> = Mutex::new(State {
    enabled: false,
    log: None,
    active: 0,
    saved: None,
});

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Turns the diversion on for this process (the binary does, before any command runs).
pub fn enable() {
    state().enabled = true;
}

/// Names the current run's log: goose's lines of the attacks that start after this go to
/// `goose.log` in `dir`.
pub fn log_in(dir: &Path) {
    state().log = Some(dir.join("goose.log"));
}

/// While held, goose's prints go to the run's log (when [`enable`]d); dropping the last one
/// puts stdout back.
#[must_use]
pub struct Diverted(bool);

/// Points stdout at the run's log for the length of a goose attack. A failure to do so is
/// logged and leaves stdout alone: goose's lines are noise, never worth failing a run for.
pub fn divert() -> Diverted {
    let mut s = state();
    if !s.enabled {
        return Diverted(false);
    }
    if s.active == 0 {
        match point_away(s.log.as_deref()) {
            Ok(saved) => s.saved = Some(saved),
            Err(e) => {
                tracing::warn!("goose's prints stay on stdout: {e}");
                return Diverted(false);
            }
        }
    }
    s.active += 1;
    Diverted(true)
}

impl Drop for Diverted {
    fn drop(&mut self) {
        if !self.0 {
            return;
        }
        let mut s = state();
        s.active -= 1;
        if s.active == 0 {
            if let Some(saved) = s.saved.take() {
                let _ = std::io::stdout().flush();
                if let Err(e) = nix::unistd::dup2_stdout(saved.as_fd()) {
                    tracing::warn!("stdout could not be put back after the attack: {e}");
                }
            }
        }
    }
}

/// Flushes stdout, keeps a duplicate of it, and points fd 1 at `log` (appended) or
/// `/dev/null`; returns the duplicate.
fn point_away(log: Option<&Path>) -> std::io::Result<OwnedFd> {
    let sink: File = match log {
        Some(path) => OpenOptions::new().create(true).append(true).open(path)?,
        None => OpenOptions::new().write(true).open("/dev/null")?,
    };
    std::io::stdout().flush()?;
    let saved = nix::unistd::dup(std::io::stdout().as_fd())?;
    nix::unistd::dup2_stdout(sink.as_fd())?;
    Ok(saved)
}
