//! [`RunPlan`]: the one way a new run is composed (issue 33 item 4). A front end (the CLI,
//! `craik bench`) resolves what the operator asked for — task, grants, policies, runner, case
//! file and prompt — and hands it over; everything that writes into the run's directory or
//! decides what the run's signed inputs say happens here: the directory and workspace, the
//! home's placement, the bound files and their digests, the immutable input paths, the lock,
//! the host. A front end writes nothing into a run directory.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::run::Inputs;
use crate::run::driver::{Host, Setup};
use crate::run::locked::{LockedRun, create_run, placed_apart};
use crate::run::store::{CASE_FILE, Home, PROMPT_FILE};

/// A new run, as resolved by a front end.
#[derive(Debug)]
pub struct RunPlan {
    pub home: Home,
    /// The run's inputs as resolved. Set here, whatever they say: `workspace` (where the run
    /// works, by its real path), `policy_set` (the loaded bundle's hash), `case_file_sha256`
    /// and `compiled_prompt_sha256` (of the bytes below); `immutable_paths` gains Craik's
    /// own input files that lie in the workspace.
    pub inputs: Inputs,
    /// A tree copied into the run directory as its workspace (an example's).
    pub seed: Option<PathBuf>,
    /// The operator's workspace; with neither, the current directory.
    pub workspace: Option<PathBuf>,
    /// The case file's and the compiled prompt's bytes, written into the run directory and
    /// bound to the signed inputs by digest.
    pub case_file: Option<Vec<u8>>,
    pub compiled_prompt: Option<Vec<u8>>,
    /// Craik's input files (policies, grants, intent lock, envelope, configuration, registry
    /// files): those inside the workspace are immutable to the run, so no command or write
    /// can change what the next run reads.
    pub input_files: Vec<PathBuf>,
}

impl RunPlan {
    /// Creates the run's directory and workspace, refuses a home inside the workspace (nothing
    /// of a refused run is kept), writes the bound files, completes the inputs and starts the
    /// host under `setup` (locked, its first receipt signed).
    pub fn start(self, setup: Setup) -> Result<Host, Error> {
        let Self {
            home,
            mut inputs,
            seed,
            workspace,
            case_file,
            compiled_prompt,
            input_files,
        } = self;
        let (dir, workspace) =
            create_run(&home, &inputs.run_id, seed.as_deref(), workspace.as_deref())?;
        let discard = |e: Error| {
            let _ = std::fs::remove_dir_all(&dir.path);
            e
        };
        placed_apart(&home, &dir, &workspace).map_err(discard)?;
        inputs
            .immutable_paths
            .extend(inputs_in_workspace(&workspace, &input_files));
        for (name, bytes) in [(CASE_FILE, &case_file), (PROMPT_FILE, &compiled_prompt)] {
            let Some(bytes) = bytes else {
                continue;
            };
            let path = dir.path.join(name);
            if let Err(e) = crate::fsio::write_atomic(&path, bytes) {
                // Craik's own file (exit 5, as every other write of the home).
                return Err(discard(Error::io(format!(
                    "{}: {e}; the run did not start and nothing of it was kept",
                    path.display()
                ))));
            }
        }
        inputs.workspace = workspace;
        inputs.policy_set = setup.bundle.hash().to_owned();
        inputs.case_file_sha256 = case_file.as_deref().map(crate::run::exec::digest);
        inputs.compiled_prompt_sha256 = compiled_prompt.as_deref().map(crate::run::exec::digest);
        Host::start(LockedRun::create(home, dir, inputs)?, setup)
    }
}

/// Globs covering each of `paths` that lies inside `workspace` (the path, and all it holds or
/// will hold), relative to it; paths outside it give none.
fn inputs_in_workspace(workspace: &Path, paths: &[PathBuf]) -> Vec<String> {
    let Ok(root) = workspace.canonicalize() else {
        return Vec::new();
    };
    let mut globs = Vec::new();
    for path in paths {
        // A path that does not exist yet (a configured grants directory) is taken as
        // written, made absolute; one that does, by its real path. Either way as a file and
        // as a directory, so what is created there later is covered too.
        let Ok(real) = path
            .canonicalize()
            .or_else(|_| std::path::absolute(path).map(|p| crate::fsio::lexical(&p)))
        else {
            continue;
        };
        if let Ok(rel) = real.strip_prefix(&root)
            && let Some(rel) = rel.to_str().filter(|r| !r.is_empty())
        {
            globs.push(craik_kernel::ImmutablePaths::glob_for(rel, false));
            globs.push(craik_kernel::ImmutablePaths::glob_for(rel, true));
        }
    }
    globs.sort();
    globs.dedup();
    globs
}
