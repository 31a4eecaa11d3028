//! Where the processes of a run are placed: the instrument must not compete with what it
//! measures.
//!
//! The processes the harness starts itself (reference shops, managed database and Redis
//! servers, the nemesis's private Redis) run below the generator's CPU priority: `nice`
//! [`CHILD_NICE`] (set between fork and exec, so every thread they start inherits it). On a
//! machine with [`SPLIT_FROM_CORES`] cores or more they also run on cores of their own (the
//! upper half), and the generator's threads on the lower half. Servers the user runs
//! (`--services external`, a foreign shop) are not touched; instead the generator raises its
//! own priority where the OS lets it ([`take_generator_place`]), its Linux *autogroup* too:
//! with autogroups on (most desktop and many server kernels), CPU is shared between terminal
//! sessions first and `nice` only orders the processes within one, so a database or a build
//! started from another session would otherwise get as much CPU as the whole run.
//! [`Placement::this`] says how a run was placed, for the report's metadata.

use serde::{Deserialize, Serialize};

/// How much nicer than the generator every child the harness starts is (at most 19): under
/// contention the kernel gives the generator about nine times a child's CPU share.
pub const CHILD_NICE: i32 = 10;

/// From this many cores on, the children and the generator get cores of their own.
pub const SPLIT_FROM_CORES: usize = 4;

/// How far the generator raises its own priority where the OS lets it (root, or
/// `CAP_SYS_NICE`, or an `RLIMIT_NICE` that allows it): servers the user runs (`--services
/// external`, the shop under rehearsal) stay at their own niceness, usually 0, and a database
/// busy on both cores would otherwise delay the sends it is measured by.
pub const GENERATOR_RAISE: i32 = 5;

/// How a run's processes were placed (`report.json`: `machine.placement`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Placement {
    /// The generator's niceness (this process's, as the OS reports it).
    pub generator_nice: i32,
    /// The niceness of the shops and servers the harness starts.
    pub children_nice: i32,
    /// The generator's niceness before it raised itself ([`GENERATOR_RAISE`]); `None` when it
    /// did not try (the `serve` command) or the OS refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raised_from: Option<i32>,
    /// The niceness of the generator's autogroup (its session's share of the CPU against other
    /// sessions'); `None` where the kernel has no autogroups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autogroup_nice: Option<i32>,
    /// The autogroup's niceness before the generator raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autogroup_raised_from: Option<i32>,
    /// The cores the generator runs on (`None`: every core, shared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_cores: Option<String>,
    /// The cores the harness's children run on (`None`: every core, shared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children_cores: Option<String>,
}

impl Placement {
    /// This machine's placement.
    pub fn this() -> Placement {
        let split = split();
        Placement {
            generator_nice: own_nice(),
            children_nice: child_nice(),
            raised_from: RAISED_FROM.get().copied().flatten(),
            autogroup_nice: autogroup_nice(),
            autogroup_raised_from: AUTOGROUP.get().copied().flatten().map(|(from, _)| from),
            generator_cores: split.clone().map(|(g, _)| cores_text(g)),
            children_cores: split.map(|(_, c)| cores_text(c)),
        }
    }

    /// One line for people: `generator nice 0, its children nice 10 (cores shared)`.
    pub fn describe(&self) -> String {
        let cores = match (&self.generator_cores, &self.children_cores) {
            (Some(g), Some(c)) => format!("generator on cores {g}, children on cores {c}"),
            _ => "cores shared".into(),
        };
        let mut raised = match self.raised_from {
            Some(from) => format!(" (raised from {from})"),
            None => String::new(),
        };
        if let Some(g) = self.autogroup_nice {
            raised.push_str(&format!(", its session's autogroup nice {g}"));
            if let Some(from) = self.autogroup_raised_from {
                raised.push_str(&format!(" (raised from {from})"));
            }
        }
        format!(
            "generator nice {}{raised}, the shops and servers it starts nice {} ({cores})",
            self.generator_nice, self.children_nice
        )
    }
}

/// The lower and upper halves of the cores, when there are enough to split.
fn split() -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (n >= SPLIT_FROM_CORES).then_some((0..n / 2, n / 2..n))
}

fn cores_text(r: std::ops::Range<usize>) -> String {
    format!("{}-{}", r.start, r.end - 1)
}

/// The niceness of a child: [`CHILD_NICE`] below this process, at most 19.
fn child_nice() -> i32 {
    (own_nice() + CHILD_NICE).min(19)
}

