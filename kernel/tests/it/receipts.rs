//! Receipts: known-answer vectors, and every tampering class caught by verification.

use craik_contracts::{PolicyProfile, ReceiptResult, ReceiptStatus};
use craik_kernel::{
    DecidedBy, DecidedByKind, Decision, Ed25519Signer, JournalWriter, KeyRing, Mode, ReceiptDraft,
    Signer, verify_journal,
};
use proptest::prelude::*;
use time::macros::datetime;

/// The fixed test key (never a real one): seed 0x42 repeated.
fn test_signer() -> Ed25519Signer {
    Ed25519Signer::from_seed(&[0x42; 32])
}

fn other_signer() -> Ed25519Signer {
    Ed25519Signer::from_seed(&[0x07; 32])
}

fn ring(signer: &dyn Signer) -> KeyRing {
    let mut ring = KeyRing::new();
    ring.add(&signer.public_key()).unwrap();
    ring
}

fn draft(n: u64) -> ReceiptDraft {
    ReceiptDraft {
        task_id: "task_docs".into(),
        actor: "runner_fixture".into(),
        capability: "repo.write.docs".into(),
        target: format!("docs/page-{n}.md"),
        policy_profile: PolicyProfile::TrustedLocal,
        fail_open: false,
        reason: "granted by grant_docs".into(),
        result: ReceiptResult {
            status: ReceiptStatus::Passed,
            summary: format!("wrote page {n}"),
            metadata: craik_contracts::Object::new(),
        },
        redacted: true,
        policy_set: "sha256:0000000000000000000000000000000000000000000000000000000000000000"
            .into(),
        request_hash: format!("sha256:{:064x}", n),
        decision: Decision::Allow,
        determining_policies: vec!["grant.grant_docs".into()],
        decided_by: DecidedBy {
            kind: DecidedByKind::Policy,
            by: String::new(),
        },
        mode: Mode::Enforce,
        action: None,
    }
}

/// A closed journal of `n` receipts, a checkpoint every `every`.
fn journal(n: u64, every: u64, signer: &dyn Signer) -> Vec<u8> {
    let mut writer = JournalWriter::new("run_test", every);
    let mut out = Vec::new();
    for i in 0..n {
        let at = datetime!(2026-11-20 10:00 UTC) + time::Duration::seconds(i as i64);
        out.extend(writer.append(draft(i), at, signer).unwrap());
    }
    out.extend(
        writer
            .close(datetime!(2026-11-20 11:00 UTC), signer)
            .unwrap(),
    );
    out
}

fn vectors() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

/// The exact bytes and signatures for a fixed key and input. Regenerate deliberately with
/// `CRAIK_BLESS_VECTORS=1 cargo test -p craik-kernel receipt_known_answer`, and review the diff.
#[test]
fn receipt_known_answer() {
    let signer = test_signer();
    let bytes = journal(3, 2, &signer);
    let path = vectors().join("journal-3.jsonl");
    if std::env::var_os("CRAIK_BLESS_VECTORS").is_some() {
        std::fs::write(&path, &bytes).unwrap();
        std::fs::write(
            vectors().join("test-key.pub.hex"),
            format!("{}\n", craik_kernel::to_hex(&signer.public_key())),
        )
        .unwrap();
    }
    let expected = std::fs::read(&path).unwrap();
    assert!(
        bytes == expected,
        "receipt bytes drifted from {}",
        path.display()
    );
    assert_eq!(
        signer.key_id(),
        "sha256:".to_owned()
            + &craik_kernel::to_hex(&sha256(&craik_kernel::spki_der(&signer.public_key())))
    );
    let report = verify_journal(&expected, &ring(&signer), None);
    assert!(report.is_valid(), "{report:?}");
    assert_eq!(
        (report.receipts, report.checkpoints, report.closed),
        (3, 2, true)
    );
}

fn sha256(bytes: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).to_vec()
}

