//! The adapter supervisor: runs a runner adapter as an untrusted child process and speaks
//! `craik.channel/1` (docs/protocol.md) with it.
//!
//! The child gets its own process group, a scrubbed environment (a fixed `PATH`, `HOME` and
//! `TMPDIR` set to its working directory, and only the variables its runner profile names),
//! a new private working directory outside Craik's home (removed with it), stdin/stdout for
//! the channel and stderr captured as redacted diagnostics. Every line it writes is
//! size-limited, strictly decoded and checked against the request in flight; any violation
//! (EOF, crash, hang, oversized or malformed line, unknown field, wrong id, an unexpected
//! message) ends the call with an error naming it, and the group is killed. The supervisor
//! never trusts what the adapter says about itself.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use craik_contracts::channel::{
    self, CancelMethod, CancelNotification, CancelParams, ChannelError, EventKind,
    EventNotification, HostInfo, InitializeMethod, InitializeParams, InitializeRequest,
    InitializeResponse, Limits, PROTOCOL_VERSION, ShutdownMethod, ShutdownRequest,
    ShutdownResponse, StepMethod, StepParams, StepRequest, StepResponse,
};
use craik_contracts::{Check, Checker, RunnerMetadata, RunnerStepRequest, RunnerStepResult};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::confine::Sandbox;
use crate::run::RunnerError;
use crate::run::StepRunner;
use crate::run::exec::SAFE_PATH;

/// How an adapter is started.
#[derive(Debug, Clone)]
pub struct AdapterSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Environment variables passed through (by name) from Craik's own environment.
    pub env: Vec<String>,
    pub max_line_bytes: usize,
    pub initialize_timeout: Duration,
    pub step_timeout: Duration,
    /// Craik's home: nothing the adapter may read or write holds it.
    pub home: Option<PathBuf>,
    /// Refuse to start the adapter unconfined (every profile but `trusted-local`).
    pub confinement_required: bool,
    /// Paths the operator lets it read besides the defaults (`--adapter-read`).
    pub extra_read: Vec<PathBuf>,
    /// The `sha256:` the program must have (its pin, or what the launch hashed): the file is
    /// opened once, hashed through that descriptor, and executed through it
    /// (`/proc/self/fd/N`), so the bytes checked are the bytes run. A mismatch refuses.
    pub exec_sha256: Option<String>,
    /// Paths inside Craik's home the adapter may read (its own install cache under
    /// `HOME/runners/<id>/`); the rest of the home stays out of reach.
    pub home_read: Vec<PathBuf>,
    /// The adapter's private scratch directory — its working directory, `HOME` and `TMPDIR`,
    /// the one place it may write — made new by [`Adapter::spawn`] outside Craik's home and
    /// any run's record, and removed with the adapter: nothing an adapter (or a CLI it runs)
    /// writes is kept (outside testing round r32: codex's shell snapshot quoting the key, and
    /// what a CLI wrote to its working directory, stayed in the run's directory).
    pub scratch: Option<PathBuf>,
    /// The pinned tree the adapter runs its CLI from, as stat'ed when its digest was taken:
    /// checked before and after every step ([`crate::registry::TreeStat`]).
    pub tree: Option<std::sync::Arc<crate::registry::TreeStat>>,
}

impl AdapterSpec {
    pub fn new(program: PathBuf, args: Vec<String>) -> Self {
        Self {
            program,
            args,
            env: Vec::new(),
            max_line_bytes: channel::DEFAULT_MAX_LINE_BYTES,
            initialize_timeout: Duration::from_secs(10),
            step_timeout: Duration::from_secs(120),
            home: None,
            confinement_required: true,
            extra_read: Vec::new(),
            exec_sha256: None,
            home_read: Vec::new(),
            scratch: None,
            tree: None,
        }
    }

    /// The adapter's sandbox: it reads the system paths, its own program (and, for a script,
    /// its interpreter) with the installation each lives in, and the absolute paths on its
    /// command line; it writes only its scratch directory. Network is allowed (live
    /// runners talk to their services). Nothing granted holds Craik's home.
    pub fn sandbox(&self) -> Result<Sandbox, crate::confine::ConfineError> {
        let mut read = Vec::new();
        let mut programs = vec![self.program.clone()];
        if let Some(interpreter) = shebang(&self.program) {
            programs.push(interpreter);
        }
        for program in programs {
            let real = program.canonicalize().unwrap_or(program);
            read.push(installation(&real));
            read.push(real);
        }
        // Craik's own shipped adapters live beside it (a wrapper script may `exec` one).
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|me| me.parent().map(Path::to_path_buf))
        {
            read.push(dir);
        }
        read.extend(self.extra_read.iter().cloned());
        read.extend(self.home_read.iter().cloned());
        read.extend(
            self.args
                .iter()
                .map(PathBuf::from)
                .filter(|p| p.is_absolute() && p.exists()),
        );
        // Nothing granted reaches Craik's home: paths inside it are dropped, paths holding it
        // carved around it.
        // Nor a credential file inside an installation it reads (`~/.cargo` for an adapter
        // in `~/.cargo/bin` holds `credentials.toml`; found by outside testing).
        let mut hidden: Vec<PathBuf> = match &self.home {
            Some(home) if !self.home_read.is_empty() => home_around(home, &self.home_read)?,
            Some(home) => vec![home.clone()],
            None => Vec::new(),
        };
        for dir in read.iter().filter(|p| p.is_dir()) {
            if !crate::confine::rules_is_system_root(dir) {
                hidden.extend(crate::confine::toolchains::find_credentials(dir));
            }
        }
        let keep_out = crate::confine::Limits::hiding(hidden);
        let write: Vec<PathBuf> = self.scratch.iter().cloned().collect();
        Sandbox::for_profile(
            read,
            Vec::new(),
            write,
            &keep_out,
            crate::confine::Network::Tcp,
            !self.confinement_required,
        )
    }
}

