//! The README and the book under `docs/` (mdBook): every chapter SUMMARY.md lists exists and
//! every Markdown file is a chapter, every relative link and `#anchor` in the README and the
//! book resolves, the README stays a front door (≤ 450 lines), `reports/README.md` names the
//! report schema the code writes, and — when the `mdbook` binary is installed
//! (`OVERSELL_MDBOOK` names one; `.ci/run` installs it; with `CI` set it must be) — `mdbook build`
//! builds the book.
//!
//! Anchors are the headings' ids as GitHub and mdBook both make them: the heading's text
//! lower-cased, spaces to `-`, everything but letters, digits, `-` and `_` dropped, a repeat
//! suffixed `-1`, `-2`.

use std::collections::{BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::Command;

pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The id GitHub and mdBook give a heading.
fn slug(heading: &str) -> String {
    let text = strip_links(heading).replace(['`', '*'], "");
    let mut out = String::new();
    for c in text.trim().chars() {
        if c.is_alphanumeric() || c == '-' || c == '_' {
            out.extend(c.to_lowercase());
        } else if c.is_whitespace() {
            out.push('-');
        }
    }
    out
}

/// `[text](target)` → `text`.
fn strip_links(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(open) = rest.find('[') {
        let Some((text, _, after)) = link_at(&rest[open..]) else {
            out.push_str(&rest[..=open]);
            rest = &rest[open + 1..];
            continue;
        };
        out.push_str(&rest[..open]);
        out.push_str(text);
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A link starting at `s` (which starts with `[`): its text, its target and what follows.
fn link_at(s: &str) -> Option<(&str, &str, &str)> {
    let mut depth = 0;
    let mut close = None;
    for (i, c) in s.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(i);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let after = s[close + 1..].strip_prefix('(')?;
    let end = after.find(')')?;
    let target = after[..end].split_whitespace().next().unwrap_or("");
    Some((&s[1..close], target, &after[end + 1..]))
}

/// Code spans blanked out (their text is not Markdown), so a `[x](y)` in one is no link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let fence = &rest[start..start + ticks];
        let Some(len) = rest[start + ticks..].find(fence) else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str("``");
        rest = &rest[start + ticks + len + ticks..];
    }
    out.push_str(rest);
    out
}

/// What the checks need of one Markdown file.
#[derive(Debug, Default)]
struct Doc {
    anchors: BTreeSet<String>,
    /// `(line number, target)` of every link and image outside code.
    links: Vec<(usize, String)>,
}

fn parse(text: &str) -> Doc {
    let mut doc = Doc::default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut fence: Option<String> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|c| *c == '`' || *c == '~')
            .collect();
        if marker.len() >= 3 && marker.chars().all(|c| c == marker.chars().next().unwrap()) {
            match &fence {
                None => fence = Some(marker),
                Some(open) if marker.starts_with(open.as_str()) => fence = None,
                Some(_) => {}
            }
            continue;
        }
        if fence.is_some() {
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let id = slug(line[hashes..].trim().trim_end_matches('#'));
            let k = seen.entry(id.clone()).or_default();
            doc.anchors
                .insert(if *k == 0 { id } else { format!("{id}-{k}") });
            *k += 1;
        }
        let line = without_code_spans(line);
        let mut rest = line.as_str();
        while let Some(open) = rest.find('[') {
            match link_at(&rest[open..]) {
                Some((_, target, after)) => {
                    doc.links.push((n + 1, target.to_string()));
                    rest = after;
                }
                None => rest = &rest[open + 1..],
            }
        }
    }
    doc
}

