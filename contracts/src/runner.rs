//! Runner-side contracts: identity, capability matrix, adapter and step messages, providers and
//! compiled prompts. Runner-specific data lives only in `metadata`, `context`, `outputs`,
//! `observed_output` and `diagnostics`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::check::{Check, Checker};
use crate::display::Truncated;
use crate::enums::{
    ModelProviderMode, ModelProviderTrustBoundary, Phase, ResultStatus, RunnerCapabilitySupport,
    RunnerGrantPosture, RunnerMode, RunnerTrustLevel,
};
use crate::project::yes;
use crate::tag::{SchemaTag, Version};
use crate::timestamp::Timestamp;
use crate::value::Object;

crate::contract_marker!(RunnerMetadataSchema, "craik.runner_metadata");
crate::contract_marker!(
    RunnerCapabilityMatrixSchema,
    "craik.runner_capability_matrix"
);
crate::contract_marker!(RunnerAdapterRequestSchema, "craik.runner_adapter_request");
crate::contract_marker!(RunnerAdapterResultSchema, "craik.runner_adapter_result");
crate::contract_marker!(RunnerStepRequestSchema, "craik.runner_step_request");
crate::contract_marker!(RunnerStepResultSchema, "craik.runner_step_result");
crate::contract_marker!(ModelProviderSchema, "craik.model_provider");
crate::contract_marker!(CompiledPromptSchema, "craik.compiled_prompt");

/// Identity and capability summary of a runner adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerMetadata {
    #[serde(default)]
    pub schema: SchemaTag<RunnerMetadataSchema>,
    #[serde(default)]
    pub version: Version,
    /// `runner_…`
    pub id: String,
    pub name: String,
    pub adapter: String,
    pub adapter_version: String,
    pub mode: RunnerMode,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub metadata: Object,
}

impl Check for RunnerMetadata {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "runner_");
    }
}

/// One capability entry of a runner's matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerCapability {
    pub name: String,
    pub support: RunnerCapabilitySupport,
    #[serde(default = "yes")]
    pub grant_required: bool,
    #[serde(default)]
    pub notes: Option<String>,
}

/// Trust boundary and default posture of a runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerTrustProfile {
    pub level: RunnerTrustLevel,
    pub boundary: String,
    #[serde(default = "deny_by_default")]
    pub default_grant_posture: RunnerGrantPosture,
    #[serde(default = "yes")]
    pub requires_receipts: bool,
    #[serde(default = "yes")]
    pub requires_redaction: bool,
    #[serde(default)]
    pub notes: Vec<String>,
}

fn deny_by_default() -> RunnerGrantPosture {
    RunnerGrantPosture::DenyByDefault
}

/// What a runner can do, as data the policy decision consumes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerCapabilityMatrix {
    #[serde(default)]
    pub schema: SchemaTag<RunnerCapabilityMatrixSchema>,
    #[serde(default)]
    pub version: Version,
    pub runner: RunnerMetadata,
    pub trust: RunnerTrustProfile,
    #[serde(default)]
    pub capabilities: Vec<RunnerCapability>,
    #[serde(default)]
    pub policy_notes: Vec<String>,
}

impl Check for RunnerCapabilityMatrix {
    fn check(&self, c: &mut Checker) {
        c.nested("runner", &self.runner);
        let mut seen: Vec<&str> = Vec::new();
        for cap in &self.capabilities {
            if seen.contains(&cap.name.as_str()) {
                c.report(
                    "capabilities",
                    format!("capability `{}` is listed twice", Truncated(&cap.name)),
                );
            }
            seen.push(&cap.name);
        }
    }
}

/// Input handed from Craik to a runner adapter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerAdapterRequest {
    #[serde(default)]
    pub schema: SchemaTag<RunnerAdapterRequestSchema>,
    #[serde(default)]
    pub version: Version,
    /// `runner_request_…`
    pub id: String,
    pub task_id: String,
    pub runner: RunnerMetadata,
    pub task_request_id: String,
    pub case_file_id: String,
    pub policy_envelope_id: String,
    #[serde(default)]
    pub capability_grant_ids: Vec<String>,
    #[serde(default)]
    pub expected_output_schemas: Vec<String>,
    #[serde(default)]
    pub context: Object,
    pub created_at: Timestamp,
}

impl Check for RunnerAdapterRequest {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "runner_request_");
        c.nested("runner", &self.runner);
    }
}

/// Output a runner adapter returns to Craik.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerAdapterResult {
    #[serde(default)]
    pub schema: SchemaTag<RunnerAdapterResultSchema>,
    #[serde(default)]
    pub version: Version,
    /// `runner_result_…`
    pub id: String,
    pub request_id: String,
    pub task_id: String,
    pub runner: RunnerMetadata,
    pub status: ResultStatus,
    pub summary: String,
    #[serde(default)]
    pub outputs: Object,
    #[serde(default)]
    pub receipt_ids: Vec<String>,
    #[serde(default)]
    pub handoff_id: Option<String>,
    #[serde(default)]
    pub memory_proposal_ids: Vec<String>,
    #[serde(default)]
    pub artifacts: Vec<String>,
    #[serde(default)]
    pub diagnostics: Vec<String>,
    pub created_at: Timestamp,
}

impl Check for RunnerAdapterResult {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "runner_result_");
        c.nested("runner", &self.runner);
    }
}

