//! Run-side contracts: run state, step outputs, worker results, handoffs and memory.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::check::{Check, Checker};
use crate::enums::{
    AgentRoleKind, FindingSeverity, HandoffStatus, MemoryBackend, Phase, ProposalOperation,
    ProposalStatus, ResultStatus, RunnerMode, SourceAttestation, TaskRunStatus,
};
use crate::project::{EvidenceReference, Fact, yes};
use crate::runner::RunnerMetadata;
use crate::tag::{SchemaTag, Version};
use crate::timestamp::Timestamp;
use crate::value::Object;

crate::contract_marker!(TaskRunSchema, "craik.task_run");
crate::contract_marker!(RunOutputSchema, "craik.run_output");
crate::contract_marker!(WorkerResultSchema, "craik.worker_result");
crate::contract_marker!(HandoffSchema, "craik.handoff");
crate::contract_marker!(MemoryProposalSchema, "craik.memory_proposal");
crate::contract_marker!(
    MemoryBackendCapabilitiesSchema,
    "craik.memory_backend_capabilities"
);

/// Durable state of one governed task run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskRun {
    #[serde(default)]
    pub schema: SchemaTag<TaskRunSchema>,
    #[serde(default)]
    pub version: Version,
    /// `run_…`
    pub id: String,
    pub task_id: String,
    pub case_file_id: String,
    pub policy_envelope_id: String,
    #[serde(default)]
    pub intent_lock_id: Option<String>,
    pub runner_id: String,
    pub runner_mode: RunnerMode,
    #[serde(default = "pending")]
    pub status: TaskRunStatus,
    #[serde(default = "plan")]
    pub phase: Phase,
    /// Completed iterations, never above `max_iterations`.
    #[serde(default)]
    pub iteration: u32,
    /// The iteration ceiling, at least 1.
    #[serde(default = "five")]
    pub max_iterations: u32,
    pub started_at: Timestamp,
    pub phase_started_at: Timestamp,
    pub updated_at: Timestamp,
    #[serde(default)]
    pub ended_at: Option<Timestamp>,
    #[serde(default)]
    pub stop_reason: Option<String>,
    #[serde(default)]
    pub receipt_ids: Vec<String>,
    #[serde(default)]
    pub handoff_id: Option<String>,
    #[serde(default)]
    pub runner_metadata: Vec<Object>,
    // Issue 21 item 4 (model steps, budgets): kept together at the end for merges.
    /// The most provider tokens (input + output, all model steps) the run may use; exceeding
    /// it ends the run `interrupted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_token_budget: Option<u64>,
    /// The most wall-clock seconds the run may take, waiting for approvals not counted;
    /// spent, the run ends `interrupted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_clock_budget_seconds: Option<u64>,
}

fn pending() -> TaskRunStatus {
    TaskRunStatus::Pending
}

fn plan() -> Phase {
    Phase::Plan
}

fn five() -> u32 {
    5
}

impl Check for TaskRun {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "run_");
        if self.max_iterations == 0 {
            c.report("max_iterations", "is `0`, expected at least 1");
        }
        if self.iteration > self.max_iterations {
            c.report(
                "iteration",
                format!(
                    "is `{}`, above `max_iterations` ({})",
                    self.iteration, self.max_iterations
                ),
            );
        }
        if let Some(ended) = self.ended_at.filter(|ended| *ended < self.started_at) {
            c.report(
                "ended_at",
                format!("`{ended}` is before `started_at` (`{}`)", self.started_at),
            );
        }
        if self.updated_at < self.started_at {
            c.report(
                "updated_at",
                format!(
                    "`{}` is before `started_at` (`{}`)",
                    self.updated_at, self.started_at
                ),
            );
        }
    }
}

