//! Governed runs end to end through the real binary: every example reaches its documented
//! status with verifying receipts; approvals round-trip; hostile runners, secrets, symlinks and
//! hung commands end as documented.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::{craik, repo_root, transcript};

/// Runs `craik run` on an example (or a path) with a home in `home`; returns (exit, run id, stdout).
pub(crate) fn run_example(home: &Path, target: &Path, extra: &[&str]) -> (i32, String, String) {
    let out = craik()
        .arg("run")
        .arg(target)
        .arg("--home")
        .arg(home)
        .args(extra)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let id = text
        .split_whitespace()
        .nth(1)
        .map(|s| s.trim_end_matches(':').to_owned())
        .unwrap_or_default();
    assert!(
        id.starts_with("run_"),
        "no run id in output:\n{}",
        transcript(&out)
    );
    (out.status.code().unwrap_or(-1), id, text)
}

pub(crate) fn run_json(home: &Path, id: &str) -> Value {
    let text = std::fs::read_to_string(home.join("runs").join(id).join("run.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub(crate) fn verify_run(home: &Path, id: &str, allow_open: bool) {
    verify_journals(home, &home.join("runs").join(id), allow_open);
}

/// `craik receipts verify PATH` with the home's key succeeds.
fn verify_journals(home: &Path, path: &Path, allow_open: bool) {
    let mut cmd = craik();
    cmd.args(["receipts", "verify"])
        .arg(path)
        .arg("--key")
        .arg(home.join("keys/signing.pub.pem"));
    if allow_open {
        cmd.arg("--allow-open");
    }
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
}

/// Every persisted contract of a run validates as its contract.
fn validate_persisted(home: &Path, id: &str) {
    let dir = home.join("runs").join(id);
    let mut files = vec![dir.join("run.json"), dir.join("outputs.jsonl")];
    if dir.join("handoff.json").exists() {
        files.push(dir.join("handoff.json"));
    }
    if home.join("memory").exists() {
        files.push(home.join("memory"));
    }
    let out = craik()
        .args(["contracts", "validate"])
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
}

/// `craik ARGS --format json --home HOME`, which must succeed, as JSON.
pub(crate) fn json_out(home: &Path, args: &[&str]) -> Value {
    let out = craik()
        .args(args)
        .args(["--format", "json", "--home"])
        .arg(home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{args:?}: {}", transcript(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The run's receipts, decoded.
pub(crate) fn receipts(home: &Path, id: &str) -> Vec<Value> {
    serde_json::from_value(json_out(home, &["receipts", "list", id])).unwrap()
}

pub(crate) fn example(name: &str) -> PathBuf {
    repo_root().join("examples").join(name)
}

#[test]
fn every_example_reaches_its_documented_status_with_verifying_receipts() {
    let cases = [
        (
            "docs-review",
            0,
            "completed",
            "runner evaluated the task as done",
        ),
        ("adr-denied", 1, "blocked", "base.deny.immutable-writes"),
        ("approval", 6, "blocked", "awaiting approval"),
        ("iteration-ceiling", 1, "interrupted", "iteration ceiling"),
        ("intent-stop", 1, "interrupted", "intent.out-of-scope"),
        (
            "automation",
            0,
            "completed",
            "runner evaluated the task as done",
        ),
    ];
    for (name, code, status, reason) in cases {
        let home = tempfile::tempdir().unwrap();
        let (exit, id, text) = run_example(home.path(), &example(name), &[]);
        assert_eq!(exit, code, "{name}: {text}");
        let run = run_json(home.path(), &id);
        assert_eq!(run["status"], status, "{name}: {text}");
        assert!(
            run["stop_reason"].as_str().unwrap().contains(reason),
            "{name}: {}",
            run["stop_reason"]
        );
        verify_run(home.path(), &id, status == "blocked" && name == "approval");
        validate_persisted(home.path(), &id);
        let handoff = home.path().join("runs").join(&id).join("handoff.json");
        assert_eq!(handoff.exists(), name != "approval", "{name}");
        // The summary names the verdicts, the receipts and the handoff.
        assert!(text.contains("verdicts"), "{text}");
        assert!(text.contains("receipts"), "{text}");
    }
}

#[test]
fn the_docs_review_example_changes_only_its_scratch_workspace() {
    let home = tempfile::tempdir().unwrap();
    let before = std::fs::read_to_string(example("docs-review/workspace/docs/status.md")).unwrap();
    let (exit, id, _) = run_example(home.path(), &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let run_dir = home.path().join("runs").join(&id);
    let changed = workspace_text(home.path(), &id, "docs/status.md");
    assert!(changed.contains("Status: current"), "{changed}");
    assert_eq!(
        std::fs::read_to_string(example("docs-review/workspace/docs/status.md")).unwrap(),
        before
    );
    // The handoff lists exactly the work done, and the memory proposal is linked to it.
    let handoff: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("handoff.json")).unwrap())
            .unwrap();
    assert_eq!(handoff["status"], "completed");
    assert_eq!(
        handoff["files_changed"],
        json!(["docs/status.md", "docs/review-notes.md"])
    );
    assert_eq!(
        handoff["tests_run"],
        json!(["grep -q current docs/status.md"])
    );
    let memprop = handoff["memory_proposal_ids"][0].as_str().unwrap();
    let proposal: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("memory").join(format!("{memprop}.json")))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(proposal["handoff_id"], handoff["id"]);
    assert_eq!(proposal["run_id"], json!(id));
    assert_eq!(proposal["status"], "pending");
    assert!(!proposal["evidence"].as_array().unwrap().is_empty());
    // Every receipt id the handoff names is in the journal.
    let ids: Vec<Value> = receipts(home.path(), &id)
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(handoff["receipt_ids"].as_array().unwrap(), &ids);
}

/// `craik approvals VERB ID --by BY --reason … [EXTRA…]` under `home`.
pub(crate) fn review(
    home: &Path,
    verb: &str,
    id: &str,
    by: &str,
    extra: &[&str],
) -> std::process::Output {
    craik()
        .args(["approvals", verb, id, "--by", by, "--reason", "checked"])
        .args(extra)
        .arg("--home")
        .arg(home)
        .output()
        .unwrap()
}

pub(crate) fn approve(home: &Path, id: &str, by: &str) -> std::process::Output {
    review(home, "approve", id, by, &[])
}

/// A file of the run's scratch workspace.
pub(crate) fn workspace_text(home: &Path, id: &str, rel: &str) -> String {
    std::fs::read_to_string(home.join("runs").join(id).join("workspace").join(rel)).unwrap()
}

/// The run's status and stop reason.
pub(crate) fn stopped(home: &Path, id: &str) -> (String, String) {
    let run = run_json(home, id);
    (
        run["status"].as_str().unwrap_or_default().to_owned(),
        run["stop_reason"].as_str().unwrap_or_default().to_owned(),
    )
}

pub(crate) fn pending_approval(home: &Path) -> String {
    let list: Value = json_out(home, &["approvals", "list"]);
    list[0]["id"].as_str().unwrap().to_owned()
}

pub(crate) fn resume(home: &Path, id: &str) -> std::process::Output {
    craik()
        .args(["runs", "resume", id, "--by", "user:op", "--home"])
        .arg(home)
        .output()
        .unwrap()
}

#[test]
fn approval_round_trip_from_the_cli() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (exit, id, text) = run_example(h, &example("approval"), &[]);
    // Parked for an approval: exit 6 and status `awaiting-approval`, not a blocked run's 1.
    assert_eq!(exit, 6, "{text}");
    assert!(
        text.contains(": awaiting-approval — awaiting approval"),
        "{text}"
    );
    assert!(text.contains("craik approvals approve"), "{text}");
    let approval = pending_approval(h);
    // Resuming before a decision refuses and changes nothing.
    let before = receipts(h, &id).len();
    let early = resume(h, &id);
    assert_eq!(early.status.code(), Some(1), "{}", transcript(&early));
    assert!(String::from_utf8_lossy(&early.stderr).contains("still pending"));
    // Issue 31: a refused resume signs nothing (no `run.resume`).
    assert_eq!(receipts(h, &id).len(), before);
    // The runner can never approve; nor can a non-user principal.
    for by in ["user:runner_fixture", "runner_fixture", "user:", "user:a b"] {
        let out = approve(h, &approval, by);
        assert_eq!(out.status.code(), Some(2), "{by}: {}", transcript(&out));
    }
    let ok = approve(h, &approval, "user:alice");
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    // Single use: a second decision is refused.
    assert_eq!(approve(h, &approval, "user:bob").status.code(), Some(1));
    let done = resume(h, &id);
    assert_eq!(done.status.code(), Some(0), "{}", transcript(&done));
    assert_eq!(run_json(h, &id)["status"], "completed");
    verify_run(h, &id, false);
    // The decision receipt names the approver and the approval; the review is its own journal.
    let all = receipts(h, &id);
    let approved = all
        .iter()
        .find(|r| r["decided_by"]["kind"] == "approval" && r["capability"] != "approval.review")
        .expect("an approval-decided receipt");
    assert_eq!(approved["decision"], "allow");
    assert!(
        approved["decided_by"]["by"]
            .as_str()
            .unwrap()
            .contains("user:alice")
    );
    assert!(
        approved["decided_by"]["by"]
            .as_str()
            .unwrap()
            .contains(&approval)
    );
    verify_journals(h, &h.join("reviews"), false);
    let record: Value = json_out(h, &["approvals", "show", &approval]);
    assert_eq!(record["status"], "consumed");
    // Resuming a finished run is refused (issue 20) and changes nothing.
    let again = resume(h, &id);
    assert_eq!(again.status.code(), Some(1), "{}", transcript(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already ended completed"),
        "{}",
        transcript(&again)
    );
    assert_eq!(receipts(h, &id).len(), all.len());
}

#[test]
fn a_denied_approval_blocks_the_run() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (_, id, _) = run_example(h, &example("approval"), &[]);
    let approval = pending_approval(h);
    let out = review(h, "deny", &approval, "user:alice", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let done = resume(h, &id);
    assert_eq!(done.status.code(), Some(1), "{}", transcript(&done));
    let (status, reason) = stopped(h, &id);
    assert_eq!(status, "blocked");
    assert!(reason.contains("denied by user:alice"), "{reason}");
    verify_run(h, &id, false);
    assert!(workspace_text(h, &id, "docs/status.md").contains("Status: stale"));
}

#[test]
fn an_approval_never_covers_a_changed_action() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (_, id, _) = run_example(h, &example("approval"), &[]);
    let approval = pending_approval(h);
    assert_eq!(approve(h, &approval, "user:alice").status.code(), Some(0));
    // Between approval and execution, the recorded action's bytes change.
    let events = h.join("runs").join(&id).join("events.jsonl");
    let text = std::fs::read_to_string(&events).unwrap();
    assert!(text.contains("Status: current"));
    std::fs::write(&events, text.replace("Status: current", "Status: pwned!!")).unwrap();
    let before = receipts(h, &id).len();
    let out = resume(h, &id);
    // Refused: the events propose a request other than the one its signed decision hashes
    // (outside testing round 17 N2); nothing is signed, decided or written.
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the events were edited"),
        "{}",
        transcript(&out)
    );
    assert_eq!(receipts(h, &id).len(), before);
    assert!(workspace_text(h, &id, "docs/status.md").contains("Status: stale"));
}

