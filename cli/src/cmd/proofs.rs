//! `craik receipts prove` and `craik receipts consistency`: RFC 9162 inclusion and
//! consistency proofs over verified journals, offline.

use std::path::{Path, PathBuf};

use craik_kernel::{JournalTree, KeyRing};
use serde::Serialize;

use crate::exit::{Exit, Failure};
use crate::output::{Format, Out};

/// A journal read and verified (signatures, chain, every checkpoint's root; open journals
/// accepted: a saved copy of a running journal has no final checkpoint).
fn verified(
    out: &mut Out,
    path: &Path,
    keys: &[PathBuf],
    home: &Path,
) -> Result<JournalTree, Failure> {
    let bytes =
        std::fs::read(path).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    let (trusted, _) = super::receipts::trusted_keys(out, keys, home, Some(path))?;
    // A home's journals (and its ledger) verify with the keys its ledger's rotations vouch
    // for, when a trusted key holds part of that ledger.
    let homes = super::receipts::home_checks(&[home.to_path_buf()], &trusted);
    let ring = super::receipts::ring_for(&homes, path, &trusted);
    let report = craik_kernel::verify_open_journal(&bytes, ring);
    if let Some(failure) = &report.failure {
        return Err(Failure::invalid(
            format!(
                "{}: line {}: {}: {}",
                path.display(),
                failure.line,
                failure.what,
                craik_contracts::one_line(&failure.why)
            ),
            Vec::new(),
        )
        .with_exit(Exit::CheckFailed));
    }
    JournalTree::from_verified(&bytes)
        .map_err(|e| Failure::invalid(format!("{}: {e}", path.display()), Vec::new()))
}

fn hex(bytes: &[u8; 32]) -> String {
    craik_kernel::to_hex(bytes)
}

#[derive(Serialize)]
struct Inclusion {
    journal: String,
    run_id: Option<String>,
    seq: u64,
    leaf_index: u64,
    receipt_hash: String,
    checkpoint_index: u64,
    checkpoint_line: usize,
    tree_size: u64,
    root_hash: String,
    /// The audit path, bottom up, `sha256:` hex.
    proof: Vec<String>,
    verified: bool,
}

/// `craik receipts prove RUN SEQ`: the inclusion proof of receipt `seq` against the journal's
/// last checkpoint (or `checkpoint`), checked before it is printed.
pub(crate) fn prove(
    out: &mut Out,
    format: Format,
    run: &str,
    seq: u64,
    checkpoint: Option<u64>,
    keys: &[PathBuf],
    home: &Path,
) -> Result<Exit, Failure> {
    let path = super::receipts::resolve(run, home)?;
    let tree = verified(out, &path, keys, home)?;
    let index =
        tree.seqs.iter().position(|s| *s == seq).ok_or_else(|| {
            Failure::usage(format!("{}: no receipt with seq {seq}", path.display()))
        })?;
    let (line, cp) = match checkpoint {
        Some(want) => tree
            .checkpoints
            .iter()
            .find(|(_, c)| c.index == want)
            .ok_or_else(|| {
                Failure::usage(format!(
                    "{}: no checkpoint with index {want}",
                    path.display()
                ))
            })?,
        None => tree.last_checkpoint().ok_or_else(|| {
            Failure::usage(format!(
                "{}: the journal has no checkpoint yet",
                path.display()
            ))
        })?,
    };
    let size = usize::try_from(cp.tree_size).unwrap_or(usize::MAX);
    if index >= size {
        return Err(Failure::usage(format!(
            "{}: receipt seq {seq} is not covered by checkpoint {} (tree size {})",
            path.display(),
            cp.index,
            cp.tree_size
        )));
    }
    let leaves = tree.leaves.get(..size).ok_or_else(|| {
        Failure::internal(format!(
            "{}: a checkpoint past the receipts",
            path.display()
        ))
    })?;
    let proof = craik_kernel::inclusion_proof(leaves, index)
        .ok_or_else(|| Failure::internal("no inclusion proof for a covered receipt"))?;
    let root = craik_kernel::parse_digest(&cp.root_hash)
        .ok_or_else(|| Failure::internal(format!("checkpoint root `{}`", cp.root_hash)))?;
    let leaf = leaves
        .get(index)
        .ok_or_else(|| Failure::internal("a leaf past the tree"))?;
    let ok = craik_kernel::verify_inclusion(index as u64, cp.tree_size, leaf, &proof, &root);
    let report = Inclusion {
        journal: path.display().to_string(),
        run_id: tree.run_id.clone(),
        seq,
        leaf_index: index as u64,
        receipt_hash: tree
            .receipt_hashes
            .get(index)
            .cloned()
            .ok_or_else(|| Failure::internal("a receipt hash past the receipts"))?,
        checkpoint_index: cp.index,
        checkpoint_line: *line,
        tree_size: cp.tree_size,
        root_hash: cp.root_hash.clone(),
        proof: proof.iter().map(|h| format!("sha256:{}", hex(h))).collect(),
        verified: ok,
    };
    match format {
        Format::Json | Format::Junit => out.json(&report)?,
        Format::Human => {
            out.line(format_args!(
                "receipt seq {seq} (leaf {index}, {}) is in checkpoint {} (line {line}): tree size {}, root {}",
                report.receipt_hash, cp.index, cp.tree_size, cp.root_hash
            ))?;
            out.line(format_args!(
                "inclusion proof (RFC 9162 §2.1.3), bottom up:"
            ))?;
            for h in &report.proof {
                out.line(format_args!("  {h}"))?;
            }
            out.line(format_args!(
                "{}",
                if ok { "verified" } else { "NOT VERIFIED" }
            ))?;
        }
    }
    Ok(if ok { Exit::Ok } else { Exit::CheckFailed })
}

