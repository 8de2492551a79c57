//! What a receipt and a checkpoint say, and their canonical bytes.

use craik_contracts::{PolicyProfile, ReceiptResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::policy::{Decision, Mode, hex};

/// Largest integer allowed in signed data (2^53 − 1): every JSON reader represents it
/// exactly.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// What decided a receipt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecidedByKind {
    /// The determining policies (`determining_policies`).
    Policy,
    /// A recorded human approval (`by` names the approver).
    Approval,
    /// No policy permitted it: the default deny.
    Default,
    /// The kernel refused the request itself (invalid request).
    Kernel,
    /// The host recording a side effect's outcome.
    Outcome,
    /// An operator's decision about the run itself (cancel, resume, recover): `by` names the
    /// operator (`user:…`), as asserted by whoever ran the command, not authenticated.
    Operator,
}

/// Who or what decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecidedBy {
    pub kind: DecidedByKind,
    /// The approver (`user:…`) for approvals, the approval id, or empty.
    #[serde(default)]
    pub by: String,
}

/// A receipt: `craik.capability_receipt` extended with the chain and decision fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptPayload {
    pub schema: String,
    pub version: String,
    /// `receipt_<run id>_<seq>`.
    pub id: String,
    pub task_id: String,
    pub actor: String,
    pub capability: String,
    pub target: String,
    pub policy_profile: PolicyProfile,
    pub fail_open: bool,
    pub reason: String,
    pub result: ReceiptResult,
    pub redacted: bool,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// 0, 1, 2, … without gaps.
    pub seq: u64,
    /// `sha256:` of the previous receipt's payload bytes; `null` for seq 0.
    pub prev: Option<String>,
    pub run_id: String,
    /// Hash of the loaded policy set.
    pub policy_set: String,
    /// Canonical hash of the decided request.
    pub request_hash: String,
    pub decision: Decision,
    pub determining_policies: Vec<String>,
    pub decided_by: DecidedBy,
    pub mode: Mode,
    /// The host's id of the action decided or performed (`action_…`), when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    pub kernel_version: String,
    /// Must equal the envelope's `keyid`.
    pub key_id: String,
}

/// A signed statement of the journal's size and Merkle root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    pub schema: String,
    pub version: String,
    pub run_id: String,
    /// 0 for the journal's first checkpoint, then 1, 2, …: a deleted or duplicated
    /// checkpoint breaks the count.
    pub index: u64,
    /// Receipts covered: all of them so far.
    pub tree_size: u64,
    /// `sha256:` RFC 9162 Merkle tree head over the receipt hashes (leaf data = the 32-byte
    /// receipt hash).
    pub root_hash: String,
    /// `sha256:` of the last receipt covered; `null` for an empty journal.
    pub last_receipt_hash: Option<String>,
    /// True for the checkpoint that closes the journal.
    #[serde(rename = "final")]
    pub is_final: bool,
    pub created_at: String,
    pub key_id: String,
}

/// RFC 8785 canonical JSON of `value`, after checking it holds no float and no integer
/// outside ±(2^53−1).
pub fn canonical_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, String> {
    let json = serde_json::to_value(value).map_err(|e| e.to_string())?;
    check_json_numbers(&json, "$")?;
    let mut out = Vec::with_capacity(1024);
    write_canonical(&json, &mut out)?;
    Ok(out)
}

