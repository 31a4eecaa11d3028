//! The scenarios that ship with oversell: every file of `scenarios/`, compiled into the binary,
//! and how `--scenario` finds one. A path to an existing file wins; otherwise a bundled name
//! (`flash-100`, also written `flash-100.toml` or `scenarios/flash-100.toml`) is used, so the
//! defaults work from any directory. The caller is told which was used.

use crate::traffic::scenario::{Scenario, ScenarioError, ScenarioProblem};
use std::path::{Path, PathBuf};

/// A scenario compiled into the binary.
#[derive(Debug, Clone, Copy)]
pub struct Bundled {
    /// Its name: the file name without `.toml`.
    pub name: &'static str,
    /// The file's text.
    pub text: &'static str,
}

macro_rules! bundled {
    ($($name:literal),* $(,)?) => {
        &[$(Bundled {
            name: $name,
            text: include_str!(concat!("../scenarios/", $name, ".toml")),
        }),*]
    };
}

/// Every bundled scenario (a test checks this is every file of `scenarios/`).
pub const BUNDLED: &[Bundled] = bundled![
    "flash-100",
    "smoke",
    "ci",
    "second-wave",
    "rehearsal-example",
    "rehearsal-stock-only",
    "rehearsal-reference",
    "faults",
    "selftest-limit-race",
    "selftest-get-then-decr",
    "selftest-double-restock",
    "selftest-cancel-paid-restocks",
    "selftest-key-reuse",
    "adversarial",
    "diagnose"
];

impl Bundled {
    /// The bundled scenario called `name`.
    pub fn named(name: &str) -> Option<Bundled> {
        BUNDLED.iter().copied().find(|b| b.name == name)
    }

    /// Parses and validates it.
    pub fn load(self) -> Result<Scenario, ScenarioError> {
        Scenario::parse(self.text).map_err(|problem| ScenarioError {
            file: Source::Bundled(self.name).origin(),
            problem,
        })
    }
}

/// Where a scenario came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A file on disk.
    File(PathBuf),
    /// A scenario compiled in (no file of that path exists here).
    Bundled(&'static str),
}

impl Source {
    /// As reports record it: the path, or `bundled:<name>`.
    pub fn origin(&self) -> PathBuf {
        match self {
            Source::File(p) => p.clone(),
            Source::Bundled(name) => PathBuf::from(format!("bundled:{name}")),
        }
    }

    /// One line for stderr: which scenario is used.
    pub fn describe(&self) -> String {
        match self {
            Source::File(p) => format!("scenario: file {}", p.display()),
            Source::Bundled(name) => format!("scenario: {name} (bundled with oversell)"),
        }
    }
}

/// The bundled name `arg` stands for when it is no file: `name`, `name.toml` or
/// `scenarios/name.toml`.
fn bundled_name(arg: &Path) -> Option<&str> {
    let s = arg.to_str()?;
    let s = s.strip_prefix("scenarios/").unwrap_or(s);
    let s = s.strip_suffix(".toml").unwrap_or(s);
    (!s.contains('/')).then_some(s)
}

/// The bundled scenario whose text `text` is (line endings aside), if any.
pub fn bundled_text(text: &str) -> Option<Bundled> {
    let text = text.replace("\r\n", "\n");
    BUNDLED.iter().copied().find(|b| b.text == text)
}

/// Whether `--scenario ARG` is a bundled scenario: a bundled name that is no file, or a file
/// whose text is a bundled file's (`--scenario ci` and `--scenario scenarios/ci.toml` alike).
/// A file the user changed is theirs.
pub fn is_bundled(arg: &Path) -> bool {
    if arg.is_file() {
        return std::fs::read_to_string(arg).is_ok_and(|t| bundled_text(&t).is_some());
    }
    bundled_name(arg).and_then(Bundled::named).is_some()
}

