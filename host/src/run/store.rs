//! A run's directory under Craik's home and its layout: the journal files, the run state,
//! approvals and the lock. (Executors write the workspace; confined commands their sandbox.)
//!
//! ```text
//! .craik/
//!   keys/signing.key.pem, signing.pub.pem
//!   runs/<run id>/
//!     inputs.json      what the run was started with (written once)
//!     events.jsonl     the run's own journal: step requests/results, executions, parks, halts
//!     receipts.jsonl   signed receipts (the auditor's record)
//!     outputs.jsonl    redacted craik.run_output, one per step
//!     run.json         craik.task_run, replaced atomically after every change (derived)
//!     approvals/<id>.json
//!     sandbox/<action>/home, tmp   a command's fresh HOME and TMPDIR (removed after it)
//!     handoff.json     craik.handoff, at a terminal state
//!     workspace/       scratch copy of an example's workspace, when run from an example
//!     lock             flock'ed by the process driving the run, with the directory itself (its pid
//!                      inside, for people)
//!   memory/<memprop id>.json
//!   reviews/<id>/receipts.jsonl   one small signed journal per human review decision
//! ```
//!
//! Journals are append-only, made durable by group commit (the driver decides when: see
//! `docs/runs.md`, "Durability and recovery"). The one repair is a torn last line (a write cut
//! short by a crash before its fsync returned, so nothing acted on it): recovery moves those
//! bytes to `<name>.torn` and truncates them away, and says so.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::fsio::write_atomic;

pub const EVENTS: &str = "events.jsonl";
pub const OUTPUTS: &str = "outputs.jsonl";
pub const INPUTS: &str = "inputs.json";
pub const RUN: &str = "run.json";
pub const HANDOFF: &str = "handoff.json";
/// The case file in a run's directory (its sha256 is in the run's signed inputs).
pub const CASE_FILE: &str = "case_file.json";
/// The compiled prompt in a run's directory (its sha256 is in the run's signed inputs).
pub const PROMPT_FILE: &str = "compiled_prompt.json";
pub const LOCK: &str = "lock";
pub const CANCEL: &str = "cancel";

/// Counts durable writes and fsyncs. With the `crash-points` feature (test builds only), also
/// the test hook: `CRAIK_TEST_PAUSE_AT=N` makes the process stop at its N-th write to a run
/// file or fsync (after it, before whatever follows it), print `craik-test: paused at N
/// (durable: receipts.jsonl=A events.jsonl=B outputs.jsonl=C)` on stderr (the bytes of each
/// group-committed file known durable, for power-loss tests) and wait forever, so a test can `kill -9` it at a precise point (with
/// `CRAIK_TEST_PAUSE_STOP` set, stop itself instead, to be continued). Pausing never changes an
/// outcome. Without the feature the variables are never read.
#[derive(Debug, Default)]
pub struct CrashPoints {
    #[cfg_attr(
        not(feature = "crash-points"),
        allow(dead_code, reason = "the hook is compiled out")
    )]
    at: Option<u64>,
    count: u64,
    fsyncs: u64,
    /// The durable length of each append-only file the driver group-commits (receipts, events,
    /// outputs): the pause line names them, so a test can cut each file back to what a power
    /// loss would have left.
    durable: Vec<(&'static str, u64)>,
}

impl CrashPoints {
    pub fn from_env() -> Self {
        #[cfg(feature = "crash-points")]
        let at = std::env::var("CRAIK_TEST_PAUSE_AT")
            .ok()
            .and_then(|v| v.parse().ok());
        #[cfg(not(feature = "crash-points"))]
        let at = None;
        Self {
            at,
            count: 0,
            fsyncs: 0,
            durable: Vec::new(),
        }
    }