#[test]
fn a_clean_journal_verifies_and_names_its_run() {
    let signer = test_signer();
    let report = verify_journal(
        &journal(10, 4, &signer),
        &ring(&signer),
        Some("sha256:0000000000000000000000000000000000000000000000000000000000000000"),
    );
    assert!(report.is_valid(), "{report:?}");
    assert_eq!(report.run_id.as_deref(), Some("run_test"));
    assert_eq!(report.receipts, 10);
    assert_eq!(report.checkpoints, 3);
}

fn failure(bytes: &[u8]) -> craik_kernel::Failure {
    let signer = test_signer();
    verify_journal(bytes, &ring(&signer), None)
        .failure
        .expect("tampering must be detected")
}

fn lines(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes
        .split_inclusive(|&b| b == b'\n')
        .map(<[u8]>::to_vec)
        .collect()
}

#[test]
fn every_single_byte_change_is_caught() {
    let bytes = journal(2, 0, &test_signer());
    for i in 0..bytes.len() {
        for flip in [0x01u8, 0x20, 0x80] {
            let mut tampered = bytes.clone();
            tampered[i] ^= flip;
            let report = verify_journal(&tampered, &ring(&test_signer()), None);
            assert!(!report.is_valid(), "byte {i} ^ {flip:#x} went unnoticed");
        }
    }
}

#[test]
fn deletion_swap_duplication_and_truncation_are_caught() {
    let bytes = journal(6, 2, &test_signer());
    let ls = lines(&bytes);
    for i in 0..ls.len() {
        let mut deleted = ls.clone();
        deleted.remove(i);
        assert!(
            !verify_journal(&deleted.concat(), &ring(&test_signer()), None).is_valid(),
            "deleting line {}",
            i + 1
        );
        let mut duplicated = ls.clone();
        duplicated.insert(i, ls[i].clone());
        assert!(
            !verify_journal(&duplicated.concat(), &ring(&test_signer()), None).is_valid(),
            "duplicating line {}",
            i + 1
        );
        if i + 1 < ls.len() {
            let mut swapped = ls.clone();
            swapped.swap(i, i + 1);
            assert!(
                !verify_journal(&swapped.concat(), &ring(&test_signer()), None).is_valid(),
                "swapping lines {} and {}",
                i + 1,
                i + 2
            );
        }
    }
    for cut in 0..bytes.len() {
        assert!(
            !verify_journal(&bytes[..cut], &ring(&test_signer()), None).is_valid(),
            "truncation at byte {cut}"
        );
    }
}

#[test]
fn failures_are_reported_precisely() {
    let bytes = journal(4, 0, &test_signer());
    let ls = lines(&bytes);

    let mut dropped = ls.clone();
    dropped.remove(1);
    let f = failure(&dropped.concat());
    assert_eq!((f.line, f.seq, f.what.as_str()), (2, Some(2), "seq"));

    // A process killed mid-append leaves a torn last line.
    let mut torn = ls[..3].concat();
    torn.extend_from_slice(&ls[3][..ls[3].len() / 2]);
    let f = failure(&torn);
    assert_eq!((f.line, f.what.as_str()), (4, "torn line"));
    assert!(f.why.contains("no newline"), "{f:?}");

    // Whole-chain truncation before the close.
    let f = failure(&ls[..4].concat());
    assert_eq!(f.what, "not closed");
    assert!(f.why.starts_with("journal not closed"), "{f:?}");

    // Re-signing the whole chain with another key.
    let f = failure(&journal(4, 0, &other_signer()));
    assert_eq!((f.line, f.what.as_str()), (1, "signature"));

    // The wrong policy set.
    let signer = test_signer();
    let report = verify_journal(
        &bytes,
        &ring(&signer),
        Some("sha256:1111111111111111111111111111111111111111111111111111111111111111"),
    );
    assert_eq!(report.failure.unwrap().what, "policy_set");
}

