//! Runner capability matrices: trusted data compiled into the binary (`runners/*.json`). The
//! host takes a runner's identity, trust and per-capability support from here — never from
//! what an adapter claims about itself — and the kernel's decision consumes it.

use craik_contracts::RunnerCapabilityMatrix;

use crate::Error;

/// `(name, json)` of every shipped runner's matrix. A test keeps this equal to `runners/`.
pub const MATRICES: &[(&str, &str)] = &[
    ("claude", include_str!("../../runners/claude.json")),
    ("codex", include_str!("../../runners/codex.json")),
    ("fixture", include_str!("../../runners/fixture.json")),
    ("gemini", include_str!("../../runners/gemini.json")),
    ("provider", include_str!("../../runners/provider.json")),
];

/// The shipped runners' names.
pub fn names() -> impl Iterator<Item = &'static str> {
    MATRICES.iter().map(|(n, _)| *n)
}

/// One shipped runner's matrix, by name (`codex`) or runner id (`runner_codex`).
pub fn matrix(name: &str) -> Result<RunnerCapabilityMatrix, Error> {
    let short = name.strip_prefix("runner_").unwrap_or(name);
    let (_, text) = MATRICES.iter().find(|(n, _)| *n == short).ok_or_else(|| {
        Error::usage(format!(
            "unknown runner `{}`; shipped runners: {}",
            craik_contracts::Truncated(name),
            names().collect::<Vec<_>>().join(", ")
        ))
    })?;
    craik_contracts::decode_single(text.as_bytes()).map_err(|problems| {
        Error::internal(format!(
            "the embedded matrix of `{short}` is invalid: {}",
            problems.join("; ")
        ))
    })
}

/// Where a shipped adapter binary is: beside the running `craik` binary.
pub fn shipped(name: &str) -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate craik: {e}"))?;
    let dir = exe.parent().unwrap_or(std::path::Path::new("."));
    let path = dir.join(format!("craik-adapter-{name}"));
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{}: not found; build the adapters with `cargo build --workspace` (they ship beside `craik`)",
            path.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn embedded_matrices_are_exactly_runners_dir_and_valid() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../runners");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = super::MATRICES
            .iter()
            .map(|(n, _)| format!("{n}.json"))
            .collect();
        assert_eq!(on_disk, embedded);
        for (name, text) in super::MATRICES {
            assert_eq!(
                std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap(),
                *text
            );
            let m = super::matrix(name).unwrap();
            assert_eq!(m.runner.id, format!("runner_{name}"));
        }
    }
}
