//! Rejection at every depth: an unknown field injected into any structured object of any
//! reference payload is refused with a path that names it; free-form objects are the only
//! places that accept arbitrary keys.

use craik_contracts::{Kind, TaskRequest, decode_document, decode_single};
use serde_json::Value;

use crate::upstream_fixtures;

/// Fields that are free-form by design (runner- or backend-specific data).
const FREE_FORM: &[&str] = &[
    "metadata",
    "context",
    "outputs",
    "observed_output",
    "repo_state",
    "github_state",
    "context_budget",
    "runner_metadata",
];

fn object_paths(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value {
        Value::Object(map) => {
            out.push(path.clone());
            for (k, v) in map {
                path.push(k.clone());
                object_paths(v, path, out);
                path.pop();
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                path.push(i.to_string());
                object_paths(v, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

fn get_mut<'a>(value: &'a mut Value, path: &[String]) -> &'a mut Value {
    path.iter().fold(value, |v, seg| match v {
        Value::Array(items) => &mut items[seg.parse::<usize>().unwrap()],
        other => &mut other[seg.as_str()],
    })
}

fn json_path(path: &[String]) -> String {
    let mut out = String::from("$");
    for seg in path {
        if seg.parse::<usize>().is_ok() {
            out.push_str(&format!("[{seg}]"));
        } else {
            out.push('.');
            out.push_str(seg);
        }
    }
    out
}

#[test]
fn unknown_fields_are_rejected_at_every_structured_depth() {
    let fixtures = upstream_fixtures();
    let mut injected = 0;
    for kind in Kind::ALL {
        let payload = &fixtures[kind.schema_name()];
        let mut paths = Vec::new();
        object_paths(payload, &mut Vec::new(), &mut paths);
        for path in paths {
            let free_form = path.iter().any(|seg| FREE_FORM.contains(&seg.as_str()));
            let mut mutated = payload.clone();
            get_mut(&mut mutated, &path)["zz_unknown"] = Value::Bool(true);
            let doc = decode_document(&serde_json::to_vec(&mutated).unwrap(), None);
            let outcome = &doc.records[0].outcome;
            if free_form {
                assert!(
                    outcome.is_ok(),
                    "{} {}: free-form object refused",
                    kind.name(),
                    json_path(&path)
                );
                continue;
            }
            injected += 1;
            let problems = outcome.as_ref().err().unwrap_or_else(|| {
                panic!(
                    "{} {}: unknown field accepted",
                    kind.name(),
                    json_path(&path)
                )
            });
            let expected_path = json_path(&path);
            let expected_path = if expected_path == "$" {
                "$.zz_unknown".to_owned()
            } else {
                format!("{expected_path}.zz_unknown")
            };
            assert_eq!(problems[0].path, expected_path, "{}", kind.name());
            assert!(
                problems[0]
                    .message
                    .starts_with("unknown field `zz_unknown`"),
                "{:?}",
                problems[0]
            );
        }
    }
    assert!(
        injected > 40,
        "only {injected} structured objects exercised"
    );
}

#[test]
fn nested_contract_tags_are_checked_with_their_path() {
    let fixtures = upstream_fixtures();
    let mut step = fixtures["craik.runner_step_request"].clone();
    step["runner"]["schema"] = Value::String("craik.task_request".into());
    let doc = decode_document(&serde_json::to_vec(&step).unwrap(), None);
    let problem = &doc.records[0].outcome.as_ref().unwrap_err()[0];
    assert_eq!(problem.path, "$.runner.schema");
    assert_eq!(
        problem.message,
        "wrong schema `craik.task_request`, expected `craik.runner_metadata`"
    );

    let mut case = fixtures["craik.case_file"].clone();
    case["evidence"][0]["version"] = Value::String("0.1.1".into());
    let doc = decode_document(&serde_json::to_vec(&case).unwrap(), None);
    let problem = &doc.records[0].outcome.as_ref().unwrap_err()[0];
    assert_eq!(problem.path, "$.evidence[0].version");
    assert_eq!(
        problem.message,
        "unsupported version `0.1.1`, expected `0.1.0`"
    );
}

#[test]
fn absent_tags_default_and_are_written() {
    let fixtures = upstream_fixtures();
    let mut task = fixtures["craik.task_request"].clone();
    task.as_object_mut().unwrap().remove("version");
    let doc = decode_document(&serde_json::to_vec(&task).unwrap(), Some(Kind::TaskRequest));
    let mut untagged = task.clone();
    untagged.as_object_mut().unwrap().remove("schema");
    let written = doc.records[0].outcome.as_ref().unwrap().to_value().unwrap();
    assert_eq!(written["schema"], "craik.task_request");
    assert_eq!(written["version"], "0.1.0");
    let doc = decode_document(
        &serde_json::to_vec(&untagged).unwrap(),
        Some(Kind::TaskRequest),
    );
    assert!(doc.is_valid());
    let doc = decode_document(&serde_json::to_vec(&untagged).unwrap(), None);
    let problem = &doc.records[0].outcome.as_ref().unwrap_err()[0];
    assert_eq!(problem.path, "$.schema");
    assert!(problem.message.contains("--schema"));
}

#[test]
fn forced_schema_must_agree_with_the_record() {
    let fixtures = upstream_fixtures();
    let bytes = serde_json::to_vec(&fixtures["craik.handoff"]).unwrap();
    let doc = decode_document(&bytes, Some(Kind::TaskRequest));
    let problems = doc.records[0].outcome.as_ref().unwrap_err();
    assert_eq!(problems[0].path, "$.schema");
    assert_eq!(
        problems[0].message,
        "wrong schema `craik.handoff`, expected `craik.task_request`"
    );
}

#[test]
fn semantic_rules_report_every_problem() {
    let fixtures = upstream_fixtures();
    let mut role = fixtures["craik.agent_role"].clone();
    role["id"] = Value::String("orchestrator".into());
    role["authority"] = serde_json::json!(["review"]);
    role["expected_output_schemas"] = serde_json::json!([]);
    let doc = decode_document(&serde_json::to_vec(&role).unwrap(), None);
    let problems: Vec<String> = doc.records[0]
        .outcome
        .as_ref()
        .unwrap_err()
        .iter()
        .map(|p| format!("{}: {}", p.path, p.message))
        .collect();
    assert_eq!(
        problems,
        [
            "$.id: invalid id `orchestrator`, expected an id starting with `role_`",
            "$.expected_output_schemas: has 0 entries, expected at least 1 entry",
            "$.authority: a `orchestrator` role must hold `coordinate` authority",
        ]
    );
}

/// Exactly one record of the asked type, or every problem in one line each.
#[test]
fn decode_single_wants_exactly_one_record_of_its_type() {
    let fixtures = upstream_fixtures();
    let task = fixtures["craik.task_request"].clone();
    let one = serde_json::to_vec(&task).unwrap();
    let decoded: TaskRequest = decode_single(&one).unwrap();
    assert_eq!(
        serde_json::to_value(&decoded).unwrap()["schema"],
        task["schema"]
    );

    let two = serde_json::to_vec(&serde_json::json!([task, task])).unwrap();
    assert_eq!(
        decode_single::<TaskRequest>(&two).unwrap_err(),
        ["$: holds more than one record"]
    );
    let empty = decode_single::<TaskRequest>(b"[]").unwrap_err();
    assert_eq!(
        empty,
        ["$: empty array, expected at least one contract object"]
    );
    let mut bad = task.clone();
    bad["bogus"] = serde_json::json!(1);
    let problems = decode_single::<TaskRequest>(&serde_json::to_vec(&bad).unwrap()).unwrap_err();
    assert!(problems[0].starts_with("$.bogus: "), "{problems:?}");
    let broken = decode_single::<TaskRequest>(b"{\"schema\": ").unwrap_err();
    assert_eq!(broken.len(), 1);
    assert!(!broken[0].contains('\n'), "{broken:?}");
}