#[test]
fn automation_admits_no_approval_so_the_write_is_denied() {
    let home = tempfile::tempdir().unwrap();
    let (exit, id, text) = run_example(
        home.path(),
        &example("approval"),
        &["--profile", "automation"],
    );
    assert_eq!(exit, 1, "{text}");
    let (status, reason) = stopped(home.path(), &id);
    assert_eq!(status, "blocked");
    assert!(reason.contains("approval.automation"), "{reason}");
    let rs = receipts(home.path(), &id);
    assert_eq!(rs[0]["capability"], "run.inputs");
    assert_eq!(rs[1]["decision"], "deny");
    verify_run(home.path(), &id, false);
}

#[test]
fn shadow_mode_decides_and_receipts_but_performs_nothing() {
    let home = tempfile::tempdir().unwrap();
    let (_, id, text) = run_example(home.path(), &example("docs-review"), &["--shadow"]);
    let run_dir = home.path().join("runs").join(&id);
    assert!(
        workspace_text(home.path(), &id, "docs/status.md").contains("Status: stale"),
        "{text}"
    );
    assert!(!run_dir.join("workspace/docs/review-notes.md").exists());
    let rs = receipts(home.path(), &id);
    assert!(rs.iter().all(|r| r["mode"] == "shadow"), "{rs:?}");
    assert!(rs.iter().all(|r| r["decided_by"]["kind"] != "outcome"));
}

