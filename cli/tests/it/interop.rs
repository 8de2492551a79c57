//! The CI interop check: every in-scope payload of the Python reference implementation
//! (`contracts/tests/fixtures/upstream/contracts_v0_1.json`, a copy of the shared fixtures)
//! passes `craik contracts validate --roundtrip`: it validates and re-serialises to equal JSON,
//! modulo the defaults the README lists.

use std::fs;

use pretty_assertions::assert_eq;

use crate::{craik, run_in, transcript, upstream_fixture_file};

/// The README's "Interop with the reference implementation" table, as data.
const DEFAULTS_THE_REFERENCE_OMITS: &[(&str, &str)] = &[
    ("craik.memory_proposal", "$.run_id"),
    ("craik.memory_proposal", "$.step_result_id"),
    ("craik.memory_proposal", "$.handoff_id"),
];

#[test]
fn reference_payloads_validate_and_round_trip_through_the_binary() {
    let path = upstream_fixture_file();
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let fixtures: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).unwrap();

    let output = craik()
        .args(["schema", "list", "--format", "json"])
        .output()
        .unwrap();
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    let in_scope: Vec<String> = listed
        .iter()
        .filter(|l| l["origin"] == "reference")
        .map(|l| l["schema"].as_str().unwrap().to_owned())
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--format".to_owned(),
        "json".into(),
        "contracts".into(),
        "validate".into(),
        "--roundtrip".into(),
    ];
    for name in &in_scope {
        let payload = fixtures
            .get(name)
            .unwrap_or_else(|| panic!("reference fixtures lack {name}"));
        let file = format!("{name}.json");
        fs::write(
            dir.path().join(&file),
            serde_json::to_vec_pretty(payload).unwrap(),
        )
        .unwrap();
        args.push(file);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = run_in(dir.path(), &args);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));

    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["summary"]["valid"], 25);
    let mut defaults = Vec::new();
    for file in report["files"].as_array().unwrap() {
        let record = &file["records"][0];
        assert_eq!(
            record["roundtrip"]["changed"],
            serde_json::json!([]),
            "{file}"
        );
        for added in record["roundtrip"]["defaults_added"].as_array().unwrap() {
            defaults.push((
                record["schema"].as_str().unwrap().to_owned(),
                added.as_str().unwrap().to_owned(),
            ));
        }
    }
    let expected: Vec<(String, String)> = DEFAULTS_THE_REFERENCE_OMITS
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    assert_eq!(defaults, expected);
}

#[test]
fn roundtrip_reports_lossy_spellings_as_check_failures() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        fs::read_to_string(crate::repo_root().join("examples/docs-review/task_request.json"))
            .unwrap()
            .replace("2026-11-20T09:00:00Z", "2026-11-20T09:00:00+00:00");
    fs::write(dir.path().join("offset.json"), text).unwrap();
    let output = run_in(
        dir.path(),
        &["contracts", "validate", "--roundtrip", "offset.json"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", transcript(&output));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "offset.json: $.created_at: changed by re-serialisation\n"
    );
}
