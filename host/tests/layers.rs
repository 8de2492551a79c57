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

/// Host modules by layer: a module may use its own layer's modules and those below.
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
    // `case` (the case file) and `project` (the profile) read a home's runs and memory, and a
    // run binds its case file: one layer with `run`.
    &["run", "ledger", "audits", "case", "project", "prompt"],
    // The runner registry pins and resolves adapters; the adapter checks the bytes it runs
    // against the registry's digest: one layer.
    &["adapter", "registry"],
    &["launch", "conformance"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
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

#[test]
fn host_modules_import_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        let Some(own) = layer_of(&top) else {
            assert_eq!(
                top,
                "lib",
                "{}: a new module; add it to LAYERS",
                rel.display()
            );
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap();
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (at, _) in line.match_indices("crate::") {
                let used: String = line[at + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if let Some(layer) = layer_of(&used) {
                    assert!(
                        layer <= own,
                        "{}: `{top}` imports `{used}`, a module above it: {line}",
                        rel.display()
                    );
                }
            }
        }
    }
}
