//! The flag groups several commands share, found on a parsed command: `--json`/`--json-file`,
//! the output flags, the database and Redis flags; and `-v`/`-q`, which every command takes.

use super::{values, Command, ConnArgs, JsonArgs, OutputArgs};
use clap::Args;

/// `-v` and `-q`, on every command: how much goes to stderr.
#[derive(Debug, Args, Clone, Copy, Default)]
pub struct Verbosity {
    /// More log lines on stderr: -v debug, -vv trace (RUST_LOG, when set, decides instead).
    #[arg(short, long, action = clap::ArgAction::Count, global = true,
          conflicts_with = "quiet", help_heading = values::OUTPUT)]
    pub verbose: u8,
    /// Fewer lines on stderr: no progress bar or lines, log lines only for warnings and
    /// errors. Results, reports and errors are unchanged.
    #[arg(short, long, global = true, help_heading = values::OUTPUT)]
    pub quiet: bool,
}

impl Verbosity {
    /// The log filter these flags ask for (`RUST_LOG` overrides it).
    pub fn filter(self) -> &'static str {
        match (self.quiet, self.verbose) {
            (true, _) => "warn",
            (false, 0) => "warn,oversell=info",
            (false, 1) => "warn,oversell=debug",
            (false, _) => "info,oversell=trace",
        }
    }
}

impl Command {
    /// `--json` and `--json-file` of a command that has a result (serve serves, completions
    /// prints a script).
    pub(super) fn json(&self) -> Option<&JsonArgs> {
        match self {
            Command::Run(a) => Some(&a.scenario.output.json),
            Command::Compare(a) => Some(&a.scenario.output.json),
            Command::Gate(a) => Some(&a.plan.output.json),
            Command::Attack(a) => Some(&a.plan.output.json),
            Command::Merge(a) => Some(&a.output.json),
            Command::Selftest(a) => Some(&a.output.json),
            Command::Capacity(a) => Some(&a.output.json),
            Command::Diagnose(a) => Some(&a.output.json),
            Command::Sweep(a) => Some(&a.output.json),
            Command::Diff(a) => Some(&a.json),
            Command::Fit(a) => Some(&a.json),
            Command::Scenarios(a) => Some(&a.json),
            Command::Bench(b) => Some(b.json()),
            Command::Serve(_) | Command::Completions(_) => None,
        }
    }

    /// The output flags of a command that runs a scenario.
    pub(super) fn output_mut(&mut self) -> Option<&mut OutputArgs> {
        match self {
            Command::Run(a) => Some(&mut a.scenario.output),
            Command::Compare(a) => Some(&mut a.scenario.output),
            Command::Gate(a) => Some(&mut a.plan.output),
            Command::Attack(a) => Some(&mut a.plan.output),
            Command::Merge(a) => Some(&mut a.output),
            Command::Selftest(a) => Some(&mut a.output),
            Command::Capacity(a) => Some(&mut a.output),
            Command::Diagnose(a) => Some(&mut a.output),
            Command::Sweep(a) => Some(&mut a.output),
            Command::Serve(_)
            | Command::Diff(_)
            | Command::Fit(_)
            | Command::Bench(_)
            | Command::Scenarios(_)
            | Command::Completions(_) => None,
        }
    }

    /// The database and Redis flags of a command that has them.
    pub(super) fn conn_mut(&mut self) -> Option<&mut ConnArgs> {
        match self {
            Command::Serve(a) => Some(&mut a.conn),
            Command::Run(a) => Some(&mut a.conn),
            Command::Compare(a) => Some(&mut a.conn),
            Command::Gate(a) => Some(&mut a.conn),
            Command::Capacity(a) => Some(&mut a.conn),
            Command::Diagnose(a) => Some(&mut a.conn),
            Command::Sweep(a) => Some(&mut a.conn),
            Command::Selftest(a) => Some(&mut a.conn),
            Command::Merge(a) => Some(&mut a.conn),
            Command::Bench(b) => b.conn_mut(),
            Command::Attack(_)
            | Command::Diff(_)
            | Command::Fit(_)
            | Command::Scenarios(_)
            | Command::Completions(_) => None,
        }
    }
}