/// Everything in `home` but `allowed` (and the directories leading to them), as paths to
/// hide: the home minus an adapter's own install cache. Links are never followed.
fn home_around(home: &Path, allowed: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let home = home
        .canonicalize()
        .map_err(|e| format!("{}: {e}", home.display()))?;
    let allowed: Vec<PathBuf> = allowed
        .iter()
        .map(|a| a.canonicalize().unwrap_or_else(|_| a.clone()))
        .collect();
    let mut hidden = Vec::new();
    let mut todo = vec![home];
    while let Some(dir) = todo.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if allowed.contains(&path) {
                continue;
            }
            let leads = allowed.iter().any(|a| a.starts_with(&path));
            let is_dir = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir());
            if leads && is_dir {
                todo.push(path);
            } else {
                hidden.push(path);
            }
        }
    }
    Ok(hidden)
}

/// The program file opened once and checked against `expected`: what is executed is this
/// descriptor (`/proc/self/fd/N`) unless the file is a script, whose interpreter must open it
/// by path (the window between this check and that open is in SECURITY.md).
fn open_pinned(program: &Path, expected: &str) -> Result<(std::fs::File, bool), StartError> {
    use std::io::Seek;
    let path = || program.to_path_buf();
    let mut file = std::fs::File::open(program).map_err(|source| StartError::Open {
        program: path(),
        source,
    })?;
    let read = |source| StartError::Read {
        program: path(),
        source,
    };
    let found = crate::registry::digest_reader(&mut file).map_err(read)?;
    if found != expected {
        return Err(StartError::Changed {
            program: path(),
            expected: expected.to_owned(),
            found,
        });
    }
    let mut head = [0u8; 2];
    file.seek(std::io::SeekFrom::Start(0))
        .and_then(|_| std::io::Read::read_exact(&mut file, &mut head))
        .map_err(read)?;
    Ok((file, head == *b"#!"))
}

