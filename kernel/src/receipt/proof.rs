//! RFC 9162 inclusion and consistency proofs (§2.1.3, §2.1.4) over a journal's receipts, and
//! the tree a verified journal describes: its leaves and its signed checkpoints.
//!
//! Owns: computing and checking proofs. Must not: read files or trust an unverified journal —
//! [`JournalTree::from_verified`] is for bytes [`super::verify_journal`] has accepted.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::dsse::{CHECKPOINT_PAYLOAD_TYPE, Envelope, RECEIPT_PAYLOAD_TYPE};
use super::merkle::{leaf_hash, node_hash};
use super::payload::{Checkpoint, raw_hash};

/// The largest power of two strictly less than `n` (`n` ≥ 2): RFC 9162's split point.
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// MTH over leaf hashes (not leaf data).
fn subtree_root(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves {
        [] => sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new()).into(),
        [one] => *one,
        _ => {
            let (left, right) = leaves.split_at(split(leaves.len()));
            node_hash(&subtree_root(left), &subtree_root(right))
        }
    }
}

/// The tree head over leaf hashes (what a checkpoint's `root_hash` names).
pub fn tree_root(leaves: &[[u8; 32]]) -> [u8; 32] {
    subtree_root(leaves)
}

/// `PATH(index, leaves)` (RFC 9162 §2.1.3.1): the audit path of leaf `index`, `None` when
/// `index` is past the end.
pub fn inclusion_proof(leaves: &[[u8; 32]], index: usize) -> Option<Vec<[u8; 32]>> {
    if index >= leaves.len() {
        return None;
    }
    let mut proof = Vec::new();
    path(index, leaves, &mut proof);
    Some(proof)
}

fn path(m: usize, leaves: &[[u8; 32]], out: &mut Vec<[u8; 32]>) {
    if leaves.len() <= 1 {
        return;
    }
    let k = split(leaves.len());
    let (left, right) = leaves.split_at(k);
    if m < k {
        path(m, left, out);
        out.push(subtree_root(right));
    } else {
        path(m - k, right, out);
        out.push(subtree_root(left));
    }
}

/// Checks an inclusion proof (RFC 9162 §2.1.3.2): leaf hash `leaf` is entry `index` of the
/// tree of `size` leaves whose head is `root`.
pub fn verify_inclusion(
    index: u64,
    size: u64,
    leaf: &[u8; 32],
    proof: &[[u8; 32]],
    root: &[u8; 32],
) -> bool {
    if index >= size {
        return false;
    }
    let (mut f, mut s) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            r = node_hash(p, &r);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            r = node_hash(&r, p);
        }
        f >>= 1;
        s >>= 1;
    }
    s == 0 && r == *root
}

/// `PROOF(m, leaves)` (RFC 9162 §2.1.4.1): that the tree of the first `m` leaves is a prefix
/// of the tree of all of them. `None` unless `0 < m ≤ leaves.len()`.
pub fn consistency_proof(leaves: &[[u8; 32]], m: usize) -> Option<Vec<[u8; 32]>> {
    if m == 0 || m > leaves.len() {
        return None;
    }
    let mut proof = Vec::new();
    subproof(m, leaves, true, &mut proof);
    Some(proof)
}

fn subproof(m: usize, leaves: &[[u8; 32]], whole: bool, out: &mut Vec<[u8; 32]>) {
    let n = leaves.len();
    if m == n {
        if !whole {
            out.push(subtree_root(leaves));
        }
        return;
    }
    let k = split(n);
    let (left, right) = leaves.split_at(k);
    if m <= k {
        subproof(m, left, whole, out);
        out.push(subtree_root(right));
    } else {
        subproof(m - k, right, false, out);
        out.push(subtree_root(left));
    }
}

