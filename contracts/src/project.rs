//! Task-side contracts: what was asked, about which project, with which intent and context.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::check::{Check, Checker};
use crate::enums::{
    AgentRoleAuthority, AgentRoleKind, AssumptionStatus, ContradictionStatus, EvidenceKind,
    MemoryBackend, MemoryScope, Priority, RepoType, RunnerMode, TaskMode, TrustClass,
    WorkGraphEventType,
};
use crate::tag::{SchemaTag, Version};
use crate::timestamp::Timestamp;
use crate::value::{Object, Probability};

crate::contract_marker!(TaskRequestSchema, "craik.task_request");
crate::contract_marker!(ProjectProfileSchema, "craik.project_profile");
crate::contract_marker!(IntentLockSchema, "craik.intent_lock");
crate::contract_marker!(CaseFileSchema, "craik.case_file");
crate::contract_marker!(EvidenceReferenceSchema, "craik.evidence_reference");
crate::contract_marker!(AssumptionSchema, "craik.assumption");
crate::contract_marker!(ContradictionReportSchema, "craik.contradiction_report");
crate::contract_marker!(WorkGraphEventSchema, "craik.work_graph_event");
crate::contract_marker!(AgentRoleSchema, "craik.agent_role");

pub(crate) fn yes() -> bool {
    true
}

fn normal() -> Priority {
    Priority::Normal
}

/// Work requested by a user, a system, or another agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskRequest {
    #[serde(default)]
    pub schema: SchemaTag<TaskRequestSchema>,
    #[serde(default)]
    pub version: Version,
    /// `task_…`
    pub id: String,
    pub title: String,
    pub objective: String,
    pub project_id: String,
    /// Who asked, e.g. `user:maintainer`.
    pub requested_by: String,
    #[serde(default = "normal")]
    pub priority: Priority,
    pub mode: TaskMode,
    #[serde(default)]
    pub constraints: Vec<String>,
    #[serde(default)]
    pub expected_outputs: Vec<String>,
    pub created_at: Timestamp,
}

impl Check for TaskRequest {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "task_");
    }
}

/// Repository of a project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RepoProfile {
    #[serde(rename = "type")]
    pub repo_type: RepoType,
    pub local_path: String,
    #[serde(default)]
    pub remote: Option<String>,
    #[serde(default = "main_branch")]
    pub default_branch: String,
}

fn main_branch() -> String {
    "main".to_owned()
}

/// Documentation paths of a project and the ones that must never change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DocsProfile {
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub immutable_paths: Vec<String>,
}

/// Memory backend of a project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryProfile {
    pub backend: MemoryBackend,
    #[serde(default = "team")]
    pub scope: MemoryScope,
}

pub(crate) fn team() -> MemoryScope {
    MemoryScope::Team
}

/// A project Craik can reason about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProjectProfile {
    #[serde(default)]
    pub schema: SchemaTag<ProjectProfileSchema>,
    #[serde(default)]
    pub version: Version,
    /// `project_…`
    pub id: String,
    pub name: String,
    pub repo: RepoProfile,
    #[serde(default)]
    pub docs: DocsProfile,
    pub memory: MemoryProfile,
    #[serde(default)]
    pub policies: Vec<String>,
}

impl Check for ProjectProfile {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "project_");
    }
}

/// Accepted task intent and scope boundaries, fixed before execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IntentLock {
    #[serde(default)]
    pub schema: SchemaTag<IntentLockSchema>,
    #[serde(default)]
    pub version: Version,
    /// `intent_…`
    pub id: String,
    pub task_id: String,
    pub original_request: String,
    pub objective: String,
    pub accepted_interpretation: String,
    #[serde(default)]
    pub in_scope: Vec<String>,
    #[serde(default)]
    pub out_of_scope: Vec<String>,
    #[serde(default)]
    pub allowed_autonomy: Vec<String>,
    #[serde(default)]
    pub stop_conditions: Vec<String>,
    #[serde(default)]
    pub scope_change_rules: Vec<String>,
    pub created_at: Timestamp,
}

impl Check for IntentLock {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "intent_");
    }
}

/// A pointer to source material that supports an assertion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceReference {
    #[serde(default)]
    pub schema: SchemaTag<EvidenceReferenceSchema>,
    #[serde(default)]
    pub version: Version,
    /// `evidence_…`
    pub id: String,
    pub source: String,
    pub kind: EvidenceKind,
    pub locator: String,
    pub summary: String,
    #[serde(default)]
    pub captured_at: Option<Timestamp>,
    #[serde(default)]
    pub metadata: Object,
}

impl Check for EvidenceReference {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "evidence_");
    }
}

/// An assumption that must not become a fact without evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Assumption {
    #[serde(default)]
    pub schema: SchemaTag<AssumptionSchema>,
    #[serde(default)]
    pub version: Version,
    /// `assumption_…`
    pub id: String,
    pub task_id: String,
    pub statement: String,
    pub rationale: String,
    #[serde(default)]
    pub evidence_ids: Vec<String>,
    pub confidence: Probability,
    #[serde(default = "open_assumption")]
    pub status: AssumptionStatus,
}

fn open_assumption() -> AssumptionStatus {
    AssumptionStatus::Open
}

impl Check for Assumption {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "assumption_");
    }
}

