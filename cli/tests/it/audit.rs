//! `craik audit`: the timeline an auditor reads, from verified journals only (issue 13 item 1),
//! and its HTML report checked in a real headless Chromium.

use std::path::Path;

use serde_json::Value;

use crate::craik;
use crate::runs::{json_out, pending_approval, resume, run_example, run_json};

/// A reason a hostile or careless reviewer might type: markup, a newline, a terminal escape
/// and a bidi override must all arrive as text.
const REASON: &str = "diff <b>checked</b> <script>alert(1)</script>\n\u{1b}[2J \u{202e}ok";

/// docs-review under `strict`: every write and the test park; `user:alice` approves each with
/// [`REASON`] until the run completes. Returns (home, run id).
pub(crate) fn approved_docs_review(dir: &Path) -> (std::path::PathBuf, String) {
    let home = dir.join("home");
    let example = crate::repo_root().join("examples/docs-review");
    let (_, id, _) = run_example(&home, &example, &["--profile", "strict"]);
    for _ in 0..5 {
        if run_json(&home, &id)["status"] == "completed" {
            break;
        }
        let approval = pending_approval(&home);
        let out = craik()
            .args(["approvals", "approve", &approval, "--by", "user:alice"])
            .args(["--reason", REASON, "--home"])
            .arg(&home)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", crate::transcript(&out));
        resume(&home, &id);
    }
    assert_eq!(run_json(&home, &id)["status"], "completed");
    (home, id)
}

fn audit(home: &Path, args: &[&str]) -> std::process::Output {
    craik()
        .arg("audit")
        .args(args)
        .arg("--home")
        .arg(home)
        .output()
        .unwrap()
}

/// The JSON timeline names every receipt, the approver and the signed reason of each approval,
/// the grant and the policy set; the run's status is marked unsigned.
#[test]
fn issue_13_audit_explains_a_run_from_its_verified_journal() {
    let dir = tempfile::tempdir().unwrap();
    let (home, id) = approved_docs_review(dir.path());
    let grants: Vec<String> = ["grants/docs_review_tests.json", "capability_grant.json"]
        .iter()
        .map(|f| {
            crate::repo_root()
                .join("examples/docs-review")
                .join(f)
                .display()
                .to_string()
        })
        .collect();
    let policies = crate::repo_root().join("policies").display().to_string();
    let mut args = vec![id.as_str(), "--policies", &policies, "--grants"];
    args.extend(grants.iter().map(String::as_str));
    let report = json_out(&home, &[&["audit"], &args[..]].concat());
    let run = &report["runs"][0];
    assert_eq!(run["valid"], true, "{report:#}");
    assert_eq!(run["run_id"], id.as_str());
    let timeline = run["timeline"].as_array().unwrap();
    let receipts = run["verification"]["receipts"].as_u64().unwrap();
    assert_eq!(timeline.len() as u64, receipts);
    for (k, entry) in timeline.iter().enumerate() {
        assert_eq!(entry["receipt"]["seq"], k as u64);
    }
    let approved: Vec<&Value> = timeline
        .iter()
        .filter(|e| {
            e["receipt"]["decided_by"]["kind"] == "approval"
                && e["receipt"]["capability"] != "approval.review"
        })
        .collect();
    assert_eq!(approved.len(), 3, "two writes and the test were approved");
    for e in &approved {
        assert_eq!(e["approval"]["verified"], true, "{e:#}");
        assert_eq!(e["approval"]["approver"], "user:alice");
        assert_eq!(e["approval"]["reason"], REASON);
        assert!(e["grant"].is_string(), "{e:#}");
    }
    let write = approved[0];
    assert_eq!(write["receipt"]["result"]["metadata"]["operation"], "patch");
    assert!(
        run["unsigned"]["note"]
            .as_str()
            .unwrap()
            .contains("not signed")
    );
    assert_eq!(run["policy_sets"].as_array().unwrap().len(), 1);
    assert_eq!(
        report["expected_grants"], run["inputs"]["grants_sha256"],
        "the grant files hash to what the run signed"
    );

    // Human: escaped, one line per fact; the approver and reason on the approval's line.
    let out = audit(&home, &[&id]);
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.chars().any(|c| c == '\u{1b}' || c == '\u{202e}'),
        "{text}"
    );
    assert!(
        text.contains("approved by user:alice via approval_"),
        "{text}"
    );
    // Issue 20: the status is the closing receipt's, signed.
    assert!(
        text.contains(
            "status      completed — runner evaluated the task as done (signed: receipt_"
        ),
        "{text}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("ok")),
        "the reason's newline stays escaped"
    );

    // Another grant set, another bundle: refused, naming what differs.
    let other = dir.path().join("broad.json");
    let mut grant: Value =
        serde_json::from_str(&std::fs::read_to_string(&grants[1]).unwrap()).unwrap();
    grant["target"]["paths"] = serde_json::json!(["**"]);
    std::fs::write(&other, grant.to_string()).unwrap();
    let out = audit(
        &home,
        &[&id, "--grants", &grants[0], other.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("grants"),
        "{}",
        crate::transcript(&out)
    );
}