/// What the older state of a journal is, as a witness or an auditor kept it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum OldForm {
    /// A copy of the journal (or of a prefix of it): verified whole.
    Journal,
    /// Only its last checkpoint line (a DSSE envelope): its signature verified.
    Checkpoint,
    /// The C2SP signed note `craik receipts checkpoint` printed: its signature verified.
    Note,
}

/// The older state, verified: the tree size and root it signs and what it came from.
struct OldState {
    form: OldForm,
    size: u64,
    root: [u8; 32],
    root_hash: String,
    /// The journal id it names (a journal or checkpoint line), or the note's origin.
    names: String,
    /// For a journal: every leaf, to name the first difference.
    tree: Option<JournalTree>,
    /// For a note: the key name that signed it.
    key_name: Option<String>,
    /// Where its size and root come from, for people (`checkpoint 3`, `note`).
    from: String,
}

#[derive(Serialize)]
struct Consistency {
    old: String,
    /// `journal`, `checkpoint` (a checkpoint line) or `note` (a C2SP signed note).
    old_form: OldForm,
    /// The note's origin (a note only).
    #[serde(skip_serializing_if = "Option::is_none")]
    old_origin: Option<String>,
    /// The key name whose signature on the note verified (a note only).
    #[serde(skip_serializing_if = "Option::is_none")]
    old_key_name: Option<String>,
    current: String,
    run_id: Option<String>,
    old_size: u64,
    old_root: String,
    new_size: u64,
    new_root: String,
    /// RFC 9162 §2.1.4 consistency proof, `sha256:` hex.
    proof: Vec<String>,
    consistent: bool,
    /// When not consistent, why: `other_journal`, `cut_short` or `rewritten`.
    #[serde(skip_serializing_if = "Option::is_none")]
    inconsistency: Option<&'static str>,
    /// When rewritten: the root the current journal's first `old_size` receipts hash to.
    #[serde(skip_serializing_if = "Option::is_none")]
    current_root_at_old_size: Option<String>,
    /// When not consistent and the old state is a journal: the first receipt (seq) at which
    /// the two differ, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    diverges_at_seq: Option<u64>,
}

/// `CURRENT` of `receipts consistency` (and `RUN` of `receipts checkpoint`): a Craik home (a
/// directory holding `ledger.jsonl` and no `receipts.jsonl`) means its ledger; anything
/// else as `receipts::resolve` reads it.
fn resolve_journal_or_ledger(name: &str, home: &Path) -> Result<PathBuf, Failure> {
    let dir = Path::new(name);
    let ledger = dir.join(craik_host::ledger::LEDGER_NAME);
    if dir.is_dir() && !dir.join(super::receipts::JOURNAL_NAME).is_file() && ledger.is_file() {
        return Ok(ledger);
    }
    super::receipts::resolve(name, home)
}