/// Checks a consistency proof (RFC 9162 §2.1.4.2) between the tree of `old_size` leaves with
/// head `old_root` and the tree of `new_size` leaves with head `new_root`.
pub fn verify_consistency(
    old_size: u64,
    new_size: u64,
    old_root: &[u8; 32],
    new_root: &[u8; 32],
    proof: &[[u8; 32]],
) -> bool {
    if old_size == 0 || old_size > new_size {
        return false;
    }
    if old_size == new_size {
        return proof.is_empty() && old_root == new_root;
    }
    let mut nodes: Vec<[u8; 32]> = Vec::with_capacity(proof.len() + 1);
    if old_size.is_power_of_two() {
        nodes.push(*old_root);
    }
    nodes.extend_from_slice(proof);
    let Some((first, rest)) = nodes.split_first() else {
        return false;
    };
    let (mut f, mut s) = (old_size - 1, new_size - 1);
    while f & 1 == 1 {
        f >>= 1;
        s >>= 1;
    }
    let (mut fr, mut sr) = (*first, *first);
    for c in rest {
        if s == 0 {
            return false;
        }
        if f & 1 == 1 || f == s {
            fr = node_hash(c, &fr);
            sr = node_hash(c, &sr);
            while f & 1 == 0 && f != 0 {
                f >>= 1;
                s >>= 1;
            }
        } else {
            sr = node_hash(&sr, c);
        }
        f >>= 1;
        s >>= 1;
    }
    fr == *old_root && sr == *new_root && s == 0
}

/// What a verified journal holds for proofs: the leaf hash of each receipt, in order, and
/// each checkpoint with its line number (1-based).
#[derive(Debug, Clone, Default)]
pub struct JournalTree {
    pub run_id: Option<String>,
    /// `leaf_hash(sha256(payload))` of each receipt.
    pub leaves: Vec<[u8; 32]>,
    /// The `sha256:` receipt hash of each receipt (what `prev` names).
    pub receipt_hashes: Vec<String>,
    /// The signed `seq` of each receipt.
    pub seqs: Vec<u64>,
    pub checkpoints: Vec<(usize, Checkpoint)>,
}

impl JournalTree {
    /// Reads the receipts and checkpoints of `bytes`, which [`super::verify_journal`] has
    /// accepted (signatures, chain and every checkpoint's root already checked there).
    pub fn from_verified(bytes: &[u8]) -> Result<Self, String> {
        let mut tree = Self::default();
        for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            let at = i + 1;
            let envelope: Envelope =
                serde_json::from_slice(line).map_err(|e| format!("line {at}: {e}"))?;
            let payload = STANDARD
                .decode(&envelope.payload)
                .map_err(|e| format!("line {at}: {e}"))?;
            match envelope.payload_type.as_str() {
                RECEIPT_PAYLOAD_TYPE => {
                    let hash = raw_hash(&payload);
                    tree.leaves.push(leaf_hash(&hash));
                    tree.receipt_hashes
                        .push(format!("sha256:{}", crate::policy::hex(&hash)));
                    let value: serde_json::Value =
                        serde_json::from_slice(&payload).map_err(|e| format!("line {at}: {e}"))?;
                    tree.seqs.push(
                        value
                            .get("seq")
                            .and_then(serde_json::Value::as_u64)
                            .ok_or_else(|| format!("line {at}: a receipt without `seq`"))?,
                    );
                    if tree.run_id.is_none() {
                        tree.run_id = value
                            .get("run_id")
                            .and_then(serde_json::Value::as_str)
                            .map(str::to_owned);
                    }
                }
                CHECKPOINT_PAYLOAD_TYPE => {
                    let checkpoint: Checkpoint =
                        serde_json::from_slice(&payload).map_err(|e| format!("line {at}: {e}"))?;
                    tree.checkpoints.push((at, checkpoint));
                }
                other => return Err(format!("line {at}: unknown payload type `{other}`")),
            }
        }
        Ok(tree)
    }

    /// The last checkpoint, if any.
    pub fn last_checkpoint(&self) -> Option<&(usize, Checkpoint)> {
        self.checkpoints.last()
    }
}