/// Redacted, inspectable output captured from one runner step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunOutput {
    #[serde(default)]
    pub schema: SchemaTag<RunOutputSchema>,
    #[serde(default)]
    pub version: Version,
    /// `runout_…`
    pub id: String,
    pub run_id: String,
    pub step_result_id: String,
    pub task_id: String,
    pub phase: Phase,
    pub summary: String,
    #[serde(default)]
    pub observed_output: Object,
    #[serde(default)]
    pub diagnostics: Vec<String>,
    #[serde(default)]
    pub receipt_ids: Vec<String>,
    #[serde(default)]
    pub memory_proposal_ids: Vec<String>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default = "yes")]
    pub redacted: bool,
    pub created_at: Timestamp,
}

impl Check for RunOutput {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "runout_");
    }
}

/// One structured finding of a specialist worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerFinding {
    pub summary: String,
    #[serde(default = "info")]
    pub severity: FindingSeverity,
    #[serde(default)]
    pub evidence_ids: Vec<String>,
    #[serde(default)]
    pub artifact_refs: Vec<String>,
    #[serde(default)]
    pub contradiction_ids: Vec<String>,
}

fn info() -> FindingSeverity {
    FindingSeverity::Info
}

/// Typed output of a role-specific worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerResult {
    #[serde(default)]
    pub schema: SchemaTag<WorkerResultSchema>,
    #[serde(default)]
    pub version: Version,
    /// `worker_result_…`
    pub id: String,
    pub task_id: String,
    #[serde(default)]
    pub run_id: Option<String>,
    pub role_id: String,
    pub role_kind: AgentRoleKind,
    #[serde(default)]
    pub runner: Option<RunnerMetadata>,
    pub status: ResultStatus,
    pub summary: String,
    #[serde(default)]
    pub findings: Vec<WorkerFinding>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub assumptions: Vec<String>,
    #[serde(default)]
    pub risks: Vec<String>,
    #[serde(default)]
    pub proposed_actions: Vec<String>,
    #[serde(default)]
    pub contradiction_ids: Vec<String>,
    #[serde(default)]
    pub evidence: Vec<EvidenceReference>,
    #[serde(default)]
    pub receipt_ids: Vec<String>,
    #[serde(default)]
    pub handoff_id: Option<String>,
    #[serde(default)]
    pub diagnostics: Vec<String>,
    #[serde(default = "yes")]
    pub redacted: bool,
    pub created_at: Timestamp,
}

impl Check for WorkerResult {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "worker_result_");
        if let Some(runner) = &self.runner {
            c.nested("runner", runner);
        }
        c.each("evidence", &self.evidence);
    }
}

/// The handoff's required self-audit checklist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelfAudit {
    pub schema_validated: bool,
    pub redaction_reviewed: bool,
    pub receipts_reviewed: bool,
    pub assumptions_reviewed: bool,
    pub validation_recorded: bool,
    pub policy_exceptions_disclosed: bool,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// The durable summary of a run, for whoever picks the work up next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    #[serde(default)]
    pub schema: SchemaTag<HandoffSchema>,
    #[serde(default)]
    pub version: Version,
    /// `handoff_…`
    pub id: String,
    pub task_id: String,
    pub project_id: String,
    #[serde(default)]
    pub intent_lock_id: Option<String>,
    pub agent: String,
    #[serde(default = "completed")]
    pub status: HandoffStatus,
    pub summary: String,
    pub self_audit: SelfAudit,
    #[serde(default)]
    pub completed_actions: Vec<String>,
    #[serde(default)]
    pub files_changed: Vec<String>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub commands_run: Vec<String>,
    #[serde(default)]
    pub tests_run: Vec<String>,
    #[serde(default)]
    pub assumptions: Vec<String>,
    #[serde(default)]
    pub context_debt: Vec<String>,
    #[serde(default)]
    pub policy_exceptions: Vec<String>,
    #[serde(default)]
    pub facts_learned: Vec<String>,
    #[serde(default)]
    pub facts_invalidated: Vec<String>,
    #[serde(default)]
    pub contradictions_opened: Vec<String>,
    #[serde(default)]
    pub adjudication_ids: Vec<String>,
    #[serde(default)]
    pub unresolved_disagreements: Vec<String>,
    #[serde(default)]
    pub open_human_delegation_ids: Vec<String>,
    #[serde(default)]
    pub scope_change_request_ids: Vec<String>,
    #[serde(default)]
    pub scope_change_result_ids: Vec<String>,
    #[serde(default)]
    pub risks: Vec<String>,
    #[serde(default)]
    pub next_steps: Vec<String>,
    #[serde(default)]
    pub receipt_ids: Vec<String>,
    #[serde(default)]
    pub memory_proposal_ids: Vec<String>,
    pub created_at: Timestamp,
}

