//! Issue 20: the home ledger (every journal of a home named, deletions and replays caught,
//! `craik ledger rebuild`) and the signed terminal status (a run that ended stays as it ended).

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::policy::copy_dir;
use crate::runs::{
    approve, example, json_out, pending_approval, receipts, resume, run_example, run_json,
};
use crate::{craik, transcript};

/// `craik receipts verify HOME --key HOME/keys/signing.pub.pem`.
fn verify_home(home: &Path, key_home: &Path) -> Output {
    craik()
        .args(["receipts", "verify"])
        .arg(home)
        .arg("--key")
        .arg(key_home.join("keys/signing.pub.pem"))
        .output()
        .unwrap()
}

/// `craik receipts verify HOME` with the home's own key.
pub(crate) fn verify_home_for(home: &Path) -> Output {
    verify_home(home, home)
}

fn audit_home(home: &Path, key_home: &Path) -> Output {
    craik()
        .arg("audit")
        .arg(home)
        .arg("--key")
        .arg(key_home.join("keys/signing.pub.pem"))
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A copy of `home` in `to`.
fn copy_home(home: &Path, to: &Path) -> PathBuf {
    copy_dir(home, to);
    to.to_owned()
}

/// The one INVALID line of a verification naming `journal`, asserted to name `ledger` too.
fn invalid_line(out: &Output, journal: &str, ledger: &Path) -> String {
    assert_eq!(out.status.code(), Some(1), "{}", transcript(out));
    let text = stdout(out);
    let line = text
        .lines()
        .find(|l| l.contains("INVALID") && l.contains(journal))
        .unwrap_or_else(|| panic!("no INVALID line for {journal}:\n{text}"))
        .to_owned();
    assert!(
        line.contains(&ledger.display().to_string()),
        "the line names the ledger too: {line}"
    );
    line
}

/// A home with a completed docs-review run and a run approved and resumed (so a review
/// journal): (home, completed run, approved run, approval id).
fn home_with_review(dir: &Path) -> (PathBuf, String, String, String) {
    let home = dir.join("home");
    let (exit, first, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let (exit, second, _) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6);
    let approval = pending_approval(&home);
    let ok = approve(&home, &approval, "user:alice");
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    let done = resume(&home, &second);
    assert_eq!(done.status.code(), Some(0), "{}", transcript(&done));
    (home, first, second, approval)
}

#[test]
fn issue_20_deleting_a_journal_a_run_directory_or_a_review_journal_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (home, first, _, approval) = home_with_review(dir.path());
    let ok = verify_home(&home, &home);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    // The ledger is verified first, then every journal.
    let text = stdout(&ok);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .contains("ledger.jsonl: valid — 12 receipts, 12 checkpoints, open (run ledger)"),
        "{text}"
    );
    assert_eq!(audit_home(&home, &home).status.code(), Some(0));

    // A run's receipts.jsonl deleted (the auditor's finding: this said "all valid").
    let h = copy_home(&home, &dir.path().join("no-journal"));
    std::fs::remove_file(h.join("runs").join(&first).join("receipts.jsonl")).unwrap();
    let line = invalid_line(
        &verify_home(&h, &home),
        &format!("{first}/receipts.jsonl"),
        &h.join("ledger.jsonl"),
    );
    assert!(line.contains("missing: named by the ledger"), "{line}");
    let audit = audit_home(&h, &home);
    assert_eq!(audit.status.code(), Some(1), "{}", transcript(&audit));
    assert!(stdout(&audit).contains(&format!("{first}/receipts.jsonl: missing")));

    // The whole run directory deleted.
    let h = copy_home(&home, &dir.path().join("no-run"));
    std::fs::remove_dir_all(h.join("runs").join(&first)).unwrap();
    invalid_line(
        &verify_home(&h, &home),
        &format!("{first}/receipts.jsonl"),
        &h.join("ledger.jsonl"),
    );

    // Every run deleted: the ledger still says what is gone.
    let h = copy_home(&home, &dir.path().join("no-runs"));
    std::fs::remove_dir_all(h.join("runs")).unwrap();
    std::fs::create_dir(h.join("runs")).unwrap();
    let out = verify_home(&h, &home);
    invalid_line(
        &out,
        &format!("{first}/receipts.jsonl"),
        &h.join("ledger.jsonl"),
    );

    // An approval's review journal deleted.
    let h = copy_home(&home, &dir.path().join("no-review"));
    std::fs::remove_dir_all(h.join("reviews").join(&approval)).unwrap();
    let line = invalid_line(
        &verify_home(&h, &home),
        &format!("reviews/{approval}/receipts.jsonl"),
        &h.join("ledger.jsonl"),
    );
    assert!(line.contains("missing"), "{line}");
    assert_eq!(audit_home(&h, &home).status.code(), Some(1));
}

#[test]
fn issue_20_a_deleted_ledger_entry_or_an_old_ledger_copy_put_back_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, first, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let old = std::fs::read(home.join("ledger.jsonl")).unwrap();
    let (exit, second, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    assert_eq!(verify_home(&home, &home).status.code(), Some(0));
    let ledger = std::fs::read_to_string(home.join("ledger.jsonl")).unwrap();
    let lines: Vec<&str> = ledger.lines().collect();
    // key; for each run started, a checkpoint before each of its 3 side effects, closed: an
    // entry and its checkpoint each.
    assert_eq!(lines.len(), 22, "{ledger}");

    // An older copy put back: the second run is named by nothing.
    let h = copy_home(&home, &dir.path().join("replayed"));
    std::fs::write(h.join("ledger.jsonl"), &old).unwrap();
    let line = invalid_line(
        &verify_home(&h, &home),
        &format!("{second}/receipts.jsonl"),
        &h.join("ledger.jsonl"),
    );
    assert!(line.contains("not named by the ledger"), "{line}");
    assert!(line.contains("older copy"), "{line}");

    // An entry deleted from the middle: the ledger's own chain breaks.
    let h = copy_home(&home, &dir.path().join("entry-deleted"));
    let mut kept = lines.clone();
    kept.remove(2); // the first run's `run_started` entry
    std::fs::write(h.join("ledger.jsonl"), kept.join("\n") + "\n").unwrap();
    let out = verify_home(&h, &home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.contains("ledger.jsonl:3: INVALID")),
        "{text}"
    );

    // The last entry and its checkpoint cut off: the second run closed, the ledger says not.
    let h = copy_home(&home, &dir.path().join("tail-cut"));
    let cut = lines.get(..lines.len() - 2).unwrap().join("\n") + "\n";
    std::fs::write(h.join("ledger.jsonl"), cut).unwrap();
    let line = invalid_line(
        &verify_home(&h, &home),
        &format!("{second}/receipts.jsonl"),
        &h.join("ledger.jsonl"),
    );
    assert!(line.contains("records no close"), "{line}");

    // A journal shortened to an earlier closed state cannot exist, but one replaced by
    // another run's journal is: it does not end at the recorded root.
    let h = copy_home(&home, &dir.path().join("swapped"));
    std::fs::copy(
        h.join("runs").join(&second).join("receipts.jsonl"),
        h.join("runs").join(&first).join("receipts.jsonl"),
    )
    .unwrap();
    let out = verify_home(&h, &home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
}

