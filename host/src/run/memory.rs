//! Memory proposals from runs, and the reviews that approve or reject them.

use std::path::PathBuf;

use craik_contracts::{MemoryProposal, ProposalStatus, TaskRun, Timestamp};
use craik_kernel::{DecidedByKind, Decision, Ed25519Signer, KeyRing};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::Error;
use crate::run::approvals::{Review, reviewer, write_record, write_review};
use crate::run::store::{Home, RUN, RunStoreExt};

pub fn write_memory(home: &Home, proposal: &MemoryProposal) -> Result<(), Error> {
    write_record(&home.memory(), &proposal.id, proposal)
}

/// Every memory proposal under `home`, by id.
pub fn proposals(home: &Home) -> Result<Vec<MemoryProposal>, Error> {
    let dir = home.memory();
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::usage(format!("{}: {e}", dir.display()))),
    };
    for entry in entries.flatten() {
        let p = entry.path();
        if p.extension().is_some_and(|e| e == "json") {
            let bytes =
                std::fs::read(&p).map_err(|e| Error::usage(format!("{}: {e}", p.display())))?;
            let proposal =
                craik_contracts::decode_single::<MemoryProposal>(&bytes).map_err(|problems| {
                    let mut lines = problems
                        .into_iter()
                        .map(|q| format!("{}: {q}", p.display()));
                    let first = lines.next().unwrap_or_default();
                    Error::invalid(first, lines.collect())
                })?;
            out.push(proposal);
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// A reviewer's decision on memory proposal `id`: checked (a reviewer who is not the runner
/// that proposed it, a reason, pending, evidence to approve), signed as its own review
/// journal, then recorded. Returns the decided proposal and the review journal's path.
pub fn decide_memory(
    home: &Home,
    (id, by, reason): (&str, &str, &str),
    approve: bool,
    signer: &Ed25519Signer,
    now: OffsetDateTime,
) -> Result<(MemoryProposal, PathBuf), Error> {
    let mut m = proposals(home)?
        .into_iter()
        .find(|m| m.id == id)
        .ok_or_else(|| {
            Error::usage(format!(
                "memory proposal `{}`: not found",
                craik_contracts::Truncated(id)
            ))
        })?;
    // The reviewer must not be the runner that proposed it: a proposal from a run whose state
    // cannot be read is refused rather than checked against nobody.
    let runner = match m.run_id.as_deref() {
        Some(run_id) => {
            home.run_dir(run_id)?
                .read_json::<TaskRun>(RUN)
                .map_err(|e| {
                    Error::invalid(
                        format!("{id}: cannot tell which runner proposed it: {e}"),
                        Vec::new(),
                    )
                })?
                .runner_id
        }
        None => "runner_unknown".to_owned(),
    };
    reviewer(by, &runner)?;
    if reason.trim().is_empty() {
        return Err(Error::usage("--reason: must not be empty"));
    }
    if m.status != ProposalStatus::Pending {
        return Err(Error::refused(format!(
            "{id} is already {}",
            m.status.as_str()
        )));
    }
    if approve && m.evidence.is_empty() {
        return Err(Error::refused(format!(
            "{id}: has no evidence; a proposal without evidence cannot be approved (reject it)"
        )));
    }
    // The review is bound to the proposal, its run and its content, and signed under the
    // run's own policy set and profile (from the run's verified journal, never a plain file).
    let run_id = m.run_id.clone().ok_or_else(|| {
        Error::refused(format!(
            "{id}: names no run; only proposals a run made can be reviewed"
        ))
    })?;
    // The run may have closed before a key rotation: its ledger vouches for the earlier key.
    let ring = {
        use craik_kernel::Signer as _;
        crate::ledger::home_ring(&home.root, &signer.public_key())?
    };
    let first = crate::run::signed::verified_receipts(&home.run_dir(&run_id)?, &ring)
        .map_err(|why| Error::invalid(format!("{id}: {why}"), Vec::new()))?
        .into_iter()
        .next()
        .filter(|r| r.capability == crate::run::signed::RUN_INPUTS)
        .ok_or_else(|| {
            Error::invalid(
                format!("{id}: run `{run_id}` has no signed run.inputs receipt"),
                Vec::new(),
            )
        })?;
    // The signed review decides (outside testing round 13: a decision killed after its
    // review journal was written, before the proposal file, could never be finished): the
    // file is brought in line with it and the ledger entry recorded; the same decision asked
    // again succeeds, another is refused naming the reviewer. A review journal that never got
    // its bytes decided nothing and goes.
    let review_dir = home.reviews().join(review_id(id));
    let review_path = review_dir.join(crate::journal::JOURNAL_NAME);
    match std::fs::read(&review_path) {
        Ok(bytes) if bytes.is_empty() => std::fs::remove_dir_all(&review_dir)
            .map_err(|e| Error::io(format!("{}: {e}", review_dir.display())))?,
        Ok(bytes) => {
            let review = signed_memory_review(home, &ring, id)
                .map_err(|why| Error::invalid(why, Vec::new()))?
                .ok_or_else(|| Error::internal(format!("{}: unreadable", review_path.display())))?;
            m.status = if review.approved {
                ProposalStatus::Approved
            } else {
                ProposalStatus::Rejected
            };
            m.decided_by = Some(review.by.clone());
            m.decided_at = serde_json::from_value(json!(review.reviewed_at)).ok();
            m.decision_reason = Some(review.reason.clone());
            write_memory(home, &m)?;
            crate::run::approvals::record_review(home, &review_id(id), &bytes, signer, now)?;
            if review.approved == approve && review.by == by {
                return Ok((m, review_path));
            }
            return Err(Error::refused(format!(
                "{id} is already {} by {}",
                m.status.as_str(),
                review.by
            )));
        }
        Err(_) if review_dir.exists() => std::fs::remove_dir_all(&review_dir)
            .map_err(|e| Error::io(format!("{}: {e}", review_dir.display())))?,
        Err(_) => {}
    }
    // No review here: a decision the ledger records was deleted, never decided again
    // (outside testing round 14: a deleted rejection was approved by another reviewer).
    crate::run::approvals::refuse_if_decided(home, &ring, &review_id(id), "memory proposal")?;
    // Only what the run proposed is reviewed: a file edited since is refused, naming why.
    if let Some(why) = memory_tampered(home, &ring, &m) {
        return Err(Error::invalid(format!("{why}; not signed"), Vec::new()));
    }
    let content =
        content_digest(&m).map_err(|e| Error::invalid(format!("{id}: {e}"), Vec::new()))?;
    let request_hash = memory_request_hash(id, &run_id, &content).map_err(Error::internal)?;
    let target = format!("{}/{}", m.fact.scope.as_str(), m.fact.entity);
    let mut draft = Review {
        task_id: &m.task_id,
        by,
        capability: "memory.write",
        target: &target,
        profile: first.policy_profile,
        request_hash: &request_hash,
        approve,
        reason,
        policy_set: &first.policy_set,
    }
    .draft();
    draft.action = Some(id.to_owned());
    let meta = &mut draft.result.metadata.0;
    meta.insert("proposal".into(), json!(id));
    meta.insert("run_id".into(), json!(run_id));
    meta.insert("content_sha256".into(), json!(content));
    let journal = write_review(home, &review_id(id), draft, signer, now)?;
    m.status = if approve {
        ProposalStatus::Approved
    } else {
        ProposalStatus::Rejected
    };
    m.decided_by = Some(by.to_owned());
    m.decided_at = Some(Timestamp::new(now));
    m.decision_reason = Some(reason.to_owned());
    write_memory(home, &m)?;
    Ok((m, journal))
}

/// The review journal's directory name of proposal `id` (`reviews/review_<id without memprop_>/`).
pub fn review_id(id: &str) -> String {
    format!("review_{}", id.trim_start_matches("memprop_"))
}

/// The proposal as its run wrote it: every field, with `status` `pending` and the review
/// fields (`decided_by`, `decided_at`, `decision_reason`) and `handoff_id` null.
fn bare(m: &MemoryProposal) -> MemoryProposal {
    let mut bare = m.clone();
    bare.status = ProposalStatus::Pending;
    bare.decided_by = None;
    bare.decided_at = None;
    bare.decision_reason = None;
    bare.handoff_id = None;
    bare
}

/// `sha256:` of a proposal's content (`content_sha256`): the **RFC 8785** canonical JSON of
/// the proposal as its run wrote it ([`bare`]) — keys sorted by UTF-16 code units at every
/// level, and numbers in their ECMAScript form, so a float has one text an independent
/// verifier reproduces (`0.00001`, `1e-7`; issue 31 item 5: the compact form wrote `1e-5`,
/// Python `1e-05`). docs/receipts.md, "Memory reviews"; vector `docs/vectors/memory-content/`.
pub fn content_digest(m: &MemoryProposal) -> Result<String, String> {
    let value = serde_json::to_value(bare(m)).map_err(|e| format!("{}: {e}", m.id))?;
    let bytes = serde_jcs::to_vec(&value).map_err(|e| format!("{}: {e}", m.id))?;
    Ok(crate::run::exec::digest(&bytes))
}

/// `content_sha256` as runs before issue 31 signed it: the proposal's compact JSON in the
/// contract's field order (`serde_json`'s float text). Accepted when checking what such a run
/// signed; never written.
fn legacy_content_digest(m: &MemoryProposal) -> Result<String, String> {
    let bytes = serde_json::to_vec(&bare(m)).map_err(|e| format!("{}: {e}", m.id))?;
    Ok(crate::run::exec::digest(&bytes))
}

/// Whether proposal `m`'s content hashes to one of `signed` (by the current recipe, or the
/// one runs signed before it): `Ok(Ok(()))`, or `Ok(Err(current digest))` to name when not.
fn content_signed(m: &MemoryProposal, signed: &[String]) -> Result<Result<(), String>, String> {
    let current = content_digest(m)?;
    if signed.contains(&current) || signed.contains(&legacy_content_digest(m)?) {
        return Ok(Ok(()));
    }
    Ok(Err(current))
}

/// A memory review's `request_hash`: `sha256:` of the canonical JSON
/// `{"content_sha256", "proposal", "run_id"}`.
pub fn memory_request_hash(proposal: &str, run_id: &str, content: &str) -> Result<String, String> {
    crate::digest::Digest::of_canonical(&json!({
        "content_sha256": content,
        "proposal": proposal,
        "run_id": run_id,
    }))
    .map(|d| d.as_str().to_owned())
}

/// What a memory proposal's verified review journal signs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedMemoryReview {
    pub approved: bool,
    pub by: String,
    /// The reviewer's reason, as signed.
    pub reason: String,
    pub run_id: String,
    pub content_sha256: String,
    pub reviewed_at: String,
}

/// The signed review of proposal `id` (`reviews/review_<id>/`), verified with `ring`:
/// `Ok(None)` when there is no review journal; `Err` naming why when there is one that does
/// not verify, is not closed, or does not bind this proposal (its id, run and content hash,
/// and a `request_hash` made from them).
pub fn signed_memory_review(
    home: &Home,
    ring: &KeyRing,
    id: &str,
) -> Result<Option<SignedMemoryReview>, String> {
    let dir = home.reviews().join(review_id(id));
    let path = dir.join(crate::journal::JOURNAL_NAME);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let shown = format!("reviews/{}/{}", review_id(id), crate::journal::JOURNAL_NAME);
    let report = craik_kernel::verify_journal(&bytes, ring, None);
    if let Some(f) = &report.failure {
        return Err(format!(
            "{shown}:{}: does not verify ({}: {})",
            f.line, f.what, f.why
        ));
    }
    if !report.closed || report.receipts != 1 {
        return Err(format!("{shown}: not one closed review"));
    }
    let receipt = crate::journal::decode_all(&bytes)
        .into_iter()
        .find_map(|(_, d)| match d {
            crate::journal::Decoded::Receipt(r) => Some(r),
            _ => None,
        })
        .ok_or_else(|| format!("{shown}: holds no receipt"))?;
    let meta = &receipt.result.metadata.0;
    let text = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or_default();
    let (run_id, content) = (text("run_id"), text("content_sha256"));
    if receipt.action.as_deref() != Some(id) || text("proposal") != id {
        return Err(format!(
            "{shown}: signs a review of `{}`, not of {id}",
            craik_contracts::Truncated(receipt.action.as_deref().unwrap_or(text("proposal")))
        ));
    }
    let want = memory_request_hash(id, run_id, content)?;
    if run_id.is_empty() || content.is_empty() || receipt.request_hash != want {
        return Err(format!(
            "{shown}: its request_hash does not bind the proposal, its run and its content"
        ));
    }
    if receipt.decided_by.kind != DecidedByKind::Approval
        || !receipt.decided_by.by.starts_with("user:")
    {
        return Err(format!("{shown}: not a reviewer's decision"));
    }
    Ok(Some(SignedMemoryReview {
        approved: receipt.decision == Decision::Allow,
        by: receipt.decided_by.by.clone(),
        reason: receipt.reason.clone(),
        run_id: run_id.to_owned(),
        content_sha256: content.to_owned(),
        reviewed_at: receipt.created_at.clone(),
    }))
}

/// The content hashes its run signed when it proposed `id` (`content_sha256` of its allowed
/// `memory.propose` receipts), from `receipts` (a run's verified receipts).
pub fn proposed_contents<'a>(
    receipts: impl IntoIterator<Item = &'a craik_kernel::ReceiptPayload>,
    id: &str,
) -> Vec<String> {
    receipts
        .into_iter()
        .filter(|r| r.capability == "memory.propose" && r.action.as_deref() == Some(id))
        .filter_map(|r| {
            r.result
                .metadata
                .0
                .get("content_sha256")?
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// Why proposal `m`'s file disagrees with what is signed about it, naming the file and field:
/// the content its run signed when it proposed it (read from the run's verified journal), then
/// its review (see [`memory_tampered_given`]). `None` when it agrees.
pub fn memory_tampered(home: &Home, ring: &KeyRing, m: &MemoryProposal) -> Option<String> {
    let signed = match m.run_id.as_deref() {
        Some(run) => match home
            .run_dir(run)
            .map_err(|e| e.to_string())
            .and_then(|dir| crate::run::signed::verified_receipts(&dir, ring))
        {
            Ok(receipts) => proposed_contents(&receipts, &m.id),
            Err(why) => return Some(format!("memory/{}.json: its run: {why}", m.id)),
        },
        None => Vec::new(),
    };
    memory_tampered_given(home, ring, m, &signed)
}

/// Why proposal `m`'s file disagrees with what is signed about it, given the content hashes
/// its run signed when proposing it (`signed`; empty for a journal from before they were
/// signed): its content must be one of them, and its status, reviewer, run and content must
/// be what its review (verified with `ring`) signed. `None` when it agrees (or is pending with
/// no review).
pub fn memory_tampered_given(
    home: &Home,
    ring: &KeyRing,
    m: &MemoryProposal,
    signed: &[String],
) -> Option<String> {
    let file = format!("memory/{}.json", m.id);
    if !signed.is_empty() {
        match content_signed(m, signed) {
            Ok(Ok(())) => {}
            Ok(Err(c)) => {
                return Some(format!(
                    "{file}: its content ({c}: fact, evidence, operation, ...) is not what the run signed when it proposed it ({})",
                    signed.join(", ")
                ));
            }
            Err(e) => return Some(format!("{file}: {e}")),
        }
    }
    let review = match signed_memory_review(home, ring, &m.id) {
        Err(why) => return Some(why),
        Ok(r) => r,
    };
    let Some(r) = review else {
        return (m.status != ProposalStatus::Pending).then(|| {
            format!(
                "{file}: status `{}` but no signed review (reviews/{}/) decided it",
                m.status.as_str(),
                review_id(&m.id)
            )
        });
    };
    let signed = if r.approved {
        ProposalStatus::Approved
    } else {
        ProposalStatus::Rejected
    };
    if m.status != signed {
        return Some(format!(
            "{file}: status `{}` but its signed review says `{}` (by {})",
            m.status.as_str(),
            signed.as_str(),
            r.by
        ));
    }
    if m.decided_by.as_deref() != Some(r.by.as_str()) {
        return Some(format!(
            "{file}: decided_by `{}` but its signed review is by {}",
            craik_contracts::Truncated(m.decided_by.as_deref().unwrap_or("null")),
            r.by
        ));
    }
    if m.run_id.as_deref() != Some(r.run_id.as_str()) {
        return Some(format!(
            "{file}: run_id `{}` but its signed review names {}",
            craik_contracts::Truncated(m.run_id.as_deref().unwrap_or("null")),
            r.run_id
        ));
    }
    match content_signed(m, std::slice::from_ref(&r.content_sha256)) {
        Ok(Ok(())) => None,
        Ok(Err(c)) => Some(format!(
            "{file}: its content ({c}: fact, evidence, operation, ...) is not what the review signed ({})",
            r.content_sha256
        )),
        Err(e) => Some(format!("{file}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;

    fn vector(name: &str) -> Vec<u8> {
        std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../docs/vectors/memory-content")
                .join(name),
        )
        .unwrap()
    }

    /// Issue 31 item 5: `content_sha256` is the RFC 8785 form of the proposal as its run wrote
    /// it, floats in their ECMAScript text (`0.00001`, `1e-7`, `1e+21`), keys sorted at every
    /// level — the exact bytes and hash of docs/vectors/memory-content/, which the independent
    /// verifier reproduces too (`cli` test `receipts::issue_31_memory_content_sha256_...`).
    #[test]
    fn content_sha256_is_rfc_8785_with_ecmascript_numbers() {
        let m: MemoryProposal = craik_contracts::decode_single(&vector("proposal.json")).unwrap();
        let value = serde_json::to_value(bare(&m)).unwrap();
        let canonical = serde_jcs::to_vec(&value).unwrap();
        assert_eq!(
            String::from_utf8(canonical).unwrap(),
            String::from_utf8(vector("canonical.json")).unwrap()
        );
        let want: serde_json::Value = serde_json::from_slice(&vector("content.json")).unwrap();
        assert_eq!(
            content_digest(&m).unwrap(),
            want["content_sha256"].as_str().unwrap()
        );
        // The recipe runs signed before is another text of the same proposal: accepted when
        // checking, never written.
        let legacy = legacy_content_digest(&m).unwrap();
        assert_ne!(legacy, content_digest(&m).unwrap());
        assert_eq!(content_signed(&m, &[legacy]).unwrap(), Ok(()));
        let mut other = m.clone();
        other.fact.confidence = serde_json::from_value(serde_json::json!(0.00002)).unwrap();
        assert!(
            content_signed(&other, &[content_digest(&m).unwrap()])
                .unwrap()
                .is_err()
        );
    }
}
