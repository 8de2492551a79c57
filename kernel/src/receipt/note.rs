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

/// Reads a verifier key, `<name>+<hex key hash>+<base64(0x01 ‖ key)>`: split at the first two
/// `+` only (a name holds none; the base64 may), the hash eight lowercase hex digits, the key
/// data standard padded base64 of 33 bytes beginning 0x01 (ed25519), and the hash the one
/// [`note_key_hash`] gives for that name and key. Returns the name and the raw key.
pub fn parse_note_verifier_key(text: &str) -> Result<(String, [u8; 32]), String> {
    let shown = || craik_contracts::Truncated(text).to_string();
    let mut parts = text.splitn(3, '+');
    let (Some(name), Some(hash), Some(data)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!(
            "verifier key `{}`: expected <name>+<hex key hash>+<base64 key>",
            shown()
        ));
    };
    check_name("key name", name)?;
    if hash.len() != 8 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return Err(format!(
            "verifier key `{}`: the key hash must be 8 lowercase hex digits",
            shown()
        ));
    }
    let data = STANDARD
        .decode(data)
        .map_err(|e| format!("verifier key `{}`: key data is not base64: {e}", shown()))?;
    let Some((&1, key)) = data.split_first() else {
        return Err(format!(
            "verifier key `{}`: key data must begin with 0x01 (ed25519)",
            shown()
        ));
    };
    let public: [u8; 32] = key.try_into().map_err(|_| {
        format!(
            "verifier key `{}`: an ed25519 key is 32 bytes, not {}",
            shown(),
            key.len()
        )
    })?;
    if crate::policy::hex(&note_key_hash(name, &public)) != hash {
        return Err(format!(
            "verifier key `{}`: the key hash is not the name's and key's",
            shown()
        ));
    }
    Ok((name.to_owned(), public))
}

/// A C2SP `tlog-checkpoint` note whose signature verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedNote {
    pub origin: String,
    pub tree_size: u64,
    pub root: [u8; 32],
    /// The name on the signature line that verified, and the key's id (`sha256:` of its SPKI).
    pub key_name: String,
    pub key_id: String,
}

