//! The pre-command record: the workspace manifest, the write scope, the immutable paths and
//! the pre-images a command is checked against, persisted (fsync, atomic rename) in the run
//! directory before the command starts, so that `craik runs recover` after a `kill -9` of
//! the host diffs the workspace against it, puts protected files back from their pre-images,
//! and signs what the command changed. Removed once the command's outcome is signed.
//!
//! The file is read back by the host, so it is bound to the home's key (state read back,
//! DESIGN §9): its first line is a DSSE envelope (its own payload type, so the signature can
//! never pass for a receipt's) over the run, the action and the `sha256` of the rest; a
//! record that does not verify is never used, and nothing of it is written to the workspace.
//!
//! When the command has ended, what the check after it finds (every change, and how each
//! forbidden one is undone) is persisted the same way, signed, before anything is undone: an
//! undo a crash cuts short is finished from it, and the outcome names what the command did,
//! not what was left of it.
//!
//! ```text
//! runs/<run>/precommand/<action>.found   envelope line, then {schema, version, run, action,
//!                                         changes}
//! runs/<run>/precommand/<action>.pre
//!   line 1   DSSE envelope: {"run_id","action","sha256"} signed with the run's key
//!   line 2   header: schema, version, run, action, scopes, immutable globs, manifest,
//!            pre-image list
//!   rest     the pre-images' bytes, one after another, in the list's order
//! ```

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use craik_kernel::{Envelope, KeyRing, Signer};
use serde::{Deserialize, Serialize};

use crate::run::manifest::{self, Manifest, Preimages, SavedManifest, SavedPreimage, Scope};

/// The record family's directory in a run's store.
pub const DIR: &str = "precommand";
/// What the record's envelope says it holds (never a receipt's type).
pub const PAYLOAD_TYPE: &str = "application/vnd.craik.precommand+json; version=0.1.0";
const SCHEMA: &str = "craik.precommand";
/// What a command's findings' envelope says they hold.
pub const FINDINGS_PAYLOAD_TYPE: &str =
    "application/vnd.craik.command-findings+json; version=0.1.0";
const FINDINGS_SCHEMA: &str = "craik.command_findings";
const VERSION: &str = "0.1.0";

/// The store name of `action`'s record (`precommand/<action>.pre`); `None` for an id that is
/// not a plain file name (ids are the host's own: `action_<step>_<n>`).
pub fn name(action: &str) -> Option<String> {
    let plain = !action.is_empty()
        && action.len() <= 128
        && action
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    plain.then(|| format!("{DIR}/{action}.pre"))
}

/// The action a record's file name belongs to (`<action>.pre`).
pub fn action_of(file_name: &str) -> Option<&str> {
    file_name.strip_suffix(".pre").filter(|a| name(a).is_some())
}

/// What a command is checked against, as persisted.
#[derive(Debug)]
pub struct Record {
    pub scopes: Vec<Scope>,
    pub immutable: craik_kernel::ImmutablePaths,
    pub before: Manifest,
    pub pre: Preimages,
}