/// Whether a report's scenario origin ([`Source::origin`]: `bundled:<name>` or a path) is a
/// bundled scenario (a path counts when the file there still is a bundled file's text).
pub fn is_bundled_origin(origin: &str) -> bool {
    match origin.strip_prefix("bundled:") {
        Some(name) => Bundled::named(name).is_some(),
        None => {
            let path = Path::new(origin);
            path.is_file() && is_bundled(path)
        }
    }
}

/// Finds and loads `--scenario ARG`: an existing file, else a bundled scenario of that name.
pub fn resolve(arg: &Path) -> Result<(Scenario, Source), ScenarioError> {
    if arg.is_file() {
        return Scenario::load(arg).map(|s| (s, Source::File(arg.to_path_buf())));
    }
    if arg.is_dir() {
        return Err(ScenarioError {
            file: arg.to_path_buf(),
            problem: ScenarioProblem::Read(std::io::Error::other(
                "this is a folder, not a scenario file: give a .toml file in it, or the name of \
                 a bundled scenario (`oversell scenarios` lists them)",
            )),
        });
    }
    match bundled_name(arg).and_then(Bundled::named) {
        Some(b) => b.load().map(|s| (s, Source::Bundled(b.name))),
        None => {
            let names: Vec<&str> = BUNDLED.iter().map(|b| b.name).collect();
            let near = bundled_name(arg)
                .map(|given| crate::suggest::did_you_mean(given, names.iter().copied()))
                .unwrap_or_default();
            let problem = ScenarioProblem::Read(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!(
                    "no such file, and no bundled scenario of that name{near} (bundled: {}; \
                     `oversell scenarios` lists them)",
                    names.join(", ")
                ),
            ));
            Err(ScenarioError {
                file: arg.to_path_buf(),
                problem,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_given_as_the_scenario_is_called_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let e = resolve(dir.path()).unwrap_err().to_string();
        assert!(e.contains("is a folder, not a scenario file"), "{e}");
        assert!(!e.contains("no such file"), "{e}");
    }

    #[test]
    fn every_bundled_scenario_is_valid_and_named_like_its_file() {
        for b in BUNDLED {
            let s = b.load().unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(s.name, b.name);
            assert!(
                !s.description.trim().is_empty(),
                "{} has a description",
                b.name
            );
        }
    }

    #[test]
    fn a_name_a_file_name_or_the_scenarios_path_find_the_bundled_one() {
        for arg in ["smoke", "smoke.toml", "scenarios/smoke.toml"] {
            assert_eq!(bundled_name(Path::new(arg)), Some("smoke"), "{arg}");
        }
        assert_eq!(bundled_name(Path::new("/elsewhere/smoke.toml")), None);
        assert_eq!(bundled_name(Path::new("other/smoke.toml")), None);
    }

    #[test]
    fn a_bundled_scenario_is_told_by_its_text_whatever_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("my-ci.toml");
        let ci = Bundled::named("ci").unwrap();
        std::fs::write(&copy, ci.text).unwrap();
        assert!(
            is_bundled(&copy),
            "an identical copy is the bundled scenario"
        );
        assert!(is_bundled(Path::new("ci")));
        std::fs::write(&copy, format!("{}\n# mine\n", ci.text)).unwrap();
        assert!(!is_bundled(&copy), "a changed file is the user's");
        assert!(!is_bundled(Path::new("no-such-sale")));
        assert!(is_bundled_origin("bundled:ci"));
        assert!(!is_bundled_origin("bundled:no-such-sale"));
        assert!(!is_bundled_origin(copy.to_str().unwrap()), "changed");
    }

    #[test]
    fn an_unknown_name_lists_the_bundled_ones() {
        let err = resolve(Path::new("no-such-sale")).unwrap_err().to_string();
        assert!(
            err.contains("no-such-sale") && err.contains("flash-100"),
            "{err}"
        );
        assert!(!err.contains("did you mean"), "nothing near: {err}");
        let err = resolve(Path::new("flash-10")).unwrap_err().to_string();
        assert!(err.contains("(did you mean `flash-100`?)"), "{err}");
        let err = resolve(Path::new("scenarios/smok.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("(did you mean `smoke`?)"), "{err}");
    }
}