/// Reads OLD in whichever form it was kept, and verifies it: a journal whole (with `ring`,
/// the current journal's keys), a checkpoint line by its signature under `ring`, a note by a
/// signature under a key of `ring` or a `--verifier-key`.
fn old_state(
    out: &mut Out,
    path: &Path,
    keys: &[PathBuf],
    home: &Path,
    ring: &KeyRing,
    verifier_keys: &[(String, [u8; 32])],
) -> Result<OldState, Failure> {
    let bytes =
        std::fs::read(path).map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    let invalid = |why: String| {
        Failure::invalid(format!("{}: {why}", path.display()), Vec::new())
            .with_exit(Exit::CheckFailed)
    };
    let digest = |text: &str| {
        craik_kernel::parse_digest(text)
            .ok_or_else(|| Failure::internal(format!("checkpoint root `{text}`")))
    };
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    let one_line = !body.contains(&b'\n');
    if bytes.first() == Some(&b'{')
        && one_line
        && serde_json::from_slice::<craik_kernel::Envelope>(body)
            .is_ok_and(|e| e.payload_type == craik_kernel::CHECKPOINT_PAYLOAD_TYPE)
    {
        let cp = craik_kernel::open_checkpoint_line(&bytes, ring).map_err(|f| {
            invalid(format!(
                "line 1: {}: {} (a checkpoint line kept by a witness)",
                f.what, f.why
            ))
        })?;
        return Ok(OldState {
            form: OldForm::Checkpoint,
            size: cp.tree_size,
            root: digest(&cp.root_hash)?,
            root_hash: cp.root_hash.clone(),
            names: cp.run_id.clone(),
            tree: None,
            key_name: None,
            from: format!("checkpoint line, index {}", cp.index),
        });
    }
    if bytes.first() != Some(&b'{') && bytes.windows(5).any(|w| w == "\n\n\u{2014}".as_bytes()) {
        let text = std::str::from_utf8(&bytes)
            .map_err(|_| invalid("a signed note that is not UTF-8".into()))?;
        let note = craik_kernel::open_checkpoint_note(text, &ring.public_keys(), verifier_keys)
            .map_err(|why| invalid(format!("signed note: {why}")))?;
        return Ok(OldState {
            form: OldForm::Note,
            size: note.tree_size,
            root: note.root,
            root_hash: format!("sha256:{}", hex(&note.root)),
            names: note.origin.clone(),
            tree: None,
            key_name: Some(note.key_name.clone()),
            from: format!("note, origin {}, signed as {}", note.origin, note.key_name),
        });
    }
    let tree = verified(out, path, keys, home)?;
    let (_, cp) = tree.last_checkpoint().cloned().ok_or_else(|| {
        Failure::usage(format!(
            "{}: the journal has no checkpoint yet",
            path.display()
        ))
    })?;
    Ok(OldState {
        form: OldForm::Journal,
        size: cp.tree_size,
        root: digest(&cp.root_hash)?,
        root_hash: cp.root_hash.clone(),
        names: tree.run_id.clone().unwrap_or_default(),
        tree: Some(tree),
        key_name: None,
        from: format!("checkpoint {}", cp.index),
    })
}