#[test]
fn the_writer_refuses_what_cannot_be_signed_honestly() {
    let signer = test_signer();
    let mut writer = JournalWriter::new("run_x", 0);
    writer
        .append(draft(0), datetime!(2026-11-20 10:00 UTC), &signer)
        .unwrap();
    let back = writer.append(draft(1), datetime!(2026-11-20 09:00 UTC), &signer);
    assert!(
        matches!(back, Err(craik_kernel::JournalError::ClockWentBack { .. })),
        "{back:?}"
    );
    let mut float = draft(2);
    float
        .result
        .metadata
        .0
        .insert("ratio".into(), serde_json::json!(0.5));
    let refused = writer.append(float, datetime!(2026-11-20 10:01 UTC), &signer);
    assert!(
        matches!(&refused, Err(craik_kernel::JournalError::Payload(m)) if m.contains("float")),
        "{refused:?}"
    );
    writer
        .close(datetime!(2026-11-20 10:02 UTC), &signer)
        .unwrap();
    assert!(
        writer
            .append(draft(3), datetime!(2026-11-20 10:03 UTC), &signer)
            .is_err()
    );
}

#[test]
fn weak_keys_are_refused() {
    let mut ring = KeyRing::new();
    // The identity point: small order.
    let mut identity = [0u8; 32];
    identity[0] = 1;
    assert!(ring.add(&identity).is_err());
}

/// A signer holding the real key that signs one way `verify_strict` refuses but a batch
/// equation may pass: `R` the identity (s = h·a), or `R` with a small-order component.
struct Crafted {
    key: ed25519_dalek::SigningKey,
    id: String,
    torsion: bool,
}

impl Signer for Crafted {
    fn key_id(&self) -> &str {
        &self.id
    }
    fn public_key(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }
    fn sign(&self, message: &[u8]) -> [u8; 64] {
        use curve25519_dalek::{Scalar, constants};
        use sha2::{Digest, Sha512};
        let a = self.key.to_scalar();
        let (r_point, r) = if self.torsion {
            let r = Scalar::from(12345u64);
            (
                constants::ED25519_BASEPOINT_POINT * r + constants::EIGHT_TORSION[1],
                r,
            )
        } else {
            (curve25519_dalek::EdwardsPoint::default(), Scalar::ZERO)
        };
        let r_bytes = r_point.compress().to_bytes();
        let mut h = Sha512::new();
        h.update(r_bytes);
        h.update(self.public_key());
        h.update(message);
        let h = Scalar::from_bytes_mod_order_wide(&h.finalize().into());
        let s = r + h * a;
        let mut sig = [0u8; 64];
        sig[..32].copy_from_slice(&r_bytes);
        sig[32..].copy_from_slice(s.as_bytes());
        sig
    }
}

