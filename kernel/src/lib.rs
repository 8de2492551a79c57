//! Craik's kernel: the reference monitor every step request goes through.
//!
//! Sans-io like quinn-proto: no tokio, no files, no environment, no clock, no processes. Time,
//! keys and data come in as arguments; verdicts, receipts and next steps come out. That keeps
//! it deterministic and testable without mocks.
//!
//! It holds: target normalisation ([`TargetPath`], [`Protected`]); the capability/operation
//! table ([`Effect`], [`OPERATIONS`]); command analysis; the Cedar bundle, compiled grants and
//! the three-way decision ([`Bundle::decide`], tightened by the runner matrix and the policy
//! envelope); signed, chained, checkpointed receipts and their verification; the governed
//! loop's state machine ([`RunLoop`]); redaction.
//!
//! Why cedar-policy-core on the decision path: cedar-policy's public API rebuilds each
//! policy's condition and re-validates entities on every request; the kernel builds the request
//! and entities as core values once per decision and evaluates conditions prepared at load,
//! by Cedar's own evaluator and combining rule. Every debug build cross-checks each decision
//! against cedar-policy's public construction and Cedar's authorizer (see SECURITY.md).

mod path;
mod policy;
mod receipt;
mod redact;
mod run;

pub use path::{
    ImmutablePaths, MAX_DEPTH, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, PathError, Protected, TargetPath,
};
pub use policy::*;
pub use receipt::*;
pub use redact::{
    GITLEAKS_VERSION, REDACTED, Redacted, RuleSetError, SecretFinding, SecretRules, redact_checked,
    redact_record, redact_text, redact_value, secret_rules, still_secret,
};
pub use run::{Gate, LoopError, Next, RunLoop, is_terminal};

/// Lowercase hex of bytes (as in `sha256:<hex>`).
pub fn to_hex(bytes: &[u8]) -> String {
    policy::hex(bytes)
}

/// The kernel's version, written into every receipt.
pub const KERNEL_VERSION: &str = env!("CARGO_PKG_VERSION");