/// Writes RFC 8785 canonical JSON of `value`, whose numbers must all be integers within
/// ±(2^53−1) (what [`check_json_numbers`] admits; anything else is an error). For such values
/// the canonical form needs no number formatting beyond decimal digits (an integer's ECMAScript
/// form), and serde_json's compact string escaping is RFC 8785's (`"`, `\`, and control
/// characters — `\b \t \n \f \r`, the rest `\u00xx` in lowercase hex; nothing else escaped),
/// so what remains is the key order: by UTF-16 code units. `serde_jcs` makes the same bytes
/// through a buffering formatter that cost about a fifth of verifying a receipt (issue 20,
/// `perf` on `craik receipts verify`); `tests::the_canonical_writer_is_serde_jcs` holds the
/// two equal.
pub(crate) fn write_canonical(value: &Value, out: &mut Vec<u8>) -> Result<(), String> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            let safe = n.as_u64().is_some_and(|v| v <= MAX_SAFE_INTEGER)
                || n.as_i64()
                    .is_some_and(|v| v.unsigned_abs() <= MAX_SAFE_INTEGER);
            if !safe {
                return Err(format!("number `{n}` has no canonical form here"));
            }
            out.extend_from_slice(n.to_string().as_bytes());
        }
        Value::String(text) => write_string(text, out)?,
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| utf16_order(a.0, b.0));
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(key, out)?;
                out.push(b':');
                write_canonical(item, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn write_string(text: &str, out: &mut Vec<u8>) -> Result<(), String> {
    serde_json::to_writer(&mut *out, text).map_err(|e| e.to_string())
}

/// RFC 8785's key order: by UTF-16 code units (for ASCII keys, byte order).
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.as_bytes().cmp(b.as_bytes())
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

/// Refuses floats and integers outside ±(2^53−1) anywhere in `value`.
pub fn check_json_numbers(value: &Value, path: &str) -> Result<(), String> {
    // The common case walks the tree without naming a path; only a failure is walked again
    // to say where.
    if numbers_safe(value) {
        return Ok(());
    }
    check_json_numbers_at(value, path)
}

fn numbers_safe(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.as_u64().is_some_and(|v| v <= MAX_SAFE_INTEGER)
                || n.as_i64()
                    .is_some_and(|v| v.unsigned_abs() <= MAX_SAFE_INTEGER)
        }
        Value::Array(items) => items.iter().all(numbers_safe),
        Value::Object(map) => map.values().all(numbers_safe),
        _ => true,
    }
}

fn check_json_numbers_at(value: &Value, path: &str) -> Result<(), String> {
    match value {
        Value::Number(n) => {
            let ok = n.as_u64().is_some_and(|v| v <= MAX_SAFE_INTEGER)
                || n.as_i64()
                    .is_some_and(|v| v.unsigned_abs() <= MAX_SAFE_INTEGER);
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "{path}: number `{n}` is a float or outside ±(2^53−1); signed data holds integers only"
                ))
            }
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check_json_numbers_at(v, &format!("{path}[{i}]"))),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| check_json_numbers_at(v, &format!("{path}.{k}"))),
        _ => Ok(()),
    }
}

/// The 32-byte SHA-256 of payload bytes: the Merkle leaf data.
pub(crate) fn raw_hash(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// `sha256:<hex>` of payload bytes: what `prev` and the Merkle leaves name.
pub fn receipt_hash(payload: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(payload)))
}