fn completed() -> HandoffStatus {
    HandoffStatus::Completed
}

impl Check for Handoff {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "handoff_");
    }
}

/// A reviewable proposal to change memory; never a fact by itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryProposal {
    #[serde(default)]
    pub schema: SchemaTag<MemoryProposalSchema>,
    #[serde(default)]
    pub version: Version,
    /// `memprop_…`
    pub id: String,
    pub task_id: String,
    /// The run that proposed it, for run-created proposals.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The runner step result that observed it, for run-created proposals.
    #[serde(default)]
    pub step_result_id: Option<String>,
    /// The handoff that closed the run, once there is one.
    #[serde(default)]
    pub handoff_id: Option<String>,
    pub operation: ProposalOperation,
    pub fact: Fact,
    #[serde(default)]
    pub evidence: Vec<EvidenceReference>,
    #[serde(default = "yes")]
    pub requires_approval: bool,
    #[serde(default = "pending_proposal")]
    pub status: ProposalStatus,
    #[serde(default)]
    pub decision_reason: Option<String>,
    #[serde(default)]
    pub decided_by: Option<String>,
    #[serde(default)]
    pub decided_at: Option<Timestamp>,
}

fn pending_proposal() -> ProposalStatus {
    ProposalStatus::Pending
}

impl Check for MemoryProposal {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "memprop_");
        c.each("evidence", &self.evidence);
        let decided = matches!(
            self.status,
            ProposalStatus::Approved | ProposalStatus::Rejected
        );
        if decided && (self.decided_by.is_none() || self.decided_at.is_none()) {
            c.report(
                "status",
                format!(
                    "is `{}` but `decided_by` and `decided_at` are not both set",
                    self.status.as_str()
                ),
            );
        }
        if !decided && (self.decided_by.is_some() || self.decided_at.is_some()) {
            c.report(
                "status",
                "is `pending` but a decision (`decided_by`/`decided_at`) is recorded",
            );
        }
        if self.step_result_id.is_some() && self.run_id.is_none() {
            c.report("run_id", "missing, required when `step_result_id` is set");
        }
    }
}

/// Minimum memory backend behaviour Craik depends on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryRequiredCapabilities {
    pub health: bool,
    pub metadata: bool,
    pub fact_write: bool,
    pub fact_query: bool,
    pub fact_get: bool,
    pub fact_provenance: bool,
}

/// Optional memory backend behaviour.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryOptionalCapabilities {
    #[serde(default)]
    pub recall: bool,
    #[serde(default)]
    pub conflicts: bool,
    #[serde(default = "attestation_off")]
    pub source_attestation: SourceAttestation,
    #[serde(default)]
    pub federation: bool,
}

fn attestation_off() -> SourceAttestation {
    SourceAttestation::Off
}

impl Default for MemoryOptionalCapabilities {
    fn default() -> Self {
        Self {
            recall: false,
            conflicts: false,
            source_attestation: SourceAttestation::Off,
            federation: false,
        }
    }
}

/// A detected memory backend capability snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryBackendCapabilities {
    #[serde(default)]
    pub schema: SchemaTag<MemoryBackendCapabilitiesSchema>,
    #[serde(default)]
    pub version: Version,
    pub backend: MemoryBackend,
    #[serde(default)]
    pub node_url: Option<String>,
    #[serde(default)]
    pub node_id: Option<String>,
    #[serde(default)]
    pub auth_required: bool,
    pub required: MemoryRequiredCapabilities,
    #[serde(default)]
    pub optional: MemoryOptionalCapabilities,
    pub checked_at: Timestamp,
}

impl Check for MemoryBackendCapabilities {
    fn check(&self, _: &mut Checker) {}
}