#[test]
fn issue_20_an_ended_run_keeps_its_signed_status() {
    let dir = tempfile::tempdir().unwrap();
    let (exit, id, home) = crate::boundary::docs_review_with(dir.path(), |v| {
        v["verification_required"] = serde_json::json!(["git.diff_check"]);
    });
    assert_eq!(exit, 1);
    let reason = "verification_required never ran and passed: git.diff_check";
    // The closing receipt signs the status and the reason.
    let before = receipts(&home, &id);
    let closing = before.last().unwrap();
    assert_eq!(closing["capability"], "run.closed");
    assert_eq!(closing["result"]["metadata"]["status"], "blocked");
    assert_eq!(closing["result"]["metadata"]["may_continue"], false);
    assert!(closing["reason"].as_str().unwrap().contains(reason));
    let state = std::fs::read(home.join("runs").join(&id).join("run.json")).unwrap();

    // Resume and cancel refuse with one line (exit 1); nothing is written.
    for verb in ["resume", "cancel"] {
        let out = craik()
            .args(["runs", verb, &id, "--by", "user:op", "--home"])
            .arg(&home)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{verb}: {}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().last().unwrap();
        assert!(
            line.contains(&format!(
                "{id}: already ended blocked (signed by its closing receipt"
            )) && line.contains("an ended run cannot be"),
            "{verb}: {err}"
        );
    }
    // Recover finds nothing and changes nothing.
    let out = craik()
        .args(["runs", "recover", &id, "--by", "user:op", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains("nothing to recover"),
        "{}",
        transcript(&out)
    );
    assert_eq!(receipts(&home, &id).len(), before.len());
    assert_eq!(
        std::fs::read(home.join("runs").join(&id).join("run.json")).unwrap(),
        state
    );

    // run.json edited to `completed`: show and audit read the signed status; recovery
    // restores it.
    let path = home.join("runs").join(&id).join("run.json");
    let mut run: Value = serde_json::from_slice(&state).unwrap();
    run["status"] = "completed".into();
    std::fs::write(&path, serde_json::to_vec_pretty(&run).unwrap()).unwrap();
    let shown = json_out(&home, &["runs", "show", &id]);
    assert_eq!(shown["status"], "blocked");
    assert_eq!(shown["signed_status"]["receipt"], closing["id"]);
    assert!(
        shown["status_source"]
            .as_str()
            .unwrap()
            .contains("says completed: ignored")
    );
    let audit = audit_home(&home, &home);
    assert!(
        stdout(&audit).contains("status      blocked — the runner said done"),
        "{}",
        transcript(&audit)
    );
    let out = resume(&home, &id);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let out = craik()
        .args(["runs", "recover", &id, "--by", "user:op", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert_eq!(run_json(&home, &id)["status"], "blocked");
    assert_eq!(receipts(&home, &id).len(), before.len());
}

#[test]
fn issue_20_a_park_signs_that_the_run_may_continue() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, _) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6);
    let all = receipts(&home, &id);
    let parked = all.last().unwrap();
    assert_eq!(parked["capability"], "run.parked");
    assert_eq!(parked["result"]["status"], "blocked");
    assert_eq!(parked["result"]["metadata"]["may_continue"], true);
    let approval = pending_approval(&home);
    assert_eq!(parked["result"]["metadata"]["awaiting_approval"], approval);
    let shown = json_out(&home, &["runs", "show", &id]);
    assert_eq!(shown["signed_status"]["may_continue"], true);
    // Cancelling a parked run ends it: its closing receipt says interrupted, cancelled.
    let out = craik()
        .args(["runs", "cancel", &id, "--by", "user:op", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let closing = receipts(&home, &id).last().cloned().unwrap();
    assert_eq!(closing["capability"], "run.closed");
    assert_eq!(closing["result"]["metadata"]["status"], "interrupted");
    assert_eq!(closing["result"]["metadata"]["cancelled"], true);
    assert_eq!(verify_home(&home, &home).status.code(), Some(0));
}

#[test]
fn issue_20_ledger_rebuild_records_a_home_written_before_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let (home, first, _, _) = home_with_review(dir.path());
    // A home from before the ledger: verification says so and names the fix.
    std::fs::remove_file(home.join("ledger.jsonl")).unwrap();
    let out = verify_home(&home, &home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        stdout(&out).contains("craik ledger rebuild"),
        "{}",
        transcript(&out)
    );
    // One journal that does not verify is left out, and said so.
    let bad = home.join("runs").join(&first).join("receipts.jsonl");
    let good = std::fs::read(&bad).unwrap();
    let mut broken = good.clone();
    let at = broken.len() / 2;
    broken[at] ^= 1;
    std::fs::write(&bad, &broken).unwrap();
    let out = craik()
        .args(["ledger", "rebuild", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&format!("refused   {}", bad.display())),
        "{text}"
    );
    assert!(text.contains("cannot be detected"), "{text}");
    // Repaired, a second rebuild records it; the home verifies; entries say `rebuilt`.
    std::fs::write(&bad, &good).unwrap();
    let out = craik()
        .args(["ledger", "rebuild", "--home"])
        .arg(&home)
        .arg("--format")
        .arg("json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let done: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        done["recorded"],
        serde_json::json!([
            format!("ledger.run_started {first}"),
            format!("ledger.run_closed {first}")
        ])
    );
    let ok = verify_home(&home, &home);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    let audit = audit_home(&home, &home);
    assert!(
        stdout(&audit).contains("valid: 6 entries (5 recorded by `craik ledger rebuild`)"),
        "{}",
        transcript(&audit)
    );
    // Nothing left to record: a third rebuild writes nothing.
    let out = craik()
        .args(["ledger", "rebuild", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("0 entries recorded"),
        "{}",
        transcript(&out)
    );
}

/// kill -9 at every durable write of a run: wherever it stops, `craik runs recover` leaves a
/// home that verifies against its ledger; a stop between the journal's close and the
/// ledger's close entry is reported (not silently passed) until recovery records it.
#[test]
fn issue_20_a_crash_between_a_run_closing_and_its_ledger_entry_is_caught_then_recovered() {
    let mut window = 0;
    let mut points = 0;
    for n in 1..=200u64 {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        if !crate::crash::run_and_kill(&example("docs-review"), &home, n) {
            break;
        }
        points += 1;
        let Some(id) = std::fs::read_dir(home.join("runs"))
            .ok()
            .and_then(|mut d| d.next())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        else {
            continue;
        };
        let journal = home.join("runs").join(&id).join("receipts.jsonl");
        if std::fs::metadata(&journal).map_or(true, |m| m.len() == 0) {
            continue; // stopped before the run's first receipt: nothing to vouch for
        }
        let ledger = std::fs::read_to_string(home.join("ledger.jsonl")).unwrap_or_default();
        let closed = std::fs::read_to_string(&journal)
            .unwrap()
            .lines()
            .last()
            .is_some_and(|l| l.contains("checkpoint"))
            && receipts(&home, &id)
                .last()
                .is_some_and(|r| r["capability"] == "run.closed");
        // The journal closed, the ledger's close entry not yet written.
        let recorded_close = !ledger.is_empty()
            && ledger_entries(&home)
                .iter()
                .any(|e| e["capability"] == "ledger.run_closed");
        if closed && !recorded_close {
            window += 1;
            let line = invalid_line(
                &verify_home(&home, &home),
                &format!("{id}/receipts.jsonl"),
                &home.join("ledger.jsonl"),
            );
            assert!(line.contains("records no close"), "{n}: {line}");
        }
        let out = craik()
            .args(["runs", "recover", &id, "--by", "user:op", "--home"])
            .arg(&home)
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{n}: {}",
            transcript(&out)
        );
        // A run stopped mid-way stays open after recovery (not closed, and said so);
        // nothing else may be wrong, least of all against the ledger.
        let ok = verify_home(&home, &home);
        let text = stdout(&ok);
        let bad: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("INVALID") && !l.contains(": not closed:"))
            .collect();
        assert!(bad.is_empty(), "{n}: {}", bad.join("\n"));
    }
    assert!(points > 20, "only {points} durable writes");
    // Group commit (issue 20): the close line is written, then fsynced — a stop after each.
    assert_eq!(
        window, 2,
        "exactly two stops fall between the close and its entry"
    );
}

/// The ledger's head cache is never trusted: a wrong or missing one only costs a full read.
#[test]
fn issue_20_a_wrong_ledger_head_cache_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let head = home.join("ledger.head");
    let mut cached: Value = serde_json::from_slice(&std::fs::read(&head).unwrap()).unwrap();
    // Subtree roots that do not fold to the signed root (and a signature that no longer
    // covers them).
    let mut body: Value = serde_json::from_str(cached["body"].as_str().unwrap()).unwrap();
    body["nodes"][0] = "00".repeat(32).into();
    cached["body"] = body.to_string().into();
    std::fs::write(&head, serde_json::to_vec(&cached).unwrap()).unwrap();
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    std::fs::remove_file(&head).unwrap();
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let ok = verify_home(&home, &home);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    let ledger = std::fs::read_to_string(home.join("ledger.jsonl")).unwrap();
    // key; per run started, 3 side effects' checkpoints, closed: an entry and its checkpoint
    // each.
    assert_eq!(ledger.lines().count(), 2 + 3 * 10, "{ledger}");
    // (verify_home checked that the ledger names all three runs, closed at their roots)
}

/// Issue 31 item 1: the head cache's recorded pairs decide nothing. Someone who can write the
/// home but holds no key edits it while RUN is parked (RUN no longer open, a checkpoint far
/// ahead recorded for it) — signed form kept, old unsigned form, or the signature of another
/// head: the host still records RUN's close when it ends, so a journal rolled back later
/// cannot pass the home audit.
#[test]
fn issue_31_a_poisoned_ledger_head_never_skips_an_entry() {
    for variant in ["signed-body-edited", "unsigned", "other-signature"] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(&home, &example("approval"), &[]);
        assert_eq!(exit, 6, "{variant}: {text}");
        let head = home.join("ledger.head");
        let cached: Value = serde_json::from_slice(&std::fs::read(&head).unwrap()).unwrap();
        let mut body: Value = serde_json::from_str(cached["body"].as_str().unwrap()).unwrap();
        // The run made to look closed (not open) and recorded far ahead of its journal.
        body["open"] = serde_json::json!([]);
        body["latest"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!([id, 1_000_000, "sha256:00"]));
        let poisoned = match variant {
            "signed-body-edited" => {
                let mut c = cached.clone();
                c["body"] = body.to_string().into();
                c
            }
            "unsigned" => body.clone(),
            _ => {
                // A real signature of the home's key, over another head's body.
                let mut c = cached.clone();
                c["body"] = body.to_string().into();
                c["sig"] = cached["sig"].clone();
                c
            }
        };
        std::fs::write(&head, serde_json::to_vec(&poisoned).unwrap()).unwrap();
        let approval = crate::runs::pending_approval(&home);
        let ok = crate::runs::approve(&home, &approval, "user:alice");
        assert_eq!(ok.status.code(), Some(0), "{variant}: {}", transcript(&ok));
        let done = crate::runs::resume(&home, &id);
        assert_eq!(
            done.status.code(),
            Some(0),
            "{variant}: {}",
            transcript(&done)
        );
        let closed = ledger_entries(&home)
            .iter()
            .filter(|e| e["capability"] == "ledger.run_closed" && e["target"] == id.as_str())
            .count();
        assert_eq!(closed, 1, "{variant}: the run's close is recorded once");
        let ok = verify_home(&home, &home);
        assert_eq!(ok.status.code(), Some(0), "{variant}: {}", transcript(&ok));
    }
}

