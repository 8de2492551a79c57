//! Issue 20 items 4 and 5: every human decision is a signed receipt in the run's own journal
//! (a denied approval, a cancellation, a resume), memory reviews are bound to their proposal,
//! run and content, and `receipts verify`/`audit` check what the receipts bind (`inputs.json`,
//! reviews, memory files), reporting a failure at the line of the receipt concerned.

use std::path::Path;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::runs::{example, json_out, pending_approval, receipts, run_example, run_json};
use crate::{craik, repo_root, transcript};

/// An edit of a JSON file, named by what the failure must say.
type Edit = Box<dyn Fn(&mut Value)>;

/// `craik receipts verify HOME` with the home's key (and extra arguments).
fn verify_home(home: &Path, extra: &[&str]) -> std::process::Output {
    craik()
        .args(["receipts", "verify"])
        .arg(home)
        .arg("--key")
        .arg(home.join("keys/signing.pub.pem"))
        .args(extra)
        .output()
        .unwrap()
}

/// `craik audit HOME` (human), with the home's key.
fn audit_home(home: &Path) -> std::process::Output {
    craik()
        .args(["audit"])
        .arg(home)
        .arg("--key")
        .arg(home.join("keys/signing.pub.pem"))
        .output()
        .unwrap()
}

fn text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The 1-based journal line of the receipt with capability `capability` in run `id`.
fn line_of(home: &Path, id: &str, capability: &str) -> usize {
    let journal =
        std::fs::read_to_string(home.join("runs").join(id).join("receipts.jsonl")).unwrap();
    for (k, line) in journal.lines().enumerate() {
        let envelope: Value = serde_json::from_str(line).unwrap();
        let payload = base64::engine::general_purpose::STANDARD
            .decode(envelope["payload"].as_str().unwrap())
            .unwrap();
        let body: Value = serde_json::from_slice(&payload).unwrap();
        if body["capability"] == capability {
            return k + 1;
        }
    }
    panic!("no {capability} receipt in {id}");
}

