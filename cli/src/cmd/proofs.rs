//! `craik receipts prove` and `craik receipts consistency`: RFC 9162 inclusion and
//! consistency proofs over verified journals, offline.

use std::path::{Path, PathBuf};

use craik_kernel::JournalTree;
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

#[derive(Serialize)]
struct Consistency {
    old: String,
    current: String,
    run_id: Option<String>,
    old_size: u64,
    old_root: String,
    new_size: u64,
    new_root: String,
    /// RFC 9162 §2.1.4 consistency proof, `sha256:` hex.
    proof: Vec<String>,
    consistent: bool,
    /// When not consistent: the first receipt (seq) at which the two differ, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    diverges_at_seq: Option<u64>,
}

/// `craik receipts consistency OLD CURRENT`: that CURRENT extends the saved copy OLD (the
/// tree OLD's last checkpoint signs is a prefix of the tree CURRENT's last checkpoint signs).
pub(crate) fn consistency(
    out: &mut Out,
    format: Format,
    old: &str,
    current: &str,
    keys: &[PathBuf],
    home: &Path,
) -> Result<Exit, Failure> {
    let (old_path, new_path) = (
        super::receipts::resolve(old, home)?,
        super::receipts::resolve(current, home)?,
    );
    let old_tree = verified(out, &old_path, keys, home)?;
    let new_tree = verified(out, &new_path, keys, home)?;
    let checkpoint = |tree: &JournalTree, path: &Path| {
        tree.last_checkpoint()
            .map(|(_, c)| c.clone())
            .ok_or_else(|| {
                Failure::usage(format!(
                    "{}: the journal has no checkpoint yet",
                    path.display()
                ))
            })
    };
    let (old_cp, new_cp) = (
        checkpoint(&old_tree, &old_path)?,
        checkpoint(&new_tree, &new_path)?,
    );
    let digest = |text: &str| {
        craik_kernel::parse_digest(text)
            .ok_or_else(|| Failure::internal(format!("checkpoint root `{text}`")))
    };
    let (old_root, new_root) = (digest(&old_cp.root_hash)?, digest(&new_cp.root_hash)?);
    let new_size = usize::try_from(new_cp.tree_size).unwrap_or(usize::MAX);
    let old_size = usize::try_from(old_cp.tree_size).unwrap_or(usize::MAX);
    let same_run = old_tree.run_id == new_tree.run_id;
    let (proof, consistent) = if !same_run || old_size == 0 || old_size > new_size {
        (Vec::new(), same_run && old_size == 0)
    } else {
        let leaves = new_tree.leaves.get(..new_size).ok_or_else(|| {
            Failure::internal(format!(
                "{}: a checkpoint past the receipts",
                new_path.display()
            ))
        })?;
        let proof = craik_kernel::consistency_proof(leaves, old_size)
            .ok_or_else(|| Failure::internal("no consistency proof for sizes in range"))?;
        let ok = craik_kernel::verify_consistency(
            old_cp.tree_size,
            new_cp.tree_size,
            &old_root,
            &new_root,
            &proof,
        );
        (proof, ok)
    };
    let diverges_at_seq = (!consistent)
        .then(|| {
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
        current: new_path.display().to_string(),
        run_id: new_tree.run_id.clone(),
        old_size: old_cp.tree_size,
        old_root: old_cp.root_hash.clone(),
        new_size: new_cp.tree_size,
        new_root: new_cp.root_hash.clone(),
        proof: proof.iter().map(|h| format!("sha256:{}", hex(h))).collect(),
        consistent,
        diverges_at_seq,
    };
    match format {
        Format::Json | Format::Junit => out.json(&report)?,
        Format::Human => {
            out.line(format_args!(
                "saved copy: tree size {}, root {} (checkpoint {})",
                old_cp.tree_size, old_cp.root_hash, old_cp.index
            ))?;
            out.line(format_args!(
                "current:    tree size {}, root {} (checkpoint {})",
                new_cp.tree_size, new_cp.root_hash, new_cp.index
            ))?;
            if consistent {
                out.line(format_args!(
                    "consistency proof (RFC 9162 §2.1.4), {} hashes:",
                    report.proof.len()
                ))?;
                for h in &report.proof {
                    out.line(format_args!("  {h}"))?;
                }
                out.line("consistent: the current journal extends the saved copy")?;
            } else if !same_run {
                out.line("NOT CONSISTENT: the two journals are of different runs")?;
            } else if old_size > new_size {
                out.line("NOT CONSISTENT: the saved copy is longer than the current journal (it was cut short)")?;
            } else {
                out.line(format_args!(
                    "NOT CONSISTENT: the current journal rewrote history{}",
                    diverges_at_seq
                        .map(|s| format!(" (first difference at seq {s})"))
                        .unwrap_or_default()
                ))?;
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
    let path = super::receipts::resolve(run, home)?;
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
