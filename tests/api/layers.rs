//! The shop's insides are named only by the shop and by the reference implementation of the
//! shop under test (issue #45): every other module of the harness (the runner's generic path,
//! the probes, the faults, the oracle, the reports) reaches the shop through `runner::Subject`
//! and what the reference implementation (`src/under_test/reference`) hands it.

use std::path::{Path, PathBuf};

/// The shop itself, and what its insides are.
const SHOP: [&str; 5] = [
    "src/inventory/",
    "src/store/",
    "src/pipeline/",
    "src/shop/",
    "src/gateway.rs",
];

/// The reference implementation of the shop under test, and `oversell bench shop` (which
/// drives the reference shop's own statements and scripts against pgbench and
/// redis-benchmark).
const REFERENCE: [&str; 2] = [
    // The driver (`reference.rs`) and its house (`reference/`: its process, layout, settle...).
    "src/under_test/reference",
    "src/bench/",
];

/// What names the shop's insides: its Redis key layout and consumer group, its SQL, its
/// consumer pipeline.
const INSIDES: [&str; 5] = [
    "redis_lua::",
    "ItemKeys",
    "store::dialect",
    "pipeline::",
    "dialect::Statements",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What says which kind of shop is under test (issue #61): outside the kinds' own houses
/// (`src/under_test/`), the harness asks the shop what it needs (a method, a capability, a
/// description), never which kind it is.
const KIND_FLAGS: [&str; 8] = [
    "foreign: bool",
    "reference: bool",
    "Rows::Foreign",
    "Rows::Reference",
    "Shop::Reference",
    "Shop::Foreign",
    "ShardShopKind",
    "FOREIGN_COLOUR",
];

/// `file:line: text` of every code line outside the shop and the reference implementation
/// that names one of its insides (comments and `testing`'s re-exports left out).
fn reaches(root: &Path) -> Vec<String> {
    let allowed: Vec<&str> = SHOP.iter().chain(REFERENCE.iter()).copied().collect();
    named(root, &allowed, &INSIDES)
}

/// `file:line: text` of every code line of `src/` outside the `allowed` paths that names one
/// of `needles` (comments and `testing`'s re-exports left out).
fn named(root: &Path, allowed: &[&str], needles: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if allowed.iter().any(|p| rel.starts_with(p)) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with("pub use crate::") {
                continue;
            }
            if needles.iter().any(|i| code.contains(i)) {
                found.push(format!("{rel}:{}: {}", n + 1, code));
            }
        }
    }
    found
}

#[test]
fn only_the_reference_implementation_names_the_shops_insides() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = reaches(root);
    assert!(
        found.is_empty(),
        "outside the shop and src/under_test's reference implementation, these name the shop's \
         insides (hand them what they need from src/under_test/reference/layout.rs instead):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_check_finds_a_reach_when_there_is_one() {
    // The same scan over a copy of the tree with one probe reaching into the key layout.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/probe")).unwrap();
    std::fs::create_dir_all(dir.path().join("src/under_test/reference")).unwrap();
    std::fs::write(
        dir.path().join("src/probe/mod.rs"),
        "// redis_lua:: in a comment is fine\nuse crate::inventory::redis_lua::ItemKeys;\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("src/under_test/reference/layout.rs"),
        "use crate::inventory::redis_lua::ItemKeys;\n",
    )
    .unwrap();
    let found = reaches(dir.path());
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("src/probe/mod.rs:2:"), "{found:?}");
}

#[test]
fn no_module_outside_the_shops_houses_asks_which_kind_it_is() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = named(root, &["src/under_test"], &KIND_FLAGS);
    assert!(
        found.is_empty(),
        "outside src/under_test, these say which kind of shop is under test (ask the shop: a \
         ShopUnderTest method, its Levers, its report::Shop):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_kind_check_finds_a_flag_when_there_is_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src/diagnose")).unwrap();
    std::fs::create_dir_all(dir.path().join("src/under_test")).unwrap();
    std::fs::write(
        dir.path().join("src/diagnose/battery.rs"),
        "// a reference: bool in a comment is fine\npub struct Shop { pub reference: bool }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("src/under_test/reference.rs"),
        "let shop = Shop::Reference { strategy };\n",
    )
    .unwrap();
    let found = named(dir.path(), &["src/under_test"], &KIND_FLAGS);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("src/diagnose/battery.rs:2:"),
        "{found:?}"
    );
}