/// A review journal removed after the fact: the approval is flagged unverified and the run
/// is invalid. A changed receipt: the audit lists only what precedes it.
#[test]
fn issue_13_audit_flags_what_no_signature_backs() {
    let dir = tempfile::tempdir().unwrap();
    let (home, id) = approved_docs_review(dir.path());
    let reviews: Vec<_> = std::fs::read_dir(home.join("reviews"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    std::fs::rename(&reviews[0], dir.path().join("moved")).unwrap();
    let out = audit(&home, &[&id, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &report["runs"][0];
    assert_eq!(run["valid"], false);
    assert_eq!(run["verification"]["failure"]["what"], "approval");
    // Every receipt still shows (their signatures verified); those resting on the moved
    // review (the run's approval.review receipt of it and the action it unlocked) are
    // unverified, and only those.
    let moved = reviews[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let timeline = run["timeline"].as_array().unwrap();
    assert_eq!(
        timeline.len() as u64,
        run["verification"]["receipts"].as_u64().unwrap()
    );
    let unverified: Vec<&Value> = timeline
        .iter()
        .filter(|e| e["approval"]["verified"] == false)
        .collect();
    assert!(!unverified.is_empty());
    assert!(
        unverified
            .iter()
            .all(|e| e["approval"]["id"] == moved.as_str()),
        "{unverified:#?}"
    );
    std::fs::rename(dir.path().join("moved"), &reviews[0]).unwrap();

    // Flip one receipt's payload: the timeline stops before it.
    let journal = home.join("runs").join(&id).join("receipts.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[5] = lines[5].replacen("\"payload\":\"ey", "\"payload\":\"EY", 1);
    std::fs::write(&journal, lines.join("\n") + "\n").unwrap();
    let out = audit(&home, &[&id, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = &report["runs"][0];
    assert_eq!(run["verification"]["failure"]["line"], 6);
    assert_eq!(run["timeline"].as_array().unwrap().len(), 5);
}

/// Chromium from the OS packages (`.ci/run` installs it); outside CI a machine without it
/// skips loudly.
fn chromium() -> Option<std::path::PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must have chromium (.ci/run installs it)"
        );
        #[allow(clippy::print_stderr, reason = "a skip must be seen")]
        {
            eprintln!(
                "\n!!!!! SKIPPED: no chromium on this machine (apt-get install chromium) !!!!!\n"
            );
        }
    }
    found
}

/// The HTML report of the docs-review example, opened in headless Chromium: its one script
/// ran (CSP admits it by hash), every receipt is a row, the approver is named, the reviewer's
/// markup is text, nothing was logged to the console and nothing external is referenced.
#[test]
fn issue_13_the_html_audit_report_renders_in_a_real_browser() {
    let dir = tempfile::tempdir().unwrap();
    let (home, id) = approved_docs_review(dir.path());
    let page = dir.path().join("audit.html");
    let out = audit(
        &home,
        &[home.to_str().unwrap(), "--html", page.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    for external in ["src=", "href=", "http:", "https:", "@import", "url("] {
        assert!(!html.contains(external), "self-contained: found {external}");
    }
    assert!(!html.contains("<b>checked") && !html.contains("<script>alert"));
    let Some(chromium) = chromium() else {
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let dom = String::from_utf8(out.stdout).unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    let receipts = crate::runs::receipts(&home, &id);
    let n = receipts.len();
    assert!(n > 10, "{n}");
    assert!(
        dom.contains(&format!("<html lang=\"en\" data-audit-ready=\"{n}\">")),
        "the script ran to its end and counted {n} rows:\n{}",
        &dom[..dom.len().min(400)]
    );
    assert!(dom.contains(&format!("{n} of {n} receipts shown")));
    assert!(!dom.contains("data-script-error=\""), "script error");
    for r in &receipts {
        let rid = r["id"].as_str().unwrap();
        assert!(dom.contains(&format!("id=\"{rid}\"")), "row for {rid}");
    }
    assert!(dom.contains("approved by user:alice"));
    assert!(
        dom.contains("&lt;b&gt;checked&lt;/b&gt;"),
        "markup shown as text"
    );
    assert!(!dom.contains("<b>checked"));
    assert!(!dom.contains('\u{1b}') && !dom.contains('\u{202e}'));
    assert!(dom.contains("not signed"));
    let console: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:#?}");
}

/// A shadow run's verdicts are marked as shadow in every view (the HTML once showed a shadow
/// `allow` like a real one).
#[test]
fn issue_13_audit_marks_shadow_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let example = crate::repo_root().join("examples/docs-review");
    let (_, id, _) = run_example(&home, &example, &["--shadow"]);
    let page = dir.path().join("shadow.html");
    let out = audit(&home, &[&id, "--html", page.to_str().unwrap()]);
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    for view in [&text, &html] {
        assert!(view.contains("allow [shadow]"), "{view}");
    }
}