    /// Notes that the first `len` bytes of the run's file `name` are durable.
    pub fn durable(&mut self, name: &'static str, len: u64) {
        match self.durable.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = len,
            None => self.durable.push((name, len)),
        }
    }

    /// Counts fsyncs (for `craik bench run`).
    pub fn synced(&mut self, n: u64) {
        self.fsyncs += n;
    }

    /// fsyncs so far.
    pub fn fsyncs(&self) -> u64 {
        self.fsyncs
    }

    /// Called after every durable write.
    pub fn point(&mut self) {
        self.count += 1;
        #[cfg(feature = "crash-points")]
        if self.at == Some(self.count) {
            let mut err = io::stderr();
            let durable: Vec<String> = self
                .durable
                .iter()
                .map(|(name, len)| format!("{name}={len}"))
                .collect();
            let _ = writeln!(
                err,
                "craik-test: paused at {} (durable: {})",
                self.count,
                durable.join(" ")
            );
            let _ = err.flush();
            // `CRAIK_TEST_PAUSE_STOP=1`: stop (SIGSTOP) instead, so a test can change the home
            // under the paused driver and let it go on with SIGCONT.
            if std::env::var_os("CRAIK_TEST_PAUSE_STOP").is_some() {
                let me = rustix::process::getpid();
                let _ = rustix::process::kill_process(me, rustix::process::Signal::STOP);
                return;
            }
            loop {
                std::thread::park();
            }
        }
    }
}

/// Craik's home (`.craik/` by default).
#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

/// Where Craik's home lies relative to a run's workspace (anything but `Outside` is refused
/// under every profile: [`crate::run::locked::placed_apart`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HomePlacement {
    Outside,
    /// Inside, named `.craik`: protected paths for the kernel, carved out of sandboxes.
    InsideProtected,
    /// Inside under another name: a runner's file actions could reach keys and journals.
    InsideExposed,
}

/// The home a command uses when none is given (`--home` or `CRAIK_HOME`, which clap reads):
/// `./.craik` when it exists, else the user's state directory
/// (`$XDG_STATE_HOME/craik`, default `~/.local/state/craik`) when that exists, else `./.craik`.
/// `craik run` never puts a new home inside its workspace: see [`Home::for_run`].
pub fn default_root(given: Option<&Path>) -> PathBuf {
    if let Some(given) = given {
        return given.to_owned();
    }
    let local = PathBuf::from(".craik");
    if local.is_dir() {
        return local;
    }
    match state_root() {
        Some(state) if state.is_dir() => state,
        _ => local,
    }
}

/// The first line of the `.gitignore` every home gets.
pub const HOME_GITIGNORE: &str =
    "# Craik's home: signing keys, run journals, approvals. Never commit it.\n*\n";

/// Makes sure `root` is a home directory with a `.gitignore` that ignores everything in it,
/// written before any key or journal: a home that lies inside a git work tree is never staged
/// by `git add -A`. Returns whether the directory was created now.
pub fn create_home(root: &Path) -> io::Result<bool> {
    let created = !root.is_dir();
    if created {
        fs::create_dir_all(root)?;
        // Whatever the umask: the home holds keys and journals (outside testing round 6:
        // under umask 000 it was 0777, and others could plant files in it).
        fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    let ignore = root.join(".gitignore");
    if !ignore.exists() {
        crate::fsio::write_atomic(&ignore, HOME_GITIGNORE.as_bytes())?;
        sync_dir(root)?;
    }
    Ok(created)
}

/// `$XDG_STATE_HOME/craik`, else `$HOME/.local/state/craik` (absolute paths only).
pub fn state_root() -> Option<PathBuf> {
    let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
    std::env::var_os("XDG_STATE_HOME")
        .and_then(absolute)
        .or_else(|| {
            std::env::var_os("HOME")
                .and_then(absolute)
                .map(|h| h.join(".local").join("state"))
        })
        .map(|s| s.join("craik"))
}

/// The real path `path` has or would have: its deepest existing ancestor resolved, the rest
/// appended. An error (naming the path) when it cannot even be made absolute: never a
/// relative stand-in that no comparison would match.
pub fn prospective_real(path: &Path) -> Result<PathBuf, Error> {
    let unresolvable =
        |why: String| Error::usage(format!("`{}`: cannot be resolved: {why}", path.display()));
    let absolute = std::path::absolute(path).map_err(|e| unresolvable(e.to_string()))?;
    let mut existing = absolute.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Ok(out);
        }
        let (Some(name), Some(parent)) = (existing.file_name(), existing.parent()) else {
            return Err(unresolvable("no ancestor exists".into()));
        };
        rest.push(name.to_owned());
        existing = parent;
    }
}