/// This process's niceness.
fn own_nice() -> i32 {
    #[cfg(unix)]
    {
        // SAFETY: getpriority only reads the calling process's priority.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) }
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// Makes `cmd`'s process run below the generator ([`CHILD_NICE`]) and, where the machine has
/// the cores, on the children's half.
pub fn below_generator(cmd: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let cores = split().map(|(_, c)| cpu_set(c));
        let nice = child_nice();
        // SAFETY: between fork and exec only system calls (setpriority, sched_setaffinity) on
        // data prepared before the fork; nothing is allocated and no lock is taken.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setpriority(libc::PRIO_PROCESS, 0, nice) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if let Some(set) = &cores {
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

/// The niceness the generator had before [`take_generator_place`] raised it.
static RAISED_FROM: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();

/// The autogroup's niceness before [`take_generator_place`] raised it, and what it set.
static AUTOGROUP: std::sync::OnceLock<Option<(i32, i32)>> = std::sync::OnceLock::new();

/// Where Linux shows and sets this process's autogroup.
const AUTOGROUP_FILE: &str = "/proc/self/autogroup";

/// Places this process as the generator, before its runtime starts any thread: raises its
/// priority by [`GENERATOR_RAISE`] where the OS allows (silently keeps it otherwise: the
/// report's placement says which), and its autogroup's to the same niceness unless it is that
/// high already (another run of the same session raised it: [`give_back`] then leaves it to
/// that one); pins it to its half of the cores where there are enough.
pub fn take_generator_place() {
    let from = own_nice();
    let target = from - GENERATOR_RAISE;
    let raised = raise_priority(target);
    let _ = RAISED_FROM.set(raised.then_some(from));
    let group = autogroup_nice()
        .filter(|g| *g > target)
        .filter(|_| std::fs::write(AUTOGROUP_FILE, target.to_string()).is_ok())
        .map(|g| (g, target));
    let _ = AUTOGROUP.set(group);
    pin_generator();
}

/// Gives the session's autogroup its niceness back, if this process raised it and nothing
/// changed it since: the terminal session the user ran oversell from is not left raised.
pub fn give_back() {
    if let Some(Some((from, set))) = AUTOGROUP.get() {
        if autogroup_nice() == Some(*set) {
            let _ = std::fs::write(AUTOGROUP_FILE, from.to_string());
        }
    }
}

/// This process's autogroup's niceness (`/autogroup-85 nice 0`); `None` without autogroups.
fn autogroup_nice() -> Option<i32> {
    parse_autogroup(&std::fs::read_to_string(AUTOGROUP_FILE).ok()?)
}

fn parse_autogroup(text: &str) -> Option<i32> {
    text.split_once(" nice ")?.1.trim().parse().ok()
}

/// Sets this process's niceness to `nice`; false when the OS refuses (no privilege).
fn raise_priority(nice: i32) -> bool {
    #[cfg(unix)]
    {
        // SAFETY: setpriority on the calling process with a plain integer; on failure nothing
        // changes.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice.max(-20)) == 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = nice;
        false
    }
}

/// Puts every thread of this process (the generator) on its half of the cores, where the
/// machine has enough to split; threads started later inherit it. Does nothing otherwise.
fn pin_generator() {
    #[cfg(target_os = "linux")]
    if let Some((mine, _)) = split() {
        let set = cpu_set(mine);
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        for tid in tasks
            .flatten()
            .filter_map(|t| t.file_name().to_str()?.parse().ok())
        {
            // SAFETY: sets the affinity of one of this process's threads from a prepared set.
            unsafe {
                libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
        }
    }
}

#[cfg(target_os = "linux")]
fn cpu_set(cores: std::ops::Range<usize>) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for c in cores {
            libc::CPU_SET(c, &mut set);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_autogroup_line_gives_its_niceness() {
        assert_eq!(parse_autogroup("/autogroup-85 nice 0\n"), Some(0));
        assert_eq!(parse_autogroup("/autogroup-7 nice -5"), Some(-5));
        assert_eq!(parse_autogroup("garbage"), None);
    }

    #[test]
    fn a_child_started_below_the_generator_runs_at_the_child_niceness() {
        let mut cmd = std::process::Command::new("sh");
        cmd.args(["-c", "cut -d' ' -f19 /proc/self/stat"]);
        below_generator(&mut cmd);
        let out = cmd.output().expect("sh runs");
        let nice: i32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
        assert_eq!(nice, child_nice());
        assert!(child_nice() > own_nice() || own_nice() == 19);
        assert!(Placement::this()
            .describe()
            .contains(&format!("nice {}", child_nice())));
    }
}
