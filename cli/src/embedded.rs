//! The default policy bundle, compiled into the binary so `craik` decides with no files on
//! disk. A test checks this list against `policies/` so a new file cannot be forgotten.

/// `(name, text)` of the schema.
pub(crate) const SCHEMA: (&str, &str) = (
    "schema.cedarschema",
    include_str!("../../policies/schema.cedarschema"),
);

/// `(name, text)` of every default policy file.
pub(crate) const POLICIES: &[(&str, &str)] = &[
    (
        "approvals/automation.cedar",
        include_str!("../../policies/approvals/automation.cedar"),
    ),
    (
        "approvals/strict.cedar",
        include_str!("../../policies/approvals/strict.cedar"),
    ),
    (
        "approvals/trusted-local.cedar",
        include_str!("../../policies/approvals/trusted-local.cedar"),
    ),
    (
        "base/commands.cedar",
        include_str!("../../policies/base/commands.cedar"),
    ),
    (
        "base/immutable.cedar",
        include_str!("../../policies/base/immutable.cedar"),
    ),
    (
        "base/intent.cedar",
        include_str!("../../policies/base/intent.cedar"),
    ),
    (
        "base/memory.cedar",
        include_str!("../../policies/base/memory.cedar"),
    ),
    (
        "base/protected.cedar",
        include_str!("../../policies/base/protected.cedar"),
    ),
    (
        "profiles/automation.cedar",
        include_str!("../../policies/profiles/automation.cedar"),
    ),
    (
        "profiles/strict.cedar",
        include_str!("../../policies/profiles/strict.cedar"),
    ),
    (
        "profiles/trusted-local.cedar",
        include_str!("../../policies/profiles/trusted-local.cedar"),
    ),
];
