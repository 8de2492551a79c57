//! Integration tests of `craik-contracts`: reference interop, committed schemas, error paths.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "integration tests fail loudly by design"
)]

mod errors;
mod hostile;
mod interop;
mod schemas;

use std::path::PathBuf;

/// `<repo>/..`/shared, or `$CRAIK_SHARED_DIR`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("CRAIK_SHARED_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    }
}

/// The reference implementation's payloads keyed by schema name, plus a sample of each of
/// Craik's own contracts.
pub fn upstream_fixtures() -> serde_json::Map<String, serde_json::Value> {
    let path = shared_dir().join("craik/upstream-fixtures/contracts_v0_1.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the reference fixtures at {}: {e}; \
             clone the project with shared/ beside it or set CRAIK_SHARED_DIR",
            path.display()
        )
    });
    let mut fixtures: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).expect("fixture file is a JSON object");
    // Craik's own contracts have no reference payload: their sample is the committed example.
    let scenario = repo_root().join("examples/docs-review/scenario.json");
    let sample = std::fs::read_to_string(&scenario).expect("the docs-review scenario");
    fixtures.insert(
        "craik.fixture_scenario".into(),
        serde_json::from_str(&sample).expect("the scenario is JSON"),
    );
    fixtures
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}
