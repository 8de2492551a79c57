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

/// `craik audit ... --format jsonl` as parsed events.
fn events(home: &Path, args: &[&str]) -> Vec<Value> {
    let out = craik()
        .arg("audit")
        .args(args)
        .args(["--format", "jsonl", "--home"])
        .arg(home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            assert_eq!(v["schema"], "craik.audit_event", "{l}");
            assert_eq!(v["version"], "0.1.0", "{l}");
            v
        })
        .collect()
}

fn of_kind<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["event"] == kind).collect()
}

/// Issue 20 item 6: `--format jsonl` is one event per line (ledger, run, receipts, summary), and
/// every filter narrows what is explained and counted, never what is verified.
#[test]
fn issue_20_audit_streams_jsonl_events_and_filters_them() {
    let dir = tempfile::tempdir().unwrap();
    let (home, id) = approved_docs_review(dir.path());
    let h = home.to_str().unwrap();
    let all = events(&home, &[h]);
    let kinds: Vec<&str> = all.iter().map(|e| e["event"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"ledger"));
    assert_eq!(kinds.get(1), Some(&"run"));
    assert_eq!(kinds.last(), Some(&"summary"));
    let receipts = crate::runs::receipts(&home, &id);
    let explained = of_kind(&all, "receipt");
    assert_eq!(explained.len(), receipts.len());
    for (e, r) in explained.iter().zip(&receipts) {
        // The audit keeps a receipt's bytes unless a secret is found in them.
        assert_eq!(e["receipt"], *r, "each event carries the verified receipt");
        assert_eq!(e["run_id"], id.as_str());
    }
    let run = of_kind(&all, "run")[0];
    assert_eq!(run["valid"], true);
    assert_eq!(run["status"]["status"], "completed");
    let summary = &of_kind(&all, "summary")[0]["summary"];
    assert_eq!(summary["schema"], "craik.audit_summary");
    assert_eq!(summary["counts"]["receipts"], receipts.len() as u64);
    assert_eq!(summary["counts"]["runs_by_status"]["completed"], 1);

    // --approver: only what alice's approvals decided (and the reviews the run recorded).
    let approved = receipts
        .iter()
        .filter(|r| r["decided_by"]["kind"] == "approval")
        .count();
    assert!(approved >= 3, "{approved}");
    let by_alice = events(&home, &[h, "--approver", "user:alice"]);
    let got = of_kind(&by_alice, "receipt");
    assert_eq!(got.len(), approved);
    assert!(
        got.iter()
            .all(|e| e["approval"]["approver"] == "user:alice")
    );
    let summary = &of_kind(&by_alice, "summary")[0]["summary"];
    // Issue 30 item 8: each approval once, though its review and the decision it decided
    // are two receipts.
    let distinct: std::collections::BTreeSet<(String, String)> = got
        .iter()
        .map(|e| (e["journal"].to_string(), e["approval"]["id"].to_string()))
        .collect();
    assert!(distinct.len() < got.len(), "{got:?}");
    assert_eq!(
        summary["counts"]["by_approver"]["user:alice"],
        distinct.len() as u64
    );
    assert_eq!(summary["filters"]["approver"][0], "user:alice");
    assert!(
        of_kind(
            &events(&home, &[h, "--approver", "user:mallory"]),
            "receipt"
        )
        .is_empty()
    );

    // --capability with a prefix, --verdict, --actor.
    let repo = events(&home, &[h, "--capability", "repo.*"]);
    let repo = of_kind(&repo, "receipt");
    let want = receipts
        .iter()
        .filter(|r| r["capability"].as_str().unwrap().starts_with("repo."))
        .count();
    assert!(want > 0);
    assert_eq!(repo.len(), want);
    let held = events(&home, &[h, "--verdict", "requires_approval"]);
    let held = of_kind(&held, "receipt");
    assert!(!held.is_empty());
    assert!(
        held.iter()
            .all(|e| e["receipt"]["decision"] == "requires_approval"
                && e["receipt"]["decided_by"]["kind"] != "outcome")
    );
    let outcomes = events(&home, &[h, "--verdict", "outcome"]);
    assert!(
        of_kind(&outcomes, "receipt")
            .iter()
            .all(|e| e["receipt"]["decided_by"]["kind"] == "outcome")
    );
    let actor = receipts[0]["actor"].as_str().unwrap();
    let by_actor = events(&home, &[h, "--actor", actor]);
    assert_eq!(
        of_kind(&by_actor, "receipt").len(),
        receipts.iter().filter(|r| r["actor"] == actor).count()
    );

    // Time: nothing after the future, everything before it; a date means its midnight UTC.
    assert!(of_kind(&events(&home, &[h, "--since", "2999-01-01"]), "receipt").is_empty());
    assert_eq!(
        of_kind(
            &events(&home, &[h, "--until", "2999-01-01T00:00:00Z"]),
            "receipt"
        )
        .len(),
        receipts.len()
    );
    let middle = receipts[receipts.len() / 2]["created_at"].as_str().unwrap();
    let later = of_kind(&events(&home, &[h, "--since", middle]), "receipt").len();
    assert!(later > 0 && later < receipts.len(), "{later}");

    // Run-level: --status and --run select runs; the ledger is still checked.
    let blocked = events(&home, &[h, "--status", "blocked"]);
    assert!(of_kind(&blocked, "run").is_empty());
    assert_eq!(of_kind(&blocked, "ledger").len(), 1);
    assert_eq!(
        of_kind(&events(&home, &[h, "--status", "completed"]), "run").len(),
        1
    );
    assert!(of_kind(&events(&home, &[h, "--run", "run_other"]), "run").is_empty());
    assert_eq!(of_kind(&events(&home, &[h, "--run", &id]), "run").len(), 1);

    // A bad time is a usage error naming the flag and value.
    let bad = audit(&home, &[h, "--since", "last tuesday"]);
    assert_eq!(bad.status.code(), Some(2), "{}", crate::transcript(&bad));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--since `last tuesday`"));

    // An invalid journal is reported whatever the filters.
    let journal = home.join("runs").join(&id).join("receipts.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[3] = lines[3].replacen("\"payload\":\"ey", "\"payload\":\"EY", 1);
    std::fs::write(&journal, lines.join("\n") + "\n").unwrap();
    let out = craik()
        .args([
            "audit", h, "--status", "blocked", "--format", "jsonl", "--home", h,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let run: Value = serde_json::from_str(
        text.lines()
            .find(|l| l.contains("\"event\":\"run\""))
            .expect("the invalid run is reported"),
    )
    .unwrap();
    assert_eq!(run["valid"], false);
    assert_eq!(run["verification"]["failure"]["line"], 4);
}

/// Issue 20 item 6: `--summary` signs the counts with the home's key as a one-receipt
/// `craik.audit_summary` journal; `receipts verify` checks it (alone and with the home), and
/// catches an edit and a ledger rewritten under the head it covered.
#[test]
fn issue_20_signed_audit_summary_verifies_and_binds_the_ledger_head() {
    let dir = tempfile::tempdir().unwrap();
    let (home, _id) = approved_docs_review(dir.path());
    let h = home.to_str().unwrap();
    let out = craik()
        .args(["audit", h, "--summary", "--format", "json", "--home", h])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["schema"], "craik.audit_summary");
    assert!(shown.get("runs").is_none(), "counts only");
    assert_eq!(shown["counts"]["runs_by_status"]["completed"], 1);
    assert!(
        shown["counts"]["by_approver"]["user:alice"]
            .as_u64()
            .unwrap()
            >= 3
    );
    assert!(shown["counts"]["files_changed"].as_u64().unwrap() >= 1);
    assert!(
        shown["ledger"]["last_hash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let file = std::path::PathBuf::from(shown["signed"].as_str().unwrap());
    assert!(file.starts_with(home.join("audits")), "{}", file.display());

    // The signed receipt carries exactly what was shown.
    let line = std::fs::read_to_string(&file).unwrap();
    let envelope: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    use base64::Engine as _;
    let payload: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(envelope["payload"].as_str().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(payload["capability"], "audit.summary");
    let mut signed = shown.clone();
    signed.as_object_mut().unwrap().remove("signed");
    assert_eq!(payload["result"]["metadata"], signed);

    let verify = |args: &[&str]| {
        craik()
            .args(["receipts", "verify"])
            .args(args)
            .args(["--home", h])
            .output()
            .unwrap()
    };
    let ok = verify(&[file.to_str().unwrap()]);
    assert!(ok.status.success(), "{}", crate::transcript(&ok));
    let ok = verify(&[h]);
    assert!(ok.status.success(), "{}", crate::transcript(&ok));
    assert!(
        String::from_utf8_lossy(&ok.stdout).contains("audits/"),
        "the home's summaries are verified too"
    );

    // The ledger cut back under the head the summary covered: the summary says so.
    let ledger = home.join("ledger.jsonl");
    let kept = std::fs::read_to_string(&ledger).unwrap();
    let lines: Vec<&str> = kept.lines().collect();
    std::fs::write(&ledger, lines[..lines.len() - 4].join("\n") + "\n").unwrap();
    let bad = verify(&[file.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(1), "{}", crate::transcript(&bad));
    let text = String::from_utf8_lossy(&bad.stdout).into_owned();
    assert!(
        text.contains("audit summary") && text.contains("ledger head"),
        "{text}"
    );
    std::fs::write(&ledger, &kept).unwrap();

    // Any byte of the summary changed: its signature fails.
    let forged = line.replacen("\"payload\":\"ey", "\"payload\":\"EY", 1);
    std::fs::write(&file, forged).unwrap();
    let bad = verify(&[file.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(1), "{}", crate::transcript(&bad));

    // No private key in the home: refused before any work, naming the key file.
    let out_file = dir.path().join("s.jsonl");
    let moved = dir.path().join("key.pem");
    std::fs::rename(home.join("keys/signing.key.pem"), &moved).unwrap();
    let out = craik()
        .args(["audit", h, "--summary", "--summary-out"])
        .arg(&out_file)
        .args(["--home", h])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", crate::transcript(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("signing.key.pem"));
    assert!(!out_file.exists());
}

/// A run with hostile runner-influenced text: a denied action whose target is a long
/// unbroken path with markup and bidi controls.
fn hostile_denied_run(home: &Path, dir: &Path) -> String {
    let long = "x".repeat(600);
    let target = format!("docs/{long}/<script>alert(1)</script>\u{202e}\u{2066}gpj.md");
    let ex = crate::runs::scratch_example(
        dir,
        "trusted-local",
        &[],
        crate::runs::act(serde_json::json!([
            {"id": "action_push", "capability": "git.force_push", "operation": "push", "target": target}
        ])),
        &[("README.md", "hi\n")],
    );
    let (_, id, _) = run_example(home, &ex, &[]);
    id
}

/// Issue 20 item 7: the HTML report opens with its summary (runs by status, approvals by
/// approver, denials, cancellations, memory reviews, files changed), then one section per run;
/// at 1280 px nothing overflows horizontally (asserted on `scrollWidth` in headless
/// Chromium, with a screenshot taken), times stay on one line, hostile text is escaped.
#[test]
fn issue_20_html_report_summary_first_and_no_overflow_at_1280px() {
    let dir = tempfile::tempdir().unwrap();
    let (home, _approved) = approved_docs_review(dir.path());
    // A denial with hostile text.
    let denied = hostile_denied_run(&home, &dir.path().join("hostile"));
    // A cancellation, with a hostile reason.
    let (code, parked, _) = run_example(
        &home,
        &crate::repo_root().join("examples/docs-review"),
        &["--profile", "strict"],
    );
    assert_eq!(code, 6);
    let out = craik()
        .args([
            "runs",
            "cancel",
            &parked,
            "--by",
            "user:carol",
            "--reason",
            REASON,
            "--home",
        ])
        .arg(&home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::transcript(&out));
    // A memory review.
    let list = crate::runs::json_out(&home, &["memory", "list"]);
    let memprop = list[0]["id"].as_str().unwrap().to_owned();
    let out = craik()
        .args([
            "memory",
            "reject",
            &memprop,
            "--by",
            "user:dora",
            "--reason",
            REASON,
            "--home",
        ])
        .arg(&home)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::transcript(&out));

    let page = dir.path().join("audit.html");
    let out = audit(
        &home,
        &[home.to_str().unwrap(), "--html", page.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !dir.path().read_dir().unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .starts_with(".audit.html")),
        "no temporary file left beside the page"
    );
    for external in ["src=", "href=", "http:", "https:", "@import", "url("] {
        assert!(!html.contains(external), "self-contained: found {external}");
    }
    // Summary first, in the order an auditor reads it; then the runs.
    let at = |needle: &str| {
        html.find(needle)
            .unwrap_or_else(|| panic!("missing {needle}"))
    };
    let order = [
        "<h2>Summary</h2>",
        "<h3>Runs by status</h3>",
        "<h3>Approvals by approver</h3>",
        "<h3>Denials: ",
        "<h3>Cancellations: 1</h3>",
        "<h3>Memory reviews: ",
        "<h3>Files changed: ",
        "<section class=\"run\">",
    ];
    for pair in order.windows(2) {
        assert!(at(pair[0]) < at(pair[1]), "{} before {}", pair[0], pair[1]);
    }
    let summary = &html[..at("<section class=\"run\">")];
    assert!(summary.contains("<td><code>user:alice</code></td>"));
    assert!(
        summary.contains(&format!("<code>{denied}</code>")),
        "the denial is listed"
    );
    assert!(summary.contains("user:carol"), "the cancellation names who");
    assert!(
        summary.contains("rejected by user:dora"),
        "the memory review names who"
    );
    assert!(summary.contains("<td><code>completed</code></td>"));
    assert!(!html.contains("<script>alert") && !html.contains("<b>checked"));
    assert!(!html.contains('\u{202e}') && !html.contains('\u{2066}') && !html.contains('\u{1b}'));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

    let Some(chromium) = chromium() else {
        return;
    };
    // A copy that reports its own widths in its title: the report's CSP admits only its own
    // script, so the copy drops the CSP line and adds one script at the end of the body.
    let csp_start = html
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .unwrap();
    let csp_end = csp_start + html[csp_start..].find('>').unwrap() + 1;
    let probe = format!(
        "{}{}",
        &html[..csp_start],
        &html[csp_end..].replacen(
            "</body>",
            "<script>var d=document.documentElement;\
             var t=Array.prototype.slice.call(document.querySelectorAll('.time'));\
             var wrapped=t.filter(function(e){return e.getClientRects().length>1||e.scrollWidth>e.clientWidth+1;}).length;\
             document.title='W'+d.scrollWidth+'x'+d.clientWidth+'t'+t.length+'w'+wrapped;</script></body>",
            1
        )
    );
    let probe_file = dir.path().join("probe.html");
    std::fs::write(&probe_file, probe).unwrap();
    let browse = |extra: &[&str], file: &Path| {
        let profile = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(&chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--hide-scrollbars",
                "--window-size=1280,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(extra)
            .arg(format!("file://{}", file.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", crate::transcript(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let dom = browse(&["--dump-dom"], &probe_file);
    let title = dom
        .split("<title>")
        .nth(1)
        .and_then(|t| t.split("</title>").next())
        .unwrap();
    let (scroll, rest) = title.trim_start_matches('W').split_once('x').unwrap();
    let (client, rest) = rest.split_once('t').unwrap();
    let (times, wrapped) = rest.split_once('w').unwrap();
    let (scroll, client): (u32, u32) = (scroll.parse().unwrap(), client.parse().unwrap());
    assert!(client > 1200 && client <= 1280, "{title}");
    assert!(scroll <= client, "horizontal overflow at 1280 px: {title}");
    assert!(times.parse::<u32>().unwrap() > 20, "{title}");
    assert_eq!(wrapped, "0", "every time on one line: {title}");
    // And the real page renders with its own script, as a screenshot at 1280 px.
    let shot = dir.path().join("audit.png");
    browse(&[&format!("--screenshot={}", shot.display())], &page);
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(
        u32::from_be_bytes(png[16..20].try_into().unwrap()),
        1280,
        "screenshot width"
    );
}

/// Issue 20: `craik bench audit` measures verify and audit over the same generated journals
/// and prints the ratio and each one's peak memory.
#[test]
fn issue_20_bench_audit_reports_the_ratio_and_peak_memory() {
    let out = craik()
        .args([
            "bench",
            "audit",
            "--count",
            "400",
            "--journals",
            "4",
            "--html",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["receipts"], 400);
    assert_eq!(r["journals"], 4);
    let ratio = r["audit_vs_verify"].as_f64().unwrap();
    assert!(ratio > 0.0, "{r}");
    assert!(r["verify_max_rss_kb"].as_u64().unwrap() > 0, "{r}");
    assert!(r["audit_jsonl_max_rss_kb"].as_u64().unwrap() > 0, "{r}");
    assert!(r["html_bytes"].as_u64().unwrap() > 400 * 200, "{r}");
    assert_eq!(r["peaks_reset"], true, "each phase's peak is its own: {r}");
}

/// Issue 31 item 4: a memory reviewer's signed reason is shown like an approver's — in the
/// human audit (escaped, on one line) and in the JSON.
#[test]
fn issue_31_a_memory_reviewers_reason_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, _) = crate::runs::run_example(&home, &crate::runs::example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let list: Value = crate::runs::json_out(&home, &["memory", "list"]);
    let memprop = list[0]["id"].as_str().unwrap().to_owned();
    let out = crate::craik()
        .args([
            "memory", "approve", &memprop, "--by", "user:rev", "--reason",
        ])
        .arg("checked against src/lib.rs")
        .arg("--home")
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    let human = audit(&home, &[&id]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        text.contains("memory review: approved by user:rev: \"checked against src/lib.rs\""),
        "{text}"
    );
    let json = audit(&home, &[&id, "--format", "json"]);
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    let reviewed: Vec<&Value> = report["runs"][0]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e.get("memory_review"))
        .collect();
    assert_eq!(reviewed.len(), 1);
    assert_eq!(reviewed[0]["reason"], "checked against src/lib.rs");
}

/// Every `ledger.audit_written` entry of a home's ledger: (target, metadata).
fn audit_entries(home: &Path) -> Vec<(String, Value)> {
    use base64::Engine as _;
    std::fs::read_to_string(home.join("ledger.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| {
            let e: Value = serde_json::from_str(l).unwrap();
            let p: Value = serde_json::from_slice(
                &base64::engine::general_purpose::STANDARD
                    .decode(e["payload"].as_str().unwrap())
                    .unwrap(),
            )
            .unwrap();
            (p["capability"] == "ledger.audit_written").then(|| {
                (
                    p["target"].as_str().unwrap().to_owned(),
                    p["result"]["metadata"].clone(),
                )
            })
        })
        .collect()
}

/// Issue 31 item 4: audit summaries are named by the home ledger. `audit --summary` records a
/// `ledger.audit_written` entry (target the audit id, metadata the file and its sha256); then
/// `receipts verify HOME` and `audit HOME` catch a summary replaced, deleted or planted (a
/// stray file too), naming it, and `ledger rebuild` records a summary a crash left unnamed
/// (marked rebuilt) but refuses a file that is no summary.
#[test]
fn issue_31_audit_summaries_are_named_by_the_ledger() {
    use sha2::Digest as _;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, _) = run_example(&home, &crate::runs::example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let h = home.to_str().unwrap();
    let summary = |extra: &[&str]| {
        let out = craik()
            .args(["audit", h, "--summary", "--format", "json", "--home", h])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", crate::transcript(&out));
        let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
        std::path::PathBuf::from(shown["signed"].as_str().unwrap())
    };
    let file = summary(&[]);
    // `ledger.entries` is a count: the summary's `last_hash` is the hash of the entry with seq
    // `entries - 1` (the entry naming the summary itself came after).
    {
        use base64::Engine as _;
        let line = std::fs::read_to_string(&file).unwrap();
        let e: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        let p: Value = serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(e["payload"].as_str().unwrap())
                .unwrap(),
        )
        .unwrap();
        let head = &p["result"]["metadata"]["ledger"];
        let hashes: Vec<String> = std::fs::read_to_string(home.join("ledger.jsonl"))
            .unwrap()
            .lines()
            .filter(|l| l.contains("capability-receipt"))
            .map(|l| {
                let e: Value = serde_json::from_str(l).unwrap();
                let payload = base64::engine::general_purpose::STANDARD
                    .decode(e["payload"].as_str().unwrap())
                    .unwrap();
                format!(
                    "sha256:{}",
                    craik_kernel::to_hex(&sha2::Sha256::digest(&payload))
                )
            })
            .collect();
        let entries = head["entries"].as_u64().unwrap() as usize;
        assert_eq!(entries, hashes.len() - 1, "{head}");
        assert_eq!(head["last_hash"], hashes[entries - 1], "{head}");
    }
    let id = file
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let sha = format!(
        "sha256:{}",
        craik_kernel::to_hex(&sha2::Sha256::digest(std::fs::read(&file).unwrap()))
    );
    assert_eq!(
        audit_entries(&home),
        vec![(
            id.clone(),
            serde_json::json!({
                "journal": format!("audits/{id}/receipts.jsonl"),
                "audit_id": id,
                "sha256": sha,
            })
        )]
    );
    let verify = || crate::ledger::verify_home_for(&home);
    let audit = || craik().args(["audit", h, "--home", h]).output().unwrap();
    let (v, a) = (verify(), audit());
    assert_eq!(v.status.code(), Some(0), "{}", crate::transcript(&v));
    assert_eq!(a.status.code(), Some(0), "{}", crate::transcript(&a));
    // A second summary (the first is named and checked while it is made).
    let second = summary(&[]);
    assert_eq!(audit_entries(&home).len(), 2);
    let v = verify();
    assert_eq!(v.status.code(), Some(0), "{}", crate::transcript(&v));

    let expect_bad = |needle: &str, path: &Path| {
        let shown = path.display().to_string();
        for (name, out) in [("verify", verify()), ("audit", audit())] {
            assert_eq!(
                out.status.code(),
                Some(1),
                "{name}: {}",
                crate::transcript(&out)
            );
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                text.lines()
                    .any(|l| l.contains(&shown) && l.contains(needle)),
                "{name}: no line naming {shown} with `{needle}`:\n{text}"
            );
        }
    };
    // Replaced by another summary signed with the same key (each verifies on its own).
    let kept = std::fs::read(&file).unwrap();
    std::fs::copy(&second, &file).unwrap();
    expect_bad("replaced or changed", &file);
    // Deleted.
    std::fs::remove_file(&file).unwrap();
    expect_bad("missing", &file);
    std::fs::write(&file, &kept).unwrap();
    assert_eq!(verify().status.code(), Some(0));
    // A stray file, and a summary planted under a name of its own.
    let stray = home.join("audits/notes.txt");
    std::fs::write(&stray, "hello\n").unwrap();
    expect_bad("not named by the ledger", &stray);
    std::fs::remove_file(&stray).unwrap();

    // A summary a crash left unnamed (written, not yet recorded): here one written outside
    // the home (never recorded) and moved into `audits/` under its own id.
    let outside = dir.path().join("s.jsonl");
    let written = summary(&["--summary-out", outside.to_str().unwrap()]);
    assert_eq!(written, outside);
    assert_eq!(
        audit_entries(&home).len(),
        2,
        "a summary outside the home is not named"
    );
    let line = std::fs::read_to_string(&outside).unwrap();
    let other_id = {
        use base64::Engine as _;
        let e: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        let p: Value = serde_json::from_slice(
            &base64::engine::general_purpose::STANDARD
                .decode(e["payload"].as_str().unwrap())
                .unwrap(),
        )
        .unwrap();
        p["run_id"].as_str().unwrap().to_owned()
    };
    let planted = home.join("audits").join(&other_id).join("receipts.jsonl");
    std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
    std::fs::copy(&outside, &planted).unwrap();
    expect_bad("not named by the ledger", &planted);
    std::fs::write(&stray, "hello\n").unwrap();
    let out = craik()
        .args(["ledger", "rebuild", "--home", h])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", crate::transcript(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(&format!(
            "recorded  ledger.audit_written {other_id} (rebuilt)"
        )),
        "{text}"
    );
    assert!(
        text.contains("notes.txt"),
        "the stray file is refused: {text}"
    );
    let entries = audit_entries(&home);
    assert_eq!(entries.len(), 3);
    assert_eq!(entries[2].0, other_id);
    assert_eq!(entries[2].1["rebuilt"], true);
    std::fs::remove_file(&stray).unwrap();
    let v = verify();
    assert_eq!(v.status.code(), Some(0), "{}", crate::transcript(&v));
}