/// The JSON Schema (draft 2020-12) of a signed receipt payload or checkpoint, as committed in
/// `contracts/schema/` (`receipt.schema.json`, `checkpoint.schema.json`) for auditors who
/// check payloads in other languages.
pub fn payload_schema_text(checkpoint: bool) -> String {
    use craik_contracts::{CONTRACT_VERSION, schema_document, schema_text};
    let id = |name: &str| format!("urn:craik:receipt:{name}:{CONTRACT_VERSION}");
    let schema = if checkpoint {
        schema_document::<Checkpoint>(
            &id("checkpoint"),
            "craik.receipt_checkpoint",
            "A signed statement of a journal's size and RFC 9162 Merkle root (DSSE payload).",
        )
    } else {
        schema_document::<ReceiptPayload>(
            &id("receipt"),
            "craik.capability_receipt",
            "A signed receipt: craik.capability_receipt extended with the chain and decision fields (DSSE payload).",
        )
    };
    schema_text(&schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Issue 20: the canonical writer makes `serde_jcs`'s bytes for every value the verifier
    /// and the signer give it (integers within ±(2^53−1)): tricky keys and strings by hand,
    /// then generated trees.
    #[test]
    fn the_canonical_writer_is_serde_jcs() {
        let cases = [
            json!({"\u{e000}": 1, "\u{1f600}": 2, "b": 3, "a": 4, "A": 5, "aa": 6, "": 7}),
            json!({"z": [3, 1, {"y": null, "x": true}], "m": "é\n\"\u{7f}\u{1}\u{1f}\\/\u{2028}"}),
            json!([
                [],
                {},
                "",
                0,
                -9_007_199_254_740_991_i64,
                9_007_199_254_740_991_u64,
                false
            ]),
            json!({"\u{10ffff}": {"\u{ffff}": {"\u{d7ff}": "\t\r\u{8}\u{c}"}}}),
        ];
        for value in cases {
            let mut fast = Vec::new();
            write_canonical(&value, &mut fast).unwrap();
            assert_eq!(fast, serde_jcs::to_vec(&value).unwrap(), "{value}");
        }
        // A float or an unsafe integer has no canonical form here.
        for bad in [json!(1.5), json!({"a": [9_007_199_254_740_992_u64]})] {
            assert!(write_canonical(&bad, &mut Vec::new()).is_err(), "{bad}");
        }
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-9_007_199_254_740_991_i64..=9_007_199_254_740_991_i64).prop_map(|n| json!(n)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((any::<String>(), inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn generated_values_canonicalise_as_serde_jcs_does(value in arb_json()) {
            let mut fast = Vec::new();
            write_canonical(&value, &mut fast).unwrap();
            proptest::prop_assert_eq!(fast, serde_jcs::to_vec(&value).unwrap());
        }
    }

    /// RFC 8785 edge cases, as our payloads meet them through `serde_jcs`.
    #[test]
    fn canonical_json_edge_cases() {
        // Keys sort by UTF-16 code units: U+E000 (one unit, 0xE000) sorts after U+1F600
        // (surrogates 0xD83D 0xDE00), although its code point is smaller.
        let value = json!({"\u{e000}": 1, "\u{1f600}": 2, "b": 3, "a": 4, "A": 5, "aa": 6});
        let text = String::from_utf8(canonical_bytes(&value).unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"A\":5,\"a\":4,\"aa\":6,\"b\":3,\"\u{1f600}\":2,\"\u{e000}\":1}"
        );
        // Nested objects sort too; arrays keep their order; no whitespace.
        let nested = json!({"z": [3, 1, {"y": null, "x": true}], "m": "é\n\"\u{7f}"});
        assert_eq!(
            String::from_utf8(canonical_bytes(&nested).unwrap()).unwrap(),
            "{\"m\":\"é\\n\\\"\u{7f}\",\"z\":[3,1,{\"x\":true,\"y\":null}]}"
        );
        // Control characters use the short escapes or \u00xx, lowercase hex.
        assert_eq!(
            String::from_utf8(canonical_bytes(&json!("\u{1}\u{8}\u{1f}")).unwrap()).unwrap(),
            "\"\\u0001\\b\\u001f\""
        );
        // Integers at the safe limit are written plainly; beyond it, and floats, are refused.
        assert_eq!(
            canonical_bytes(&json!(MAX_SAFE_INTEGER)).unwrap(),
            b"9007199254740991"
        );
        assert_eq!(
            canonical_bytes(&json!(-(MAX_SAFE_INTEGER as i64))).unwrap(),
            b"-9007199254740991"
        );
        assert!(canonical_bytes(&json!(MAX_SAFE_INTEGER + 1)).is_err());
        assert!(canonical_bytes(&json!(-(MAX_SAFE_INTEGER as i64) - 1)).is_err());
        assert!(
            canonical_bytes(&json!({"a": [1.5]}))
                .unwrap_err()
                .contains("$.a[0]")
        );
        assert!(canonical_bytes(&json!(1.0)).is_err());
    }
}
