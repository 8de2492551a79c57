//! The receipt signing key on disk: `keys/signing.key.pem` (PKCS#8 v1, mode 0600, never
//! overwritten) and `keys/signing.pub.pem` (SPKI). The seed and the PEM text are zeroized
//! after use; the key is never printed, logged or put in an error message.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use craik_kernel::{Ed25519Signer, KeyRing, spki_der};
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use crate::Error;

/// File names inside the key directory.
pub const PRIVATE_NAME: &str = "signing.key.pem";
pub const PUBLIC_NAME: &str = "signing.pub.pem";

/// An OpenSSH-style fingerprint: `SHA256:` + unpadded base64 of the SPKI DER's SHA-256.
pub fn fingerprint(public: &[u8; 32]) -> String {
    format!(
        "SHA256:{}",
        STANDARD_NO_PAD.encode(Sha256::digest(spki_der(public)))
    )
}

/// A key file's bytes, at most 64 KiB.
fn read_key_file(path: &Path) -> Result<Vec<u8>, Error> {
    crate::fsio::read_bounded(path, 64 * 1024)
        .map_err(|e| Error::usage(format!("{}: {e}", path.display())))
}

/// Creates `dir/signing.key.pem` (0600) and `dir/signing.pub.pem`; refuses to overwrite.
pub fn create_pair(dir: &Path) -> Result<(PathBuf, PathBuf, [u8; 32]), Error> {
    let private = dir.join(PRIVATE_NAME);
    let public = dir.join(PUBLIC_NAME);
    for path in [&private, &public] {
        if path.exists() {
            return Err(Error::usage(format!(
                "{}: already exists; refusing to overwrite a key",
                path.display()
            )));
        }
    }
    let made = !dir.exists();
    std::fs::create_dir_all(dir)
        .and_then(|()| {
            // A key directory made here is 0700 whatever the umask (one given is left as is).
            if made {
                std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            } else {
                Ok(())
            }
        })
        .map_err(crate::fsio::home_io(dir))?;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| Error::internal(format!("no randomness from the operating system: {e}")))?;
    let key = SigningKey::from_bytes(&seed);
    seed.zeroize();
    // PKCS#8 v1 (RFC 5208: the private key only, no public key attribute): the form OpenSSL
    // 3.0 and Python `cryptography` load (both refuse the v2 form with the public key).
    let mut pem = ed25519_dalek::pkcs8::KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    }
    .to_pkcs8_pem(LineEnding::LF)
    .map_err(|e| Error::internal(format!("cannot encode the private key: {e}")))?;
    let public_pem = key
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| Error::internal(format!("cannot encode the public key: {e}")))?;
    write_new(&private, pem.as_bytes(), 0o600)?;
    // `pem` is `Zeroizing<String>`: wiped when dropped; make it explicit.
    pem.zeroize();
    write_new(&public, public_pem.as_bytes(), 0o644)?;
    Ok((private, public, key.verifying_key().to_bytes()))
}

/// `keys/generate.lock`: held exclusively while a first key is generated or repaired.
const GENERATE_LOCK_NAME: &str = "generate.lock";

/// The exclusive generation lock of `keys_dir` (made, 0700, when missing), waited for.
fn generation_lock(keys_dir: &Path) -> Result<std::fs::File, Error> {
    if !keys_dir.exists() {
        match std::fs::create_dir_all(keys_dir.parent().unwrap_or(keys_dir))
            .and_then(|()| std::fs::create_dir(keys_dir))
        {
            Ok(()) => std::fs::set_permissions(
                keys_dir,
                std::os::unix::fs::PermissionsExt::from_mode(0o700),
            )
            .map_err(|e| Error::io(format!("{}: {e}", keys_dir.display())))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(Error::io(format!(
                    "{}: cannot create directory: {e}",
                    keys_dir.display()
                )));
            }
        }
    }
    crate::fsio::lock_exclusive(&keys_dir.join(GENERATE_LOCK_NAME))
}