impl Home {
    /// The home of a run in `workspace`: the one given, refused when it lies inside the
    /// workspace (under every profile, before anything is written: its keys and journals
    /// would be the runner's to read or plant); with none given, `./.craik` unless that lies
    /// inside the workspace, else the user's state directory ([`state_root`]).
    pub fn for_run(given: Option<&Path>, workspace: Option<&Path>) -> Result<Self, Error> {
        // The workspace as it is (it must exist); a home inside it is refused.
        let ws = workspace
            .map(|w| {
                w.canonicalize()
                    .map_err(|e| Error::usage(format!("--workspace `{}`: {e}", w.display())))
            })
            .transpose()?;
        let inside = |home: &Path| -> Result<Option<PathBuf>, Error> {
            let Some(ws) = &ws else {
                return Ok(None);
            };
            Ok(prospective_real(home)?.starts_with(ws).then(|| ws.clone()))
        };
        let home = match given {
            Some(given) => {
                if let Some(ws) = inside(given)? {
                    return Err(Error::usage(format!(
                        "--home `{}` lies inside the workspace `{}`; Craik's home (keys, journals, approvals) is never inside a workspace: give a --home outside it (or leave --home out to use {})",
                        given.display(),
                        ws.display(),
                        state_root().map_or_else(
                            || "the state directory".into(),
                            |s| format!("`{}`", s.display())
                        )
                    )));
                }
                given.to_owned()
            }
            None => {
                let local = default_root(None);
                if inside(&local)?.is_none() {
                    local
                } else {
                    match state_root() {
                        Some(state) if inside(&state)?.is_none() => state,
                        _ => {
                            return Err(Error::usage(
                                "no home outside the workspace: set --home DIR or CRAIK_HOME (the default `./.craik` lies inside the workspace, and neither XDG_STATE_HOME nor HOME names a state directory outside it)",
                            ));
                        }
                    }
                }
            }
        };
        // Absolute before anything derives from it (issue 30: a relative home gave commands
        // a relative `HOME`/`TMPDIR`, which resolved inside the workspace they ran in).
        let home = std::path::absolute(&home).map_err(|e| {
            Error::usage(format!(
                "home `{}`: cannot make it absolute: {e}",
                home.display()
            ))
        })?;
        let real = prospective_real(&home)?;
        if crate::confine::in_system_tree(&real) {
            return Err(Error::usage(format!(
                "home `{}` lies in a system tree every confined process may read (`/usr`, `/opt`, `/lib`, …): its keys would be readable by the commands of any run; choose a home elsewhere",
                home.display()
            )));
        }
        Ok(Self::new(&home))
    }