/// Input for one governed loop step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerStepRequest {
    #[serde(default)]
    pub schema: SchemaTag<RunnerStepRequestSchema>,
    #[serde(default)]
    pub version: Version,
    /// `runner_step_request_…`
    pub id: String,
    pub run_id: String,
    pub task_id: String,
    pub phase: Phase,
    pub runner: RunnerMetadata,
    pub policy_envelope_id: String,
    #[serde(default)]
    pub intent_lock_id: Option<String>,
    #[serde(default)]
    pub capability_grant_ids: Vec<String>,
    #[serde(default)]
    pub expected_output_schemas: Vec<String>,
    pub input_prompt: String,
    #[serde(default)]
    pub context: Object,
    #[serde(default = "yes")]
    pub redaction_required: bool,
    pub created_at: Timestamp,
}

impl Check for RunnerStepRequest {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "runner_step_request_");
        c.nested("runner", &self.runner);
    }
}

/// Output of one governed loop step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerStepResult {
    #[serde(default)]
    pub schema: SchemaTag<RunnerStepResultSchema>,
    #[serde(default)]
    pub version: Version,
    /// `runner_step_result_…`
    pub id: String,
    pub request_id: String,
    pub run_id: String,
    pub task_id: String,
    pub phase: Phase,
    pub runner: RunnerMetadata,
    pub status: ResultStatus,
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

impl RunnerStepResult {
    /// A result answering `request`: its ids, phase, runner and time echoed, the rest given.
    /// Adapters build every answer with it, so the echo the host checks is never hand-copied.
    pub fn answering(
        request: &RunnerStepRequest,
        status: ResultStatus,
        summary: String,
        observed_output: Object,
        diagnostics: Vec<String>,
    ) -> Self {
        Self {
            schema: SchemaTag::default(),
            version: Version,
            id: request
                .id
                .replacen("runner_step_request_", "runner_step_result_", 1),
            request_id: request.id.clone(),
            run_id: request.run_id.clone(),
            task_id: request.task_id.clone(),
            phase: request.phase,
            runner: request.runner.clone(),
            status,
            summary,
            observed_output,
            diagnostics,
            receipt_ids: Vec::new(),
            memory_proposal_ids: Vec::new(),
            artifacts: Vec::new(),
            redacted: false,
            created_at: request.created_at,
        }
    }
}

impl Check for RunnerStepResult {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "runner_step_result_");
        c.nested("runner", &self.runner);
    }
}

/// One capability a model provider exposes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelProviderCapability {
    pub name: String,
    pub mode: ModelProviderMode,
    pub description: String,
    #[serde(default = "yes")]
    pub grant_required: bool,
}

/// A model provider and its runtime path; names secrets, never holds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelProvider {
    #[serde(default)]
    pub schema: SchemaTag<ModelProviderSchema>,
    #[serde(default)]
    pub version: Version,
    /// `provider_…`
    pub id: String,
    pub name: String,
    pub provider: String,
    /// At least one.
    pub modes: Vec<ModelProviderMode>,
    /// At least one; each capability's mode must be among `modes`.
    pub capabilities: Vec<ModelProviderCapability>,
    pub trust_boundary: ModelProviderTrustBoundary,
    #[serde(default)]
    pub config_refs: Vec<String>,
    /// Names of the environment variables holding secrets, never the secrets.
    #[serde(default)]
    pub secret_ref_names: Vec<String>,
    #[serde(default)]
    pub budget_ref: Option<String>,
    #[serde(default)]
    pub quota_ref: Option<String>,
    #[serde(default)]
    pub runtime_path: Option<String>,
    /// Must not carry secret-like keys (`secret`, `token`, `api_key`, `password`, ...).
    #[serde(default)]
    pub metadata: Object,
    /// At least one.
    pub docs: Vec<String>,
    pub created_at: Timestamp,
}

const SECRET_KEY_WORDS: [&str; 6] = [
    "secret",
    "token",
    "api_key",
    "apikey",
    "password",
    "credential",
];

impl Check for ModelProvider {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "provider_");
        c.min_len("modes", &self.modes, 1);
        c.min_len("capabilities", &self.capabilities, 1);
        c.min_len("docs", &self.docs, 1);
        for (i, cap) in self.capabilities.iter().enumerate() {
            if !self.modes.contains(&cap.mode) {
                c.report(
                    "capabilities",
                    format!(
                        "capability {i} (`{}`) uses mode `{}`, which is not among `modes`",
                        Truncated(&cap.name),
                        cap.mode.as_str()
                    ),
                );
            }
        }
        for key in self.metadata.0.keys() {
            let normalized = key.to_lowercase().replace('-', "_");
            if SECRET_KEY_WORDS.iter().any(|w| normalized.contains(w)) {
                c.report(
                    "metadata",
                    format!(
                        "key `{}` looks like a secret; name secrets in `secret_ref_names`",
                        Truncated(key)
                    ),
                );
            }
        }
    }
}

/// One titled section of a compiled prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PromptSection {
    pub title: String,
    pub body: String,
}

/// A deterministic, policy-aware runner prompt compiled from Craik state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompiledPrompt {
    #[serde(default)]
    pub schema: SchemaTag<CompiledPromptSchema>,
    #[serde(default)]
    pub version: Version,
    /// `prompt_…`
    pub id: String,
    pub task_id: String,
    pub case_file_id: String,
    pub policy_envelope_id: String,
    pub runner_id: String,
    pub runner_mode: RunnerMode,
    #[serde(default)]
    pub capability_grant_ids: Vec<String>,
    #[serde(default)]
    pub expected_output_schemas: Vec<String>,
    #[serde(default)]
    pub context_omissions: Vec<String>,
    #[serde(default)]
    pub stop_conditions: Vec<String>,
    #[serde(default)]
    pub sections: Vec<PromptSection>,
    pub prompt: String,
}

impl Check for CompiledPrompt {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "prompt_");
    }
}