/// A fact as proposed or carried in a case file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Fact {
    pub entity: String,
    pub relation: String,
    pub value: String,
    pub source: String,
    pub confidence: Probability,
    pub scope: MemoryScope,
    pub trust_class: TrustClass,
}

impl Check for Fact {
    fn check(&self, _: &mut Checker) {}
}

/// Incompatible assertions that need resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContradictionReport {
    #[serde(default)]
    pub schema: SchemaTag<ContradictionReportSchema>,
    #[serde(default)]
    pub version: Version,
    /// `contradiction_…`
    pub id: String,
    #[serde(default)]
    pub task_id: Option<String>,
    /// At least two fact ids.
    pub facts: Vec<String>,
    pub summary: String,
    #[serde(default)]
    pub affected_artifacts: Vec<String>,
    #[serde(default)]
    pub evidence_ids: Vec<String>,
    #[serde(default)]
    pub proposed_resolution: Option<String>,
    #[serde(default = "open_contradiction")]
    pub status: ContradictionStatus,
    #[serde(default)]
    pub owner: Option<String>,
    #[serde(default)]
    pub stigmem_conflict_id: Option<String>,
    #[serde(default)]
    pub created_at: Option<Timestamp>,
    #[serde(default)]
    pub resolved_at: Option<Timestamp>,
}

fn open_contradiction() -> ContradictionStatus {
    ContradictionStatus::Open
}

impl Check for ContradictionReport {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "contradiction_");
        c.min_len("facts", &self.facts, 2);
    }
}

/// Task context assembled before execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    #[serde(default)]
    pub schema: SchemaTag<CaseFileSchema>,
    #[serde(default)]
    pub version: Version,
    /// `case_…`
    pub id: String,
    pub task_id: String,
    pub objective: String,
    pub policy_envelope_id: String,
    #[serde(default)]
    pub intent_lock_id: Option<String>,
    #[serde(default)]
    pub facts: Vec<Fact>,
    #[serde(default)]
    pub evidence: Vec<EvidenceReference>,
    #[serde(default)]
    pub assumptions: Vec<Assumption>,
    #[serde(default)]
    pub docs: Vec<String>,
    #[serde(default)]
    pub adrs: Vec<String>,
    #[serde(default)]
    pub repo_state: Object,
    #[serde(default)]
    pub github_state: Object,
    #[serde(default)]
    pub recent_handoffs: Vec<String>,
    #[serde(default)]
    pub stale_risks: Vec<String>,
    #[serde(default)]
    pub contradictions: Vec<ContradictionReport>,
    #[serde(default)]
    pub verification_plan: Vec<String>,
    #[serde(default)]
    pub context_budget: Object,
}

impl Check for CaseFile {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "case_");
        c.each("evidence", &self.evidence);
        c.each("assumptions", &self.assumptions);
        c.each("contradictions", &self.contradictions);
    }
}

/// An edge added to the work graph.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkGraphEvent {
    #[serde(default)]
    pub schema: SchemaTag<WorkGraphEventSchema>,
    #[serde(default)]
    pub version: Version,
    /// `event_…`
    pub id: String,
    pub task_id: String,
    #[serde(rename = "type")]
    pub event_type: WorkGraphEventType,
    pub from: String,
    pub to: String,
    #[serde(default)]
    pub metadata: Object,
    pub created_at: Timestamp,
}

impl Check for WorkGraphEvent {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "event_");
    }
}

/// A policy-aware role for multi-agent coordination.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentRole {
    #[serde(default)]
    pub schema: SchemaTag<AgentRoleSchema>,
    #[serde(default)]
    pub version: Version,
    /// `role_…`
    pub id: String,
    pub kind: AgentRoleKind,
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub runner_id: Option<String>,
    #[serde(default)]
    pub runner_mode: Option<RunnerMode>,
    /// At least one; must include the authority the role's kind requires.
    #[serde(default)]
    pub authority: Vec<AgentRoleAuthority>,
    #[serde(default)]
    pub allowed_capabilities: Vec<String>,
    #[serde(default)]
    pub denied_capabilities: Vec<String>,
    #[serde(default)]
    pub policy_envelope_id: Option<String>,
    #[serde(default)]
    pub expected_input_schemas: Vec<String>,
    /// At least one.
    #[serde(default)]
    pub expected_output_schemas: Vec<String>,
    #[serde(default = "yes")]
    pub handoff_required: bool,
    #[serde(default = "yes")]
    pub receipt_required: bool,
    #[serde(default = "yes")]
    pub redaction_required: bool,
    #[serde(default)]
    pub metadata: Object,
}

impl Check for AgentRole {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "role_");
        c.min_len("authority", &self.authority, 1);
        c.min_len("expected_output_schemas", &self.expected_output_schemas, 1);
        let needed = self.kind.required_authority();
        if !self.authority.is_empty() && !self.authority.contains(&needed) {
            c.report(
                "authority",
                format!(
                    "a `{}` role must hold `{}` authority",
                    self.kind.as_str(),
                    needed.as_str()
                ),
            );
        }
        for overlap in self
            .allowed_capabilities
            .iter()
            .filter(|cap| self.denied_capabilities.contains(cap))
        {
            c.report(
                "allowed_capabilities",
                format!(
                    "capability `{}` is both allowed and denied",
                    crate::display::Truncated(overlap)
                ),
            );
        }
    }
}
