//! The import picture, checked: crates depend only downward (cli → host → kernel → contracts;
//! adapters beside, on contracts only), and inside the host no module imports one above it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests fail loudly by design"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each workspace crate and the workspace crates it may depend on (normal and dev).
const ALLOWED: &[(&str, &[&str])] = &[
    ("craik-contracts", &[]),
    ("craik-kernel", &["craik-contracts"]),
    ("craik-spawn", &[]),
    (
        "craik-host",
        &["craik-spawn", "craik-kernel", "craik-contracts"],
    ),
    // The prover (issue 35): beside the host, never under the kernel; the kernel does not
    // depend on it, so no solver is on the decision path.
    ("craik-prove", &["craik-kernel", "craik-contracts"]),
    (
        "craik",
        &[
            "craik-host",
            "craik-prove",
            "craik-kernel",
            "craik-contracts",
        ],
    ),
    ("craik-adapter-fixture", &["craik-contracts"]),
    // The handoff adapters start their CLI with a parent-death signal, whose `pre_exec` lives
    // in craik-spawn (the one crate that may hold `unsafe`).
    ("craik-adapter-codex", &["craik-contracts", "craik-spawn"]),
    ("craik-adapter-claude", &["craik-contracts", "craik-spawn"]),
    ("craik-adapter-gemini", &["craik-contracts", "craik-spawn"]),
    ("craik-adapter-provider", &["craik-contracts"]),
];

#[test]
fn crates_depend_only_downward() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let packages = meta["packages"].as_array().unwrap();
    let ours: Vec<&str> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for package in packages {
        let name = package["name"].as_str().unwrap();
        let may = allowed
            .get(name)
            .unwrap_or_else(|| panic!("{name}: a new crate; add it to ALLOWED with its layer"));
        for dep in package["dependencies"].as_array().unwrap() {
            let dep = dep["name"].as_str().unwrap();
            if ours.contains(&dep) {
                assert!(may.contains(&dep), "{name} must not depend on {dep}");
            }
        }
    }
}

/// `unsafe` lives in one crate: every other one takes the workspace lints
/// (`unsafe_code = "forbid"`), and `craik-spawn` at least denies it outside the items that
/// allow it, each with a SAFETY comment.
#[test]
fn only_craik_spawn_may_hold_unsafe() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(workspace.contains("unsafe_code = \"forbid\""));
    let members: Vec<&str> = workspace
        .lines()
        .find(|l| l.starts_with("members"))
        .unwrap()
        .split('"')
        .skip(1)
        .step_by(2)
        .collect();
    assert!(members.contains(&"spawn"), "{members:?}");
    for member in members {
        let manifest = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        if member == "spawn" {
            assert!(manifest.contains("unsafe_code = \"deny\""));
            assert!(manifest.contains("undocumented_unsafe_blocks = \"deny\""));
            let source = std::fs::read_to_string(root.join("spawn/src/lib.rs")).unwrap();
            let blocks = source.matches("unsafe {").count();
            let allowed = source.matches("#[allow(unsafe_code)]").count();
            assert_eq!(blocks, allowed, "every unsafe block allows it explicitly");
        } else {
            assert!(
                manifest.contains("[lints]\nworkspace = true"),
                "{member}/Cargo.toml must take the workspace lints (no unsafe)"
            );
        }
    }
}

/// Host modules by layer, one module per file (`run::store` is `src/run/store.rs`; a file's
/// submodule files belong to it unless listed): a module may use its own layer's modules and
/// those below. No two modules that import each other share a layer: the import graph has no
/// circle (issue 33 item 6).
const LAYERS: &[&[&str]] = &[
    &[
        "error",
        "clock",
        "fsio",
        "digest",
        "confine",
        "config",
        "journal",
        "keys",
        "runners",
        "embedded",
        "policies",
        "policytest",
    ],
    // What a run directory holds and how a command is checked: files, no signatures.
    &[
        "run::exec",
        "run::manifest",
        "run::gitconfig",
        "run::precommand",
    ],
    &["run", "run::store"],
    // What the run's signed inputs and closing receipts bind.
    &["run::signed"],
    // The home ledger: names every journal of the home.
    &["ledger"],
    &[
        "audits",
        "run::approvals",
        "run::locked",
        "case::scan",
        "case::git",
        "project",
        "prompt",
    ],
    &["run::memory", "case::stale"],
    // The case file reads a home's runs and memory.
    &["case"],
    &["run::driver"],
    // The one way a new run is composed.
    &["run::plan"],
    // The runner registry pins and resolves adapters; the adapter checks the bytes it runs
    // against the registry's digest.
    &["registry"],
    &["adapter"],
    &["launch", "conformance"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The listed module a path of segments (`run::store::Home`, from `crate::`) falls in: its
/// longest listed prefix.
fn module_of(segments: &[&str]) -> Option<String> {
    (1..=segments.len().min(3))
        .rev()
        .map(|n| segments[..n].join("::"))
        .find(|m| layer_of(m).is_some())
}

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

/// The `crate::a::b::c` paths a line names (outside comments), as segments.
fn crate_paths(line: &str) -> Vec<Vec<String>> {
    line.match_indices("crate::")
        .map(|(at, _)| {
            line[at + 7..]
                .split("::")
                .map(|s| {
                    s.chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .take_while(|s| !s.is_empty())
                .collect()
        })
        .collect()
}

#[test]
fn host_modules_import_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let segments: Vec<String> = rel
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .filter(|s| s != "mod")
            .collect();
        if segments == ["lib"] {
            continue;
        }
        let refs: Vec<&str> = segments.iter().map(String::as_str).collect();
        let own = module_of(&refs)
            .unwrap_or_else(|| panic!("{}: a new module; add it to LAYERS", rel.display()));
        let own_layer = layer_of(&own).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for path in crate_paths(line) {
                let refs: Vec<&str> = path.iter().map(String::as_str).collect();
                let Some(used) = module_of(&refs) else {
                    continue;
                };
                let layer = layer_of(&used).unwrap();
                assert!(
                    layer <= own_layer,
                    "{}: `{own}` imports `{used}`, a module above it: {line}",
                    rel.display()
                );
                assert!(
                    layer < own_layer || used == own || !imports(&src, &used, &own),
                    "{}: `{own}` and `{used}` import each other: {line}",
                    rel.display()
                );
            }
        }
    }
}

/// Whether module `from`'s own file names module `to`.
fn imports(src: &Path, from: &str, to: &str) -> bool {
    let base = src.join(from.replace("::", "/"));
    let file = [base.with_extension("rs"), base.join("mod.rs")]
        .into_iter()
        .find(|f| f.is_file())
        .unwrap();
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .flat_map(crate_paths)
        .any(|p| {
            let refs: Vec<&str> = p.iter().map(String::as_str).collect();
            module_of(&refs).as_deref() == Some(to)
        })
}