/// `craik bench run` reports the time the run spent appending to its home ledger.
#[test]
fn issue_20_bench_run_shows_the_ledger_share_of_the_run() {
    let out = craik()
        .args(["bench", "run", "--steps", "8", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (ledger, run) = (
        v["ledger_s"].as_f64().unwrap(),
        v["governed_s"].as_f64().unwrap(),
    );
    assert!(ledger > 0.0 && ledger < run, "{v}");
    assert_eq!(v["ledger_share_of_run"].as_f64().unwrap(), ledger / run);
    assert_eq!(v["ledger_prefilled_runs"], 1000);
}

/// The home ledger's entries (receipt payloads, checkpoints left out).
pub(crate) fn ledger_entries(home: &Path) -> Vec<Value> {
    use base64::Engine as _;
    std::fs::read_to_string(home.join("ledger.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            e["payloadType"]
                .as_str()
                .unwrap()
                .contains("capability-receipt")
        })
        .map(|e| {
            let p = base64::engine::general_purpose::STANDARD
                .decode(e["payload"].as_str().unwrap())
                .unwrap();
            serde_json::from_slice(&p).unwrap()
        })
        .collect()
}

fn run_raw(home: &Path) -> Output {
    craik()
        .arg("run")
        .arg(example("docs-review"))
        .arg("--home")
        .arg(home)
        .output()
        .unwrap()
}

fn rotate(home: &Path) -> Output {
    craik()
        .args(["keys", "rotate", "--by", "user:alice", "--home"])
        .arg(home)
        .output()
        .unwrap()
}

/// Issue 20 item 1 (key rotated/retired): a rotation is refused while a run is open, signed
/// by the retired key into the ledger, and leaves every journal of the home verifiable by an
/// auditor who trusts either key; a key replaced behind the ledger's back signs nothing, and
/// a journal signed by a key other than its ledger period's is caught.
#[test]
fn issue_20_a_rotated_key_keeps_the_whole_home_verifiable() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, first, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let (exit, parked, _) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6);
    // An open (parked) run: refused, naming it; nothing changed.
    let old_pub = std::fs::read(home.join("keys/signing.pub.pem")).unwrap();
    let out = rotate(&home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&parked),
        "{}",
        transcript(&out)
    );
    assert_eq!(
        std::fs::read(home.join("keys/signing.pub.pem")).unwrap(),
        old_pub
    );
    let out = craik()
        .args(["runs", "cancel", &parked, "--by", "user:op", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let old_key = home.join("old.pub.pem");
    std::fs::write(&old_key, &old_pub).unwrap();
    let out = rotate(&home);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let new_pub = std::fs::read(home.join("keys/signing.pub.pem")).unwrap();
    assert_ne!(new_pub, old_pub);
    let retired: Vec<_> = std::fs::read_dir(home.join("keys/retired"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(retired.len(), 1);
    assert_eq!(std::fs::read(&retired[0]).unwrap(), old_pub);
    assert!(!home.join("keys/next").exists());
    // The hand-over: signed by the old key, naming both; then the new key's first entry.
    let entries = ledger_entries(&home);
    let kinds: Vec<&str> = entries
        .iter()
        .map(|e| e["capability"].as_str().unwrap())
        .collect();
    let at = kinds
        .iter()
        .position(|k| *k == "ledger.key_rotated")
        .unwrap();
    assert_eq!(kinds[at + 1], "ledger.key_added");
    assert_eq!(entries[at]["actor"], "user:alice");
    assert_eq!(
        entries[at]["key_id"],
        entries[at]["result"]["metadata"]["retired_key_id"]
    );
    assert_eq!(entries[at + 1]["key_id"], entries[at]["target"]);
    // A run under the new key; the whole home verifies trusting the new key or the old one.
    let (exit, later, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    for key in [home.join("keys/signing.pub.pem"), old_key.clone()] {
        let out = craik()
            .args(["receipts", "verify"])
            .arg(&home)
            .arg("--key")
            .arg(&key)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{key:?}: {}", transcript(&out));
    }
    // A run closed before the rotation keeps its signed status.
    let shown = json_out(&home, &["runs", "show", &first]);
    assert_eq!(shown["signed_status"]["status"], "completed", "{shown}");
    // A journal signed by another key than its ledger period's: the old run's journal put in
    // place of the new run's is caught (even though the old key is trusted).
    let swapped = copy_home(&home, &dir.path().join("swapped"));
    std::fs::copy(
        swapped.join("runs").join(&first).join("receipts.jsonl"),
        swapped.join("runs").join(&later).join("receipts.jsonl"),
    )
    .unwrap();
    let out = verify_home(&swapped, &swapped);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    // An unrelated key trusts nothing of it.
    let other = dir.path().join("other");
    let out = craik()
        .args(["keys", "generate", "--out"])
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let out = craik()
        .args(["receipts", "verify"])
        .arg(&home)
        .arg("--key")
        .arg(other.join("signing.pub.pem"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    // A key replaced behind the ledger's back signs nothing into it: the next run is refused.
    std::fs::remove_file(home.join("keys/signing.key.pem")).unwrap();
    std::fs::remove_file(home.join("keys/signing.pub.pem")).unwrap();
    std::fs::copy(
        other.join("signing.key.pem"),
        home.join("keys/signing.key.pem"),
    )
    .unwrap();
    std::fs::copy(
        other.join("signing.pub.pem"),
        home.join("keys/signing.pub.pem"),
    )
    .unwrap();
    let out = run_raw(&home);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        transcript(&out).contains("craik keys rotate"),
        "{}",
        transcript(&out)
    );
}

/// A rotation cut short after its ledger entry is finished by running it again; until then
/// the home signs nothing.
#[test]
fn issue_20_an_interrupted_rotation_is_finished_not_repeated() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let out = rotate(&home);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let new_pub = std::fs::read(home.join("keys/signing.pub.pem")).unwrap();
    // Put the state back as a crash after the ledger entry would leave it: the new public
    // key still in `next/`, the old one in place.
    std::fs::create_dir(home.join("keys/next")).unwrap();
    std::fs::rename(
        home.join("keys/signing.pub.pem"),
        home.join("keys/next/signing.pub.pem"),
    )
    .unwrap();
    let retired = std::fs::read_dir(home.join("keys/retired"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::copy(&retired, home.join("keys/signing.pub.pem")).unwrap();
    let out = run_raw(&home);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        transcript(&out).contains("interrupted"),
        "{}",
        transcript(&out)
    );
    let out = rotate(&home);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("finished an interrupted rotation"));
    assert_eq!(
        std::fs::read(home.join("keys/signing.pub.pem")).unwrap(),
        new_pub
    );
    let rotations = ledger_entries(&home)
        .iter()
        .filter(|e| e["capability"] == "ledger.key_rotated")
        .count();
    assert_eq!(rotations, 1, "not rotated twice");
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    assert_eq!(verify_home(&home, &home).status.code(), Some(0));
}

/// Issue 20 item 8: `--allow-open` accepts an open journal only on a signed fact (a last
/// `run.parked` receipt, or the home ledger recording the run started and not closed), never
/// on the unsigned `run.json`.
#[test]
fn issue_20_allow_open_rests_on_signed_facts_only() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, parked, _) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6);
    let (exit, done, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let verify = |run: &str, open: bool| {
        let mut cmd = craik();
        cmd.args(["receipts", "verify"])
            .arg(home.join("runs").join(run))
            .arg("--key")
            .arg(home.join("keys/signing.pub.pem"));
        if open {
            cmd.arg("--allow-open");
        }
        cmd.output().unwrap()
    };
    let out = verify(&parked, true);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    // A closed run's journal cut before its final checkpoint, its run.json edited to say it
    // is still going: refused, whatever run.json says.
    let journal = home.join("runs").join(&done).join("receipts.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.pop();
    std::fs::write(&journal, lines.join("\n") + "\n").unwrap();
    let state = home.join("runs").join(&done).join("run.json");
    let mut run: Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    run.as_object_mut().unwrap().remove("ended_at");
    std::fs::write(&state, serde_json::to_vec(&run).unwrap()).unwrap();
    let out = verify(&done, true);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        stdout(&out).contains("nothing signed says"),
        "{}",
        transcript(&out)
    );
}

/// The approved docs-review-like run (approval example, approved, resumed) re-signed with
/// the home's own key after `edit` changed its receipts: what only a key holder could forge.
fn resigned(home: &Path, run: &str, edit: impl Fn(&mut Vec<craik_kernel::ReceiptPayload>)) {
    use base64::Engine as _;
    let journal = home.join("runs").join(run).join("receipts.jsonl");
    let mut receipts: Vec<craik_kernel::ReceiptPayload> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| {
            e["payloadType"]
                .as_str()
                .unwrap()
                .contains("capability-receipt")
        })
        .map(|e| {
            serde_json::from_slice(
                &base64::engine::general_purpose::STANDARD
                    .decode(e["payload"].as_str().unwrap())
                    .unwrap(),
            )
            .unwrap()
        })
        .collect();
    edit(&mut receipts);
    let signer = craik_host::keys::read_signer(&home.join("keys/signing.key.pem")).unwrap();
    let mut writer = craik_kernel::JournalWriter::new(run, 64);
    let mut out = Vec::new();
    let mut at = time::OffsetDateTime::UNIX_EPOCH;
    for r in receipts {
        let time = time::OffsetDateTime::parse(
            &r.created_at,
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        at = at.max(time);
        let draft = craik_kernel::ReceiptDraft {
            task_id: r.task_id,
            actor: r.actor,
            capability: r.capability,
            target: r.target,
            policy_profile: r.policy_profile,
            fail_open: r.fail_open,
            reason: r.reason,
            result: r.result,
            redacted: r.redacted,
            policy_set: r.policy_set,
            request_hash: r.request_hash,
            decision: r.decision,
            determining_policies: r.determining_policies,
            decided_by: r.decided_by,
            mode: r.mode,
            action: r.action,
        };
        out.extend(writer.append(draft, at, &signer).unwrap());
    }
    out.extend(writer.close(at, &signer).unwrap());
    std::fs::write(&journal, out).unwrap();
}

/// Issue 20 item 8: verification re-checks offline what the kernel enforced when it decided:
/// an approval unlocks one decision, before it expires; and a review journal sits in the
/// directory its signed journal id names.
#[test]
fn issue_20_an_expired_or_reused_approval_and_a_moved_review_are_caught_offline() {
    let dir = tempfile::tempdir().unwrap();
    let (home, _, approved, approval) = home_with_review(dir.path());
    let verify_run = |home: &Path| {
        craik()
            .args(["receipts", "verify"])
            .arg(home.join("runs").join(&approved))
            .arg("--key")
            .arg(home.join("keys/signing.pub.pem"))
            .output()
            .unwrap()
    };
    let via = |r: &craik_kernel::ReceiptPayload| r.decided_by.by.ends_with(&approval);
    // Re-signed unchanged: still valid (the forgery below is the only difference).
    let same = copy_home(&home, &dir.path().join("same"));
    resigned(&same, &approved, |_| {});
    let out = verify_run(&same);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    // The decision signed after the approval's expiry (a day later).
    let late = copy_home(&home, &dir.path().join("late"));
    resigned(&late, &approved, |receipts| {
        let at = receipts.iter().position(&via).unwrap();
        for r in receipts.iter_mut().skip(at) {
            let t = time::OffsetDateTime::parse(
                &r.created_at,
                &time::format_description::well_known::Rfc3339,
            )
            .unwrap()
                + time::Duration::days(1);
            r.created_at = t
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap();
        }
    });
    let out = verify_run(&late);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(stdout(&out).contains("expired at"), "{}", transcript(&out));
    // The approval used twice.
    let twice = copy_home(&home, &dir.path().join("twice"));
    resigned(&twice, &approved, |receipts| {
        let at = receipts.iter().position(&via).unwrap();
        let again = receipts[at].clone();
        receipts.insert(at + 1, again);
    });
    let out = verify_run(&twice);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(stdout(&out).contains("single-use"), "{}", transcript(&out));
    // A review journal moved under another review's name.
    let moved = dir.path().join("moved/reviews/approval_other");
    std::fs::create_dir_all(&moved).unwrap();
    std::fs::copy(
        home.join("reviews").join(&approval).join("receipts.jsonl"),
        moved.join("receipts.jsonl"),
    )
    .unwrap();
    let out = craik()
        .args(["receipts", "verify"])
        .arg(moved.join("receipts.jsonl"))
        .arg("--key")
        .arg(home.join("keys/signing.pub.pem"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        stdout(&out).contains("run_approval_other"),
        "{}",
        transcript(&out)
    );
}

/// Outside testing round 6 (R6-E): a rotation never retires a key a live process still signs
/// with (the process holds `keys/use.lock` shared; the rotation is refused, naming it, and
/// changes nothing), and `ledger rebuild` never vouches for a journal of a retired key the
/// ledger does not name (it would have recorded a stranded or planted one under the new key).
#[test]
fn issue_18_round_6_rotation_waits_for_signers_and_rebuild_refuses_retired_key_journals() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    // A second home with the same key writes a run this home's ledger never names.
    let twin = copy_home(&home, &dir.path().join("twin"));
    let (exit, stranded, _) = run_example(&twin, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    // A process signing with the key (shared lock held, as a run holds it): refused.
    let lock = home.join("keys").join("use.lock");
    assert!(lock.is_file(), "a run takes the key-use lock");
    let mut holder = std::process::Command::new("flock")
        .args(["-s", "-o"])
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    // Until `flock` holds it (an exclusive try then fails).
    while std::process::Command::new("flock")
        .args(["-n", "-x"])
        .arg(&lock)
        .arg("true")
        .status()
        .unwrap()
        .success()
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let old_pub = std::fs::read(home.join("keys/signing.pub.pem")).unwrap();
    let mut out = rotate(&home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("signing with this home's key"),
        "{}",
        transcript(&out)
    );
    assert_eq!(
        std::fs::read(home.join("keys/signing.pub.pem")).unwrap(),
        old_pub
    );
    assert!(!home.join("keys/next").exists());
    holder.kill().unwrap();
    holder.wait().unwrap();
    out = rotate(&home);
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    // The twin's run (retired key, never named here) dropped into this home: caught by
    // verification, and rebuild refuses to record it.
    copy_dir(
        &twin.join("runs").join(&stranded),
        &home.join("runs").join(&stranded),
    );
    let out = verify_home(&home, &home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let out = craik()
        .args(["ledger", "rebuild", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    let text = transcript(&out);
    assert!(
        text.contains(&stranded) && text.contains("signed by a retired key"),
        "{text}"
    );
    assert!(
        !ledger_entries(&home)
            .iter()
            .any(|e| e["target"] == Value::String(stranded.clone())),
        "rebuild recorded a retired key's journal"
    );
}

/// Round 7 (R7-7): `ledger rebuild` records a journal only where its signed id says it lives:
/// a review journal copied under another approval id (or a run's under another run id) is
/// refused, naming it, and never recorded.
#[test]
fn issue_18_round_7_rebuild_refuses_a_journal_under_another_name() {
    let dir = tempfile::tempdir().unwrap();
    let (home, first, _, approval) = home_with_review(dir.path());
    let fake_review = format!("{approval}x");
    copy_dir(
        &home.join("reviews").join(&approval),
        &home.join("reviews").join(&fake_review),
    );
    let fake_run = format!("{first}x");
    copy_dir(
        &home.join("runs").join(&first),
        &home.join("runs").join(&fake_run),
    );
    let out = craik()
        .args(["ledger", "rebuild", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    let text = transcript(&out);
    for fake in [&fake_review, &fake_run] {
        assert!(
            text.lines()
                .any(|l| l.contains(fake.as_str()) && l.contains("does not name this directory")),
            "{fake}: {text}"
        );
        assert!(
            !ledger_entries(&home)
                .iter()
                .any(|e| e["target"] == Value::String(fake.clone())),
            "{fake} recorded: {text}"
        );
    }
}

/// Issue 31 item 1: a completed run's directory put back as it was while parked (its
/// approval file still `approved`: a restore from backup, a sync conflict — no key needed) is
/// never continued: the ledger records the run closed at another root, so `runs resume`,
/// `recover`, `cancel` and `approvals … --resume` refuse, sign nothing, and the approved
/// action is not performed a second time.
#[test]
fn issue_31_a_run_put_back_from_an_earlier_copy_is_never_continued() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6, "{text}");
    let approval = crate::runs::pending_approval(&home);
    let ok = crate::runs::approve(&home, &approval, "user:alice");
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    // The copy an attacker (or a backup) keeps: the run parked, its approval approved.
    let run_dir = home.join("runs").join(&id);
    let saved = dir.path().join("saved");
    // (the run's approvals, `approved` now, live in its directory)
    crate::policy::copy_dir(&run_dir, &saved.join("run"));
    let done = crate::runs::resume(&home, &id);
    assert_eq!(done.status.code(), Some(0), "{}", transcript(&done));
    let performed = |home: &Path| {
        receipts(home, &id)
            .iter()
            .filter(|r| {
                r["decided_by"]["kind"] == "approval" && r["capability"] != "approval.review"
            })
            .count()
    };
    assert_eq!(performed(&home), 1);
    // Put back.
    std::fs::remove_dir_all(&run_dir).unwrap();
    crate::policy::copy_dir(&saved.join("run"), &run_dir);
    let journal = || std::fs::read(run_dir.join("receipts.jsonl")).unwrap();
    let restored = journal();
    for args in [
        vec!["runs", "resume", id.as_str(), "--by", "user:op"],
        vec!["runs", "recover", id.as_str(), "--by", "user:op"],
        vec!["runs", "cancel", id.as_str(), "--by", "user:op"],
        vec![
            "approvals",
            "approve",
            approval.as_str(),
            "--by",
            "user:alice",
            "--reason",
            "x",
            "--resume",
        ],
    ] {
        let out = craik()
            .args(&args)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("the home ledger records this run closed")
                || (args[0] == "approvals" && err.contains("already")),
            "{args:?}: {}",
            transcript(&out)
        );
        assert_eq!(journal(), restored, "{args:?}: nothing signed");
    }
    // The home audit still catches the put-back journal.
    let check = verify_home(&home, &home);
    assert_ne!(check.status.code(), Some(0), "{}", transcript(&check));
    // So do the per-run commands: they consult the home's ledger and say so.
    for args in [vec!["receipts", "verify", "--allow-open"], vec!["audit"]] {
        let out = craik().args(&args).arg(&run_dir).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", transcript(&out));
        if args[0] == "receipts" {
            assert!(
                String::from_utf8_lossy(&out.stderr).contains("checked against the home ledger"),
                "{}",
                transcript(&out)
            );
        }
    }
}

/// Issue 31 item 2: a second `keys rotate` killed between the new private key and its public
/// half (or with a torn private key, or with both halves but before the ledger entry) left a
/// `next/` the next rotation took the current key for — and moved the unrecorded key over it,
/// so every later run refused the home. Now the unrecorded pair is discarded, never moved;
/// the current key stays; the rotation goes on; the home verifies and runs.
#[test]
fn issue_31_a_killed_second_rotation_never_replaces_the_current_key() {
    let pem = |dir: &Path| {
        let out = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "ed25519", "-out"])
            .arg(dir.join("signing.key.pem"))
            .output()
            .expect("openssl is needed for this test");
        assert!(out.status.success(), "{}", transcript(&out));
    };
    for state in [
        "empty",
        "private only",
        "torn private",
        "both halves, not recorded",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
        assert_eq!(exit, 0);
        let out = rotate(&home);
        assert_eq!(out.status.code(), Some(0), "{state}: {}", transcript(&out));
        let current = std::fs::read(home.join("keys/signing.key.pem")).unwrap();
        // The second rotation, killed.
        let next = home.join("keys/next");
        std::fs::create_dir(&next).unwrap();
        // "empty": killed right after making `next/` (outside testing round 17 N4).
        if state != "empty" {
            pem(&next);
        }
        match state {
            "torn private" => {
                let bytes = std::fs::read(next.join("signing.key.pem")).unwrap();
                std::fs::write(next.join("signing.key.pem"), &bytes[..bytes.len() / 2]).unwrap();
            }
            "both halves, not recorded" => {
                let out = std::process::Command::new("openssl")
                    .args(["pkey", "-pubout", "-in"])
                    .arg(next.join("signing.key.pem"))
                    .arg("-out")
                    .arg(next.join("signing.pub.pem"))
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{}", transcript(&out));
            }
            _ => {}
        }
        let out = rotate(&home);
        assert_eq!(out.status.code(), Some(0), "{state}: {}", transcript(&out));
        assert!(!next.exists(), "{state}: next/ left");
        // The key the home held is retired by a recorded rotation, never overwritten blind.
        let rotations = ledger_entries(&home)
            .iter()
            .filter(|e| e["capability"] == "ledger.key_rotated")
            .count();
        assert_eq!(rotations, 2, "{state}");
        assert_ne!(
            std::fs::read(home.join("keys/signing.key.pem")).unwrap(),
            current,
            "{state}: rotated"
        );
        let (exit, _, text) = run_example(&home, &example("docs-review"), &[]);
        assert_eq!(exit, 0, "{state}: {text}");
        let ok = verify_home(&home, &home);
        assert_eq!(ok.status.code(), Some(0), "{state}: {}", transcript(&ok));
    }
}

/// Issue 31 item 6: first runs on a fresh home race on key generation — each completes, one
/// key is made and the home verifies; a temporary key file a killed generation left is
/// removed.
#[test]
fn issue_31_first_runs_racing_on_a_fresh_home_share_one_key() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    // What a generation killed before its rename leaves behind.
    std::fs::create_dir_all(home.join("keys")).unwrap();
    std::fs::write(home.join("keys/signing.key.tmp-99999"), b"-----BEGIN PRIV").unwrap();
    let runs: Vec<std::process::Child> = (0..4)
        .map(|_| {
            std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"))
                .arg("run")
                .arg(example("docs-review"))
                .arg("--home")
                .arg(&home)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in runs {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    }
    assert!(!home.join("keys/signing.key.tmp-99999").exists());
    let added = ledger_entries(&home)
        .iter()
        .filter(|e| e["capability"] == "ledger.key_added")
        .count();
    assert_eq!(added, 1, "one key");
    let ok = verify_home(&home, &home);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
}

/// Issue 31 items 2 and 6: an approval's signed review decides. Two reviewers at once: one
/// decides, the other is told who did (exit 1, not a raw `File exists`). A decision killed
/// after its review journal was written (the approval file still `pending`), or before it
/// got its bytes (an empty review directory): running the command again finishes it; the
/// other decision is refused naming the reviewer; the run then resumes once.
#[test]
fn issue_31_an_approvals_signed_review_decides_races_and_kills() {
    for case in [
        "race",
        "killed after the review",
        "killed before the review",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(&home, &example("approval"), &[]);
        assert_eq!(exit, 6, "{case}: {text}");
        let approval = crate::runs::pending_approval(&home);
        let file = home
            .join("runs")
            .join(&id)
            .join("approvals")
            .join(format!("{approval}.json"));
        match case {
            "race" => {
                let spawn = |by: &str| {
                    std::process::Command::new(assert_cmd::cargo::cargo_bin("craik"))
                        .args([
                            "approvals",
                            "approve",
                            &approval,
                            "--by",
                            by,
                            "--reason",
                            "ok",
                            "--home",
                        ])
                        .arg(&home)
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .unwrap()
                };
                let (a, b) = (spawn("user:alice"), spawn("user:bob"));
                let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
                let won = outs.iter().filter(|o| o.status.code() == Some(0)).count();
                assert_eq!(won, 1, "{}\n{}", transcript(&outs[0]), transcript(&outs[1]));
                let lost = outs.iter().find(|o| o.status.code() != Some(0)).unwrap();
                assert_eq!(lost.status.code(), Some(1), "{}", transcript(lost));
                assert!(
                    String::from_utf8_lossy(&lost.stderr).contains("is already approved by user:"),
                    "{}",
                    transcript(lost)
                );
            }
            "killed after the review" => {
                let pending = std::fs::read(&file).unwrap();
                let ok = crate::runs::approve(&home, &approval, "user:alice");
                assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
                std::fs::write(&file, &pending).unwrap();
                let deny = crate::runs::review(&home, "deny", &approval, "user:bob", &[]);
                assert_eq!(deny.status.code(), Some(1), "{}", transcript(&deny));
                assert!(
                    String::from_utf8_lossy(&deny.stderr)
                        .contains("already approved by user:alice"),
                    "{}",
                    transcript(&deny)
                );
                let again = crate::runs::approve(&home, &approval, "user:alice");
                assert_eq!(again.status.code(), Some(0), "{}", transcript(&again));
            }
            _ => {
                std::fs::create_dir_all(home.join("reviews").join(&approval)).unwrap();
                std::fs::write(
                    home.join("reviews").join(&approval).join("receipts.jsonl"),
                    b"",
                )
                .unwrap();
                let ok = crate::runs::approve(&home, &approval, "user:alice");
                assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
            }
        }
        let record: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(record["status"], "approved", "{case}");
        let done = crate::runs::resume(&home, &id);
        assert_eq!(done.status.code(), Some(0), "{case}: {}", transcript(&done));
        let performed = receipts(&home, &id)
            .iter()
            .filter(|r| {
                r["decided_by"]["kind"] == "approval" && r["capability"] != "approval.review"
            })
            .count();
        assert_eq!(performed, 1, "{case}");
        let ok = verify_home(&home, &home);
        assert_eq!(ok.status.code(), Some(0), "{case}: {}", transcript(&ok));
    }
}

/// Issue 31 item 4: the ledger's last entry needs its checkpoint — one cut off (the last
/// line removed) no longer verifies.
#[test]
fn issue_31_the_ledgers_last_entry_needs_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let path = home.join("ledger.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines[..lines.len() - 1].join("\n") + "\n";
    std::fs::write(&path, cut).unwrap();
    let out = verify_home(&home, &home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("has no checkpoint after it"),
        "{}",
        transcript(&out)
    );
}

/// Issue 31 item 1: a terminal status and reason come only from signed receipts. An ending
/// added to a parked run's events.jsonl (no key needed) is not believed: `runs recover` keeps
/// the run parked and `runs cancel` signs its own ending — neither signs the forged one.
#[test]
fn issue_31_an_ending_written_into_events_is_never_signed() {
    for verb in ["recover", "cancel"] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(&home, &example("approval"), &[]);
        assert_eq!(exit, 6, "{text}");
        let events = home.join("runs").join(&id).join("events.jsonl");
        let body = std::fs::read_to_string(&events).unwrap();
        let last: Value = serde_json::from_str(body.lines().last().unwrap()).unwrap();
        let forged = serde_json::json!({"event":"halted","at":last["at"],"status":"failed",
            "reason":"FORGED-REASON chosen by whoever could write the file"});
        std::fs::write(&events, format!("{body}{forged}\n")).unwrap();
        let out = craik()
            .args(["runs", verb, &id, "--by", "user:op", "--home"])
            .arg(&home)
            .output()
            .unwrap();
        let all = receipts(&home, &id);
        assert!(
            all.iter().all(|r| !r.to_string().contains("FORGED-REASON")),
            "{verb}: the forged ending was signed: {}",
            transcript(&out)
        );
        let closed: Vec<&Value> = all
            .iter()
            .filter(|r| r["capability"] == "run.closed")
            .collect();
        match verb {
            "recover" => {
                assert_eq!(out.status.code(), Some(6), "{}", transcript(&out));
                assert!(closed.is_empty(), "still parked");
                assert!(
                    String::from_utf8_lossy(&out.stdout).contains("not believed"),
                    "{}",
                    transcript(&out)
                );
            }
            _ => {
                assert_eq!(closed.len(), 1, "{}", transcript(&out));
                assert_eq!(closed[0]["result"]["metadata"]["status"], "interrupted");
            }
        }
    }
}

/// Outside testing round 13: a completed run put back to its parked copy together with a
/// ledger deleted, emptied or cut to before the run's decision is not continued either (the
/// journal is past its first receipt, or the consumed review is newer than the ledger); and
/// `receipts verify RUN` fails when its home's ledger is gone.
#[test]
fn issue_31_a_run_put_back_with_its_ledger_removed_or_cut_is_never_continued() {
    for mode in ["delete", "empty", "cut"] {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let (exit, id, text) = run_example(&home, &example("approval"), &[]);
        assert_eq!(exit, 6, "{mode}: {text}");
        let ledger = home.join("ledger.jsonl");
        let parked_ledger = std::fs::read(&ledger).unwrap();
        let approval = crate::runs::pending_approval(&home);
        let ok = crate::runs::approve(&home, &approval, "user:alice");
        assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
        let run_dir = home.join("runs").join(&id);
        let saved = dir.path().join("saved");
        crate::policy::copy_dir(&run_dir, &saved);
        let done = crate::runs::resume(&home, &id);
        assert_eq!(done.status.code(), Some(0), "{}", transcript(&done));
        std::fs::remove_dir_all(&run_dir).unwrap();
        crate::policy::copy_dir(&saved, &run_dir);
        let _ = std::fs::remove_file(home.join("ledger.head"));
        match mode {
            "delete" => std::fs::remove_file(&ledger).unwrap(),
            "empty" => std::fs::write(&ledger, b"").unwrap(),
            // The ledger as it was while the run was parked: it names the run's start.
            _ => std::fs::write(&ledger, &parked_ledger).unwrap(),
        }
        let journal = std::fs::read(run_dir.join("receipts.jsonl")).unwrap();
        let again = crate::runs::resume(&home, &id);
        assert_ne!(
            again.status.code(),
            Some(0),
            "{mode}: {}",
            transcript(&again)
        );
        assert_eq!(
            std::fs::read(run_dir.join("receipts.jsonl")).unwrap(),
            journal,
            "{mode}: nothing signed"
        );
        let verify = craik()
            .args(["receipts", "verify", "--allow-open"])
            .arg(&run_dir)
            .output()
            .unwrap();
        if mode != "cut" {
            assert_eq!(
                verify.status.code(),
                Some(1),
                "{mode}: {}",
                transcript(&verify)
            );
        }
    }
}

/// Outside testing round 13: a `memory approve` killed after its review journal was written
/// (the proposal file still `pending`) is finished by running it again; another decision is
/// refused naming the reviewer.
#[test]
fn issue_31_a_killed_memory_review_is_finished_by_running_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let list: Value = crate::runs::json_out(&home, &["memory", "list"]);
    let id = list[0]["id"].as_str().unwrap().to_owned();
    let file = home.join("memory").join(format!("{id}.json"));
    let pending = std::fs::read(&file).unwrap();
    let decide = |verb: &str, by: &str| {
        craik()
            .args([
                "memory", verb, &id, "--by", by, "--reason", "checked", "--home",
            ])
            .arg(&home)
            .output()
            .unwrap()
    };
    let ok = decide("approve", "user:rev");
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    std::fs::write(&file, &pending).unwrap();
    let again = decide("approve", "user:rev");
    assert_eq!(again.status.code(), Some(0), "{}", transcript(&again));
    // And with the file put back once more, another decision is refused naming the reviewer.
    std::fs::write(&file, &pending).unwrap();
    let other = decide("reject", "user:other");
    assert_eq!(other.status.code(), Some(1), "{}", transcript(&other));
    assert!(String::from_utf8_lossy(&other.stderr).contains("already approved by user:rev"));
    let record: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(record["status"], "approved");
    let ok = verify_home(&home, &home);
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
}

/// The approval example with a second act step that needs its own approval: the run parks
/// twice (approval A, then B).
fn two_approvals(dir: &Path) -> PathBuf {
    let ex = dir.join("two-approvals");
    copy_dir(&example("approval"), &ex);
    let path = ex.join("scenario.json");
    let mut scenario: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let steps = scenario["steps"].as_array_mut().unwrap();
    let last = steps.last_mut().unwrap();
    assert_eq!(last["next"], "stop", "{last}");
    last["next"] = "continue".into();
    steps.extend(serde_json::from_value::<Vec<Value>>(serde_json::json!([
        {"phase": "plan", "summary": "notes"},
        {"phase": "act", "summary": "Writing notes.", "proposed_actions": [
            {"id": "action_notes", "capability": "repo.write.docs", "operation": "write",
             "target": "docs/notes.md", "content": "notes\n", "reason": "a second approved write"}
        ]},
        {"phase": "observe", "summary": "ok"},
        {"phase": "evaluate", "summary": "Done.", "next": "stop"}
    ])).unwrap());
    std::fs::write(&path, serde_json::to_vec_pretty(&scenario).unwrap()).unwrap();
    ex
}

/// Outside testing round 13 (F1): a run that parks twice. After approval A was used (its write
/// performed, the run parked again for B), the run directory alone is put back as it was
/// between `approvals approve A` and `runs resume` — ledger, head and reviews untouched. The
/// ledger recorded the journal at every point the host acted from (the park, the approval
/// consumed), so the copy is refused: nothing signed, the write not performed again, and
/// `receipts verify HOME --allow-open` names the run.
#[test]
fn issue_31_an_open_run_put_back_from_a_copy_never_uses_an_approval_twice() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &two_approvals(dir.path()), &[]);
    assert_eq!(exit, 6, "{text}");
    let a = pending_approval(&home);
    let ok = approve(&home, &a, "user:alice");
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    let run_dir = home.join("runs").join(&id);
    let saved = dir.path().join("saved");
    copy_dir(&run_dir, &saved);
    let parked_again = resume(&home, &id);
    assert_eq!(
        parked_again.status.code(),
        Some(6),
        "{}",
        transcript(&parked_again)
    );
    let status =
        || std::fs::read_to_string(run_dir.join("workspace/docs/status.md")).unwrap_or_default();
    assert!(status().contains("Status: current"), "{}", status());
    let points = ledger_entries(&home)
        .into_iter()
        .filter(|e| e["capability"] == "ledger.run_checkpoint" && e["target"] == id.as_str())
        .map(|e| e["result"]["metadata"]["why"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    // The write approved starts at the point its approval was used: recorded too, naming it.
    assert_eq!(points, ["parked", "approval_used", "executing", "parked"]);
    let valid = verify_home_with(&home, &["--allow-open"]);
    assert_eq!(valid.status.code(), Some(0), "{}", transcript(&valid));
    // Put back: the run directory only.
    std::fs::remove_dir_all(&run_dir).unwrap();
    copy_dir(&saved, &run_dir);
    let journal = || std::fs::read(run_dir.join("receipts.jsonl")).unwrap();
    let restored = journal();
    for args in [
        vec!["runs", "resume", id.as_str(), "--by", "user:op"],
        vec!["runs", "recover", id.as_str(), "--by", "user:op"],
        vec!["runs", "cancel", id.as_str(), "--by", "user:op"],
    ] {
        let out = craik()
            .args(&args)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", transcript(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("the home ledger records this run's journal at")
                && err.contains("put back from an earlier copy"),
            "{args:?}: {}",
            transcript(&out)
        );
        assert_eq!(journal(), restored, "{args:?}: nothing signed");
        assert!(
            status().contains("Status: stale"),
            "{args:?}: performed again"
        );
    }
    let check = verify_home_with(&home, &["--allow-open"]);
    assert_eq!(check.status.code(), Some(1), "{}", transcript(&check));
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(
        out.contains(&id) && out.contains("put back from an earlier copy"),
        "{out}"
    );
}

/// `craik receipts verify HOME --key HOME/keys/signing.pub.pem ARGS…`.
fn verify_home_with(home: &Path, args: &[&str]) -> Output {
    craik()
        .args(["receipts", "verify"])
        .arg(home)
        .arg("--key")
        .arg(home.join("keys/signing.pub.pem"))
        .args(args)
        .output()
        .unwrap()
}

/// Outside testing round 13 (F2, F7, O1): a ledger deleted or emptied in a home that holds
/// journals is never replaced by a new one the host makes up — not by a resume, not by a new
/// run — and an empty ledger means what a missing one means to `verify HOME` and `rebuild`.
#[test]
fn issue_31_a_deleted_or_emptied_ledger_is_not_replaced_by_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, text) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0, "{text}");
    let ledger = home.join("ledger.jsonl");
    for emptied in [false, true] {
        if emptied {
            std::fs::write(&ledger, b"").unwrap();
        } else {
            std::fs::remove_file(&ledger).unwrap();
        }
        let out = craik()
            .arg("run")
            .arg(example("docs-review"))
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(3),
            "emptied {emptied}: {}",
            transcript(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("deleted or emptied") && err.contains("craik ledger rebuild"),
            "emptied {emptied}: {err}"
        );
        assert_eq!(
            std::fs::read_dir(home.join("runs")).unwrap().count(),
            1,
            "emptied {emptied}: a run directory was made"
        );
        assert_eq!(
            std::fs::metadata(&ledger).map(|m| m.len()).unwrap_or(0),
            0,
            "emptied {emptied}: a new ledger was started"
        );
        let check = verify_home_for(&home);
        assert_eq!(check.status.code(), Some(1), "{}", transcript(&check));
        assert!(
            String::from_utf8_lossy(&check.stdout).contains("missing or empty"),
            "{}",
            transcript(&check)
        );
    }
    // `ledger rebuild` takes an empty ledger for a missing one.
    let out = craik()
        .args(["ledger", "rebuild", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    let check = verify_home_for(&home);
    assert_eq!(
        check.status.code(),
        Some(0),
        "{}\n{}",
        transcript(&out),
        transcript(&check)
    );
}

/// Outside testing round 13 (F4): `receipts verify HOME` polled while runs append reported
/// healthy moments INVALID — a journal closed whose `ledger.run_closed` is one append away.
/// A problem about a journal whose run a live process drives is checked again for a short
/// while: here the driver (this test, holding the run's lock) records the close 300 ms after
/// the verification starts, and it passes. A problem that persists is still reported.
#[test]
fn issue_31_verifying_a_home_mid_append_waits_for_a_consistent_point() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0, "{text}");
    let ledger = home.join("ledger.jsonl");
    let whole = std::fs::read(&ledger).unwrap();
    assert_eq!(
        ledger_entries(&home)
            .last()
            .map(|e| e["capability"].clone()),
        Some(serde_json::json!("ledger.run_closed"))
    );
    // The moment between the journal's final checkpoint and the ledger's close entry (the
    // close entry and its checkpoint are the last two lines).
    let text = String::from_utf8(whole.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines[..lines.len() - 2].join("\n") + "\n";
    std::fs::write(&ledger, &cut).unwrap();
    let _ = std::fs::remove_file(home.join("ledger.head"));
    let lock_path = home.join("runs").join(&id).join("lock");
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&lock_path)
        .unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let driver = {
        let (ledger, whole) = (ledger.clone(), whole.clone());
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            std::fs::write(&ledger, &whole).unwrap();
            drop(lock);
        })
    };
    let started = std::time::Instant::now();
    let out = verify_home_for(&home);
    driver.join().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    // Nobody records it: once no process drives the run, the problem is reported.
    std::fs::write(&ledger, &cut).unwrap();
    let out = verify_home_for(&home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    assert!(
        stdout(&out).contains("records no close"),
        "{}",
        transcript(&out)
    );
}

