//! The preconditions of driving a run, enforced by the library rather than by its callers:
//! a [`LockedRun`] is the only way into [`crate::run::driver::Host::start`] and
//! [`crate::run::driver::Host::recover`], and only this module makes one.
//!
//! Holding one means: the run's exclusive driver lock is held (for as long as the value, then
//! the host, lives); Craik's home lies outside the run's workspace; and, for an existing run,
//! its `inputs.json` is the one the first signed receipt of its journal binds (never re-read
//! unchecked).

use std::path::Path;

use craik_kernel::KeyRing;

use crate::Error;
use crate::run::Inputs;
use crate::run::store::{Home, HomePlacement, RunDir, RunLock, RunStore};

/// A run directory under its driver lock, with its checked inputs.
pub struct LockedRun {
    home: Home,
    dir: Box<dyn RunStore>,
    inputs: Inputs,
    lock: RunLock,
}

impl std::fmt::Debug for LockedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockedRun")
            .field("home", &self.home.root)
            .field("dir", &self.dir.root())
            .field("run_id", &self.inputs.run_id)
            .finish_non_exhaustive()
    }
}

impl LockedRun {
    /// A new run in `dir` (created by [`create_run`]): refused when the
    /// home lies inside its workspace; the lock taken.
    pub fn create(home: Home, dir: RunDir, inputs: Inputs) -> Result<Self, Error> {
        placed_apart(&home, &dir, &inputs.workspace)?;
        let lock = dir.lock()?;
        Ok(Self {
            home,
            dir: Box::new(dir),
            inputs,
            lock,
        })
    }

    /// An existing run: the lock taken first, then `inputs.json` read only if the journal
    /// verifies under `keys` and its first receipt binds those bytes, then the home's
    /// placement checked against the workspace the inputs name.
    pub fn open(home: Home, dir: RunDir, keys: &KeyRing) -> Result<Self, Error> {
        let lock = dir.lock()?;
        let inputs = crate::run::signed::bound_inputs(&dir, keys)?;
        // Only the directory its signed run id names is driven (outside testing round 14: a
        // run directory copied under another name was resumed beside the original, and both
        // used one approval): the lock, the approvals and the ledger's record are per run.
        let name = dir
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        if name.as_deref() != Some(inputs.run_id.as_str()) {
            return Err(Error::refused(format!(
                "{}: its receipts are signed for run `{}`, but it sits in `{}`: a run directory copied, moved or forked; nothing was signed or performed",
                dir.path.display(),
                inputs.run_id,
                name.unwrap_or_default()
            )));
        }
        placed_apart(&home, &dir, &inputs.workspace)?;
        Ok(Self {
            home,
            dir: Box::new(dir),
            inputs,
            lock,
        })
    }

    /// Its parts, for the host that drives the run (the lock moves with them).
    pub(crate) fn into_parts(self) -> (Home, Box<dyn RunStore>, Inputs, RunLock) {
        (self.home, self.dir, self.inputs, self.lock)
    }

    /// The run's checked inputs.
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    /// The run's directory.
    pub fn dir(&self) -> &dyn RunStore {
        self.dir.as_ref()
    }
}

/// The home and the workspace are apart: the home never lies inside the workspace, and the
/// workspace never lies inside the home — except an example run's own copy,
/// `<home>/runs/<id>/workspace` (whose command sandboxes keep the rest of the home out).
pub fn placed_apart(home: &Home, dir: &RunDir, workspace: &Path) -> Result<(), Error> {
    let real = workspace
        .canonicalize()
        .map_err(|e| Error::usage(format!("workspace `{}`: {e}", workspace.display())))?;
    if home.placement(&real) != HomePlacement::Outside {
        return Err(Error::usage(format!(
            "Craik's home `{}` lies inside the workspace `{}`; keep the home outside the workspace (--home)",
            home.root.display(),
            real.display()
        )));
    }
    let home_real = crate::run::store::prospective_real(&home.root)?;
    let own_copy = crate::run::store::prospective_real(&dir.path.join("workspace"))?;
    if real.starts_with(&home_real) && real != own_copy {
        return Err(Error::usage(format!(
            "--workspace `{}` lies inside Craik's home `{}` (its keys, journals and approvals would be the runner's to read and write); give a workspace outside the home",
            real.display(),
            home.root.display()
        )));
    }
    Ok(())
}