/// Issue 31 item 5: one answer per signature, whatever the path. A line signed (by the key's
/// holder) with an identity-point `R`, or an `R` with a small-order component, is refused by
/// `verify_strict` — and now by every batch and thread split too (the batch equation passed
/// the first always and the second one time in eight before).
#[test]
fn a_small_order_or_mixed_order_r_is_refused_by_every_path() {
    use craik_kernel::{VerifyOptions, verify_journal_with};
    let signer = test_signer();
    let keys = ring(&signer);
    for torsion in [false, true] {
        let crafted = Crafted {
            key: ed25519_dalek::SigningKey::from_bytes(&[0x42; 32]),
            id: signer.key_id().to_owned(),
            torsion,
        };
        let mut writer = JournalWriter::new("run_test", 100);
        let mut bytes = Vec::new();
        for i in 0..6u64 {
            let at = datetime!(2026-11-20 10:00 UTC) + time::Duration::seconds(i as i64);
            let by: &dyn Signer = if i == 3 { &crafted } else { &signer };
            bytes.extend(writer.append(draft(i), at, by).unwrap());
        }
        bytes.extend(
            writer
                .close(datetime!(2026-11-20 11:00 UTC), &signer)
                .unwrap(),
        );
        for round in 0..24 {
            for (threads, batch) in [(1, false), (1, true), (2, true), (3, true)] {
                let report = verify_journal_with(
                    &bytes,
                    &keys,
                    VerifyOptions {
                        policy_set: None,
                        threads,
                        batch,
                        allow_open: false,
                    },
                    &mut |_, _| {},
                );
                let failure = report.failure.as_ref();
                assert_eq!(
                    failure.map(|f| f.line),
                    Some(4),
                    "torsion {torsion}, round {round}, threads {threads}, batch {batch}: {report:?}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any change to one byte of any receipt of a larger journal is caught.
    #[test]
    fn random_byte_changes_in_larger_journals_are_caught(at in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let bytes = journal(12, 5, &test_signer());
        let mut tampered = bytes.clone();
        let i = at.index(bytes.len());
        tampered[i] ^= flip;
        prop_assert!(!verify_journal(&tampered, &ring(&test_signer()), None).is_valid());
    }
}

/// Batched and multi-threaded verification report exactly what one-by-one `verify_strict`
/// does, on clean and tampered journals alike (failures are re-checked one by one).
#[test]
fn batching_and_threads_never_change_the_report() {
    use craik_kernel::{VerifyOptions, verify_journal_with};
    let signer = test_signer();
    let keys = ring(&signer);
    let clean = journal(40, 7, &signer);
    let mut variants = vec![clean.clone()];
    for at in [10usize, 5_000, 20_000, clean.len() - 3] {
        let mut t = clean.clone();
        t[at] ^= 0x04;
        variants.push(t);
    }
    variants.push(clean[..clean.len() - 10].to_vec());
    for bytes in &variants {
        let reference = verify_journal_with(
            bytes,
            &keys,
            VerifyOptions {
                policy_set: None,
                threads: 1,
                batch: false,
                allow_open: false,
            },
            &mut |_, _| {},
        );
        for (threads, batch) in [(1, true), (2, true), (3, false), (4, true)] {
            let other = verify_journal_with(
                bytes,
                &keys,
                VerifyOptions {
                    policy_set: None,
                    threads,
                    batch,
                    allow_open: false,
                },
                &mut |_, _| {},
            );
            assert_eq!(reference, other, "threads {threads}, batch {batch}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Streaming verification, fed in arbitrary chunks, reaches exactly the verdict of
    /// verifying the whole byte string — for intact, tampered, truncated and open journals.
    #[test]
    fn streaming_verification_equals_whole_verification(
        cuts in prop::collection::vec(1usize..700, 1..40),
        tamper in prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
        truncate in prop::option::of(any::<prop::sample::Index>()),
        allow_open in any::<bool>(),
    ) {
        let signer = test_signer();
        let keys = ring(&signer);
        let mut bytes = journal(12, 4, &signer);
        if let Some((at, byte)) = tamper {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        if let Some(at) = truncate {
            bytes.truncate(at.index(bytes.len()));
        }
        let options = craik_kernel::VerifyOptions { allow_open, ..Default::default() };
        let whole = craik_kernel::verify_journal_with(&bytes, &keys, options, &mut |_, _| {});
        let mut verifier = craik_kernel::Verifier::new(&keys, options);
        let mut rest = bytes.as_slice();
        let mut cut = cuts.iter().cycle();
        while !rest.is_empty() {
            let n = (*cut.next().unwrap()).min(rest.len());
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            if !verifier.feed(chunk) {
                break;
            }
        }
        prop_assert_eq!(verifier.finish(), whole);
    }
}

/// Issue 20: a visiting verifier hands over exactly the receipts that verified, in order, with
/// their lines — every one of a clean journal, none from the failing line on.
#[test]
fn issue_20_the_verifier_visits_only_verified_receipts() {
    let signer = test_signer();
    let keys = ring(&signer);
    let bytes = journal(12, 4, &signer);
    let visit = |bytes: &[u8]| {
        let mut seen: Vec<(usize, u64)> = Vec::new();
        let mut verifier =
            craik_kernel::Verifier::new(&keys, craik_kernel::VerifyOptions::default())
                .visiting(|line, r| seen.push((line, r.seq)));
        verifier.feed(bytes);
        let report = verifier.finish();
        (report, seen)
    };
    let (report, seen) = visit(&bytes);
    assert!(report.is_valid());
    assert_eq!(
        seen.iter().map(|s| s.1).collect::<Vec<_>>(),
        (0..12).collect::<Vec<_>>()
    );
    let all = lines(&bytes);
    for (line, seq) in &seen {
        assert!(
            all[line - 1].windows(9).any(|w| w == b"\"payload\""),
            "line {line} seq {seq}"
        );
    }
    // A receipt's payload changed on line 7: lines 1–6 are visited (receipts and one
    // checkpoint among them), nothing from line 7 on.
    let mut tampered = all.clone();
    tampered[6] = String::from_utf8(tampered[6].clone())
        .unwrap()
        .replacen("\"payload\":\"ey", "\"payload\":\"EY", 1)
        .into_bytes();
    let bytes: Vec<u8> = tampered.concat();
    let (report, seen) = visit(&bytes);
    assert_eq!(report.failure.unwrap().line, 7);
    assert!(
        !seen.is_empty() && seen.iter().all(|(line, _)| *line < 7),
        "{seen:?}"
    );
    assert_eq!(seen.len() as u64, report.receipts);
}

/// The committed payload schemas are what the types generate.
#[test]
fn committed_payload_schemas_match_the_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../contracts/schema");
    for (name, checkpoint) in [("receipt", false), ("checkpoint", true)] {
        let path = dir.join(format!("{name}.schema.json"));
        let committed = std::fs::read_to_string(&path).unwrap();
        assert!(
            committed == craik_kernel::payload_schema_text(checkpoint),
            "{} is stale; regenerate with `cargo run -p craik -- schema export contracts/schema`",
            path.display()
        );
    }
}

/// Re-signs line `index` of `bytes` with `payload` in place of its own, keeping the envelope.
fn resign(bytes: &[u8], index: usize, edit: impl Fn(&str) -> String) -> Vec<u8> {
    use base64::Engine as _;
    let signer = test_signer();
    let mut ls = lines(bytes);
    let envelope: craik_kernel::Envelope = serde_json::from_slice(&ls[index]).unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(&envelope.payload)
        .unwrap();
    let edited = edit(std::str::from_utf8(&payload).unwrap());
    let sig = signer.sign(&craik_kernel::pae(
        &envelope.payload_type,
        edited.as_bytes(),
    ));
    let new = craik_kernel::Envelope::new(
        &envelope.payload_type,
        edited.as_bytes(),
        signer.key_id(),
        &sig,
    );
    let mut line = serde_json::to_vec(&new).unwrap();
    line.push(b'\n');
    ls[index] = line;
    ls.concat()
}

/// Issue 11 item 11: a correctly signed payload that is not the one canonical RFC 8785 form
/// (reordered keys, whitespace, an escaped character, a duplicate key) is refused.
#[test]
fn issue_11_only_canonical_signed_payloads_verify() {
    let bytes = journal(3, 0, &test_signer());
    // Sanity: re-signing the same bytes verifies.
    assert!(
        verify_journal(
            &resign(&bytes, 1, str::to_owned),
            &ring(&test_signer()),
            None
        )
        .is_valid()
    );
    type Edit = Box<dyn Fn(&str) -> String>;
    let variants: Vec<(&str, Edit)> = vec![
        ("leading space", Box::new(|p| format!(" {p}"))),
        (
            "space after colon",
            Box::new(|p| p.replacen("\":", "\": ", 1)),
        ),
        ("trailing newline", Box::new(|p| format!("{p}\n"))),
        (
            "duplicate key (first value shadowed)",
            Box::new(|p| p.replacen('{', "{\"actor\":\"runner_forged\",", 1)),
        ),
        (
            "reordered keys",
            Box::new(|p| {
                let v: serde_json::Value = serde_json::from_str(p).unwrap();
                let obj = v.as_object().unwrap();
                let mut pairs: Vec<String> = obj
                    .iter()
                    .map(|(k, v)| format!("{}:{}", serde_json::to_string(k).unwrap(), v))
                    .collect();
                pairs.reverse();
                format!("{{{}}}", pairs.join(","))
            }),
        ),
        (
            "escaped solidus",
            Box::new(|p| p.replacen("task_docs", "task\\u005fdocs", 1)),
        ),
    ];
    for (what, edit) in variants {
        let tampered = resign(&bytes, 1, edit);
        let report = verify_journal(&tampered, &ring(&test_signer()), None);
        let f = report.failure.unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!(f.line, 2, "{what}");
        assert!(f.why.contains("canonical"), "{what}: {f:?}");
    }
}

/// Issue 13 item 3: what docs/receipts.md forbids is refused even when correctly signed: a
/// line that is not the envelope's compact form, a time that is not UTC, an `id` that is not
/// `receipt_<run>_<seq>`, and `decided_by` forms outside the spec.
#[test]
fn issue_13_the_verifier_refuses_what_the_spec_forbids() {
    let signer = test_signer();
    let bytes = journal(3, 0, &signer);
    // Envelope spellings: same signature, another line.
    let ls = lines(&bytes);
    let line = std::str::from_utf8(&ls[1]).unwrap().trim_end_matches('\n');
    let spellings = [
        ("space after a colon", line.replacen("\":\"", "\": \"", 1)),
        ("CR before the newline", format!("{line}\r")),
        ("leading space", format!(" {line}")),
        ("fields reordered", {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            format!(
                "{{\"signatures\":{},\"payload\":{},\"payloadType\":{}}}",
                v["signatures"], v["payload"], v["payloadType"]
            )
        }),
    ];
    for (what, spelled) in spellings {
        let mut edited = ls.clone();
        edited[1] = format!("{spelled}\n").into_bytes();
        let report = verify_journal(&edited.concat(), &ring(&signer), None);
        let f = report.failure.unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!((f.line, f.what.as_str()), (2, "envelope"), "{what}: {f:?}");
    }
    // Signed payloads the spec does not allow.
    type Edit = Box<dyn Fn(&mut serde_json::Value)>;
    let payloads: Vec<(&str, &str, Edit)> = vec![
        (
            "offset instead of Z",
            "created_at",
            Box::new(|v| {
                let t = v["created_at"].as_str().unwrap().replace('Z', "+00:00");
                v["created_at"] = t.into();
            }),
        ),
        (
            "another id",
            "id",
            Box::new(|v| v["id"] = "receipt_other_1".into()),
        ),
        (
            "a policy decision naming an approver",
            "decided_by",
            Box::new(|v| v["decided_by"]["by"] = "user:mallory".into()),
        ),
        (
            "an approval by no user",
            "decided_by",
            Box::new(|v| {
                v["decided_by"] = serde_json::json!({"kind": "approval", "by": "runner_x via a"});
            }),
        ),
        (
            "a default allow",
            "decided_by",
            Box::new(|v| {
                v["decided_by"] = serde_json::json!({"kind": "default", "by": ""});
                v["decision"] = "allow".into();
            }),
        ),
    ];
    for (what, field, edit) in payloads {
        let tampered = resign(&bytes, 1, |p| {
            let mut v: serde_json::Value = serde_json::from_str(p).unwrap();
            edit(&mut v);
            String::from_utf8(serde_jcs::to_vec(&v).unwrap()).unwrap()
        });
        let report = verify_journal(&tampered, &ring(&signer), None);
        let f = report.failure.unwrap_or_else(|| panic!("{what}: accepted"));
        assert_eq!((f.line, f.what.as_str()), (2, field), "{what}: {f:?}");
    }
}

/// Issue 20: the home ledger continues from its last checkpoint with one signature check;
/// an edited earlier entry, a cut after an entry, another key or a final checkpoint refuse.
#[test]
fn issue_20_resume_at_checkpoint_authenticates_everything_by_the_last_root() {
    let signer = test_signer();
    let mut writer = JournalWriter::new("ledger", 1);
    let mut bytes = Vec::new();
    for i in 0..5u64 {
        let at = datetime!(2026-11-20 10:00 UTC) + time::Duration::seconds(i as i64);
        bytes.extend(writer.append(draft(i), at, &signer).unwrap());
    }
    let resumed = JournalWriter::resume_at_checkpoint("ledger", &bytes, &ring(&signer), 1).unwrap();
    assert_eq!(resumed.len(), 5);
    assert_eq!(resumed.last_hash(), writer.last_hash());
    // Appending after the resume verifies as one journal.
    let mut resumed = resumed;
    let at = datetime!(2026-11-20 11:00 UTC);
    let mut all = bytes.clone();
    all.extend(resumed.append(draft(5), at, &signer).unwrap());
    let report = craik_kernel::verify_journal_with(
        &all,
        &ring(&signer),
        craik_kernel::VerifyOptions {
            allow_open: true,
            ..Default::default()
        },
        &mut |_, _| {},
    );
    assert!(report.is_valid(), "{report:?}");
    assert_eq!(report.receipts, 6);

    let text = String::from_utf8(bytes.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // An earlier entry re-signed with different content (its signature would verify) no
    // longer matches the signed root.
    let mut other = JournalWriter::new("ledger", 1);
    let mut forged = Vec::new();
    for i in 0..5u64 {
        let at = datetime!(2026-11-20 10:00 UTC) + time::Duration::seconds(i as i64);
        let d = if i == 1 { draft(99) } else { draft(i) };
        forged.push(String::from_utf8(other.append(d, at, &signer).unwrap()).unwrap());
    }
    let mut mixed: Vec<&str> = lines.clone();
    let forged_lines: Vec<&str> = forged[1].lines().collect();
    mixed[2] = forged_lines[0];
    let mixed = mixed.join("\n") + "\n";
    assert!(
        JournalWriter::resume_at_checkpoint("ledger", mixed.as_bytes(), &ring(&signer), 1).is_err()
    );
    // The last checkpoint cut off: the last line is an entry.
    let cut = lines[..lines.len() - 1].join("\n") + "\n";
    assert!(
        JournalWriter::resume_at_checkpoint("ledger", cut.as_bytes(), &ring(&signer), 1).is_err()
    );
    // Another key trusted only.
    assert!(
        JournalWriter::resume_at_checkpoint("ledger", &bytes, &ring(&other_signer()), 1).is_err()
    );
    // Another journal id.
    assert!(JournalWriter::resume_at_checkpoint("run_x", &bytes, &ring(&signer), 1).is_err());

    // From the head alone (the last checkpoint and the cached subtree roots): the same state;
    // nodes that do not fold to the signed root, or a last line that is an entry, refuse.
    let last = lines.last().unwrap().as_bytes();
    let nodes = writer.tree_nodes();
    let head = JournalWriter::resume_from_head("ledger", last, &nodes, &ring(&signer), 1).unwrap();
    assert_eq!(head.len(), writer.len());
    assert_eq!(head.last_hash(), writer.last_hash());
    let mut wrong = nodes.clone();
    wrong[0][0] ^= 1;
    assert!(JournalWriter::resume_from_head("ledger", last, &wrong, &ring(&signer), 1).is_err());
    let entry = lines[lines.len() - 2].as_bytes();
    assert!(JournalWriter::resume_from_head("ledger", entry, &nodes, &ring(&signer), 1).is_err());
    assert!(
        JournalWriter::resume_from_head("ledger", last, &nodes, &ring(&other_signer()), 1).is_err()
    );
}