/// Temporary key files (`signing.key.tmp-PID`, `signing.pub.tmp-PID`) a killed generation
/// left; removed under the generation lock (nothing else writes them).
fn remove_stale_temporaries(keys_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(keys_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stem = |file: &str| {
            file.rsplit_once('.')
                .map_or(file.to_owned(), |(s, _)| s.to_owned())
        };
        if [PRIVATE_NAME, PUBLIC_NAME]
            .iter()
            .any(|f| name.starts_with(&format!("{}.tmp-", stem(f))))
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `keys/next/`: a rotation's new pair until it is in place (`ledger::rotate`).
pub const NEXT_DIR: &str = "next";
/// `keys/retired/`: the public keys of rotated-out keys (`<hex>.pub.pem`).
pub const RETIRED_DIR: &str = "retired";
/// `keys/use.lock`: every process that signs with the home's key holds a shared `flock` on
/// it from before it reads the key until it exits; a rotation takes it exclusively, so it
/// never retires a key a live process still signs with (outside testing round 6: a run that
/// read the key just before a rotation left a journal of the retired key no ledger entry
/// named).
pub const USE_LOCK_NAME: &str = "use.lock";

/// The key-use locks this process holds (one per home), kept until it exits.
static KEY_USE: std::sync::Mutex<Vec<(PathBuf, std::fs::File)>> = std::sync::Mutex::new(Vec::new());

fn open_use_lock(keys_dir: &Path) -> Result<std::fs::File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = keys_dir.join(USE_LOCK_NAME);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| Error::io(format!("{}: {e}", path.display())))
}

/// Takes (once per home and process) the shared key-use lock, waiting while a rotation holds
/// it: the key read afterwards is the one the ledger expects.
pub fn hold_key_use(keys_dir: &Path) -> Result<(), Error> {
    let mut held = KEY_USE
        .lock()
        .map_err(|_| Error::internal("the key-use lock table is poisoned"))?;
    if held.iter().any(|(dir, _)| dir == keys_dir) {
        return Ok(());
    }
    let file = open_use_lock(keys_dir)?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockShared)
        .map_err(|e| Error::io(format!("{}: {e}", keys_dir.join(USE_LOCK_NAME).display())))?;
    held.push((keys_dir.to_path_buf(), file));
    Ok(())
}

/// The exclusive key-use lock, for a rotation: refused (not waited for) while any process
/// signs with the home's key.
pub fn exclusive_key_use(keys_dir: &Path) -> Result<std::fs::File, Error> {
    let file = open_use_lock(keys_dir)?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(Error::refused(format!(
            "{}: a Craik process is signing with this home's key (a run, resume, approval or review in progress); rotate once it has ended",
            keys_dir.join(USE_LOCK_NAME).display()
        ))),
        Err(e) => Err(Error::io(format!(
            "{}: {e}",
            keys_dir.join(USE_LOCK_NAME).display()
        ))),
    }
}

/// Writes `public` as a new SPKI PEM file (a retired key kept for auditors).
pub fn write_public(path: &Path, public: &[u8; 32]) -> Result<(), Error> {
    let key = ed25519_dalek::VerifyingKey::from_bytes(public)
        .map_err(|e| Error::invalid(format!("{}: {e}", path.display()), Vec::new()))?;
    let pem = key
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| Error::internal(format!("cannot encode the public key: {e}")))?;
    write_new(path, pem.as_bytes(), 0o644)
}

/// Writes a new key file all at once: the bytes go to a temporary file, are synced, then
/// hard-linked to `path` (which fails if `path` exists: a key is never overwritten) and the
/// directory is synced. A kill leaves either no file or the whole file, never a torn key.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Error> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options.open(&tmp).map_err(crate::fsio::home_io(&tmp))?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::hard_link(&tmp, path));
    crate::fsio::durable_point();
    let _ = std::fs::remove_file(&tmp);
    written.map_err(crate::fsio::home_io(path))?;
    if let Some(dir) = path.parent() {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    crate::fsio::durable_point();
    Ok(())
}

/// Reads a PEM file as a public key (a private key's public half is derived, then dropped).
/// Writes the public half of the private key at `private` to `public`, when a first-use key
/// generation was killed between the two files (issue 11 item 10): the private key is the
/// source of truth, the public key follows from it.
pub fn restore_public(private: &Path, public: &Path) -> Result<(), Error> {
    use craik_kernel::Signer as _;
    let signer = read_signer(private)?;
    let key = VerifyingKey::from_bytes(&signer.public_key())
        .map_err(|e| Error::internal(format!("{}: {e}", private.display())))?;
    let pem = key
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| Error::internal(format!("cannot encode the public key: {e}")))?;
    write_new(public, pem.as_bytes(), 0o644)
}

pub fn read_public(path: &Path) -> Result<[u8; 32], Error> {
    let bytes = read_key_file(path)?;
    let mut text = String::from_utf8(bytes).map_err(|_| {
        Error::invalid(
            format!("{}: not a PEM file (not UTF-8)", path.display()),
            Vec::new(),
        )
    })?;
    let result = if holds_private_key(&text) {
        SigningKey::from_pkcs8_pem(&text)
            .map(|k| k.verifying_key().to_bytes())
            .map_err(|_| "not an ed25519 PKCS#8 private key")
    } else {
        VerifyingKey::from_public_key_pem(&text)
            .map(|k| k.to_bytes())
            .map_err(|_| "not an ed25519 SPKI public key")
    };
    text.zeroize();
    result.map_err(|why| Error::invalid(format!("{}: {why}", path.display()), Vec::new()))
}