/// Opens a checkpoint note a witness kept: one of its signature lines must verify (strict
/// ed25519 over the note text) under a key of `keys`, under whatever name the line gives
/// (the key hash picks the key), or under one of `named` (name, key) pairs — verifier keys.
/// A line naming a known key whose signature does not verify is an error (a changed note),
/// as is a note no known key signed. The text must then be exactly the three lines Craik
/// writes: origin, tree size (ASCII decimal, no leading zero), root (standard base64 of 32
/// bytes).
pub fn open_checkpoint_note(
    note: &str,
    keys: &[[u8; 32]],
    named: &[(String, [u8; 32])],
) -> Result<OpenedNote, String> {
    let (head, sigs) = note
        .split_once("\n\n")
        .ok_or("not a signed note: no blank line before its signatures")?;
    let text = note.get(..head.len() + 1).ok_or("a note without text")?;
    if !sigs.ends_with('\n') {
        return Err("not a signed note: its last line has no newline".into());
    }
    let mut names = Vec::new();
    let mut found = None;
    for line in sigs.lines() {
        let Some((name, b64)) = line
            .strip_prefix("\u{2014} ")
            .and_then(|rest| rest.split_once(' '))
        else {
            return Err(format!(
                "not a signature line: `{}`",
                craik_contracts::Truncated(line)
            ));
        };
        names.push(name.to_owned());
        let Ok(blob) = STANDARD.decode(b64) else {
            continue;
        };
        let (Some(hash), Some(sig)) = (blob.get(..4), blob.get(4..)) else {
            continue;
        };
        let mut candidates = keys
            .iter()
            .filter(|k| note_key_hash(name, k) == hash)
            .chain(
                named
                    .iter()
                    .filter(|(n, k)| n == name && note_key_hash(n, k) == hash)
                    .map(|(_, k)| k),
            );
        // The key hash picks the key: the first known key it names decides this line.
        if let Some(public) = candidates.next() {
            let key = VerifyingKey::from_bytes(public).map_err(|e| e.to_string())?;
            let ok = Signature::from_slice(sig)
                .ok()
                .is_some_and(|s| key.verify_strict(text.as_bytes(), &s).is_ok());
            if !ok {
                return Err(format!(
                    "the signature by `{name}` (key {}) does not verify over the note: the note was changed",
                    crate::key_id_of(public)
                ));
            }
            found = Some((name.to_owned(), crate::key_id_of(public)));
            break;
        }
    }
    let Some((key_name, key_id)) = found else {
        return Err(format!(
            "no signature by a trusted key (signed as {})",
            if names.is_empty() {
                "nobody".to_owned()
            } else {
                names
                    .iter()
                    .map(|n| format!("`{}`", craik_contracts::Truncated(n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        ));
    };
    let lines: Vec<&str> = head.split('\n').collect();
    let [origin, size, root] = lines.as_slice() else {
        return Err(format!(
            "a checkpoint note's text is 3 lines (origin, tree size, root); this has {}",
            lines.len()
        ));
    };
    let tree_size = (!size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit())
        && (*size == "0" || !size.starts_with('0')))
    .then(|| size.parse::<u64>().ok())
    .flatten()
    .filter(|n| *n <= crate::MAX_SAFE_INTEGER)
    .ok_or_else(|| {
        format!(
            "tree size `{}` is not ASCII decimal without leading zeros",
            craik_contracts::Truncated(size)
        )
    })?;
    let root: [u8; 32] = STANDARD
        .decode(root)
        .ok()
        .and_then(|r| r.try_into().ok())
        .ok_or_else(|| {
            format!(
                "root `{}` is not the base64 of 32 bytes",
                craik_contracts::Truncated(root)
            )
        })?;
    Ok(OpenedNote {
        origin: (*origin).to_owned(),
        tree_size,
        root,
        key_name,
        key_id,
    })
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

    #[test]
    fn a_verifier_key_round_trips_even_when_its_base64_holds_a_plus() {
        // Find a key whose base64 holds `+` (and `/`): split at the first two `+` only.
        let mut seed = 0u8;
        let (signer, vkey) = loop {
            let signer = Ed25519Signer::from_seed(&[seed; 32]);
            let vkey = note_verifier_key("craik/abc", &signer.public_key()).unwrap();
            if vkey.matches('+').count() > 2 {
                break (signer, vkey);
            }
            seed += 1;
        };
        assert_eq!(
            parse_note_verifier_key(&vkey).unwrap(),
            ("craik/abc".to_owned(), signer.public_key())
        );
        let mut wrong_hash = vkey.clone();
        wrong_hash.replace_range(10..11, if &vkey[10..11] == "0" { "1" } else { "0" });
        assert!(parse_note_verifier_key(&wrong_hash).is_err());
        assert!(parse_note_verifier_key("craik").is_err());
        assert!(parse_note_verifier_key(&vkey.to_uppercase()).is_err());
    }

    #[test]
    fn a_checkpoint_note_opens_under_a_trusted_key_and_nothing_else() {
        let signer = Ed25519Signer::from_seed(&[7; 32]);
        let note = checkpoint_note("craik/x/run_a", 30, &[9; 32], "craik/x", &signer).unwrap();
        let opened = open_checkpoint_note(&note, &[signer.public_key()], &[]).unwrap();
        assert_eq!(
            opened,
            OpenedNote {
                origin: "craik/x/run_a".into(),
                tree_size: 30,
                root: [9; 32],
                key_name: "craik/x".into(),
                key_id: crate::key_id_of(&signer.public_key()),
            }
        );
        let named = [("craik/x".to_owned(), signer.public_key())];
        assert_eq!(open_checkpoint_note(&note, &[], &named).unwrap(), opened);
        // Another key: no trusted signature. A changed size: the signature fails.
        let other = Ed25519Signer::from_seed(&[8; 32]);
        let err = open_checkpoint_note(&note, &[other.public_key()], &[]).unwrap_err();
        assert!(err.contains("no signature by a trusted key"), "{err}");
        let changed = note.replacen("\n30\n", "\n31\n", 1);
        let err = open_checkpoint_note(&changed, &[signer.public_key()], &[]).unwrap_err();
        assert!(err.contains("does not verify"), "{err}");
        // A leading zero is another spelling of the size: refused even when signed.
        let text = format!("o\n030\n{}\n", STANDARD.encode([9u8; 32]));
        let zero = sign_note(&text, "k", &signer);
        assert!(open_checkpoint_note(&zero, &[signer.public_key()], &[]).is_err());
    }
}