/// Writes a one-off example directory: task, grants, scenario, workspace files.
pub(crate) fn scratch_example(
    dir: &Path,
    profile: &str,
    grants: &[(&str, &[&str], &[&str])],
    steps: Value,
    files: &[(&str, &str)],
) -> PathBuf {
    let ex = dir.join("example");
    std::fs::create_dir_all(ex.join("grants")).unwrap();
    std::fs::create_dir_all(ex.join("workspace")).unwrap();
    let write = |p: PathBuf, v: &Value| {
        std::fs::write(p, serde_json::to_string_pretty(v).unwrap()).unwrap();
    };
    write(
        ex.join("task_request.json"),
        &json!({"schema":"craik.task_request","id":"task_scratch","title":"Scratch",
                "objective":"Test.","project_id":"project_x","requested_by":"user:t",
                "mode":"implement","created_at":"2026-11-20T09:00:00Z"}),
    );
    write(
        ex.join("policy_envelope.json"),
        &json!({"schema":"craik.policy_envelope","id":"policy_scratch","task_id":"task_scratch",
                "actor":"runner:fixture","profile":profile}),
    );
    for (i, (cap, paths, ops)) in grants.iter().enumerate() {
        write(
            ex.join(format!("grants/g{i}.json")),
            &json!({"schema":"craik.capability_grant","id":format!("grant_g{i}"),
                    "task_id":"task_scratch","capability":cap,
                    "target":{"paths":paths,"exclude":[]},"operations":ops,
                    "reason":"test","approved_by":"user:t"}),
        );
    }
    write(
        ex.join("scenario.json"),
        &json!({"schema":"craik.fixture_scenario","id":"scenario_scratch",
                "description":"test","steps":steps}),
    );
    for (path, text) in files {
        let p = ex.join("workspace").join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    ex
}

pub(crate) fn act(actions: Value) -> Value {
    json!([
        {"phase":"plan","summary":"plan"},
        {"phase":"act","summary":"act","proposed_actions":actions},
        {"phase":"observe","summary":"observe"},
        {"phase":"evaluate","summary":"done","next":"stop"}
    ])
}

#[test]
fn hostile_runner_answers_fail_the_run_with_a_kernel_receipt() {
    let flood: Vec<Value> = (0..65)
        .map(|i| json!({"id": format!("action_{i}"), "capability": "repo.read", "operation": "read", "target": "a.md"}))
        .collect();
    let cases: [(&str, Value, &str); 5] = [
        (
            "a flood of actions",
            json!([{"phase":"plan","summary":"p"},{"phase":"act","summary":"a","proposed_actions":flood}]),
            "65 actions and 0 memory proposals in one step; at most 64",
        ),
        (
            "wrong phase",
            json!([{"phase":"act","summary":"skipping plan"}]),
            "phase `act` (asked `plan`)",
        ),
        (
            "actions outside act",
            json!([{"phase":"plan","summary":"x","proposed_actions":[
                {"id":"action_x","capability":"repo.read","operation":"read","target":"a.md"}]}]),
            "side effects are proposed in `act` only",
        ),
        (
            "scenario exhausted",
            json!([{"phase":"plan","summary":"only one step"}]),
            "has no step 1",
        ),
        (
            "evaluate without next",
            json!([{"phase":"plan","summary":"p"},{"phase":"act","summary":"a"},
                   {"phase":"observe","summary":"o"},{"phase":"evaluate","summary":"e","status":"partial"}]),
            "evaluate must say",
        ),
    ];
    for (what, steps, expect) in cases {
        let dir = tempfile::tempdir().unwrap();
        let ex = scratch_example(dir.path(), "trusted-local", &[], steps, &[]);
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(&home, &ex, &[]);
        assert_eq!(exit, 1, "{what}: {text}");
        let run = run_json(&home, &id);
        assert_eq!(run["status"], "failed", "{what}: {text}");
        assert!(
            run["stop_reason"].as_str().unwrap().contains(expect),
            "{what}: {}",
            run["stop_reason"]
        );
        let rs = receipts(&home, &id);
        // The closing receipt signs the ending; the violation's receipt precedes it.
        let closing = rs.last().unwrap();
        assert_eq!(closing["capability"], "run.closed", "{what}");
        assert_eq!(closing["result"]["metadata"]["status"], "failed", "{what}");
        let last = &rs[rs.len() - 2];
        assert_eq!(
            last["determining_policies"],
            json!(["kernel.runner-violation"])
        );
        assert_eq!(last["decision"], "deny");
        verify_run(&home, &id, false);
    }
}

#[test]
fn secrets_never_reach_disk_and_secret_payloads_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let token = "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    let steps = json!([
        {"phase":"plan","summary":format!("found {token} in the env"),
         "outputs":{"env":{"GITHUB_TOKEN":token,"note":format!("Bearer {token}")}},
         "diagnostics":[format!("curl -H 'Authorization: Bearer {token}'")]},
        {"phase":"act","summary":"write it down","proposed_actions":[
            {"id":"action_leak","capability":"repo.write.docs","operation":"write",
             "target":"docs/leak.md","content":format!("token: {token}\n")}]},
        {"phase":"observe","summary":"o"},
        {"phase":"evaluate","summary":"e","next":"stop"}
    ]);
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("repo.write.docs", &["docs/**"], &["write"])],
        steps,
        &[("docs/a.md", "a\n")],
    );
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &ex, &[]);
    assert_eq!(exit, 1, "{text}");
    let (status, reason) = stopped(&home, &id);
    assert_eq!(status, "blocked");
    assert!(
        reason.contains("never writes, runs or stores secrets"),
        "{reason}"
    );
    assert!(
        !home
            .join("runs")
            .join(&id)
            .join("workspace/docs/leak.md")
            .exists()
    );
    // Nothing under the home holds the token (the scenario is referenced, never copied).
    for entry in walk(&home) {
        let bytes = std::fs::read(&entry).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("AbCdEfGhIjKlMnOp"),
            "{} holds the token",
            entry.display()
        );
    }
    let outputs =
        std::fs::read_to_string(home.join("runs").join(&id).join("outputs.jsonl")).unwrap();
    assert!(outputs.contains("[REDACTED]"), "{outputs}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            if !p.ends_with("workspace") {
                out.extend(walk(&p));
            }
        } else {
            out.push(p);
        }
    }
    out
}

