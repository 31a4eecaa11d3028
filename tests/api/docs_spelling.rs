//! Every `oversell …` command the README and the book show uses each flag's current name and
//! parses as the binary parses it: an old spelling kept as a hidden alias, a hidden flag or an
//! unknown one fails naming the page and line. Every line that can run without sending load
//! runs as written (`--dry-run` added where a command fires a sale), with no environment and
//! with the one CI has.

use crate::docs::{markdown_under, root};
use std::path::{Path, PathBuf};

/// One `oversell …` command written in a doc: where, and its words after `oversell`.
#[derive(Debug)]
struct Written {
    at: String,
    words: Vec<String>,
    /// Part of it is a shell variable or a placeholder (`$OPEN_AT`, `N`): its flags are
    /// checked, not its values.
    placeholders: bool,
}

/// Shell words of `line` (quotes removed; no expansion), up to a redirection (`>`, `<`).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_with(String::new).push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_with(String::new);
            }
            (None, '>' | '<') => break,
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    words
}

/// The `oversell` commands of a shell line: each segment between `;`, `&&`, `|`, `&`, `(`
/// whose program (after `VAR=value`s, `do`, `then`, `time`) is oversell (`oversell`,
/// `target/release/oversell`, `cargo run … --`). A comment line has none.
fn commands_in(line: &str) -> Vec<Vec<String>> {
    if line.starts_with('#') {
        return Vec::new();
    }
    let line = match line.find(" #") {
        Some(i) if line[..i].matches(['\'', '"']).count().is_multiple_of(2) => &line[..i],
        _ => line,
    };
    let mut out = Vec::new();
    for segment in line.split([';', '|', '&', '(']) {
        let words = shell_words(segment);
        let skip = words
            .iter()
            .take_while(|w| {
                w.contains('=') && !w.starts_with('-')
                    || ["do", "then", "time"].contains(&w.as_str())
            })
            .count();
        let Some(program) = words.get(skip) else {
            continue;
        };
        let start = if program == "oversell" || program.ends_with("/oversell") {
            Some(skip + 1)
        } else if program == "cargo" && words.get(skip + 1).is_some_and(|w| w == "run") {
            words.iter().position(|w| w == "--").map(|i| i + 1)
        } else {
            None
        };
        // `oversell gate: FAIL — …` is a command's output, not a command.
        if let Some(i) = start.filter(|i| *i < words.len() && !words[*i].ends_with(':')) {
            out.push(words[i..].to_vec());
        }
    }
    out
}

/// `line` with each `<name>` placeholder written as `NAME`, and whether it had one.
fn without_placeholders(line: &str) -> (String, bool) {
    let mut out = String::new();
    let mut rest = line;
    let mut any = false;
    while let Some(open) = rest.find('<') {
        let name_len = rest[open + 1..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(0);
        if name_len > 0 && rest[open + 1 + name_len..].starts_with('>') {
            out.push_str(&rest[..open]);
            out.push_str(&rest[open + 1..open + 1 + name_len].to_uppercase());
            rest = &rest[open + 2 + name_len..];
            any = true;
        } else {
            out.push_str(&rest[..=open]);
            rest = &rest[open + 1..];
        }
    }
    out.push_str(rest);
    (out, any)
}

/// Every `oversell …` command in fenced code of `text` (continued lines joined), and every
/// inline code span that starts with `oversell ` (its flags only: a span may be a fragment).
fn written_commands(file: &str, text: &str) -> Vec<Written> {
    let mut found = Vec::new();
    // `None` outside a fence, else whether the fence holds shell (sh, bash, shell, console,
    // or no language: a command's output is checked too, and must not look like one).
    let mut fence: Option<bool> = None;
    let mut pending: Option<(usize, String)> = None;
    for (n, line) in text.lines().enumerate() {
        if let Some(info) = line.trim_start().strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(["", "sh", "bash", "shell", "console"].contains(&info.trim())),
            };
            continue;
        }
        if fence == Some(false) {
            continue;
        }
        if fence == Some(true) {
            let (start, joined) = match pending.take() {
                Some((s, so_far)) => (s, format!("{so_far} {}", line.trim())),
                None => (n + 1, line.trim().to_string()),
            };
            if let Some(cont) = joined.strip_suffix('\\') {
                pending = Some((start, cont.to_string()));
                continue;
            }
            let (joined, named) = without_placeholders(joined.trim_start_matches("$ "));
            for words in commands_in(&joined) {
                let placeholders = named || joined.contains('$') || joined.contains("...");
                found.push(Written {
                    at: format!("{file}:{start}"),
                    words,
                    placeholders,
                });
            }
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find("`oversell ") {
            let span = &rest[open + 1..];
            let Some(close) = span.find('`') else { break };
            let words = shell_words(&span["oversell ".len()..close]);
            // `oversell …` names commands in general: nothing to check.
            if words
                .first()
                .is_some_and(|w| w.starts_with(|c: char| c.is_ascii_alphabetic()))
            {
                found.push(Written {
                    at: format!("{file}:{}", n + 1),
                    words,
                    placeholders: true,
                });
            }
            rest = &span[close + 1..];
        }
    }
    found
}

