//! The closed vocabularies of the contracts, spelled exactly as in the seed documents and the
//! reference implementation. Matching on them never needs a wildcard arm.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident, $case:literal { $($(#[$vmeta:meta])* $variant:ident),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = $case)]
        pub enum $name {
            $($(#[$vmeta])* $variant),+
        }
    };
}

vocabulary!(
    /// Task priority.
    Priority, "lowercase" { Low, Normal, High, Urgent }
);
vocabulary!(
    /// What a task asks for.
    TaskMode, "lowercase" { Plan, Review, Implement, Verify }
);
vocabulary!(
    /// Memory backend kinds.
    MemoryBackend, "lowercase" { Ephemeral, Local, Stigmem }
);
vocabulary!(
    /// Reach of a memory fact.
    MemoryScope, "lowercase" { Local, Team, Company, Public }
);
vocabulary!(
    /// Policy-envelope profiles.
    PolicyProfile, "kebab-case" { Strict, TrustedLocal, Automation, Custom }
);
vocabulary!(
    /// What a memory proposal does to a fact.
    ProposalOperation, "lowercase" { Add, Update, Invalidate }
);
vocabulary!(
    /// Review state of a memory proposal.
    ProposalStatus, "lowercase" { Pending, Approved, Rejected }
);
vocabulary!(
    /// Where a fact's trust comes from.
    TrustClass, "kebab-case" { Observed, Reported, Inferred, Policy, External, StaleRisk }
);
vocabulary!(
    /// Contradiction report state.
    ContradictionStatus, "lowercase" { Open, Resolved, Ignored }
);
vocabulary!(
    /// Work-graph edge kinds.
    WorkGraphEventType, "snake_case" {
        Created, DependsOn, VerifiedBy, Contradicts, Supersedes, Implements, Blocks
    }
);
vocabulary!(
    /// Outcome recorded in a receipt.
    ReceiptStatus, "lowercase" { Passed, Failed, Blocked, Denied, Skipped }
);
vocabulary!(
    /// Handoff status.
    HandoffStatus, "lowercase" { Completed, Incomplete, Blocked, Failed }
);
vocabulary!(
    /// Loop phases of a governed run.
    Phase, "lowercase" { Plan, Act, Observe, Evaluate, Continue, Stop }
);
vocabulary!(
    /// Status of a governed run.
    TaskRunStatus, "lowercase" { Pending, Running, Completed, Blocked, Failed, Interrupted }
);
vocabulary!(
    /// How a runner executes.
    RunnerMode, "kebab-case" { Fixture, PromptHandoff, Live }
);
vocabulary!(
    /// Status of a runner result, a step result or a worker result.
    ResultStatus, "lowercase" { Completed, Blocked, Failed, Partial }
);
vocabulary!(
    /// Severity of a worker finding.
    FindingSeverity, "lowercase" { Info, Low, Medium, High, Critical }
);
vocabulary!(
    /// What an evidence reference points at.
    EvidenceKind, "snake_case" { File, Url, Command, Fact, Issue, PullRequest, Handoff, Other }
);
vocabulary!(
    /// Trust placed in a runner.
    RunnerTrustLevel, "lowercase" { Low, Medium, High }
);
vocabulary!(
    /// A runner's default posture towards grants.
    RunnerGrantPosture, "kebab-case" { DenyByDefault, PromptForApproval, AllowWithReceipt }
);
vocabulary!(
    /// How far a runner supports a capability.
    RunnerCapabilitySupport, "kebab-case" { Unsupported, PromptHandoff, Supported }
);
vocabulary!(
    /// Agent role kinds.
    AgentRoleKind, "snake_case" {
        Orchestrator, Implementer, Verifier, AdversarialReviewer, PolicyReviewer, DocsReviewer,
        MemoryCurator, Adjudicator
    }
);
vocabulary!(
    /// Authority an agent role may hold.
    AgentRoleAuthority, "lowercase" { Coordinate, Read, Propose, Review, Adjudicate, Implement }
);
vocabulary!(
    /// Model provider modes.
    ModelProviderMode, "lowercase" { Chat, Completion, Embedding, Tool, Runner }
);
vocabulary!(
    /// Where a model provider runs relative to the operator.
    ModelProviderTrustBoundary, "kebab-case" { Local, SelfHosted, Hosted, ThirdParty }
);
vocabulary!(
    /// Memory backend source-attestation mode.
    SourceAttestation, "lowercase" { Warn, Enforce, Off }
);
vocabulary!(
    /// State of an assumption.
    AssumptionStatus, "lowercase" { Open, Validated, Rejected }
);
vocabulary!(
    /// Repository kinds.
    RepoType, "lowercase" { Git }
);

impl AgentRoleKind {
    /// The authority a role of this kind must hold.
    pub const fn required_authority(self) -> AgentRoleAuthority {
        match self {
            Self::Orchestrator => AgentRoleAuthority::Coordinate,
            Self::Implementer => AgentRoleAuthority::Implement,
            Self::Verifier
            | Self::AdversarialReviewer
            | Self::PolicyReviewer
            | Self::DocsReviewer
            | Self::MemoryCurator => AgentRoleAuthority::Review,
            Self::Adjudicator => AgentRoleAuthority::Adjudicate,
        }
    }
}