/// The chapters SUMMARY.md lists, as paths under `docs/src`.
fn summary_chapters(summary: &str) -> Vec<String> {
    parse(summary)
        .links
        .into_iter()
        .map(|(_, t)| t)
        .filter(|t| !t.is_empty())
        .collect()
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The lab notes: dated records kept beside the book, not chapters of it; the book links them
/// once.
const LAB: &str = "docs/lab";

/// Every broken link of `file` (relative to the repository), given every parsed file. Links
/// from a chapter of the book must stay inside `docs/src`: the built book holds nothing else.
fn broken_links(file: &Path, docs: &HashMap<PathBuf, Doc>) -> Vec<String> {
    let book = Path::new("docs/src");
    let doc = &docs[file];
    let mut broken = Vec::new();
    for (line, target) in &doc.links {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let at = format!("{}:{line}: {target}", file.display());
        let (path, fragment) = match target.split_once('#') {
            Some((p, f)) => (p, Some(f)),
            None => (target.as_str(), None),
        };
        let resolved = if path.is_empty() {
            file.to_path_buf()
        } else {
            normalise(&file.parent().unwrap_or(Path::new("")).join(path))
        };
        if file.starts_with(book) && !resolved.starts_with(book) && !resolved.starts_with(LAB) {
            broken.push(format!("{at}: leaves the book (docs/src)"));
            continue;
        }
        if !path.is_empty() && !root().join(&resolved).exists() {
            broken.push(format!("{at}: no such file {}", resolved.display()));
            continue;
        }
        if let Some(fragment) = fragment {
            match docs.get(&resolved) {
                Some(d) if d.anchors.contains(fragment) => {}
                Some(_) => broken.push(format!(
                    "{at}: {} has no heading with the id #{fragment}",
                    resolved.display()
                )),
                None if resolved.extension().is_some_and(|e| e == "md") => {
                    broken.push(format!("{at}: {} is not checked", resolved.display()))
                }
                None => {}
            }
        }
    }
    broken
}

pub(crate) fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(root().join(dir)).unwrap() {
        let entry = entry.unwrap();
        let rel = dir.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            markdown_under(&rel, out);
        } else if rel.extension().is_some_and(|e| e == "md") {
            out.push(rel);
        }
    }
}

/// README.md and every Markdown file of docs/, parsed.
fn all_docs() -> HashMap<PathBuf, Doc> {
    let mut files = vec![
        PathBuf::from("README.md"),
        PathBuf::from("reports/README.md"),
    ];
    markdown_under(Path::new("docs"), &mut files);
    files
        .into_iter()
        .filter(|f| !f.starts_with("docs/book"))
        .map(|f| {
            let text = std::fs::read_to_string(root().join(&f)).unwrap();
            (f, parse(&text))
        })
        .collect()
}

#[test]
fn every_chapter_the_summary_lists_exists_and_every_page_is_a_chapter() {
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    let chapters = summary_chapters(&summary);
    assert!(chapters.len() > 20, "{chapters:?}");
    let missing: Vec<&String> = chapters
        .iter()
        .filter(|c| !root().join("docs/src").join(c).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "SUMMARY.md lists missing chapters: {missing:?}"
    );
    let listed: BTreeSet<PathBuf> = chapters
        .iter()
        .map(|c| normalise(&Path::new("docs/src").join(c)))
        .collect();
    let mut pages = Vec::new();
    markdown_under(Path::new("docs"), &mut pages);
    let orphans: Vec<&PathBuf> = pages
        .iter()
        .filter(|p| !p.starts_with("docs/book") && !p.starts_with(LAB))
        .filter(|p| !p.ends_with("SUMMARY.md"))
        .filter(|p| !listed.contains(*p))
        .collect();
    assert!(
        orphans.is_empty(),
        "pages outside the book (move each under docs/src/ and list it in docs/src/SUMMARY.md): \
         {orphans:?}"
    );
}

#[test]
fn every_relative_link_and_anchor_in_the_readme_and_the_book_resolves() {
    let docs = all_docs();
    let mut files: Vec<&PathBuf> = docs.keys().collect();
    files.sort();
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f, &docs)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    let readme = &docs[Path::new("README.md")];
    assert!(
        readme.links.iter().any(|(_, t)| t.starts_with("docs/src/")),
        "the README points into the book"
    );
}

#[test]
fn the_book_links_its_lab_notes_once_and_they_are_not_chapters() {
    let docs = all_docs();
    let into_lab: Vec<String> = docs
        .iter()
        .filter(|(f, _)| f.starts_with("docs/src"))
        .flat_map(|(f, d)| {
            d.links.iter().filter_map(move |(line, target)| {
                let path = target.split('#').next().unwrap_or_default();
                let resolved = normalise(&f.parent().unwrap_or(Path::new("")).join(path));
                (!path.is_empty() && resolved.starts_with(LAB))
                    .then(|| format!("{}:{line}", f.display()))
            })
        })
        .collect();
    assert_eq!(
        into_lab.len(),
        1,
        "one link from the book into {LAB}: {into_lab:?}"
    );
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    assert!(
        !summary.contains("lab"),
        "no lab note is a chapter: {summary}"
    );
    assert!(root().join(LAB).join("README.md").is_file());
}