    /// Where this home lies relative to `workspace` (resolved). A home whose real path cannot
    /// be resolved is treated as exposed: the rule fails closed.
    pub fn placement(&self, workspace: &Path) -> HomePlacement {
        match self.root.canonicalize() {
            Ok(real) if !real.starts_with(workspace) => HomePlacement::Outside,
            Ok(real) if real.file_name().is_some_and(|n| n == ".craik") => {
                HomePlacement::InsideProtected
            }
            _ => HomePlacement::InsideExposed,
        }
    }

    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_owned(),
        }
    }

    pub fn runs(&self) -> PathBuf {
        self.root.join("runs")
    }

    pub fn keys(&self) -> PathBuf {
        self.root.join("keys")
    }

    pub fn memory(&self) -> PathBuf {
        self.root.join("memory")
    }

    pub fn reviews(&self) -> PathBuf {
        self.root.join("reviews")
    }

    /// The directory of an existing run; the id must be a plain `run_…` name.
    pub fn run_dir(&self, run_id: &str) -> Result<RunDir, Error> {
        if craik_contracts::id_problem(run_id).is_some() || !run_id.starts_with("run_") {
            return Err(Error::usage(format!(
                "`{}`: not a run id (expected `run_…`)",
                craik_contracts::Truncated(run_id)
            )));
        }
        let path = self.runs().join(run_id);
        if !path.join(INPUTS).is_file() {
            return Err(Error::usage(format!(
                "{}: no such run (see `craik runs list --home {}`)",
                path.display(),
                self.root.display()
            )));
        }
        Ok(RunDir { path })
    }

    /// Every run id, sorted.
    pub fn run_ids(&self) -> io::Result<Vec<String>> {
        let mut ids = Vec::new();
        match fs::read_dir(self.runs()) {
            Ok(entries) => {
                for entry in entries {
                    let entry = entry?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if name.starts_with("run_") && entry.path().join(INPUTS).is_file() {
                        ids.push(name);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        ids.sort();
        Ok(ids)
    }
}

/// Who asked a live run to stop, and why (`cancel`, one JSON line; the driver signs it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// The operator (`user:NAME`), asserted by whoever ran `craik runs cancel`.
    pub by: String,
    pub reason: String,
}

/// One run's directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub path: PathBuf,
}

impl RunDir {
    /// The new directory's entry is fsynced into `runs/` (and `runs/` into the home when it
    /// was created now), so a crash cannot lose a run whose files were acknowledged.
    pub fn create(home: &Home, run_id: &str) -> io::Result<Self> {
        let runs = home.runs();
        if !runs.is_dir() {
            fs::create_dir_all(&runs)?;
            sync_dir(&home.root)?;
        }
        let path = runs.join(run_id);
        fs::create_dir(&path)?;
        sync_dir(&runs)?;
        Ok(Self { path })
    }

    /// The pid written by the live process holding the lock, if one holds it.
    pub fn locked_by_live(&self) -> Option<String> {
        if let Ok(dir) = File::open(&self.path)
            && rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockShared).is_err()
        {
            return Some(
                fs::read_to_string(self.file(LOCK))
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            );
        }
        let path = self.file(LOCK);
        let file = File::open(&path).ok()?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockShared) {
            Ok(()) => None,
            Err(_) => Some(
                fs::read_to_string(&path)
                    .unwrap_or_default()
                    .trim()
                    .to_owned(),
            ),
        }
    }
}