/// `craik receipts consistency OLD CURRENT`: that CURRENT extends OLD — a saved copy of the
/// journal, its last checkpoint line, or the C2SP note a witness kept (the tree OLD signs is
/// a prefix of the tree CURRENT's last checkpoint signs). CURRENT may be a home: its ledger.
#[expect(clippy::too_many_arguments, reason = "one per command-line option")]
pub(crate) fn consistency(
    out: &mut Out,
    format: Format,
    old: &str,
    current: &str,
    keys: &[PathBuf],
    verifier_keys: &[String],
    origin: Option<&str>,
    home: &Path,
) -> Result<Exit, Failure> {
    let new_path = resolve_journal_or_ledger(current, home)?;
    let old_path = super::receipts::resolve(old, home)?;
    let named: Vec<(String, [u8; 32])> = verifier_keys
        .iter()
        .map(|k| craik_kernel::parse_note_verifier_key(k).map_err(Failure::usage))
        .collect::<Result<_, _>>()?;
    let new_tree = verified(out, &new_path, keys, home)?;
    // The old state is checked with the keys the current journal verified with.
    let (trusted, _) = super::receipts::trusted_keys(out, keys, home, Some(&new_path))?;
    let homes = super::receipts::home_checks(&[home.to_path_buf()], &trusted);
    let ring = super::receipts::ring_for(&homes, &new_path, &trusted);
    let old_state = old_state(out, &old_path, keys, home, ring, &named)?;
    let (_, new_cp) = new_tree.last_checkpoint().cloned().ok_or_else(|| {
        Failure::usage(format!(
            "{}: the journal has no checkpoint yet",
            new_path.display()
        ))
    })?;
    let new_root = craik_kernel::parse_digest(&new_cp.root_hash)
        .ok_or_else(|| Failure::internal(format!("checkpoint root `{}`", new_cp.root_hash)))?;
    let new_id = new_tree.run_id.clone().unwrap_or_default();
    // Which journal the old state is of: the journal id it signs, or for a note its origin,
    // which must be the one asked for (`--origin`), else end with `/<journal id>` (the default
    // origin, `craik/<key>/<journal id>`). The root binds the receipts (each names its run)
    // whatever the origin says; this only names the mistake.
    let same_journal = match (old_state.form, origin) {
        (OldForm::Note, Some(want)) => old_state.names == want,
        (OldForm::Note, None) => old_state.names.ends_with(&format!("/{new_id}")),
        _ => old_state.names == new_id,
    };
    let new_size = usize::try_from(new_cp.tree_size).unwrap_or(usize::MAX);
    let old_size = usize::try_from(old_state.size).unwrap_or(usize::MAX);
    let leaves = new_tree.leaves.get(..new_size).ok_or_else(|| {
        Failure::internal(format!(
            "{}: a checkpoint past the receipts",
            new_path.display()
        ))
    })?;
    let (proof, consistent, inconsistency) = if !same_journal {
        (Vec::new(), false, Some("other_journal"))
    } else if old_size > new_size {
        (Vec::new(), false, Some("cut_short"))
    } else if old_size == 0 {
        // The empty tree is a prefix of every tree (RFC 9162 has no proof for it).
        let empty = craik_kernel::tree_root(&[]);
        let ok = old_state.root == empty;
        (Vec::new(), ok, (!ok).then_some("rewritten"))
    } else {
        let proof = craik_kernel::consistency_proof(leaves, old_size)
            .ok_or_else(|| Failure::internal("no consistency proof for sizes in range"))?;
        let ok = craik_kernel::verify_consistency(
            old_state.size,
            new_cp.tree_size,
            &old_state.root,
            &new_root,
            &proof,
        );
        (proof, ok, (!ok).then_some("rewritten"))
    };
    let current_root_at_old_size = (inconsistency == Some("rewritten"))
        .then(|| leaves.get(..old_size))
        .flatten()
        .map(|prefix| format!("sha256:{}", hex(&craik_kernel::tree_root(prefix))));
    let diverges_at_seq = (!consistent)
        .then(|| {
            let old_tree = old_state.tree.as_ref()?;
            old_tree
                .leaves
                .iter()
                .zip(&new_tree.leaves)
                .position(|(a, b)| a != b)
                .and_then(|i| old_tree.seqs.get(i).copied())
        })
        .flatten();
    let report = Consistency {
        old: old_path.display().to_string(),
        old_form: old_state.form,
        old_origin: (old_state.form == OldForm::Note).then(|| old_state.names.clone()),
        old_key_name: old_state.key_name.clone(),
        current: new_path.display().to_string(),
        run_id: new_tree.run_id.clone(),
        old_size: old_state.size,
        old_root: old_state.root_hash.clone(),
        new_size: new_cp.tree_size,
        new_root: new_cp.root_hash.clone(),
        proof: proof.iter().map(|h| format!("sha256:{}", hex(h))).collect(),
        consistent,
        inconsistency,
        current_root_at_old_size,
        diverges_at_seq,
    };
    match format {
        Format::Json | Format::Junit => out.json(&report)?,
        Format::Human => {
            let saved = match old_state.form {
                OldForm::Journal => "saved copy:",
                OldForm::Checkpoint | OldForm::Note => "witness:   ",
            };
            out.line(format_args!(
                "{saved} tree size {}, root {} ({})",
                old_state.size, old_state.root_hash, old_state.from
            ))?;
            out.line(format_args!(
                "current:    tree size {}, root {} (checkpoint {})",
                new_cp.tree_size, new_cp.root_hash, new_cp.index
            ))?;
            match inconsistency {
                None => {
                    out.line(format_args!(
                        "consistency proof (RFC 9162 §2.1.4), {} hashes:",
                        report.proof.len()
                    ))?;
                    for h in &report.proof {
                        out.line(format_args!("  {h}"))?;
                    }
                    out.line("consistent: the current journal extends the saved state")?;
                }
                Some("other_journal") => out.line(format_args!(
                    "NOT CONSISTENT: the saved state is of `{}`, the current journal is `{new_id}`",
                    craik_contracts::one_line(&old_state.names)
                ))?,
                Some("cut_short") => out.line(
                    "NOT CONSISTENT: the saved state is longer than the current journal (it was cut short)",
                )?,
                Some(_) => out.line(format_args!(
                    "NOT CONSISTENT: the current journal rewrote history{}",
                    diverges_at_seq
                        .map(|s| format!(" (first difference at seq {s})"))
                        .or_else(|| report.current_root_at_old_size.as_ref().map(|r| format!(
                            " (its first {} receipts hash to {r})",
                            old_state.size
                        )))
                        .unwrap_or_default()
                ))?,
            }
        }
    }
    Ok(if consistent {
        Exit::Ok
    } else {
        Exit::CheckFailed
    })
}

