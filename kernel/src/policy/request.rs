//! What a decision is asked about, and what it answers.

use craik_contracts::{Phase, PolicyProfile, RunnerMode, RunnerTrustLevel, TaskMode, Timestamp};
use serde::{Deserialize, Serialize};

/// The runner asking (the principal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerRef {
    /// `runner_…`
    pub id: String,
    #[serde(default = "medium")]
    pub trust: RunnerTrustLevel,
    #[serde(default = "fixture")]
    pub mode: RunnerMode,
}

fn medium() -> RunnerTrustLevel {
    RunnerTrustLevel::Medium
}

fn fixture() -> RunnerMode {
    RunnerMode::Fixture
}

/// The machine-checkable part of an intent lock.
///
/// Entries without whitespace are path scopes (`src`, `Makefile`, `docs/adr/`); an
/// out-of-scope entry that cannot be normalised puts every path out of scope (fail closed).
/// Prose entries (with whitespace) are kept for the record but cannot be checked. Stop conditions of the forms
/// `capability:<name or family>` and `path:<prefix>` are checked; prose ones are not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntentScope {
    #[serde(default)]
    pub in_scope: Vec<String>,
    #[serde(default)]
    pub out_of_scope: Vec<String>,
    #[serde(default)]
    pub stop_conditions: Vec<String>,
}

impl From<&craik_contracts::IntentLock> for IntentScope {
    fn from(lock: &craik_contracts::IntentLock) -> Self {
        Self {
            in_scope: lock.in_scope.clone(),
            out_of_scope: lock.out_of_scope.clone(),
            stop_conditions: lock.stop_conditions.clone(),
        }
    }
}

/// A recorded human approval, bound to one request's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// `approval_…`
    pub id: String,
    /// The [`request_hash`](crate::request_hash) of the exact request approved.
    pub request_hash: String,
    /// Who approved: a `user:` principal, never the runner.
    pub approved_by: String,
    /// The profile it was granted under; never honoured under another.
    pub profile: PolicyProfile,
    /// The task it belongs to; never honoured for another.
    pub task_id: String,
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
    /// Approvals are single use: a consumed one is recorded as used.
    #[serde(default)]
    pub used: bool,
}

/// The capability lists of a run's policy envelope. An envelope only ever tightens a verdict:
/// each entry names a capability or a family (`repo.write` covers `repo.write.docs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvelopeRules {
    /// When non-empty, every other capability is denied (`envelope.not-allowed`).
    #[serde(default)]
    pub allowed: Vec<String>,
    /// Denied whatever policies and grants say (`envelope.denied`).
    #[serde(default)]
    pub denied: Vec<String>,
    /// An allow becomes requires-approval unless an approval binds to the exact request
    /// (`envelope.approval-required`); under `automation`, a deny.
    #[serde(default)]
    pub approval_required: Vec<String>,
}

impl From<&craik_contracts::PolicyEnvelope> for EnvelopeRules {
    fn from(e: &craik_contracts::PolicyEnvelope) -> Self {
        Self {
            allowed: e.allowed_capabilities.clone(),
            denied: e.denied_capabilities.clone(),
            approval_required: e.approval_required.clone(),
        }
    }
}

impl EnvelopeRules {
    /// The entry of `list` that covers `capability` (itself, or a family of it).
    pub fn covering<'a>(list: &'a [String], capability: &str) -> Option<&'a str> {
        list.iter()
            .find(|e| {
                *e == capability
                    || capability
                        .strip_prefix(e.as_str())
                        .is_some_and(|rest| rest.starts_with('.'))
            })
            .map(String::as_str)
    }
}

/// One step request, as the kernel decides it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionRequest {
    pub runner: RunnerRef,
    pub task_id: String,
    /// A capability the schema declares, e.g. `repo.write.docs`.
    pub capability: String,
    /// What is touched: a workspace path (repo.*), a command line (shell.*, split on single
    /// spaces), a memory scope (memory.*), a URL (net.*), a repository name (git.*, github.*).
    #[serde(default)]
    pub target: Option<String>,
    /// For shell.*: argv, instead of a command line.
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// `read`, `write`, `patch`, `delete`, `execute`, ...
    pub operation: String,
    pub profile: PolicyProfile,
    #[serde(default = "act")]
    pub phase: Phase,
    #[serde(default)]
    pub iteration: u32,
    #[serde(default = "five")]
    pub max_iterations: u32,
    #[serde(default = "implement")]
    pub task_mode: TaskMode,
    #[serde(default)]
    pub intent: Option<IntentScope>,
    #[serde(default)]
    pub approvals: Vec<Approval>,
    /// `sha256:` of the action's payload (the bytes a write puts, a patch's edits): bound into
    /// the request hash, so an approval covers exactly these bytes and no others.
    #[serde(default)]
    pub payload: Option<String>,
    /// Ask for fail-open on evaluation errors; honoured only under `trusted-local`.
    #[serde(default)]
    pub fail_open: bool,
    /// The run's policy envelope, which can only tighten the verdict.
    #[serde(default)]
    pub envelope: Option<EnvelopeRules>,
}

fn act() -> Phase {
    Phase::Act
}

fn five() -> u32 {
    5
}

fn implement() -> TaskMode {
    TaskMode::Implement
}

/// The three verdicts, ordered by strictness: the strictest wins.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Allow,
    RequiresApproval,
    Deny,
}

/// Why a request was denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenyKind {
    /// A `forbid` policy matched (the determining policies say which).
    ForbiddenBy,
    /// No `permit` matched: no policy and no grant allows it.
    NotPermitted,
    /// A policy failed to evaluate; the kernel denies rather than skip it.
    EvaluationError,
    /// The request itself was refused (unknown capability, unsafe path, unanalysable command).
    InvalidRequest,
    /// An approval rule matched where no approval is possible (`automation`).
    ApprovalUnavailable,
}

/// Enforce the verdict, or only report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Enforce,
    Shadow,
}

/// The kernel's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub decision: Decision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_kind: Option<DenyKind>,
    /// Policy ids that determined the verdict, sorted.
    pub determining: Vec<String>,
    /// Their `@reason`s (or the kernel's reason for invalid requests), in the same order.
    pub reasons: Vec<String>,
    /// Grants whose compiled policy permitted the request.
    pub grants: Vec<String>,
    /// The permits that allowed the request before an approval rule held it (requires
    /// approval, or denied for want of an approver): what an approval would let through.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub permitted_by: Vec<String>,
    /// Why each grant of the task did not apply, when none did.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grant_notes: Vec<String>,
    /// The approval consumed, if one turned RequiresApproval into Allow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<String>,
    /// Evaluation errors, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Set when an evaluation error was let through under a fail-open profile: a policy
    /// exception that must be receipted.
    pub policy_exception: bool,
    /// Enforce, or shadow (the verdict it *would* enforce; the caller does not act on it).
    pub mode: Mode,
    /// Canonical hash of the request (what approvals bind to).
    pub request_hash: String,
    /// Hash of the loaded policy set.
    pub policy_set: String,
}

impl Verdict {
    /// A deny decided by the intent lock or the iteration ceiling alone (`intent.*`,
    /// `loop.*` in `policies/base/intent.cedar`): the run must stop, not just this action.
    /// Any other forbid among the determining policies makes it an ordinary denial.
    pub fn is_intent_stop(&self) -> bool {
        self.decision == Decision::Deny
            && !self.determining.is_empty()
            && self
                .determining
                .iter()
                .all(|p| p.starts_with("intent.") || p.starts_with("loop."))
    }
}
