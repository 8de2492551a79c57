//! Offline verification of a journal's bytes with only the trusted public keys.
//!
//! Order per line: frame (newline-terminated), envelope shape, key, signature over the DSSE
//! encoding (`verify_strict`), and only then the payload it covers. Then the chain: `seq`
//! contiguous from 0, `prev` linking each receipt to the last, timestamps non-decreasing, one
//! run id, checkpoints whose size, last hash and RFC 9162 root match what came before, and a
//! final checkpoint last. The first failure is reported precisely; nothing is repaired.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::Signature as DalekSignature;
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::receipt::dsse::{CHECKPOINT_PAYLOAD_TYPE, Envelope, RECEIPT_PAYLOAD_TYPE, pae};
use crate::receipt::journal::raw_hash;
use crate::receipt::merkle::MerkleRange;
use crate::receipt::payload::{
    Checkpoint, MAX_SAFE_INTEGER, ReceiptPayload, check_json_numbers, receipt_hash,
};
use crate::receipt::signer::KeyRing;

/// The first thing wrong with a journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// 1-based line.
    pub line: usize,
    /// The receipt's sequence number, when the line is a readable receipt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// What failed, short (`signature`, `seq`, `prev`, `checkpoint`, `torn line`, ...).
    pub what: String,
    /// Why, one line.
    pub why: String,
}

/// What verification found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub receipts: u64,
    pub checkpoints: u64,
    /// The journal ends with a final checkpoint.
    pub closed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// Hash of the last valid receipt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_hash: Option<String>,
    /// The first failure; `None` means valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
}

impl Report {
    /// True when nothing failed.
    pub fn is_valid(&self) -> bool {
        self.failure.is_none()
    }
}

struct State<'a> {
    keys: &'a KeyRing,
    policy_set: Option<&'a str>,
    report: Report,
    prev: Option<String>,
    tree: MerkleRange,
    last_time: Option<OffsetDateTime>,
    run_id: Option<String>,
}

/// Verifies a whole journal. `policy_set`, when given, must equal every receipt's.
pub fn verify_journal(bytes: &[u8], keys: &KeyRing, policy_set: Option<&str>) -> Report {
    verify_with_progress(bytes, keys, policy_set, &mut |_| {})
}

/// [`verify_journal`], calling `progress` with the number of lines done every 65 536 lines.
pub fn verify_with_progress(
    bytes: &[u8],
    keys: &KeyRing,
    policy_set: Option<&str>,
    progress: &mut dyn FnMut(usize),
) -> Report {
    let mut state = State {
        keys,
        policy_set,
        report: Report::default(),
        prev: None,
        tree: MerkleRange::new(),
        last_time: None,
        run_id: None,
    };
    if keys.is_empty() {
        state.report.failure = Some(Failure {
            line: 0,
            seq: None,
            what: "keys".into(),
            why: "no trusted public key given".into(),
        });
        return state.report;
    }
    let mut rest = bytes;
    let mut line_no = 0usize;
    while !rest.is_empty() {
        line_no += 1;
        if line_no.is_multiple_of(65_536) {
            progress(line_no);
        }
        let (line, after) = match rest.iter().position(|&b| b == b'\n') {
            Some(nl) => (
                rest.get(..nl).unwrap_or_default(),
                rest.get(nl + 1..).unwrap_or_default(),
            ),
            None => {
                return state.fail(line_no, None, "torn line", format!(
                    "last line has {} bytes and no newline: an append was cut short (crash?); the journal is not repaired",
                    rest.len()
                ));
            }
        };
        rest = after;
        if state.report.closed {
            return state.fail(
                line_no,
                None,
                "after close",
                "an entry follows the final checkpoint".into(),
            );
        }
        if let Err((seq, what, why)) = state.line(line) {
            return state.fail(line_no, seq, what, why);
        }
    }
    if line_no == 0 {
        return state.fail(0, None, "empty", "the journal has no entries".into());
    }
    if !state.report.closed {
        let n = state.report.receipts;
        return state.fail(line_no, None, "not closed", format!("journal not closed: no final checkpoint after {n} receipts (truncated, or the run is still going)"));
    }
    state.report
}

