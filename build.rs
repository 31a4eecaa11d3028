//! Build script: records the git commit the binary was built from as `OVERSELL_GIT_COMMIT`
//! (reports carry it). Not built from a git checkout (a crates.io tarball, no `git`): the
//! variable is left unset and reports say "unknown". A packager may set it in the environment.

// Cargo reads a build script's instructions from its stdout.
#![allow(clippy::disallowed_macros)]

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-env-changed=OVERSELL_GIT_COMMIT");
    if std::env::var_os("OVERSELL_GIT_COMMIT").is_some() {
        return;
    }
    let Some(commit) = git(&["rev-parse", "HEAD"]) else {
        return;
    };
    // Rebuild when HEAD moves: the HEAD file (a branch switch) and the branch's ref (a commit).
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])),
        git(&["rev-parse", "--git-path", "packed-refs"]),
    ]
    .into_iter()
    .flatten()
    // A path that does not exist would make cargo rerun this script on every build.
    .filter(|p| std::path::Path::new(p).exists())
    {
        println!("cargo:rerun-if-changed={path}");
    }
    println!("cargo:rustc-env=OVERSELL_GIT_COMMIT={commit}");
}