/// Where a run's state lives: its records (`run.json`, `inputs.json`, `handoff.json`,
/// `approvals/<id>.json`) and its append-only line files (`events.jsonl`, `outputs.jsonl`,
/// the receipt journal). [`RunDir`], one directory per run, is the one implementation today;
/// the driver, approvals and the signed-state checks reach a run's state only through this
/// trait (typed access: [`RunStoreExt`]). What must be real paths on this machine — command
/// sandboxes, a copied workspace, the journal file the driver appends to with `fsync` — lives
/// under [`RunStore::root`].
pub trait RunStore: std::fmt::Debug + Send {
    /// The run's directory on this machine.
    fn root(&self) -> &Path;
    /// Appends complete lines (ending in `\n`) to `name`; with `sync`, durably. The append
    /// that creates the file makes its directory entry durable either way, so a later
    /// [`RunStore::sync_file`] needs no directory sync.
    fn append_bytes(&self, name: &str, lines: &[u8], sync: bool) -> io::Result<()>;
    /// Makes every line appended to `name` so far durable (one `fdatasync`); a group commit
    /// after unsynced appends.
    fn sync_file(&self, name: &str) -> io::Result<()>;
    /// The bytes of `name`; `None` when it does not exist.
    fn read_bytes(&self, name: &str) -> io::Result<Option<Vec<u8>>>;
    /// Replaces `name` whole, atomically (never a partial file); with `sync`, durably.
    fn replace(&self, name: &str, bytes: &[u8], sync: bool) -> io::Result<()>;
    /// The entries of the record family `dir` (`approvals`), sorted; none when it is absent.
    fn list(&self, dir: &str) -> io::Result<Vec<String>>;
    /// Moves a torn last line of `name` aside (to `name.torn`); returns the bytes moved.
    fn repair_torn(&self, name: &str) -> io::Result<usize>;
    /// Removes what interrupted atomic writes left; returns their names.
    fn clean_leftovers(&self) -> io::Result<Vec<String>>;
    /// The run's exclusive driver lock, held while the guard lives.
    fn lock(&self) -> Result<RunLock, Error>;
    /// Creates the run's receipt journal (refusing one that exists), durably, for the driver
    /// to append to with `fsync` (write-ahead).
    fn create_journal(&self) -> io::Result<crate::journal::JournalFile>;
    /// Opens the run's existing receipt journal for appending (recovery, resume).
    fn open_journal(&self) -> io::Result<crate::journal::JournalFile>;
    /// Asks the live driver to stop before its next step; `request` (who asks and why) is
    /// what the driver signs into the run's cancel receipt.
    fn request_cancel(&self, request: &CancelRequest) -> io::Result<()> {
        let mut line = serde_json::to_vec(request).map_err(io::Error::other)?;
        line.push(b'\n');
        self.append_bytes(CANCEL, &line, true)
    }
    /// Whether a cancellation was requested.
    fn cancel_requested(&self) -> bool {
        matches!(self.read_bytes(CANCEL), Ok(Some(_)))
    }
    /// The first cancellation requested (who asked and why); a request that cannot be read
    /// still cancels, signed as asked by `user:unknown`.
    fn cancel_request(&self) -> Option<CancelRequest> {
        let bytes = self.read_bytes(CANCEL).ok()??;
        let first = bytes.split(|b| *b == b'\n').next().unwrap_or_default();
        Some(
            serde_json::from_slice::<CancelRequest>(first)
                .ok()
                .filter(|r| r.by.starts_with("user:"))
                .unwrap_or_else(|| CancelRequest {
                    by: "user:unknown".into(),
                    reason: "the cancel request could not be read".into(),
                }),
        )
    }
}

/// Typed access to a [`RunStore`]: JSON lines and JSON documents.
pub trait RunStoreExt: RunStore {
    /// Where `name` is on this machine (for messages, and for what must be a real path).
    fn file(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    /// Appends one JSON line (fsynced when `sync`).
    fn append<T: Serialize>(&self, name: &str, value: &T, sync: bool) -> io::Result<()> {
        let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
        line.push(b'\n');
        self.append_bytes(name, &line, sync)
    }

    /// Reads a JSON-lines file (missing: empty). A torn last line is an error here; recovery
    /// repairs it first with [`RunStore::repair_torn`]. The whole file is held: for a run's
    /// `events.jsonl` or `outputs.jsonl`, whose size the runner drives, use [`json_lines`].
    fn read_lines<T: DeserializeOwned>(&self, name: &str) -> Result<Vec<T>, String> {
        json_lines(&self.file(name))?.collect()
    }

    /// Writes a JSON document atomically; with `sync`, durably.
    fn write_json<T: Serialize>(&self, name: &str, value: &T, sync: bool) -> io::Result<()> {
        let mut text = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        text.push(b'\n');
        self.replace(name, &text, sync)
    }

    /// Reads a JSON document.
    fn read_json<T: DeserializeOwned>(&self, name: &str) -> Result<T, String> {
        let path = self.file(name);
        let bytes = self
            .read_bytes(name)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .ok_or_else(|| format!("{}: not found", path.display()))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
    }
}

impl<S: RunStore + ?Sized> RunStoreExt for S {}

impl RunStore for RunDir {
    fn root(&self) -> &Path {
        &self.path
    }