/// A run killed between the creation of its journal and its first receipt (issue 31 item 2):
/// its journal holds no complete line and the verified home ledger records no start of it, so
/// nothing of it was signed or performed (the first receipt comes before anything else). Under
/// its driver lock, its directory is removed; `true` when it was. Any other run is left as it
/// is (`false`) for recovery proper.
pub fn discard_never_started(home: &Home, run_id: &str, keys: &KeyRing) -> Result<bool, Error> {
    // Not `Home::run_dir`, which wants `inputs.json`: a start killed before it was written
    // leaves a directory without one (outside testing round 13).
    if craik_contracts::id_problem(run_id).is_some() || !run_id.starts_with("run_") {
        return home.run_dir(run_id).map(|_| false);
    }
    let dir = RunDir {
        path: home.runs().join(run_id),
    };
    if !dir.path.is_dir() {
        return Ok(false);
    }
    let _lock = dir.lock()?;
    let journal = dir.path.join(crate::journal::JOURNAL_NAME);
    let bytes = match std::fs::read(&journal) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(Error::io(format!("{}: {e}", journal.display()))),
    };
    if bytes.contains(&b'\n') {
        return Ok(false);
    }
    if crate::ledger::run_record(&home.root, keys, run_id)?
        .is_some_and(|r| r.started.is_some() || r.closed.is_some())
    {
        return Ok(false);
    }
    std::fs::remove_dir_all(&dir.path)
        .map_err(|e| Error::io(format!("{}: {e}", dir.path.display())))?;
    crate::run::store::sync_dir(&home.runs())
        .map_err(|e| Error::io(format!("{}: {e}", home.runs().display())))?;
    Ok(true)
}

/// Creates run `run_id`'s directory and settles its workspace: `workspace` when given, else a
/// copy of `seed` inside the run directory (examples never touch the operator's files), else
/// the current directory; resolved to its real path.
pub fn create_run(
    home: &Home,
    run_id: &str,
    seed: Option<&Path>,
    workspace: Option<&Path>,
) -> Result<(RunDir, std::path::PathBuf), Error> {
    // A home whose ledger cannot be continued takes no new run (checked before the
    // directory exists: the run's start could never be recorded).
    crate::ledger::ready_for_new_run(&home.root)?;
    // A full or read-only disk is an i/o failure of Craik's own files (exit 5), whichever
    // write met it (outside testing round 17: the workspace copy exited 2 on a full disk).
    let failed = |e: std::io::Error, what: String| {
        let full = matches!(
            e.kind(),
            std::io::ErrorKind::StorageFull
                | std::io::ErrorKind::QuotaExceeded
                | std::io::ErrorKind::ReadOnlyFilesystem
        );
        let error = Error::usage(format!("{what}: {e}"));
        if full {
            error.with_kind(crate::ErrorKind::Io)
        } else {
            error
        }
    };
    let dir =
        RunDir::create(home, run_id).map_err(|e| failed(e, home.runs().display().to_string()))?;
    let chosen = match (seed, workspace) {
        (_, Some(ws)) => ws.to_owned(),
        (Some(seed), None) => {
            let ws = dir.path.join("workspace");
            if let Err(e) = crate::run::store::copy_tree(seed, &ws) {
                // Nothing of a run that did not start is kept.
                let _ = std::fs::remove_dir_all(&dir.path);
                return Err(failed(e, format!("{}: cannot copy", seed.display())));
            }
            ws
        }
        (None, None) => {
            std::env::current_dir().map_err(|e| Error::usage(format!("current directory: {e}")))?
        }
    };
    let real = chosen
        .canonicalize()
        .map_err(|e| Error::usage(format!("{}: {e}", chosen.display())))?;
    Ok((dir, real))
}