#[test]
fn issue_20_a_denial_a_resume_and_a_cancellation_are_signed_receipts_of_the_run() {
    // A denied approval, then a resume: both signed into the run's own journal.
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (exit, id, _) = run_example(h, &example("approval"), &[]);
    assert_eq!(exit, 6);
    let approval = pending_approval(h);
    let denied = crate::runs::review(h, "deny", &approval, "user:alice", &[]);
    assert_eq!(denied.status.code(), Some(0), "{}", transcript(&denied));
    // Resuming needs someone to name: no --by and no craik.toml operator is a usage error.
    let nameless = craik()
        .args(["runs", "resume", &id, "--home"])
        .arg(h)
        .current_dir(h)
        .output()
        .unwrap();
    assert_eq!(nameless.status.code(), Some(2), "{}", transcript(&nameless));
    // ... and never the runner.
    let runner = craik()
        .args([
            "runs",
            "resume",
            &id,
            "--by",
            "user:runner_fixture",
            "--home",
        ])
        .arg(h)
        .output()
        .unwrap();
    assert_eq!(runner.status.code(), Some(2), "{}", transcript(&runner));
    assert_eq!(run_json(h, &id)["status"], "blocked");
    assert!(
        receipts(h, &id)
            .iter()
            .all(|r| r["capability"] != "run.resume")
    );
    let resumed = craik()
        .args(["runs", "resume", &id, "--by", "user:bob", "--home"])
        .arg(h)
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(1), "{}", transcript(&resumed));
    assert_eq!(run_json(h, &id)["status"], "blocked");
    let all = receipts(h, &id);
    let resume = all
        .iter()
        .find(|r| r["capability"] == "run.resume")
        .expect("a run.resume receipt");
    assert_eq!(
        resume["decided_by"],
        json!({"kind": "operator", "by": "user:bob"})
    );
    assert_eq!(resume["actor"], "user:bob");
    assert_eq!(resume["result"]["metadata"]["status_before"], "blocked");
    let review = all
        .iter()
        .find(|r| r["capability"] == "approval.review")
        .expect("an approval.review receipt");
    assert_eq!(review["decision"], "deny");
    assert_eq!(
        review["decided_by"],
        json!({"kind": "approval", "by": "user:alice"})
    );
    assert_eq!(review["action"], approval.as_str());
    assert_eq!(review["result"]["metadata"]["decision"], "denied");
    assert!(
        review["result"]["metadata"]["review_sha256"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    // The same policy set as the run's other receipts: --policies passes.
    let ok = verify_home(
        h,
        &["--policies", repo_root().join("policies").to_str().unwrap()],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    let audit = audit_home(h);
    assert_eq!(audit.status.code(), Some(0), "{}", transcript(&audit));
    let report = text(&audit);
    assert!(report.contains("run.resume"), "{report}");
    assert!(report.contains("(by operator user:bob)"), "{report}");
    assert!(
        report.contains(&format!("denied by user:alice via {approval}")),
        "{report}"
    );
    // The review the run signed must stay: without its journal the receipt is unbacked, and
    // the failure names the receipt's own line.
    let line = line_of(h, &id, "approval.review");
    std::fs::remove_dir_all(h.join("reviews").join(&approval)).unwrap();
    let bad = verify_home(h, &[]);
    assert_eq!(bad.status.code(), Some(1), "{}", transcript(&bad));
    assert!(
        text(&bad).contains(&format!("receipts.jsonl:{line}: INVALID")),
        "{}",
        transcript(&bad)
    );
    assert!(
        text(&bad).contains("no verified review journal"),
        "{}",
        transcript(&bad)
    );

    // A cancellation: who and why, signed.
    let other = tempfile::tempdir().unwrap();
    let o = other.path();
    let (_, parked, _) = run_example(o, &example("approval"), &[]);
    let nameless = craik()
        .args(["runs", "cancel", &parked, "--home"])
        .arg(o)
        .current_dir(o)
        .output()
        .unwrap();
    assert_eq!(nameless.status.code(), Some(2), "{}", transcript(&nameless));
    assert!(String::from_utf8_lossy(&nameless.stderr).contains("--by"));
    assert_eq!(
        run_json(o, &parked)["status"],
        "blocked",
        "nothing cancelled"
    );
    let cancel = craik()
        .args([
            "runs",
            "cancel",
            &parked,
            "--by",
            "user:carol",
            "--reason",
            "wrong branch",
            "--home",
        ])
        .arg(o)
        .output()
        .unwrap();
    assert_eq!(cancel.status.code(), Some(0), "{}", transcript(&cancel));
    let run = run_json(o, &parked);
    assert_eq!(run["status"], "interrupted");
    assert_eq!(run["stop_reason"], "cancelled by user:carol: wrong branch");
    let signed = receipts(o, &parked);
    let cancelled = signed
        .iter()
        .find(|r| r["capability"] == "run.cancel")
        .expect("a run.cancel receipt");
    assert_eq!(
        cancelled["decided_by"],
        json!({"kind": "operator", "by": "user:carol"})
    );
    assert_eq!(cancelled["reason"], "wrong branch");
    assert_eq!(cancelled["decision"], "deny");
    assert_eq!(cancelled["target"], parked.as_str());
    let ok = verify_home(o, &[]);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    let report = text(&audit_home(o));
    assert!(report.contains("run.cancel"), "{report}");
    assert!(
        report.contains("deny — wrong branch (by operator user:carol)"),
        "{report}"
    );
}

#[test]
fn issue_20_memory_reviews_bind_proposal_run_and_content() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (exit, id, _) = run_example(h, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let list: Value = json_out(h, &["memory", "list"]);
    let memprop = list[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(list[0]["tampered"], false);
    // The run signed the proposal's content when it proposed it: an edit before any review
    // is TAMPERED, and no reviewer can sign it.
    let path = h.join("memory").join(format!("{memprop}.json"));
    let proposed = std::fs::read_to_string(&path).unwrap();
    let mut forged: Value = serde_json::from_str(&proposed).unwrap();
    forged["fact"]["value"] = json!("forged before review");
    std::fs::write(&path, serde_json::to_string_pretty(&forged).unwrap()).unwrap();
    let shown: Value = json_out(h, &["memory", "show", &memprop]);
    assert_eq!(shown["tampered"], true);
    assert!(
        shown["tampered_because"]
            .as_str()
            .unwrap()
            .contains("not what the run signed when it proposed it"),
        "{shown}"
    );
    let refused = craik()
        .args([
            "memory",
            "approve",
            &memprop,
            "--by",
            "user:alice",
            "--reason",
            "looks right",
            "--home",
        ])
        .arg(h)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(3), "{}", transcript(&refused));
    assert!(!h.join("reviews").exists(), "nothing signed");
    let bad = verify_home(h, &[]);
    assert_eq!(bad.status.code(), Some(1), "{}", transcript(&bad));
    assert!(text(&bad).contains(&format!("memory/{memprop}.json: its content")));
    std::fs::write(&path, &proposed).unwrap();
    let rejected = craik()
        .args([
            "memory",
            "reject",
            &memprop,
            "--by",
            "user:alice",
            "--reason",
            "not a fact",
            "--home",
        ])
        .arg(h)
        .output()
        .unwrap();
    assert_eq!(rejected.status.code(), Some(0), "{}", transcript(&rejected));
    // The review names the proposal, its run and content, under the run's policy set.
    let review_dir = h
        .join("reviews")
        .join(format!("review_{}", memprop.trim_start_matches("memprop_")));
    let review = craik()
        .args(["receipts", "list", "--format", "json"])
        .arg(&review_dir)
        .output()
        .unwrap();
    let review: Value = serde_json::from_slice(&review.stdout).unwrap();
    let review = &review[0];
    let run_receipts = receipts(h, &id);
    assert_eq!(review["policy_set"], run_receipts[0]["policy_set"]);
    assert_eq!(review["action"], memprop.as_str());
    let meta = &review["result"]["metadata"];
    assert_eq!(meta["proposal"], memprop.as_str());
    assert_eq!(meta["run_id"], id.as_str());
    let content = meta["content_sha256"].as_str().unwrap();
    // The recipe of docs/receipts.md: sha256 of the canonical {content_sha256, proposal, run_id}.
    let canonical =
        format!(r#"{{"content_sha256":"{content}","proposal":"{memprop}","run_id":"{id}"}}"#);
    assert_eq!(
        review["request_hash"],
        craik_host::run::exec::digest(canonical.as_bytes())
    );
    let ok = verify_home(
        h,
        &["--policies", repo_root().join("policies").to_str().unwrap()],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));

    // Rejected → approved by editing the file: TAMPERED in list and show, verify and audit fail
    // at the line of the run's memory.propose receipt, naming the file and the field.
    let original = std::fs::read_to_string(&path).unwrap();
    let line = line_of(h, &id, "memory.propose");
    let mut edits: Vec<(&str, Edit)> = vec![
        (
            "status `approved`",
            Box::new(|v| v["status"] = json!("approved")),
        ),
        (
            "decided_by `user:mallory`",
            Box::new(|v| v["decided_by"] = json!("user:mallory")),
        ),
        (
            "its content",
            Box::new(|v| v["fact"]["value"] = json!("forged")),
        ),
    ];
    for (what, edit) in edits.drain(..) {
        let mut doc: Value = serde_json::from_str(&original).unwrap();
        edit(&mut doc);
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        let listed = craik()
            .args(["memory", "list", "--home"])
            .arg(h)
            .output()
            .unwrap();
        assert!(
            text(&listed).contains("TAMPERED"),
            "{what}: {}",
            transcript(&listed)
        );
        let shown: Value = json_out(h, &["memory", "show", &memprop]);
        assert_eq!(shown["tampered"], true, "{what}");
        assert!(
            shown["tampered_because"].as_str().unwrap().contains(what),
            "{what}: {shown}"
        );
        let bad = verify_home(h, &[]);
        assert_eq!(bad.status.code(), Some(1), "{what}: {}", transcript(&bad));
        let out = text(&bad);
        assert!(out.contains(&format!(":{line}: INVALID")), "{what}: {out}");
        assert!(
            out.contains(&format!("memory/{memprop}.json")),
            "{what}: {out}"
        );
        assert!(out.contains(what), "{what}: {out}");
        assert_eq!(audit_home(h).status.code(), Some(1), "{what}");
    }
    std::fs::write(&path, &original).unwrap();
    assert_eq!(verify_home(h, &[]).status.code(), Some(0));
    // A deleted review journal: the decided file has nothing signed behind it.
    std::fs::remove_dir_all(&review_dir).unwrap();
    let bad = verify_home(h, &[]);
    assert_eq!(bad.status.code(), Some(1), "{}", transcript(&bad));
    assert!(
        text(&bad).contains("no signed review"),
        "{}",
        transcript(&bad)
    );
}

#[test]
fn issue_20_verify_and_audit_catch_an_edited_inputs_json_naming_the_field() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (_, id, _) = run_example(h, &example("docs-review"), &[]);
    let path = h.join("runs").join(&id).join("inputs.json");
    let original = std::fs::read_to_string(&path).unwrap();
    let cases: Vec<(&str, Edit)> = vec![
        ("field `grants`", Box::new(|v| v["grants"] = json!([]))),
        ("field `runner`", Box::new(|v| v["runner"] = json!("codex"))),
        (
            "field `profile`",
            Box::new(|v| v["profile"] = json!("custom")),
        ),
        (
            "changed since the run signed it",
            Box::new(|v| v["max_iterations"] = json!(99)),
        ),
    ];
    for (what, edit) in cases {
        let mut doc: Value = serde_json::from_str(&original).unwrap();
        edit(&mut doc);
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        let bad = verify_home(h, &[]);
        assert_eq!(bad.status.code(), Some(1), "{what}: {}", transcript(&bad));
        let out = text(&bad);
        assert!(out.contains(":1: INVALID"), "{what}: {out}");
        assert!(out.contains("inputs.json"), "{what}: {out}");
        assert!(out.contains(what), "{what}: {out}");
        let audit = audit_home(h);
        assert_eq!(audit.status.code(), Some(1), "{what}");
        assert!(text(&audit).contains(what), "{what}: {}", text(&audit));
    }
    std::fs::write(&path, &original).unwrap();
    assert_eq!(verify_home(h, &[]).status.code(), Some(0));
    std::fs::remove_file(&path).unwrap();
    let bad = verify_home(h, &[]);
    assert_eq!(bad.status.code(), Some(1), "{}", transcript(&bad));
    assert!(text(&bad).contains("inputs.json"));
}

#[test]
fn issue_20_a_granted_then_expired_approval_is_signed_as_both() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    // Who started it is signed with its inputs (asserted by --by, not authenticated).
    let (_, id, _) = run_example(h, &example("approval"), &["--by", "user:dana"]);
    let first = &receipts(h, &id)[0];
    assert_eq!(first["capability"], "run.inputs");
    assert_eq!(first["result"]["metadata"]["started_by"], "user:dana");
    let approval = pending_approval(h);
    let granted = crate::runs::review(
        h,
        "approve",
        &approval,
        "user:alice",
        &["--expires-in", "0"],
    );
    assert_eq!(granted.status.code(), Some(0), "{}", transcript(&granted));
    let resumed = crate::runs::resume(h, &id);
    assert_eq!(resumed.status.code(), Some(6), "{}", transcript(&resumed));
    let all = receipts(h, &id);
    let caps: Vec<&str> = all
        .iter()
        .map(|r| r["capability"].as_str().unwrap())
        .collect();
    let at = |cap: &str| caps.iter().position(|c| *c == cap).unwrap_or(usize::MAX);
    assert!(at("run.resume") < at("approval.review"), "{caps:?}");
    assert!(at("approval.review") < at("approval.expired"), "{caps:?}");
    let review = &all[at("approval.review")];
    assert_eq!(review["decision"], "allow");
    assert_eq!(review["result"]["metadata"]["decision"], "approved");
    let expired = &all[at("approval.expired")];
    assert_eq!(expired["decided_by"], json!({"kind": "kernel", "by": ""}));
    assert_eq!(
        expired["determining_policies"],
        json!(["kernel.approval-expired"])
    );
    assert_eq!(expired["action"], approval.as_str());
    // The action parked again for a new approval; nothing used the expired one.
    assert!(
        all.iter()
            .all(|r| !r["decided_by"]["by"].as_str().unwrap().contains(" via ")),
        "{all:?}"
    );
    let ok = verify_home(h, &["--allow-open"]);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
}

