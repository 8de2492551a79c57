//! A digest that cannot be empty: the `sha256:` of bytes, or of a value's one canonical
//! (RFC 8785) form. There is no `Default` and no constructor from a string: a value that
//! cannot be put in canonical form (a float, an integer beyond ±(2^53−1)) is an error, never
//! an empty string that compares equal to another failure.

use std::fmt;

use serde::Serialize;

/// `sha256:<64 lowercase hex>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of_bytes(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Self(format!(
            "sha256:{}",
            craik_kernel::to_hex(&sha2::Sha256::digest(bytes))
        ))
    }

    /// The digest of `value`'s canonical JSON; refuses what has no canonical form.
    pub fn of_canonical<T: Serialize + ?Sized>(value: &T) -> Result<Self, String> {
        craik_kernel::canonical_bytes(&value).map(|b| Self::of_bytes(&b))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_never_empty_and_refuses_what_has_no_canonical_form() {
        let d = Digest::of_canonical(&serde_json::json!({"b": 1, "a": 2})).unwrap();
        assert!(d.as_str().starts_with("sha256:") && d.as_str().len() == 71);
        for bad in [
            serde_json::json!({"timeout_ms": 9_007_199_254_740_992_u64}),
            serde_json::json!({"x": 1.5}),
            serde_json::json!([-9_007_199_254_740_992_i64]),
        ] {
            assert!(Digest::of_canonical(&bad).is_err(), "{bad}");
        }
    }
}