/// Outside testing round 13 (O2): the reason of a park shown and saved by `runs recover` is
/// the one the `run.parked` receipt signs, never an edited `parked` event's.
#[test]
fn issue_31_a_parked_runs_reason_comes_from_its_receipt_not_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6, "{text}");
    let events = home.join("runs").join(&id).join("events.jsonl");
    let edited = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|l| {
            let mut e: Value = serde_json::from_str(l).unwrap();
            if e["event"] == "parked" {
                e["reason"] = "ATTACKER-CHOSEN REASON".into();
            }
            serde_json::to_string(&e).unwrap() + "\n"
        })
        .collect::<String>();
    assert!(edited.contains("ATTACKER-CHOSEN"), "{edited}");
    std::fs::write(&events, edited).unwrap();
    let out = craik()
        .args(["runs", "recover", &id, "--by", "user:op", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    let shown = transcript(&out);
    assert!(!shown.contains("ATTACKER-CHOSEN"), "{shown}");
    assert!(shown.contains("awaiting approval"), "{shown}");
    let state = std::fs::read_to_string(home.join("runs").join(&id).join("run.json")).unwrap();
    assert!(!state.contains("ATTACKER-CHOSEN"), "{state}");
}

/// Outside testing round 14 (N0): a human's denial the ledger records is final. Its review
/// journal deleted and the approval file put back to `pending`, a new decision is refused
/// (approve, with or without `--resume`), nothing is signed, the denied write never runs.
#[test]
fn issue_31_a_recorded_denial_is_never_decided_again() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6, "{text}");
    let a = pending_approval(&home);
    let file = home
        .join("runs")
        .join(&id)
        .join("approvals")
        .join(format!("{a}.json"));
    let pending = std::fs::read(&file).unwrap();
    let denied = crate::runs::review(&home, "deny", &a, "user:alice", &[]);
    assert_eq!(denied.status.code(), Some(0), "{}", transcript(&denied));
    std::fs::write(&file, &pending).unwrap();
    std::fs::remove_dir_all(home.join("reviews").join(&a)).unwrap();
    let journal = || std::fs::read(home.join("runs").join(&id).join("receipts.jsonl")).unwrap();
    let before = journal();
    for extra in [&[][..], &["--resume"][..]] {
        let out = crate::runs::review(&home, "approve", &a, "user:mallory", extra);
        assert_ne!(
            out.status.code(),
            Some(0),
            "{extra:?}: {}",
            transcript(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("records a decision of it already"),
            "{extra:?}: {}",
            transcript(&out)
        );
        assert!(
            !home.join("reviews").join(&a).exists(),
            "{extra:?}: a review was written"
        );
        assert_eq!(journal(), before, "{extra:?}: signed");
    }
    let status = crate::runs::workspace_text(&home, &id, "docs/status.md");
    assert!(status.contains("Status: stale"), "{status}");
}