    fn create_journal(&self) -> io::Result<crate::journal::JournalFile> {
        crate::journal::JournalFile::create(&self.path)
    }

    fn open_journal(&self) -> io::Result<crate::journal::JournalFile> {
        crate::journal::JournalFile::open(&self.path)
    }

    fn append_bytes(&self, name: &str, lines: &[u8], sync: bool) -> io::Result<()> {
        if !lines.ends_with(b"\n") {
            return Err(io::Error::other("refusing to append a partial line"));
        }
        let path = self.file(name);
        let created = !path.exists();
        let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
        file.write_all(lines)?;
        if sync {
            file.sync_data()?;
        }
        crate::fsio::durable_point();
        if created {
            sync_dir(&self.path)?;
        }
        Ok(())
    }

    fn sync_file(&self, name: &str) -> io::Result<()> {
        File::open(self.file(name))?.sync_data()?;
        crate::fsio::durable_point();
        Ok(())
    }

    fn read_bytes(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        match fs::read(self.file(name)) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn replace(&self, name: &str, bytes: &[u8], sync: bool) -> io::Result<()> {
        let path = self.file(name);
        let dir = path.parent().unwrap_or(&self.path).to_path_buf();
        if !dir.is_dir() {
            fs::create_dir_all(&dir)?;
            if sync {
                sync_dir(dir.parent().unwrap_or(&self.path))?;
            }
        }
        if sync {
            write_atomic(&path, bytes)?;
            sync_dir(&dir)
        } else {
            let file_name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let tmp = dir.join(format!(".{file_name}.tmp-{}", std::process::id()));
            fs::write(&tmp, bytes)?;
            fs::rename(&tmp, &path)
        }
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        match fs::read_dir(self.file(dir)) {
            Ok(entries) => {
                for entry in entries {
                    names.push(entry?.file_name().to_string_lossy().into_owned());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        names.sort();
        Ok(names)
    }

    fn repair_torn(&self, name: &str) -> io::Result<usize> {
        let path = self.file(name);
        // From the tail: the file's size is the runner's to drive (issue 31 item 6).
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        let mut end = len;
        let mut tail: Vec<u8> = Vec::new();
        let keep = loop {
            if end == 0 {
                break 0;
            }
            let start = end.saturating_sub(64 * 1024);
            let mut chunk = vec![0; usize::try_from(end - start).unwrap_or(0)];
            file.seek(SeekFrom::Start(start))?;
            file.read_exact(&mut chunk)?;
            if end == len && chunk.last() == Some(&b'\n') {
                return Ok(0);
            }
            chunk.extend_from_slice(&tail);
            if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
                tail = chunk.split_off(i + 1);
                break start + u64::try_from(i).unwrap_or(0) + 1;
            }
            tail = chunk;
            end = start;
        };
        let torn = tail.as_slice();
        if torn.is_empty() {
            return Ok(0);
        }
        let mut saved = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.file(&format!("{name}.torn")))?;
        saved.write_all(torn)?;
        saved.sync_all()?;
        let file = OpenOptions::new().write(true).open(&path)?;
        file.set_len(keep)?;
        file.sync_all()?;
        Ok(torn.len())
    }

    fn clean_leftovers(&self) -> io::Result<Vec<String>> {
        let mut removed = Vec::new();
        for dir in [
            self.path.clone(),
            self.file("approvals"),
            self.file(crate::run::precommand::DIR),
        ] {
            let before = removed.len();
            let entries = match fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for entry in entries {
                let entry = entry?;
                let name = entry.file_name().to_string_lossy().into_owned();
                let leftover = name.starts_with('.')
                    && name.rsplit_once(".tmp-").is_some_and(|(_, pid)| {
                        !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
                    });
                if leftover && entry.file_type()?.is_file() {
                    fs::remove_file(entry.path())?;
                    removed.push(name);
                }
            }
            if removed.len() > before {
                sync_dir(&dir)?;
            }
        }
        Ok(removed)
    }

    fn lock(&self) -> Result<RunLock, Error> {
        // The run's directory itself is locked first: a lock file can be unlinked and made
        // anew by any process of the user while a driver holds it (outside testing rounds
        // 14-15: two drivers then ran one run), a directory holding the run cannot.
        let dir = File::open(&self.path)
            .map_err(|e| Error::usage(format!("{}: {e}", self.path.display())))?;
        if let Err(e) =
            rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive)
        {
            return Err(Error::usage(match e {
                rustix::io::Errno::WOULDBLOCK => {
                    let pid = fs::read_to_string(self.file(LOCK)).unwrap_or_default();
                    format!(
                        "{}: the run is being driven by {}",
                        self.path.display(),
                        match pid.trim() {
                            "" => "another process".to_owned(),
                            pid => format!("process {pid}"),
                        }
                    )
                }
                e => format!(
                    "{}: cannot lock: {}",
                    self.path.display(),
                    io::Error::from(e)
                ),
            }));
        }
        let path = self.file(LOCK);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                // The holder writes its pid just after it locks: read in between, it is not
                // there yet.
                let pid = fs::read_to_string(&path).unwrap_or_default();
                let by = match pid.trim() {
                    "" => "another process".to_owned(),
                    pid => format!("process {pid}"),
                };
                return Err(Error::usage(format!(
                    "{}: the run is being driven by {by}",
                    self.path.display()
                )));
            }
            Err(e) => {
                return Err(Error::usage(format!(
                    "{}: cannot lock: {}",
                    path.display(),
                    io::Error::from(e)
                )));
            }
        }
        // The lock holds only while the name still leads to the file locked (outside testing
        // round 14: `lock` unlinked while a driver held it let a second driver lock a new
        // file, and both drove the run): checked after locking, and a lost race is refused.
        let locked = file
            .metadata()
            .map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
        let named = fs::symlink_metadata(&path).ok();
        {
            use std::os::unix::fs::MetadataExt as _;
            if named.is_none_or(|n| n.dev() != locked.dev() || n.ino() != locked.ino()) {
                return Err(Error::usage(format!(
                    "{}: the run's lock file was replaced or removed while it was being taken (another process drives the run, or a file was moved); nothing was done: try again once no other command drives it",
                    self.path.display()
                )));
            }
        }
        // For people reading the directory; the lock itself is the flock.
        let _ = file
            .set_len(0)
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        Ok(RunLock {
            _file: file,
            _dir: dir,
        })
    }
}

