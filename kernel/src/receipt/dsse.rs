//! The DSSE envelope (<https://github.com/secure-systems-lab/dsse>) and its
//! pre-authentication encoding, which is what ed25519 signs.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

/// Payload type of a receipt.
pub const RECEIPT_PAYLOAD_TYPE: &str =
    "application/vnd.craik.capability-receipt+json; version=0.1.0";
/// Payload type of a checkpoint.
pub const CHECKPOINT_PAYLOAD_TYPE: &str = "application/vnd.craik.checkpoint+json; version=0.1.0";

/// One signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Signature {
    /// `sha256:<hex of the SPKI DER>` of the signing key.
    pub keyid: String,
    /// Base64 (standard, padded) of the 64-byte ed25519 signature.
    pub sig: String,
}

/// A DSSE envelope: one journal line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Envelope {
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    /// Base64 (standard, padded) of the canonical payload bytes.
    pub payload: String,
    pub signatures: Vec<Signature>,
}

impl Envelope {
    /// Wraps signed payload bytes.
    pub fn new(payload_type: &str, payload: &[u8], keyid: &str, sig: &[u8; 64]) -> Self {
        Self {
            payload_type: payload_type.to_owned(),
            payload: STANDARD.encode(payload),
            signatures: vec![Signature {
                keyid: keyid.to_owned(),
                sig: STANDARD.encode(sig),
            }],
        }
    }

    /// The journal line: compact JSON, fields in a fixed order, with a trailing newline.
    pub fn to_line(&self) -> Result<Vec<u8>, String> {
        let mut line = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok(line)
    }
}

/// DSSE v1 pre-authentication encoding:
/// `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, lengths in ASCII decimal.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + payload_type.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_matches_the_dsse_spec_example() {
        // From the DSSE protocol document.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }
}
