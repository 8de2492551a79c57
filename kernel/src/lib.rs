//! Craik's kernel: the reference monitor every step request goes through.
//!
//! Sans-io like quinn-proto: no tokio, no files, no environment, no clock, no processes. Time,
//! keys and data come in as arguments; verdicts, receipts and next steps come out. That keeps
//! it deterministic and testable without mocks.
//!
//! This first slice holds target normalisation ([`TargetPath`]): every path a runner names is
//! reduced to one canonical workspace-relative spelling, or refused, before any policy sees
//! it; and the classification of Craik's own state, `.git/` and agent configuration files as
//! [`Protected`].

mod path;
mod policy;
mod receipt;
mod redact;
mod run;

pub use path::{MAX_DEPTH, MAX_PATH_BYTES, MAX_SEGMENT_BYTES, PathError, Protected, TargetPath};
pub use policy::*;
pub use receipt::*;
pub use redact::{REDACTED, Redacted, redact_checked, redact_text, redact_value, still_secret};
pub use run::{Gate, LoopError, Next, RunLoop, is_terminal};

/// Lowercase hex of bytes (as in `sha256:<hex>`).
pub fn to_hex(bytes: &[u8]) -> String {
    policy::hex(bytes)
}

/// The kernel's version, written into every receipt.
pub const KERNEL_VERSION: &str = env!("CARGO_PKG_VERSION");
