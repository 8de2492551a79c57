//! The 26 contracts this build implements, by name: decoding, checking, JSON Schema.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::action::FixtureScenario;
use crate::check::{Check, Checker};
use crate::policy::{CapabilityGrant, CapabilityReceipt, PolicyEnvelope};
use crate::problem::Problem;
use crate::project::{
    AgentRole, CaseFile, ContradictionReport, EvidenceReference, IntentLock, ProjectProfile,
    TaskRequest, WorkGraphEvent,
};
use crate::run::{
    Handoff, MemoryBackendCapabilities, MemoryProposal, RunOutput, TaskRun, WorkerResult,
};
use crate::runner::{
    CompiledPrompt, ModelProvider, RunnerAdapterRequest, RunnerAdapterResult,
    RunnerCapabilityMatrix, RunnerMetadata, RunnerStepRequest, RunnerStepResult,
};

macro_rules! registry {
    ($($variant:ident($ty:ty) = $name:literal, $desc:literal;)+) => {
        /// Which contract a document holds.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kind {
            $(
                #[doc = $desc]
                $variant
            ),+
        }

        impl Kind {
            /// Every contract, in documentation order.
            pub const ALL: &'static [Kind] = &[$(Kind::$variant),+];

            /// Short name, such as `task_request`.
            pub const fn name(self) -> &'static str {
                match self { $(Kind::$variant => $name),+ }
            }

            /// Full schema name, such as `craik.task_request`.
            pub const fn schema_name(self) -> &'static str {
                match self { $(Kind::$variant => concat!("craik.", $name)),+ }
            }

            /// One-line description.
            pub const fn description(self) -> &'static str {
                match self { $(Kind::$variant => $desc),+ }
            }

            /// The JSON Schema (draft 2020-12) generated from the Rust type.
            pub fn json_schema(self) -> Value {
                match self { $(Kind::$variant => schema_of::<$ty>(self)),+ }
            }

            /// Decodes one record's JSON text as this contract and checks its rules.
            pub fn decode(self, text: &str) -> Result<AnyContract, Vec<Problem>> {
                match self {
                    $(Kind::$variant => decode_as::<$ty>(text).map(|v| AnyContract::$variant(Box::new(v)))),+
                }
            }
        }

        $(
            impl Contract for $ty {
                const KIND: Kind = Kind::$variant;

                fn from_any(any: AnyContract) -> Option<Self> {
                    match any {
                        AnyContract::$variant(v) => Some(*v),
                        #[allow(unreachable_patterns, reason = "one arm per contract")]
                        _ => None,
                    }
                }
            }
        )+

        /// A decoded, checked contract of any kind.
        #[derive(Debug, Clone, PartialEq)]
        pub enum AnyContract {
            $(
                #[doc = $desc]
                $variant(Box<$ty>)
            ),+
        }

        impl AnyContract {
            /// Which contract this is.
            pub const fn kind(&self) -> Kind {
                match self { $(AnyContract::$variant(_) => Kind::$variant),+ }
            }

            /// The contract as written by this build (all fields, `schema` and `version` included).
            pub fn to_value(&self) -> Result<Value, serde_json::Error> {
                match self { $(AnyContract::$variant(v) => serde_json::to_value(v)),+ }
            }
        }
    };
}

registry! {
    TaskRequest(TaskRequest) = "task_request", "Work requested by a user, a system, or another agent.";
    ProjectProfile(ProjectProfile) = "project_profile", "A project Craik can reason about: repository, docs, memory.";
    PolicyEnvelope(PolicyEnvelope) = "policy_envelope", "What a task's runtime may do and must do, under a profile.";
    CapabilityGrant(CapabilityGrant) = "capability_grant", "A concrete permission: capability, target paths, operations, expiry.";
    CapabilityReceipt(CapabilityReceipt) = "capability_receipt", "A record of an action taken or refused under policy.";
    CaseFile(CaseFile) = "case_file", "Task context assembled before execution.";
    IntentLock(IntentLock) = "intent_lock", "Accepted intent and scope boundaries, fixed before execution.";
    AgentRole(AgentRole) = "agent_role", "A policy-aware role for multi-agent coordination.";
    WorkerResult(WorkerResult) = "worker_result", "Typed output of a role-specific worker.";
    Handoff(Handoff) = "handoff", "The durable summary of a run for whoever picks the work up next.";
    MemoryProposal(MemoryProposal) = "memory_proposal", "A reviewable proposal to change memory; never a fact by itself.";
    MemoryBackendCapabilities(MemoryBackendCapabilities) = "memory_backend_capabilities", "A detected memory backend capability snapshot.";
    ContradictionReport(ContradictionReport) = "contradiction_report", "Incompatible assertions that need resolution.";
    WorkGraphEvent(WorkGraphEvent) = "work_graph_event", "An edge added to the work graph.";
    EvidenceReference(EvidenceReference) = "evidence_reference", "A pointer to source material supporting an assertion.";
    RunnerMetadata(RunnerMetadata) = "runner_metadata", "Identity and capability summary of a runner adapter.";
    RunnerAdapterRequest(RunnerAdapterRequest) = "runner_adapter_request", "Input handed from Craik to a runner adapter.";
    RunnerAdapterResult(RunnerAdapterResult) = "runner_adapter_result", "Output a runner adapter returns to Craik.";
    RunnerStepRequest(RunnerStepRequest) = "runner_step_request", "Input for one governed loop step.";
    RunnerStepResult(RunnerStepResult) = "runner_step_result", "Output of one governed loop step.";
    RunnerCapabilityMatrix(RunnerCapabilityMatrix) = "runner_capability_matrix", "What a runner can do, as data the policy decision consumes.";
    TaskRun(TaskRun) = "task_run", "Durable state of one governed task run.";
    RunOutput(RunOutput) = "run_output", "Redacted output captured from one runner step.";
    CompiledPrompt(CompiledPrompt) = "compiled_prompt", "A deterministic, policy-aware runner prompt.";
    ModelProvider(ModelProvider) = "model_provider", "A model provider and its runtime path; names secrets, never holds them.";
    FixtureScenario(FixtureScenario) = "fixture_scenario", "A deterministic scripted run for the fixture runner.";
}

