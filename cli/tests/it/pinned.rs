//! Issue 31 item 3: the pinned policy set decides on every path — start, resume, approve
//! `--resume`, recover, cancel — and the policy commands load the set a run would.

use std::path::Path;

use serde_json::Value;

use crate::runs::{approve, example, receipts, resume, run_example, run_json, verify_run};
use crate::{craik, transcript};

const QUIET: &str = "@id(\"org.quiet\")\n@reason(\"an organisation policy that matches nothing here\")\nforbid (principal, action == Craik::Action::\"git.force_push\", resource);\n";

fn journal(home: &Path, id: &str) -> Vec<u8> {
    std::fs::read(home.join("runs").join(id).join("receipts.jsonl")).unwrap()
}

/// A run parked for an approval under a custom directory is resumed, recovered or cancelled
/// only while that directory holds what it held at the start: an edit (the attack: a policy
/// changed mid-run took effect and a file was overwritten) is refused naming both policy-set
/// hashes, and nothing is signed or performed; restored, the run completes.
#[test]
fn issue_31_a_run_continues_only_under_the_policies_it_started_with() {
    let dir = tempfile::tempdir().unwrap();
    let h = &dir.path().join("home");
    let org = dir.path().join("org");
    std::fs::create_dir(&org).unwrap();
    std::fs::write(org.join("quiet.cedar"), QUIET).unwrap();
    let (exit, id, text) = run_example(
        h,
        &example("approval"),
        &["--custom", org.to_str().unwrap()],
    );
    assert_eq!(exit, 6, "{text}");
    let approval = crate::runs::pending_approval(h);
    let ok = approve(h, &approval, "user:alice");
    assert_eq!(ok.status.code(), Some(0), "{}", transcript(&ok));
    let signed = journal(h, &id);
    // Every variant of "the policies changed": an edit, a file added, a file removed.
    type Change = Box<dyn Fn(&Path)>;
    let changes: [(&str, Change); 3] = [
        (
            "edited",
            Box::new(|o| {
                std::fs::write(
                    o.join("quiet.cedar"),
                    QUIET.replace("nothing here", "nothing at all"),
                )
                .unwrap()
            }),
        ),
        (
            "added",
            Box::new(|o| {
                std::fs::write(o.join("more.cedar"), QUIET.replace("org.quiet", "org.more"))
                    .unwrap()
            }),
        ),
        (
            "removed",
            Box::new(|o| std::fs::remove_file(o.join("quiet.cedar")).unwrap()),
        ),
    ];
    for (what, change) in &changes {
        change(&org);
        for verb in ["resume", "recover", "cancel"] {
            let out = craik()
                .args(["runs", verb, &id, "--by", "user:op", "--home"])
                .arg(h)
                .output()
                .unwrap();
            assert_ne!(
                out.status.code(),
                Some(0),
                "{what} {verb}: {}",
                transcript(&out)
            );
            let err = String::from_utf8_lossy(&out.stderr);
            // Removing the only file may also be refused as an empty directory; every other
            // change is the policy-set refusal.
            assert!(
                err.contains("the policy set changed since the run started")
                    || (*what == "removed" && err.contains("org")),
                "{what} {verb}: {}",
                transcript(&out)
            );
            assert_eq!(journal(h, &id), signed, "{what} {verb}: nothing signed");
        }
        let again = craik()
            .args([
                "approvals",
                "approve",
                &approval,
                "--by",
                "user:alice",
                "--reason",
                "x",
                "--resume",
                "--home",
            ])
            .arg(h)
            .output()
            .unwrap();
        assert_ne!(
            again.status.code(),
            Some(0),
            "{what}: {}",
            transcript(&again)
        );
        assert_eq!(
            journal(h, &id),
            signed,
            "{what}: approve --resume signed nothing"
        );
        // Put back as it was.
        let _ = std::fs::remove_file(org.join("more.cedar"));
        std::fs::write(org.join("quiet.cedar"), QUIET).unwrap();
    }
    assert_eq!(run_json(h, &id)["status"], "blocked", "still parked");
    let done = resume(h, &id);
    assert_eq!(done.status.code(), Some(0), "{}", transcript(&done));
    assert_eq!(run_json(h, &id)["status"], "completed");
    verify_run(h, &id, false);
    // One policy set in every receipt of the run.
    let sets: std::collections::BTreeSet<String> = receipts(h, &id)
        .iter()
        .filter_map(|r| r["policy_set"].as_str().map(str::to_owned))
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(sets.len(), 1, "{sets:?}");
}