/// A live run is cancelled through `runs/<id>/cancel` (what `craik runs cancel` writes while
/// another process drives the run): the driver signs who asked and why before it stops.
#[test]
fn issue_20_the_driver_signs_a_requested_cancellation() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (_, id, _) = run_example(h, &example("approval"), &[]);
    let approval = pending_approval(h);
    let granted = crate::runs::approve(h, &approval, "user:alice");
    assert_eq!(granted.status.code(), Some(0), "{}", transcript(&granted));
    std::fs::write(
        h.join("runs").join(&id).join("cancel"),
        "{\"by\":\"user:erin\",\"reason\":\"stop before the write\"}\n",
    )
    .unwrap();
    let resumed = crate::runs::resume(h, &id);
    assert_eq!(resumed.status.code(), Some(1), "{}", transcript(&resumed));
    let run = run_json(h, &id);
    assert_eq!(run["status"], "interrupted");
    assert_eq!(
        run["stop_reason"],
        "cancelled by user:erin: stop before the write"
    );
    let all = receipts(h, &id);
    let cancel = all
        .iter()
        .find(|r| r["capability"] == "run.cancel")
        .expect("a run.cancel receipt");
    assert_eq!(
        cancel["decided_by"],
        json!({"kind": "operator", "by": "user:erin"})
    );
    // Nothing was written: the cancellation came before the next decision.
    assert!(
        all.iter()
            .all(|r| r["capability"] != "repo.write.docs" || r["decision"] != "allow"),
        "{all:?}"
    );
    let ok = verify_home(h, &[]);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
}
