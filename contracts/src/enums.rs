//! The closed vocabularies of the contracts, spelled exactly as in the seed documents and the
//! reference implementation. Matching on them never needs a wildcard arm.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $wire)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The wire spelling.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

vocabulary!(
    /// Task priority.
    Priority { Low = "low", Normal = "normal", High = "high", Urgent = "urgent" }
);
vocabulary!(
    /// What a task asks for.
    TaskMode { Plan = "plan", Review = "review", Implement = "implement", Verify = "verify" }
);
vocabulary!(
    /// Memory backend kinds.
    MemoryBackend { Ephemeral = "ephemeral", Local = "local", Stigmem = "stigmem" }
);
vocabulary!(
    /// Reach of a memory fact.
    MemoryScope { Local = "local", Team = "team", Company = "company", Public = "public" }
);
vocabulary!(
    /// Policy-envelope profiles.
    PolicyProfile { Strict = "strict", TrustedLocal = "trusted-local", Automation = "automation", Custom = "custom" }
);
vocabulary!(
    /// What a memory proposal does to a fact.
    ProposalOperation { Add = "add", Update = "update", Invalidate = "invalidate" }
);
vocabulary!(
    /// Review state of a memory proposal.
    ProposalStatus { Pending = "pending", Approved = "approved", Rejected = "rejected" }
);
vocabulary!(
    /// Where a fact's trust comes from.
    TrustClass { Observed = "observed", Reported = "reported", Inferred = "inferred", Policy = "policy", External = "external", StaleRisk = "stale-risk" }
);
vocabulary!(
    /// Contradiction report state.
    ContradictionStatus { Open = "open", Resolved = "resolved", Ignored = "ignored" }
);
vocabulary!(
    /// Work-graph edge kinds.
    WorkGraphEventType { Created = "created", DependsOn = "depends_on", VerifiedBy = "verified_by", Contradicts = "contradicts", Supersedes = "supersedes", Implements = "implements", Blocks = "blocks" }
);
vocabulary!(
    /// Outcome recorded in a receipt.
    ReceiptStatus { Passed = "passed", Failed = "failed", Blocked = "blocked", Denied = "denied", Skipped = "skipped" }
);
vocabulary!(
    /// Handoff status.
    HandoffStatus { Completed = "completed", Incomplete = "incomplete", Blocked = "blocked", Failed = "failed" }
);
vocabulary!(
    /// Loop phases of a governed run.
    Phase { Plan = "plan", Act = "act", Observe = "observe", Evaluate = "evaluate", Continue = "continue", Stop = "stop" }
);
vocabulary!(
    /// Status of a governed run.
    TaskRunStatus { Pending = "pending", Running = "running", Completed = "completed", Blocked = "blocked", Failed = "failed", Interrupted = "interrupted" }
);
vocabulary!(
    /// How a runner executes.
    RunnerMode { Fixture = "fixture", PromptHandoff = "prompt-handoff", Live = "live" }
);
vocabulary!(
    /// Status of a runner result, a step result or a worker result.
    ResultStatus { Completed = "completed", Blocked = "blocked", Failed = "failed", Partial = "partial" }
);
vocabulary!(
    /// Severity of a worker finding.
    FindingSeverity { Info = "info", Low = "low", Medium = "medium", High = "high", Critical = "critical" }
);
vocabulary!(
    /// What an evidence reference points at.
    EvidenceKind { File = "file", Url = "url", Command = "command", Fact = "fact", Issue = "issue", PullRequest = "pull_request", Handoff = "handoff", Other = "other" }
);
vocabulary!(
    /// Trust placed in a runner.
    RunnerTrustLevel { Low = "low", Medium = "medium", High = "high" }
);
vocabulary!(
    /// A runner's default posture towards grants.
    RunnerGrantPosture { DenyByDefault = "deny-by-default", PromptForApproval = "prompt-for-approval", AllowWithReceipt = "allow-with-receipt" }
);
vocabulary!(
    /// How far a runner supports a capability.
    RunnerCapabilitySupport { Unsupported = "unsupported", PromptHandoff = "prompt-handoff", Supported = "supported" }
);
vocabulary!(
    /// Agent role kinds.
    AgentRoleKind { Orchestrator = "orchestrator", Implementer = "implementer", Verifier = "verifier", AdversarialReviewer = "adversarial_reviewer", PolicyReviewer = "policy_reviewer", DocsReviewer = "docs_reviewer", MemoryCurator = "memory_curator", Adjudicator = "adjudicator" }
);
vocabulary!(
    /// Authority an agent role may hold.
    AgentRoleAuthority { Coordinate = "coordinate", Read = "read", Propose = "propose", Review = "review", Adjudicate = "adjudicate", Implement = "implement" }
);
vocabulary!(
    /// Model provider modes.
    ModelProviderMode { Chat = "chat", Completion = "completion", Embedding = "embedding", Tool = "tool", Runner = "runner" }
);
vocabulary!(
    /// Where a model provider runs relative to the operator.
    ModelProviderTrustBoundary { Local = "local", SelfHosted = "self-hosted", Hosted = "hosted", ThirdParty = "third-party" }
);
vocabulary!(
    /// Memory backend source-attestation mode.
    SourceAttestation { Warn = "warn", Enforce = "enforce", Off = "off" }
);
vocabulary!(
    /// State of an assumption.
    AssumptionStatus { Open = "open", Validated = "validated", Rejected = "rejected" }
);
vocabulary!(
    /// Repository kinds.
    RepoType { Git = "git" }
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