#[test]
fn the_link_check_catches_a_missing_file_a_missing_anchor_and_a_link_out_of_the_book() {
    let text =
        "# Top\n\n## A `code` heading — with a dash\n\nSee [here](#a-code-heading--with-a-dash), \
                [gone](#nowhere), [file](nope.md), [out](../../Cargo.toml), \
                `[not a link](nowhere.md)`.\n\n```md\n[in a fence](fence.md)\n```\n";
    let file = PathBuf::from("docs/src/probe.md");
    let docs = HashMap::from([(file.clone(), parse(text))]);
    let broken = broken_links(&file, &docs);
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].contains("#nowhere"), "{broken:#?}");
    assert!(
        broken[1].contains("no such file docs/src/nope.md"),
        "{broken:#?}"
    );
    assert!(broken[2].contains("leaves the book"), "{broken:#?}");
    assert_eq!(
        slug("`oversell serve` — the reference shop"),
        "oversell-serve--the-reference-shop"
    );
    assert_eq!(slug("[docs](x.md): *Why*"), "docs-why");
    let repeated = parse("# A\n## A\n");
    assert!(repeated.anchors.contains("a") && repeated.anchors.contains("a-1"));
}

#[test]
fn the_readme_is_a_front_door_of_at_most_450_lines() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 450,
        "README.md has {lines} lines: move depth to a chapter of docs/src"
    );
    for command in [
        "serve",
        "run",
        "compare",
        "gate",
        "attack",
        "diff",
        "merge",
        "bench",
        "selftest",
        "scenarios",
        "completions",
    ] {
        assert!(
            readme.contains(&format!("oversell {command}")),
            "the README shows `oversell {command}`"
        );
    }
}

#[test]
fn the_readmes_first_screen_tells_the_story_then_the_commands_then_the_table_then_the_readers() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let line_of = |needle: &str| {
        readme
            .lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("the README has {needle:?}"))
    };
    // The incident, in a few lines, before anything else.
    assert!(line_of("**The incident.**") < 8);
    assert!(line_of("107 sold") < line_of("## Set-up"));
    assert!(
        line_of("post-mortem") < line_of("## Set-up"),
        "the post-mortem is explained first"
    );
    // The two set-up commands as they always were, and the install line with them.
    for command in [
        "cargo run --release -- compare   # the main job: replay the incident against every strategy",
        "cargo test                       # the tests, on real PostgreSQL, MariaDB and Redis",
        "cargo install --locked --path .",
    ] {
        assert!(line_of(command) < 30, "{command} on the first screen");
    }
    // The table, then the readers' three ways in, then the commands.
    let order = [
        "## Set-up",
        "<!-- publish:table -->",
        "## Three ways in",
        "## Commands",
    ];
    let at: Vec<usize> = order.iter().map(|h| line_of(h)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{order:?} at {at:?}");
    assert!(
        at[1] < 50,
        "the table starts on the second screen at the latest"
    );
    // The verdicts show only what differs from "no oversell".
    let verdicts: Vec<&str> = readme
        .lines()
        .skip_while(|l| *l != "<!-- publish:verdicts -->")
        .take_while(|l| *l != "<!-- /publish:verdicts -->")
        .collect();
    assert!(
        verdicts.iter().all(|l| !l.ends_with(": no oversell")),
        "{verdicts:#?}"
    );
    assert!(verdicts.len() < 15, "{verdicts:#?}");
    assert!(readme.lines().count() < 400, "well under 450 lines");
}

#[test]
fn the_reports_folder_readme_names_the_schema_the_code_writes() {
    let text = std::fs::read_to_string(root().join("reports/README.md")).unwrap();
    assert!(
        text.contains(oversell::report::SCHEMA),
        "reports/README.md names {} (bench/publish.sh rewrites it)",
        oversell::report::SCHEMA
    );
}

fn mdbook() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("OVERSELL_MDBOOK") {
        return Some(PathBuf::from(p));
    }
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|h| h.join("bin"));
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(cargo_bin)
        .map(|d| d.join("mdbook"))
        .find(|p| p.is_file())
}

#[test]
fn mdbook_builds_the_book_when_it_is_installed() {
    let Some(mdbook) = mdbook() else {
        let msg =
            "SKIPPED: mdbook is not installed (cargo install mdbook --locked; .ci/run does), \
                   so the book was link-checked but not built";
        assert!(std::env::var_os("CI").is_none(), "{msg} — and CI is set");
        eprintln!("\n*** {msg} ***\n");
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(&mdbook)
        .arg("build")
        .arg(root().join("docs"))
        .arg("--dest-dir")
        .arg(out.path())
        .output()
        .unwrap();
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "mdbook build failed:\n{log}");
    assert!(!log.contains("[WARN]") && !log.contains("WARN "), "{log}");
    let summary = std::fs::read_to_string(root().join("docs/src/SUMMARY.md")).unwrap();
    for chapter in summary_chapters(&summary) {
        let html = out.path().join(Path::new(&chapter).with_extension("html"));
        assert!(html.is_file(), "{} was built", html.display());
    }
    assert!(out.path().join("results/headline.png").is_file());
}