/// The labels of a PEM text's blocks (`-----BEGIN <label>-----`).
fn pem_labels(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter_map(|l| {
        l.trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|rest| rest.strip_suffix("-----"))
    })
}

/// Whether any block of a PEM text is a private key (PKCS#8, encrypted, OpenSSH, ...).
fn holds_private_key(text: &str) -> bool {
    pem_labels(text).any(|label| label.ends_with("PRIVATE KEY"))
}

/// A public key a verifier is handed: a file holding any private key is refused (a verifier
/// never needs, and should never hold, the private key).
pub fn read_verifying_key(path: &Path) -> Result<[u8; 32], Error> {
    let bytes = read_key_file(path)?;
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    let private = holds_private_key(&text);
    text.zeroize();
    if private {
        return Err(Error::usage(format!(
            "--key `{}` is a private key; pass the public key (signing.pub.pem) — a verifier never needs, and should never hold, the private key",
            path.display()
        )));
    }
    read_public(path)
}

/// Loads the signing key (the host's job when it writes receipts).
pub fn read_signer(path: &Path) -> Result<Ed25519Signer, Error> {
    let bytes = read_key_file(path)?;
    let mut text = String::from_utf8(bytes)
        .map_err(|_| Error::invalid(format!("{}: not a PEM file", path.display()), Vec::new()))?;
    let key = SigningKey::from_pkcs8_pem(&text);
    text.zeroize();
    let key = key.map_err(|_| {
        Error::invalid(
            format!("{}: not an ed25519 PKCS#8 private key", path.display()),
            Vec::new(),
        )
    })?;
    Ok(Ed25519Signer::from_key(key))
}

/// `HOME/keys/signing.pub.pem`.
pub fn default_public(home: &Path) -> PathBuf {
    home.join("keys").join(PUBLIC_NAME)
}

/// The home's signer and trusted key ring, creating the pair the first time and deriving a
/// missing public half (a first-use generation killed between the two files). Returns what it
/// did, for the front end to tell the operator.
pub fn load_or_create(keys_dir: &Path) -> Result<(Ed25519Signer, KeyRing, Vec<String>), Error> {
    let mut notes = Vec::new();
    let next = keys_dir.join(NEXT_DIR);
    let interrupted = || {
        Error::refused(format!(
            "{}: a key rotation was interrupted; run `craik keys rotate` on this home again to finish it (nothing is signed until then)",
            next.display()
        ))
    };
    if next.exists() {
        return Err(interrupted());
    }
    let (private, public) = (keys_dir.join(PRIVATE_NAME), keys_dir.join(PUBLIC_NAME));
    if !private.exists() || !public.exists() {
        // Generation and repair under one exclusive lock (issue 31 item 6: two first runs on
        // a fresh home raced, and the loser exited 2 "File exists"; a kill left
        // `signing.key.tmp-PID`): whoever comes second finds the key made.
        let _generating = generation_lock(keys_dir)?;
        if !private.exists() && !public.exists() {
            remove_stale_temporaries(keys_dir);
            create_pair(keys_dir)?;
            notes.push(format!(
                "generated a receipt signing key: {} (mode 0600)",
                private.display()
            ));
        } else if private.exists() && !public.exists() {
            remove_stale_temporaries(keys_dir);
            restore_public(&private, &public)?;
            notes.push(format!(
                "{} was missing (key generation was interrupted); derived it from the private key",
                public.display()
            ));
        }
    }
    // The key is read only under the shared key-use lock: a rotation finishes first.
    hold_key_use(keys_dir)?;
    if next.exists() {
        return Err(interrupted());
    }
    let signer = read_signer(&private)?;
    let mut ring = KeyRing::new();
    ring.add(&read_public(&public)?)
        .map_err(|e| Error::invalid(format!("{}: {e}", keys_dir.display()), Vec::new()))?;
    Ok((signer, ring, notes))
}

#[cfg(test)]
mod tests {
    use super::holds_private_key;

    #[test]
    fn private_keys_are_told_by_their_pem_labels() {
        for label in [
            "PRIVATE KEY",
            "ENCRYPTED PRIVATE KEY",
            "OPENSSH PRIVATE KEY",
        ] {
            let text = format!("-----BEGIN {label}-----\nAAAA\n-----END {label}-----\n");
            assert!(holds_private_key(&text), "{label}");
            let second =
                format!("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n{text}");
            assert!(
                holds_private_key(&second),
                "a private block after a public one"
            );
        }
        assert!(!holds_private_key(
            "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"
        ));
        // Words in a comment are not a block.
        assert!(!holds_private_key("not a PRIVATE KEY, really\n"));
    }
}
