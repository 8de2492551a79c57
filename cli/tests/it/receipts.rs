//! `craik keys` and `craik receipts`: key files, a journal written by `craik bench receipts`,
//! verification green on it and red on each tampering class, and docs/receipts.md's OpenSSL
//! commands run verbatim.

use std::fs;
use std::path::Path;
use std::process::Command;

use pretty_assertions::assert_eq;

use crate::{repo_root, run_in, transcript};

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// A temp dir with a key pair and a closed journal of `n` receipts in `journal.jsonl`.
fn setup(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(dir.path(), &["keys", "generate", "--out", "k"]);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let count = n.to_string();
    let o = run_in(
        dir.path(),
        &[
            "bench",
            "receipts",
            "--count",
            &count,
            "--key",
            "k/signing.key.pem",
            "--out",
            "journal.jsonl",
            "--checkpoint-every",
            "4",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    dir
}

fn verify(dir: &Path) -> std::process::Output {
    run_in(
        dir,
        &[
            "receipts",
            "verify",
            "journal.jsonl",
            "--key",
            "k/signing.pub.pem",
        ],
    )
}

#[test]
fn keys_are_private_by_mode_never_overwritten_and_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(dir.path(), &["keys", "generate", "--out", "k"]);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    assert!(!stdout(&o).contains("PRIVATE"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(dir.path().join("k/signing.key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let before = fs::read(dir.path().join("k/signing.key.pem")).unwrap();
    let again = run_in(dir.path(), &["keys", "generate", "--out", "k"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8(again.stderr)
            .unwrap()
            .contains("already exists; refusing to overwrite a key")
    );
    assert_eq!(
        fs::read(dir.path().join("k/signing.key.pem")).unwrap(),
        before
    );

    let shown_private = run_in(dir.path(), &["keys", "show", "k/signing.key.pem"]);
    let shown_public = run_in(dir.path(), &["keys", "show", "k/signing.pub.pem"]);
    assert_eq!(stdout(&shown_private), stdout(&shown_public));
    assert!(
        !stdout(&shown_private).contains("PRIVATE") && !stdout(&shown_private).contains("BEGIN")
    );
    // The key id is the SHA-256 of the SPKI DER, as OpenSSL computes it.
    let der = Command::new("openssl")
        .args([
            "pkey",
            "-pubin",
            "-in",
            "k/signing.pub.pem",
            "-outform",
            "DER",
        ])
        .current_dir(dir.path())
        .output()
        .expect("openssl is installed (.ci/run installs it)");
    use sha2::Digest;
    let id = format!(
        "sha256:{}",
        sha2::Sha256::digest(&der.stdout)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    assert!(
        stdout(&shown_public).starts_with(&format!("key id      {id}\n")),
        "{}",
        stdout(&shown_public)
    );
}

#[test]
fn a_bench_journal_verifies() {
    let dir = setup(10);
    let o = verify(dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    assert_eq!(
        stdout(&o),
        "journal.jsonl: valid — 10 receipts, 3 checkpoints, closed (run run_bench)\n1 journal: 1 valid, 0 invalid\n"
    );
}

fn tamper(dir: &Path, f: impl FnOnce(Vec<Vec<u8>>) -> Vec<u8>) -> String {
    let path = dir.join("journal.jsonl");
    let original = fs::read(&path).unwrap();
    let lines: Vec<Vec<u8>> = original
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect();
    fs::write(&path, f(lines)).unwrap();
    let o = verify(dir);
    fs::write(&path, original).unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", transcript(&o));
    stdout(&o).lines().next().unwrap().to_owned()
}

#[test]
fn each_tampering_class_is_red_with_a_precise_message() {
    let dir = setup(6);
    let d = dir.path();
    // Line layout: r0 r1 r2 r3 cp0 r4 r5 cp1(final).
    let byte = tamper(d, |mut l| {
        let i = l[1].len() / 2;
        l[1][i] ^= 0x01;
        l.concat()
    });
    assert!(byte.starts_with("journal.jsonl:2: INVALID: "), "{byte}");
    assert_eq!(
        tamper(d, |mut l| {
            l.remove(2);
            l.concat()
        }),
        "journal.jsonl:3: INVALID (seq 3): seq: seq 3 where 2 was expected (a receipt is missing, duplicated or reordered)"
    );
    assert!(
        tamper(d, |mut l| {
            l.swap(0, 1);
            l.concat()
        })
        .starts_with("journal.jsonl:1: INVALID (seq 1): seq:")
    );
    assert!(
        tamper(d, |mut l| {
            let x = l[3].clone();
            l.insert(3, x);
            l.concat()
        })
        .starts_with("journal.jsonl:5: INVALID (seq 3): seq:")
    );
    let torn = tamper(d, |l| {
        let mut b = l[..5].concat();
        b.extend_from_slice(&l[5][..40]);
        b
    });
    assert!(
        torn.starts_with(
            "journal.jsonl:6: INVALID: torn line: last line has 40 bytes and no newline"
        ),
        "{torn}"
    );
    let open = tamper(d, |l| l[..7].concat());
    assert!(open.contains("not closed: journal not closed"), "{open}");
    assert!(
        tamper(d, |mut l| {
            l.remove(4);
            l.concat()
        })
        .contains("checkpoint index 1 where 0 was expected"),
        "deleted checkpoint"
    );

    // Re-signed wholesale with another key.
    let other = tempfile::tempdir().unwrap();
    let o = run_in(
        other.path(),
        &["bench", "receipts", "--count", "3", "--out", "j.jsonl"],
    );
    assert_eq!(o.status.code(), Some(0));
    fs::copy(other.path().join("j.jsonl"), d.join("journal.jsonl.other")).unwrap();
    let o = run_in(
        d,
        &[
            "receipts",
            "verify",
            "journal.jsonl.other",
            "--key",
            "k/signing.pub.pem",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).starts_with("journal.jsonl.other:1: INVALID: signature: signed by key `sha256:"),
        "{}",
        stdout(&o)
    );

    // The receipts were not decided under the committed policies.
    let policies = repo_root().join("policies");
    let o = run_in(
        d,
        &[
            "receipts",
            "verify",
            "journal.jsonl",
            "--key",
            "k/signing.pub.pem",
            "--policies",
            policies.to_str().unwrap(),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("policy_set: receipt was decided under policy set"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn usage_errors_exit_2() {
    let dir = setup(2);
    for args in [
        vec![
            "receipts",
            "verify",
            "missing.jsonl",
            "--key",
            "k/signing.pub.pem",
        ],
        vec![
            "receipts",
            "verify",
            "journal.jsonl",
            "--key",
            "k/missing.pem",
        ],
        vec!["receipts", "verify", "journal.jsonl"],
    ] {
        let o = run_in(dir.path(), &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", transcript(&o));
    }
}

#[test]
fn list_and_show_decode_receipts() {
    let dir = setup(3);
    let o = run_in(dir.path(), &["receipts", "list", "journal.jsonl"]);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("journal.jsonl (decoded, not verified: run `craik receipts verify`)\n"),
        "{out}"
    );
    assert_eq!(out.lines().count(), 4);
    let o = run_in(
        dir.path(),
        &["--format", "json", "receipts", "show", "journal.jsonl", "2"],
    );
    let receipt: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(receipt["seq"], 2);
    assert_eq!(receipt["target"], "docs/page-2.md");
    // Issue 30 item 8: for people, readable JSON — one field a line, never `\n` escapes.
    let o = run_in(dir.path(), &["receipts", "show", "journal.jsonl", "2"]);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let out = stdout(&o);
    assert!(!out.contains("\\n"), "{out}");
    assert!(out.contains("\n  \"seq\": 2,\n"), "{out}");
    let json_part: String = out.lines().skip(1).collect::<Vec<_>>().join("\n");
    let parsed: serde_json::Value = serde_json::from_str(&json_part).unwrap();
    assert_eq!(parsed["target"], "docs/page-2.md");
    let o = run_in(dir.path(), &["receipts", "show", "journal.jsonl", "9"]);
    assert_eq!(o.status.code(), Some(2));

    // Read line by line: a damaged line is named by its number and the rest still decode;
    // JSON lists exactly the receipts that decode, in order.
    let journal = fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
    let mut lines: Vec<&str> = journal.lines().collect();
    lines.insert(1, "{not json");
    fs::write(dir.path().join("damaged.jsonl"), lines.join("\n")).unwrap();
    let o = run_in(dir.path(), &["receipts", "list", "damaged.jsonl"]);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let out = stdout(&o);
    assert!(out.contains("\n  line 2: not an envelope: "), "{out}");
    assert_eq!(out.lines().count(), 5, "{out}");
    let o = run_in(
        dir.path(),
        &["--format", "json", "receipts", "list", "damaged.jsonl"],
    );
    let listed: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let seqs: Vec<u64> = listed.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [0, 1, 2]);
    let o = run_in(
        dir.path(),
        &["--format", "json", "receipts", "show", "damaged.jsonl", "2"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let receipt: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(receipt["seq"], 2);
}

/// The commands of docs/receipts.md, run verbatim with the real `openssl`.
#[test]
fn docs_openssl_commands_verify_one_receipt() {
    let dir = setup(4);
    let doc = fs::read_to_string(repo_root().join("docs/receipts.md")).unwrap();
    let block = doc
        .split("<!-- openssl-check:begin -->")
        .nth(1)
        .and_then(|rest| rest.split("<!-- openssl-check:end -->").next())
        .unwrap();
    let script = block
        .trim()
        .trim_start_matches("```sh")
        .trim_end_matches("```");
    fs::copy(
        dir.path().join("journal.jsonl"),
        dir.path().join("receipts.jsonl"),
    )
    .unwrap();
    fs::copy(
        dir.path().join("k/signing.pub.pem"),
        dir.path().join("signing.pub.pem"),
    )
    .unwrap();
    let run = |script: &str| {
        Command::new("sh")
            .args(["-eu", "-c", script])
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let o = run(script);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    assert_eq!(stdout(&o), "Signature Verified Successfully\n");
    // And OpenSSL refuses a changed receipt.
    let path = dir.path().join("receipts.jsonl");
    let text = fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let payload_start = lines[1].find("\"payload\":\"").unwrap() + 12;
    let flipped = if &lines[1][payload_start..payload_start + 1] == "A" {
        "B"
    } else {
        "A"
    };
    lines[1].replace_range(payload_start..payload_start + 1, flipped);
    fs::write(&path, lines.join("\n") + "\n").unwrap();
    let o = run(script);
    assert_ne!(o.status.code(), Some(0), "{}", transcript(&o));
}

/// A writer killed with SIGKILL at arbitrary moments leaves a journal that verifies up to the
/// cut and is reported precisely — never as valid, never "repaired".
#[test]
fn a_journal_killed_mid_append_is_reported_precisely() {
    let dir = tempfile::tempdir().unwrap();
    let o = run_in(dir.path(), &["keys", "generate", "--out", "k"]);
    assert_eq!(o.status.code(), Some(0));
    for (round, wait_ms) in [40u64, 170, 330].into_iter().enumerate() {
        let run = format!("run{round}");
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("craik"))
            .current_dir(dir.path())
            .args([
                "bench",
                "receipts",
                "--count",
                "20000",
                "--key",
                "k/signing.key.pem",
                "--run-dir",
                &run,
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let journal = dir.path().join(&run).join("receipts.jsonl");
        let started = std::time::Instant::now();
        while fs::metadata(&journal).map_or(true, |m| m.len() == 0)
            && started.elapsed().as_secs() < 60
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(wait_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let o = run_in(
            dir.path(),
            &[
                "--format",
                "json",
                "receipts",
                "verify",
                &run,
                "--key",
                "k/signing.pub.pem",
            ],
        );
        assert_eq!(o.status.code(), Some(1), "{}", transcript(&o));
        let reports: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let report = &reports[0];
        let what = report["failure"]["what"].as_str().unwrap();
        assert!(what == "not closed" || what == "torn line", "{report}");
        assert!(report["receipts"].as_u64().unwrap() > 0, "{report}");
    }
}

/// Issue 13 item 3: the private key is PKCS#8 v1, which OpenSSL 3.0 and Python `cryptography`
/// load (both refuse the v2 form), and what they sign with it verifies with the public key.
#[test]
fn issue_13_the_private_key_loads_in_openssl_and_python() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let out = crate::craik()
        .args(["keys", "generate", "--out"])
        .arg(&keys)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", transcript(&out));
    let private = keys.join("signing.key.pem");
    let public = keys.join("signing.pub.pem");
    let openssl = std::process::Command::new("openssl")
        .args(["pkey", "-noout", "-in"])
        .arg(&private)
        .output()
        .unwrap();
    assert!(openssl.status.success(), "{}", transcript(&openssl));
    let python = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys\nfrom cryptography.hazmat.primitives.serialization import load_pem_private_key, load_pem_public_key\nk = load_pem_private_key(open(sys.argv[1],'rb').read(), None)\np = load_pem_public_key(open(sys.argv[2],'rb').read())\np.verify(k.sign(b'craik'), b'craik')\nprint('ok')",
        ])
        .arg(&private)
        .arg(&public)
        .output()
        .unwrap();
    assert!(
        python.status.success() && String::from_utf8_lossy(&python.stdout).trim() == "ok",
        "{}",
        transcript(&python)
    );
}

/// Issue 13 item 2: `receipts verify --custom` checks the policy-set hash of a run that loaded
/// custom policies (however the directory was typed), and `--grants` the signed grants hash,
/// whatever the files' order; a broadened grant or a missing custom directory is a failure.
#[test]
fn issue_13_verify_checks_custom_policies_and_grants() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let custom = root.join("custom-sec");
    std::fs::create_dir_all(&custom).unwrap();
    std::fs::write(
        custom.join("net.cedar"),
        "@id(\"custom.forbid.net\")\n@reason(\"custom: no network\")\nforbid (\n  principal,\n  action in Craik::Action::\"net\",\n  resource\n);\n",
    )
    .unwrap();
    let example = crate::repo_root().join("examples/docs-review");
    let run = crate::craik()
        .current_dir(root)
        .args(["run"])
        .arg(&example)
        // A relative --home: its sandbox paths used to reach the trampoline relative, and
        // every command failed to confine once it had changed directory.
        .args(["--home", "h", "--custom", "./custom-sec/"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", crate::transcript(&run));
    let grant_files = [
        example.join("capability_grant.json"),
        example.join("grants/docs_review_tests.json"),
    ];
    let verify = |extra: &[&str], grants: &[&std::path::Path]| {
        crate::craik()
            .current_dir(root)
            .args(["receipts", "verify", "h"])
            .args(extra)
            .args(if grants.is_empty() {
                &[][..]
            } else {
                &["--grants"][..]
            })
            .args(grants)
            .output()
            .unwrap()
    };
    let ok = verify(
        &["--custom", "custom-sec"],
        &[&grant_files[1], &grant_files[0]],
    );
    assert!(ok.status.success(), "{}", crate::transcript(&ok));
    let absolute = custom.display().to_string();
    let ok = verify(
        &["--custom", &absolute],
        &[&grant_files[0], &grant_files[1]],
    );
    assert!(ok.status.success(), "{}", crate::transcript(&ok));
    // Without the custom policies the bundle is another one.
    let bad = verify(
        &[
            "--policies",
            &crate::repo_root().join("policies").display().to_string(),
        ],
        &[],
    );
    assert_eq!(bad.status.code(), Some(1), "{}", crate::transcript(&bad));
    // One grant missing, or broadened to everything: not what was signed.
    let bad = verify(&["--custom", "custom-sec"], &[&grant_files[0]]);
    assert_eq!(bad.status.code(), Some(1), "{}", crate::transcript(&bad));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("grants"));
    let mut broad: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&grant_files[0]).unwrap()).unwrap();
    broad["target"]["paths"] = serde_json::json!(["**"]);
    let broad_file = root.join("broad.json");
    std::fs::write(&broad_file, broad.to_string()).unwrap();
    let bad = verify(&["--custom", "custom-sec"], &[&broad_file, &grant_files[1]]);
    assert_eq!(bad.status.code(), Some(1), "{}", crate::transcript(&bad));
}

/// Issue 13 item 3: docs/receipts.md is enough to verify what Craik writes. A verifier
/// written from the spec alone (`cli/tests/independent_verifier.py`: Python, `cryptography`,
/// no Craik code) agrees with `craik receipts verify` on real journals (a strict run with
/// approvals, its review journals, a benchmark journal with periodic checkpoints) and on
/// tampered copies of them.
#[test]
fn issue_13_an_independent_verifier_written_from_the_spec_agrees() {
    let dir = tempfile::tempdir().unwrap();
    let (home, id) = crate::audit::approved_docs_review(dir.path());
    let public = home.join("keys/signing.pub.pem");
    let bench = dir.path().join("bench.jsonl");
    let out = crate::craik()
        .args([
            "bench",
            "receipts",
            "--count",
            "300",
            "--checkpoint-every",
            "64",
            "--key",
        ])
        .arg(home.join("keys/signing.key.pem"))
        .arg("--out")
        .arg(&bench)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", crate::transcript(&out));
    let mut journals = vec![
        home.join("runs").join(&id).join("receipts.jsonl"),
        bench.clone(),
    ];
    for review in std::fs::read_dir(home.join("reviews")).unwrap() {
        journals.push(review.unwrap().path().join("receipts.jsonl"));
    }
    // Tampered copies (each a file of its own, outside any home).
    type Edit = fn(&mut Vec<Vec<u8>>);
    let edits: [(&str, Edit); 10] = [
        ("unchanged", |_| {}),
        ("two receipts swapped", |l| l.swap(1, 2)),
        ("a receipt removed", |l| {
            l.remove(2);
        }),
        ("the final checkpoint removed", |l| {
            l.pop();
        }),
        ("a space after a colon", |l| {
            let s = String::from_utf8(l[1].clone())
                .unwrap()
                .replacen("\":\"", "\": \"", 1);
            l[1] = s.into_bytes();
        }),
        ("a CR before a newline", |l| l[1].push(b'\r')),
        ("a payload character changed", |l| {
            let at = l[3].iter().position(|b| *b == b'"').unwrap() + 40;
            l[3][at] = if l[3][at] == b'A' { b'B' } else { b'A' };
        }),
        ("a receipt duplicated", |l| {
            let copy = l[1].clone();
            l.insert(2, copy);
        }),
        ("a line after the close", |l| {
            let copy = l[1].clone();
            l.push(copy);
        }),
        ("the key id changed", |l| {
            let s = String::from_utf8(l[2].clone())
                .unwrap()
                .replacen("sha256:", "sha256:0", 1);
            l[2] = s.into_bytes();
        }),
    ];
    for source in [journals[0].clone(), bench.clone()] {
        let lines: Vec<Vec<u8>> = std::fs::read(&source)
            .unwrap()
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        for (k, (what, edit)) in edits.iter().enumerate() {
            let mut edited = lines.clone();
            edit(&mut edited);
            let path = dir.path().join(format!(
                "{}-{k}.jsonl",
                source.file_stem().unwrap().to_string_lossy()
            ));
            let mut bytes = edited.join(&b'\n');
            bytes.push(b'\n');
            std::fs::write(&path, bytes).unwrap();
            let _ = what;
            journals.push(path);
        }
    }
    let torn = dir.path().join("torn.jsonl");
    let mut bytes = std::fs::read(&bench).unwrap();
    bytes.pop();
    std::fs::write(&torn, bytes).unwrap();
    journals.push(torn);

    let python = std::process::Command::new("python3")
        .arg(crate::repo_root().join("cli/tests/independent_verifier.py"))
        .arg(&public)
        .args(&journals)
        .output()
        .unwrap();
    assert!(python.status.success(), "{}", crate::transcript(&python));
    let verdicts: Vec<String> = String::from_utf8(python.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(verdicts.len(), journals.len());
    let mut valid = 0;
    for (journal, verdict) in journals.iter().zip(&verdicts) {
        let craik = crate::craik()
            .args(["receipts", "verify"])
            .arg(journal)
            .arg("--key")
            .arg(&public)
            .output()
            .unwrap();
        let craik_valid = craik.status.code() == Some(0);
        assert!(
            matches!(craik.status.code(), Some(0 | 1)),
            "{}",
            crate::transcript(&craik)
        );
        assert_eq!(
            craik_valid,
            verdict == "valid",
            "{}: craik says {}, the independent verifier `{verdict}`",
            journal.display(),
            String::from_utf8_lossy(&craik.stdout)
        );
        valid += usize::from(craik_valid);
    }
    // The real journals and the two unchanged copies are valid; every tampering is caught.
    assert_eq!(
        valid,
        journals.len() - 2 * (edits.len() - 1) - 1,
        "{verdicts:#?}"
    );
}

/// Issue 19 item 5: the policy-set hash is content-addressed, so an auditor checking a run
/// against a copy of its custom policies under another directory name gets VALID; a copy with
/// one byte changed is still caught.
#[test]
fn issue_19_verify_with_custom_policies_under_another_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let rule = "@id(\"custom.forbid.net\")\n@reason(\"custom: no network\")\nforbid (principal, action in Craik::Action::\"net\", resource);\n";
    for d in ["custom-sec", "audit-copy/reviewed"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
        std::fs::write(root.join(d).join("net.cedar"), rule).unwrap();
    }
    let example = crate::repo_root().join("examples/docs-review");
    let run = crate::craik()
        .current_dir(root)
        .args(["run"])
        .arg(&example)
        .args(["--home", "h", "--custom", "custom-sec"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", crate::transcript(&run));
    let verify = |custom: &str| {
        crate::craik()
            .current_dir(root)
            .args(["receipts", "verify", "h", "--custom", custom])
            .output()
            .unwrap()
    };
    let ok = verify("audit-copy/reviewed");
    assert!(ok.status.success(), "{}", crate::transcript(&ok));
    std::fs::write(
        root.join("audit-copy/reviewed/net.cedar"),
        format!("{rule}\n"),
    )
    .unwrap();
    let bad = verify("audit-copy/reviewed");
    assert_eq!(bad.status.code(), Some(1), "{}", crate::transcript(&bad));
    assert!(
        String::from_utf8_lossy(&bad.stdout).contains("policy_set"),
        "{}",
        crate::transcript(&bad)
    );
}

/// Issue 20 item 2: an inclusion proof of a receipt against the last checkpoint, and a
/// consistency proof that a journal extends a copy saved earlier — and the copy a rewritten
/// or shortened journal does not extend.
#[test]
fn issue_20_inclusion_and_consistency_proofs_offline() {
    let dir = setup(30);
    let key = ["--key", "k/signing.pub.pem", "--format", "json"];
    let json = |o: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", transcript(o)))
    };
    // A copy saved while the journal was 8 receipts long: through its second checkpoint.
    let text = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
    let mut copy = String::new();
    let mut checkpoints = 0;
    for line in text.lines() {
        copy.push_str(line);
        copy.push('\n');
        if line.contains("vnd.craik.checkpoint") {
            checkpoints += 1;
            if checkpoints == 2 {
                break;
            }
        }
    }
    std::fs::write(dir.path().join("old.jsonl"), &copy).unwrap();

    let mut args = vec!["receipts", "consistency", "old.jsonl", "journal.jsonl"];
    args.extend(key);
    let o = run_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let report = json(&o);
    assert_eq!(report["consistent"], true);
    assert_eq!(report["old_size"], 8);
    assert_eq!(report["new_size"], 30);
    assert!(!report["proof"].as_array().unwrap().is_empty());

    // Inclusion of receipt seq 5 against the closing checkpoint (30 leaves: 5 hashes).
    let mut args = vec!["receipts", "prove", "journal.jsonl", "5"];
    args.extend(key);
    let o = run_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let proof = json(&o);
    assert_eq!(proof["verified"], true);
    assert_eq!(proof["tree_size"], 30);
    assert_eq!(proof["proof"].as_array().unwrap().len(), 5);
    // Against the first checkpoint (4 receipts) a later receipt is not covered: exit 2.
    let mut args = vec![
        "receipts",
        "prove",
        "journal.jsonl",
        "20",
        "--checkpoint",
        "0",
    ];
    args.extend(key);
    let o = run_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(2), "{}", transcript(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not covered by checkpoint 0"));

    // History rewritten under the same key (another journal, same run id, other times): the
    // saved copy is not extended, and the first difference is named.
    let o = run_in(
        dir.path(),
        &[
            "bench",
            "receipts",
            "--count",
            "12",
            "--key",
            "k/signing.key.pem",
            "--out",
            "rewritten.jsonl",
            "--checkpoint-every",
            "4",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let mut args = vec!["receipts", "consistency", "old.jsonl", "rewritten.jsonl"];
    args.extend(key);
    let o = run_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", transcript(&o));
    let report = json(&o);
    assert_eq!(report["consistent"], false);
    assert!(report["diverges_at_seq"].is_u64(), "{report}");
    // Cut short: the current journal is shorter than the copy.
    let mut args = vec!["receipts", "consistency", "journal.jsonl", "old.jsonl"];
    args.extend(key);
    let o = run_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", transcript(&o));
    let o = run_in(
        dir.path(),
        &[
            "receipts",
            "consistency",
            "journal.jsonl",
            "old.jsonl",
            "--key",
            "k/signing.pub.pem",
        ],
    );
    assert!(stdout(&o).contains("cut short"), "{}", transcript(&o));
    // A saved copy that does not verify is refused before any proof, naming its line.
    let tampered = copy.replacen("\"payload\":\"", "\"payload\":\"A", 1);
    std::fs::write(dir.path().join("bad.jsonl"), tampered).unwrap();
    let mut args = vec!["receipts", "consistency", "bad.jsonl", "journal.jsonl"];
    args.extend(key);
    let o = run_in(dir.path(), &args);
    assert_eq!(o.status.code(), Some(1), "{}", transcript(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.jsonl: line 1"),
        "{}",
        transcript(&o)
    );
}

/// Issue 20 item 2: a run's last checkpoint exported as a C2SP signed note (`tlog-checkpoint`)
/// signed by the home's key, checked by an independent verifier (Python `cryptography`,
/// written from the C2SP spec: key hash, signature over the note text, the same tree size
/// and root the signed checkpoint names).
#[test]
fn issue_20_a_checkpoint_exports_as_a_c2sp_signed_note() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, _) =
        crate::runs::run_example(&home, &repo_root().join("examples/docs-review"), &[]);
    assert_eq!(exit, 0);
    let home_arg = home.to_str().unwrap();
    let o = run_in(
        dir.path(),
        &[
            "receipts",
            "checkpoint",
            &id,
            "--home",
            home_arg,
            "--format",
            "json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let note = report["note"].as_str().unwrap();
    let lines: Vec<&str> = note.lines().collect();
    assert_eq!(lines[0], report["origin"].as_str().unwrap());
    assert!(lines[0].ends_with(&format!("/{id}")), "{note}");
    assert_eq!(lines[1], report["tree_size"].to_string());
    assert_eq!(lines[3], "");
    assert!(lines[4].starts_with("\u{2014} craik/"), "{note}");
    fs::write(dir.path().join("note.txt"), note).unwrap();
    let script = r#"
import base64, hashlib, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
note = open(sys.argv[1], encoding="utf-8").read()
vkey = sys.argv[2]
name, khash, kdata = vkey.split("+", 2)
kdata = base64.b64decode(kdata)
assert kdata[0] == 1 and len(kdata) == 33
pub = kdata[1:]
assert hashlib.sha256(name.encode() + b"\n\x01" + pub).digest()[:4].hex() == khash
text, sigs = note.split("\n\n", 1)
text += "\n"
origin, size, root = text.splitlines()
for line in sigs.splitlines():
    assert line.startswith("\u2014 ")
    sname, blob = line[2:].split(" ")
    blob = base64.b64decode(blob)
    if sname == name and blob[:4].hex() == khash:
        Ed25519PublicKey.from_public_bytes(pub).verify(blob[4:], text.encode())
        print(size, "sha256:" + base64.b64decode(root).hex())
        sys.exit(0)
sys.exit("no signature by " + name)
"#;
    let py = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.path().join("note.txt"))
        .arg(report["verifier_key"].as_str().unwrap())
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", transcript(&py));
    assert_eq!(
        String::from_utf8_lossy(&py.stdout).trim(),
        format!(
            "{} {}",
            report["tree_size"],
            report["root_hash"].as_str().unwrap()
        )
    );
    // A changed note no longer verifies (the verifier is not a rubber stamp).
    let forged = note.replacen(&format!("\n{}\n", lines[1]), "\n1\n", 1);
    fs::write(dir.path().join("note.txt"), forged).unwrap();
    let py = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir.path().join("note.txt"))
        .arg(report["verifier_key"].as_str().unwrap())
        .output()
        .unwrap();
    assert!(!py.status.success());
    // An origin the note format cannot carry is refused (exit 2), naming it.
    let o = run_in(
        dir.path(),
        &[
            "receipts",
            "checkpoint",
            &id,
            "--home",
            home_arg,
            "--origin",
            "DSSEv1",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", transcript(&o));
}

/// Issue 20 item 8: the shipped test vectors (docs/vectors/) hold — `craik receipts verify`
/// reaches each `expected.json` exactly, and the independent verifier written from the spec
/// reaches the same verdicts; the small-order key is refused by both before any journal.
#[test]
fn issue_20_the_docs_vectors_hold_for_craik_and_an_independent_verifier() {
    let vectors = repo_root().join("docs/vectors");
    let key = vectors.join("signing.pub.pem");
    let mut dirs: Vec<_> = fs::read_dir(&vectors)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expected.json").is_file())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 13, "{dirs:?}");
    let mut valid = 0;
    for dir in &dirs {
        let expected: serde_json::Value =
            serde_json::from_slice(&fs::read(dir.join("expected.json")).unwrap()).unwrap();
        let journal = dir.join("journal.jsonl");
        // A vector made with a key of its own (one its holder had to sign with) carries it.
        let own = dir.join("signing.pub.pem");
        let key = if own.is_file() { own } else { key.clone() };
        let o = crate::craik()
            .args(["receipts", "verify", "--format", "json", "--key"])
            .arg(&key)
            .arg(&journal)
            .output()
            .unwrap();
        let report: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("{}: {}", dir.display(), transcript(&o)));
        let failure = &report[0]["failure"];
        let got = serde_json::json!({
            "valid": failure.is_null(),
            "line": failure.get("line"),
            "what": failure.get("what"),
        });
        assert_eq!(got, expected, "{}", dir.display());
        assert_eq!(o.status.code(), Some(if failure.is_null() { 0 } else { 1 }));
        if failure.is_null() {
            valid += 1;
        }
        let py = Command::new("python3")
            .arg(repo_root().join("cli/tests/independent_verifier.py"))
            .arg(&key)
            .arg(&journal)
            .output()
            .unwrap();
        assert!(py.status.success(), "{}", transcript(&py));
        let verdict = String::from_utf8_lossy(&py.stdout).trim().to_owned();
        if expected["valid"] == true {
            assert_eq!(verdict, "valid", "{}", dir.display());
        } else {
            assert!(
                verdict.starts_with("invalid"),
                "{}: {verdict}",
                dir.display()
            );
            if let Some(line) = expected["line"].as_u64()
                && verdict.contains("line ")
            {
                assert!(
                    verdict.contains(&format!("line {line}:")),
                    "{}: {verdict}",
                    dir.display()
                );
            }
        }
    }
    assert_eq!(valid, 3);
    let weak = vectors.join("small-order-key/signing.pub.pem");
    let o = crate::craik()
        .args(["receipts", "verify", "--key"])
        .arg(&weak)
        .arg(vectors.join("valid-bench/journal.jsonl"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", transcript(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("small-order"));
    let py = Command::new("python3")
        .arg(repo_root().join("cli/tests/independent_verifier.py"))
        .arg(&weak)
        .arg(vectors.join("valid-bench/journal.jsonl"))
        .output()
        .unwrap();
    assert!(!py.status.success());
    assert!(String::from_utf8_lossy(&py.stderr).contains("small-order"));
}

/// Issue 20 item 8: docs/receipts.md's "Recomputing the hashes" is exact. The independent
/// verifier (`--hashes`) recomputes, from the recipes alone and the action records in
/// `events.jsonl`, the `request_hash` of every decision and outcome on an action of a real
/// run (reads, a patch, a write, a command with its resolved program), every
/// `action_sha256`, the `run.inputs` hashes, the memory proposal's, the parking, resuming and
/// closing receipts' — and each matches what Craik signed. An action record changed after
/// the fact no longer hashes to what the journal signed.
#[test]
fn issue_20_the_hash_recipes_in_the_spec_recompute_a_real_runs_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let (home, id) = crate::audit::approved_docs_review(dir.path());
    let public = home.join("keys/signing.pub.pem");
    let run_dir = home.join("runs").join(&id);
    let hashes = || {
        Command::new("python3")
            .arg(repo_root().join("cli/tests/independent_verifier.py"))
            .arg("--hashes")
            .arg(&public)
            .arg(&run_dir)
            .output()
            .unwrap()
    };
    let py = hashes();
    assert!(py.status.success(), "{}", transcript(&py));
    // 6 reads (decision + outcome), then a patch, a write and a command: each decided twice
    // (parked, then approved) and performed; `action_sha256` on the 9 decisions; the inputs,
    // the proposal, 3 parks, 3 resumes and the close.
    assert_eq!(
        stdout(&py).trim(),
        r#"{"action_sha256": 9, "request_hash": 15, "run": 9}"#
    );
    let events = run_dir.join("events.jsonl");
    let text = fs::read_to_string(&events).unwrap();
    assert!(text.contains("\"argv\":[\""), "the run ran no command");
    fs::write(&events, text.replacen("\"argv\":[\"", "\"argv\":[\"./", 1)).unwrap();
    let py = hashes();
    assert!(!py.status.success(), "{}", transcript(&py));
    assert!(
        String::from_utf8_lossy(&py.stderr).contains("differs from the recipe's"),
        "{}",
        transcript(&py)
    );
}

/// Issue 20 item 8: a run's journal must begin with its `run.inputs` receipt. A journal
/// signed by the home's own key that starts with anything else (here a benchmark journal
/// planted under `runs/`, its directory named after its signed run id) verifies as a chain but
/// is refused as a run's journal, at line 1, naming what it starts with; the same file
/// outside `runs/` is still a valid journal.
#[test]
fn issue_20_a_run_journal_must_begin_with_run_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let (home, _) = crate::audit::approved_docs_review(dir.path());
    let planted = home.join("runs/run_bench");
    fs::create_dir_all(&planted).unwrap();
    let out = crate::craik()
        .args(["bench", "receipts", "--count", "3", "--key"])
        .arg(home.join("keys/signing.key.pem"))
        .arg("--out")
        .arg(planted.join("receipts.jsonl"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", transcript(&out));
    let verify = |path: &Path| {
        crate::craik()
            .args(["receipts", "verify", "--format", "json", "--key"])
            .arg(home.join("keys/signing.pub.pem"))
            .arg(path)
            .output()
            .unwrap()
    };
    let o = verify(&planted);
    assert_eq!(o.status.code(), Some(1), "{}", transcript(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let failure = &report[0]["failure"];
    assert_eq!(failure["line"], 1, "{failure}");
    assert_eq!(failure["what"], "inputs", "{failure}");
    assert!(
        failure["why"]
            .as_str()
            .unwrap()
            .contains("not `run.inputs`"),
        "{failure}"
    );
    let outside = dir.path().join("bench.jsonl");
    fs::copy(planted.join("receipts.jsonl"), &outside).unwrap();
    let o = verify(&outside);
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
}

/// Issue 30 item 8: `receipts verify HOME` and `audit HOME` check a home with its own key, not
/// the default home's (which reported a valid home INVALID).
#[test]
fn issue_30_a_home_is_verified_with_its_own_key() {
    let dir = tempfile::tempdir().unwrap();
    let ex = crate::repo_root().join("examples/docs-review");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for home in [&a, &b] {
        let out = crate::craik()
            .arg("run")
            .arg(&ex)
            .arg("--home")
            .arg(home)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", crate::transcript(&out));
    }
    for args in [vec!["receipts", "verify"], vec!["audit"]] {
        let out = crate::craik()
            .args(&args)
            .arg(&b)
            .arg("--home")
            .arg(&a)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            crate::transcript(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains(&b.join("keys/signing.pub.pem").display().to_string()),
            "{args:?}: {}",
            crate::transcript(&out)
        );
    }
}

/// The `n`th checkpoint line (1-based) of a journal's text, with its newline.
fn checkpoint_line(text: &str, n: usize) -> String {
    let line = text
        .lines()
        .filter(|l| l.contains("vnd.craik.checkpoint"))
        .nth(n - 1)
        .unwrap();
    format!("{line}\n")
}

/// `receipts consistency OLD CURRENT --key k/signing.pub.pem --format json` in `dir`, plus
/// `extra`: (exit, report).
fn consistency(dir: &Path, old: &str, current: &str, extra: &[&str]) -> (i32, serde_json::Value) {
    let mut args = vec![
        "receipts",
        "consistency",
        old,
        current,
        "--key",
        "k/signing.pub.pem",
        "--format",
        "json",
    ];
    args.extend(extra);
    let o = run_in(dir, &args);
    let code = o.status.code().unwrap();
    let report = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|_| serde_json::json!({ "stderr": String::from_utf8_lossy(&o.stderr) }));
    (code, report)
}

/// Signs `note`'s text again with a fresh key under `name` (Python `cryptography`): the same
/// tree size and root, another signer. Prints the note, then its verifier key.
fn resign_note(note: &str, name: &str) -> (String, String) {
    let script = r#"
import base64, hashlib, sys
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization
note, name = sys.argv[1], sys.argv[2]
text = note.split("\n\n", 1)[0] + "\n"
key = Ed25519PrivateKey.generate()
pub = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
khash = hashlib.sha256(name.encode() + b"\n\x01" + pub).digest()[:4]
sig = base64.b64encode(khash + key.sign(text.encode())).decode()
vkey = name + "+" + khash.hex() + "+" + base64.b64encode(b"\x01" + pub).decode()
sys.stdout.write(text + "\n\u2014 " + name + " " + sig + "\n" + "\0" + vkey)
"#;
    let py = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(note)
        .arg(name)
        .output()
        .unwrap();
    assert!(py.status.success(), "{}", transcript(&py));
    let out = String::from_utf8(py.stdout).unwrap();
    let (note, vkey) = out.split_once('\0').unwrap();
    (note.to_owned(), vkey.to_owned())
}

/// Issue 31 item 4: `receipts consistency` works from what a witness keeps — the journal's
/// last checkpoint line, or the C2SP note `receipts checkpoint` printed — as well as from a
/// saved copy: a journal that grew is consistent with each; a journal rewritten under the same
/// key, or cut shorter than the witness's size, is not (exit 1, saying which); a note signed
/// by a key nobody trusts, or changed after signing, and a changed checkpoint line are
/// refused before any proof (exit 1).
#[test]
fn issue_31_consistency_from_a_witness_checkpoint_line_or_note() {
    let dir = setup(30);
    let d = dir.path();
    // A home whose key signed the journal, so `receipts checkpoint` can sign notes.
    fs::create_dir_all(d.join("h/keys")).unwrap();
    for f in ["signing.key.pem", "signing.pub.pem"] {
        fs::copy(d.join("k").join(f), d.join("h/keys").join(f)).unwrap();
    }
    let text = fs::read_to_string(d.join("journal.jsonl")).unwrap();
    // The journal as it stood at 8 receipts (through its second checkpoint), what a witness
    // kept of it then (that checkpoint line; the note over it), and the final line now.
    let cut: String = {
        let at = text.find(&checkpoint_line(&text, 2)).unwrap() + checkpoint_line(&text, 2).len();
        text[..at].to_owned()
    };
    fs::write(d.join("old.jsonl"), &cut).unwrap();
    fs::write(d.join("cp8.line"), checkpoint_line(&text, 2)).unwrap();
    fs::write(
        d.join("cp30.line"),
        text.lines().last().unwrap().to_owned() + "\n",
    )
    .unwrap();
    let note_of = |journal: &str| {
        let o = run_in(
            d,
            &[
                "receipts",
                "checkpoint",
                journal,
                "--home",
                "h",
                "--format",
                "json",
            ],
        );
        assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (
            r["note"].as_str().unwrap().to_owned(),
            r["verifier_key"].as_str().unwrap().to_owned(),
        )
    };
    let (note8, vkey) = note_of("old.jsonl");
    fs::write(d.join("note8.txt"), &note8).unwrap();
    let (note30, _) = note_of("journal.jsonl");
    fs::write(d.join("note30.txt"), &note30).unwrap();

    // A good extension, from each form.
    for (old, form) in [
        ("old.jsonl", "journal"),
        ("cp8.line", "checkpoint"),
        ("note8.txt", "note"),
    ] {
        let (code, r) = consistency(d, old, "journal.jsonl", &[]);
        assert_eq!(code, 0, "{old}: {r}");
        assert_eq!(r["old_form"], form, "{r}");
        assert_eq!(r["consistent"], true, "{r}");
        assert_eq!(
            (r["old_size"].as_u64(), r["new_size"].as_u64()),
            (Some(8), Some(30))
        );
        assert!(!r["proof"].as_array().unwrap().is_empty(), "{r}");
    }
    // The same size: the witness's own head, consistent with an empty proof.
    let (code, r) = consistency(d, "cp30.line", "journal.jsonl", &[]);
    assert_eq!((code, r["consistent"].as_bool()), (0, Some(true)), "{r}");
    // The note names its key: its verifier key alone is enough (a witness's configuration).
    let (code, r) = consistency(d, "note8.txt", "journal.jsonl", &["--verifier-key", &vkey]);
    assert_eq!(code, 0, "{r}");

    // History rewritten under the same key: the same run id, other receipts.
    let o = run_in(
        d,
        &[
            "bench",
            "receipts",
            "--count",
            "12",
            "--key",
            "k/signing.key.pem",
            "--out",
            "rewritten.jsonl",
            "--checkpoint-every",
            "4",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    for old in ["cp8.line", "note8.txt"] {
        let (code, r) = consistency(d, old, "rewritten.jsonl", &[]);
        assert_eq!(code, 1, "{old}: {r}");
        assert_eq!(r["consistent"], false, "{r}");
        assert_eq!(r["inconsistency"], "rewritten", "{r}");
        assert_ne!(r["current_root_at_old_size"], r["old_root"], "{r}");
    }
    let o = run_in(
        d,
        &[
            "receipts",
            "consistency",
            "note8.txt",
            "rewritten.jsonl",
            "--key",
            "k/signing.pub.pem",
        ],
    );
    assert!(
        stdout(&o).contains("NOT CONSISTENT: the current journal rewrote history (its first 8 receipts hash to sha256:"),
        "{}",
        transcript(&o)
    );

    // Cut short: the current journal is shorter than what the witness saw.
    for old in ["cp30.line", "note30.txt"] {
        let (code, r) = consistency(d, old, "old.jsonl", &[]);
        assert_eq!(code, 1, "{old}: {r}");
        assert_eq!(r["inconsistency"], "cut_short", "{r}");
    }

    // A note of the same tree signed by another key: refused, whatever its name says; with
    // that key's verifier key given, it is the witness's and it holds.
    let default_name = note8
        .lines()
        .last()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .to_owned();
    let (forged, forged_vkey) = resign_note(&note8, &default_name);
    fs::write(d.join("forged.txt"), &forged).unwrap();
    let (code, r) = consistency(d, "forged.txt", "journal.jsonl", &[]);
    assert_eq!(code, 1, "{r}");
    let err = r["stderr"].as_str().unwrap();
    assert!(err.contains("no signature by a trusted key"), "{err}");
    let (code, r) = consistency(
        d,
        "forged.txt",
        "journal.jsonl",
        &["--verifier-key", &forged_vkey],
    );
    assert_eq!((code, r["consistent"].as_bool()), (0, Some(true)), "{r}");

    // A tampered note (size or root changed after signing) and a tampered checkpoint line.
    let lines: Vec<&str> = note8.lines().collect();
    let smaller = note8.replacen("\n8\n", "\n7\n", 1);
    let mut root = lines[2].to_owned();
    root.replace_range(0..1, if &root[0..1] == "A" { "B" } else { "A" });
    let other_root = note8.replacen(lines[2], &root, 1);
    for (name, bad) in [("smaller", smaller), ("root", other_root)] {
        assert_ne!(bad, note8);
        fs::write(d.join("bad.txt"), &bad).unwrap();
        let (code, r) = consistency(d, "bad.txt", "journal.jsonl", &[]);
        assert_eq!(code, 1, "{name}: {r}");
        let err = r["stderr"].as_str().unwrap();
        assert!(
            err.contains("does not verify over the note"),
            "{name}: {err}"
        );
    }
    let cp = checkpoint_line(&text, 2);
    let bad = cp.replacen("\"payload\":\"", "\"payload\":\"A", 1);
    fs::write(d.join("bad.line"), bad).unwrap();
    let (code, r) = consistency(d, "bad.line", "journal.jsonl", &[]);
    assert_eq!(code, 1, "{r}");
    assert!(
        r["stderr"].as_str().unwrap().contains("bad.line: line 1"),
        "{r}"
    );
    // A verifier key whose hash is not its own is a usage error.
    let (code, _) = consistency(
        d,
        "note8.txt",
        "journal.jsonl",
        &["--verifier-key", "craik+00000000+AQ=="],
    );
    assert_eq!(code, 2);
}

/// Issue 31 item 4: a witness of a home's ledger. The note `receipts checkpoint HOME` prints
/// (and the ledger's last line) stay consistent as the home records more runs; a ledger put
/// back to an earlier copy is cut short of what the witness saw.
#[test]
fn issue_31_a_witness_of_the_home_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let home = d.join("home");
    let ex = repo_root().join("examples/docs-review");
    let (exit, _, _) = crate::runs::run_example(&home, &ex, &[]);
    assert_eq!(exit, 0);
    let h = home.to_str().unwrap();
    let ledger = home.join("ledger.jsonl");
    let early = fs::read_to_string(&ledger).unwrap();
    fs::write(
        d.join("ledger.line"),
        early.lines().last().unwrap().to_owned() + "\n",
    )
    .unwrap();
    let o = run_in(
        d,
        &["receipts", "checkpoint", h, "--home", h, "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", transcript(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(r["origin"].as_str().unwrap().ends_with("/ledger"), "{r}");
    fs::write(d.join("ledger.note"), r["note"].as_str().unwrap()).unwrap();
    let (exit, _, _) = crate::runs::run_example(&home, &ex, &[]);
    assert_eq!(exit, 0);
    let key = home.join("keys/signing.pub.pem");
    let check = |old: &str| {
        let o = crate::craik()
            .current_dir(d)
            .args([
                "receipts",
                "consistency",
                old,
                h,
                "--home",
                h,
                "--format",
                "json",
                "--key",
            ])
            .arg(&key)
            .output()
            .unwrap();
        let r: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", transcript(&o)));
        (o.status.code().unwrap(), r)
    };
    for old in ["ledger.line", "ledger.note"] {
        let (code, r) = check(old);
        assert_eq!(code, 0, "{old}: {r}");
        assert_eq!(r["run_id"], "ledger", "{r}");
        assert!(r["new_size"].as_u64() > r["old_size"].as_u64(), "{r}");
    }
    // The witness saw the ledger now; then the earlier copy is put back.
    let now = fs::read_to_string(&ledger).unwrap();
    fs::write(
        d.join("ledger.line"),
        now.lines().last().unwrap().to_owned() + "\n",
    )
    .unwrap();
    fs::write(&ledger, &early).unwrap();
    let (code, r) = check("ledger.line");
    assert_eq!(code, 1, "{r}");
    assert_eq!(r["inconsistency"], "cut_short", "{r}");
}

/// Issue 31 item 5: the spec points settled in docs/receipts.md hold on their vectors for
/// `craik` and the independent verifier: a journal that is not closed is reported at its last
/// line whichever path reports it (with `--allow-open` and nothing signed saying its run goes
/// on, too); a signature whose R is the identity point is refused by both (strict,
/// cofactorless ed25519 — OpenSSL alone accepts it); the C2SP note vector verifies under its
/// key and under its verifier key, whose base64 holds `+`.
#[test]
fn issue_31_spec_points_hold_on_their_vectors() {
    let vectors = repo_root().join("docs/vectors");
    let verify = |dir: &str, extra: &[&str]| {
        let d = vectors.join(dir);
        let key = if d.join("signing.pub.pem").is_file() {
            d.join("signing.pub.pem")
        } else {
            vectors.join("signing.pub.pem")
        };
        let o = crate::craik()
            .args(["receipts", "verify", "--format", "json", "--key"])
            .arg(&key)
            .arg(d.join("journal.jsonl"))
            .args(extra)
            .output()
            .unwrap();
        let r: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", transcript(&o)));
        let py = Command::new("python3")
            .arg(repo_root().join("cli/tests/independent_verifier.py"))
            .arg(&key)
            .arg(d.join("journal.jsonl"))
            .output()
            .unwrap();
        (
            o.status.code().unwrap(),
            r[0]["failure"].clone(),
            String::from_utf8_lossy(&py.stdout).trim().to_owned(),
        )
    };
    let lines = |dir: &str| {
        fs::read_to_string(vectors.join(dir).join("journal.jsonl"))
            .unwrap()
            .lines()
            .count()
    };
    let last = lines("final-checkpoint-removed");
    for extra in [&[][..], &["--allow-open"][..]] {
        let (code, failure, py) = verify("final-checkpoint-removed", extra);
        assert_eq!(code, 1, "{extra:?}");
        assert_eq!(failure["what"], "not closed", "{extra:?}");
        assert_eq!(failure["line"], last, "{extra:?}: its last line");
        assert_eq!(py, format!("invalid: line {last}: not closed"));
    }
    let (code, failure, py) = verify("small-order-r", &[]);
    assert_eq!(code, 1);
    assert_eq!(
        (failure["line"].as_u64(), failure["what"].as_str()),
        (Some(2), Some("signature"))
    );
    assert!(
        py.starts_with("invalid: line 2: a signature whose R is a small-order point"),
        "{py}"
    );
    // Only that line differs from a valid journal: OpenSSL's verify alone (cofactorless, but
    // accepting a small-order R) says the line verifies.
    let journal = fs::read_to_string(vectors.join("small-order-r/journal.jsonl")).unwrap();
    let line2: serde_json::Value = serde_json::from_str(journal.lines().nth(1).unwrap()).unwrap();
    let sig = line2["signatures"][0]["sig"].as_str().unwrap();
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(sig)
        .unwrap();
    assert_eq!(&raw[..32], &{
        let mut r = [0u8; 32];
        r[0] = 1;
        r
    });
    let script = r#"
import base64, json, sys
from cryptography.hazmat.primitives import serialization
key = serialization.load_pem_public_key(open(sys.argv[1], "rb").read())
e = json.loads(open(sys.argv[2], "rb").read().split(b"\n")[1])
t, p = e["payloadType"].encode(), base64.b64decode(e["payload"])
key.verify(base64.b64decode(e["signatures"][0]["sig"]), b"DSSEv1 %d %s %d " % (len(t), t, len(p)) + p)
"#;
    let py = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(vectors.join("small-order-r/signing.pub.pem"))
        .arg(vectors.join("small-order-r/journal.jsonl"))
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "OpenSSL accepts it: {}",
        transcript(&py)
    );

    // The note vector: its verifier key's base64 holds `+` (split at the first two only).
    let d = vectors.join("checkpoint-note");
    let want: serde_json::Value =
        serde_json::from_slice(&fs::read(d.join("note.json")).unwrap()).unwrap();
    let vkey = want["verifier_key"].as_str().unwrap();
    assert!(vkey.splitn(3, '+').nth(2).unwrap().contains('+'), "{vkey}");
    let consistency = |old: &str, extra: &[&str]| {
        let o = crate::craik()
            .args(["receipts", "consistency", "--format", "json", "--key"])
            .arg(d.join("signing.pub.pem"))
            .arg(d.join(old))
            .arg(d.join("journal.jsonl"))
            .args(extra)
            .output()
            .unwrap();
        let r: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or_else(|_| panic!("{}", transcript(&o)));
        (o.status.code().unwrap(), r)
    };
    for (old, extra) in [
        ("note.txt", &[][..]),
        ("note.txt", &["--verifier-key", vkey][..]),
        ("checkpoint.line", &[][..]),
    ] {
        let (code, r) = consistency(old, extra);
        assert_eq!(code, 0, "{old}: {r}");
        assert_eq!(r["old_size"], want["tree_size"], "{r}");
        assert_eq!(r["old_root"], want["root_hash"], "{r}");
    }
    let (_, r) = consistency("note.txt", &[]);
    assert_eq!(r["old_origin"], want["origin"]);
    assert_eq!(r["old_key_name"], want["key_name"]);
}

/// Issue 31 item 5: a memory proposal's `content_sha256` has one text an independent
/// verifier reproduces from the spec (RFC 8785, floats in ECMAScript form): the independent
/// verifier computes the vector's (a confidence of `0.00001`, nested metadata out of order)
/// byte for byte, and the hash a real run signed in its `memory.propose` receipt from the
/// proposal file alone — and a changed confidence no longer matches.
#[test]
fn issue_31_memory_content_sha256_is_reproducible_from_the_spec() {
    let content = |path: &Path| {
        let py = Command::new("python3")
            .arg(repo_root().join("cli/tests/independent_verifier.py"))
            .arg("--content")
            .arg(path)
            .output()
            .unwrap();
        assert!(py.status.success(), "{}", transcript(&py));
        (
            stdout(&py).trim().to_owned(),
            String::from_utf8(py.stderr).unwrap(),
        )
    };
    let v = repo_root().join("docs/vectors/memory-content");
    let want: serde_json::Value =
        serde_json::from_slice(&fs::read(v.join("content.json")).unwrap()).unwrap();
    let (hash, text) = content(&v.join("proposal.json"));
    assert_eq!(hash, want["content_sha256"].as_str().unwrap());
    assert_eq!(text, fs::read_to_string(v.join("canonical.json")).unwrap());
    assert!(text.contains("\"confidence\":0.00001"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let (exit, id, _) =
        crate::runs::run_example(&home, &repo_root().join("examples/docs-review"), &[]);
    assert_eq!(exit, 0);
    let proposals: Vec<_> = fs::read_dir(home.join("memory"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(proposals.len(), 1);
    let signed: Vec<String> = crate::runs::receipts(&home, &id)
        .iter()
        .filter(|r| r["capability"] == "memory.propose" && r["decision"] == "allow")
        .map(|r| {
            r["result"]["metadata"]["content_sha256"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(signed.len(), 1);
    assert_eq!(content(&proposals[0]).0, signed[0]);
    let text = fs::read_to_string(&proposals[0]).unwrap();
    assert!(text.contains("\"confidence\": 0.9"), "{text}");
    fs::write(
        &proposals[0],
        text.replace("\"confidence\": 0.9", "\"confidence\": 0.90001"),
    )
    .unwrap();
    assert_ne!(content(&proposals[0]).0, signed[0]);
}
