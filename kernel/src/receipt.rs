//! Signed receipts: the payload, its canonical bytes, the DSSE envelope, the chain and its
//! RFC 9162 checkpoints, and offline verification of a whole journal.
//!
//! Owns: what exactly is signed and how it is checked. Must not: read or write files, read a
//! clock, or hold a key longer than the [`Signer`] it is given.
//!
//! - Payload bytes are RFC 8785 canonical JSON (`serde_jcs`), with no floats and integers
//!   within ±(2^53−1).
//! - Each receipt is a DSSE envelope signed with ed25519 over the DSSE pre-authentication
//!   encoding; a journal is one envelope per line.
//! - Receipt `n` names the hash of receipt `n−1` in `prev`; checkpoints sign the tree size and
//!   the RFC 9162 Merkle root over every receipt hash so far.
//! - Verification checks every signature (`verify_strict`) *before* parsing the payload it
//!   covers, and reports the first failure with its line and sequence number.

mod dsse;
mod journal;
mod merkle;
mod note;
mod payload;
mod proof;
mod signer;
mod verify;

pub use dsse::{CHECKPOINT_PAYLOAD_TYPE, Envelope, RECEIPT_PAYLOAD_TYPE, Signature, pae};
pub use journal::{JournalError, JournalWriter, ReceiptDraft};
pub use merkle::{MerkleRange, leaf_hash, node_hash};
pub use note::{
    OpenedNote, checkpoint_note, note_key_hash, note_verifier_key, open_checkpoint_note, open_note,
    parse_note_verifier_key,
};
pub use payload::{
    Checkpoint, DecidedBy, DecidedByKind, MAX_SAFE_INTEGER, ReceiptPayload, canonical_bytes,
    check_json_numbers, payload_schema_text, receipt_hash,
};
pub use proof::{
    JournalTree, consistency_proof, inclusion_proof, parse_digest, tree_root, verify_consistency,
    verify_inclusion,
};
pub use signer::{Ed25519Signer, KeyRing, Signer, key_id_of, spki_der};
pub use verify::{
    Failure, Report, Verifier, VerifyOptions, open_checkpoint_line, verify_journal,
    verify_journal_with, verify_open_journal,
};