/// craik.toml's pinned custom set is loaded by every command, and `--custom` cannot replace
/// or bypass it: naming another directory is refused unless the file allows additions;
/// naming the pinned one is the pinned one, its pin checked; `policy validate` loads the
/// pinned set and says so.
#[test]
fn issue_31_custom_flags_never_replace_the_pinned_set() {
    let dir = tempfile::tempdir().unwrap();
    let h = &dir.path().join("home");
    let org = dir.path().join("org");
    let other = dir.path().join("other");
    for (d, id) in [(&org, "org.quiet"), (&other, "other.quiet")] {
        std::fs::create_dir(d).unwrap();
        std::fs::write(d.join("quiet.cedar"), QUIET.replace("org.quiet", id)).unwrap();
    }
    let config = dir.path().join("craik.toml");
    std::fs::write(&config, "[[policy.custom]]\npath = \"org\"\n").unwrap();
    let with_config = || {
        let mut c = craik();
        c.env("CRAIK_CONFIG", &config).current_dir(dir.path());
        c
    };
    let pinned = with_config().args(["policy", "pin"]).output().unwrap();
    assert_eq!(pinned.status.code(), Some(0), "{}", transcript(&pinned));
    // A flag naming another directory: refused, nothing started.
    let out = with_config()
        .arg("run")
        .arg(example("approval"))
        .arg("--home")
        .arg(h)
        .arg("--custom")
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("pins the custom policy set"),
        "{}",
        transcript(&out)
    );
    assert!(!h.join("runs").exists() || std::fs::read_dir(h.join("runs")).unwrap().count() == 0);
    // A flag naming the pinned directory after an unpinned edit: the pin still decides.
    std::fs::write(
        org.join("quiet.cedar"),
        QUIET.replace("nothing here", "nothing at all"),
    )
    .unwrap();
    let out = with_config()
        .args(["policy", "validate", "--custom"])
        .arg(&org)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("changed since it was pinned"),
        "{}",
        transcript(&out)
    );
    std::fs::write(org.join("quiet.cedar"), QUIET).unwrap();
    // The policy commands load the pinned set and say which.
    let out = with_config()
        .args(["--format", "json", "policy", "validate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let origin = report["origin"].as_str().unwrap();
    assert!(
        origin.contains("org") && origin.contains("the pinned set of"),
        "{origin}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("craik: policies:"));
    // Where the file allows additions, the flag adds to the pinned set.
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("[policy]\nallow_extra_custom = true\n\n{text}"),
    )
    .unwrap();
    let out = with_config()
        .args(["--format", "json", "policy", "validate", "--custom"])
        .arg(&other)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let origin = report["origin"].as_str().unwrap();
    assert!(
        origin.contains("org") && origin.contains("other"),
        "{origin}"
    );
    // `policy diff` holds the pinned set on both sides and checks its pin (outside testing
    // round 14: it compared the embedded set alone, and passed after an unpinned edit).
    let cases = dir.path().join("cases");
    std::fs::create_dir(&cases).unwrap();
    let diff = || {
        with_config()
            .args(["policy", "diff", "embedded", "embedded", "--cases"])
            .arg(&cases)
            .output()
            .unwrap()
    };
    let out = diff();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the pinned set of"),
        "{}",
        transcript(&out)
    );
    std::fs::write(
        org.join("quiet.cedar"),
        QUIET.replace("nothing here", "nothing at all"),
    )
    .unwrap();
    let out = diff();
    assert_eq!(out.status.code(), Some(2), "{}", transcript(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("changed since it was pinned"),
        "{}",
        transcript(&out)
    );
}
