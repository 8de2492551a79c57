//! Signing keys behind a trait, and the public keys a verifier trusts.
//!
//! Key id: `sha256:` + hex of the key's SubjectPublicKeyInfo DER, the same bytes
//! `openssl pkey -pubin -outform DER` prints, so an auditor can recompute it.

use std::collections::HashMap;

use ed25519_dalek::Signer as _;
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::policy::hex;

/// DER prefix of an ed25519 SubjectPublicKeyInfo (RFC 8410): SEQUENCE { SEQUENCE { OID
/// 1.3.101.112 }, BIT STRING (32 bytes) }.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

/// The SPKI DER of an ed25519 public key.
pub fn spki_der(public: &[u8; 32]) -> [u8; 44] {
    let mut der = [0u8; 44];
    let (prefix, key) = der.split_at_mut(SPKI_PREFIX.len());
    prefix.copy_from_slice(&SPKI_PREFIX);
    key.copy_from_slice(public);
    der
}

/// `sha256:<hex>` of the SPKI DER.
pub fn key_id_of(public: &[u8; 32]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(spki_der(public))))
}

/// Something that signs receipts: a key file today, an external signer later.
pub trait Signer {
    /// The key id receipts and envelopes name.
    fn key_id(&self) -> &str;
    /// The 32-byte ed25519 public key.
    fn public_key(&self) -> [u8; 32];
    /// Signs `message` (the DSSE pre-authentication encoding).
    fn sign(&self, message: &[u8]) -> [u8; 64];
}

/// An in-memory ed25519 key. The secret is zeroized when this is dropped (ed25519-dalek's
/// `zeroize` feature); it is never printed (`Debug` shows the key id only).
pub struct Ed25519Signer {
    key: SigningKey,
    key_id: String,
}

impl std::fmt::Debug for Ed25519Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ed25519Signer")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl Ed25519Signer {
    /// A signer from a 32-byte seed (the caller zeroizes its copy).
    pub fn from_seed(seed: &[u8; 32]) -> Self {
        Self::from_key(SigningKey::from_bytes(seed))
    }

    /// A signer from a dalek key.
    pub fn from_key(key: SigningKey) -> Self {
        let key_id = key_id_of(&key.verifying_key().to_bytes());
        Self { key, key_id }
    }
}

impl Signer for Ed25519Signer {
    fn key_id(&self) -> &str {
        &self.key_id
    }

    fn public_key(&self) -> [u8; 32] {
        self.key.verifying_key().to_bytes()
    }

    fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }
}

/// The public keys a verifier trusts, by key id.
#[derive(Debug, Clone, Default)]
pub struct KeyRing {
    keys: HashMap<String, VerifyingKey>,
}

impl KeyRing {
    /// An empty ring.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a public key; refuses weak (small-order) keys, which would verify forgeries.
    pub fn add(&mut self, public: &[u8; 32]) -> Result<String, String> {
        let key = VerifyingKey::from_bytes(public)
            .map_err(|e| format!("not an ed25519 public key: {e}"))?;
        if key.is_weak() {
            return Err("weak (small-order) ed25519 public key refused".into());
        }
        // A key with a small-order component (no honest key has one) would let the batch and
        // the strict equation disagree; refused once here, so verification checks only `R`.
        if !curve25519_dalek::edwards::CompressedEdwardsY(*public)
            .decompress()
            .is_some_and(|p| p.is_torsion_free())
        {
            return Err("ed25519 public key with a small-order component refused".into());
        }
        let id = key_id_of(public);
        self.keys.insert(id.clone(), key);
        Ok(id)
    }

    /// The key with this id.
    pub fn get(&self, key_id: &str) -> Option<&VerifyingKey> {
        self.keys.get(key_id)
    }

    /// True when no key is trusted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Every trusted key's raw 32 bytes, sorted by key id (what a C2SP note's key hash is
    /// computed over).
    pub fn public_keys(&self) -> Vec<[u8; 32]> {
        let mut ids: Vec<&String> = self.keys.keys().collect();
        ids.sort();
        ids.into_iter()
            .filter_map(|id| self.keys.get(id))
            .map(VerifyingKey::to_bytes)
            .collect()
    }
}
