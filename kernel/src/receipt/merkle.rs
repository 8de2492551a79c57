//! RFC 9162 Merkle tree hashing (§2.1.1), kept incrementally: the root of any prefix of the
//! journal in O(log n) memory, so checkpoints cost O(log n) each.

use sha2::{Digest, Sha256};

/// `SHA-256(0x00 || data)`.
pub fn leaf_hash(data: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(data);
    h.finalize().into()
}

/// `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The perfect subtrees covering the leaves so far, largest (leftmost) first: one per set bit
/// of the leaf count, exactly the split RFC 9162 prescribes (largest power of two first).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MerkleRange {
    /// (subtree root, subtree size), sizes strictly decreasing powers of two.
    stack: Vec<([u8; 32], u64)>,
    size: u64,
}

impl MerkleRange {
    /// No leaves.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leaves so far.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Appends one leaf's data.
    pub fn push(&mut self, data: &[u8]) {
        let mut node = (leaf_hash(data), 1u64);
        while let Some(&(top, size)) = self.stack.last() {
            if size != node.1 {
                break;
            }
            self.stack.pop();
            node = (node_hash(&top, &node.0), size * 2);
        }
        self.stack.push(node);
        self.size += 1;
    }

    /// The roots of the perfect subtrees covering the leaves, largest first (one per set bit
    /// of [`MerkleRange::size`]): with the size, all a writer needs to continue the tree.
    pub fn nodes(&self) -> Vec<[u8; 32]> {
        self.stack.iter().map(|(node, _)| *node).collect()
    }

    /// The range of `size` leaves whose subtree roots are `nodes` (largest first); `None`
    /// when their count is not the number of set bits of `size`.
    pub fn from_nodes(size: u64, nodes: &[[u8; 32]]) -> Option<Self> {
        let sizes: Vec<u64> = (0..64u32)
            .rev()
            .map(|bit| 1u64 << bit)
            .filter(|b| size & b != 0)
            .collect();
        if sizes.len() != nodes.len() {
            return None;
        }
        Some(Self {
            stack: nodes.iter().copied().zip(sizes).collect(),
            size,
        })
    }

    /// The tree head: `SHA-256()` of nothing for no leaves; otherwise the subtrees folded from
    /// the right.
    pub fn root(&self) -> [u8; 32] {
        let mut iter = self.stack.iter().rev();
        let Some(&(mut acc, _)) = iter.next() else {
            return Sha256::digest([]).into();
        };
        for (left, _) in iter {
            acc = node_hash(left, &acc);
        }
        acc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_rebuilt_from_its_nodes_continues_the_same_tree() {
        for n in 0..40u64 {
            let mut range = MerkleRange::new();
            for i in 0..n {
                range.push(&i.to_be_bytes());
            }
            let mut rebuilt = MerkleRange::from_nodes(n, &range.nodes()).unwrap();
            assert_eq!(rebuilt.root(), range.root(), "{n}");
            rebuilt.push(b"next");
            range.push(b"next");
            assert_eq!(rebuilt.root(), range.root(), "{n}");
            if (n + 2).count_ones() != (n + 1).count_ones() {
                assert!(
                    MerkleRange::from_nodes(n + 2, &range.nodes()).is_none(),
                    "{n}"
                );
            }
        }
    }

    /// The RFC's recursive definition, as the oracle.
    fn mth(leaves: &[Vec<u8>]) -> [u8; 32] {
        match leaves.len() {
            0 => Sha256::digest([]).into(),
            1 => leaf_hash(&leaves[0]),
            n => {
                let k = (n - 1).next_power_of_two().max(1);
                let k = if k >= n { k / 2 } else { k };
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    #[test]
    fn incremental_root_equals_the_recursive_definition() {
        let leaves: Vec<Vec<u8>> = (0..70u8).map(|i| vec![i; (i % 5) as usize]).collect();
        let mut range = MerkleRange::new();
        assert_eq!(range.root(), mth(&[]));
        for n in 1..=leaves.len() {
            range.push(&leaves[n - 1]);
            assert_eq!(range.root(), mth(&leaves[..n]), "n = {n}");
        }
    }

    #[test]
    fn known_answer_for_the_empty_tree_and_one_leaf() {
        let empty = MerkleRange::new().root();
        assert_eq!(
            crate::policy::hex(&empty),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        let mut one = MerkleRange::new();
        one.push(b"");
        // SHA-256(0x00), from RFC 6962/9162 test vectors.
        assert_eq!(
            crate::policy::hex(&one.root()),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }
}
