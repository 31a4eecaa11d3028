//! What `Dockerfile` and `deploy/k8s/` promise, checked: the manifests validate against the
//! Kubernetes schema (`kubernetes-validate`, from PyPI; .ci/run installs it, CI=1 makes it
//! mandatory, elsewhere a missing validator is a loud SKIPPED), every container runs a command
//! line `oversell` parses, the Indexed Job's shards and the merge agree on N and on the folders,
//! and the Dockerfile copies paths that exist.

use clap::Parser;
use oversell::cli::{Cli, Command};
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every manifest file of deploy/k8s/.
fn manifests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("deploy/k8s"))
        .expect("deploy/k8s exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    assert!(v.len() >= 4, "{v:?}");
    v
}

/// Every document of every manifest.
fn documents() -> Vec<yaml_serde::Value> {
    use serde::Deserialize;
    manifests()
        .iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            yaml_serde::Deserializer::from_str(&text)
                .map(|d| yaml_serde::Value::deserialize(d).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

fn named<'a>(docs: &'a [yaml_serde::Value], kind: &str, name: &str) -> &'a yaml_serde::Value {
    docs.iter()
        .find(|d| d["kind"].as_str() == Some(kind) && d["metadata"]["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("deploy/k8s has no {kind} {name}"))
}

/// The validator, or `None` (with a loud SKIPPED line) when it is missing outside CI.
fn validator() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kubernetes-validate"))
            .find(|p| p.is_file())
    });
    if found.is_some() {
        return found;
    }
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    assert!(
        !ci,
        "kubernetes-validate is needed to check deploy/k8s but is not on PATH: \
         `pip install kubernetes-validate` (.ci/run does)"
    );
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED the_kubernetes_manifests_validate_against_the_schema: kubernetes-validate \
         is not on PATH (pip install kubernetes-validate) ***\n"
    );
    None
}