/// Why an adapter process did not start. Every variant is a setup failure of the operator's
/// machine or entry (never the adapter's doing: it has not run yet).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{}: cannot create: {source}", dir.display())]
    WorkDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    Sandbox(#[from] crate::confine::ConfineError),
    #[error("`{}`: cannot open: {source}", program.display())]
    Open {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("`{}`: cannot read: {source}", program.display())]
    Read {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("`{}` changed before launch (expected {expected}, found {found}); refusing to start it", program.display())]
    Changed {
        program: PathBuf,
        expected: String,
        found: String,
    },
    /// The confined child refused before `exec`, on the refusal pipe (static text of Craik's).
    #[error("`{}`: the sandbox refused to start it: {what}", program.display())]
    Refused { program: PathBuf, what: String },
    #[error("`{}`: cannot start: {source}", program.display())]
    Exec {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("no {0} pipe")]
    Pipe(&'static str),
}

/// The name an adapter's scratch directory starts with (then six random letters and digits).
const SCRATCH_PREFIX: &str = "craik-adapter-";

/// The empty file in an adapter's scratch directory that marks it as one.
const SCRATCH_MARK: &str = ".craik-adapter-scratch";

/// Whether `name` is one [`Adapter::spawn`] gives a scratch directory.
fn scratch_name(name: &str) -> bool {
    name.strip_prefix(SCRATCH_PREFIX)
        .is_some_and(|rest| rest.len() == 6 && rest.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Removes from `base` the scratch directories of this user whose Craik is gone — killed
/// before it could remove them (outside testing round r32b: a Craik killed with SIGKILL left
/// its adapter's scratch, holding what its CLI wrote, for good): those whose lock no process
/// holds, made over a minute ago (one just made is not locked yet).
fn sweep_scratches(base: &Path) {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        // Only what is named and marked as a scratch (outside testing round r32c: an
        // operator's own `craik-adapter-*` folder was swept).
        if !scratch_name(&entry.file_name().to_string_lossy()) {
            continue;
        }
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let young = meta
            .modified()
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_none_or(|age| age < Duration::from_secs(60));
        if !meta.is_dir() || meta.uid() != me || young {
            continue;
        }
        let Ok(dir) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(&path)
        else {
            continue;
        };
        if std::fs::symlink_metadata(path.join(SCRATCH_MARK)).is_ok_and(|m| m.is_file())
            && rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive).is_ok()
        {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Where an adapter's scratch directory is made: `$XDG_RUNTIME_DIR` when it is an absolute
/// directory of this user that no one else may enter (a per-user directory whose parents only
/// root writes), else the system's temporary directory — never inside Craik's `home`, which
/// the adapter's sandbox hides. The scratch is a new directory of mode 0700 in it.
fn scratch_base(home: Option<&Path>) -> PathBuf {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let outside = |dir: &Path| {
        let real = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        home.is_none_or(|h| !real.starts_with(h.canonicalize().unwrap_or_else(|_| h.into())))
    };
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| {
            dir.is_absolute()
                && std::fs::symlink_metadata(dir).is_ok_and(|m| {
                    m.is_dir()
                        && m.uid() == rustix::process::geteuid().as_raw()
                        && m.permissions().mode() & 0o077 == 0
                })
        });
    // Its real path: what the CLI's walk up from it meets is what is there.
    runtime
        .into_iter()
        .chain([std::env::temp_dir(), PathBuf::from("/tmp")])
        .filter_map(|dir| dir.canonicalize().ok())
        .find(|dir| outside(dir))
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// The installation a program runs from: `<prefix>` for `<prefix>/bin/<name>` when that
/// prefix is an installation (`/usr`, `/usr/local`, `/opt/x`, a toolchain root), else the
/// program's own directory — never a directory as broad as `/`, `/home`, `/tmp` or the
/// operator's `HOME`.
fn installation(program: &Path) -> PathBuf {
    let dir = program.parent().unwrap_or(program);
    let prefix = dir
        .file_name()
        .is_some_and(|n| n == "bin")
        .then(|| dir.parent())
        .flatten();
    match prefix {
        Some(prefix)
            if !crate::confine::too_broad(prefix)
                && !shared_user_prefix(prefix, std::env::var_os("HOME").map(PathBuf::from)) =>
        {
            prefix.to_path_buf()
        }
        _ => dir.to_path_buf(),
    }
}

/// A prefix directly in the operator's `HOME` (`~/.local`, `~/.cargo`): shared by every
/// program the user installed and holding their data (`~/.local/state` holds Craik's
/// default homes; found by outside testing), so an adapter installed there reads only its
/// own directory (add more with `--adapter-read`).
fn shared_user_prefix(prefix: &Path, home: Option<PathBuf>) -> bool {
    let home = home.and_then(|h| h.canonicalize().ok());
    let real = prefix
        .canonicalize()
        .unwrap_or_else(|_| prefix.to_path_buf());
    home.is_some_and(|h| real.parent() == Some(h.as_path()))
}

/// The interpreter a script names on its `#!` line.
fn shebang(program: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head.get(..n)?.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let text = std::str::from_utf8(line).ok()?;
    text.split_whitespace().next().map(PathBuf::from)
}

/// What the reader task saw on the adapter's stdout.
#[derive(Debug)]
enum Incoming {
    Line(Vec<u8>),
    /// The channel is broken: why.
    Broken(String),
}

/// Stderr lines kept (redacted), most recent last.
const STDERR_LINES: usize = 50;
/// Longest stderr line kept, in characters.
const STDERR_LINE_CHARS: usize = 500;

/// Most events one step may stream; more is a protocol violation (memory stays bounded).
pub const MAX_EVENTS_PER_STEP: usize = 1_000;
/// Most event bytes (lines as received) one step may stream.
pub const MAX_EVENT_BYTES_PER_STEP: usize = 4 * 1024 * 1024;

/// Reads an adapter's stderr until it closes, however much it writes and whatever the bytes
/// (decoded lossily): a reader that stopped would leave the adapter blocked or dead of
/// SIGPIPE. Only the last [`STDERR_LINES`] lines are kept, each cut to
/// [`STDERR_LINE_CHARS`] characters and redacted.
async fn drain_stderr<R: tokio::io::AsyncRead + Unpin>(
    mut pipe: R,
    sink: Arc<Mutex<VecDeque<String>>>,
) {
    let keep = |line: &[u8]| {
        if let Ok(mut kept) = sink.lock() {
            if kept.len() == STDERR_LINES {
                kept.pop_front();
            }
            kept.push_back(redact_line(&String::from_utf8_lossy(line)));
        }
    };
    let mut current: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for chunk in buf
            .get(..n)
            .unwrap_or_default()
            .split_inclusive(|b| *b == b'\n')
        {
            let (body, ends) = match chunk.strip_suffix(b"\n") {
                Some(body) => (body, true),
                None => (chunk, false),
            };
            let room = (STDERR_LINE_CHARS * 4).saturating_sub(current.len());
            current.extend_from_slice(body.get(..room.min(body.len())).unwrap_or_default());
            if ends {
                keep(&current);
                current.clear();
            }
        }
    }
    if !current.is_empty() {
        keep(&current);
    }
}

/// A running adapter.
pub struct Adapter {
    runtime: tokio::runtime::Runtime,
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    incoming: mpsc::Receiver<Incoming>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    pgid: Option<u32>,
    next_id: u64,
    spec: AdapterSpec,
    broken: Option<String>,
    /// What `initialize` returned, once it did.
    pub claimed: Option<InitializeResponse>,
    /// Streamed events of the last step.
    pub events: Vec<channel::EventParams>,
    pending_diagnostics: Vec<String>,
    /// Events and event bytes received in the step in flight.
    events_seen: usize,
    event_bytes: usize,
    /// Told each `text_delta` as it arrives ([`crate::run::StepRunner::stream_text`]).
    text_sink: Option<crate::run::TextSink>,
    /// The scratch directory ([`AdapterSpec::scratch`]), removed once the group is killed.
    scratch: Option<tempfile::TempDir>,
    /// Its lock, held as long as it is in use.
    _scratch_lock: std::fs::File,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter")
            .field("program", &self.spec.program)
            .finish_non_exhaustive()
    }
}

/// A call that did not produce a result.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The adapter answered with a structured error.
    Structured(ChannelError),
    /// The adapter broke the protocol (or died); the group has been killed.
    Violation(String),
    /// The adapter gave no answer within the call's timeout; the group has been killed.
    Timeout(String),
}

impl std::error::Error for CallError {}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Structured(e) => write!(f, "adapter error {}: {}", e.code, e.message),
            Self::Violation(why) | Self::Timeout(why) => f.write_str(why),
        }
    }
}