/// Outside testing round 14 (N1): a run directory copied under another name is never driven:
/// its receipts are signed for the run its original directory names.
#[test]
fn issue_31_a_forked_run_directory_is_never_driven() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6, "{text}");
    let a = pending_approval(&home);
    assert_eq!(approve(&home, &a, "user:alice").status.code(), Some(0));
    let fork = format!("{id}x");
    copy_dir(&home.join("runs").join(&id), &home.join("runs").join(&fork));
    for args in [
        vec!["runs", "resume", fork.as_str(), "--by", "user:op"],
        vec!["runs", "recover", fork.as_str(), "--by", "user:op"],
        vec!["runs", "cancel", fork.as_str(), "--by", "user:op"],
    ] {
        let out = craik()
            .args(&args)
            .arg("--home")
            .arg(&home)
            .output()
            .unwrap();
        assert_ne!(out.status.code(), Some(0), "{args:?}: {}", transcript(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("signed for run"),
            "{args:?}: {}",
            transcript(&out)
        );
    }
    // While the copy sits in the home, the ledger does not name it: nothing is continued.
    let out = resume(&home, &id);
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    std::fs::remove_dir_all(home.join("runs").join(&fork)).unwrap();
    let done = resume(&home, &id);
    assert_eq!(done.status.code(), Some(0), "{}", transcript(&done));
}

