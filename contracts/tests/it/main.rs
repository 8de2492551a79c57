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

/// The reference implementation's payloads, copied into the repository (see
/// `tests/fixtures/upstream/PROVENANCE.md`): a bare clone needs nothing beside it.
pub fn upstream_fixture_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upstream/contracts_v0_1.json")
}

/// The reference implementation's payloads keyed by schema name, plus a sample of each of
/// Craik's own contracts.
pub fn upstream_fixtures() -> serde_json::Map<String, serde_json::Value> {
    let path = upstream_fixture_file();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read the reference fixtures at {}: {e}",
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