#[cfg(unix)]
#[test]
fn writes_never_follow_symlinks_out_of_or_within_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let steps = act(json!([
        {"id":"action_a","capability":"repo.write.docs","operation":"write","target":"docs/out/escape.md","content":"x\n"},
    ]));
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("repo.write.docs", &["docs/**"], &["write"])],
        steps,
        &[("docs/a.md", "a\n")],
    );
    std::os::unix::fs::symlink(&outside, ex.join("workspace/docs/out")).unwrap();
    let home = dir.path().join("home");
    let (_, id, text) = run_example(
        &home,
        &ex,
        &["--workspace", ex.join("workspace").to_str().unwrap()],
    );
    assert!(!outside.join("escape.md").exists(), "{text}");
    let rs = receipts(&home, &id);
    let outcome = rs
        .iter()
        .find(|r| r["decided_by"]["kind"] == "outcome")
        .expect("an outcome receipt");
    assert_eq!(outcome["result"]["status"], "failed");
    assert!(
        outcome["result"]["summary"]
            .as_str()
            .unwrap()
            .contains("symlink"),
        "{outcome}"
    );
    verify_run(&home, &id, false);
}

#[test]
fn a_hung_command_is_killed_at_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let steps = act(json!([
        {"id":"action_sleep","capability":"shell.test","operation":"execute","argv":["sleep","30"],"timeout_ms":300},
    ]));
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("shell.test", &["sleep"], &["execute"])],
        steps,
        &[],
    );
    let home = dir.path().join("home");
    let started = std::time::Instant::now();
    let (exit, id, text) = run_example(&home, &ex, &[]);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "{text}"
    );
    // Issue 11 item 10: a side effect that failed means the run did not complete.
    assert_eq!(exit, 1, "{text}");
    assert_eq!(run_json(&home, &id)["status"], "failed", "{text}");
    let rs = receipts(&home, &id);
    let outcome = rs
        .iter()
        .find(|r| r["decided_by"]["kind"] == "outcome")
        .unwrap();
    assert_eq!(outcome["result"]["status"], "failed");
    assert!(
        outcome["result"]["summary"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
}

#[test]
fn bad_run_input_is_one_line_naming_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(dir.path(), "strict", &[], act(json!([])), &[]);
    let scenario = ex.join("scenario.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&scenario).unwrap()).unwrap();
    v["steps"][1]["proposed_actions"] =
        json!([{"id":"action_x","capability":"repo.read","operation":"read","bogus":1}]);
    std::fs::write(&scenario, serde_json::to_string(&v).unwrap()).unwrap();
    let out = craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(dir.path().join("home"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", transcript(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("scenario.json"), "{err}");
    assert!(err.contains("bogus"), "{err}");
    assert!(
        !dir.path().join("home/runs").exists(),
        "a refused run leaves nothing behind"
    );
}

#[test]
fn a_task_file_with_flags_runs_under_a_custom_profile() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "custom",
        &[
            ("repo.read", &["**"], &["read"]),
            ("shell.test", &["true"], &["execute"]),
        ],
        act(json!([
            {"id":"action_read","capability":"repo.read","operation":"read","target":"README.md"},
            {"id":"action_test","capability":"shell.test","operation":"execute","argv":["true"]}
        ])),
        &[("README.md", "hello\n")],
    );
    let custom = dir.path().join("custom");
    std::fs::create_dir_all(&custom).unwrap();
    std::fs::write(
        custom.join("no-tests.cedar"),
        "@id(\"custom.no-tests\")\n@reason(\"this team runs tests in CI only\")\nforbid (principal, action == Craik::Action::\"shell.test\", resource);\n",
    )
    .unwrap();
    let home = dir.path().join("home");
    let out = craik()
        .arg("run")
        .arg(ex.join("task_request.json"))
        .arg("--runner")
        .arg(format!("fixture:{}", ex.join("scenario.json").display()))
        .args(["--profile", "custom", "--custom"])
        .arg(&custom)
        .arg("--grants")
        .arg(ex.join("grants/g0.json"))
        .arg("--grants")
        .arg(ex.join("grants/g1.json"))
        .arg("--workspace")
        .arg(ex.join("workspace"))
        .arg("--home")
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':');
    let run = run_json(&home, id);
    assert_eq!(run["status"], "blocked");
    assert!(
        run["stop_reason"]
            .as_str()
            .unwrap()
            .contains("custom.no-tests"),
        "{}",
        run["stop_reason"]
    );
    let rs = receipts(&home, id);
    assert_eq!(rs[0]["decision"], "allow");
    assert_eq!(rs[0]["policy_profile"], "custom");
    verify_run(&home, id, false);
    // custom without --custom is a usage error; so is a runner that is not a fixture.
    for args in [
        vec!["--profile", "custom"],
        vec!["--runner", "codex:whatever"],
    ] {
        let out = craik()
            .arg("run")
            .arg(&ex)
            .args(&args)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", transcript(&out));
    }
}