/// Why a pre-command record could not be written or used.
#[derive(Debug, thiserror::Error)]
pub enum PrecommandError {
    #[error("action id `{0}` cannot name a file")]
    Name(String),
    #[error("the record could not be encoded: {0}")]
    Encode(String),
    #[error("the record has no envelope line")]
    NoEnvelope,
    #[error("its envelope is malformed: {0}")]
    Envelope(String),
    #[error("its envelope is of type `{0}`, not a pre-command record")]
    PayloadType(String),
    #[error("signed by `{0}`, a key this home does not trust")]
    UnknownKey(String),
    #[error("its signature does not verify")]
    Signature,
    #[error("it is bound to run `{run}` action `{action}`, not this one")]
    Elsewhere { run: String, action: String },
    #[error("its content does not match its signed sha256 (edited or torn)")]
    Digest,
    #[error("its header is malformed: {0}")]
    Header(String),
    #[error("its schema is `{schema}` version `{version}`, not {SCHEMA} {VERSION}")]
    Schema { schema: String, version: String },
    #[error("its immutable paths do not compile: {0}")]
    Immutable(String),
    #[error(transparent)]
    Saved(#[from] manifest::SavedError),
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Binding {
    run_id: String,
    action: String,
    sha256: String,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    schema: String,
    version: String,
    run_id: String,
    action: String,
    scopes: Vec<String>,
    immutable: Vec<String>,
    manifest: SavedManifest,
    preimages: Vec<SavedPreimage>,
    /// Protected files too large to keep (their changes cannot be put back).
    skipped: Vec<String>,
}

/// The record's bytes, signed by `signer`.
pub fn encode(
    run_id: &str,
    action: &str,
    scopes: &[Scope],
    immutable: &craik_kernel::ImmutablePaths,
    before: &Manifest,
    pre: &Preimages,
    signer: &dyn Signer,
) -> Result<Vec<u8>, PrecommandError> {
    let (list, blobs) = pre.saved();
    let header = Header {
        schema: SCHEMA.into(),
        version: VERSION.into(),
        run_id: run_id.into(),
        action: action.into(),
        scopes: scopes.iter().map(Scope::pattern).collect(),
        immutable: immutable.globs().to_vec(),
        manifest: before.saved(),
        preimages: list,
        skipped: pre.skipped.clone(),
    };
    let mut body =
        serde_json::to_vec(&header).map_err(|e| PrecommandError::Encode(e.to_string()))?;
    body.push(b'\n');
    for blob in blobs {
        body.extend_from_slice(blob);
    }
    seal(PAYLOAD_TYPE, run_id, action, body, signer)
}

/// `body` behind an envelope line signed by `signer` that binds it (its sha256) to `run_id`'s
/// `action`, under `payload_type`.
fn seal(
    payload_type: &str,
    run_id: &str,
    action: &str,
    body: Vec<u8>,
    signer: &dyn Signer,
) -> Result<Vec<u8>, PrecommandError> {
    let binding = Binding {
        run_id: run_id.into(),
        action: action.into(),
        sha256: crate::run::exec::digest(&body),
    };
    let payload =
        serde_json::to_vec(&binding).map_err(|e| PrecommandError::Encode(e.to_string()))?;
    let sig = signer.sign(&craik_kernel::pae(payload_type, &payload));
    let mut out = Envelope::new(payload_type, &payload, signer.key_id(), &sig)
        .to_line()
        .map_err(PrecommandError::Encode)?;
    out.extend_from_slice(&body);
    Ok(out)
}

/// The body [`seal`] sealed in `bytes`, verified: `payload_type`, a key of `keys`, bound to
/// `run_id`'s `action`, its content as signed.
fn open<'a>(
    payload_type: &str,
    bytes: &'a [u8],
    run_id: &str,
    action: &str,
    keys: &KeyRing,
) -> Result<&'a [u8], PrecommandError> {
    let newline = bytes
        .iter()
        .position(|b| *b == b'\n')
        .ok_or(PrecommandError::NoEnvelope)?;
    let (line, body) = bytes.split_at(newline);
    let body = body.get(1..).unwrap_or_default();
    let envelope: Envelope =
        serde_json::from_slice(line).map_err(|e| PrecommandError::Envelope(e.to_string()))?;
    if envelope.payload_type != payload_type {
        return Err(PrecommandError::PayloadType(envelope.payload_type));
    }
    let [signature] = envelope.signatures.as_slice() else {
        return Err(PrecommandError::Envelope(
            "not exactly one signature".into(),
        ));
    };
    let key = keys
        .get(&signature.keyid)
        .ok_or_else(|| PrecommandError::UnknownKey(signature.keyid.clone()))?;
    let payload = STANDARD
        .decode(&envelope.payload)
        .map_err(|e| PrecommandError::Envelope(e.to_string()))?;
    let sig: [u8; 64] = STANDARD
        .decode(&signature.sig)
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or(PrecommandError::Signature)?;
    key.verify_strict(
        &craik_kernel::pae(payload_type, &payload),
        &ed25519_dalek::Signature::from_bytes(&sig),
    )
    .map_err(|_| PrecommandError::Signature)?;
    let binding: Binding =
        serde_json::from_slice(&payload).map_err(|e| PrecommandError::Envelope(e.to_string()))?;
    if binding.run_id != run_id || binding.action != action {
        return Err(PrecommandError::Elsewhere {
            run: binding.run_id,
            action: binding.action,
        });
    }
    if crate::run::exec::digest(body) != binding.sha256 {
        return Err(PrecommandError::Digest);
    }
    Ok(body)
}