#[test]
fn the_kubernetes_manifests_validate_against_the_schema() {
    let Some(exe) = validator() else { return };
    let out = std::process::Command::new(exe)
        .args(["--strict", "--quiet"])
        .args(manifests())
        .output()
        .expect("kubernetes-validate runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The container's args with `$(VAR)` replaced (the completion index by `index`, the opening
/// by an instant a minute ahead).
fn args_of(container: &yaml_serde::Value, index: u32) -> Vec<String> {
    let open_at = (chrono::Utc::now() + chrono::Duration::minutes(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    container["args"]
        .as_sequence()
        .expect("the container has args")
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace("$(JOB_COMPLETION_INDEX)", &index.to_string())
                .replace("$(OPEN_AT)", &open_at)
        })
        .collect()
}

fn parse(args: &[String]) -> Command {
    let mut argv = vec!["oversell".to_string()];
    argv.extend_from_slice(args);
    Cli::try_parse_from(&argv)
        .unwrap_or_else(|e| panic!("oversell does not take {args:?}: {e}"))
        .command
}

fn first_container(doc: &yaml_serde::Value) -> &yaml_serde::Value {
    &doc["spec"]["template"]["spec"]["containers"][0]
}

#[test]
fn the_indexed_job_shards_and_the_merge_agree() {
    let docs = documents();
    let shards = named(&docs, "Job", "oversell-shards");
    let spec = &shards["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let n = spec["completions"].as_u64().expect("completions") as u32;
    assert_eq!(
        spec["parallelism"].as_u64(),
        Some(n as u64),
        "all shards at once"
    );
    let mut outs = Vec::new();
    for i in 0..n {
        let Command::Run(run) = parse(&args_of(first_container(shards), i)) else {
            panic!("the shard pods run `oversell run`")
        };
        let shard = run.shard.shard.expect("--shard");
        assert_eq!((shard.index, shard.count), (i, n));
        assert!(run.shard.open_at.is_some() && run.shard.shop_url.is_some());
        outs.push(run.scenario.output.out);
    }
    let merge = named(&docs, "Job", "oversell-merge");
    let Command::Merge(m) = parse(&args_of(first_container(merge), 0)) else {
        panic!("the merge pod runs `oversell merge`")
    };
    assert_eq!(m.dirs, outs, "the merge reads every shard's folder");
    // The layout the separate-hosts test copies its shards into and merges from: one folder
    // per shard, the merged report beside them, all on one volume.
    let results = Path::new("/results");
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(out, &crate::shard_hosts::shard_folder(results, i));
    }
    assert_eq!(
        m.output.out,
        crate::shard_hosts::report_folder(results),
        "the merged report beside the shards' folders"
    );
    // Both mount the same volume, where the folders are.
    for job in [shards, merge] {
        let pod = &job["spec"]["template"]["spec"];
        assert_eq!(
            pod["volumes"][0]["persistentVolumeClaim"]["claimName"].as_str(),
            Some("oversell-results")
        );
        assert_eq!(
            first_container(job)["volumeMounts"][0]["mountPath"].as_str(),
            Some("/results")
        );
    }
    named(&docs, "PersistentVolumeClaim", "oversell-results");
    // The shards fire at the shop's Service, which selects the shop's pods.
    let service = named(&docs, "Service", "oversell-shop");
    let port = service["spec"]["ports"][0]["port"].as_u64().unwrap();
    let shop_url = format!("http://oversell-shop:{port}");
    let Command::Run(run) = parse(&args_of(first_container(shards), 0)) else {
        unreachable!()
    };
    assert_eq!(run.shard.shop_url.as_deref(), Some(shop_url.as_str()));
    assert_eq!(m.shop_url.as_deref(), Some(shop_url.as_str()));
    let shop = named(&docs, "Deployment", "oversell-shop");
    assert_eq!(
        service["spec"]["selector"],
        shop["spec"]["template"]["metadata"]["labels"]
    );
    let Command::Serve(serve) = parse(&args_of(first_container(shop), 0)) else {
        panic!("the shop pod runs `oversell serve`")
    };
    assert_eq!(serve.listen.port() as u64, port);
    assert_eq!(
        serve.redis_prefix, m.redis_prefix,
        "merge reads the shop's Redis keys"
    );
    assert_eq!(
        serve.strategy,
        Some(run.strategy),
        "the shards record the shop's strategy"
    );
}

#[test]
fn the_dockerfile_builds_the_binary_and_ships_the_scenarios() {
    let text = std::fs::read_to_string(root().join("Dockerfile")).expect("a Dockerfile");
    let stages: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().to_ascii_uppercase().starts_with("FROM "))
        .collect();
    assert_eq!(
        stages.len(),
        2,
        "multi-stage: a builder and a runtime: {stages:?}"
    );
    assert!(
        stages[0].contains(" AS builder") && stages[1].contains("-slim"),
        "{stages:?}"
    );
    assert!(text.contains("cargo build --release --locked --bin oversell"));
    assert!(
        text.contains("COPY --from=builder /src/target/release/oversell /usr/local/bin/oversell")
    );
    assert!(text.contains("COPY --from=builder /src/scenarios/ /opt/oversell/scenarios/"));
    assert!(text.contains("ENTRYPOINT [\"oversell\"]"));
    // The paths it copies exist, and the build context keeps them.
    for p in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "src/main.rs",
        "scenarios",
        "lua",
        "migrations",
        "assets",
    ] {
        assert!(root().join(p).exists(), "{p}");
    }
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).expect("a .dockerignore");
    let ignored: Vec<&str> = ignore
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(ignored.contains(&"target/"), "{ignored:?}");
    for kept in [
        "src",
        "scenarios",
        "lua",
        "migrations",
        "assets",
        "tests",
        "Cargo.lock",
    ] {
        assert!(
            !ignored.iter().any(|i| i.trim_end_matches('/') == kept),
            "{kept} is needed by the build"
        );
    }
    // The rust image is at least the crate's rust-version.
    let cargo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let msrv = cargo
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .unwrap()
        .trim_matches('"')
        .to_string();
    let image = stages[0].split_whitespace().nth(1).unwrap();
    let version = image
        .trim_start_matches("rust:")
        .split('-')
        .next()
        .unwrap()
        .to_string();
    let v = |s: &str| -> Vec<u32> { s.split('.').map(|p| p.parse().unwrap()).collect() };
    assert!(
        v(&version) >= v(&msrv),
        "{image} is older than rust-version {msrv}"
    );
}

#[test]
fn no_manifest_ships_an_admin_token_and_every_pod_reads_the_generated_one() {
    for m in manifests() {
        let text = std::fs::read_to_string(&m).unwrap();
        let shipped = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .any(|l| l.contains("OVERSELL_ADMIN_TOKEN:"));
        assert!(!shipped, "{} ships an admin token", m.display());
    }
    let docs = documents();
    for (kind, name) in [
        ("Deployment", "oversell-shop"),
        ("Job", "oversell-shards"),
        ("Job", "oversell-merge"),
    ] {
        let sources = &first_container(named(&docs, kind, name))["envFrom"];
        let secrets: Vec<&str> = sources
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(|s| s["secretRef"]["name"].as_str())
            .collect();
        assert!(
            secrets.contains(&"oversell-admin"),
            "{kind}/{name} reads the generated token: {secrets:?}"
        );
    }
}
