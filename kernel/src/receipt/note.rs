//! Checkpoints as C2SP signed notes (`c2sp.org/tlog-checkpoint`, `c2sp.org/signed-note`): the
//! form transparency-log witnesses and tools (Go's `sumdb/note`, Sigsum, Rekor v2 witnesses)
//! read and co-sign.
//!
//! A note is `<origin>\n<tree size>\n<base64 root>\n`, a blank line, then one line per
//! signature: `— <key name> <base64(key hash ‖ ed25519 signature)>`; the key hash is the
//! first four bytes of `SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key)` and the signature covers
//! the note text (everything before the blank line). Owns: formatting, signing and checking
//! notes. The same key signs DSSE envelopes, whose signed bytes always begin `DSSEv1 `: an
//! origin that begins so is refused, so no note text is ever also a DSSE pre-authentication
//! encoding.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

use super::signer::Signer;

/// Refuses a name (origin or key name) the formats do not allow: empty, holding a space,
/// `+`, a control character, or (origins) beginning `DSSEv1`.
fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || c == '+' || c.is_control())
    {
        return Err(format!(
            "{what} `{}`: must be non-empty, without spaces, `+` or control characters",
            name.escape_debug()
        ));
    }
    if name.starts_with("DSSEv1") {
        return Err(format!("{what} `{name}`: may not begin `DSSEv1`"));
    }
    Ok(())
}

/// The key hash of an ed25519 key under `name`.
pub fn note_key_hash(name: &str, public: &[u8; 32]) -> [u8; 4] {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update(b"\n\x01");
    h.update(public);
    let d: [u8; 32] = h.finalize().into();
    d.first_chunk::<4>().copied().unwrap_or_default()
}

/// The verifier key a witness is configured with: `<name>+<hex key hash>+<base64(0x01 ‖ key)>`.
pub fn note_verifier_key(name: &str, public: &[u8; 32]) -> Result<String, String> {
    check_name("key name", name)?;
    let mut data = vec![1u8];
    data.extend_from_slice(public);
    Ok(format!(
        "{name}+{}+{}",
        crate::policy::hex(&note_key_hash(name, public)),
        STANDARD.encode(data)
    ))
}

/// The signed checkpoint note of a tree of `size` leaves with head `root`, signed by `signer`
/// under `key_name`.
pub fn checkpoint_note(
    origin: &str,
    size: u64,
    root: &[u8; 32],
    key_name: &str,
    signer: &dyn Signer,
) -> Result<String, String> {
    check_name("origin", origin)?;
    check_name("key name", key_name)?;
    let text = format!("{origin}\n{size}\n{}\n", STANDARD.encode(root));
    Ok(sign_note(&text, key_name, signer))
}

fn sign_note(text: &str, key_name: &str, signer: &dyn Signer) -> String {
    let mut blob = note_key_hash(key_name, &signer.public_key()).to_vec();
    blob.extend_from_slice(&signer.sign(text.as_bytes()));
    format!("{text}\n\u{2014} {key_name} {}\n", STANDARD.encode(blob))
}

/// Checks a note's signature by `public` under `key_name`; returns the note text.
pub fn open_note<'a>(note: &'a str, key_name: &str, public: &[u8; 32]) -> Result<&'a str, String> {
    let (text, sigs) = note
        .split_once("\n\n")
        .ok_or("a note without its blank line")?;
    let text = note.get(..text.len() + 1).ok_or("a note without text")?;
    let want = note_key_hash(key_name, public);
    let key = VerifyingKey::from_bytes(public).map_err(|e| e.to_string())?;
    for line in sigs.lines() {
        let Some(rest) = line.strip_prefix("\u{2014} ") else {
            return Err(format!("not a signature line: `{}`", line.escape_debug()));
        };
        let Some((name, b64)) = rest.split_once(' ') else {
            continue;
        };
        let Ok(blob) = STANDARD.decode(b64) else {
            continue;
        };
        if name != key_name || blob.len() != 68 || blob.get(..4) != Some(&want[..]) {
            continue;
        }
        let sig =
            Signature::from_slice(blob.get(4..).unwrap_or_default()).map_err(|e| e.to_string())?;
        return key
            .verify_strict(text.as_bytes(), &sig)
            .map(|()| text)
            .map_err(|_| "the signature does not verify".to_owned());
    }
    Err(format!(
        "no signature by `{key_name}` ({})",
        crate::policy::hex(&want)
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests fail loudly")]

    use super::*;
    use crate::receipt::Ed25519Signer;

    /// The known answer of Go's `golang.org/x/mod/sumdb/note` (its `ExampleSign`): the same
    /// key hash, verifier key and signature bytes.
    #[test]
    fn signs_exactly_as_go_sumdb_note() {
        let skey = STANDARD
            .decode("AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")
            .unwrap();
        let seed: [u8; 32] = skey[1..].try_into().unwrap();
        let signer = Ed25519Signer::from_seed(&seed);
        assert_eq!(
            note_verifier_key("PeterNeumann", &signer.public_key()).unwrap(),
            "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
        );
        let text = "If you think cryptography is the answer to your problem,\n\
                    then you don't know what your problem is.\n";
        let note = sign_note(text, "PeterNeumann", &signer);
        assert_eq!(
            note,
            format!(
                "{text}\n\u{2014} PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
            )
        );
        assert_eq!(
            open_note(&note, "PeterNeumann", &signer.public_key()).unwrap(),
            text
        );
    }

    #[test]
    fn a_checkpoint_note_opens_and_a_changed_one_does_not() {
        let signer = Ed25519Signer::from_seed(&[7; 32]);
        let note = checkpoint_note("craik.local/run_x", 30, &[9; 32], "craik", &signer).unwrap();
        let text = open_note(&note, "craik", &signer.public_key()).unwrap();
        assert_eq!(
            text,
            format!("craik.local/run_x\n30\n{}\n", STANDARD.encode([9u8; 32]))
        );
        let bigger = note.replacen("\n30\n", "\n31\n", 1);
        assert!(open_note(&bigger, "craik", &signer.public_key()).is_err());
        let other = Ed25519Signer::from_seed(&[8; 32]);
        assert!(open_note(&note, "craik", &other.public_key()).is_err());
        for bad in ["", "a b", "a+b", "DSSEv1 x", "DSSEv1", "a\nb"] {
            assert!(
                checkpoint_note(bad, 1, &[0; 32], "craik", &signer).is_err(),
                "{bad:?}"
            );
        }
    }
}
