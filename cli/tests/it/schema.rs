//! `craik schema list|show|export`, `--version`, completions.

use std::fs;

use pretty_assertions::assert_eq;

use crate::{craik, repo_root, run_in, transcript};

#[test]
fn list_shows_the_26_contracts() {
    let output = craik().args(["schema", "list"]).output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    insta::assert_snapshot!("schema_list", String::from_utf8(output.stdout).unwrap());
    let output = craik()
        .args(["schema", "list", "--format", "json"])
        .output()
        .unwrap();
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(listed.len(), 26);
    assert!(listed.iter().all(|l| l["version"] == "0.1.0"));
}

#[test]
fn export_writes_26_contract_schemas_the_payload_schemas_and_the_channel_schema() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("out/schemas");
    let output = run_in(dir.path(), &["schema", "export", "out/schemas"]);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let mut files: Vec<_> = fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 29);
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let committed = repo_root()
            .join("contracts/schema")
            .join(file.file_name().unwrap());
        assert_eq!(text, fs::read_to_string(committed).unwrap());
        let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
        jsonschema::meta::validate(&schema).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        jsonschema::draft202012::new(&schema).unwrap();
    }
}

#[test]
fn export_into_a_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("taken"), "x").unwrap();
    let output = run_in(dir.path(), &["schema", "export", "taken"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .starts_with("craik: taken: cannot create directory")
    );
    assert_eq!(fs::read_to_string(dir.path().join("taken")).unwrap(), "x");
}

#[test]
fn show_prints_the_committed_schema() {
    let output = craik()
        .args(["schema", "show", "craik.handoff"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let committed =
        fs::read_to_string(repo_root().join("contracts/schema/handoff.schema.json")).unwrap();
    assert_eq!(String::from_utf8(output.stdout).unwrap(), committed);
}

#[test]
fn version_and_completions() {
    let output = craik().arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8(output.stdout).unwrap(),
        format!("craik {}\n", env!("CARGO_PKG_VERSION"))
    );
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let output = craik().args(["completions", shell]).output().unwrap();
        assert_eq!(output.status.code(), Some(0), "{shell}");
        let script = String::from_utf8(output.stdout).unwrap();
        assert!(
            script.contains("contracts") && script.contains("schema"),
            "{shell}"
        );
    }
}

#[test]
fn signed_payloads_of_a_real_run_validate_against_the_payload_schemas() {
    use base64::Engine as _;
    let home = tempfile::tempdir().unwrap();
    let out = crate::craik()
        .arg("run")
        .arg(repo_root().join("examples/docs-review"))
        .arg("--home")
        .arg(home.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let schema = |name: &str| {
        let text =
            fs::read_to_string(repo_root().join(format!("contracts/schema/{name}.schema.json")))
                .unwrap();
        jsonschema::draft202012::new(&serde_json::from_str::<serde_json::Value>(&text).unwrap())
            .unwrap()
    };
    let (receipt, checkpoint) = (schema("receipt"), schema("checkpoint"));
    let runs = home.path().join("runs");
    let run = fs::read_dir(&runs).unwrap().next().unwrap().unwrap().path();
    let journal = fs::read_to_string(run.join("receipts.jsonl")).unwrap();
    let mut seen = (0, 0);
    for line in journal.lines() {
        let envelope: serde_json::Value = serde_json::from_str(line).unwrap();
        let payload = base64::engine::general_purpose::STANDARD
            .decode(envelope["payload"].as_str().unwrap())
            .unwrap();
        let payload: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        let (validator, count) = if envelope["payloadType"]
            .as_str()
            .unwrap()
            .contains("checkpoint")
        {
            (&checkpoint, &mut seen.1)
        } else {
            (&receipt, &mut seen.0)
        };
        let errors: Vec<String> = validator
            .iter_errors(&payload)
            .map(|e| e.to_string())
            .collect();
        assert!(errors.is_empty(), "{errors:?}\n{payload}");
        *count += 1;
    }
    assert!(seen.0 > 5 && seen.1 >= 1, "{seen:?}");
    // A payload with a stray field does not validate.
    let mut stray: serde_json::Value = serde_json::json!({});
    stray["unexpected"] = serde_json::json!(1);
    assert!(!receipt.is_valid(&stray));
}