/// Outside testing round 14 (N2): a run killed after its side effects started, its journal
/// cut back to its first receipt and its events emptied, is never continued: the ledger
/// recorded the journal before each side effect.
#[test]
fn issue_31_a_killed_run_cut_back_never_repeats_its_side_effects() {
    let mut tried = 0;
    for n in (20..200u64).step_by(7) {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        if !crate::crash::run_and_kill(&example("docs-review"), &home, n) {
            break;
        }
        let Some(id) = std::fs::read_dir(home.join("runs"))
            .ok()
            .and_then(|mut d| d.next())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        else {
            continue;
        };
        let run = home.join("runs").join(&id);
        let journal = std::fs::read_to_string(run.join("receipts.jsonl")).unwrap_or_default();
        // A kill after a side effect started, before the close: the ledger holds an
        // `executing` point and no close.
        let entries = if home.join("ledger.jsonl").is_file() {
            ledger_entries(&home)
        } else {
            Vec::new()
        };
        if !entries.iter().any(|e| {
            e["capability"] == "ledger.run_checkpoint"
                && e["result"]["metadata"]["why"] == "executing"
        }) || entries
            .iter()
            .any(|e| e["capability"] == "ledger.run_closed")
        {
            continue;
        }
        tried += 1;
        let first = journal.lines().next().unwrap().to_owned() + "\n";
        std::fs::write(run.join("receipts.jsonl"), &first).unwrap();
        std::fs::write(run.join("events.jsonl"), b"").unwrap();
        std::fs::write(run.join("outputs.jsonl"), b"").unwrap();
        let out = resume(&home, &id);
        assert_ne!(out.status.code(), Some(0), "{n}: {}", transcript(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("records this run's journal at"),
            "{n}: {}",
            transcript(&out)
        );
        assert_eq!(
            std::fs::read_to_string(run.join("receipts.jsonl")).unwrap(),
            first,
            "{n}: signed"
        );
        if tried >= 3 {
            break;
        }
    }
    assert!(tried > 0, "no kill point after a side effect started");
}

/// Outside testing round 14 (N3, N4): an older ledger put back with a run directory, while a
/// newer journal of the home sits beside it, is refused before anything is signed; so is a
/// journal cut to its first receipt whose events name outcomes no receipt signs.
#[test]
fn issue_31_an_older_ledger_or_a_cut_journal_is_never_continued() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, r1, text) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6, "{text}");
    let a = pending_approval(&home);
    assert_eq!(approve(&home, &a, "user:alice").status.code(), Some(0));
    let saved = dir.path().join("saved");
    copy_dir(&home.join("runs").join(&r1), &saved.join("run"));
    let old_ledger = std::fs::read(home.join("ledger.jsonl")).unwrap();
    assert_eq!(resume(&home, &r1).status.code(), Some(0));
    let (exit, _, text) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0, "{text}");
    std::fs::remove_dir_all(home.join("runs").join(&r1)).unwrap();
    copy_dir(&saved.join("run"), &home.join("runs").join(&r1));
    std::fs::write(home.join("ledger.jsonl"), &old_ledger).unwrap();
    let _ = std::fs::remove_file(home.join("ledger.head"));
    let journal = || std::fs::read(home.join("runs").join(&r1).join("receipts.jsonl")).unwrap();
    let before = journal();
    let out = resume(&home, &r1);
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the home ledger does not name"),
        "{}",
        transcript(&out)
    );
    assert_eq!(journal(), before, "signed");

    // N4: a completed run's journal cut to its first receipt, the ledger cut before its
    // start: its events name outcomes whose receipts are gone.
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, r1, text) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0, "{text}");
    let lines: Vec<String> = std::fs::read_to_string(home.join("ledger.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    // key_added + checkpoint: the ledger before the run's start.
    std::fs::write(home.join("ledger.jsonl"), lines[..2].join("\n") + "\n").unwrap();
    let _ = std::fs::remove_file(home.join("ledger.head"));
    let run = home.join("runs").join(&r1);
    let first = std::fs::read_to_string(run.join("receipts.jsonl"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned()
        + "\n";
    std::fs::write(run.join("receipts.jsonl"), &first).unwrap();
    let out = resume(&home, &r1);
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    // Caught by the handoff it left (outside testing round 17b M4), else by its events.
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("which only a run past its start writes")
            || said.contains("which is not its signed outcome"),
        "{}",
        transcript(&out)
    );
    assert_eq!(
        std::fs::read_to_string(run.join("receipts.jsonl")).unwrap(),
        first,
        "signed"
    );
}

/// Issue 31 item 4: a run entered into the ledger by `craik ledger rebuild` is marked wherever
/// it is shown — `receipts verify` (HOME and the run alone, human and JSON), `audit RUN` and
/// `audit HOME` (human, JSON, HTML) — and a run the ledger recorded as it happened is not.
#[test]
fn issue_31_runs_entered_by_ledger_rebuild_are_marked_where_shown() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, old, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    // A home from before the ledger: rebuilt, then a run recorded as it happens.
    std::fs::remove_file(home.join("ledger.jsonl")).unwrap();
    let _ = std::fs::remove_file(home.join("ledger.head"));
    let out = craik()
        .args(["ledger", "rebuild", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let (exit, new, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let mark = "entered into the ledger by `craik ledger rebuild` (rebuilt)";
    let line_of = |text: &str, id: &str| {
        text.lines()
            .find(|l| l.contains(&format!("runs/{id}/")) && l.contains("valid"))
            .unwrap_or_else(|| panic!("no line for {id}:\n{text}"))
            .to_owned()
    };
    let v = verify_home(&home, &home);
    assert_eq!(v.status.code(), Some(0), "{}", transcript(&v));
    assert!(line_of(&stdout(&v), &old).contains(mark), "{}", stdout(&v));
    assert!(
        !line_of(&stdout(&v), &new).contains("rebuilt"),
        "{}",
        stdout(&v)
    );
    let alone = |id: &str| {
        craik()
            .args(["receipts", "verify", "--format", "json"])
            .arg(home.join("runs").join(id))
            .output()
            .unwrap()
    };
    let r: Value = serde_json::from_slice(&alone(&old).stdout).unwrap();
    assert_eq!(r[0]["rebuilt"], true, "{r}");
    let r: Value = serde_json::from_slice(&alone(&new).stdout).unwrap();
    assert!(r[0].get("rebuilt").is_none(), "{r}");

    let audit = |target: &Path, extra: &[&str]| {
        let out = craik()
            .arg("audit")
            .arg(target)
            .arg("--home")
            .arg(&home)
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
        stdout(&out)
    };
    let marked = "entered by `craik ledger rebuild` (rebuilt)";
    assert!(audit(&home.join("runs").join(&old), &[]).contains(marked));
    assert!(!audit(&home.join("runs").join(&new), &[]).contains(marked));
    let text = audit(&home, &[]);
    let sections: Vec<&str> = text.split("audit of ").collect();
    let section = |id: &str| {
        sections
            .iter()
            .find(|s| s.contains(&format!("runs/{id}/")))
            .unwrap()
            .to_owned()
    };
    assert!(section(&old).contains(marked), "{text}");
    assert!(!section(&new).contains(marked), "{text}");
    let json: Value = serde_json::from_str(&audit(&home, &["--format", "json"])).unwrap();
    let by_id = |id: &str| {
        json["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["run_id"] == id)
            .unwrap()["rebuilt"]
            .clone()
    };
    assert_eq!(
        (by_id(&old), by_id(&new)),
        (Value::Bool(true), Value::Bool(false))
    );
    let page = dir.path().join("report.html");
    audit(&home, &["--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html.matches("<span class=\"badge\">rebuilt</span>").count(),
        1
    );
}

/// Issue 31 item 5: a `ledger.run_closed` entry whose signed `status` is not the journal's
/// closing receipt's is invalid, as a size or root that differs is. Here the holder of the
/// home's key re-signs the whole ledger with the run recorded `failed` (every chain hash,
/// checkpoint and signature made anew, so the ledger itself verifies): `receipts verify HOME`
/// and `audit HOME` name the run's journal and both statuses.
#[test]
fn issue_31_a_run_closed_status_other_than_the_closing_receipts_is_invalid() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    assert_eq!(verify_home(&home, &home).status.code(), Some(0));
    let script = r#"
import base64, hashlib, json, sys
sys.path.insert(0, sys.argv[1])
import independent_verifier as v
from cryptography.hazmat.primitives import serialization
key = serialization.load_pem_private_key(open(sys.argv[2], "rb").read(), password=None)
ledger = sys.argv[3]
lines = open(ledger, "rb").read().split(b"\n")[:-1]
def sign(ptype, payload):
    env = json.loads(lines[0])
    pae = b"DSSEv1 %d %s %d " % (len(ptype), ptype.encode(), len(payload)) + payload
    sig = base64.b64encode(key.sign(pae)).decode()
    return json.dumps({"payloadType": ptype, "payload": base64.b64encode(payload).decode(),
                       "signatures": [{"keyid": env["signatures"][0]["keyid"], "sig": sig}]},
                      separators=(",", ":")).encode()
out, prev, leaves = [], None, []
for raw in lines:
    env = json.loads(raw)
    body = json.loads(base64.b64decode(env["payload"]))
    if env["payloadType"] == v.RECEIPT:
        if body["capability"] == "ledger.run_closed":
            body["result"]["metadata"]["status"] = "failed"
        body["prev"] = prev
        payload = v.canonical(body).encode()
        prev = "sha256:" + hashlib.sha256(payload).hexdigest()
        leaves.append(v.leaf(hashlib.sha256(payload).digest()))
    else:
        body["tree_size"] = len(leaves)
        body["root_hash"] = "sha256:" + v.root(leaves).hex()
        body["last_receipt_hash"] = prev
        payload = v.canonical(body).encode()
    out.append(sign(env["payloadType"], payload))
open(ledger, "wb").write(b"\n".join(out) + b"\n")
"#;
    let py = std::process::Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(crate::repo_root().join("cli/tests"))
        .arg(home.join("keys/signing.key.pem"))
        .arg(home.join("ledger.jsonl"))
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", transcript(&py));
    let journal = format!("runs/{id}/receipts.jsonl");
    for (name, out) in [
        ("verify", verify_home(&home, &home)),
        ("audit", audit_home(&home, &home)),
    ] {
        assert_eq!(out.status.code(), Some(1), "{name}: {}", transcript(&out));
        let text = stdout(&out);
        assert!(
            text.lines().any(|l| l.contains(&journal)
                && l.contains("status")
                && l.contains("records it closed `failed`")
                && l.contains("its closing receipt signs `completed`")),
            "{name}: {text}"
        );
    }
    // The ledger itself verifies: only the status differs.
    assert!(
        stdout(&verify_home(&home, &home)).contains("ledger.jsonl: valid"),
        "the re-signed ledger verifies"
    );
}

/// Issue 31 item 5 (the stale "cannot catch" sentence): a memory proposal reset to `pending`
/// with its review journal deleted is caught — the home ledger names the review journal
/// (`ledger.review_closed`), so `receipts verify HOME` reports it missing; only a rollback of
/// the whole home, ledger included, remains for a head kept elsewhere to catch.
#[test]
fn issue_31_a_memory_review_deleted_with_its_proposal_reset_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, _) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0);
    let list = json_out(&home, &["memory", "list"]);
    let id = list[0]["id"].as_str().unwrap().to_owned();
    let proposal = home.join("memory").join(format!("{id}.json"));
    let pending = std::fs::read(&proposal).unwrap();
    let out = craik()
        .args([
            "memory",
            "approve",
            &id,
            "--by",
            "user:alice",
            "--reason",
            "ok",
            "--home",
        ])
        .arg(&home)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert_eq!(verify_home(&home, &home).status.code(), Some(0));
    let review = home
        .join("reviews")
        .join(format!("review_{}", id.trim_start_matches("memprop_")));
    std::fs::remove_dir_all(&review).unwrap();
    std::fs::write(&proposal, &pending).unwrap();
    let out = verify_home(&home, &home);
    assert_eq!(out.status.code(), Some(1), "{}", transcript(&out));
    let text = stdout(&out);
    assert!(
        text.lines()
            .any(|l| l.contains(&review.display().to_string())
                && l.contains("missing")
                && l.contains("named by the ledger")),
        "{text}"
    );
}

/// Outside testing round 15 (N10, N12): the ledger cut to before a recorded denial (a valid
/// prefix), the review deleted and the approval file put back to `pending`, while a later
/// run's journal sits in the home. A new decision is refused (the ledger is older than the
/// home), and `ledger rebuild` does not bless the later journal: it was begun while the ledger
/// existed, so the ledger lost it.
#[test]
fn issue_31_a_ledger_cut_before_a_decision_never_lets_it_be_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6, "{text}");
    let a = pending_approval(&home);
    let file = home
        .join("runs")
        .join(&id)
        .join("approvals")
        .join(format!("{a}.json"));
    let pending = std::fs::read(&file).unwrap();
    let ledger_before = std::fs::read(home.join("ledger.jsonl")).unwrap();
    let denied = crate::runs::review(&home, "deny", &a, "user:alice", &[]);
    assert_eq!(denied.status.code(), Some(0), "{}", transcript(&denied));
    let (exit, later, text) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0, "{text}");
    std::fs::write(home.join("ledger.jsonl"), &ledger_before).unwrap();
    let _ = std::fs::remove_file(home.join("ledger.head"));
    std::fs::remove_dir_all(home.join("reviews").join(&a)).unwrap();
    std::fs::write(&file, &pending).unwrap();
    // Round 16: a lock held on the later run (any process of the user can hold one) does not
    // hide it: a run past its first receipt is always named by an honest ledger.
    let later_dir = home.join("runs").join(&later);
    std::fs::write(later_dir.join("lock"), b"1\n").unwrap();
    let held = std::fs::File::open(&later_dir).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let out = crate::runs::review(&home, "approve", &a, "user:mallory", &[]);
    drop(held);
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("older than the home"),
        "{}",
        transcript(&out)
    );
    assert!(
        !home.join("reviews").join(&a).exists(),
        "a review was written"
    );
    let out = craik()
        .args(["ledger", "rebuild", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    let text = stdout(&out);
    assert!(
        text.contains(&later) && text.contains("while the ledger existed"),
        "{text}"
    );
    let check = verify_home_for(&home);
    assert_eq!(check.status.code(), Some(1), "{}", transcript(&check));
}

/// Outside testing round 17b (M4): a completed run cut back to its first receipt, its events,
/// state and outputs deleted, with the ledger put back to before its start — what a start a
/// crash cut short looks like but for the handoff the run wrote when it closed. `runs recover`
/// refuses, naming it, and signs nothing (it had recorded the run anew, wiping the trace of
/// the cut). Deleting the handoff too is deleting the run: the documented witness-only limit.
#[test]
fn issue_31_a_run_cut_back_to_its_first_receipt_is_not_recovered_as_a_fresh_start() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, _, text) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0, "{text}");
    let ledger = home.join("ledger.jsonl");
    let before = std::fs::read(&ledger).unwrap();
    let (exit, id, text) = run_example(&home, &example("docs-review"), &[]);
    assert_eq!(exit, 0, "{text}");
    let run_dir = home.join("runs").join(&id);
    assert!(run_dir.join("handoff.json").is_file());
    std::fs::write(&ledger, &before).unwrap();
    let _ = std::fs::remove_file(home.join("ledger.head"));
    let journal = std::fs::read_to_string(run_dir.join("receipts.jsonl")).unwrap();
    let first = format!("{}\n", journal.lines().next().unwrap());
    std::fs::write(run_dir.join("receipts.jsonl"), &first).unwrap();
    for gone in ["events.jsonl", "run.json", "outputs.jsonl"] {
        let _ = std::fs::remove_file(run_dir.join(gone));
    }
    let out = craik()
        .args(["runs", "recover", &id, "--by", "user:mallory", "--home"])
        .arg(&home)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("`handoff.json`, which only a run past its start writes"),
        "{}",
        transcript(&out)
    );
    assert_eq!(
        std::fs::read_to_string(run_dir.join("receipts.jsonl")).unwrap(),
        first,
        "signed after the refusal"
    );
    assert_eq!(
        std::fs::read(&ledger).unwrap(),
        before,
        "the ledger recorded it"
    );
}

/// Outside testing round r31f (D1): a run parked on a pending approval, one `reopened` event
/// appended to its events. No `run.resume` receipt signs that reopening, so the run is still
/// parked: resume refuses (the approval is pending) and signs nothing.
#[test]
fn issue_31_a_forged_reopening_never_skips_a_pending_approval() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, text) = run_example(&home, &example("approval"), &[]);
    assert_eq!(exit, 6, "{text}");
    let events = home.join("runs").join(&id).join("events.jsonl");
    let mut text = std::fs::read_to_string(&events).unwrap();
    text.push_str(&format!(
        "{}\n",
        serde_json::json!({"event":"reopened","at":"2026-11-28T00:00:00Z","why":"forged"})
    ));
    std::fs::write(&events, text).unwrap();
    let journal = || std::fs::read(home.join("runs").join(&id).join("receipts.jsonl")).unwrap();
    let before = journal();
    let out = resume(&home, &id);
    assert_ne!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is still pending"),
        "{}",
        transcript(&out)
    );
    assert_eq!(journal(), before, "signed after a forged reopening");
}
