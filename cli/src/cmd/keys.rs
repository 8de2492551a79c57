//! `craik keys generate|show`: the receipt signing key on disk.
//!
//! The private key is a PKCS#8 PEM file created with mode 0600 and never overwritten; the seed
//! and the PEM text are zeroized after use, and the key is never printed, logged or put in an
//! error message.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD_NO_PAD;
use craik_kernel::{Ed25519Signer, key_id_of, spki_der};
use ed25519_dalek::pkcs8::spki::der::pem::LineEnding;
use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::Serialize;
use sha2::{Digest, Sha256};
use zeroize::Zeroize;

use crate::exit::{Exit, Failure};
use crate::files::{Input, read_bounded};
use crate::output::{Format, Out};

/// File names inside the key directory.
pub(crate) const PRIVATE_NAME: &str = "signing.key.pem";
pub(crate) const PUBLIC_NAME: &str = "signing.pub.pem";

#[derive(Serialize)]
struct Shown {
    key_id: String,
    fingerprint: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    private_key: Option<String>,
    public_key: String,
}

fn fingerprint(public: &[u8; 32]) -> String {
    format!(
        "SHA256:{}",
        STANDARD_NO_PAD.encode(Sha256::digest(spki_der(public)))
    )
}

pub(crate) fn generate(out: &mut Out, format: Format, dir: &Path) -> Result<Exit, Failure> {
    let (private, public, public_bytes) = create_pair(dir)?;
    let shown = Shown {
        key_id: key_id_of(&public_bytes),
        fingerprint: fingerprint(&public_bytes),
        private_key: Some(private.display().to_string()),
        public_key: public.display().to_string(),
    };
    match format {
        Format::Human => {
            out.line(format_args!(
                "private key {} (mode 0600)",
                private.display()
            ))?;
            out.line(format_args!("public key  {}", public.display()))?;
            out.line(format_args!("key id      {}", shown.key_id))?;
            out.line(format_args!("fingerprint {}", shown.fingerprint))?;
        }
        Format::Json | Format::Junit => out.json(&shown)?,
    }
    Ok(Exit::Ok)
}

/// Creates `dir/signing.key.pem` (0600) and `dir/signing.pub.pem`; refuses to overwrite.
pub(crate) fn create_pair(dir: &Path) -> Result<(PathBuf, PathBuf, [u8; 32]), Failure> {
    let private = dir.join(PRIVATE_NAME);
    let public = dir.join(PUBLIC_NAME);
    for path in [&private, &public] {
        if path.exists() {
            return Err(Failure::usage(format!(
                "{}: already exists; refusing to overwrite a key",
                path.display()
            )));
        }
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::usage(format!("{}: cannot create directory: {e}", dir.display())))?;
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| Failure::internal(format!("no randomness from the operating system: {e}")))?;
    let key = SigningKey::from_bytes(&seed);
    seed.zeroize();
    // PKCS#8 v1 (RFC 5208: the private key only, no public key attribute): the form OpenSSL
    // 3.0 and Python `cryptography` load (both refuse the v2 form with the public key).
    let mut pem = ed25519_dalek::pkcs8::KeypairBytes {
        secret_key: key.to_bytes(),
        public_key: None,
    }
    .to_pkcs8_pem(LineEnding::LF)
    .map_err(|e| Failure::internal(format!("cannot encode the private key: {e}")))?;
    let public_pem = key
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| Failure::internal(format!("cannot encode the public key: {e}")))?;
    write_new(&private, pem.as_bytes(), 0o600)?;
    // `pem` is `Zeroizing<String>`: wiped when dropped; make it explicit.
    pem.zeroize();
    write_new(&public, public_pem.as_bytes(), 0o644)?;
    Ok((private, public, key.verifying_key().to_bytes()))
}

/// Writes a new key file all at once: the bytes go to a temporary file, are synced, then
/// hard-linked to `path` (which fails if `path` exists: a key is never overwritten) and the
/// directory is synced. A kill leaves either no file or the whole file, never a torn key.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), Failure> {
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
    let mut file = options
        .open(&tmp)
        .map_err(|e| Failure::usage(format!("{}: cannot create: {e}", tmp.display())))?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    written.map_err(|e| Failure::usage(format!("{}: cannot write: {e}", path.display())))?;
    if let Some(dir) = path.parent() {
        let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
    }
    Ok(())
}

/// Reads a PEM file as a public key (a private key's public half is derived, then dropped).
/// Writes the public half of the private key at `private` to `public`, when a first-use key
/// generation was killed between the two files (issue 11 item 10): the private key is the
/// source of truth, the public key follows from it.
pub(crate) fn restore_public(private: &Path, public: &Path) -> Result<(), Failure> {
    use craik_kernel::Signer as _;
    let signer = read_signer(private)?;
    let key = VerifyingKey::from_bytes(&signer.public_key())
        .map_err(|e| Failure::internal(format!("{}: {e}", private.display())))?;
    let pem = key
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| Failure::internal(format!("cannot encode the public key: {e}")))?;
    write_new(public, pem.as_bytes(), 0o644)
}

pub(crate) fn read_public(path: &Path) -> Result<[u8; 32], Failure> {
    let bytes = read_bounded(&Input::File(path.to_owned()), 64 * 1024)
        .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    let mut text = String::from_utf8(bytes).map_err(|_| {
        Failure::invalid(
            format!("{}: not a PEM file (not UTF-8)", path.display()),
            Vec::new(),
        )
    })?;
    let result = if text.contains("PRIVATE KEY") {
        SigningKey::from_pkcs8_pem(&text)
            .map(|k| k.verifying_key().to_bytes())
            .map_err(|_| "not an ed25519 PKCS#8 private key")
    } else {
        VerifyingKey::from_public_key_pem(&text)
            .map(|k| k.to_bytes())
            .map_err(|_| "not an ed25519 SPKI public key")
    };
    text.zeroize();
    result.map_err(|why| Failure::invalid(format!("{}: {why}", path.display()), Vec::new()))
}

/// Loads the signing key (the host's job when it writes receipts).
pub(crate) fn read_signer(path: &Path) -> Result<Ed25519Signer, Failure> {
    let bytes = read_bounded(&Input::File(path.to_owned()), 64 * 1024)
        .map_err(|e| Failure::usage(format!("{}: {e}", path.display())))?;
    let mut text = String::from_utf8(bytes)
        .map_err(|_| Failure::invalid(format!("{}: not a PEM file", path.display()), Vec::new()))?;
    let key = SigningKey::from_pkcs8_pem(&text);
    text.zeroize();
    let key = key.map_err(|_| {
        Failure::invalid(
            format!("{}: not an ed25519 PKCS#8 private key", path.display()),
            Vec::new(),
        )
    })?;
    Ok(Ed25519Signer::from_key(key))
}

pub(crate) fn show(out: &mut Out, format: Format, file: &Path) -> Result<Exit, Failure> {
    let public = read_public(file)?;
    let shown = Shown {
        key_id: key_id_of(&public),
        fingerprint: fingerprint(&public),
        private_key: None,
        public_key: file.display().to_string(),
    };
    match format {
        Format::Human => {
            out.line(format_args!("key id      {}", shown.key_id))?;
            out.line(format_args!("fingerprint {}", shown.fingerprint))?;
        }
        Format::Json | Format::Junit => out.json(&shown)?,
    }
    Ok(Exit::Ok)
}

/// `DIR/signing.pub.pem`.
pub(crate) fn default_public(home: &Path) -> PathBuf {
    home.join("keys").join(PUBLIC_NAME)
}