fn redact_line(line: &str) -> String {
    // Redacted before it is cut (issue 30): a token across the cut is seen whole.
    let text: String = line.chars().take(STDERR_LINE_CHARS * 4).collect();
    match craik_kernel::redact_checked(&text) {
        Ok(r) => {
            craik_contracts::one_line(&r.text.chars().take(STDERR_LINE_CHARS).collect::<String>())
        }
        Err(what) => format!("[stderr line withheld: it held {what}]"),
    }
}

impl Adapter {
    /// Starts the adapter process (no handshake yet).
    pub fn spawn(mut spec: AdapterSpec) -> Result<Self, StartError> {
        let base = scratch_base(spec.home.as_deref());
        sweep_scratches(&base);
        let scratch = tempfile::Builder::new()
            .prefix(SCRATCH_PREFIX)
            .tempdir_in(&base)
            .map_err(|source| StartError::WorkDir {
                dir: base.clone(),
                source,
            })?;
        // Held while this process lives: a scratch whose lock is free was left by a Craik that
        // died before it could remove it ([`sweep_scratches`]).
        let scratch_lock = std::fs::File::open(scratch.path())
            .and_then(|dir| {
                rustix::fs::flock(&dir, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
                Ok(dir)
            })
            .map_err(|source| StartError::WorkDir {
                dir: scratch.path().to_path_buf(),
                source,
            })?;
        // What marks a directory as an adapter's scratch for the sweep (with its name).
        std::fs::write(scratch.path().join(SCRATCH_MARK), b"").map_err(|source| {
            StartError::WorkDir {
                dir: scratch.path().to_path_buf(),
                source,
            }
        })?;
        spec.scratch = Some(scratch.path().to_path_buf());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StartError::Runtime)?;
        let sandbox = spec.sandbox()?;
        // Held open until the child has executed it.
        let pinned = match &spec.exec_sha256 {
            Some(expected) => Some(open_pinned(&spec.program, expected)?),
            None => None,
        };
        let (std_command, refusal) = match &pinned {
            Some((file, false)) => {
                use std::os::fd::AsRawFd;
                let by_fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
                let arg0 = spec.program.display().to_string();
                sandbox.command_named(&by_fd, Some(&arg0), &spec.args)?
            }
            _ => sandbox.command(&spec.program, &spec.args)?,
        };
        let mut command = tokio::process::Command::from(std_command);
        command
            .current_dir(scratch.path())
            .env_clear()
            .env("PATH", SAFE_PATH)
            .env("HOME", scratch.path())
            .env("LANG", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for name in &spec.env {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        // Last, so no passed variable names another.
        command.env("TMPDIR", scratch.path());
        let _guard = runtime.enter();
        // A refusal comes back on its own pipe (issue 30): what the adapter could write on
        // its stderr never decides it.
        let mut child = command.spawn().map_err(|source| match refusal.take() {
            Some(what) => StartError::Refused {
                program: spec.program.clone(),
                what,
            },
            None => StartError::Exec {
                program: spec.program.clone(),
                source,
            },
        })?;
        drop(pinned);
        let pgid = child.id();
        crate::confine::manage(pgid);
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or(StartError::Pipe("stdout"))?;
        let stderr_pipe = child.stderr.take().ok_or(StartError::Pipe("stderr"))?;
        let (tx, incoming) = mpsc::channel(64);
        let max = spec.max_line_bytes;
        runtime.spawn(read_lines(stdout, tx, max));
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let sink = Arc::clone(&stderr);
        runtime.spawn(drain_stderr(stderr_pipe, sink));
        Ok(Self {
            runtime,
            child,
            stdin,
            incoming,
            stderr,
            pgid,
            next_id: 1,
            spec,
            broken: None,
            claimed: None,
            events: Vec::new(),
            pending_diagnostics: Vec::new(),
            events_seen: 0,
            event_bytes: 0,
            text_sink: None,
            scratch: Some(scratch),
            _scratch_lock: scratch_lock,
        })
    }

    /// Redacted stderr lines gathered since the last call.
    pub fn drain_stderr(&mut self) -> Vec<String> {
        self.stderr
            .lock()
            .map(|mut kept| kept.drain(..).collect())
            .unwrap_or_default()
    }

    fn kill(&mut self) {
        if let Some(pid) = self
            .pgid
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = self.child.start_kill();
        let _ = self.child.try_wait();
        crate::confine::release(self.pgid);
        // What the adapter left behind was re-parented to Craik: it goes too.
        crate::confine::reap_strays(false);
    }

    fn violation(&mut self, why: String) -> CallError {
        self.kill();
        // Give the stderr reader a moment to collect the adapter's last words.
        self.runtime.block_on(async {
            tokio::time::sleep(Duration::from_millis(20)).await;
        });
        let last = self
            .stderr
            .lock()
            .ok()
            .and_then(|kept| kept.back().cloned());
        let why = match last {
            Some(line) => format!("{why} (its stderr: {line})"),
            None => why,
        };
        let why = craik_contracts::one_line(&why);
        self.broken = Some(why.clone());
        CallError::Violation(why)
    }

    /// Writes one message line.
    fn send<T: Serialize>(&mut self, message: &T) -> Result<(), CallError> {
        let mut line = serde_json::to_vec(message)
            .map_err(|e| CallError::Violation(format!("cannot encode: {e}")))?;
        line.push(b'\n');
        // Craik keeps its own side of the line limit it announced; the request is not sent.
        if line.len() > self.spec.max_line_bytes.saturating_add(1) {
            return Err(self.violation(format!(
                "Craik's own message is {} bytes, over the channel's line limit of {} (--max-line-bytes); not sent (not the adapter's doing)",
                line.len() - 1,
                self.spec.max_line_bytes
            )));
        }
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(self.violation("the adapter's stdin is closed".into()));
        };
        let written = self.runtime.block_on(async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        });
        match written {
            Ok(()) => Ok(()),
            Err(e) => {
                let status = self.exit_status();
                Err(self.violation(format!("cannot write to the adapter ({e}); it {status}")))
            }
        }
    }

