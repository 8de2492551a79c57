//! `craik contracts validate`: the broken-payload corpus, generated hostile inputs, formats.

use std::fs;

use pretty_assertions::assert_eq;

use crate::{corpus, repo_root, run_in, transcript};

/// Every committed broken payload exits 3 with one line per problem, each naming the file
/// and a JSON path; the exact lines are a reviewed snapshot.
#[test]
fn broken_corpus_is_rejected_with_located_one_line_errors() {
    let dir = corpus().join("invalid");
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 20, "corpus shrank to {}", names.len());
    let mut all = String::new();
    for name in &names {
        let output = run_in(&dir, &["contracts", "validate", name]);
        assert_eq!(
            output.status.code(),
            Some(3),
            "{name}: {}",
            transcript(&output)
        );
        let stderr = String::from_utf8(output.stderr.clone()).unwrap();
        assert!(!stderr.is_empty(), "{name}: no diagnostic");
        for line in stderr.lines() {
            assert!(
                line.starts_with(&format!("{name}: ")),
                "{name}: line does not name the file: {line}"
            );
        }
        assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"));
        all.push_str(&format!("## {name}\n{}\n", transcript(&output)));
    }
    insta::assert_snapshot!("broken_corpus", all);
}

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn valid_task() -> Vec<u8> {
    fs::read(repo_root().join("examples/docs-review/task_request.json")).unwrap()
}

#[test]
fn non_utf8_bytes_are_located() {
    let dir = temp();
    let mut bytes = valid_task();
    let at = bytes.iter().position(|&b| b == b'R').unwrap();
    bytes[at] = 0xff;
    fs::write(dir.path().join("latin1.json"), &bytes).unwrap();
    let output = run_in(dir.path(), &["contracts", "validate", "latin1.json"]);
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr,
        format!(
            "latin1.json: $: not valid UTF-8 at byte {at}, expected UTF-8 JSON (line 5, column 13)\n"
        )
    );
}

#[test]
fn a_50_mb_file_is_refused_before_parsing() {
    let dir = temp();
    let path = dir.path().join("huge.json");
    let file = fs::File::create(&path).unwrap();
    file.set_len(50 * 1024 * 1024).unwrap();
    let output = run_in(dir.path(), &["contracts", "validate", "huge.json"]);
    assert_eq!(output.status.code(), Some(3), "{}", transcript(&output));
    assert_eq!(
        String::from_utf8(output.stderr).unwrap(),
        "huge.json: is 52428800 bytes, larger than the 16777216-byte limit (raise it with --max-bytes)\n"
    );
    // The same cap holds for stdin, where no size is known up front.
    let output = crate::craik()
        .args(["contracts", "validate", "--max-bytes", "100", "-"])
        .write_stdin(valid_task())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3));
    assert!(
        String::from_utf8(output.stderr)
            .unwrap()
            .starts_with("<stdin>: is 101 bytes, larger than the 100-byte limit")
    );
}

#[test]
fn byte_order_mark_and_deep_nesting_are_refused() {
    let dir = temp();
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend(valid_task());
    fs::write(dir.path().join("bom.json"), bom).unwrap();
    let deep = format!(
        "{{\"schema\":\"craik.evidence_reference\",\"id\":\"evidence_x\",\"source\":\"s\",\"kind\":\"file\",\"locator\":\"l\",\"summary\":\"s\",\"metadata\":{{\"a\":{}{}}}}}",
        "[".repeat(100),
        "]".repeat(100)
    );
    fs::write(dir.path().join("deep.json"), deep).unwrap();
    let output = run_in(
        dir.path(),
        &["contracts", "validate", "bom.json", "deep.json"],
    );
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(
        lines[0].starts_with("bom.json: $: starts with a byte-order mark"),
        "{stderr}"
    );
    assert!(
        lines[1].starts_with("deep.json: $.metadata.a[0][0]"),
        "{stderr}"
    );
    assert!(
        lines[1].contains("…: nested deeper than 64 levels"),
        "{stderr}"
    );
}

#[test]
fn hostile_values_cannot_break_the_one_line_rule() {
    let dir = temp();
    let text = String::from_utf8(valid_task()).unwrap().replace(
        "\"mode\": \"review\"",
        "\"mode\": \"x\\n\\u001b[2Jfake.json: ok\\r\"",
    );
    fs::write(dir.path().join("evil.json"), text).unwrap();
    let output = run_in(dir.path(), &["contracts", "validate", "evil.json"]);
    assert_eq!(output.status.code(), Some(3));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("unknown variant `x\\n\\u{1b}[2Jfake.json: ok\\r`"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'));
}

#[test]
fn examples_validate_and_report_in_json() {
    let output = run_in(&repo_root(), &["contracts", "validate", "examples/"]);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    let output = run_in(
        &repo_root(),
        &["--format", "json", "contracts", "validate", "examples/"],
    );
    assert_eq!(output.status.code(), Some(0));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let summary = &report["summary"];
    assert_eq!(summary["invalid"], 0);
    assert!(summary["records"].as_u64().unwrap() >= 7);
    assert_eq!(summary["records"], summary["valid"]);
}

#[test]
fn issue_22_directory_search_passes_over_npm_manifests_but_not_a_named_one() {
    let dir = temp();
    fs::create_dir_all(dir.path().join("pkg/node_modules/x")).unwrap();
    fs::write(dir.path().join("pkg/package.json"), r#"{"name":"x"}"#).unwrap();
    fs::write(dir.path().join("pkg/node_modules/x/a.json"), "{}").unwrap();
    fs::write(dir.path().join("pkg/task.json"), valid_task()).unwrap();
    let output = run_in(dir.path(), &["contracts", "validate", "pkg"]);
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("1 file, 1 record: 1 valid"),
        "{}",
        transcript(&output)
    );
    // Named explicitly, it is checked like any file (and is no contract).
    let output = run_in(dir.path(), &["contracts", "validate", "pkg/package.json"]);
    assert_eq!(output.status.code(), Some(3), "{}", transcript(&output));
}

#[test]
fn arrays_json_lines_and_stdin_are_accepted() {
    let dir = temp();
    let task: serde_json::Value = serde_json::from_slice(&valid_task()).unwrap();
    let array = serde_json::to_string_pretty(&vec![task.clone(), task.clone()]).unwrap();
    fs::write(dir.path().join("two.json"), array).unwrap();
    let lines = format!("{}\n\n{}\r\n", task, task);
    fs::write(dir.path().join("two.jsonl"), lines).unwrap();
    let output = run_in(
        dir.path(),
        &["contracts", "validate", "two.json", "two.jsonl"],
    );
    assert_eq!(
        transcript(&output),
        "exit: 0\n--- stdout\ntwo.json: ok (2 records: craik.task_request)\ntwo.jsonl: ok (2 records: craik.task_request)\n2 files, 4 records: 4 valid\n--- stderr\n"
    );
    let output = crate::craik()
        .args(["contracts", "validate", "--schema", "task_request", "-"])
        .write_stdin(valid_task())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", transcript(&output));
}

#[test]
fn usage_errors_exit_2() {
    let dir = temp();
    for args in [
        vec!["contracts", "validate", "missing.json"],
        vec!["contracts", "validate", "--schema", "nope", "-"],
        vec!["contracts", "validate"],
        vec!["contracts", "frobnicate"],
        vec!["schema", "show", "plugin_receipt"],
    ] {
        let output = run_in(dir.path(), &args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            transcript(&output)
        );
        assert!(!output.stderr.is_empty());
    }
}