/// `sha256:<hex>` → 32 bytes.
pub fn parse_digest(text: &str) -> Option<[u8; 32]> {
    let hex = text.strip_prefix("sha256:")?;
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::indexing_slicing,
        reason = "tests fail loudly"
    )]

    use super::*;
    use crate::receipt::MerkleRange;

    fn leaves(n: usize) -> (Vec<Vec<u8>>, Vec<[u8; 32]>) {
        let data: Vec<Vec<u8>> = (0..n)
            .map(|i| format!("receipt {i}").into_bytes())
            .collect();
        let hashes = data.iter().map(|d| leaf_hash(d)).collect();
        (data, hashes)
    }

    /// Every leaf of every tree up to 40 leaves: the proof verifies against the incremental
    /// root checkpoints sign, and any changed leaf, index or proof hash fails it. (A size is
    /// only ever checked together with the root a checkpoint signs with it.)
    #[test]
    fn inclusion_proofs_verify_and_nothing_else_does() {
        for n in 1..=40usize {
            let (data, hashes) = leaves(n);
            let mut range = MerkleRange::new();
            data.iter().for_each(|d| range.push(d));
            let root = range.root();
            assert_eq!(tree_root(&hashes), root, "n = {n}");
            for i in 0..n {
                let proof = inclusion_proof(&hashes, i).unwrap();
                let (i64_, n64) = (i as u64, n as u64);
                assert!(
                    verify_inclusion(i64_, n64, &hashes[i], &proof, &root),
                    "{i}/{n}"
                );
                assert!(!verify_inclusion(i64_ + 1, n64, &hashes[i], &proof, &root) || n == 1);
                let other = hashes[(i + 1) % n];
                if other != hashes[i] {
                    assert!(!verify_inclusion(i64_, n64, &other, &proof, &root));
                }
                for j in 0..proof.len() {
                    let mut bad = proof.clone();
                    bad[j][0] ^= 1;
                    assert!(!verify_inclusion(i64_, n64, &hashes[i], &bad, &root));
                }
                let mut longer = proof.clone();
                longer.push(root);
                assert!(!verify_inclusion(i64_, n64, &hashes[i], &longer, &root));
            }
            assert!(inclusion_proof(&hashes, n).is_none());
        }
    }

    /// Every pair of sizes up to 40: the proof verifies between the two heads, and fails for
    /// a different old head, new head or proof hash.
    #[test]
    fn consistency_proofs_verify_and_nothing_else_does() {
        let (_, all) = leaves(40);
        for n in 1..=40usize {
            let new_root = tree_root(&all[..n]);
            for m in 1..=n {
                let old_root = tree_root(&all[..m]);
                let proof = consistency_proof(&all[..n], m).unwrap();
                let (m64, n64) = (m as u64, n as u64);
                assert!(
                    verify_consistency(m64, n64, &old_root, &new_root, &proof),
                    "{m}/{n}"
                );
                let mut forked = old_root;
                forked[31] ^= 1;
                assert!(!verify_consistency(m64, n64, &forked, &new_root, &proof));
                let mut other = new_root;
                other[0] ^= 1;
                assert!(!verify_consistency(m64, n64, &old_root, &other, &proof));
                if m < n {
                    for j in 0..proof.len() {
                        let mut bad = proof.clone();
                        bad[j][5] ^= 1;
                        assert!(!verify_consistency(m64, n64, &old_root, &new_root, &bad));
                    }
                }
            }
            assert!(consistency_proof(&all[..n], 0).is_none());
            assert!(consistency_proof(&all[..n], n + 1).is_none());
        }
    }

    #[test]
    fn digests_parse_only_in_their_one_spelling() {
        let d = format!("sha256:{}", "ab".repeat(32));
        assert_eq!(parse_digest(&d), Some([0xab; 32]));
        assert_eq!(parse_digest(&d[..70]), None);
        assert_eq!(parse_digest(&"ab".repeat(32)), None);
        assert_eq!(parse_digest(&format!("sha256:{}", "zz".repeat(32))), None);
    }
}