    fn exit_status(&mut self) -> String {
        match self.child.try_wait() {
            Ok(Some(status)) => format!("exited ({status})"),
            Ok(None) => "is still running".into(),
            Err(e) => format!("is in an unknown state ({e})"),
        }
    }

    /// Sends a request and waits for its answer, collecting `event` notifications.
    fn call<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        id: u64,
        request: &Req,
        method: &str,
        timeout: Duration,
    ) -> Result<Resp, CallError> {
        if let Some(why) = &self.broken {
            return Err(CallError::Violation(format!(
                "the adapter was stopped earlier: {why}"
            )));
        }
        self.events.clear();
        self.events_seen = 0;
        self.event_bytes = 0;
        self.send(request)?;
        let mut deadline = self
            .runtime
            .block_on(async { tokio::time::Instant::now() + timeout });
        let mut exited: Option<String> = None;
        loop {
            // A signal asking the run to stop ends the wait (seen within a slice).
            if exited.is_none()
                && let Some(signal) = crate::confine::interrupted()
            {
                let _ = self.send(&CancelNotification {
                    method: CancelMethod::Name,
                    params: CancelParams { id },
                });
                return Err(self.violation(format!(
                    "`{method}` abandoned: the run was interrupted by {}",
                    crate::confine::signal_name(signal)
                )));
            }
            let incoming = &mut self.incoming;
            let child = &mut self.child;
            let watch_exit = exited.is_none();
            let next = self.runtime.block_on(async {
                let slice = (tokio::time::Instant::now() + Duration::from_millis(200)).min(deadline);
                tokio::select! {
                    biased;
                    line = tokio::time::timeout_at(slice, incoming.recv()) => Ok((line, slice < deadline)),
                    status = child.wait(), if watch_exit => Err(status),
                }
            });
            let next = match next {
                Ok((Err(_), true)) => continue,
                Ok((line, _)) => Ok(line),
                Err(status) => Err(status),
            };
            let next = match next {
                Ok(next) => next,
                Err(status) => {
                    // The process is gone (its children may still hold the pipe): read what it
                    // wrote before exiting, briefly, then give up.
                    exited = Some(match status {
                        Ok(s) => format!("exited ({s})"),
                        Err(e) => format!("ended in an unknown state ({e})"),
                    });
                    deadline = self.runtime.block_on(async {
                        tokio::time::Instant::now() + Duration::from_millis(200)
                    });
                    continue;
                }
            };
            let line = match next {
                Err(_) => {
                    if let Some(status) = &exited {
                        return Err(self.violation(format!(
                            "the adapter closed the channel during `{method}`: it {status} without answering"
                        )));
                    }
                    // Ask once, politely; then kill.
                    let _ = self.send(&CancelNotification {
                        method: CancelMethod::Name,
                        params: CancelParams { id },
                    });
                    return Err(match self.violation(format!(
                        "no answer to `{method}` within {} ms; the adapter's process group was killed",
                        timeout.as_millis()
                    )) {
                        CallError::Violation(why) => CallError::Timeout(why),
                        other => other,
                    });
                }
                Ok(None) => {
                    let status = self.exit_status();
                    return Err(self.violation(format!(
                        "the adapter closed the channel during `{method}`; it {status}"
                    )));
                }
                Ok(Some(Incoming::Broken(why))) => {
                    let status = self.exit_status();
                    return Err(self.violation(format!("{why} during `{method}`; it {status}")));
                }
                Ok(Some(Incoming::Line(line))) => line,
            };
            match self.classify::<Resp>(&line, id, method) {
                Ok(Some(response)) => return Ok(response),
                Ok(None) => continue,
                Err(e @ (CallError::Structured(_) | CallError::Timeout(_))) => return Err(e),
                Err(CallError::Violation(why)) => return Err(self.violation(why)),
            }
        }
    }

    /// One line from the adapter: an event (`None`), the answer, or what is wrong with it.
    fn classify<Resp: DeserializeOwned>(
        &mut self,
        line: &[u8],
        id: u64,
        method: &str,
    ) -> Result<Option<Resp>, CallError> {
        let value: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
            CallError::Violation(format!("the adapter wrote a line that is not JSON: {e}"))
        })?;
        let Some(object) = value.as_object() else {
            return Err(CallError::Violation(
                "the adapter wrote a line that is not a JSON object".into(),
            ));
        };
        if object.contains_key("method") {
            let event: EventNotification = decode(line, "an `event` notification")?;
            if event.params.request != id {
                return Err(CallError::Violation(format!(
                    "the adapter sent an event for request {} while {id} is in flight",
                    event.params.request
                )));
            }
            self.event_bytes += line.len();
            if self.events_seen >= MAX_EVENTS_PER_STEP
                || self.event_bytes > MAX_EVENT_BYTES_PER_STEP
            {
                return Err(self.violation(format!(
                    "the adapter streamed more than {MAX_EVENTS_PER_STEP} events or {MAX_EVENT_BYTES_PER_STEP} bytes of events in one step"
                )));
            }
            self.events_seen += 1;
            if (event.params.kind == EventKind::ModelStep) != event.params.model_step.is_some() {
                return Err(CallError::Violation(format!(
                    "the adapter sent a `{}` event {} a `model_step` report; a report goes with kind `model_step` only, and always",
                    serde_json::to_value(event.params.kind)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default(),
                    if event.params.model_step.is_some() {
                        "with"
                    } else {
                        "without"
                    }
                )));
            }
            if event.params.kind == EventKind::TextDelta
                && let (Some(text), Some(sink)) = (&event.params.text, self.text_sink.as_mut())
            {
                sink(text);
            }
            if event.params.kind == EventKind::Log
                && let Some(message) = &event.params.message
            {
                let level = event.params.level.as_deref().unwrap_or("info");
                self.pending_diagnostics
                    .push(redact_line(&format!("adapter {level}: {message}")));
            }
            self.events.push(event.params);
            return Ok(None);
        }
        let answered = object.get("id").and_then(serde_json::Value::as_u64);
        if answered != Some(id) {
            return Err(CallError::Violation(format!(
                "the adapter answered id {} while {id} (`{method}`) is in flight",
                object.get("id").map_or_else(
                    || "(none)".into(),
                    |v| craik_contracts::Truncated(&v.to_string()).to_string()
                )
            )));
        }
        if object.contains_key("error") {
            let error: channel::ErrorResponse = decode(line, "an error response")?;
            return Err(CallError::Structured(error.error));
        }
        decode(line, &format!("the `{method}` response")).map(Some)
    }

    /// The handshake: checks the protocol version, the claimed metadata and matrix, and that
    /// the adapter is who the host expects (both must name `expected.id`; with `None`, they
    /// must name the same runner).
    pub fn initialize(&mut self, expected: Option<&RunnerMetadata>) -> Result<(), CallError> {
        let id = self.take_id();
        let request = InitializeRequest {
            id,
            method: InitializeMethod::Name,
            params: InitializeParams {
                protocol_version: PROTOCOL_VERSION.into(),
                host: HostInfo {
                    name: "craik".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                },
                limits: self.limits(),
            },
        };
        let timeout = self.spec.initialize_timeout;
        let response: InitializeResponse = self.call(id, &request, "initialize", timeout)?;
        let r = &response.result;
        if r.protocol_version != PROTOCOL_VERSION {
            return Err(self.violation(format!(
                "the adapter speaks `{}`, not `{PROTOCOL_VERSION}`",
                craik_contracts::Truncated(&r.protocol_version)
            )));
        }
        let mut checker = Checker::new();
        r.runner.check(&mut checker);
        r.matrix.check(&mut checker);
        if let Some(problem) = checker.into_problems().first() {
            return Err(self.violation(format!("the adapter's handshake is invalid: {problem}")));
        }
        let wanted = expected
            .map_or(r.runner.id.as_str(), |e| e.id.as_str())
            .to_owned();
        if r.runner.id != wanted || r.matrix.runner.id != wanted {
            return Err(self.violation(format!(
                "the adapter claims to be `{}` (matrix: `{}`), but was started as `{wanted}`",
                craik_contracts::Truncated(&r.runner.id),
                craik_contracts::Truncated(&r.matrix.runner.id),
            )));
        }
        self.claimed = Some(response);
        Ok(())
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_line_bytes: u64::try_from(self.spec.max_line_bytes).unwrap_or(u64::MAX),
            initialize_timeout_ms: u64::try_from(self.spec.initialize_timeout.as_millis())
                .unwrap_or(u64::MAX),
            step_timeout_ms: u64::try_from(self.spec.step_timeout.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// One step.
    pub fn step_call(
        &mut self,
        request: &RunnerStepRequest,
    ) -> Result<RunnerStepResult, CallError> {
        let id = self.take_id();
        let message = StepRequest {
            id,
            method: StepMethod::Name,
            params: StepParams {
                request: request.clone(),
            },
        };
        let timeout = self.spec.step_timeout;
        let response: StepResponse = self.call(id, &message, "step", timeout)?;
        Ok(response.result.result)
    }

    /// Sends raw bytes (conformance tests only) and returns the next line, if any, within
    /// `timeout`.
    pub fn raw_exchange(
        &mut self,
        bytes: &[u8],
        timeout: Duration,
    ) -> Result<Option<Vec<u8>>, String> {
        let Some(stdin) = self.stdin.as_mut() else {
            return Err("stdin closed".into());
        };
        self.runtime
            .block_on(async {
                stdin.write_all(bytes).await?;
                stdin.flush().await
            })
            .map_err(|e| format!("cannot write: {e}"))?;
        if timeout.is_zero() {
            return Ok(None);
        }
        let incoming = &mut self.incoming;
        match self
            .runtime
            .block_on(async { tokio::time::timeout(timeout, incoming.recv()).await })
        {
            Err(_) => Ok(None),
            Ok(None) => Err("the adapter closed the channel".into()),
            Ok(Some(Incoming::Broken(why))) => Err(why),
            Ok(Some(Incoming::Line(line))) => Ok(Some(line)),
        }
    }

    /// Asks the adapter to shut down; waits up to `grace` for it to exit, then kills the
    /// group. Returns whether it exited cleanly (answered, exit status 0).
    pub fn shutdown(&mut self, grace: Duration) -> Result<(), ShutdownError> {
        let answered = if self.broken.is_none() {
            let id = self.take_id();
            let request = ShutdownRequest {
                id,
                method: ShutdownMethod::Name,
                params: channel::Empty {},
            };
            self.call::<_, ShutdownResponse>(id, &request, "shutdown", grace)
                .map(|_| ())
                .map_err(ShutdownError::Call)
        } else {
            Err(ShutdownError::AlreadyStopped)
        };
        self.stdin = None;
        let child = &mut self.child;
        let exited = self
            .runtime
            .block_on(async { tokio::time::timeout(grace, child.wait()).await });
        let result = match (answered, exited) {
            (Ok(()), Ok(Ok(status))) if status.success() => Ok(()),
            (Ok(()), Ok(Ok(status))) => Err(ShutdownError::Exited(status)),
            (Ok(()), _) => Err(ShutdownError::Lingered(grace)),
            (Err(e), _) => Err(e),
        };
        self.kill();
        result
    }
}

/// Why an adapter did not shut down cleanly.
#[derive(Debug, thiserror::Error)]
pub enum ShutdownError {
    #[error(transparent)]
    Call(CallError),
    #[error("the adapter was already stopped")]
    AlreadyStopped,
    #[error("the adapter exited with {0}")]
    Exited(std::process::ExitStatus),
    #[error("the adapter did not exit within {} ms of `shutdown`", .0.as_millis())]
    Lingered(Duration),
}

impl Drop for Adapter {
    fn drop(&mut self) {
        self.kill();
        // Whatever the adapter (or a CLI it ran) left in its scratch directory goes once the
        // group is dead: a handoff adapter's CLI killed mid-step (a step timeout) never removed
        // its private home, and codex's shell snapshot there quoted the key (outside testing
        // round r32). The scratch lies outside the run's record, so nothing of it is kept.
        if let Some(scratch) = self.scratch.take() {
            let _ = scratch.close();
        }
    }
}

fn decode<T: DeserializeOwned>(line: &[u8], what: &str) -> Result<T, CallError> {
    let mut de = serde_json::Deserializer::from_slice(line);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        CallError::Violation(format!(
            "the adapter sent an invalid {what}: {}{}",
            if path == "." {
                String::new()
            } else {
                format!("{path}: ")
            },
            e.into_inner()
        ))
    })
}

