//! Authority contracts: the envelope a task runs under, concrete grants, and receipts.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::check::{Check, Checker};
use crate::display::Truncated;
use crate::enums::{PolicyProfile, ReceiptStatus};
use crate::project::yes;
use crate::tag::{SchemaTag, Version};
use crate::timestamp::Timestamp;
use crate::value::Object;

crate::contract_marker!(PolicyEnvelopeSchema, "craik.policy_envelope");
crate::contract_marker!(CapabilityGrantSchema, "craik.capability_grant");
crate::contract_marker!(CapabilityReceiptSchema, "craik.capability_receipt");

/// What a task's runtime may do and must do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyEnvelope {
    #[serde(default)]
    pub schema: SchemaTag<PolicyEnvelopeSchema>,
    #[serde(default)]
    pub version: Version,
    /// `policy_…`
    pub id: String,
    pub task_id: String,
    pub actor: String,
    pub profile: PolicyProfile,
    /// Only honoured where the profile permits it; every fail-open decision is receipted.
    #[serde(default)]
    pub fail_open: bool,
    #[serde(default)]
    pub allowed_capabilities: Vec<String>,
    #[serde(default)]
    pub denied_capabilities: Vec<String>,
    #[serde(default)]
    pub approval_required: Vec<String>,
    #[serde(default)]
    pub verification_required: Vec<String>,
    #[serde(default = "yes")]
    pub handoff_required: bool,
    #[serde(default = "yes")]
    pub receipt_required: bool,
    #[serde(default = "yes")]
    pub redaction_required: bool,
}

impl Check for PolicyEnvelope {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "policy_");
        for cap in &self.allowed_capabilities {
            if self.denied_capabilities.contains(cap) {
                c.report(
                    "allowed_capabilities",
                    format!("capability `{}` is both allowed and denied", Truncated(cap)),
                );
            }
        }
    }
}

/// Where a grant applies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityTarget {
    #[serde(default)]
    pub repo: Option<String>,
    /// Glob patterns relative to the workspace root (`*` one segment, `**` any depth).
    #[serde(default)]
    pub paths: Vec<String>,
    /// Patterns excluded from `paths`; an exclusion always wins.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// For `shell.*` grants: where the granted commands may write in the workspace — `**`,
    /// `DIR/**` or a file's exact path (the sandbox enforces exactly these). Absent: the
    /// profile's default (`trusted-local`: the whole workspace but protected paths; every
    /// other profile: nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<String>,
    #[serde(default)]
    pub metadata: Object,
}

/// A concrete permission for one capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityGrant {
    #[serde(default)]
    pub schema: SchemaTag<CapabilityGrantSchema>,
    #[serde(default)]
    pub version: Version,
    /// `grant_…`
    pub id: String,
    /// The task the grant is for. Absent in a project grant, which names `project_id` instead
    /// and applies to every task of that project (a run binds it to its own task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// For a project grant: the project (`project_…`) whose tasks it applies to. Absent in a
    /// task grant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_id: Option<String>,
    pub capability: String,
    pub target: CapabilityTarget,
    #[serde(default)]
    pub operations: Vec<String>,
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
    pub reason: String,
    pub approved_by: String,
}

impl Check for CapabilityGrant {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "grant_");
        match (&self.task_id, &self.project_id) {
            (Some(_), Some(_)) => c.report(
                "project_id",
                "a grant names a task_id or a project_id, not both",
            ),
            (None, None) => c.report(
                "task_id",
                "missing; a grant names the task it is for (`task_id`) or, as a project grant, its project (`project_id`)",
            ),
            (None, Some(project)) => {
                if let Some(why) = crate::id_problem(project) {
                    c.report(
                        "project_id",
                        format!("invalid id `{}`: {why}", crate::Truncated(project)),
                    );
                } else if !project.starts_with("project_") || project.len() == "project_".len() {
                    c.report(
                        "project_id",
                        format!(
                            "invalid id `{}`, expected an id starting with `project_`",
                            crate::Truncated(project)
                        ),
                    );
                }
            }
            (Some(_), None) => {}
        }
        if self.capability.trim().is_empty() {
            c.report(
                "capability",
                "empty, expected a capability name such as `repo.read`",
            );
        }
    }
}

/// The redacted outcome recorded in a receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReceiptResult {
    pub status: ReceiptStatus,
    pub summary: String,
    #[serde(default)]
    pub metadata: Object,
}

/// A record of an action taken (or refused) under policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CapabilityReceipt {
    #[serde(default)]
    pub schema: SchemaTag<CapabilityReceiptSchema>,
    #[serde(default)]
    pub version: Version,
    /// `receipt_…`
    pub id: String,
    pub task_id: String,
    pub actor: String,
    pub capability: String,
    pub target: String,
    pub policy_profile: PolicyProfile,
    #[serde(default)]
    pub fail_open: bool,
    pub reason: String,
    pub result: ReceiptResult,
    #[serde(default = "yes")]
    pub redacted: bool,
    pub created_at: Timestamp,
}

impl Check for CapabilityReceipt {
    fn check(&self, c: &mut Checker) {
        c.id(&self.id, "receipt_");
    }
}
