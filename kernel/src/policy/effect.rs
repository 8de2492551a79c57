//! Capability and operation are one thing: the table of which operations each capability
//! admits, and the one effect each admitted pair has.
//!
//! The kernel refuses any pair not in [`OPERATIONS`] before a policy is evaluated, and the
//! host picks its executor from [`Effect::of`] of the *decided* pair, so a `repo.read`
//! labelled request can never run the write executor (round 2: "label vs effect").
//!
//! INVARIANT: a capability the table does not name admits no operation at all (fail closed).

use serde::Serialize;

/// What a decided action does, as the host's executors see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Read a workspace file (no side effect).
    ReadFile,
    /// Replace (or create) a workspace file with given bytes.
    WriteFile,
    /// Apply exact edits to a workspace file.
    PatchFile,
    /// Create a workspace file that must not exist yet.
    CreateFile,
    /// Delete a workspace file.
    DeleteFile,
    /// Run an argv.
    Execute,
    /// A git/github/net/memory operation: decided by policy, but Craik has no executor for it
    /// in a governed run (the host refuses to perform it).
    External,
}

impl Effect {
    /// True when the effect changes something outside Craik's records.
    pub fn is_side_effect(self) -> bool {
        !matches!(self, Self::ReadFile)
    }

    /// The effect of `operation` under `capability`, or `None` when the pair is not admitted.
    ///
    /// On the decision path: a direct match for the common families, the table otherwise.
    /// A unit test checks it agrees with [`OPERATIONS`] for every capability and operation.
    pub fn of(capability: &str, operation: &str) -> Option<Self> {
        let (family, rest) = capability.split_once('.')?;
        match family {
            "repo" if rest == "read" => (operation == "read").then_some(Self::ReadFile),
            "repo" if rest.starts_with("write.") && rest.len() > "write.".len() => {
                match operation {
                    "write" => Some(Self::WriteFile),
                    "patch" => Some(Self::PatchFile),
                    "create" => Some(Self::CreateFile),
                    "delete" => Some(Self::DeleteFile),
                    _ => None,
                }
            }
            "repo" => None,
            "shell" if !rest.is_empty() => (operation == "execute").then_some(Self::Execute),
            _ => operations_of(capability)?
                .contains(&operation)
                .then_some(Self::External),
        }
    }

    /// [`Effect::of`] by the table alone (the oracle its fast path is checked against).
    #[cfg(test)]
    fn of_table(capability: &str, operation: &str) -> Option<Self> {
        let ops = operations_of(capability)?;
        if !ops.contains(&operation) {
            return None;
        }
        let family = capability.split('.').next().unwrap_or_default();
        Some(match (family, operation) {
            ("repo", "read") => Self::ReadFile,
            ("repo", "write") => Self::WriteFile,
            ("repo", "patch") => Self::PatchFile,
            ("repo", "create") => Self::CreateFile,
            ("repo", "delete") => Self::DeleteFile,
            ("shell", "execute") => Self::Execute,
            _ => Self::External,
        })
    }
}

/// Capability (exact, or a family prefix ending in `.`) → the operations it admits. The most
/// specific entry wins.
pub const OPERATIONS: &[(&str, &[&str])] = &[
    ("repo.read", &["read"]),
    ("repo.write.", &["write", "patch", "create", "delete"]),
    ("shell.", &["execute"]),
    ("git.diff_check", &["read", "execute"]),
    ("git.commit", &["write", "execute"]),
    ("git.push", &["write", "execute"]),
    ("git.force_push", &["write", "execute"]),
    ("github.", &["write"]),
    ("memory.read", &["read"]),
    ("memory.propose", &["propose", "write"]),
    ("memory.write", &["write"]),
    ("net.fetch", &["read"]),
];