/// The record in `bytes`, verified: signed by a key of `keys`, for `run_id`'s `action`, its
/// content as signed. Nothing of a record that fails is returned.
pub fn decode(
    bytes: &[u8],
    run_id: &str,
    action: &str,
    keys: &KeyRing,
) -> Result<Record, PrecommandError> {
    let body = open(PAYLOAD_TYPE, bytes, run_id, action, keys)?;
    let newline = body
        .iter()
        .position(|b| *b == b'\n')
        .ok_or_else(|| PrecommandError::Header("no header line".into()))?;
    let (head, blob) = body.split_at(newline);
    let blob = blob.get(1..).unwrap_or_default();
    let header: Header =
        serde_json::from_slice(head).map_err(|e| PrecommandError::Header(e.to_string()))?;
    if header.schema != SCHEMA || header.version != VERSION {
        return Err(PrecommandError::Schema {
            schema: header.schema,
            version: header.version,
        });
    }
    if header.run_id != run_id || header.action != action {
        return Err(PrecommandError::Elsewhere {
            run: header.run_id,
            action: header.action,
        });
    }
    let immutable = if header.immutable == ["**"] {
        craik_kernel::ImmutablePaths::everything()
    } else {
        craik_kernel::ImmutablePaths::new(&header.immutable).map_err(PrecommandError::Immutable)?
    };
    Ok(Record {
        scopes: header
            .scopes
            .iter()
            .map(|p| Scope::from_pattern(p))
            .collect(),
        immutable,
        before: Manifest::from_saved(header.manifest)?,
        pre: Preimages::from_saved(header.preimages, blob, header.skipped)?,
    })
}

