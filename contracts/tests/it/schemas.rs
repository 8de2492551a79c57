//! The committed JSON Schemas are exactly what the types generate, are valid draft 2020-12,
//! and agree with serde on the reference payloads.

use std::collections::BTreeSet;

use craik_contracts::Kind;

use crate::{repo_root, upstream_fixtures};

const REGENERATE: &str = "regenerate with `cargo run -p craik -- schema export contracts/schema`";

#[test]
fn committed_schemas_match_the_types() {
    let dir = repo_root().join("contracts/schema");
    for kind in Kind::ALL {
        let path = dir.join(kind.schema_file_name());
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; {REGENERATE}", path.display()));
        assert!(
            committed == kind.json_schema_text(),
            "{} is stale; {REGENERATE}",
            path.display()
        );
    }
    let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let channel = dir.join("channel.schema.json");
    assert!(
        std::fs::read_to_string(&channel).unwrap_or_default()
            == craik_contracts::channel::channel_schema_text(),
        "{} is stale; {REGENERATE}",
        channel.display()
    );
    let mut expected: BTreeSet<String> = Kind::ALL.iter().map(|k| k.schema_file_name()).collect();
    expected.insert("channel.schema.json".into());
    // Generated from the kernel's signed payload types; the kernel's tests check them.
    expected.insert("receipt.schema.json".into());
    expected.insert("checkpoint.schema.json".into());
    assert_eq!(
        on_disk, expected,
        "contracts/schema holds files no contract generates"
    );
}

#[test]
fn there_are_26_contracts_with_distinct_names() {
    let names: BTreeSet<&str> = Kind::ALL.iter().map(|k| k.schema_name()).collect();
    assert_eq!(names.len(), 26);
    for kind in Kind::ALL {
        assert_eq!(Kind::from_name(kind.name()), Some(*kind));
        assert_eq!(Kind::from_name(kind.schema_name()), Some(*kind));
    }
    assert_eq!(Kind::from_name("craik.plugin_receipt"), None);
}

#[test]
fn schemas_are_valid_draft_2020_12() {
    for kind in Kind::ALL {
        let schema = kind.json_schema();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema",
            "{}",
            kind.name()
        );
        if let Err(e) = jsonschema::meta::validate(&schema) {
            panic!("{}: not a valid JSON Schema: {e}", kind.name());
        }
    }
}

#[test]
fn reference_payloads_validate_against_the_schemas_and_strays_do_not() {
    let fixtures = upstream_fixtures();
    for kind in Kind::ALL {
        let validator = jsonschema::draft202012::new(&kind.json_schema()).unwrap();
        let payload = &fixtures[kind.schema_name()];
        let errors: Vec<String> = validator
            .iter_errors(payload)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", kind.name());

        let mut stray = payload.clone();
        stray["unexpected"] = serde_json::json!(1);
        assert!(
            !validator.is_valid(&stray),
            "{}: schema accepts unknown fields",
            kind.name()
        );

        let mut wrong = payload.clone();
        wrong["version"] = serde_json::json!("0.2.0");
        assert!(
            !validator.is_valid(&wrong),
            "{}: schema accepts version 0.2.0",
            kind.name()
        );
    }
}
