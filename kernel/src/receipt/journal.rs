//! Producing journal lines: chained, signed receipts and periodic checkpoints.
//!
//! Sans-io: [`JournalWriter`] returns the exact bytes to append; the host appends them (and
//! fsyncs) and never rewrites a line.

use craik_contracts::{PolicyProfile, ReceiptResult};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::policy::{Decision, Mode};
use crate::receipt::dsse::{CHECKPOINT_PAYLOAD_TYPE, Envelope, RECEIPT_PAYLOAD_TYPE, pae};
use crate::receipt::merkle::MerkleRange;
use crate::receipt::payload::{
    Checkpoint, DecidedBy, MAX_SAFE_INTEGER, ReceiptPayload, canonical_bytes, raw_hash,
    receipt_hash,
};
use crate::receipt::signer::{KeyRing, Signer};
use crate::receipt::verify::{VerifyOptions, verify_journal_with};
use base64::Engine as _;

/// Why a line could not be produced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("the journal is closed")]
    Closed,
    #[error("sequence number would exceed 2^53−1")]
    Overflow,
    #[error("time `{now}` is before the previous entry's `{previous}`")]
    ClockWentBack { now: String, previous: String },
    #[error("receipt cannot be signed: {0}")]
    Payload(String),
}

/// The fields of a receipt the caller supplies; the writer adds the chain fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceiptDraft {
    pub task_id: String,
    pub actor: String,
    pub capability: String,
    pub target: String,
    pub policy_profile: PolicyProfile,
    pub fail_open: bool,
    pub reason: String,
    pub result: ReceiptResult,
    pub redacted: bool,
    pub policy_set: String,
    pub request_hash: String,
    pub decision: Decision,
    pub determining_policies: Vec<String>,
    pub decided_by: DecidedBy,
    pub mode: Mode,
    /// The action decided or performed, when there is one.
    pub action: Option<String>,
}

/// Appends receipts to one run's journal.
#[derive(Debug)]
pub struct JournalWriter {
    run_id: String,
    next_seq: u64,
    prev: Option<String>,
    tree: MerkleRange,
    last_time: Option<OffsetDateTime>,
    checkpoint_every: u64,
    checkpoints: u64,
    closed: bool,
}

/// Checks a checkpoint envelope's one signature (`verify_strict`, over its DSSE
/// pre-authentication encoding) against a trusted key.
fn check_checkpoint_signature(
    envelope: &Envelope,
    payload: &[u8],
    keys: &KeyRing,
) -> Result<(), String> {
    let [signature] = envelope.signatures.as_slice() else {
        return Err("the last checkpoint has no single signature".into());
    };
    let key = keys.get(&signature.keyid).ok_or_else(|| {
        format!(
            "the last checkpoint is signed by an untrusted key `{}`",
            signature.keyid
        )
    })?;
    let sig: [u8; 64] = base64::engine::general_purpose::STANDARD
        .decode(&signature.sig)
        .ok()
        .and_then(|s| s.try_into().ok())
        .ok_or("the last checkpoint's signature is not 64 base64 bytes")?;
    key.verify_strict(
        &pae(CHECKPOINT_PAYLOAD_TYPE, payload),
        &ed25519_dalek::Signature::from_bytes(&sig),
    )
    .map_err(|_| "the last checkpoint's signature does not verify".to_owned())
}

impl JournalWriter {
    /// A new, empty journal; a checkpoint follows every `checkpoint_every` receipts (0: only
    /// when closing).
    pub fn new(run_id: &str, checkpoint_every: u64) -> Self {
        Self {
            run_id: run_id.to_owned(),
            next_seq: 0,
            prev: None,
            tree: MerkleRange::new(),
            last_time: None,
            checkpoint_every,
            checkpoints: 0,
            closed: false,
        }
    }