/// Why a policy-envelope entry (`allowed_capabilities`, `denied_capabilities`,
/// `approval_required`) names no capability: it must be a capability the table knows
/// (`repo.write.docs`) or a family of them (`repo.write`, `shell`), spelled exactly — no
/// wildcard, no case variant. `None` when it is one.
pub fn envelope_entry_problem(entry: &str) -> Option<String> {
    let spelled = !entry.is_empty()
        && entry
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'_')
        && !entry.starts_with('.')
        && !entry.ends_with('.')
        && !entry.contains("..");
    let known = spelled
        && (operations_of(entry).is_some()
            || OPERATIONS.iter().any(|(name, _)| {
                let name = name.trim_end_matches('.');
                name == entry || name.starts_with(&format!("{entry}."))
            }));
    (!known).then(|| {
        format!(
            "`{}` names no capability: use a capability (`repo.write.docs`) or a family (`repo.write`, `shell`), exactly as spelled in the capability table, no wildcard",
            craik_contracts::Truncated(entry)
        )
    })
}

/// The operations `capability` admits; `None` when the table has no entry for it.
pub fn operations_of(capability: &str) -> Option<&'static [&'static str]> {
    OPERATIONS
        .iter()
        .filter(|(name, _)| {
            if name.ends_with('.') {
                capability.starts_with(name) && capability.len() > name.len()
            } else {
                *name == capability
            }
        })
        .max_by_key(|(name, _)| name.len())
        .map(|(_, ops)| *ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_path_agrees_with_the_table() {
        let caps = [
            "repo.read",
            "repo.write.docs",
            "repo.write.code",
            "repo.write.adr",
            "repo.write.immutable",
            "repo.write.",
            "repo.write",
            "repo.writex.a",
            "repo.reader",
            "repo",
            "shell.test",
            "shell.execute",
            "shell.",
            "shell",
            "git.diff_check",
            "git.commit",
            "git.push",
            "git.force_push",
            "github.create_pr",
            "github.comment",
            "github.",
            "memory.read",
            "memory.propose",
            "memory.write",
            "memory.x",
            "net.fetch",
            "net.x",
            "x.y",
            "",
            ".",
        ];
        let ops = [
            "read", "write", "patch", "create", "delete", "execute", "propose", "", "READ",
        ];
        for cap in caps {
            for op in ops {
                assert_eq!(Effect::of(cap, op), Effect::of_table(cap, op), "{cap} {op}");
            }
        }
    }

    #[test]
    fn reads_only_read_and_writes_never_execute() {
        assert_eq!(Effect::of("repo.read", "read"), Some(Effect::ReadFile));
        for op in ["write", "patch", "create", "delete", "execute", "propose"] {
            assert_eq!(Effect::of("repo.read", op), None, "{op}");
        }
        assert_eq!(
            Effect::of("repo.write.docs", "write"),
            Some(Effect::WriteFile)
        );
        assert_eq!(Effect::of("repo.write.docs", "execute"), None);
        assert_eq!(Effect::of("repo.write.docs", "read"), None);
        assert_eq!(Effect::of("shell.test", "execute"), Some(Effect::Execute));
        assert_eq!(Effect::of("shell.test", "write"), None);
        assert_eq!(Effect::of("repo.write.", "write"), None);
        assert_eq!(Effect::of("repo.writer", "write"), None);
        assert_eq!(Effect::of("unknown.thing", "read"), None);
    }
}

#[cfg(test)]
mod envelope_tests {
    use super::envelope_entry_problem;

    #[test]
    fn issue_18_envelope_entries_must_name_capabilities() {
        for ok in [
            "repo.read",
            "repo.write.docs",
            "repo.write",
            "repo",
            "shell",
            "shell.test",
            "git.force_push",
            "github",
            "memory.propose",
            "net.fetch",
        ] {
            assert_eq!(envelope_entry_problem(ok), None, "{ok}");
        }
        for bad in [
            "shell.*",
            "Shell.test",
            "SHELL",
            "repo.*",
            "*",
            "",
            "shell.",
            ".shell",
            "repo..write",
            "rep",
            "git.forcepush",
            "memory.read.x",
            "shell test",
            "re\u{0}po",
        ] {
            assert!(envelope_entry_problem(bad).is_some(), "{bad:?}");
        }
    }
}
