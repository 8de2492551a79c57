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
//!     lock             flock'ed by the process driving the run (its pid inside, for people)
//!   memory/<memprop id>.json
//!   reviews/<id>/receipts.jsonl   one small signed journal per human review decision
//! ```
//!
//! Journals are append-only: one `write` and one `fsync` per entry. The one repair is a torn
//! last line (a write cut short by a crash before its fsync returned, so nothing acted on it):
//! recovery moves those bytes to `<name>.torn` and truncates them away, and says so.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::fsio::write_atomic;

pub const EVENTS: &str = "events.jsonl";
pub const OUTPUTS: &str = "outputs.jsonl";
pub const INPUTS: &str = "inputs.json";
pub const RUN: &str = "run.json";
pub const HANDOFF: &str = "handoff.json";
pub const LOCK: &str = "lock";
pub const CANCEL: &str = "cancel";

/// Counts durable writes and fsyncs. With the `crash-points` feature (test builds only), also
/// the test hook: `CRAIK_TEST_PAUSE_AT=N` makes the process stop at its N-th durable write
/// (after the write, before whatever follows it), print `craik-test: paused at N` on stderr
/// and wait forever, so a test can `kill -9` it at a precise point. Pausing never changes an
/// outcome. Without the feature the variable is never read.
#[derive(Debug, Default)]
pub struct CrashPoints {
    #[cfg_attr(
        not(feature = "crash-points"),
        allow(dead_code, reason = "the hook is compiled out")
    )]
    at: Option<u64>,
    count: u64,
    fsyncs: u64,
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
            let _ = writeln!(err, "craik-test: paused at {}", self.count);
            let _ = err.flush();
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

impl Home {
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

/// One run's directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub path: PathBuf,
}

impl RunDir {
    /// Creates a new run directory; refuses an existing one.
    pub fn create(home: &Home, run_id: &str) -> io::Result<Self> {
        fs::create_dir_all(home.runs())?;
        let path = home.runs().join(run_id);
        fs::create_dir(&path)?;
        Ok(Self { path })
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Appends one JSON line (fsynced when `sync`).
    pub fn append<T: Serialize>(&self, name: &str, value: &T, sync: bool) -> io::Result<()> {
        let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.file(name))?;
        file.write_all(&line)?;
        if sync { file.sync_data() } else { Ok(()) }
    }

    /// Reads a JSON-lines file (missing: empty). A torn last line is an error here; recovery
    /// repairs it first with [`RunDir::repair_torn`].
    pub fn read_lines<T: DeserializeOwned>(&self, name: &str) -> Result<Vec<T>, String> {
        let path = self.file(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        if !bytes.is_empty() && !bytes.ends_with(b"\n") {
            return Err(format!(
                "{}: torn last line (a crash?); run `craik runs recover` first",
                path.display()
            ));
        }
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .enumerate()
            .map(|(i, line)| {
                serde_json::from_slice(line)
                    .map_err(|e| format!("{}: line {}: {e}", path.display(), i + 1))
            })
            .collect()
    }

    /// Moves a torn last line of `name` to `name.torn` and truncates it away. Returns the
    /// number of bytes moved (0: nothing was torn).
    pub fn repair_torn(&self, name: &str) -> io::Result<usize> {
        let path = self.file(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        if bytes.is_empty() || bytes.ends_with(b"\n") {
            return Ok(0);
        }
        let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let torn = bytes.get(keep..).unwrap_or_default();
        let mut saved = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.file(&format!("{name}.torn")))?;
        saved.write_all(torn)?;
        saved.sync_all()?;
        let file = OpenOptions::new().write(true).open(&path)?;
        file.set_len(u64::try_from(keep).unwrap_or(u64::MAX))?;
        file.sync_all()?;
        Ok(torn.len())
    }

    /// Writes a JSON document atomically (temp file, rename); with `sync`, the file and the
    /// directory are fsynced too.
    pub fn write_json<T: Serialize>(&self, name: &str, value: &T, sync: bool) -> io::Result<()> {
        let mut text = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
        text.push(b'\n');
        if sync {
            write_atomic(&self.file(name), &text)?;
            sync_dir(&self.path)
        } else {
            let tmp = self.file(&format!(".{name}.tmp-{}", std::process::id()));
            fs::write(&tmp, &text)?;
            fs::rename(&tmp, self.file(name))
        }
    }

    /// Reads a JSON document.
    pub fn read_json<T: DeserializeOwned>(&self, name: &str) -> Result<T, String> {
        read_json(&self.file(name))
    }

    /// Takes the run's lock: an exclusive `flock` on `runs/<id>/lock`, held by the returned
    /// guard for the life of the driver. The kernel releases it when the process dies, however
    /// it dies, so there is no stale lock to take over and no window between checking and
    /// taking: of two drivers, exactly one gets it.
    pub fn lock(&self) -> Result<RunLock, Error> {
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
                let pid = fs::read_to_string(&path).unwrap_or_default();
                return Err(Error::usage(format!(
                    "{}: the run is being driven by process {}",
                    self.path.display(),
                    pid.trim()
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
        // For people reading the directory; the lock itself is the flock.
        let _ = file
            .set_len(0)
            .and_then(|()| writeln!(file, "{}", std::process::id()));
        Ok(RunLock { _file: file })
    }

    /// The pid written by the live process holding the lock, if one holds it.
    pub fn locked_by_live(&self) -> Option<String> {
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

/// The run's lock, held while this lives (the file stays; removing it would let a second
/// driver lock a new file while the first still holds the old one).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
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

/// fsync a directory, so a rename or a new entry in it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod io_tests {
    use super::*;

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