#[derive(Serialize)]
struct NoteOut {
    journal: String,
    origin: String,
    key_name: String,
    tree_size: u64,
    root_hash: String,
    /// What a witness is configured with to check the note.
    verifier_key: String,
    note: String,
}

/// `craik receipts checkpoint RUN`: the journal's last checkpoint as a C2SP signed note
/// (`tlog-checkpoint`), signed by the home's key, for a witness or log to co-sign.
pub(crate) fn checkpoint_note(
    out: &mut Out,
    format: Format,
    run: &str,
    origin: Option<&str>,
    key_name: Option<&str>,
    home: &Path,
) -> Result<Exit, Failure> {
    use craik_kernel::Signer as _;
    let path = resolve_journal_or_ledger(run, home)?;
    let private = home.join("keys").join(craik_host::keys::PRIVATE_NAME);
    craik_host::keys::hold_key_use(&home.join("keys"))?;
    let signer = craik_host::keys::read_signer(&private)?;
    // The journal must verify under this very key: a note vouches for what it signed.
    let public_pem = craik_host::keys::default_public(home);
    let tree = verified(out, &path, &[public_pem], home)?;
    let (_, cp) = tree.last_checkpoint().ok_or_else(|| {
        Failure::usage(format!(
            "{}: the journal has no checkpoint yet",
            path.display()
        ))
    })?;
    if cp.key_id != signer.key_id() {
        return Err(Failure::usage(format!(
            "{}: its last checkpoint is signed by `{}`, not by this home's key `{}`",
            path.display(),
            cp.key_id,
            signer.key_id()
        )));
    }
    let fingerprint: String = signer
        .key_id()
        .trim_start_matches("sha256:")
        .chars()
        .take(16)
        .collect();
    let key_name = key_name.map_or_else(|| format!("craik/{fingerprint}"), str::to_owned);
    let origin = origin.map_or_else(
        || format!("craik/{fingerprint}/{}", cp.run_id),
        str::to_owned,
    );
    let root = craik_kernel::parse_digest(&cp.root_hash)
        .ok_or_else(|| Failure::internal(format!("checkpoint root `{}`", cp.root_hash)))?;
    let bad = |e: String| Failure::usage(e);
    let note = craik_kernel::checkpoint_note(&origin, cp.tree_size, &root, &key_name, &signer)
        .map_err(bad)?;
    let verifier_key =
        craik_kernel::note_verifier_key(&key_name, &signer.public_key()).map_err(bad)?;
    let report = NoteOut {
        journal: path.display().to_string(),
        origin,
        key_name,
        tree_size: cp.tree_size,
        root_hash: cp.root_hash.clone(),
        verifier_key,
        note,
    };
    match format {
        Format::Json | Format::Junit => out.json(&report)?,
        Format::Human => {
            out.diag(format_args!(
                "craik: verifier key (give it to the witness): {}",
                report.verifier_key
            ))?;
            out.text(&report.note)?;
        }
    }
    Ok(Exit::Ok)
}