#[test]
fn runs_list_show_handoff_and_cancel() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (_, done, _) = run_example(h, &example("adr-denied"), &[]);
    let (_, parked, _) = run_example(h, &example("approval"), &[]);
    let rows: Value = json_out(h, &["runs", "list"]);
    assert_eq!(rows.as_array().unwrap().len(), 2);
    let show = craik()
        .args(["runs", "show", &done, "--home"])
        .arg(h)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&show.stdout).contains("blocked"));
    let handoff = craik()
        .args(["handoff", "show", &done, "--home"])
        .arg(h)
        .output()
        .unwrap();
    assert_eq!(handoff.status.code(), Some(0), "{}", transcript(&handoff));
    assert!(String::from_utf8_lossy(&handoff.stdout).contains("(blocked)"));
    // A parked run has no handoff until it ends; cancelling ends it interrupted, with one.
    let none = craik()
        .args(["handoff", "show", &parked, "--home"])
        .arg(h)
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(1));
    let cancel = craik()
        .args(["runs", "cancel", &parked, "--by", "user:op", "--home"])
        .arg(h)
        .output()
        .unwrap();
    assert_eq!(cancel.status.code(), Some(0), "{}", transcript(&cancel));
    assert_eq!(run_json(h, &parked)["status"], "interrupted");
    verify_run(h, &parked, false);
    let handoff: Value = json_out(h, &["handoff", "show", &parked]);
    assert_eq!(handoff["status"], "incomplete");
    assert!(handoff["completed_actions"].as_array().unwrap().is_empty());
    assert!(
        !handoff["context_debt"].as_array().unwrap().is_empty(),
        "{handoff}"
    );
    // Unknown and malformed run ids are usage errors.
    for bad in ["run_nope", "../../etc", "task_x"] {
        let out = craik()
            .args(["runs", "show", bad, "--home"])
            .arg(h)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
}