/// The values of a JSON-lines file, one line in memory at a time (issue 31 item 6: a run whose
/// adapter stayed under the channel limits made the host read hundreds of MB of events and
/// outputs whole). Missing: none. A torn last line (no newline) is an error, as is a line
/// that does not parse, naming the file and line.
pub fn json_lines<T: DeserializeOwned>(
    path: &Path,
) -> Result<impl Iterator<Item = Result<T, String>> + use<T>, String> {
    use std::io::BufRead as _;
    let file = match File::open(path) {
        Ok(f) => Some(io::BufReader::with_capacity(64 * 1024, f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let shown = path.display().to_string();
    let mut reader = file;
    let mut number = 0usize;
    let mut line = Vec::new();
    Ok(std::iter::from_fn(move || {
        loop {
            let r = reader.as_mut()?;
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) => {
                    reader = None;
                    return None;
                }
                Ok(_) if !line.ends_with(b"\n") => {
                    reader = None;
                    return Some(Err(format!(
                        "{shown}: torn last line (a crash?); run `craik runs recover` first"
                    )));
                }
                Ok(_) => {}
                Err(e) => {
                    reader = None;
                    return Some(Err(format!("{shown}: {e}")));
                }
            }
            if line.len() == 1 {
                continue;
            }
            number += 1;
            return Some(
                serde_json::from_slice(&line).map_err(|e| format!("{shown}: line {number}: {e}")),
            );
        }
    }))
}

/// The run's lock, held while this lives (the file stays; removing it would let a second
/// driver lock a new file while the first still holds the old one).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    /// The run's directory, `flock`ed too.
    _dir: File,
}