async fn read_lines(stdout: tokio::process::ChildStdout, tx: mpsc::Sender<Incoming>, max: usize) {
    let mut reader = tokio::io::BufReader::new(stdout);
    loop {
        let mut line = Vec::new();
        // Read at most max + 1 bytes of one line, so an endless line cannot grow memory.
        let mut limited = (&mut reader).take(u64::try_from(max).unwrap_or(u64::MAX) + 2);
        match limited.read_until(b'\n', &mut line).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                let _ = tx
                    .send(Incoming::Broken(format!(
                        "cannot read the adapter's output: {e}"
                    )))
                    .await;
                return;
            }
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        } else if line.len() <= max {
            let _ = tx
                .send(Incoming::Broken(format!(
                    "the adapter's output ended in the middle of a line ({} bytes)",
                    line.len()
                )))
                .await;
            return;
        }
        if line.len() > max {
            let _ = tx
                .send(Incoming::Broken(format!(
                    "the adapter wrote a line longer than {max} bytes"
                )))
                .await;
            return;
        }
        if std::str::from_utf8(&line).is_err() {
            let _ = tx
                .send(Incoming::Broken(
                    "the adapter wrote a line that is not UTF-8".into(),
                ))
                .await;
            return;
        }
        if tx.send(Incoming::Line(line)).await.is_err() {
            return;
        }
    }
}

