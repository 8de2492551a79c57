//! Every in-scope payload of the Python reference implementation decodes, passes the rules,
//! and re-serialises to the same JSON, modulo the defaults listed in the README.

use craik_contracts::{Kind, compare_roundtrip, decode_document};
use pretty_assertions::assert_eq;

use crate::upstream_fixtures;

/// Fields the reference omits from its fixtures and Craik writes with their default value.
/// Keep in sync with the README section "Interop with the reference implementation".
const DEFAULTS_ADDED: &[&str] = &[
    "craik.memory_proposal: $.run_id",
    "craik.memory_proposal: $.step_result_id",
    "craik.memory_proposal: $.handoff_id",
];

#[test]
fn every_in_scope_reference_payload_round_trips() {
    let fixtures = upstream_fixtures();
    let mut defaults = Vec::new();
    for kind in Kind::ALL.iter().filter(|k| k.in_reference()) {
        let payload = fixtures
            .get(kind.schema_name())
            .unwrap_or_else(|| panic!("reference fixtures lack {}", kind.schema_name()));
        let bytes = serde_json::to_vec(payload).unwrap();
        let doc = decode_document(&bytes, None);
        assert!(doc.error.is_none(), "{}: {:?}", kind.name(), doc.error);
        assert_eq!(doc.records.len(), 1);
        let contract = match &doc.records[0].outcome {
            Ok(c) => c,
            Err(problems) => panic!("{}: {problems:?}", kind.schema_name()),
        };
        assert_eq!(contract.kind(), *kind);
        let written = contract.to_value().unwrap();
        let report = compare_roundtrip(payload, &written);
        assert!(
            report.is_faithful(),
            "{}: changed {:?}",
            kind.schema_name(),
            report.changed
        );
        defaults.extend(
            report
                .defaults_added
                .iter()
                .map(|p| format!("{}: {p}", kind.schema_name())),
        );
    }
    assert_eq!(defaults, DEFAULTS_ADDED);
}

#[test]
fn out_of_scope_reference_contracts_are_refused_by_name() {
    let fixtures = upstream_fixtures();
    let payload = fixtures
        .get("craik.plugin_receipt")
        .expect("fixture present");
    let doc = decode_document(&serde_json::to_vec(payload).unwrap(), None);
    let problems = doc.records[0].outcome.as_ref().unwrap_err();
    assert_eq!(problems[0].path, "$.schema");
    assert!(
        problems[0]
            .message
            .contains("unknown contract `craik.plugin_receipt`")
    );
}