    /// Continues an existing journal: verifies `bytes` (open journals accepted) with `keys`,
    /// then rebuilds the chain, the Merkle tree and the clock from it. A closed journal, a torn
    /// last line or any verification failure is refused; the caller decides what to do with a
    /// torn tail (it is never silently dropped here).
    pub fn resume(
        run_id: &str,
        bytes: &[u8],
        keys: &KeyRing,
        checkpoint_every: u64,
    ) -> Result<Self, String> {
        if bytes.is_empty() {
            // Nothing was ever acknowledged: a crash before the first receipt.
            return Ok(Self::new(run_id, checkpoint_every));
        }
        let options = VerifyOptions {
            allow_open: true,
            ..VerifyOptions::default()
        };
        let report = verify_journal_with(bytes, keys, options, &mut |_, _| {});
        if let Some(f) = &report.failure {
            return Err(format!("line {}: {}: {}", f.line, f.what, f.why));
        }
        if report.closed {
            return Err("the journal is closed".into());
        }
        if report.run_id.as_deref().is_some_and(|id| id != run_id) {
            return Err(format!(
                "the journal belongs to run `{}`",
                report.run_id.unwrap_or_default()
            ));
        }
        let mut writer = Self::new(run_id, checkpoint_every);
        for line in bytes.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let envelope: Envelope =
                serde_json::from_slice(line).map_err(|e| format!("re-reading: {e}"))?;
            let payload = base64::engine::general_purpose::STANDARD
                .decode(&envelope.payload)
                .map_err(|e| format!("re-reading: {e}"))?;
            let created_at = if envelope.payload_type == RECEIPT_PAYLOAD_TYPE {
                let receipt: ReceiptPayload =
                    serde_json::from_slice(&payload).map_err(|e| format!("re-reading: {e}"))?;
                writer.tree.push(&raw_hash(&payload));
                writer.prev = Some(receipt_hash(&payload));
                writer.next_seq = receipt.seq + 1;
                receipt.created_at
            } else {
                let checkpoint: Checkpoint =
                    serde_json::from_slice(&payload).map_err(|e| format!("re-reading: {e}"))?;
                writer.checkpoints = checkpoint.index + 1;
                checkpoint.created_at
            };
            writer.last_time = Some(
                OffsetDateTime::parse(&created_at, &Rfc3339)
                    .map_err(|e| format!("re-reading `{created_at}`: {e}"))?,
            );
        }
        Ok(writer)
    }

    /// Continues a journal whose last line is a non-final checkpoint (the home ledger writes
    /// one after every entry), checking one signature: that checkpoint's. Its signed Merkle
    /// root commits to the payload bytes of every receipt before it, so recomputing the root
    /// from the lines authenticates them all (hashing every line, one signature check: the
    /// cost of an append stays flat in the journal's size). Sequence, chain and run id are
    /// checked as the lines are read; anything else wrong is refused.
    pub fn resume_at_checkpoint(
        run_id: &str,
        bytes: &[u8],
        keys: &KeyRing,
        checkpoint_every: u64,
    ) -> Result<Self, String> {
        let mut writer = Self::new(run_id, checkpoint_every);
        let mut last: Option<(Envelope, Vec<u8>, Checkpoint)> = None;
        for (n, line) in bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
        {
            let at = |e: &dyn std::fmt::Display| format!("line {}: {e}", n + 1);
            let envelope: Envelope = serde_json::from_slice(line).map_err(|e| at(&e))?;
            let payload = base64::engine::general_purpose::STANDARD
                .decode(&envelope.payload)
                .map_err(|e| at(&e))?;
            let created_at = if envelope.payload_type == RECEIPT_PAYLOAD_TYPE {
                let receipt: ReceiptPayload =
                    serde_json::from_slice(&payload).map_err(|e| at(&e))?;
                if receipt.seq != writer.next_seq
                    || receipt.prev != writer.prev
                    || receipt.run_id != run_id
                {
                    return Err(at(&"seq, prev or run_id does not continue the chain"));
                }
                writer.tree.push(&raw_hash(&payload));
                writer.prev = Some(receipt_hash(&payload));
                writer.next_seq = receipt.seq + 1;
                last = None;
                receipt.created_at
            } else {
                let checkpoint: Checkpoint =
                    serde_json::from_slice(&payload).map_err(|e| at(&e))?;
                if checkpoint.index != writer.checkpoints || checkpoint.run_id != run_id {
                    return Err(at(
                        &"checkpoint index or run_id does not continue the journal",
                    ));
                }
                writer.checkpoints = checkpoint.index + 1;
                let created_at = checkpoint.created_at.clone();
                last = Some((envelope, payload, checkpoint));
                created_at
            };
            writer.last_time = Some(
                OffsetDateTime::parse(&created_at, &Rfc3339)
                    .map_err(|e| at(&format!("`{created_at}`: {e}")))?,
            );
        }
        if writer.next_seq == 0 && last.is_none() {
            return Ok(writer);
        }
        let Some((envelope, payload, checkpoint)) = last else {
            return Err("the last line is not a checkpoint".into());
        };
        check_checkpoint_signature(&envelope, &payload, keys)?;
        let root = format!("sha256:{}", crate::policy::hex(&writer.tree.root()));
        if checkpoint.is_final
            || checkpoint.tree_size != writer.tree.size()
            || checkpoint.root_hash != root
            || checkpoint.last_receipt_hash != writer.prev
        {
            return Err(
                "the last checkpoint does not match the entries before it (or is final)".into(),
            );
        }
        Ok(writer)
    }

    /// Continues a journal from its last line, a non-final checkpoint, and the Merkle
    /// subtree roots `nodes` (largest first) a cache kept: the checkpoint's signature is
    /// checked, and the nodes must fold to its signed root, so they are authenticated by it;
    /// sequence, previous hash, checkpoint count and clock come from the checkpoint itself.
    /// Constant cost, whatever the journal's size; any mismatch is refused (the caller then
    /// reads the whole journal with [`JournalWriter::resume_at_checkpoint`]).
    pub fn resume_from_head(
        run_id: &str,
        last_line: &[u8],
        nodes: &[[u8; 32]],
        keys: &KeyRing,
        checkpoint_every: u64,
    ) -> Result<Self, String> {
        let envelope: Envelope = serde_json::from_slice(last_line).map_err(|e| e.to_string())?;
        if envelope.payload_type != CHECKPOINT_PAYLOAD_TYPE {
            return Err("the last line is not a checkpoint".into());
        }
        let payload = base64::engine::general_purpose::STANDARD
            .decode(&envelope.payload)
            .map_err(|e| e.to_string())?;
        check_checkpoint_signature(&envelope, &payload, keys)?;
        let checkpoint: Checkpoint = serde_json::from_slice(&payload).map_err(|e| e.to_string())?;
        let tree = MerkleRange::from_nodes(checkpoint.tree_size, nodes)
            .ok_or("the cached tree does not fit the checkpoint's size")?;
        if checkpoint.is_final
            || checkpoint.run_id != run_id
            || checkpoint.root_hash != format!("sha256:{}", crate::policy::hex(&tree.root()))
        {
            return Err("the cached tree does not match the last checkpoint".into());
        }
        let mut writer = Self::new(run_id, checkpoint_every);
        writer.tree = tree;
        writer.next_seq = checkpoint.tree_size;
        writer.prev = checkpoint.last_receipt_hash;
        writer.checkpoints = checkpoint.index + 1;
        writer.last_time = Some(
            OffsetDateTime::parse(&checkpoint.created_at, &Rfc3339)
                .map_err(|e| format!("`{}`: {e}", checkpoint.created_at))?,
        );
        Ok(writer)
    }

    /// The Merkle subtree roots so far (for [`JournalWriter::resume_from_head`]).
    pub fn tree_nodes(&self) -> Vec<[u8; 32]> {
        self.tree.nodes()
    }

    /// The Merkle root over the receipts so far, `sha256:<hex>` (what a checkpoint now would
    /// sign as `root_hash`).
    pub fn root_hash(&self) -> String {
        format!("sha256:{}", crate::policy::hex(&self.tree.root()))
    }

    /// The time of the last entry written or read.
    pub fn last_time(&self) -> Option<OffsetDateTime> {
        self.last_time
    }

    /// A non-final checkpoint now (e.g. when a run parks awaiting approval), so a truncation
    /// of what is already written is caught even while the journal stays open.
    pub fn checkpoint_now(
        &mut self,
        now: OffsetDateTime,
        signer: &dyn Signer,
    ) -> Result<Vec<u8>, JournalError> {
        if self.closed {
            return Err(JournalError::Closed);
        }
        self.checkpoint(false, now, signer)
    }

    /// The id the next receipt will get.
    pub fn next_id(&self) -> String {
        format!(
            "receipt_{}_{}",
            self.run_id.trim_start_matches("run_"),
            self.next_seq
        )
    }

    /// Receipts written so far.
    pub fn len(&self) -> u64 {
        self.next_seq
    }

    /// True before the first receipt.
    pub fn is_empty(&self) -> bool {
        self.next_seq == 0
    }

    /// The hash of the last receipt written.
    pub fn last_hash(&self) -> Option<&str> {
        self.prev.as_deref()
    }

    fn stamp(&mut self, now: OffsetDateTime) -> Result<String, JournalError> {
        let now = now.to_offset(time::UtcOffset::UTC);
        if let Some(previous) = self.last_time.filter(|p| now < *p) {
            return Err(JournalError::ClockWentBack {
                now: now.format(&Rfc3339).unwrap_or_else(|_| now.to_string()),
                previous: previous
                    .format(&Rfc3339)
                    .unwrap_or_else(|_| previous.to_string()),
            });
        }
        let text = now.format(&Rfc3339).map_err(|e| {
            JournalError::Payload(format!("time `{now}` has no RFC 3339 form: {e}"))
        })?;
        self.last_time = Some(now);
        Ok(text)
    }

    /// Signs the next receipt; returns its line (and, every `checkpoint_every` receipts, a
    /// checkpoint line after it).
    pub fn append(
        &mut self,
        draft: ReceiptDraft,
        now: OffsetDateTime,
        signer: &dyn Signer,
    ) -> Result<Vec<u8>, JournalError> {
        if self.closed {
            return Err(JournalError::Closed);
        }
        if self.next_seq > MAX_SAFE_INTEGER {
            return Err(JournalError::Overflow);
        }
        let created_at = self.stamp(now)?;
        let seq = self.next_seq;
        // Issue 30: the free text a receipt carries goes through the secret rules before it
        // is signed (callers redact what they know is untrusted; this holds for every caller).
        // A rule set that did not load withholds it whole.
        let mut redacted = draft.redacted;
        let mut clean = |text: String| match crate::redact_checked(&text) {
            Ok(r) if r.replaced == 0 => text,
            Ok(r) => {
                redacted = true;
                r.text
            }
            Err(_) => {
                redacted = true;
                crate::REDACTED.to_owned()
            }
        };
        let target = clean(draft.target);
        let reason = clean(draft.reason);
        let mut result = draft.result;
        result.summary = clean(result.summary);
        let payload = ReceiptPayload {
            schema: "craik.capability_receipt".into(),
            version: craik_contracts::CONTRACT_VERSION.into(),
            id: self.next_id(),
            task_id: draft.task_id,
            actor: draft.actor,
            capability: draft.capability,
            target,
            policy_profile: draft.policy_profile,
            fail_open: draft.fail_open,
            reason,
            result,
            redacted,
            created_at,
            seq,
            prev: self.prev.clone(),
            run_id: self.run_id.clone(),
            policy_set: draft.policy_set,
            request_hash: draft.request_hash,
            decision: draft.decision,
            determining_policies: draft.determining_policies,
            decided_by: draft.decided_by,
            mode: draft.mode,
            action: draft.action,
            kernel_version: crate::KERNEL_VERSION.into(),
            key_id: signer.key_id().to_owned(),
        };
        let bytes = canonical_bytes(&payload).map_err(JournalError::Payload)?;
        let sig = signer.sign(&pae(RECEIPT_PAYLOAD_TYPE, &bytes));
        let mut line = Envelope::new(RECEIPT_PAYLOAD_TYPE, &bytes, signer.key_id(), &sig)
            .to_line()
            .map_err(JournalError::Payload)?;
        let hash = receipt_hash(&bytes);
        self.tree.push(&raw_hash(&bytes));
        self.prev = Some(hash);
        self.next_seq += 1;
        if self.checkpoint_every > 0 && self.next_seq.is_multiple_of(self.checkpoint_every) {
            line.extend(self.checkpoint(false, now, signer)?);
        }
        Ok(line)
    }

    /// The closing checkpoint; nothing can be appended after it.
    pub fn close(
        &mut self,
        now: OffsetDateTime,
        signer: &dyn Signer,
    ) -> Result<Vec<u8>, JournalError> {
        if self.closed {
            return Err(JournalError::Closed);
        }
        let line = self.checkpoint(true, now, signer)?;
        self.closed = true;
        Ok(line)
    }

    fn checkpoint(
        &mut self,
        is_final: bool,
        now: OffsetDateTime,
        signer: &dyn Signer,
    ) -> Result<Vec<u8>, JournalError> {
        let created_at = self.stamp(now)?;
        let checkpoint = Checkpoint {
            schema: "craik.receipt_checkpoint".into(),
            version: craik_contracts::CONTRACT_VERSION.into(),
            run_id: self.run_id.clone(),
            index: self.checkpoints,
            tree_size: self.tree.size(),
            root_hash: format!("sha256:{}", crate::policy::hex(&self.tree.root())),
            last_receipt_hash: self.prev.clone(),
            is_final,
            created_at,
            key_id: signer.key_id().to_owned(),
        };
        let bytes = canonical_bytes(&checkpoint).map_err(JournalError::Payload)?;
        self.checkpoints += 1;
        let sig = signer.sign(&pae(CHECKPOINT_PAYLOAD_TYPE, &bytes));
        Envelope::new(CHECKPOINT_PAYLOAD_TYPE, &bytes, signer.key_id(), &sig)
            .to_line()
            .map_err(JournalError::Payload)
    }
}