/// What is wrong with `w`'s spelling: a flag that is not one of its command's current visible
/// names (an old, hidden alias, or no flag at all), or — without placeholders — a command line
/// the binary does not parse.
fn misspelt(w: &Written) -> Option<String> {
    use clap::CommandFactory;
    let root = oversell::cli::Cli::command();
    let mut cmd = &root;
    let mut words = w.words.iter();
    let mut flags = Vec::new();
    for word in words.by_ref() {
        if word.starts_with('-') {
            flags.push(word.clone());
            break;
        }
        match cmd.find_subcommand(word) {
            Some(sub) if sub.get_name() == word => cmd = sub,
            Some(sub) => return Some(format!("`{word}` is an alias of `{}`", sub.get_name())),
            None if cmd.has_subcommands() => return Some(format!("no command `{word}`")),
            None => break,
        }
    }
    flags.extend(words.filter(|w| w.starts_with("--")).cloned());
    for flag in flags.iter().filter(|f| f.starts_with("--") && f.len() > 2) {
        let name = flag[2..].split('=').next().unwrap_or_default();
        if name == "help" {
            continue;
        }
        // A global flag (-v, -q) is the root's, and every command's.
        let global = || {
            root.get_arguments()
                .find(|a| a.is_global_set() && a.get_long() == Some(name))
        };
        match cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(name))
            .or_else(global)
        {
            Some(a) if a.is_hide_set() => {
                return Some(format!("--{name} is a hidden old spelling"))
            }
            Some(_) => {}
            None => {
                let current = cmd
                    .get_arguments()
                    .find(|a| a.get_all_aliases().unwrap_or_default().contains(&name));
                return Some(match current.and_then(|a| a.get_long()) {
                    Some(long) => format!("--{name} is the old spelling of --{long}"),
                    None => format!("`{}` has no flag --{name}", cmd.get_name()),
                });
            }
        }
    }
    if w.placeholders {
        return None;
    }
    let argv = std::iter::once("oversell".to_string()).chain(w.words.iter().cloned());
    oversell::cli::parse_from(argv)
        .err()
        .filter(|e| e.kind() != clap::error::ErrorKind::DisplayHelp)
        .map(|e| {
            e.render()
                .to_string()
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
}

#[test]
fn every_oversell_line_in_the_readme_and_the_book_uses_the_current_names_and_parses() {
    let mut files = vec![PathBuf::from("README.md")];
    markdown_under(Path::new("docs/src"), &mut files);
    files.sort();
    let mut checked = 0;
    let mut wrong = Vec::new();
    for f in files {
        let shown = f.display().to_string();
        let text = std::fs::read_to_string(root().join(&f)).unwrap();
        for w in written_commands(&shown, &text) {
            checked += 1;
            if let Some(why) = misspelt(&w) {
                wrong.push(format!("{}: oversell {}: {why}", w.at, w.words.join(" ")));
            }
        }
    }
    assert!(checked > 100, "only {checked} commands found");
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn the_spelling_check_refuses_old_names_unknown_flags_and_lines_that_do_not_parse() {
    let text = "```sh\noversell compare --strategies naive \\\n  --scenario smoke\n\
                oversell capacity --probe-seconds 5\n\
                cargo run --release -- diff a b --out x.md\n\
                oversell run --strategy naive --repeat 0\n\
                oversell run --strategy naive --colour\n\
                oversell compare --strategy naive,redis-lua --scenario smoke # fine\n\
                oversell gate: PASS — output, not a command\n\
                oversell diff base/<folder> cand/<folder> --out x.md\n\
                oversell completions bash > /tmp/x\n```\n\
                Or `oversell bench shop --connections 8`, and `oversell …` in general.\n";
    let found = written_commands("t.md", text);
    let why: Vec<Option<String>> = found.iter().map(misspelt).collect();
    assert_eq!(found.len(), 9, "{found:#?}");
    assert_eq!(found[0].at, "t.md:2");
    assert!(
        why[0]
            .as_deref()
            .unwrap()
            .contains("old spelling of --strategy"),
        "{why:?}"
    );
    assert!(why[1].as_deref().unwrap().contains("hidden"), "{why:?}");
    assert!(why[2].as_deref().unwrap().contains("--markdown"), "{why:?}");
    assert!(why[3].as_deref().unwrap().contains("at least 1"), "{why:?}");
    assert!(why[4].as_deref().unwrap().contains("--colour"), "{why:?}");
    assert_eq!(why[5], None);
    assert!(
        why[6].as_deref().unwrap().contains("--markdown"),
        "a placeholder: {why:?}"
    );
    assert_eq!(why[7], None, "up to the redirection");
    assert!(
        why[8].as_deref().unwrap().contains("--concurrency"),
        "{why:?}"
    );
}

/// The commands a doc line can run without sending load or writing anything: a sale's commands
/// with `--dry-run` (added when the line lacks it), and the listings.
fn runnable(w: &Written) -> Option<Vec<String>> {
    let command = w.words.first()?.as_str();
    let mut words = w.words.clone();
    let fires = ["run", "compare", "gate", "attack", "capacity", "diagnose"].contains(&command);
    let lists = ["scenarios", "completions"].contains(&command);
    let refused_with_dry_run = ["--shard", "--probe", "--help", "-h"];
    if w.placeholders
        || words
            .iter()
            .any(|x| refused_with_dry_run.contains(&x.as_str()))
    {
        return None;
    }
    if fires && !words.iter().any(|x| x == "--dry-run") {
        words.push("--dry-run".into());
    }
    (fires || lists).then_some(words)
}

/// The environments a doc line runs in: none of oversell's variables, and CI's (a GitHub
/// Actions job with PostgreSQL and Redis as services: `CI`, `DATABASE_URL`, `REDIS_URL`).
const ENVIRONMENTS: [(&str, &[(&str, &str)]); 2] = [
    ("no environment", &[]),
    (
        "CI's environment",
        &[
            ("CI", "1"),
            (
                "DATABASE_URL",
                "postgres://postgres:postgres@127.0.0.1:5432/oversell",
            ),
            ("REDIS_URL", "redis://127.0.0.1:6379"),
        ],
    ),
];

/// Whether a run failed only for want of a file the page shows the reader how to write (a
/// `--scenario my-shop.toml` under a TOML block of the page): the file is not in the
/// repository, and the page has a fenced block of its kind.
fn readers_file(stderr: &str, page: &str) -> bool {
    let Some((path, _)) = stderr.lines().find_map(|l| {
        l.strip_prefix("error: ")?
            .split_once(": cannot read the file")
    }) else {
        return false;
    };
    let ext = Path::new(path).extension().and_then(|e| e.to_str());
    !root().join(path).exists() && ext.is_some_and(|e| page.contains(&format!("```{e}")))
}

#[test]
fn every_doc_line_that_can_run_without_load_runs_as_written_with_and_without_cis_environment() {
    let mut files = vec![PathBuf::from("README.md")];
    markdown_under(Path::new("docs/src"), &mut files);
    files.sort();
    let (mut ran, mut failed) = (0, Vec::new());
    for f in files {
        let shown = f.display().to_string();
        let text = std::fs::read_to_string(root().join(&f)).unwrap();
        // Files an earlier line of the page writes (`fit --out FILE`): a later line may read them.
        let mut written: Vec<String> = Vec::new();
        for w in written_commands(&shown, &text) {
            if w.words.first().is_some_and(|c| c == "fit") {
                let out = w.words.iter().skip_while(|x| *x != "--out").nth(1);
                written.extend(out.cloned());
            }
            let Some(words) = runnable(&w) else { continue };
            for (env_name, env) in ENVIRONMENTS {
                let out = std::process::Command::new(env!("CARGO_BIN_EXE_oversell"))
                    .args(&words)
                    .current_dir(root())
                    .env_remove("DATABASE_URL")
                    .env_remove("MYSQL_URL")
                    .env_remove("REDIS_URL")
                    .env_remove("OVERSELL_SERVICES")
                    .env_remove("GITHUB_STEP_SUMMARY")
                    .env_remove("CI")
                    .envs(env.iter().copied())
                    .output()
                    .unwrap();
                ran += 1;
                let stderr = String::from_utf8_lossy(&out.stderr);
                let needs_earlier = written.iter().any(|p| stderr.contains(p.as_str()))
                    || readers_file(&stderr, &text);
                if !out.status.success() && !needs_earlier {
                    let why = stderr
                        .lines()
                        .rev()
                        .find(|l| l.starts_with("error"))
                        .unwrap_or("");
                    failed.push(format!(
                        "{} ({env_name}): oversell {}: exit {:?}: {why}",
                        w.at,
                        words.join(" "),
                        out.status.code()
                    ));
                }
            }
        }
    }
    assert!(ran > 60, "only {ran} runs");
    assert!(
        failed.is_empty(),
        "{} failed:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