/// A runner behind an adapter process.
pub struct AdapterRunner {
    spec: AdapterSpec,
    adapter: Option<Adapter>,
    /// What is left of the run's wall-clock budget: the next step's timeout at most.
    step_cap: Option<Duration>,
    /// Handed to the adapter once it is started.
    text_sink: Option<crate::run::TextSink>,
}

impl std::fmt::Debug for AdapterRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdapterRunner")
            .field("spec", &self.spec)
            .field("adapter", &self.adapter)
            .finish_non_exhaustive()
    }
}

impl AdapterRunner {
    pub fn new(spec: AdapterSpec) -> Self {
        Self {
            spec,
            adapter: None,
            step_cap: None,
            text_sink: None,
        }
    }
}

impl AdapterRunner {
    /// Whether what the adapter runs at each step (a `cli` entry's CLI, its pinned tree) is as
    /// it was when its digest was checked (outside testing round r32: a tree rewritten during
    /// a run ran under the digest recorded at its start). A change is the operator's setup,
    /// not the runner's doing: the run fails without calling it a violation.
    fn unchanged(&self) -> Result<(), RunnerError> {
        match self.spec.tree.as_ref().and_then(|tree| tree.changed()) {
            None => Ok(()),
            Some(what) => Err(RunnerError::Changed(format!(
                "the pinned runner changed during the run ({what}); nothing it answered since is used"
            ))),
        }
    }
}

impl StepRunner for AdapterRunner {
    fn start(&mut self, expected: &RunnerMetadata) -> Result<(), RunnerError> {
        self.unchanged()?;
        // Every way the process fails to start (not found, pin mismatch, the sandbox's
        // refusal on its own pipe) is the operator's setup.
        let mut adapter =
            Adapter::spawn(self.spec.clone()).map_err(|e| RunnerError::Setup(e.to_string()))?;
        adapter.text_sink = self.text_sink.take();
        let result = adapter.initialize(Some(expected)).map_err(|e| classify(&e));
        self.adapter = Some(adapter);
        result
    }

