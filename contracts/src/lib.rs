//! Craik's versioned contracts: every `craik.*` record the kernel, the host and runner adapters
//! exchange or persist.
//!
//! This crate is the product's spine and the only crate adapters link. It holds serde types and
//! their validation, nothing else: no I/O, no policy, no clock. Every contract
//!
//! - rejects unknown fields at every level and duplicate keys at every depth;
//! - spells its enums exactly as the seed documents do;
//! - carries `schema` (`craik.<name>`) and `version` (`0.1.0`), always written, and on input
//!   either absent or exactly those values;
//! - has a JSON Schema (draft 2020-12) generated from the type ([`Kind::json_schema`]).
//!
//! [`decode_document`] turns the bytes of a file into checked contracts or located
//! [`Problem`]s.

mod action;
pub mod agent_cli;
pub mod channel;
mod check;
mod display;
mod document;
mod enums;
mod policy;
mod problem;
mod project;
mod registry;
mod roundtrip;
mod run;
mod runner;
mod tag;
mod timestamp;
mod value;

pub use action::{
    FileEdit, FixtureScenario, FixtureStep, MEMORY_PROPOSALS, MemoryProposalSpec, NEXT, NextStep,
    PROPOSED_ACTIONS, ProposedAction,
};
pub use check::{Check, Checker, MAX_ID_LEN, id_problem};
pub use display::{Truncated, one_line};
pub use document::{
    Document, Locator, Record, decode_document, decode_single, decode_single_located,
};
pub use enums::{
    AgentRoleAuthority, AgentRoleKind, AssumptionStatus, ContradictionStatus, EvidenceKind,
    FindingSeverity, HandoffStatus, MemoryBackend, MemoryScope, ModelProviderMode,
    ModelProviderTrustBoundary, Phase, PolicyProfile, Priority, ProposalOperation, ProposalStatus,
    ReceiptStatus, RepoType, ResultStatus, RunnerCapabilitySupport, RunnerGrantPosture, RunnerMode,
    RunnerTrustLevel, SourceAttestation, TaskMode, TaskRunStatus, TrustClass, WorkGraphEventType,
};
pub use policy::{
    CapabilityGrant, CapabilityReceipt, CapabilityTarget, PolicyEnvelope, ReceiptResult,
};
pub use problem::Problem;
pub use project::{
    AgentRole, Assumption, CaseFile, ContradictionReport, DocsProfile, EvidenceReference, Fact,
    IntentLock, MemoryProfile, ProjectProfile, RepoProfile, TaskRequest, WorkGraphEvent,
};
pub use registry::{AnyContract, Contract, Kind, schema_document, schema_text};
pub use roundtrip::{RoundTrip, compare as compare_roundtrip};
pub use run::{
    Handoff, MemoryBackendCapabilities, MemoryOptionalCapabilities, MemoryProposal,
    MemoryRequiredCapabilities, RunOutput, SelfAudit, TaskRun, WorkerFinding, WorkerResult,
};
pub use runner::{
    CompiledPrompt, ModelProvider, ModelProviderCapability, PromptSection, RunnerAdapterRequest,
    RunnerAdapterResult, RunnerCapability, RunnerCapabilityMatrix, RunnerMetadata,
    RunnerStepRequest, RunnerStepResult, RunnerTrustProfile,
};
pub use tag::{CONTRACT_VERSION, SchemaName, SchemaTag, Version};
pub use timestamp::Timestamp;
pub use value::{MAX_DEPTH, Object, Probability};

/// Declares the marker type behind a contract's `schema` tag.
macro_rules! contract_marker {
    ($marker:ident, $name:literal) => {
        #[doc = concat!("Marker for `", $name, "`.")]
        #[derive(Debug)]
        pub enum $marker {}
        impl $crate::tag::SchemaName for $marker {
            const NAME: &'static str = $name;
        }
    };
}
pub(crate) use contract_marker;