impl RunLock {
    /// Whether `path` still names the directory this lock holds (a run directory renamed
    /// away and copied back while driven is another directory, which another driver may
    /// lock: outside testing round 16).
    pub fn still_at(&self, path: &Path) -> bool {
        use std::os::unix::fs::MetadataExt as _;
        match (self._dir.metadata(), fs::metadata(path)) {
            (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
            _ => false,
        }
    }
}

pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, String> {
    let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// An i/o failure on `path`, naming it (exit 4: Craik's own files failed it).
/// An i/o failure on `path` (exit 5): names the path and the cause, and what to do.
pub fn io_at(path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |e| {
        let advice = match e.kind() {
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => "free disk space",
            io::ErrorKind::PermissionDenied => "check the permissions of Craik's home",
            io::ErrorKind::ReadOnlyFilesystem => "use a writable home (--home)",
            _ => "check the disk",
        };
        Error::usage(format!(
            "{}: {e}; nothing acknowledged was lost: {advice}, then `craik runs recover RUN`",
            path.display()
        ))
        .with_kind(crate::ErrorKind::Io)
    }
}

/// A failure to create or write Craik's home: [`crate::fsio::home_io`] (kept here for its
/// callers; it lives below the keys, which use it too).
pub use crate::fsio::home_io;

/// fsync a directory, so a rename or a new entry in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()?;
    crate::fsio::durable_point();
    Ok(())
}

/// A new run id: `run_<UTC date and time>_<6 random hex digits>`.
pub fn new_run_id(now: time::OffsetDateTime) -> Result<String, Error> {
    let mut random = [0u8; 3];
    getrandom::fill(&mut random)
        .map_err(|e| Error::internal(format!("no randomness from the operating system: {e}")))?;
    Ok(format!(
        "run_{:04}{:02}{:02}t{:02}{:02}{:02}_{}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second(),
        craik_kernel::to_hex(&random)
    ))
}

/// Copies a directory tree (regular files and directories only; symlinks are not followed).
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod io_tests {
    use super::*;

    #[test]
    fn a_home_that_cannot_be_resolved_counts_as_exposed() {
        let ws = std::env::temp_dir();
        let missing = Home::new(Path::new("/nonexistent/craik-home-for-a-test"));
        assert_eq!(missing.placement(&ws), HomePlacement::InsideExposed);
        let outside = Home::new(Path::new("/"));
        assert_eq!(outside.placement(&ws), HomePlacement::Outside);
    }

    #[test]
    fn io_failures_are_io_errors_naming_the_file_and_the_fix() {
        for (kind, advice) in [
            (io::ErrorKind::StorageFull, "free disk space"),
            (io::ErrorKind::PermissionDenied, "permissions"),
            (io::ErrorKind::Other, "check the disk"),
        ] {
            let f = io_at(Path::new("/h/runs/r/receipts.jsonl"))(io::Error::from(kind));
            assert_eq!(f.kind, crate::ErrorKind::Io);
            assert!(
                f.message.starts_with("/h/runs/r/receipts.jsonl: "),
                "{}",
                f.message
            );
            assert!(f.message.contains(advice), "{}", f.message);
            assert!(f.message.contains("craik runs recover"), "{}", f.message);
        }
    }
}
