//! craik-prove against a real solver (cvc5 1.3.1: `$CVC5`, or the repository's
//! `tools/cvc5-pywheel` over the PyPI wheel). Missing in CI (`CI` set) is a failure, never a
//! silent skip; on a developer machine each test says so and returns.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "tests fail loudly by design"
)]

mod held;
mod solver;

use std::path::{Path, PathBuf};

use craik_kernel::{Bundle, SourceFile};
use craik_prove::{Side, SolverConfig};

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The solver the tests use, or `None` (skip) off CI.
pub(crate) fn solver() -> Option<SolverConfig> {
    let env = std::env::var_os("CVC5");
    let shim = repo().join("tools/cvc5-pywheel");
    let wheel = std::process::Command::new("python3")
        .args(["-c", "import cvc5"])
        .output()
        .is_ok_and(|o| o.status.success());
    let found = match env {
        Some(p) => SolverConfig::discover(None, Some(p), None).ok(),
        None if wheel => SolverConfig::discover(Some(shim), None, None).ok(),
        None => None,
    };
    assert!(
        found.is_some() || std::env::var_os("CI").is_none(),
        "cvc5 1.3.1 is needed: set CVC5, or `python3 -m pip install cvc5==1.3.1` for tools/cvc5-pywheel (.ci/run does)"
    );
    #[allow(clippy::print_stderr, reason = "a skip must be seen")]
    if found.is_none() {
        eprintln!("skipped: no solver (CVC5 unset, python3 cannot import cvc5)");
    }
    found
}

/// The embedded bundle's files (the repository's `policies/`), with `edit` applied to the
/// text of each file.
pub(crate) fn files(edit: &dyn Fn(&str, String) -> String) -> (SourceFile, Vec<SourceFile>) {
    let dir = repo().join("policies");
    let schema = SourceFile::new(
        "schema.cedarschema",
        std::fs::read_to_string(dir.join("schema.cedarschema")).unwrap(),
    );
    let mut files = Vec::new();
    for sub in ["approvals", "base", "profiles"] {
        let mut names: Vec<_> = std::fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        for name in names {
            let rel = format!("{sub}/{name}");
            let text = std::fs::read_to_string(dir.join(&rel)).unwrap();
            files.push(SourceFile::new(rel.clone(), edit(&rel, text)));
        }
    }
    (schema, files)
}

pub(crate) struct Loaded {
    pub(crate) bundle: Bundle,
    pub(crate) schema: SourceFile,
    pub(crate) files: Vec<SourceFile>,
}

impl Loaded {
    pub(crate) fn new(edit: &dyn Fn(&str, String) -> String) -> Self {
        let (schema, files) = files(edit);
        let bundle = Bundle::load(&schema, &files).unwrap_or_else(|e| panic!("{e:?}"));
        Self {
            bundle,
            schema,
            files,
        }
    }

    pub(crate) fn embedded() -> Self {
        Self::new(&|_, t| t)
    }

    pub(crate) fn side(&self) -> Side<'_> {
        Side {
            bundle: &self.bundle,
            schema: &self.schema,
            files: &self.files,
        }
    }
}