/// A registered contract type: its [`Kind`], and how to take it out of an [`AnyContract`].
pub trait Contract: Sized {
    /// The contract's kind.
    const KIND: Kind;
    /// The contract, if `any` is one.
    fn from_any(any: AnyContract) -> Option<Self>;
}

impl Kind {
    /// Contracts of Craik's own, with no counterpart in the reference implementation.
    pub const CRAIK_OWN: &'static [Kind] = &[Kind::FixtureScenario];

    /// True for the contracts the reference implementation also defines (interop scope).
    pub fn in_reference(self) -> bool {
        !Self::CRAIK_OWN.contains(&self)
    }

    /// Looks a contract up by `task_request` or `craik.task_request`.
    pub fn from_name(name: &str) -> Option<Self> {
        let short = name.strip_prefix("craik.").unwrap_or(name);
        Self::ALL.iter().copied().find(|k| k.name() == short)
    }

    /// The committed file name of this contract's JSON Schema.
    pub fn schema_file_name(self) -> String {
        format!("{}.schema.json", self.name())
    }

    /// The JSON Schema as committed: pretty-printed, two-space indent, trailing newline.
    pub fn json_schema_text(self) -> String {
        schema_text(&self.json_schema())
    }
}

fn schema_of<T: JsonSchema>(kind: Kind) -> Value {
    schema_document::<T>(
        &format!(
            "urn:craik:contract:{}:{}",
            kind.name(),
            crate::CONTRACT_VERSION
        ),
        kind.schema_name(),
        kind.description(),
    )
}

/// The JSON Schema (draft 2020-12) of `T` as Craik commits its schemas: the header keys
/// (`$schema`, `$id`, `title`, `description`) first, so a reader sees what the file is before
/// its body, then the generated schema.
pub fn schema_document<T: JsonSchema>(id: &str, title: &str, description: &str) -> Value {
    let generator = SchemaSettings::draft2020_12().into_generator();
    match generator.into_root_schema_for::<T>().to_value() {
        Value::Object(generated) => {
            let mut ordered = serde_json::Map::new();
            ordered.insert("$schema".into(), Value::String(DRAFT_2020_12.into()));
            ordered.insert("$id".into(), Value::String(id.into()));
            ordered.insert("title".into(), Value::String(title.into()));
            ordered.insert("description".into(), Value::String(description.into()));
            for (key, value) in generated {
                ordered.entry(key).or_insert(value);
            }
            Value::Object(ordered)
        }
        other => other,
    }
}

/// A schema as committed: pretty-printed, two-space indent, trailing newline.
pub fn schema_text(schema: &Value) -> String {
    let mut text =
        serde_json::to_string_pretty(schema).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

fn decode_as<T: DeserializeOwned + Check + Serialize>(text: &str) -> Result<T, Vec<Problem>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| vec![serde_problem(e)])?;
    de.end().map_err(|e| vec![json_problem("$".into(), &e)])?;
    let mut checker = Checker::new();
    value.check(&mut checker);
    let problems = checker.into_problems();
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(problems)
    }
}

/// Turns a serde error with its path into a [`Problem`] naming the offending field.
fn serde_problem(e: serde_path_to_error::Error<serde_json::Error>) -> Problem {
    let path = json_path(&e.path().to_string());
    let inner = e.into_inner();
    json_problem(path, &inner)
}

pub(crate) fn json_problem(mut path: String, e: &serde_json::Error) -> Problem {
    let full = e.to_string();
    let message = match full.rsplit_once(" at line ") {
        Some((head, _)) if e.line() > 0 => head.to_owned(),
        _ => full,
    };
    // serde names a missing or repeated field in the message; put it on the path too.
    let named = ["missing field `", "duplicate field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.strip_suffix('`'));
    if let Some(field) = named {
        path = if path == "$" {
            format!("$.{field}")
        } else {
            format!("{path}.{field}")
        };
    }
    let problem = Problem::at(path, message);
    if e.line() > 0 {
        problem.with_position(e.line(), e.column())
    } else {
        problem
    }
}

/// `runner.mode` → `$.runner.mode`, `[0].x` → `$[0].x`, `.` → `$`.
fn json_path(serde_path: &str) -> String {
    match serde_path {
        "" | "." => "$".to_owned(),
        p if p.starts_with('[') => format!("${p}"),
        p => format!("$.{p}"),
    }
}
