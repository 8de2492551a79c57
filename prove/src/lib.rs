//! Craik's policy prover (issue 35): `craik policy diff --prove`, `craik policy validate
//! --prove never-errors` and `craik policy prove 'QUERY'`.
//!
//! cedar-policy-symcc compiles a bundle's Cedar policies to SMT-LIB and cvc5 answers; this
//! crate builds the sets to compare ([`sets`]), runs the solver behind canaries ([`solver`]),
//! classifies changes and checks properties, and replays every counterexample through the
//! kernel's own `Bundle::decide` ([`replay`]): a model the kernel cannot reach is reported
//! as spurious, never as a finding. "Equivalent" and "never errors" are also checked against
//! sampled requests through the kernel ([`sample`]), so a broken solver cannot make a change
//! look safe.
//!
//! It must not sit on the decision path: the kernel does not depend on it, and nothing here
//! changes a verdict. The solver is an external process, killed on drop and on timeouts.

mod classify;
mod emit;
mod errors;
mod query;
mod render;
mod replay;
mod sample;
mod sets;
mod solver;

pub use classify::{Class, DiffReport, Direction, Finding, Row, Side, Status, diff};
pub use emit::{EmittedSuite, emit_tests};
pub use errors::{NeverErrorsReport, PolicyError, never_errors};
pub use query::{
    Property, PropertyReport, PropertyResult, Query, QueryError, Verb, parse as parse_query,
    parse_library, prove,
};
pub use render::{render_diff, render_never_errors, render_properties};
pub use replay::{Replayed, WORKSPACE_ROOT, to_request};
pub use sets::{CedarBundle, Level};
pub use solver::{SOLVER_ENV, SOLVER_VERSION, SolverCheck, SolverConfig};

/// Why a proof could not report.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// No solver, or one that failed its version check or a canary (CLI exit 7).
    #[error("{0}")]
    SolverUnavailable(String),
    /// The solver answered `unknown` (its time limit) or was killed by Craik's (exit 7).
    #[error("{0}")]
    Unknown(String),
    /// The solver failed mid-run (exit 4).
    #[error("solver: {0}")]
    Solver(String),
    /// A policy symcc cannot compile (templates, unsupported features) (exit 3).
    #[error("symbolic compilation: {0}")]
    Compile(String),
    /// The bundle or the two sides cannot be compared (exit 3).
    #[error("{0}")]
    Bundle(String),
    /// The solver's answer disagrees with Cedar's authorizer or with sampled requests through
    /// the kernel: the solver (or its decoding) is broken; nothing is reported (exit 4).
    #[error("{0}")]
    Unsound(String),
    /// A bug (exit 4).
    #[error("internal: {0}")]
    Internal(String),
}

/// A string from a policy, a model or a request, safe to show a person on one line:
/// control characters are escaped as the rest of the CLI does.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// symcc's compiler recurses over expressions; a guard's long conjunction needs more stack
/// than a test thread (2 MiB) has in a debug build.
const PROOF_STACK: usize = 256 << 20;

/// Runs `work` on a current-thread runtime on its own thread with [`PROOF_STACK`]: one
/// thread, driving one solver process at a time.
fn block_on<T: Send, F: std::future::Future<Output = Result<T, ProveError>>>(
    work: impl FnOnce() -> F + Send,
) -> Result<T, ProveError> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("craik-prove".into())
            .stack_size(PROOF_STACK)
            .spawn_scoped(scope, || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| ProveError::Internal(format!("tokio runtime: {e}")))?
                    .block_on(work())
            })
            .map_err(|e| ProveError::Internal(format!("proof thread: {e}")))?;
        handle
            .join()
            .map_err(|_| ProveError::Internal("the proof thread panicked".into()))?
    })
}

/// Runs one solver query with Craik's own wall limit on top of cvc5's: past it, the future
/// (and with it the solver process, `kill_on_drop`) is dropped.
async fn bounded<T>(
    limit: std::time::Duration,
    what: &str,
    query: impl std::future::Future<Output = cedar_policy_symcc::err::Result<T>>,
) -> Result<T, ProveError> {
    match tokio::time::timeout(limit + std::time::Duration::from_secs(10), query).await {
        Err(_) => Err(ProveError::Unknown(format!(
            "{what}: no answer within {} s; the solver was stopped",
            limit.as_secs() + 10
        ))),
        Ok(Err(cedar_policy_symcc::err::Error::SolverUnknown)) => Err(ProveError::Unknown(
            format!("{what}: the solver answered `unknown` (time limit); nothing is claimed"),
        )),
        Ok(Err(cedar_policy_symcc::err::Error::SolverError(e))) => {
            Err(ProveError::Solver(format!("{what}: {e}")))
        }
        Ok(Err(e)) => Err(ProveError::Compile(format!("{what}: {e}"))),
        Ok(Ok(v)) => Ok(v),
    }
}