#[test]
fn memory_review_needs_a_human_and_is_receipted() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    run_example(h, &example("docs-review"), &[]);
    let list: Value = json_out(h, &["memory", "list"]);
    let id = list[0]["id"].as_str().unwrap().to_owned();
    let decide = |verb: &str, by: &str| {
        craik()
            .args([
                "memory",
                verb,
                &id,
                "--by",
                by,
                "--reason",
                "matches src/lib.rs",
                "--home",
            ])
            .arg(h)
            .output()
            .unwrap()
    };
    assert_eq!(
        decide("approve", "user:runner_fixture").status.code(),
        Some(2)
    );
    assert_eq!(decide("approve", "runner_fixture").status.code(), Some(2));
    // Its run's state unreadable: which runner proposed it cannot be told, so no review is
    // taken (it used to be checked against `runner_unknown`, letting the runner through).
    let state = h
        .join("runs")
        .join(list[0]["run_id"].as_str().unwrap())
        .join("run.json");
    let kept = std::fs::read(&state).unwrap();
    std::fs::remove_file(&state).unwrap();
    let blind = decide("approve", "user:runner_fixture");
    assert_eq!(blind.status.code(), Some(3), "{}", transcript(&blind));
    assert!(
        String::from_utf8_lossy(&blind.stderr).contains("run.json"),
        "{}",
        transcript(&blind)
    );
    assert!(!h.join("reviews").exists(), "nothing signed");
    std::fs::write(&state, kept).unwrap();
    let ok = decide("approve", "user:alice");
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    assert_eq!(
        decide("reject", "user:bob").status.code(),
        Some(1),
        "decided once"
    );
    let shown = craik()
        .args(["memory", "show", &id, "--home"])
        .arg(h)
        .output()
        .unwrap();
    let m: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(m["status"], "approved");
    assert_eq!(m["decided_by"], "user:alice");
    verify_journals(h, &h.join("reviews"), false);
    // A proposal without evidence cannot be approved.
    let path = h.join("memory").join(format!("{id}.json"));
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["id"] = json!("memprop_bare");
    doc["evidence"] = json!([]);
    doc["status"] = json!("pending");
    for k in ["decided_by", "decided_at", "decision_reason"] {
        doc[k] = Value::Null;
    }
    std::fs::write(h.join("memory/memprop_bare.json"), doc.to_string()).unwrap();
    let bare = craik()
        .args([
            "memory",
            "approve",
            "memprop_bare",
            "--by",
            "user:alice",
            "--reason",
            "x",
            "--home",
        ])
        .arg(h)
        .output()
        .unwrap();
    assert_eq!(bare.status.code(), Some(1), "{}", transcript(&bare));
    assert!(String::from_utf8_lossy(&bare.stderr).contains("no evidence"));
}

