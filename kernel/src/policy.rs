//! Cedar policies decide: bundles, compiled grants, and the three-way verdict.

mod bundle;
mod command;
pub(crate) mod decide;
mod effect;
mod eval;
mod grant;
mod inputs;
mod lint;
mod request;
mod trace;

pub(crate) use bundle::hex;
pub use bundle::{
    Bundle, GRANT_ID_PREFIX, LoadError, Located, PolicyInfo, RawOutcome, SourceFile,
    policy_set_hash,
};
pub use command::{
    CommandFacts, MAX_ARGS, MAX_COMMAND_BYTES, analyse as analyse_command, split as split_command,
};
pub use decide::{
    DecideOptions, ENVELOPE_APPROVAL, ENVELOPE_DENIED, ENVELOPE_NOT_ALLOWED, ENVELOPE_UNDECLARED,
    NaivePolicies, RUNNER_PROMPT_HANDOFF, RUNNER_UNSUPPORTED, RunnerSupport, glob_matches,
    intent_entry_problem, request_hash,
};
pub use effect::{Effect, OPERATIONS, envelope_entry_problem, operations_of};
pub use grant::{
    CompiledGrant, GrantError, GrantSet, PathPattern, bind_project_grant, compile as compile_grant,
};
pub use lint::{Lint, Severity};
pub use request::{
    Approval, Decision, DecisionRequest, DenyKind, EnvelopeRules, IntentScope, Mode, RunnerRef,
    Verdict,
};
pub use trace::PermitTrace;