type LineError = (Option<u64>, &'static str, String);

impl State<'_> {
    fn fail(mut self, line: usize, seq: Option<u64>, what: &str, why: String) -> Report {
        self.report.failure = Some(Failure {
            line,
            seq,
            what: what.to_owned(),
            why: craik_contracts::one_line(&why),
        });
        self.report
    }

    fn line(&mut self, line: &[u8]) -> Result<(), LineError> {
        let envelope: Envelope = serde_json::from_slice(line)
            .map_err(|e| (None, "envelope", format!("not a DSSE envelope: {e}")))?;
        let [signature] = envelope.signatures.as_slice() else {
            return Err((
                None,
                "envelope",
                format!(
                    "expected exactly one signature, found {}",
                    envelope.signatures.len()
                ),
            ));
        };
        let key = self.keys.get(&signature.keyid).ok_or_else(|| {
            (
                None,
                "signature",
                format!(
                    "signed by key `{}`, which is not among the trusted keys",
                    craik_contracts::Truncated(&signature.keyid)
                ),
            )
        })?;
        let payload = STANDARD
            .decode(&envelope.payload)
            .map_err(|e| (None, "envelope", format!("payload is not base64: {e}")))?;
        let sig = STANDARD
            .decode(&signature.sig)
            .map_err(|e| (None, "signature", format!("signature is not base64: {e}")))?;
        let sig: [u8; 64] = sig.try_into().map_err(|v: Vec<u8>| {
            (
                None,
                "signature",
                format!("signature is {} bytes, expected 64", v.len()),
            )
        })?;
        let message = pae(&envelope.payload_type, &payload);
        key.verify_strict(&message, &DalekSignature::from_bytes(&sig))
            .map_err(|_| {
                (
                    None,
                    "signature",
                    "signature does not verify over the payload".to_owned(),
                )
            })?;

        // Signed by a trusted key: now the payload may be parsed.
        let json: serde_json::Value = serde_json::from_slice(&payload)
            .map_err(|e| (None, "payload", format!("signed payload is not JSON: {e}")))?;
        check_json_numbers(&json, "$").map_err(|e| (None, "payload", e))?;
        match envelope.payload_type.as_str() {
            RECEIPT_PAYLOAD_TYPE => self.receipt(json, &payload, &signature.keyid),
            CHECKPOINT_PAYLOAD_TYPE => self.checkpoint(json, &signature.keyid),
            other => Err((
                None,
                "payload",
                format!(
                    "unknown payload type `{}`",
                    craik_contracts::Truncated(other)
                ),
            )),
        }
    }

    fn time(&mut self, text: &str, seq: Option<u64>) -> Result<(), LineError> {
        let at = OffsetDateTime::parse(text, &Rfc3339)
            .map_err(|e| (seq, "created_at", format!("`{text}` is not RFC 3339: {e}")))?;
        if let Some(last) = self.last_time.filter(|last| at < *last) {
            return Err((
                seq,
                "created_at",
                format!(
                    "`{text}` is before the previous entry ({})",
                    last.format(&Rfc3339).unwrap_or_default()
                ),
            ));
        }
        self.last_time = Some(at);
        Ok(())
    }

    fn run(&mut self, run_id: &str, seq: Option<u64>) -> Result<(), LineError> {
        match &self.run_id {
            Some(first) if first != run_id => Err((
                seq,
                "run_id",
                format!("`{run_id}` differs from the journal's `{first}`"),
            )),
            Some(_) => Ok(()),
            None => {
                self.run_id = Some(run_id.to_owned());
                self.report.run_id = Some(run_id.to_owned());
                Ok(())
            }
        }
    }

    fn receipt(
        &mut self,
        json: serde_json::Value,
        payload: &[u8],
        keyid: &str,
    ) -> Result<(), LineError> {
        let receipt: ReceiptPayload = serde_json::from_value(json)
            .map_err(|e| (None, "payload", format!("not a receipt: {e}")))?;
        let seq = Some(receipt.seq);
        if receipt.schema != "craik.capability_receipt"
            || receipt.version != craik_contracts::CONTRACT_VERSION
        {
            return Err((
                seq,
                "payload",
                format!(
                    "schema `{}` version `{}`, expected craik.capability_receipt 0.1.0",
                    receipt.schema, receipt.version
                ),
            ));
        }
        if receipt.key_id != keyid {
            return Err((
                seq,
                "key_id",
                format!(
                    "payload names key `{}` but the envelope was signed by `{keyid}`",
                    receipt.key_id
                ),
            ));
        }
        let expected = self.report.receipts;
        if receipt.seq != expected || receipt.seq > MAX_SAFE_INTEGER {
            return Err((
                seq,
                "seq",
                format!(
                    "seq {} where {expected} was expected (a receipt is missing, duplicated or reordered)",
                    receipt.seq
                ),
            ));
        }
        if receipt.prev != self.prev {
            return Err((
                seq,
                "prev",
                format!(
                    "prev {} does not name the previous receipt {}",
                    receipt.prev.as_deref().unwrap_or("null"),
                    self.prev.as_deref().unwrap_or("null")
                ),
            ));
        }
        self.run(&receipt.run_id, seq)?;
        self.time(&receipt.created_at, seq)?;
        if let Some(expected) = self.policy_set.filter(|p| *p != receipt.policy_set) {
            return Err((
                seq,
                "policy_set",
                format!(
                    "receipt was decided under policy set {}, not {expected}",
                    receipt.policy_set
                ),
            ));
        }
        let hash = receipt_hash(payload);
        self.tree.push(&raw_hash(payload));
        self.prev = Some(hash.clone());
        self.report.last_hash = Some(hash);
        self.report.receipts += 1;
        Ok(())
    }

    fn checkpoint(&mut self, json: serde_json::Value, keyid: &str) -> Result<(), LineError> {
        let cp: Checkpoint = serde_json::from_value(json)
            .map_err(|e| (None, "checkpoint", format!("not a checkpoint: {e}")))?;
        if cp.schema != "craik.receipt_checkpoint"
            || cp.version != craik_contracts::CONTRACT_VERSION
        {
            return Err((
                None,
                "checkpoint",
                format!(
                    "schema `{}` version `{}`, expected craik.receipt_checkpoint 0.1.0",
                    cp.schema, cp.version
                ),
            ));
        }
        if cp.key_id != keyid {
            return Err((
                None,
                "key_id",
                format!(
                    "checkpoint names key `{}` but was signed by `{keyid}`",
                    cp.key_id
                ),
            ));
        }
        self.run(&cp.run_id, None)?;
        self.time(&cp.created_at, None)?;
        if cp.index != self.report.checkpoints {
            return Err((
                None,
                "checkpoint",
                format!(
                    "checkpoint index {} where {} was expected (a checkpoint is missing or duplicated)",
                    cp.index, self.report.checkpoints
                ),
            ));
        }
        if cp.tree_size != self.report.receipts {
            return Err((
                None,
                "checkpoint",
                format!(
                    "tree size {} but {} receipts precede it",
                    cp.tree_size, self.report.receipts
                ),
            ));
        }
        if cp.last_receipt_hash != self.prev {
            return Err((
                None,
                "checkpoint",
                "last receipt hash does not match the receipt before it".into(),
            ));
        }
        let root = format!("sha256:{}", crate::policy::hex(&self.tree.root()));
        if cp.root_hash != root {
            return Err((
                None,
                "checkpoint",
                format!(
                    "Merkle root {} does not match the receipts ({root})",
                    cp.root_hash
                ),
            ));
        }
        self.report.checkpoints += 1;
        self.report.closed = cp.is_final;
        Ok(())
    }
}
