//! What a runner may ask for inside a step result, and the fixture runner's scenario format.
//!
//! A `craik.runner_step_result` carries runner-specific data only in `observed_output`. Three
//! keys of it are reserved and read strictly by the host: `proposed_actions` (side effects the
//! runner asks Craik to perform), `memory_proposals` (explicit memory proposal specs) and
//! `next` (an evaluate step's `continue` or `stop`). Everything else is free-form output.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::check::{Check, Checker};
use crate::display::Truncated;
use crate::enums::{Phase, ProposalOperation, ResultStatus, RunnerTrustLevel};
use crate::project::Fact;
use crate::runner::{RunnerStepRequest, RunnerStepResult};
use crate::tag::{SchemaTag, Version};
use crate::value::Object;

crate::contract_marker!(FixtureScenarioSchema, "craik.fixture_scenario");

/// Reserved `observed_output` keys.
pub const PROPOSED_ACTIONS: &str = "proposed_actions";
/// Reserved `observed_output` key for memory proposal specs.
pub const MEMORY_PROPOSALS: &str = "memory_proposals";
/// Reserved `observed_output` key for an evaluate step's decision.
pub const NEXT: &str = "next";

/// One exact replacement in a file: `old` must occur exactly once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileEdit {
    pub old: String,
    pub new: String,
}

/// A side effect the runner proposes; Craik decides it and, if allowed, performs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProposedAction {
    /// `action_…`, unique within the run.
    pub id: String,
    /// A capability the policy schema declares (`repo.write.docs`, `shell.test`, ...).
    pub capability: String,
    /// `read`, `write`, `patch`, `execute`, `propose`, ...
    pub operation: String,
    /// Workspace path (repo.*), memory scope (memory.*), URL (net.*), repository (git.*).
    #[serde(default)]
    pub target: Option<String>,
    /// shell.*: the command as argv (never a shell string).
    #[serde(default)]
    pub argv: Option<Vec<String>>,
    /// `write`: the file's new content.
    #[serde(default)]
    pub content: Option<String>,
    /// `patch`: exact replacements, applied in order.
    #[serde(default)]
    pub edits: Vec<FileEdit>,
    /// shell.*: a timeout below the host's ceiling, in milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Why the runner wants it (shown to approvers).
    #[serde(default)]
    pub reason: Option<String>,
}

/// A memory proposal the runner asks for; Craik links it to the run and adds evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryProposalSpec {
    pub operation: ProposalOperation,
    pub fact: Fact,
    /// What the runner observed that supports it.
    pub rationale: String,
}

/// An evaluate step's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NextStep {
    Continue,
    Stop,
}

/// One scripted step of a fixture scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixtureStep {
    /// The phase this step answers; the kernel asks phases in order and refuses a mismatch.
    pub phase: Phase,
    #[serde(default = "completed")]
    pub status: ResultStatus,
    pub summary: String,
    /// Free-form outputs (become `observed_output`, redacted).
    #[serde(default)]
    pub outputs: Object,
    #[serde(default)]
    pub proposed_actions: Vec<ProposedAction>,
    #[serde(default)]
    pub memory_proposals: Vec<MemoryProposalSpec>,
    #[serde(default)]
    pub diagnostics: Vec<String>,
    /// Evaluate steps: `continue` or `stop`.
    #[serde(default)]
    pub next: Option<NextStep>,
    /// Model steps the fixture reports for this step (`model_step` events, in order): a
    /// scripted "provider" whose usage a test chooses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_steps: Vec<crate::channel::ModelStepReport>,
}

fn completed() -> ResultStatus {
    ResultStatus::Completed
}

/// A deterministic scripted run for the fixture runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FixtureScenario {
    #[serde(default)]
    pub schema: SchemaTag<FixtureScenarioSchema>,
    #[serde(default)]
    pub version: Version,
    /// `scenario_…`
    pub id: String,
    pub description: String,
    /// The trust the fixture runner claims (policy may treat low trust differently).
    #[serde(default = "medium")]
    pub runner_trust: RunnerTrustLevel,
    pub steps: Vec<FixtureStep>,
}

fn medium() -> RunnerTrustLevel {
    RunnerTrustLevel::Medium
}

impl FixtureScenario {
    /// The model steps step `context.step` of the script reports (none when it has none, or
    /// no such step).
    pub fn model_steps(&self, request: &RunnerStepRequest) -> Vec<crate::channel::ModelStepReport> {
        request
            .context
            .0
            .get("step")
            .and_then(serde_json::Value::as_u64)
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|i| self.steps.get(i))
            .map(|s| s.model_steps.clone())
            .unwrap_or_default()
    }

    /// The scenario's answer to a step request: step `context.step` of the script, echoing the
    /// request's ids, phase-as-scripted (the host checks it), runner and time. Deterministic
    /// and stateless, so a runner restarted after a crash answers the same.
    pub fn answer(&self, request: &RunnerStepRequest) -> Result<RunnerStepResult, String> {
        let n = request
            .context
            .0
            .get("step")
            .and_then(serde_json::Value::as_u64)
            .ok_or("the request has no `context.step`")?;
        let step = usize::try_from(n)
            .ok()
            .and_then(|i| self.steps.get(i))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "scenario `{}` has no step {n} (it has {})",
                    self.id,
                    self.steps.len()
                )
            })?;
        let value = |v: serde_json::Result<serde_json::Value>| v.unwrap_or(serde_json::Value::Null);
        let mut observed = step.outputs.0.clone();
        if !step.proposed_actions.is_empty() {
            observed.insert(
                PROPOSED_ACTIONS.into(),
                value(serde_json::to_value(&step.proposed_actions)),
            );
        }
        if !step.memory_proposals.is_empty() {
            observed.insert(
                MEMORY_PROPOSALS.into(),
                value(serde_json::to_value(&step.memory_proposals)),
            );
        }
        if let Some(next) = step.next {
            observed.insert(NEXT.into(), value(serde_json::to_value(next)));
        }
        let mut result = RunnerStepResult::answering(
            request,
            step.status,
            step.summary,
            Object(observed),
            step.diagnostics,
        );
        // The scripted phase, not the asked one: a script out of step with the loop is caught
        // by the host like any runner answering the wrong phase.
        result.phase = step.phase;
        Ok(result)
    }
}

impl Check for FixtureScenario {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "scenario_");
        c.min_len("steps", &self.steps, 1);
        let mut seen: Vec<&str> = Vec::new();
        for (i, step) in self.steps.iter().enumerate() {
            let evaluate = step.phase == Phase::Evaluate;
            if evaluate && step.next.is_none() && step.status == ResultStatus::Completed {
                c.report(
                    "steps",
                    format!("step {i}: an evaluate step must say `next`"),
                );
            }
            if !evaluate && step.next.is_some() {
                c.report("steps", format!("step {i}: only evaluate steps say `next`"));
            }
            for action in &step.proposed_actions {
                if crate::check::id_problem(&action.id).is_some()
                    || !action.id.starts_with("action_")
                {
                    c.report(
                        "steps",
                        format!(
                            "step {i}: action id `{}` must be an id starting with `action_`",
                            Truncated(&action.id)
                        ),
                    );
                }
                if seen.contains(&action.id.as_str()) {
                    c.report(
                        "steps",
                        format!(
                            "step {i}: action id `{}` is used twice",
                            Truncated(&action.id)
                        ),
                    );
                }
                seen.push(&action.id);
            }
        }
    }
}