#[test]
fn an_expired_approval_is_not_honoured() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (_, id, _) = run_example(h, &example("approval"), &[]);
    let approval = pending_approval(h);
    let out = review(
        h,
        "approve",
        &approval,
        "user:alice",
        &["--expires-in", "0"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let resumed = resume(h, &id);
    assert_eq!(resumed.status.code(), Some(6), "{}", transcript(&resumed));
    let (status, reason) = stopped(h, &id);
    assert_eq!(status, "blocked");
    assert!(
        reason.contains("awaiting approval") && !reason.contains(&approval),
        "{reason}"
    );
    assert!(workspace_text(h, &id, "docs/status.md").contains("Status: stale"));
    verify_run(h, &id, true);
}

#[test]
fn bench_run_smoke() {
    let out = craik()
        .args(["bench", "run", "--steps", "8", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["steps"], 8);
    assert_eq!(v["decisions"], 8);
    assert_eq!(v["journal_valid"], true);
    let bad = craik()
        .args(["bench", "run", "--steps", "6"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// Outside testing round 10: a proposal holding a number that cannot be signed (beyond
/// ±(2^53−1)) left the run half-finished; it is the runner's violation, receipted, and the
/// run closes with a signed reason.
#[test]
fn issue_21_an_unsignable_number_in_a_proposal_is_a_runner_violation() {
    let dir = tempfile::tempdir().unwrap();
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("shell.test", &["true"], &["execute"])],
        act(json!([
            {"id":"action_t","capability":"shell.test","operation":"execute","argv":["true"],"timeout_ms":9_007_199_254_740_992_u64}
        ])),
        &[],
    );
    let home = dir.path().join("home");
    for runner in [&[][..], &["--runner", "fixture-adapter"][..]] {
        let (exit, id, text) = run_example(&home, &ex, runner);
        assert_eq!(exit, 1, "{text}");
        let run = run_json(&home, &id);
        assert_eq!(run["status"], "failed", "{text}");
        assert!(
            run["stop_reason"]
                .as_str()
                .unwrap()
                .contains("proposed action 0 cannot be signed"),
            "{run}"
        );
        let all = receipts(&home, &id);
        assert!(
            all.iter()
                .any(|r| r["determining_policies"] == json!(["kernel.runner-violation"])),
            "{all:?}"
        );
        verify_run(&home, &id, false);
    }
    // An operator's step timeout is bounded too (it was an overflow panic after signing).
    let out = craik()
        .arg("run")
        .arg(&ex)
        .arg("--home")
        .arg(&home)
        .args(["--step-timeout-secs", "18446744073709551615"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
}

/// Issue 30 item 8: a `--format json` error names the file, the field, the line and the
/// column as fields, not only inside the message.
#[test]
fn issue_30_json_errors_carry_file_field_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let ex = dir.path().join("ex");
    crate::policy::copy_dir(&crate::repo_root().join("examples/docs-review"), &ex);
    std::fs::write(
        ex.join("task_request.json"),
        "{\"schema\": \"craik.task_request\",\n \"id\": 5}",
    )
    .unwrap();
    let out = craik()
        .args(["--format", "json", "run"])
        .arg(&ex)
        .arg("--home")
        .arg(dir.path().join("home"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let e: Value = serde_json::from_slice(&out.stderr).unwrap();
    let e = &e["error"];
    assert_eq!(e["kind"], "invalid_input");
    assert!(
        e["file"].as_str().unwrap().ends_with("task_request.json"),
        "{e}"
    );
    assert_eq!(e["field"], "$.id", "{e}");
    assert_eq!(
        (e["line"].as_u64(), e["column"].as_u64()),
        (Some(2), Some(8)),
        "{e}"
    );
}

/// The peak resident memory (KiB) of `craik ARGS` while it runs, polled from
/// `/proc/PID/status` (`VmHWM`, the kernel's own high-water mark), with its output.
fn peak_kib(args: &[&std::ffi::OsStr]) -> (u64, std::process::Output) {
    use std::process::Stdio;
    let state = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"))
        .args(args)
        .env("CRAIK_CONFIG", "none")
        .env("XDG_STATE_HOME", state.path().join("none"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let readers = (
        std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut out, &mut v).unwrap();
            v
        }),
        std::thread::spawn(move || {
            let mut v = Vec::new();
            std::io::Read::read_to_end(&mut err, &mut v).unwrap();
            v
        }),
    );
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        let hwm = std::fs::read_to_string(&status).ok().and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        });
        peak = peak.max(hwm.unwrap_or(0));
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let status = child.wait().unwrap();
    let output = std::process::Output {
        status,
        stdout: readers.0.join().unwrap(),
        stderr: readers.1.join().unwrap(),
    };
    (peak, output)
}

/// Issue 31 item 6: a run whose runner sends as much as the limits let it (15 iterations of
/// ~800 KB of summaries and outputs each) costs the host memory bounded by a step, not by the
/// run: outputs and events are streamed, never read whole (outside testing: 304 MB for the
/// run, 412 MB to recover it). Reading it back (`runs show`, `audit`, `receipts verify`) too.
#[test]
fn issue_31_a_run_at_the_limits_costs_memory_of_a_step_not_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let big =
        |tag: &str, n: usize| format!("{tag} {}", "lorem ipsum dolor sit amet ".repeat(n / 27));
    let mut steps = Vec::new();
    for i in 0..15 {
        steps.push(json!({"phase":"plan","summary":big(&format!("plan {i}"), 250_000)}));
        steps.push(json!({"phase":"act","summary":"read","proposed_actions":[
            {"id":format!("action_{i}"),"capability":"repo.read","operation":"read","target":"a.md"}]}));
        steps.push(json!({"phase":"observe","summary":big("observe", 250_000),
            "outputs":{"findings":[big("finding", 300_000)]}}));
        let next = if i == 14 { "stop" } else { "continue" };
        steps.push(json!({"phase":"evaluate","summary":"next","next":next}));
    }
    let ex = scratch_example(
        dir.path(),
        "trusted-local",
        &[("repo.read", &["**"], &["read"])],
        json!(steps),
        &[("a.md", "a\n")],
    );
    fn os(s: &str) -> &std::ffi::OsStr {
        std::ffi::OsStr::new(s)
    }
    let (ran, out) = peak_kib(&[
        os("run"),
        ex.as_os_str(),
        os("--home"),
        home.as_os_str(),
        os("--max-iterations"),
        os("25"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let id = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':')
        .to_owned();
    let outputs = std::fs::metadata(home.join("runs").join(&id).join("outputs.jsonl"))
        .map(|m| m.len())
        .unwrap_or(0)
        + std::fs::metadata(home.join("runs").join(&id).join("events.jsonl"))
            .map(|m| m.len())
            .unwrap_or(0);
    assert!(
        outputs > 10_000_000,
        "the run wrote {outputs} bytes of outputs and events: {}",
        transcript(&out)
    );
    let mut peaks = vec![("run", ran)];
    for args in [
        vec!["runs", "show", id.as_str()],
        vec!["audit", id.as_str()],
        vec!["receipts", "verify", "HOME"],
    ] {
        let mut argv: Vec<&std::ffi::OsStr> = args
            .iter()
            .map(|a| {
                if *a == "HOME" {
                    home.as_os_str()
                } else {
                    os(a)
                }
            })
            .collect();
        argv.extend([os("--home"), home.as_os_str()]);
        let (peak, out) = peak_kib(&argv);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", transcript(&out));
        peaks.push((args[0], peak));
    }
    // Debug build, measured: the run ~100 MiB (it holds its 12 MB scenario, parsed), the
    // readers ~45 MiB. Reading the >10 MB of outputs and events whole, as JSON values, adds
    // several times their size (outside testing: 304 MB, 412 MB to recover).
    for (what, peak) in &peaks {
        let ceiling = if *what == "run" { 150 } else { 80 };
        assert!(*peak > 0, "{what}: no reading of its memory");
        assert!(
            *peak < ceiling * 1024,
            "{what}: peak {peak} KiB over {ceiling} MiB: {peaks:?}"
        );
    }
}
