//! stdout and stderr as cargo writes them: when the reader goes away (`oversell completions
//! bash | head -3`), the rest of that stream is dropped quietly and the command ends as it
//! would have (its servers stopped, its exit code kept), never with a panic. Every line the
//! binary prints goes through [`out!`], [`outln!`], [`eout!`] or [`eoutln!`] (or, from the
//! binary, [`write_stderr`]); clippy's `disallowed_macros`
//! (clippy.toml) keeps `print!` and `eprint!`, which panic on a closed pipe, out of the crate.

use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether stdout's reader went away.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
/// Whether stderr's reader went away.
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `bytes` to stdout; nothing once its reader went away.
pub fn write_stdout(bytes: &[u8]) {
    write_to(
        &mut std::io::stdout().lock(),
        bytes,
        &STDOUT_CLOSED,
        "stdout",
    );
}

/// Writes `bytes` to stderr; nothing once its reader went away.
pub fn write_stderr(bytes: &[u8]) {
    write_to(
        &mut std::io::stderr().lock(),
        bytes,
        &STDERR_CLOSED,
        "stderr",
    );
}

/// One write and flush. A closed pipe marks the stream closed, silently; any other failure
/// (a full disk behind a redirect) is said once on stderr and closes the stream too.
fn write_to(w: &mut impl Write, bytes: &[u8], closed: &AtomicBool, name: &str) {
    if closed.load(Ordering::Relaxed) {
        return;
    }
    let Err(e) = w.write_all(bytes).and_then(|()| w.flush()) else {
        return;
    };
    closed.store(true, Ordering::Relaxed);
    if e.kind() != ErrorKind::BrokenPipe && name == "stdout" {
        write_stderr(
            format!("error: writing to {name}: {e}; the rest of it is dropped\n").as_bytes(),
        );
    }
}

/// stdout as a [`Write`] for APIs that take one (`clap_complete::generate`): never fails, so
/// they never panic on a closed pipe.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stdout;

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        write_stdout(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `print!` that ends quietly on a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::console::write_stdout(format!($($arg)*).as_bytes())
    };
}

/// `println!` that ends quietly on a closed pipe.
macro_rules! outln {
    () => {
        $crate::console::write_stdout(b"\n")
    };
    ($($arg:tt)*) => {
        $crate::console::write_stdout((format!($($arg)*) + "\n").as_bytes())
    };
}

/// `eprint!` that ends quietly on a closed pipe.
macro_rules! eout {
    ($($arg:tt)*) => {
        $crate::console::write_stderr(format!($($arg)*).as_bytes())
    };
}

/// `eprintln!` that ends quietly on a closed pipe.
macro_rules! eoutln {
    () => {
        $crate::console::write_stderr(b"\n")
    };
    ($($arg:tt)*) => {
        $crate::console::write_stderr((format!($($arg)*) + "\n").as_bytes())
    };
}

pub(crate) use {eout, eoutln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that went away.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_closes_the_stream_quietly() {
        let closed = AtomicBool::new(false);
        write_to(&mut Closed, b"one\n", &closed, "a pipe");
        assert!(closed.load(Ordering::Relaxed));
        // Later writes are dropped without another attempt.
        write_to(&mut Closed, b"two\n", &closed, "a pipe");
    }
}
