//! The default policy bundle, compiled into the binary so `craik` decides with no files on
//! disk. A test checks this list against `policies/` so a new file cannot be forgotten.

/// `(name, text)` of the schema.
pub const SCHEMA: (&str, &str) = (
    "schema.cedarschema",
    include_str!("../../policies/schema.cedarschema"),
);

/// `(name, text)` of every default policy file.
pub const POLICIES: &[(&str, &str)] = &[
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "cedar") {
                out.push(
                    path.strip_prefix(base)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }

    /// A policy file added to `policies/` must be embedded too, and the texts must match.
    #[test]
    fn embedded_bundle_is_exactly_policies_dir() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../policies");
        let mut on_disk = Vec::new();
        walk(&dir, &dir, &mut on_disk);
        on_disk.sort();
        let embedded: Vec<String> = super::POLICIES
            .iter()
            .map(|(n, _)| (*n).to_owned())
            .collect();
        assert_eq!(embedded, on_disk, "update cli/src/embedded.rs");
        for (name, text) in super::POLICIES {
            assert_eq!(
                *text,
                std::fs::read_to_string(dir.join(name)).unwrap(),
                "{name}"
            );
        }
    }
}