/// The store name of `action`'s findings (`precommand/<action>.found`): what the check after
/// its command found, persisted before anything is undone.
pub fn findings_name(action: &str) -> Option<String> {
    name(action).map(|n| format!("{}.found", n.trim_end_matches(".pre")))
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Findings {
    schema: String,
    version: String,
    run_id: String,
    action: String,
    changes: Vec<manifest::SavedChange>,
}

/// What the check after `action`'s command found (before undoing any of it), signed by
/// `signer`.
pub fn encode_findings(
    run_id: &str,
    action: &str,
    changes: &[manifest::FileChange],
    signer: &dyn Signer,
) -> Result<Vec<u8>, PrecommandError> {
    let findings = Findings {
        schema: FINDINGS_SCHEMA.into(),
        version: VERSION.into(),
        run_id: run_id.into(),
        action: action.into(),
        changes: changes.iter().map(manifest::FileChange::saved).collect(),
    };
    let body = serde_json::to_vec(&findings).map_err(|e| PrecommandError::Encode(e.to_string()))?;
    seal(FINDINGS_PAYLOAD_TYPE, run_id, action, body, signer)
}

/// The findings in `bytes`, verified as [`decode`] verifies a record.
pub fn decode_findings(
    bytes: &[u8],
    run_id: &str,
    action: &str,
    keys: &KeyRing,
) -> Result<Vec<manifest::FileChange>, PrecommandError> {
    let body = open(FINDINGS_PAYLOAD_TYPE, bytes, run_id, action, keys)?;
    let findings: Findings =
        serde_json::from_slice(body).map_err(|e| PrecommandError::Header(e.to_string()))?;
    if findings.schema != FINDINGS_SCHEMA || findings.version != VERSION {
        return Err(PrecommandError::Schema {
            schema: findings.schema,
            version: findings.version,
        });
    }
    if findings.run_id != run_id || findings.action != action {
        return Err(PrecommandError::Elsewhere {
            run: findings.run_id,
            action: findings.action,
        });
    }
    findings
        .changes
        .into_iter()
        .map(|c| manifest::FileChange::from_saved(c).map_err(PrecommandError::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn signer(seed: u8) -> craik_kernel::Ed25519Signer {
        craik_kernel::Ed25519Signer::from_seed(&[seed; 32])
    }

    fn ring(s: &craik_kernel::Ed25519Signer) -> KeyRing {
        let mut ring = KeyRing::new();
        ring.add(&s.public_key()).unwrap();
        ring
    }

    /// A workspace with protected files (`.git/config`, `.github/workflows/ci.yml`), a
    /// non-UTF-8 name, and a file in scope.
    fn workspace(root: &Path) {
        use std::os::unix::ffi::OsStrExt;
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join(".github/workflows")).unwrap();
        std::fs::write(root.join(".github/workflows/ci.yml"), "name: ci\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.rs"), "a").unwrap();
        std::fs::write(
            root.join("src").join(std::ffi::OsStr::from_bytes(b"n\xff")),
            "x",
        )
        .unwrap();
    }

    /// Issue 31 item 2: a record persisted before a command, read back after the workspace
    /// was changed as a killed command leaves it, settles exactly as the in-memory check
    /// would: protected files put back from the persisted pre-images, plants removed, what
    /// the scope allowed kept and listed.
    #[test]
    fn issue_31_a_persisted_record_settles_like_the_one_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        workspace(root);
        let before = Manifest::scan(root).unwrap();
        let immutable = craik_kernel::ImmutablePaths::new(&["docs/adr/**".into()]).unwrap();
        let pre = Preimages::take(root, &before, &immutable);
        let scopes = vec![Scope::Under("src".into())];
        let s = signer(7);
        let bytes = encode(
            "run_x",
            "action_1_0",
            &scopes,
            &immutable,
            &before,
            &pre,
            &s,
        )
        .unwrap();
        // What the command did before the kill.
        std::fs::write(root.join(".git/config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(root.join(".github/workflows/ci.yml"), "name: pwned\n").unwrap();
        std::fs::write(root.join(".envrc"), "evil").unwrap();
        std::fs::write(root.join("src/b.rs"), "b").unwrap();
        let record = decode(&bytes, "run_x", "action_1_0", &ring(&s)).unwrap();
        assert_eq!(record.scopes, scopes);
        assert!(record.immutable.covers("docs/adr/1.md"));
        let after = Manifest::scan(root).unwrap();
        let changes = manifest::settle(
            root,
            &record.before,
            &after,
            &record.scopes,
            &record.immutable,
            &record.pre,
        );
        let got: Vec<(&str, &str, bool, bool)> = changes
            .iter()
            .map(|c| {
                (
                    c.path.as_str(),
                    c.change.as_str(),
                    c.forbidden.is_some(),
                    matches!(c.restored, Some(Ok(()))),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (".envrc", "created", true, true),
                (".git/config", "changed", true, true),
                (".git/hooks/pre-commit", "created", true, true),
                (".github/workflows/ci.yml", "changed", true, true),
                ("src/b.rs", "created", false, false),
            ]
        );
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join(".github/workflows/ci.yml")).unwrap(),
            "name: ci\n"
        );
        assert!(!root.join(".envrc").exists());
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(root.join("src/b.rs").exists());
    }

    /// A record is used only as signed: any byte changed, another key, another run or
    /// action, a receipt's payload type — refused, and nothing of it is returned.
    #[test]
    fn issue_31_a_record_that_does_not_verify_is_never_used() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        workspace(root);
        let before = Manifest::scan(root).unwrap();
        let immutable = craik_kernel::ImmutablePaths::default();
        let pre = Preimages::take(root, &before, &immutable);
        let scopes = vec![Scope::All];
        let s = signer(7);
        let bytes = encode(
            "run_x",
            "action_1_0",
            &scopes,
            &immutable,
            &before,
            &pre,
            &s,
        )
        .unwrap();
        let keys = ring(&s);
        assert!(decode(&bytes, "run_x", "action_1_0", &keys).is_ok());
        // Every byte after the envelope is covered by its sha256; a byte of the envelope
        // line breaks its JSON, payload or signature.
        let mut tried = 0;
        for i in (0..bytes.len()).step_by(7) {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                decode(&bad, "run_x", "action_1_0", &keys).is_err(),
                "byte {i} changed and still accepted"
            );
            tried += 1;
        }
        assert!(tried > 10);
        assert!(matches!(
            decode(&bytes, "run_x", "action_1_0", &ring(&signer(8))),
            Err(PrecommandError::UnknownKey(_))
        ));
        assert!(matches!(
            decode(&bytes, "run_y", "action_1_0", &keys),
            Err(PrecommandError::Elsewhere { .. })
        ));
        assert!(matches!(
            decode(&bytes, "run_x", "action_1_1", &keys),
            Err(PrecommandError::Elsewhere { .. })
        ));
        // Pre-images replaced by someone without the key: the digest catches it.
        let mut swapped = bytes.clone();
        let at = swapped
            .windows(b"[core]\n".len())
            .rposition(|w| w == b"[core]\n")
            .unwrap();
        swapped[at + 1] = b'C';
        assert!(matches!(
            decode(&swapped, "run_x", "action_1_0", &keys),
            Err(PrecommandError::Digest)
        ));
        assert!(name("action_1_0").is_some());
        assert!(name("../x").is_none() && name("a/b").is_none() && name("").is_none());
        assert_eq!(action_of("action_1_0.pre"), Some("action_1_0"));
        assert_eq!(action_of(".action_1_0.pre.tmp-12"), None);
    }

    /// Issue 31 item 2: the check after a command persists its findings before undoing; an
    /// undo cut short (here: only the first removal done) is finished from them, whatever was
    /// already undone, and they still name everything the command did. A record cannot pass
    /// for findings, nor findings for a record.
    #[test]
    fn issue_31_an_undo_cut_short_is_finished_from_its_persisted_findings() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        workspace(root);
        let before = Manifest::scan(root).unwrap();
        let immutable = craik_kernel::ImmutablePaths::default();
        let pre = Preimages::take(root, &before, &immutable);
        let scopes = vec![Scope::Under("src".into())];
        let s = signer(7);
        let keys = ring(&s);
        // The command: a git directory planted in scope, a protected file rewritten.
        std::fs::create_dir_all(root.join("src/v/objects")).unwrap();
        std::fs::write(root.join("src/v/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("src/v/config"), "[core]\n\tpager = evil\n").unwrap();
        std::fs::write(root.join(".git/config"), "[core]\n\tfsmonitor = evil\n").unwrap();
        let after = Manifest::scan(root).unwrap();
        let found = manifest::findings(root, &before, &after, &scopes, &immutable, &pre);
        let bytes = encode_findings("run_x", "action_1_0", &found, &s).unwrap();
        // Cut short: the first removal only (what is not a marker goes first).
        std::fs::remove_file(root.join("src/v/config")).unwrap();
        let mut again = decode_findings(&bytes, "run_x", "action_1_0", &keys).unwrap();
        assert_eq!(
            again.iter().map(|c| &c.path).collect::<Vec<_>>(),
            found.iter().map(|c| &c.path).collect::<Vec<_>>()
        );
        manifest::undo(root, &before, &mut again, &pre);
        let forbidden: Vec<(&str, bool)> = again
            .iter()
            .filter(|c| c.forbidden.is_some())
            .map(|c| (c.path.as_str(), matches!(c.restored, Some(Ok(())))))
            .collect();
        assert_eq!(
            forbidden,
            vec![
                (".git/config", true),
                ("src/v/HEAD", true),
                ("src/v/config", true),
                ("src/v/objects", true),
            ]
        );
        for gone in ["src/v/HEAD", "src/v/config", "src/v/objects"] {
            assert!(
                std::fs::symlink_metadata(root.join(gone)).is_err(),
                "{gone}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            "[core]\n"
        );
        // Run once more: nothing left to do, every entry still undone.
        manifest::undo(root, &before, &mut again, &pre);
        assert!(
            again
                .iter()
                .filter(|c| c.forbidden.is_some())
                .all(|c| matches!(c.restored, Some(Ok(()))))
        );
        let record = encode(
            "run_x",
            "action_1_0",
            &scopes,
            &immutable,
            &before,
            &pre,
            &s,
        )
        .unwrap();
        assert!(matches!(
            decode_findings(&record, "run_x", "action_1_0", &keys),
            Err(PrecommandError::PayloadType(_))
        ));
        assert!(matches!(
            decode(&bytes, "run_x", "action_1_0", &keys),
            Err(PrecommandError::PayloadType(_))
        ));
    }
}