    fn step(&mut self, request: &RunnerStepRequest) -> Result<RunnerStepResult, RunnerError> {
        self.unchanged()?;
        let timeout = match self.step_cap {
            Some(cap) => self
                .spec
                .step_timeout
                .min(cap.max(Duration::from_millis(100))),
            None => self.spec.step_timeout,
        };
        let adapter = self
            .adapter
            .as_mut()
            .ok_or_else(|| RunnerError::Failed("the adapter was not started".into()))?;
        adapter.spec.step_timeout = timeout;
        let result = adapter.step_call(request).map_err(|e| classify(&e));
        // A change during the step: what answered may not be what was pinned.
        self.unchanged()?;
        result
    }

    fn take_model_steps(&mut self) -> Vec<craik_contracts::channel::ModelStepReport> {
        match self.adapter.as_mut() {
            Some(a) => a
                .events
                .iter_mut()
                .filter_map(|e| e.model_step.take())
                .collect(),
            None => Vec::new(),
        }
    }

    fn cap_step_time(&mut self, left: Option<Duration>) {
        self.step_cap = left;
    }

    fn stream_text(&mut self, sink: crate::run::TextSink) {
        match self.adapter.as_mut() {
            Some(a) => a.text_sink = Some(sink),
            None => self.text_sink = Some(sink),
        }
    }

    fn take_diagnostics(&mut self) -> Vec<String> {
        match self.adapter.as_mut() {
            Some(a) => {
                let mut out = std::mem::take(&mut a.pending_diagnostics);
                out.extend(
                    a.drain_stderr()
                        .into_iter()
                        .map(|l| format!("adapter stderr: {l}")),
                );
                out
            }
            None => Vec::new(),
        }
    }
}

/// A call error as the host records it, by its kind (never by its text, which holds what the
/// adapter wrote): an adapter answering `3 unavailable` (a live CLI or API key missing) is a
/// setup failure on the operator's side, as the protocol defines that code; a timeout is a
/// timeout; the rest is the runner's failure.
fn classify(e: &CallError) -> RunnerError {
    match e {
        CallError::Structured(err) if err.code == 3 => RunnerError::Setup(format!(
            "the adapter reported itself unavailable (error 3; its own words, as the protocol lets it before its first answer): {}",
            err.message
        )),
        CallError::Structured(_) | CallError::Violation(_) => RunnerError::Failed(e.to_string()),
        CallError::Timeout(why) => RunnerError::Timeout(why.clone()),
    }
}

impl Drop for AdapterRunner {
    fn drop(&mut self) {
        if let Some(mut adapter) = self.adapter.take() {
            let _ = adapter.shutdown(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue_22_an_adapter_starts_only_from_the_bytes_it_was_pinned_to() {
        let program = Path::new("/bin/cat").canonicalize().unwrap();
        let digest = crate::registry::digest_file(&program).unwrap();
        let mut spec = AdapterSpec::new(program.clone(), Vec::new());
        spec.confinement_required = false;
        let wrong = format!("sha256:{}", "0".repeat(64));
        spec.exec_sha256 = Some(wrong.clone());
        let err = Adapter::spawn(spec.clone()).unwrap_err();
        assert!(matches!(err, StartError::Changed { .. }), "{err}");
        let err = err.to_string();
        assert!(
            err.contains(&format!("(expected {wrong}, found {digest})")),
            "{err}"
        );
        // A setup failure by its type (never by the words of its text), shown with the setup
        // prefix once (it was doubled when the text carried it too).
        let expected = crate::runners::matrix("fixture").unwrap().runner;
        match AdapterRunner::new(spec.clone()).start(&expected) {
            Err(e @ RunnerError::Setup(_)) => {
                let shown = e.to_string();
                assert!(shown.starts_with(crate::run::SETUP_FAILED), "{shown}");
                assert_eq!(
                    shown.matches(crate::run::SETUP_FAILED).count(),
                    1,
                    "{shown}"
                );
                assert!(
                    shown.contains(&format!("(expected {wrong}, found {digest})")),
                    "{shown}"
                );
            }
            other => panic!("not a setup failure: {other:?}"),
        }
        // The right digest: started through the descriptor it hashed (an ELF program), and
        // it runs (cat echoes the line back).
        spec.exec_sha256 = Some(digest);
        let mut adapter = Adapter::spawn(spec).unwrap();
        let echoed = adapter
            .raw_exchange(b"{\"x\":1}\n", Duration::from_secs(5))
            .unwrap();
        assert_eq!(echoed, Some(b"{\"x\":1}".to_vec()));
        let (_, script) =
            open_pinned(&program, &crate::registry::digest_file(&program).unwrap()).unwrap();
        assert!(!script);
    }

    #[test]
    fn issue_22_the_home_is_hidden_around_an_install_cache() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        for d in [
            "keys",
            "runs/run_1",
            "runners/mine/bin",
            "runners/other/bin",
        ] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        std::fs::write(home.join("runners.toml"), "").unwrap();
        let cache = home.join("runners/mine/bin");
        let mut hidden = home_around(&home, std::slice::from_ref(&cache)).unwrap();
        hidden.sort();
        let real = home.canonicalize().unwrap();
        let mut expected: Vec<PathBuf> = ["keys", "runners.toml", "runners/other", "runs"]
            .iter()
            .map(|p| real.join(p))
            .collect();
        expected.sort();
        assert_eq!(hidden, expected);
    }

    #[test]
    fn issue_18_a_prefix_directly_in_home_is_not_an_installation() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        for d in [".local/bin", "tools/node/bin"] {
            std::fs::create_dir_all(home.join(d)).unwrap();
        }
        assert!(shared_user_prefix(&home.join(".local"), Some(home.clone())));
        assert!(!shared_user_prefix(
            &home.join("tools/node"),
            Some(home.clone())
        ));
        assert!(!shared_user_prefix(&home.join(".local"), None));
    }
}
