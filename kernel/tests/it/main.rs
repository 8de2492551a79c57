//! Integration tests of the kernel against the committed `policies/` bundle.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "integration tests fail loudly by design"
)]

mod bundle;
mod decide;
mod evasion;
mod laws;
mod receipts;
mod redaction;
mod run;
mod secret_rules;

use std::path::{Path, PathBuf};

use craik_kernel::{Bundle, DecideOptions, DecisionRequest, GrantSet, Mode, SourceFile};
use time::macros::datetime;

pub const ROOT: &str = "/workspace";

pub fn policies_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../policies")
}

fn collect(dir: &Path, base: &Path, out: &mut Vec<SourceFile>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "cedar") {
            let name = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push(SourceFile::new(
                name,
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
}

pub fn sources() -> (SourceFile, Vec<SourceFile>) {
    let dir = policies_dir();
    let schema = SourceFile::new(
        "schema.cedarschema",
        std::fs::read_to_string(dir.join("schema.cedarschema")).unwrap(),
    );
    let mut files = Vec::new();
    collect(&dir, &dir, &mut files);
    (schema, files)
}

/// The committed bundle, loaded once per test binary.
pub fn bundle() -> Bundle {
    static BUNDLE: std::sync::LazyLock<Bundle> = std::sync::LazyLock::new(|| {
        let (schema, files) = sources();
        Bundle::load(&schema, &files).unwrap_or_else(|e| panic!("{e}"))
    });
    BUNDLE.clone()
}

pub fn options() -> DecideOptions {
    DecideOptions {
        now: datetime!(2026-11-20 10:00 UTC),
        workspace_root: ROOT.into(),
        mode: Mode::Enforce,
        immutable: craik_kernel::ImmutablePaths::default(),
    }
}

pub fn request(json: serde_json::Value) -> DecisionRequest {
    let mut base = serde_json::json!({
        "runner": {"id": "runner_fixture", "trust": "medium", "mode": "fixture"},
        "task_id": "task_docs",
        "operation": "write",
        "profile": "strict",
    });
    for (k, v) in json.as_object().unwrap() {
        base[k] = v.clone();
    }
    serde_json::from_value(base).unwrap()
}

pub fn grants(bundle: &Bundle, json: serde_json::Value) -> GrantSet {
    let grants: Vec<craik_contracts::CapabilityGrant> = serde_json::from_value(json).unwrap();
    GrantSet::compile(bundle, &grants).unwrap_or_else(|e| panic!("{e}"))
}

pub fn docs_grant() -> serde_json::Value {
    serde_json::json!([{
        "id": "grant_docs_write",
        "task_id": "task_docs",
        "capability": "repo.write.docs",
        "target": {"paths": ["docs/**", "README.md"], "exclude": ["docs/adr/**"]},
        "operations": ["read", "write", "patch"],
        "expires_at": "2026-11-21T00:00:00Z",
        "reason": "Documentation reconciliation.",
        "approved_by": "user:maintainer"
    }])
}
